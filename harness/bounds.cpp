// Rounding-error bounds (see bounds.h). References:
//   [H] N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002.
#include "harness/bounds.h"

#include <cmath>
#include <limits>

namespace assay {

double gamma_n(int64_t n, double u) {
  // [H] Lemma 3.1: |theta_n| <= gamma_n = n*u / (1 - n*u), valid only while n*u < 1.
  if (n <= 0 || !(u > 0)) return 0;  // no rounding at all
  const double nu = static_cast<double>(n) * u;
  if (!(nu < 1)) return std::numeric_limits<double>::infinity();
  return nu / (1 - nu);
}

ElementBound gemm_ceiling(const GemmBoundModel& m) {
  const int64_t k = m.k < 0 ? 0 : m.k;
  // k products and k-1 sums on the path of each alpha*a*b term ([H] (3.5)),
  // one rounding for alpha*(), one for + beta*c; [H] Lemma 3.3 composes them.
  const int64_t n = k > std::numeric_limits<int64_t>::max() - 2 ? k : k + 2;
  const double g_acc = gamma_n(n, unit_roundoff(m.acc));
  const double g_ref = gamma_n(n, unit_roundoff(m.ref_acc));

  // The final conversion to `out` is a separate rounding only when `out` is
  // coarser than `acc`; otherwise it is one of the k+2 above (or exact).
  const double u_out = unit_roundoff(m.out);
  const double rel_out = dtype_is_float(m.out) && u_out > unit_roundoff(m.acc) ? u_out : 0;
  // That rounding is relative to the kernel's pre-rounding value c~, not to
  // ref: u_out*|c~| <= u_out*(|ref| + |c~ - ref|), so the rest scales by 1+u_out.
  const double carry = 1 + rel_out;

  // The harness passes the reference's computed mag^, a sum of non-negative
  // terms each rounded at most k+2 times: mag <= mag^ / (1-u_ref)^(k+2)
  // <= (1 + g_ref) * mag^ (Bernoulli's inequality).
  const double rel_mag = carry * (g_acc + g_ref) * (1 + g_ref);

  // Underflow: with flush-to-zero each of the at most 2k+3 operations loses
  // less than min_normal (absolute); the 2k inside the dot are then scaled by
  // |alpha|. Later roundings can grow a lost amount by (1+u)^(k+2) <= 1 + gamma.
  // The same count bounds the reference (gradual underflow loses even less).
  const double ops = 2.0 * static_cast<double>(k) * std::fabs(m.alpha_abs) + 3.0;
  const double floor_acc = (1 + g_acc) * ops * min_normal(m.acc);
  const double floor_ref = (1 + g_ref) * ops * min_normal(m.ref_acc);
  // Final rounding into `out`: below min_normal gradual underflow errs by up to
  // half a subnormal spacing, absolute; an integer output of a float
  // accumulation rounds to the nearest integer (half a unit).
  const double floor_out = dtype_is_float(m.out)   ? 0.5 * min_subnormal(m.out)
                           : dtype_is_float(m.acc) ? 0.5
                                                   : 0.0;

  ElementBound b;
  b.rel_out = rel_out;
  b.rel_mag = rel_mag;
  b.floor = carry * (floor_acc + floor_ref) + floor_out;
  return b;
}

bool gemm_exact_tier_holds(DType acc, int64_t k, int64_t int_range, double alpha_abs, double beta_abs,
                           double c_abs_max) {
  if (k < 0 || int_range < 0) return false;
  if (!(alpha_abs >= 0) || !(beta_abs >= 0) || !(c_abs_max >= 0)) return false;  // also rejects NaN
  // Integer-valued operands keep every partial sum an integer; a fractional
  // alpha or beta (even 0.5) would need bits below the units place.
  const auto is_int = [](double x) { return std::isfinite(x) && x == std::floor(x); };
  if (!is_int(alpha_abs) || !is_int(beta_abs)) return false;
  if (beta_abs != 0 && !is_int(c_abs_max)) return false;

  // Integers of magnitude < 2^p are exact in a float with p-bit significand,
  // p = -log2(u) (24 for fp32); an integer acc holds up to max_finite.
  const double limit = dtype_is_float(acc) ? 1.0 / unit_roundoff(acc) : max_finite(acc) + 1.0;
  // Every partial sum is bounded by sum |terms| <= k*r^2*|alpha| + |beta|*|c|.
  // The double evaluation is exact below 2^53 >= limit, and rounding is
  // monotone, so the comparison is right on both sides of the limit.
  const double r = static_cast<double>(int_range);
  const double total = static_cast<double>(k) * r * r * alpha_abs + beta_abs * c_abs_max;
  return total < limit;
}

}  // namespace assay
