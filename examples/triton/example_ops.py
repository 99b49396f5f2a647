"""The Python-defined ops of the Triton examples: declarations, fp64 references and bounds only
(numpy, no torch), so the CPU tests can check the bounds against fp32 emulations of the kernels.

py_matmul: C = A @ B (fp32), the dot-product bound of assay.bounds.dot.

py_layernorm: Y = (X - mean) * rstd * W + B per row, with the saved statistics Mean and Rstd
(fp32), rstd = 1 / sqrt(var + eps). Its bound is a Python callback, derived for the Triton
tutorial's two-pass algorithm in fp32 (u = 2^-24, gamma_n = n u / (1 - n u), [H] = Higham,
Accuracy and Stability, 2nd ed.), per row with A = mean|x|, xc = x - mean, var = mean(xc^2)
(exact, of the rounded inputs):
  mean: e_mu = gamma_{n+1} A                      (n - 1 sums and the division, [H] (4.4))
  xc^_i = fl(x_i - mean^): |xc^_i - xc_i| <= d_i = e_mu (1 + u) + u |xc_i|
  (1/n) sum xc^_i^2 - var = (2/n) sum xc_i d_i + (1/n) sum d_i^2 (sum xc_i = 0), so with
  e' = e_mu (1 + u), M = max |xc|:  E1 = 2 (e' sqrt(var) + u var) + (e' + u M)^2 (Cauchy-Schwarz)
  var^: E_var = gamma_{n+1} (var + E1) + E1        (squares, n - 1 sums, division)
  var^ + eps rounded: t = (E_var + u (var + eps + E_var)) / (var + eps)
  rstd^ = 1 / sqrt(.): sqrt (<= 1 ulp, approximate or not) then the division (<= 2 ulp), 8u with
  margin; (1 + t)^(-1/2) errs by <= t / (2 (1 - t)):  e_rstd = rstd rho, rho = (1 + t / (2 (1 - t))) (1 + 8u) - 1;
  where t >= 1 only rstd^ <= (1 + 8u) / sqrt(eps (1 - u)) = rstd_hi is known (var^ >= 0): e_rstd = rstd_hi
  y_i = fl(fl(xc^_i rstd^) w_i) + b_i rounded: (1 + 4u) [|w_i| (d_i (rstd + e_rstd) + |xc_i| e_rstd)
        + 2u |w_i xc_i rstd| + u (|y_i| + |b_i|)] + min_normal floors, + the store into fp16/bf16
        (u_out (|y| + tol), + half the smallest subnormal spacing of the output).
"""
import numpy as np

import assay

# ---- py_matmul ------------------------------------------------------------------------------------
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


def matmul_reference(p, t):
    """C = A @ B in fp64, with the magnitude |A| @ |B| the dot bound needs."""
    a, b = t["A"], t["B"]
    return a @ b, np.abs(a) @ np.abs(b)


MATMUL = assay.Op(
    "py_matmul",
    description="C = A @ B (fp32), declared from Python",
    params=[assay.extent("m", 1, 512, aim=[BLOCK_M]), assay.extent("n", 1, 512, aim=[BLOCK_N]),
            assay.extent("k", 1, 1024, aim=[BLOCK_K]), assay.dtype("dtype", ["fp32"])],
    tensors=[assay.tensor("A", ["m", "k"], classes=["normal", "uniform", "same_sign", "small_int"]),
             assay.tensor("B", ["k", "n"], classes=["normal", "uniform", "same_sign", "small_int"]),
             assay.tensor("C", ["m", "n"], role="out")],
    reference=matmul_reference,
    bound=assay.bounds.dot("k"),
)

MATMUL_CONTRACT = assay.Contract(multiple_of={"k": BLOCK_K}, tiles={"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N,
                                                             "BLOCK_K": BLOCK_K})



# ---- py_layernorm ---------------------------------------------------------------------------------
U = 2.0 ** -24
MIN_NORMAL = 2.0 ** -126
U_OUT = {"fp32": 0.0, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
HALF_SUBNORMAL = {"fp32": 2.0 ** -150, "fp16": 2.0 ** -25, "bf16": 2.0 ** -134}  # half the smallest spacing


def gamma(n):
    return n * U / (1 - n * U)


def layernorm_reference(p, t):
    x, w, b = t["X"], t["W"], t["B"]
    mu = x.mean(axis=1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(var + p["eps"])
    return {"Y": xc * rstd * w[None, :] + b[None, :], "Mean": mu[:, 0], "Rstd": rstd[:, 0]}


def layernorm_bound(p, t, refs, mags, arith):
    x, w, b = t["X"], t["W"], t["B"]
    n = x.shape[1]
    eps = p["eps"]
    mu = x.mean(axis=1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    e_mu = gamma(n + 1) * np.abs(x).mean(axis=1, keepdims=True)
    e1 = e_mu * (1 + U)
    big_m = np.abs(xc).max(axis=1, keepdims=True)
    E1 = 2 * (e1 * np.sqrt(var) + U * var) + (e1 + U * big_m) ** 2
    e_var = gamma(n + 1) * (var + E1) + E1
    tt = (e_var + U * (var + eps + e_var)) / (var + eps)
    # var^ >= 0, so rstd^ <= rstd_hi always; where tt >= 1 that is all that is known.
    rstd_hi = (1 + 8 * U) / np.sqrt(eps * (1 - U))
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (1 + tt / (2 * (1 - tt))) * (1 + 8 * U) - 1
    e_rstd = np.where(tt < 1, rstd * rho, rstd_hi)
    d = e1 + U * np.abs(xc)
    y = refs["Y"]
    aw = np.abs(w)[None, :]
    ty = (1 + 4 * U) * (aw * (d * (rstd + e_rstd) + np.abs(xc) * e_rstd) + 2 * U * aw * np.abs(xc) * rstd
                        + U * (np.abs(y) + np.abs(b)[None, :])) + 4 * MIN_NORMAL
    uo = U_OUT[p["dtype"]]
    ty = ty + uo * (np.abs(y) + ty) * (1 + uo) + HALF_SUBNORMAL[p["dtype"]]
    return {"Y": ty, "Mean": e_mu[:, 0] + MIN_NORMAL, "Rstd": e_rstd[:, 0] + MIN_NORMAL}


LAYERNORM = assay.Op(
    "py_layernorm",
    description="layer norm forward with saved Mean and Rstd, declared from Python",
    params=[assay.dtype("dtype", ["fp32", "fp16", "bf16"]), assay.extent("n", 1, 8192, aim=[16, 256, 1024]),
            assay.extent("rows", 1, 2048, aim=[4, 32], cap=(1 << 20, ["n"])), assay.real("eps", [1e-5, 1e-6])],
    tensors=[assay.tensor("X", ["rows", "n"], classes=["normal", "uniform", "same_sign", "small_int", "mean_spread"]),
             assay.tensor("W", ["n"], classes=["normal", "uniform"]),
             assay.tensor("B", ["n"], classes=["normal", "uniform"]),
             assay.tensor("Y", ["rows", "n"], role="out"),
             assay.tensor("Mean", ["rows"], role="out", dtype="fp32"),
             assay.tensor("Rstd", ["rows"], role="out", dtype="fp32")],
    reference=layernorm_reference,
    bound=layernorm_bound,
)
