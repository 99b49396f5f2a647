// The scalar arithmetic of the bounds that host code and device code both run
// (ASSAY_HD): the element bound, gamma_n, the softmax-family terms, and the
// reduction (mean, variance) and normalisation (LayerNorm, RMSNorm) terms. The host
// functions of harness/bounds.h (softmax_bounds, log_softmax_bounds, sum_bounds,
// mean_bounds, variance_bounds, layernorm_bounds, rmsnorm_bounds) are thin
// wrappers over these, so a device reference that computes its tolerances beside
// its values (references/device/) runs the very same formulas as the host path.
// Everything here is plain doubles: the dtype lookups (unit roundoff, min normal)
// are made on the host and passed in (SoftmaxScalars, RowArith, NormScalars). No
// CUDA header needed.
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

// ---- reductions, LayerNorm, RMSNorm -------------------------------------------------------------

/// std::max(a, b) and std::min(a, b) as the host bounds call them: `a` unless the comparison
/// holds, so a NaN in `a` propagates and one in `b` does not.
ASSAY_HD inline double max_of(double a, double b) {
  return a < b ? b : a;
}
ASSAY_HD inline double min_of(double a, double b) {
  return b < a ? b : a;
}

/// The numbers of one reduction's arithmetic (a ReductionModel or NormModel of bounds.h with its
/// dtypes looked up: row_arith, norm_scalars).
struct RowArith {
  double u = 0;               ///< the kernel's unit roundoff (0: exact arithmetic)
  double u_ref = 0;           ///< the reference's (fp64)
  double min_normal = 0;      ///< the kernel's smallest normal
  double min_normal_ref = 0;  ///< the reference's smallest normal
  double out_round = 0;       ///< u_out where the output is coarser than the kernel's arithmetic, else 0
  double out_floor = 0;       ///< half the subnormal spacing of a float output (its gradual underflow)
  double lambda = kDefaultLambda;
};

/// Adds the output rounding to a kernel+reference bound: u_out |c~| <= u_out (|ref| + err), so
/// the rest scales by 1 + u_out (as in gemm_ceiling); bounds.cpp's with_output.
ASSAY_HD inline ElementBound output_carried(double rel, double rel_mag, double floor, double out_round,
                                            double out_floor) {
  const double carry = 1 + out_round;
  ElementBound b;
  b.rel_out = out_round + carry * rel;
  b.rel_mag = carry * rel_mag;
  b.floor = carry * floor + out_floor;
  return b;
}

/// No bound: every coefficient +Inf.
ASSAY_HD inline ElementBound unbounded_element() {
  return {HUGE_VAL, HUGE_VAL, HUGE_VAL};
}

/// One level of sum_bounds / mean_bounds (bounds.h) for n >= 0 values: `path` roundings on a
/// term's way (n - 1 for a sum, n + 1 for a mean), the flush-to-zero count divided by `floor_div`
/// (n for a mean: its magnitude is sum|x| / n).
ASSAY_HD inline ElementBound sum_like_level(const RowArith& a, int64_t n, int64_t path, double floor_div,
                                            bool expected) {
  const double g_ref = gamma_n(path, a.u_ref);
  // Flush-to-zero: n inputs and n-1 sums each lose < min_normal, then /n (mean) and one more.
  const double ops = (2.0 * static_cast<double>(n) + 1.0) / floor_div + 1.0;
  const double g = g_level(path, a.u, a.lambda, expected);
  // The reference's mag^ is a sum of non-negative terms: mag <= (1 + g_ref) mag^.
  const double rel_mag = (g + g_ref) * (1 + g_ref);
  const double floor = ops * ((1 + g) * a.min_normal + (1 + g_ref) * a.min_normal_ref);
  return output_carried(0, rel_mag, floor, a.out_round, a.out_floor);
}

/// What the variance bound needs from the reference (all of the row, exact-ish in fp64).
struct VarianceMags {
  double mean_abs = 0;  ///< A = sum|x_i| / n
  double max_abs = 0;   ///< X = max|x_i|
  double range = 0;     ///< W = max x_i - min x_i (the data spread)
};

/// mag of variance_bounds: X*W.
ASSAY_HD inline double variance_mag_of(const VarianceMags& g) {
  return g.max_abs * g.range;
}

/// Coefficients of the variance bound at unit roundoff u (bounds.h, variance_bounds):
/// |V^ - V| <= rel_v V + coef_xw X W + abs.
struct VarTerms {
  double rel_v = 0, coef_xw = 0, abs = 0, e_mu = 0;
};

