"""Layer norm forward in Triton, in the style of the Triton tutorial (05-layer-norm), fuzzed by
assay as a variant of the Python-defined op py_layernorm (example_ops.py: declaration, reference and
the bound's derivation). A few fixed block sizes keep the compiled specialisations few.
"""
import torch  # noqa: F401 - the launcher receives torch tensors
import triton
import triton.language as tl

import example_ops  # noqa: F401 - registers py_layernorm

@triton.jit(do_not_specialize=["stride", "y_stride", "N", "eps"])
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, y_stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    X += row * stride
    Y += row * y_stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask).to(tl.float32)
        b = tl.load(B + cols, mask=mask).to(tl.float32)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y.to(Y.dtype.element_ty), mask=mask)


def layer_norm(x, w, b, y, mean, rstd, eps):
    rows, n = x.shape
    block = min(4096, max(256, triton.next_power_of_2(n)))  # a few fixed block sizes: few compiles
    warps = min(max(block // 256, 1), 8)
    layer_norm_fwd_kernel[(rows,)](x, y, w, b, mean, rstd, x.stride(0), y.stride(0), n, eps, BLOCK_SIZE=block,
                                   num_warps=warps)


def launch(t, p):
    layer_norm(t["X"], t["W"], t["B"], t["Y"], t["Mean"], t["Rstd"], p["eps"])
