// The tolerances of the GEMM-family device references (gemm_f64_batch.cu: gemm_batched,
// gemm_fp8, gemm_int8; gemm_f64.cu: gemm_tc), one output element each, as ASSAY_HD functions:
// the kernels loop over them, and the host bounds (properties/gemm_batched.cpp, gemm_quant.cpp,
// gemm_tc.cpp) and a CPU test run the very same functions, so a device tolerance has the host's
// bits. The formulas are derived in the ops' headers; dot_element_tol and int8_dequant_tol live
// in harness/bound_core.h. No CUDA header.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/bound_core.h"
#include "harness/host_device.h"
#include "harness/ulp_core.h"

namespace assay::device_ref {

/// A dot-product output: the reference and its magnitude sum scaled by `scale` (fp8: scale_a *
/// scale_b, formed in double as the host reference does; 1 elsewhere, exact), then the
/// ceiling `b` with the store rounding and overflow limit of dot_element_tol.
struct F64DotTol {
  ElementBound b;
  double scale = 1;
  double top = HUGE_VAL;
  StoreRounding store;
};

/// ref and mag of one element in place: the scaled reference, and its tolerance in mag (a NaN
/// tolerance as +Inf, as the engine's host path treats one).
ASSAY_HD inline void f64_dot_tol_element(const F64DotTol& t, double* ref, double* mag) {
  const double r = *ref * t.scale;
  const double m = *mag * ::fabs(t.scale);
  const double tol = dot_element_tol(t.b, r, m, t.top, t.store);
  *ref = r;
  *mag = tol != tol ? HUGE_VAL : tol;
}

/// The host bounds' form of it: the tolerance of every element of a reference that is scaled
/// already (t.scale 1), from its magnitude sums `mag` (host only).
inline std::vector<double> f64_dot_tolerances(const F64DotTol& t, const std::vector<double>& ref,
                                              std::vector<double> mag) {
  for (size_t l = 0; l < ref.size() && l < mag.size(); ++l) {
    double r = ref[l];
    f64_dot_tol_element(t, &r, &mag[l]);
  }
  return mag;
}

/// gemm_tc's D (properties/gemm_tc.cpp derives it): the fp32 ceiling e32 = b(|ref|, mag), plus a
/// declared product_to_out order's terms `prod` and the alpha-scaled operand slack, then the
/// store's rounding at |ref| + e32. +Inf (unchecked) where the output may overflow (|ref| + tol
/// reaches `top`), or an fp32 partial sum may (mag or dmag, the magnitude without alpha and
/// beta, reaches `top32`), where mag is not finite, or where alpha scales an operand to FLT_MAX.
struct F64TcTol {
  ElementBound b, prod;
  double top = HUGE_VAL;    ///< the output's largest finite value
  double top32 = HUGE_VAL;  ///< half of fp32's largest
  StoreRounding store;
};

ASSAY_HD inline double f64_tc_element_tol(const F64TcTol& t, double ref_abs, double mag, double dmag, double slack,
                                          bool may_overflow) {
  const double e32 = t.b.tol(ref_abs, mag) + t.prod.rel_mag * mag + t.prod.floor + slack;
  const double tol = e32 + t.store(ref_abs + e32);
  return ref_abs + tol >= t.top || mag >= t.top32 || dmag >= t.top32 || !finite_hd(mag) || may_overflow ? HUGE_VAL
                                                                                                      : tol;
}

/// gemm_int8's dequantised output D = sa[i] sw[j] acc + bias[j] from the exact accumulator:
/// fp32 scales and bias (bias null: none), dense 1-D.
struct F64Int8Dequant {
  const float* sa = nullptr;
  const float* sw = nullptr;
  const float* bias = nullptr;
  StoreRounding store;
  double top = HUGE_VAL;
};

/// D's reference and tolerance at (i, j), in the host reference's order ((sa sw) acc, then + bias).
ASSAY_HD inline void f64_int8_dequant_element(const F64Int8Dequant& q, int64_t i, int64_t j, double acc, double* d_ref,
                                              double* d_tol) {
  const double bj = q.bias != nullptr ? static_cast<double>(q.bias[j]) : 0.0;
  const double x = static_cast<double>(q.sa[i]) * static_cast<double>(q.sw[j]) * acc;
  const double r = x + bj;
  *d_ref = r;
  *d_tol = int8_dequant_tol(::fabs(x), ::fabs(bj), ::fabs(r), acc == 0, q.store, q.top);
}

}  // namespace assay::device_ref