ASSAY_HD inline VarTerms variance_terms(int64_t n, int64_t d, double u, const VarianceMags& g, double lambda,
                                        bool expected) {
  VarTerms t;
  if (!(u > 0) || n <= 0) return t;  // exact arithmetic
  const double nd = static_cast<double>(n), dd = static_cast<double>(d);
  const double G = gamma_n(n + 4, u);
  const double shrink = 1 - u * (nd + 14) / 2;  // X~ = X / shrink bounds every |M^_k| (Welford)
  if (!finite_hd(G) || !(shrink > 0)) return {HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL};
  const double xt = g.max_abs / shrink;
  const double c = (1 + G) / dd;
  const double g1 = gamma_n(n + 1, u);
  if (!expected) {
    // Welford: e_k <= u X~ (k+14)/2; sum_k W (e_k + e_{k-1}) <= u X~ W (n^2 + 28n)/2;
    // sum_k e_{k-1} e_k <= n e_n^2. Two-pass: n (gamma_{n+1} A)^2.
    const double e_w = u * xt * (nd + 14) / 2;
    t.rel_v = G;
    t.coef_xw = c * u * (nd * nd + 28 * nd) / 2 / shrink;
    t.abs = c * (nd * (g1 * g.mean_abs) * (g1 * g.mean_abs) + nd * e_w * e_w);
    t.e_mu = max_of(g1 * g.mean_abs, e_w);
  } else {
    // [HM]: sqrt(n) in place of n for sums of independent roundings.
    const double ge = min_of(gamma_tilde(n + 4, u, lambda), G);
    const double g1e = min_of(gamma_tilde(n + 1, u, lambda), g1);
    const double e_we = min_of(lambda * u * xt * ::sqrt(nd + 14), u * xt * (nd + 14) / 2);
    t.rel_v = ge;
    t.coef_xw =
        min_of(c * (4.0 / 3.0) * lambda * u * ::pow(nd + 14, 1.5) / shrink, c * u * (nd * nd + 28 * nd) / 2 / shrink);
    t.abs = c * (nd * (g1e * g.mean_abs) * (g1e * g.mean_abs) + nd * e_we * e_we);
    t.e_mu = max_of(g1e * g.mean_abs, e_we);
  }
  return t;
}

/// One level of variance_bounds (bounds.h, where the derivation is) for a row of n values.
ASSAY_HD inline ElementBound variance_level(const RowArith& a, int64_t n_in, int ddof, const VarianceMags& g,
                                            bool expected) {
  const int64_t n = n_in < 0 ? 0 : n_in;
  const int64_t d = n - ddof;
  if (d <= 0) return unbounded_element();
  // The reference's A, X, W are fp64 max / difference / mean of the row: mag^ and A^ may fall
  // short by (1 + gamma_{n+1}(u_ref)).
  const double ref_slack = 1 + gamma_n(n + 1, a.u_ref);
  VarianceMags gs = g;
  gs.mean_abs *= ref_slack;
  gs.max_abs *= ref_slack;
  gs.range *= ref_slack;
  // Flush-to-zero: n deviations squared, n sums, the mean's n + 1 operations, the division.
  const double ftz = (3.0 * static_cast<double>(n) + 4.0) / static_cast<double>(d);
  const VarTerms k = variance_terms(n, d, a.u, gs, a.lambda, expected);
  const VarTerms r = variance_terms(n, d, a.u_ref, gs, a.lambda, false);
  const double rel_mag = (k.coef_xw + r.coef_xw) * ref_slack * ref_slack;
  const double floor = k.abs + r.abs + ftz * ((1 + k.rel_v) * a.min_normal + a.min_normal_ref);
  return output_carried(k.rel_v + r.rel_v, rel_mag, floor, a.out_round, a.out_floor);
}

/// Relative error of a computed rsqrt(v^ + eps) given |relative error of v + eps| <= r (before
/// the addition's own rounding): 1/sqrt(1 - r') - 1 with r' = (1+r)(1+u) - 1, then the rsqrt
/// itself: rsqrtf 2 ulp (2.5 ulp <= 5u), or fast sqrt (1 ulp) and reciprocal (1 ulp): 7u.
/// +Inf where r' >= 1.
ASSAY_HD inline double rstd_rel_of(double r, double u, bool fast) {
  const double rp = (1 + r) * (1 + u) - 1;
  if (!(rp < 1)) return HUGE_VAL;
  const double rho = 1 / ::sqrt(1 - rp) - 1;
  return (1 + rho) * (1 + (fast ? 7 : 5) * u) - 1;
}

/// What LayerNorm's bound needs per row (the reference returns it).
struct LayerNormRowMags {
  double var = 0;            ///< population variance V
  VarianceMags stats;        ///< A, X, W of the row
  double max_abs_gamma = 1;  ///< max_i |gamma_i| (1 without affine weights)
};

