"""Matrix multiplication in Triton, in the style of the Triton tutorial (03-matrix-multiplication),
fuzzed by assay as a variant of a Python-defined op, `py_matmul` (C = A @ B, fp32).

The kernel has a tile contract: with EVEN_K it loads K tiles without a mask, so it is only
correct for K a multiple of BLOCK_K (32). The variant declares it (Contract multiple_of k 32),
so assay draws only such K, and still aims at the M and N tile edges (64), where the masked
stores must hold. One fixed block configuration: every shape shares a handful of compiled
specialisations (dtype is fp32 only; sizes and strides are not specialised on).

fp32 inputs take the IEEE path of tl.dot (input_precision="ieee": FMA, round to nearest), which
the dot-product bound gamma_{k+2}(2^-24) |A||B| of assay.bounds.dot covers; the default TF32
path would not (its inputs are rounded to 10 bits).
"""
import torch
import triton
import triton.language as tl

from example_ops import BLOCK_K, BLOCK_M, BLOCK_N, MATMUL_CONTRACT as CONTRACT  # noqa: F401 - registers py_matmul

@triton.jit(do_not_specialize=["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
                               "stride_cn"])
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:  # the tile contract: K % BLOCK_K == 0, no K mask
            a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)
            b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, even_k: bool = True) -> None:
    m, k = a.shape
    _, n = b.shape
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, EVEN_K=even_k, num_warps=4)


def launch(t, p):
    matmul(t["A"], t["B"], t["C"])
