// The scalar arithmetic of the bounds that host code and device code both run
// (ASSAY_HD): the element bound, gamma_n, and the softmax-family terms. The host
// functions of harness/bounds.h (softmax_bounds, log_softmax_bounds) are thin
// wrappers over these, so a device reference that computes its tolerances beside
// its values (references/device/) runs the very same formulas as the host path.
// Everything here is plain doubles: the dtype lookups (unit roundoff, min normal)
// are made on the host and passed in (SoftmaxScalars). No CUDA header needed.
// Formulas and sources: harness/bounds.h.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/host_device.h"

namespace assay {

/// Default lambda of the expected level. [HM] observe lambda = 1 is rarely exceeded by one
/// inner product; a campaign takes the max over ~10^6 elements of C, whose Gaussian-like tail
/// reaches ~5 sigma. Measured (tests/harness/bounds_ext_test.cpp, fp32 loops, plain / FMA /
/// 32-wide tiles, N(0,1), same-sign and cancelling data, k up to 8192): max error = 0.27 of the
/// lambda = 3 level over ~1300 dots, i.e. sigma ~ 0.1 of it, ~0.5 of it at 5 sigma.
inline constexpr double kDefaultLambda = 3.0;

/// 2^-21.41: the absolute error of __logf on [0.5, 2] as stated in [CUDA] (bounds.h).
inline constexpr double kLogfFastAbs = 0x1.8157d9d08a78dp-22;

struct ElementBound {
  double rel_out = 0;  ///< coefficient of |ref|
  double rel_mag = 0;  ///< coefficient of the magnitude term
  double floor = 0;    ///< absolute floor (underflow, flush-to-zero; for row-wise ops built
                       ///< per row, also the row's absolute terms, see each function)
  ASSAY_HD double tol(double ref_abs, double mag) const { return rel_out * ref_abs + rel_mag * mag + floor; }
};

/// GEMM with an operand scaled by alpha before the products (properties/gemm_common.h
/// AlphaScaledOperands, which derives both; the GEMM device reference runs them too): an output
/// whose row of op(A) or column of op(B) holds an element of magnitude max_x may be Inf or NaN
/// where |alpha| > 1 scales it to FLT_MAX ...
ASSAY_HD inline bool alpha_scaled_overflows(double alpha_abs, double max_x) {
  return alpha_abs > 1 && alpha_abs * max_x >= 0x1.fffffep127;  // FLT_MAX
}

/// ... and alpha x rounded on fp32's subnormal grid adds half the smallest subnormal per
/// product, times the larger of the row's and the column's sum of magnitudes (2^-20 over it for
/// that sum's own rounding).
ASSAY_HD inline double alpha_scaled_slack(double sum_x) {
  return 0.5 * 0x1p-149 * sum_x * (1 + 0x1p-20);  // 0x1p-149: FLT_TRUE_MIN
}

/// True for a finite x (x - x is NaN for +-Inf and NaN); host and device alike.
ASSAY_HD inline bool finite_hd(double x) {
  return x - x == 0;
}

/// gamma_n(u) = n*u / (1 - n*u)  (Higham, Accuracy and Stability, 2nd ed., Lemma 3.1);
/// +Inf when n*u >= 1 (no bound).
ASSAY_HD inline double gamma_n(int64_t n, double u) {
  if (n <= 0 || !(u > 0)) return 0;  // no rounding at all
  const double nu = static_cast<double>(n) * u;
  if (!(nu < 1)) return HUGE_VAL;
  return nu / (1 - nu);
}

/// Probabilistic gamma~_n(lambda) = exp(lambda*sqrt(n)*u + n*u^2/(1-u)) - 1
/// ([HM] sec. 2): |theta_n| <= gamma~_n with probability >= 1 - 2exp(-lambda^2(1-u)^2/2)
/// per product of n independent mean-zero roundings. 0 for n <= 0; +Inf when the
/// deterministic gamma_n is infinite (the model is not meant for n*u >= 1).
ASSAY_HD inline double gamma_tilde(int64_t n, double u, double lambda) {
  if (n <= 0 || !(u > 0)) return 0;
  if (!finite_hd(gamma_n(n, u))) return HUGE_VAL;
  const double nd = static_cast<double>(n);
  return ::expm1(lambda * ::sqrt(nd) * u + nd * u * u / (1 - u));
}

/// Kernel (u) and reference (u_ref) gamma for a path of n roundings: hard or expected.
ASSAY_HD inline double g_level(int64_t n, double u, double lambda, bool expected) {
  const double g = gamma_n(n, u);
  if (!expected) return g;
  const double e = gamma_tilde(n, u, lambda);
  return g < e ? g : e;  // std::min(e, g), NaN included
}

/// The tolerance of one dot-product output element under the ceiling `b` (mag = sum |a||b|),
/// with the store's rounding `store(|ref| + e32)` (0 for an fp32 output): 0 where the
/// reference is not finite (the output must match it exactly), +Inf where |ref| + tol reaches
/// `top`, the output dtype's largest finite value (the stored value may overflow there).
template <typename Store>
ASSAY_HD double dot_element_tol(const ElementBound& b, double ref, double mag, double top, Store store) {
  const double a = ::fabs(ref);
  const double e32 = b.tol(a, mag);
  const double tol = e32 + store(a + e32);
  return !finite_hd(ref) ? 0.0 : a + tol >= top ? HUGE_VAL : tol;
}

/// gemm_int8's dequantised output (properties/gemm_quant.cpp derives it): x = |sa sw acc|, the
/// int32 -> fp32 conversion, the two scalings and the bias add in fp32 (u = 2^-24, 4 roundings
/// that may flush), the fp64 reference's own 2 roundings, then the store's rounding at
/// |ref| + e; 0 where acc == 0 (D = bias exactly), +Inf where |ref| + tol reaches `top`.
template <typename Store>
ASSAY_HD double int8_dequant_tol(double x, double bias_abs, double ref_abs, bool acc_zero, Store store, double top) {
  const double u = 0x1p-24, g3 = gamma_n(3, u), min_normal = 0x1p-126;
  const double e32 = acc_zero ? 0.0 : g3 * x + u * (x * (1 + g3) + bias_abs) + 4 * min_normal;
  const double e64 = acc_zero ? 0.0 : ::ldexp(x + bias_abs, -52);
  const double tol = e32 + e64 + store(ref_abs + e32 + e64);
  return ref_abs + tol >= top ? HUGE_VAL : tol;
}

// ---- softmax family ------------------------------------------------------------------------------

/// The numbers of one floating-point arithmetic a softmax bound reads.
struct SoftmaxArith {
  double u = 0;              ///< unit roundoff (0: exact arithmetic)
  double min_normal = 0;     ///< smallest normal
  double min_subnormal = 0;  ///< smallest subnormal
};

/// A SoftmaxModel (harness/bounds.h) with its dtypes looked up: softmax_scalars() builds it.
struct SoftmaxScalars {
  SoftmaxArith acc;          ///< the kernel's arithmetic
  SoftmaxArith ref;          ///< the reference's (fp64)
  double out_round = 0;      ///< u_out where the output is coarser than acc, else 0
  double out_floor = 0;      ///< half the subnormal spacing of the output (its gradual underflow)
  int64_t n = 0;             ///< row length
  double lambda = kDefaultLambda;
  bool fast = false;         ///< fp32 fast-math intrinsics (__expf, __logf, __fdividef)
  int64_t rescales = 0;      ///< online-softmax rescalings on one term's path
};

/// Softmax analysis at unit roundoff a.u (bounds.h, softmax_bounds).
struct SoftTerms {
  double kappa = 1, a = 0, b = 0, r_z = 0, c_div = 0;
  bool ok = true;
};

ASSAY_HD inline SoftTerms softmax_terms(const SoftmaxScalars& s, const SoftmaxArith& ar, bool fast, int64_t rescales,
                                        double D, bool expected) {
  SoftTerms t;
  const double u = ar.u;
  if (!(u > 0)) return t;
  const double R = static_cast<double>(rescales > 0 ? rescales : 0);
  // expf: 2 ulp vs correctly rounded, +0.5 for the rounding: 2.5 ulp <= 5u relative.
  // __expf: 2 + floor(1.173|x|) ulp: the same constant part and 1.173*2u per unit of |x| [CUDA].
  const double c0 = 5 * u;
  const double c1 = fast ? 1.173 * 2 * u : 0.0;
  t.a = (1 + R) * c0 + R * u;                   // each rescale: one more exp and one multiply
  t.b = (c1 + u) * (1 + u);                     // + u|t| from rounding x - max (telescoped over rescales)
  const double big_t = -::log(ar.min_subnormal);  // beyond it exp underflows to 0 (a floor term)
  t.kappa = ::exp(t.a + t.b * big_t);
  const int64_t n = s.n > 1 ? s.n : 1;
  const double g = g_level(n - 1, u, s.lambda, expected);
  const double phi = t.kappa * (t.a + t.b * D);
  t.r_z = phi * (1 + g) + g + static_cast<double>(n) * ar.min_normal * (1 + g);
  t.c_div = fast ? 5 * u : 2 * u;  // __fdividef 2 ulp; else x/y or rcp + mul
  t.ok = finite_hd(t.r_z) && t.r_z < 1;
  return t;
}

/// Adds the output rounding to a kernel+reference bound: u_out |c~| <= u_out (|ref| + err),
/// so the rest scales by 1 + u_out (as in gemm_ceiling).
ASSAY_HD inline ElementBound softmax_with_output(const SoftmaxScalars& s, double rel, double rel_mag, double floor) {
  const double carry = 1 + s.out_round;
  ElementBound b;
  b.rel_out = s.out_round + carry * rel;
  b.rel_mag = carry * rel_mag;
  b.floor = carry * floor + s.out_floor;
  return b;
}

ASSAY_HD inline ElementBound softmax_inf_bound() {
  return {HUGE_VAL, HUGE_VAL, HUGE_VAL};
}

/// One level (ceiling, or expected) of softmax_bounds (bounds.h) for a row whose
/// D = sum_j y_j |x_j - max| is `weighted_dev`.
ASSAY_HD inline ElementBound softmax_level(const SoftmaxScalars& s, double weighted_dev, bool expected) {
  const double ref_slack = 1 + gamma_n(s.n + 8, s.ref.u);  // the reference's D and y|t| are fp64
  const double D = weighted_dev * ref_slack;
  const SoftTerms k = softmax_terms(s, s.acc, s.fast, s.rescales, D, expected);
  const SoftTerms r = softmax_terms(s, s.ref, false, 0, D, false);
  if (!k.ok || !r.ok) return softmax_inf_bound();
  double rel = 0, rel_mag = 0, floor = 0;
  const SoftTerms* parts[2] = {&k, &r};
  const double mins[2] = {s.acc.min_normal, s.ref.min_normal};
  for (int i = 0; i < 2; ++i) {
    const SoftTerms& t = *parts[i];
    if (t.a == 0 && t.b == 0 && t.r_z == 0) continue;  // exact arithmetic
    const double K = (1 + t.c_div) / (1 - t.r_z);
    rel += (K - 1) + K * t.kappa * t.a;
    rel_mag += K * t.kappa * t.b;
    floor += (K + 1) * mins[i];
  }
  return softmax_with_output(s, rel, rel_mag * ref_slack, floor);
}

/// One level of log_softmax_bounds (bounds.h) for a row with D = `weighted_dev` and
/// L = log sum_j exp(x_j - max) = `log_sum_exp`.
ASSAY_HD inline ElementBound log_softmax_level(const SoftmaxScalars& s, double weighted_dev, double log_sum_exp,
                                               bool expected) {
  const double ref_slack = 1 + gamma_n(s.n + 8, s.ref.u);
  const double D = weighted_dev * ref_slack;
  const double L = (log_sum_exp < 0 ? 0.0 : log_sum_exp) * ref_slack;  // std::max(L, 0)
  double rel = 0, rel_mag = 0, floor = 0;
  for (int which = 0; which < 2; ++which) {
    const bool kernel = which == 0;
    const SoftmaxArith& ar = kernel ? s.acc : s.ref;
    const double uu = ar.u;
    if (!(uu > 0)) continue;
    const SoftTerms t =
        softmax_terms(s, ar, kernel && s.fast, kernel ? s.rescales : 0, D, kernel && expected);
    if (!t.ok) return softmax_inf_bound();
    const double l_z = -::log1p(-t.r_z);  // |log Z^ - log Z|
    const double lh = L + l_z;
    // logf 1 ulp (+0.5): 3u relative; __logf: 2^-21.41 absolute on [0.5, 2] (L <= ln 2), else 3 ulp.
    double e_log = 3 * uu * lh;
    if (kernel && s.fast) {
      const double x = kLogfFastAbs + uu * lh, y = 7 * uu * lh;
      e_log = x < y ? y : x;  // std::max(x, y), NaN included
    }
    // z^ = fl(t^ - L^): relative u of the result: u|z^| <= u(|z| + err), so err scales by 1/(1-u).
    const double c = 1 / (1 - uu);
    rel += uu * c;
    rel_mag += uu * c;  // x - max rounded: u|t_i|
    floor += c * (l_z + e_log) + ar.min_normal;
  }
  return softmax_with_output(s, rel, rel_mag * ref_slack, floor);
}

/// narrow_softmax_tol (bounds.h, where the derivation is) for an fp16/bf16 output of unit
/// roundoff `uo` and smallest subnormal `s`: the ceiling of a softmax whose exponentials are
/// rounded to the storage type, from the fp32 model's tol32, |ref| and the row length n.
ASSAY_HD inline double narrow_softmax_tol_of(double tol32, double ref_abs, double uo, double s, int64_t n) {
  const double u_z = uo + static_cast<double>(n) * s;
  const double rho = (1 + uo) / (1 - u_z) - 1;
  return (1 + rho) * tol32 + rho * ref_abs + (1 + uo) * s;
}

/// Log-softmax with the row's log-sum-exp formed first (properties/softmax.cpp, convention
/// log_softmax_lse_first, where the derivation is): the ceiling's growth for a row whose finite
/// |max| is `max_abs`, at fp32 unit roundoff u, carried through a store of unit roundoff u_out
/// (0 for fp32).
ASSAY_HD inline double lse_first_extra(double max_abs, int64_t n, double u, double u_out) {
  return u * (1 + u) * (max_abs + ::log(static_cast<double>(n > 1 ? n : 1)) + 1) * (1 + u_out);
}

/// Cross-entropy's loss ceiling for one row (properties/cross_entropy.cpp ce_loss_tol, where the
/// derivation is): z the row's log-softmax ceiling, eps the fp32 smoothing, nll = L - t_c,
/// target_dev = |t_c|, lse = L, mean_abs_t = mean_j |t_j|, loss the reference; +Inf where the
/// kernel's sum of the t_j may pass `f32_max`.
ASSAY_HD inline double cross_entropy_loss_tol(const ElementBound& z, int64_t n, double eps, double nll,
                                              double target_dev, double lse, double mean_abs_t, double loss,
                                              double f32_max) {
  const double u32 = 0x1p-24, u64 = 0x1p-53;
  const double tol_c = z.tol(nll, target_dev);
  if (eps == 0) return tol_c;
  if (!(static_cast<double>(n) * mean_abs_t < f32_max)) return HUGE_VAL;
  const double a = lse + mean_abs_t;
  const double tol_a = z.tol(a, mean_abs_t) + (gamma_n(n + 1, u32) / (1 - u32) + gamma_n(n + 1, u64)) * mean_abs_t;
  const double g3 = gamma_n(3, u32);
  return (1 + g3) * ((1 - eps) * tol_c + eps * tol_a) + g3 * loss;
}

}  // namespace assay