/// A NormModel (bounds.h) with its dtypes looked up: norm_scalars() builds it.
struct NormScalars {
  RowArith y;          ///< the normalised output's: the kernel's arithmetic, the activation dtype out
  RowArith stats;      ///< the saved statistics': fp32 arithmetic, fp32 out (properties/norms.cpp)
  int64_t n = 0;       ///< row length
  double eps = 0;      ///< as the kernel adds it (an fp32 value)
  bool fast = false;   ///< approximate sqrt and reciprocal (fp32 fast math)
  double f32_max = 0;  ///< fp32's largest finite value (the overflow zones)
};

/// One level of layernorm_bounds (bounds.h, where the derivation is).
ASSAY_HD inline ElementBound layernorm_level(const NormScalars& s, const LayerNormRowMags& row, bool expected) {
  const int64_t n = s.n < 0 ? 0 : s.n;
  if (n == 0) return unbounded_element();
  const RowArith& a = s.y;
  const double V = max_of(row.var, 0.0), ve = V + s.eps;
  if (!(ve > 0)) return unbounded_element();
  const double rstd = 1 / ::sqrt(ve);
  const double ref_slack = 1 + gamma_n(n + 8, a.u_ref);
  VarianceMags gs = row.stats;
  gs.mean_abs *= ref_slack;
  gs.max_abs *= ref_slack;
  gs.range *= ref_slack;
  double rel_mag = 0, floor = 0, rel = 0;
  for (int which = 0; which < 2; ++which) {
    const bool kernel = which == 0;
    const double uu = kernel ? a.u : a.u_ref;
    if (!(uu > 0)) continue;
    const double mn = kernel ? a.min_normal : a.min_normal_ref;
    const VarTerms vt = variance_terms(n, n, uu, gs, a.lambda, kernel && expected);
    const double e_v = vt.rel_v * V * ref_slack + vt.coef_xw * gs.max_abs * gs.range + vt.abs +
                       (3.0 * static_cast<double>(n) + 4.0) / static_cast<double>(n) * mn;
    // The kernel adds its own fl(eps): u*eps more.
    const double rr = rstd_rel_of((e_v + uu * s.eps) / ve, uu, kernel && s.fast);
    if (!finite_hd(rr)) return unbounded_element();
    const double f3 = (1 + rr) * (1 + gamma_n(3, uu));  // x - mu^, * rstd, * gamma
    const double c = 1 / (1 - uu);                      // + beta, relative to the result
    rel += uu * c;
    rel_mag += c * (f3 - 1);
    floor += c * (row.max_abs_gamma * vt.e_mu * rstd * f3) + mn;
  }
  return output_carried(rel, rel_mag * ref_slack, floor * ref_slack, a.out_round, a.out_floor);
}

/// One level of rmsnorm_bounds (bounds.h, where the derivation is) for a row of mean(x^2) = mean_sq.
ASSAY_HD inline ElementBound rmsnorm_level(const NormScalars& s, double mean_sq, bool expected) {
  const int64_t n = s.n < 0 ? 0 : s.n;
  const double ms = max_of(mean_sq, 0.0), me = ms + s.eps;
  if (n == 0 || !(me > 0)) return unbounded_element();
  const RowArith& a = s.y;
  const double nd = static_cast<double>(n);
  double rel = 0, floor = 0;
  for (int which = 0; which < 2; ++which) {
    const bool kernel = which == 0;
    const double uu = kernel ? a.u : a.u_ref;
    if (!(uu > 0)) continue;
    const double mn = kernel ? a.min_normal : a.min_normal_ref;
    // Squares, n-1 sums and /n: gamma_{n+2} relative (positive terms); flushed squares and sums.
    const double g = g_level(n + 2, uu, a.lambda, kernel && expected);
    const double r = (g * ms + (2 * nd + 1) / nd * mn + uu * s.eps) / me;
    const double rr = rstd_rel_of(r, uu, kernel && s.fast);
    if (!finite_hd(rr)) return unbounded_element();
    rel += (1 + rr) * (1 + gamma_n(2, uu)) - 1;  // x * rstd * gamma
    floor += mn;
  }
  return output_carried(rel, 0, floor, a.out_round, a.out_floor);
}

// ---- properties/norms.cpp: the forward's outputs, row by row ----------------------------------------
// The derivations (underflow shares, the saved mean's Welford error, the saved rstd's relative
// error, the declared overflow zones) are in properties/norms.cpp's header comment and bound_ln /
// bound_rms, which call these; the device reference (references/device/norms_f64.cu) calls them too.

