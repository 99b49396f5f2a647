"""pytest examples/triton: the Triton layer norm forward against the Python-defined op
py_layernorm, whose bound is a Python callback (derivation in example_ops.py)."""
from pathlib import Path

import assay
from layernorm import launch

CORPUS = str(Path(__file__).parent / "corpora")

test_layernorm = assay.check("py_layernorm", assay.Contract(), name="triton_fwd", time=30, corpus=CORPUS)(launch)
