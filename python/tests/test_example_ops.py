"""The Python-defined ops of examples/triton (their references and bounds, torch-free) against
fp32 numpy emulations of the Triton kernels: the bounds hold for a correct evaluation order and
catch a planted slip."""
import sys
from pathlib import Path

import numpy as np

import assay

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "triton"))
import example_ops  # noqa: E402


def to_dtype(y32: np.ndarray, dtype: str) -> np.ndarray:
    """Rounds fp32 values to the output dtype (nearest even), back as float64."""
    if dtype == "fp16":
        return y32.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        b = y32.astype(np.float32).view(np.uint32).astype(np.uint64)
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return b.astype(np.uint32).view(np.float32).astype(np.float64)
    return y32.astype(np.float64)


def layernorm_fp32(h, bessel=False):
    x = h.inputs["X"].astype(np.float32)
    w, b = h.inputs["W"].astype(np.float32), h.inputs["B"].astype(np.float32)
    n = np.float32(x.shape[1])
    mean = x.sum(axis=1, dtype=np.float32, keepdims=True) / n
    xc = x - mean
    var = (xc * xc).sum(axis=1, dtype=np.float32, keepdims=True) / (n - np.float32(1) if bessel else n)
    rstd = np.float32(1) / np.sqrt(var + np.float32(h.case["params"]["eps"]))
    y = xc * rstd * w[None, :] + b[None, :]
    return {"Y": to_dtype(y, h.case["params"]["dtype"]), "Mean": mean[:, 0].astype(np.float64),
            "Rstd": rstd[:, 0].astype(np.float64)}


def test_layernorm_bound_holds_for_fp32_two_pass_and_catches_bessel():
    caught = 0
    for i in range(40):
        c = assay.generate("py_layernorm", i, seed=6, max_dim=512)
        h = assay.host_evaluate(c)
        assert h.check(layernorm_fp32(h)) == [], (c["params"], h.check(layernorm_fp32(h)))
        caught += bool(c["params"]["n"] > 1 and h.check(layernorm_fp32(h, bessel=True)))
    assert caught > 10


def test_matmul_dot_bound_holds_for_fp32_and_its_contract_keeps_k_on_the_tile():
    name = assay.variant("py_matmul", lambda t, p: None, name="cpu_tiled", contract=example_ops.MATMUL_CONTRACT)
    for i in range(20):
        c = assay.generate("py_matmul", i, variant=name, seed=2, max_dim=256)
        assert c["params"]["k"] % example_ops.BLOCK_K == 0
        h = assay.host_evaluate(c, name)
        a, bm = h.inputs["A"].astype(np.float32), h.inputs["B"].astype(np.float32)
        acc = np.zeros((a.shape[0], bm.shape[1]), np.float32)
        for k0 in range(0, a.shape[1], example_ops.BLOCK_K):  # tile by tile, as the kernel
            acc = acc + a[:, k0:k0 + example_ops.BLOCK_K] @ bm[k0:k0 + example_ops.BLOCK_K, :]
        assert h.check({"C": acc}) == [], c["params"]
        short = a[:, :-example_ops.BLOCK_K] @ bm[:-example_ops.BLOCK_K, :]  # a K tail dropped
        if c["params"]["k"] > example_ops.BLOCK_K:
            assert h.check({"C": short}), c["params"]
