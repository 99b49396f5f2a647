// The tolerances of the GEMM-family device references (gemm_f64_batch.cu: gemm_batched,
// gemm_fp8, gemm_int8; gemm_f64.cu: gemm_tc, gemm_bias_act), one output element each, as ASSAY_HD functions:
// the kernels loop over them, and the host bounds (properties/gemm_batched.cpp, gemm_quant.cpp,
// gemm_tc.cpp, gemm_epilogue.cpp) and a CPU test run the very same functions, so a device tolerance has the host's
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

/// A stored value's tolerance: the fp32 result's error e plus the store's rounding at |ref| + e;
/// +Inf where |ref| + tol reaches `top`, the stored type's largest finite value.
ASSAY_HD inline double f64_stored_tol(double ref_abs, double e, const StoreRounding& store, double top) {
  const double tol = e + store(ref_abs + e);
  return ref_abs + tol >= top ? HUGE_VAL : tol;
}

/// The evaluation error of the tanh-form GELU in fp32 at |x|, |y| (properties/gemm_epilogue.cpp
/// derives it), with tanh_dt the error of the tanhf in use; the bound's own double arithmetic
/// (2^-20) and a few fp32 subnormal spacings on top.
ASSAY_HD inline double f64_gelu_eval_error(double x_abs, double y_abs, double tanh_dt) {
  constexpr double kU = 0x1p-24;
  return (0.5 * x_abs * (tanh_dt + kU) + kU * y_abs) * (1 + 0x1p-20) + 4 * 0x1p-149;
}

/// gemm_bias_act's Z = op(A) op(B) + bias and Y = act(Z) (properties/gemm_epilogue.cpp derives
/// them): the fp32 sum's ceiling over k + 1 terms, a declared rounding of the sum to the stored
/// type before the bias (round_sum), GELU's Lipschitz constant and evaluation error, each
/// output's store.
struct F64EpiTol {
  ElementBound ceil;
  bool round_sum = false;
  double u_dt = 0, half_sub = 0;  ///< the stored type's unit roundoff, half its smallest subnormal
  double top = HUGE_VAL;          ///< the stored type's largest finite value
  StoreRounding store;
  bool gelu = false;
  double lipschitz = 1;
  double tanh_dt = 0;
};

/// Y's and Z's tolerances at z, y = act(z) and mag = |op(A)||op(B)| + |bias|.
ASSAY_HD inline void f64_epi_element_tol(const F64EpiTol& t, double z, double y, double mag, double* tol_y,
                                         double* tol_z) {
  const double az = ::fabs(z), ay = ::fabs(y);
  double e32 = t.ceil.tol(az, mag);
  if (t.round_sum && mag + e32 >= t.top) {
    // The rounded sum may pass the stored type's largest finite value (|s^| <= mag + e32): it is
    // then +-Inf, and GELU's x Phi(x) makes Y NaN at -Inf. That order allows any value.
    *tol_y = *tol_z = HUGE_VAL;
    return;
  }
  if (t.round_sum) e32 += (t.u_dt * (mag + e32) + t.half_sub) * (1 + 0x1p-20);
  *tol_z = f64_stored_tol(az, e32, t.store, t.top);
  const double ey = t.gelu ? t.lipschitz * e32 + f64_gelu_eval_error(az + e32, ay + t.lipschitz * e32, t.tanh_dt) : e32;
  *tol_y = f64_stored_tol(ay, ey, t.store, t.top);
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
