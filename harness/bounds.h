// Rounding-error bounds. Each formula cites its source.
// A bound is per element: tol = rel_out*|ref| + rel_mag*mag + floor, where
// `mag` is the magnitude term returned beside the reference (|A||B| for GEMM).
#pragma once

#include <cstdint>

#include "harness/dtype.h"

namespace assay {

/// gamma_n(u) = n*u / (1 - n*u)  (Higham, Accuracy and Stability, 2nd ed., Lemma 3.1);
/// +Inf when n*u >= 1 (no bound).
double gamma_n(int64_t n, double u);

struct ElementBound {
  double rel_out = 0;  ///< coefficient of |ref|
  double rel_mag = 0;  ///< coefficient of the magnitude term
  double floor = 0;    ///< absolute floor (underflow, flush-to-zero)
  double tol(double ref_abs, double mag) const { return rel_out * ref_abs + rel_mag * mag + floor; }
};

/// What the kernel promises about a GEMM: input, accumulation and output types.
struct GemmBoundModel {
  DType in = DType::kF32;
  DType acc = DType::kF32;
  DType out = DType::kF32;
  int64_t k = 0;
  double alpha_abs = 1;   ///< |alpha|, scales the accumulated underflow floor
  bool has_beta = false;  ///< beta != 0 (one more product and sum)
  DType ref_acc = DType::kF64;  ///< the reference's own arithmetic (its error is added)
};

/// Hard ceiling for one element of C = alpha*op(A)op(B) + beta*C computed in
/// any summation order with rounding to nearest in `acc` (FMA or not):
///   |c^ - c| <= gamma_{k+2}(u_acc) * mag  + u_out*|ref| (if out is narrower than acc)
///             + floor,
/// from Higham (3.5) for a dot product of length k in any order, plus one
/// rounding for alpha*() and one for + beta*c (Lemma 3.3 composes the
/// (1+delta) factors into theta_{k+2}). The floor covers underflow with
/// flush-to-zero: each of the at most 2k+3 operations loses at most
/// min_normal(acc), scaled by |alpha| for the 2k inside the dot; plus half a
/// subnormal spacing of `out` for the final rounding. The reference's own
/// error gamma_{k+2}(u_ref)*mag is added so the ceiling is for |c^ - ref|.
/// Second-order factors (1+u_out), (1+gamma) keep it a hard bound (bounds.cpp).
ElementBound gemm_ceiling(const GemmBoundModel& m);

/// True when every partial sum of an integer-valued GEMM with |a|,|b| <=
/// int_range, |alpha|,|beta|,|c| small is exactly representable in `acc`
/// (so any summation order gives the exact result): k*int_range^2*|alpha| +
/// |beta|*|c| < 2^(p) with p the precision of `acc` (24 for fp32); for an
/// integer `acc`, < max_finite + 1. False unless |alpha|, |beta| (and |c| when
/// beta != 0) are integers.
bool gemm_exact_tier_holds(DType acc, int64_t k, int64_t int_range, double alpha_abs, double beta_abs,
                           double c_abs_max);

}  // namespace assay
