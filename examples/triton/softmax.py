"""Fused softmax in Triton, in the style of the Triton tutorial (02-fused-softmax), fuzzed by
assay as a variant of its built-in `softmax` op (tensors X -> Y, [rows, n] with row strides;
params dtype, log, and the op's own relation/masking knobs, which the kernel need not know).

One program per row, the whole row in registers: BLOCK is the next power of two of n, but at
least 256, so all short rows share one compiled specialisation (the compile-cost grouping of
python/README.md); row strides and sizes are not specialised on.

`softmax_dropped_tail` is the planted bug: its load mask stops one column short, so the last
column never enters the max or the sum (a classic off-by-one in a hand-written mask).
"""
import torch
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["x_row_stride", "y_row_stride", "n_cols"])
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, LOG: tl.constexpr, BLOCK: tl.constexpr,
                   DROP_LAST: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    if DROP_LAST:
        load_mask = cols < n_cols - 1  # planted bug: the last column is never read
    else:
        load_mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=load_mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    den = tl.sum(num, axis=0)
    if LOG:
        y = z - tl.log(den)
    else:
        y = num / den
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x: torch.Tensor, y: torch.Tensor, log: bool = False, drop_last: bool = False) -> None:
    """y = softmax(x) (log-softmax with log=True) over the last dimension of 2-D tensors."""
    rows, n = x.shape
    block = max(256, triton.next_power_of_2(n))
    warps = 4 if block <= 2048 else (8 if block <= 8192 else 16)
    softmax_kernel[(rows,)](y, x, x.stride(0), y.stride(0), n, LOG=log, BLOCK=block, DROP_LAST=drop_last,
                            num_warps=warps)


def launch(t, p):
    """assay launcher: tensors by name (torch views of assay's guarded buffers), params by name."""
    softmax(t["X"], t["Y"], log=bool(p.get("log", False)))


def launch_dropped_tail(t, p):
    softmax(t["X"], t["Y"], log=bool(p.get("log", False)), drop_last=True)