/// One LayerNorm row's ceiling: y's affine terms, and the saved mean's and rstd's tolerances.
struct LayerNormRowBound {
  ElementBound y;         ///< layernorm_level's ceiling
  double rs = 0;          ///< the reference's rstd
  double e_mu_under = 0;  ///< the running mean's underflow share: 3 (n + 1) 2^-150
  bool overflow = false;  ///< fp32 squares may overflow: y and rstd unbounded
  double mean_tol = 0;    ///< the saved mean's tolerance (+Inf where x - mean may overflow)
  double rstd_tol = 0;    ///< the saved rstd's tolerance
};

/// The row of mean `mu`, rstd `rs` and statistics `row` (the reference's, in fp64).
ASSAY_HD inline LayerNormRowBound layernorm_row_bound(const NormScalars& s, double mu, double rs,
                                                      const LayerNormRowMags& row) {
  const RowArith& f = s.stats;
  const int64_t n = s.n;
  const double u32 = f.u, mean_abs = row.stats.mean_abs, max_abs = row.stats.max_abs;
  LayerNormRowBound b;
  b.y = layernorm_level(s, row, false);
  b.rs = rs;
  b.e_mu_under = 3.0 * static_cast<double>(n + 1) * 0x1p-150;
  const ElementBound mb = sum_like_level(f, n < 0 ? 0 : n, n + 1, n > 0 ? static_cast<double>(n) : 1.0, false);
  const double xt = max_abs / (1 - u32 * static_cast<double>(n + 14) / 2);
  b.mean_tol = max_of(mb.tol(::fabs(mu), mean_abs),
                      gamma_n(n + 1, u32) * mean_abs + u32 * xt * static_cast<double>(n + 14) / 2) +
               u32 * ::fabs(mu) + b.e_mu_under;
  b.overflow = !(static_cast<double>(n) * 4 * max_abs * max_abs < s.f32_max / 2);
  if (!(2 * max_abs < s.f32_max)) b.mean_tol = HUGE_VAL;
  const double e_v = variance_level(f, n, 0, row.stats, false).tol(row.var, variance_mag_of(row.stats));
  b.rstd_tol =
      b.overflow ? HUGE_VAL : rstd_rel_of((e_v + u32 * s.eps) / (row.var + s.eps), u32, s.fast) * rs + 2 * f.min_normal;
  return b;
}

/// y_i's tolerance in a row `b`: |y_i| = y_abs, |gamma_i xhat_i| = mag (0 where not finite),
/// |gamma_i| = gamma_abs.
ASSAY_HD inline double layernorm_y_tol(const LayerNormRowBound& b, double y_abs, double mag, double gamma_abs) {
  if (b.overflow) return HUGE_VAL;
  return b.y.tol(y_abs, finite_hd(mag) ? mag : 0) + 0x1p-149 * (1 + b.rs) * (2 + gamma_abs) +
         b.e_mu_under * b.rs * gamma_abs * (1 + 0x1p-20);
}

/// One RMSNorm row's ceiling: y's affine terms and the saved rstd's tolerance.
struct RmsNormRowBound {
  ElementBound y;         ///< rmsnorm_level's ceiling
  double rs = 0;          ///< the reference's rstd
  bool overflow = false;  ///< the fp32 sum of squares may overflow: y and rstd unbounded
  double rstd_tol = 0;    ///< the saved rstd's tolerance
};

/// The row of mean(x^2) = mean_sq and rstd `rs` (the reference's, in fp64).
ASSAY_HD inline RmsNormRowBound rmsnorm_row_bound(const NormScalars& s, double mean_sq, double rs) {
  const RowArith& f = s.stats;
  const int64_t n = s.n;
  RmsNormRowBound b;
  b.y = rmsnorm_level(s, mean_sq, false);
  b.rs = rs;
  const double e_ms =
      gamma_n(n + 2, f.u) * mean_sq + static_cast<double>(2 * n + 1) * f.min_normal / max_of(1, static_cast<double>(n));
  b.rstd_tol = rstd_rel_of((e_ms + f.u * s.eps) / (mean_sq + s.eps), f.u, s.fast) * rs + 2 * f.min_normal;
  b.overflow = !(static_cast<double>(n) * mean_sq * 2 < s.f32_max);
  if (b.overflow) b.rstd_tol = HUGE_VAL;
  return b;
}

/// y_i's tolerance in a row `b`: |y_i| = y_abs, |gamma_i| = gamma_abs.
ASSAY_HD inline double rmsnorm_y_tol(const RmsNormRowBound& b, double y_abs, double gamma_abs) {
  if (b.overflow) return HUGE_VAL;
  return b.y.tol(y_abs, 0) + 0x1p-149 * (2 + b.rs) * (2 + gamma_abs);
}

}  // namespace assay
