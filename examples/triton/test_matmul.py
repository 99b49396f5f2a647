"""pytest examples/triton: the Triton matmul against the Python-defined op py_matmul."""
from pathlib import Path

import assay
from matmul import CONTRACT, launch

CORPUS = str(Path(__file__).parent / "corpora")

# Fuzzed for 30 s inside its tile contract (k % 32 == 0); stored failures replay as their own tests.
test_matmul = assay.check("py_matmul", CONTRACT, name="triton_tiled", time=30, corpus=CORPUS)(launch)


def test_contract_keeps_k_on_the_tile():
    """Cases drawn for the variant respect its contract (host only: no GPU needed)."""
    assay.variant("py_matmul", launch, name="triton_tiled", contract=CONTRACT)
    for i in range(50):
        c = assay.generate("py_matmul", i, variant="triton_tiled", seed=3)
        assert c["params"]["k"] % 32 == 0, c["params"]
