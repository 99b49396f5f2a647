// Rounding-error bounds (see bounds.h for the formulas and the source tags). References:
//   [H] N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002.
//   [HM], [BHM], [BHLMP], [FHMP], [CGL], [MG], [CUDA]: listed in bounds.h.
#include "harness/bounds.h"
#include "harness/ulp_core.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

namespace assay {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
// 2^-21.41 and 2^-21.19: __logf/__sinf and __cosf absolute errors as stated in [CUDA].
const double kE2141 = kLogfFastAbs;
const double kE2119 = std::exp2(-21.19);

/// prod (1 + delta_i) - 1 with sum |delta_i| <= x: at most exp(x) - 1 <= x / (1 - x)
/// for 0 <= x < 1 (the step from [H] Lemma 3.1's n*u to a sum of unequal bounds).
double compound(double x) {
  if (!(x > 0)) return 0;
  if (!(x < 1)) return kInf;
  return x / (1 - x);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return a <= 0 ? 0 : a / b + (a % b != 0 ? 1 : 0);
}

/// n + add without overflow (saturates; gamma_n is +Inf there anyway).
int64_t plus(int64_t n, int64_t add) {
  return n > kI64Max - add ? kI64Max : n + add;
}

bool is_pow2(double s) {
  if (!(s > 0) || !std::isfinite(s)) return false;
  int e = 0;
  return std::frexp(s, &e) == 0.5;
}

/// Output rounding, as in gemm_ceiling: a separate rounding only when `out` is coarser than `acc`.
double out_rounding(DType out, DType acc) {
  const double u_out = unit_roundoff(out);
  return dtype_is_float(out) && u_out > unit_roundoff(acc) ? u_out : 0;
}

/// Half a subnormal spacing of a float `out` (gradual underflow of the final rounding).
double out_floor(DType out) {
  return dtype_is_float(out) ? 0.5 * min_subnormal(out) : 0.0;
}

/// Adds the output rounding to a kernel+reference bound: u_out |c~| <= u_out (|ref| + err),
/// so the rest scales by 1 + u_out (as in gemm_ceiling).
ElementBound with_output(double rel, double rel_mag, double floor, DType out, DType acc) {
  return output_carried(rel, rel_mag, floor, out_rounding(out, acc), out_floor(out));
}

}  // namespace

// gamma_n and gamma_tilde: inline in harness/bound_core.h.

double accuracy_ratio(double err, double ref_abs, double mag, const ElementBound& b) {
  if (std::isnan(err)) return err;
  if (err == 0) return 0;
  const double tol = b.tol(ref_abs, mag);
  if (!(tol > 0)) return kInf;
  return err / tol;
}

BoundLevel classify(double err, double ref_abs, double mag, const BoundPair& b) {
  if (std::isnan(err) || err > b.ceiling.tol(ref_abs, mag)) return BoundLevel::kAboveCeiling;
  if (err > b.expected.tol(ref_abs, mag)) return BoundLevel::kAboveExpected;
  return BoundLevel::kWithinExpected;
}

int precision_bits(DType t) {
  if (!dtype_is_float(t)) return 0;
  return -std::ilogb(unit_roundoff(t));  // u = 2^-p
}

// ---- dot / GEMM ----------------------------------------------------------------------

BoundPair gemm_bounds(const GemmBoundModel& m) {
  const int64_t k = m.k < 0 ? 0 : m.k;
  const int64_t s = std::clamp<int64_t>(m.split_k, 1, std::max<int64_t>(k, 1));
  const double u_acc = unit_roundoff(m.acc);
  // One rounding in acc per scale that is not a power of two: forming alpha*sa*sb and
  // applying scale_out (alpha's own rounding is one of the "+2").
  const int64_t extra = (is_pow2(m.scale_a) ? 0 : 1) + (is_pow2(m.scale_b) ? 0 : 1) + (is_pow2(m.scale_out) ? 0 : 1);

  // The reference sums in its own order: k products and sums, alpha and beta.
  const int64_t n_ref = k > kI64Max - 2 ? k : k + 2;
  const double g_ref = gamma_n(n_ref, unit_roundoff(m.ref_acc));

  double g_acc = 0, e_acc = 0, ops_dot = 2.0 * static_cast<double>(k), ops_rn = 0;
  const bool block = m.accumulation == Accumulation::kTruncatingBlock && dtype_is_float(m.acc);
  if (!block) {
    // [H] (3.5): any order, only the number of roundings on each term's path counts:
    // k for one loop; under split-K a chunk of ceil(k/S) and the S-1 sums of partials.
    int64_t path = k;
    if (s > 1) path = std::min(k, plus(ceil_div(k, s), s - 1));
    const int64_t n = plus(path, 2 + extra);
    g_acc = gamma_n(n, u_acc);
    e_acc = std::min(gamma_tilde(n, u_acc, m.lambda), g_acc);
    ops_rn = static_cast<double>(extra + (s - 1));
  } else {
    const int64_t b = std::max<int64_t>(m.block, 1);
    const int p_b = m.block_bits > 0 ? m.block_bits : precision_bits(m.acc);
    const double u_b = std::ldexp(1.0, -p_b);
    const int64_t chunk = ceil_div(k, s);
    const int64_t interval = m.promote_every > 0 ? std::min(m.promote_every, chunk) : chunk;
    const int64_t inner = ceil_div(interval, b);  // chained blocks before a promotion
    const int64_t outer = m.promote_every > 0 ? ceil_div(chunk, m.promote_every) : 0;
    // [FHMP]: products of fp16/bf16/tf32/fp8 inputs are exact inside the block; an input
    // with more than half the block's bits rounds its products once (to nearest, in acc).
    const bool exact_products = !dtype_is_float(m.in) || 2 * precision_bits(m.in) <= p_b;
    const int64_t r = outer + (s - 1) + 2 + extra + (exact_products ? 0 : 1);
    // Each block: b aligned terms truncated below 1 ulp (2u_b) of the block's largest
    // magnitude M <= S_j, the normalised sum truncated below 1 ulp of itself (<= S_j):
    // |eps_j| <= 2u_b (b+1) S_j, S_j = |c| + sum |t|; the recurrence gives
    // |err| <= ((1+eta)^m - 1) sum|t| ([BHM] with truncation for rounding).
    const double eta = 2 * u_b * static_cast<double>(b + 1);
    const double mi = static_cast<double>(inner), rd = static_cast<double>(r);
    double x_c = mi * eta + rd * u_acc;
    const double x_e = mi * eta / 2 + m.lambda * std::sqrt(mi * static_cast<double>(b + 1) + rd) * std::max(u_b, u_acc);
    // b products, b+1 aligned terms and one normalisation per block may flush.
    ops_dot = 2.0 * static_cast<double>(k) + 2.0 * static_cast<double>(s) * static_cast<double>(ceil_div(chunk, b));
    ops_rn = static_cast<double>(extra + (s - 1)) + static_cast<double>(s) * static_cast<double>(outer);
    if (m.any_split) {
      // Any decomposition (bounds.h): S nonempty chunks, the longest c = k - S + 1; a term in it
      // passes ceil(min(c, P)/b) blocks, ceil(c/P) promotions and <= S - 1 sums of partials.
      const int64_t r0 = 2 + extra + (exact_products ? 0 : 1);
      for (int64_t S = 1; S <= std::max<int64_t>(k, 1); ++S) {
        const int64_t c = std::max<int64_t>(k - S + 1, 0);
        const int64_t in_s = ceil_div(m.promote_every > 0 ? std::min(m.promote_every, c) : c, b);
        const int64_t out_s = m.promote_every > 0 ? ceil_div(c, m.promote_every) : 0;
        x_c = std::max(x_c, static_cast<double>(in_s) * eta + static_cast<double>(out_s + (S - 1) + r0) * u_acc);
      }
      // Flushes: chunks c_i hold sum ceil(c_i/b) <= ceil(k/b) + S - 1 blocks; S - 1 sums of
      // partials and sum ceil(c_i/P) <= ceil(k/P) + S - 1 promotions, largest at S = k.
      ops_dot = std::max(ops_dot, 2.0 * static_cast<double>(k) +
                                      2.0 * static_cast<double>(ceil_div(k, b) + std::max<int64_t>(k - 1, 0)));
      ops_rn =
          std::max(ops_rn, static_cast<double>(extra + std::max<int64_t>(k - 1, 0)) +
                               (m.promote_every > 0
                                    ? static_cast<double>(ceil_div(k, m.promote_every) + std::max<int64_t>(k - 1, 0))
                                    : 0.0));
    }
    g_acc = compound(x_c);
    e_acc = std::min(compound(x_e), g_acc);
  }

  // The final conversion to `out` is a separate rounding only when `out` is
  // coarser than `acc`; otherwise it is one of the k+2 above (or exact).
  const double rel_out = out_rounding(m.out, m.acc);
  // That rounding is relative to the kernel's pre-rounding value c~, not to
  // ref: u_out*|c~| <= u_out*(|ref| + |c~ - ref|), so the rest scales by 1+u_out.
  const double carry = 1 + rel_out;

  // The harness passes the reference's computed mag^, a sum of non-negative
  // terms each rounded at most k+2 times: mag <= mag^ / (1-u_ref)^(k+2)
  // <= (1 + g_ref) * mag^ (Bernoulli's inequality).
  const double rel_mag = carry * (g_acc + g_ref) * (1 + g_ref);
  const double rel_mag_e = carry * (e_acc + g_ref) * (1 + g_ref);

  // Underflow: with flush-to-zero each of the at most 2k+3 operations loses
  // less than min_normal (absolute); the 2k inside the dot are then scaled by
  // |alpha| (and the fp8 dequantisation scales). Later roundings can grow a lost
  // amount by (1+u)^(k+2) <= 1 + gamma. The same count bounds the reference.
  const double dot_scale = std::fabs(m.alpha_abs * m.scale_a * m.scale_b);
  const double ops = ops_dot * dot_scale + 3.0 + ops_rn;
  const double floor_acc = (1 + g_acc) * ops * min_normal(m.acc);
  const double floor_ref = (1 + g_ref) * ops * min_normal(m.ref_acc);
  // Final rounding into `out`: below min_normal gradual underflow errs by up to
  // half a subnormal spacing, absolute; an integer output of a float
  // accumulation rounds to the nearest integer (half a unit). A quantised output
  // is compared as stored/scale_out.
  const double floor_out = (dtype_is_float(m.out)   ? 0.5 * min_subnormal(m.out)
                            : dtype_is_float(m.acc) ? 0.5
                                                    : 0.0) /
                           (m.scale_out > 0 ? m.scale_out : 1.0);

  // The product rounded to `out` before beta*C is added (bounds.h): its rounding and the acc
  // rounding of the sum, relative to |alpha P^| <= (1 + g_acc)(1 + g_ref) mag, carried through
  // the final rounding into `out`.
  double rel_prod = 0, floor_prod = 0;
  if (m.product_to_out && m.has_beta && rel_out > 0) {
    const ElementBound e = product_to_out_terms(m.out, m.acc, carry * (1 + g_acc) * (1 + g_ref));
    rel_prod = e.rel_mag;
    floor_prod = carry * e.floor;
  }

  BoundPair p;
  p.ceiling.rel_out = rel_out;
  p.ceiling.rel_mag = rel_mag + rel_prod;
  p.ceiling.floor = carry * (floor_acc + floor_ref) + floor_out + floor_prod;
  p.expected = p.ceiling;
  p.expected.rel_mag = std::min(rel_mag_e, rel_mag) + rel_prod;
  return p;
}

ElementBound product_to_out_terms(DType out, DType acc, double mag_slack) {
  ElementBound e;
  if (!dtype_is_float(out) || !dtype_is_float(acc) || !(unit_roundoff(out) > unit_roundoff(acc))) return e;
  const double u_out = unit_roundoff(out), u_acc = unit_roundoff(acc);
  e.rel_mag = (u_out + u_acc * (1 + u_out)) * (1 + u_acc) * mag_slack;
  e.floor = (1 + u_acc) * 0.5 * min_subnormal(out);
  return e;
}

ElementBound gemm_ceiling(const GemmBoundModel& m) {
  return gemm_bounds(m).ceiling;
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

bool gemm_exact_tier_holds(const GemmBoundModel& m, int64_t int_range, double beta_abs, double c_abs_max) {
  if (!dtype_is_float(m.acc)) {
    if (m.scale_a != 1 || m.scale_b != 1 || m.scale_out != 1) return false;
    return gemm_exact_tier_holds(m.acc, m.k, int_range, m.alpha_abs, beta_abs, c_abs_max);
  }
  if (int_range < 0 || m.k < 0) return false;
  // Inputs: integers up to 2^p(in) are exact (integer inputs: their range).
  const double in_limit = dtype_is_float(m.in) ? std::ldexp(1.0, precision_bits(m.in)) : max_finite(m.in);
  if (static_cast<double>(int_range) > in_limit) return false;
  // Scales: powers of two keep the products 2^e * integer; C is not scaled, so with beta they must be 1.
  if (!is_pow2(m.scale_a) || !is_pow2(m.scale_b) || !is_pow2(m.scale_out)) return false;
  const double s = m.scale_a * m.scale_b * m.scale_out;
  if (beta_abs != 0 && s != 1) return false;
  // The fewest significand bits on the path: acc, the truncating block, a float output.
  int p = precision_bits(m.acc);
  if (m.accumulation == Accumulation::kTruncatingBlock && m.block_bits > 0) p = std::min(p, m.block_bits);
  if (dtype_is_float(m.out)) p = std::min(p, precision_bits(m.out));
  const auto is_int = [](double x) { return std::isfinite(x) && x == std::floor(x); };
  if (!(m.alpha_abs >= 0) || !(beta_abs >= 0) || !(c_abs_max >= 0)) return false;
  if (!is_int(m.alpha_abs) || !is_int(beta_abs) || (beta_abs != 0 && !is_int(c_abs_max))) return false;
  const double r = static_cast<double>(int_range);
  const double total = static_cast<double>(m.k) * r * r * m.alpha_abs + beta_abs * c_abs_max;
  if (!(total < std::ldexp(1.0, p))) return false;
  // The scaled result 2^e * integer must be normal (or zero) and finite in acc and out.
  if (s != 1) {
    for (DType t : {m.acc, m.out}) {
      if (!dtype_is_float(t)) continue;
      if (s < min_normal(t) || s * total > max_finite(t)) return false;
    }
  }
  return true;
}

int64_t exact_tier_int_range(DType in, DType acc, int64_t k, bool products) {
  // Integers up to 2^p are exact in a p-bit float (within its range); integer types hold their range.
  const auto int_limit = [](DType t) -> int64_t {
    if (!dtype_is_float(t)) return static_cast<int64_t>(max_finite(t));
    const int p = std::min(precision_bits(t), 62);
    return std::min<int64_t>(int64_t{1} << p, static_cast<int64_t>(std::min(max_finite(t), 0x1p62)));
  };
  const int64_t r_in = int_limit(in);
  if (k <= 0) return r_in;
  // Sums must stay < 2^p(acc) (float) or <= max_finite(acc) (integer), as gemm_exact_tier_holds.
  const __int128 limit = dtype_is_float(acc) ? (__int128{1} << std::min(precision_bits(acc), 100))
                                             : static_cast<__int128>(max_finite(acc)) + 1;
  const auto fits = [&](int64_t r) {
    const __int128 rr = products ? static_cast<__int128>(r) * r : static_cast<__int128>(r);
    return static_cast<__int128>(k) * rr < limit;
  };
  // Largest r with fits(r): monotone, so bisect on [0, r_in].
  int64_t lo = 0, hi = r_in;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

// ---- reductions ----------------------------------------------------------------------------
// The formulas are in harness/bound_core.h (sum_like_level, variance_level), shared with the
// device references.

RowArith row_arith(const ReductionModel& m) {
  RowArith a;
  a.u = unit_roundoff(m.acc);
  a.u_ref = unit_roundoff(m.ref_acc);
  a.min_normal = min_normal(m.acc);
  a.min_normal_ref = min_normal(m.ref_acc);
  a.out_round = out_rounding(m.out, m.acc);
  a.out_floor = out_floor(m.out);
  a.lambda = m.lambda;
  return a;
}

namespace {

// g_level: harness/bound_core.h.

BoundPair sum_like(const ReductionModel& m, int64_t path, double mag_scale_floor_div) {
  const int64_t n = m.n < 0 ? 0 : m.n;
  const RowArith a = row_arith(m);
  return {sum_like_level(a, n, path, mag_scale_floor_div, false),
          sum_like_level(a, n, path, mag_scale_floor_div, true)};
}

}  // namespace

BoundPair sum_bounds(const ReductionModel& m) {
  // [H] (4.4): |s^ - s| <= gamma_{n-1} sum|x_i| for any order.
  return sum_like(m, m.n - 1, 1.0);
}

BoundPair mean_bounds(const ReductionModel& m) {
  // The sum's n-1 roundings plus /n (or *fl(1/n): two), composed by [H] Lemma 3.3.
  return sum_like(m, m.n + 1, m.n > 0 ? static_cast<double>(m.n) : 1.0);
}

double variance_mag(const VarianceMags& g) {
  return variance_mag_of(g);
}

BoundPair variance_bounds(const ReductionModel& m, int ddof, const VarianceMags& g) {
  const RowArith a = row_arith(m);
  return {variance_level(a, m.n, ddof, g, false), variance_level(a, m.n, ddof, g, true)};
}

BoundPair norm_bounds(const ReductionModel& m, NormKind kind, bool fast_sqrt) {
  const int64_t n = m.n < 0 ? 0 : m.n;
  const double u = unit_roundoff(m.acc), u_ref = unit_roundoff(m.ref_acc);
  const double nd = static_cast<double>(n);
  BoundPair p;
  for (bool expected : {false, true}) {
    double rel = 0, floor = 0;
    if (kind == NormKind::kL1) {
      // Non-negative terms: gamma_{n-1} relative to the result itself ([H] (4.4)).
      rel = g_level(n - 1, u, m.lambda, expected) + gamma_n(n - 1, u_ref);
      floor = (2 * nd + 1) * (min_normal(m.acc) + min_normal(m.ref_acc));
    } else if (kind == NormKind::kL2) {
      // sum x^2 = s (1 + theta_n); sqrt(1 + theta) deviates by at most 1 - sqrt(1 - gamma).
      const auto root = [](double g) { return g >= 1 ? kInf : g / (1 + std::sqrt(1 - g)); };
      const double c_sqrt = fast_sqrt && m.acc == DType::kF32 ? 3 * u : u;  // [CUDA] sqrtf 0 or 1 ulp
      rel = (1 + root(g_level(n, u, m.lambda, expected))) * (1 + c_sqrt) - 1 +
            ((1 + root(gamma_n(n, u_ref))) * (1 + u_ref) - 1);
      // Squares below min_normal flush: s loses < 2n min_normal, the norm < sqrt of that.
      floor = std::sqrt((2 * nd + 1) * min_normal(m.acc)) + std::sqrt((2 * nd + 1) * min_normal(m.ref_acc));
    } else {
      floor = min_normal(m.acc);  // a flushed subnormal maximum
    }
    (expected ? p.expected : p.ceiling) = with_output(rel, 0, floor, m.out, m.acc);
  }
  return p;
}

// ---- softmax family ----------------------------------------------------------------------------

SoftmaxScalars softmax_scalars(const SoftmaxModel& m) {
  auto arith = [](DType t) {
    SoftmaxArith a;
    a.u = unit_roundoff(t);
    a.min_normal = min_normal(t);
    a.min_subnormal = min_subnormal(t);
    return a;
  };
  SoftmaxScalars s;
  s.acc = arith(m.acc);
  s.ref = arith(m.ref_acc);
  s.out_round = out_rounding(m.out, m.acc);
  s.out_floor = out_floor(m.out);
  s.n = m.n;
  s.lambda = m.lambda;
  s.fast = m.fast_math && m.acc == DType::kF32;  // intrinsics are fp32 only
  s.rescales = m.rescales;
  return s;
}

// The formulas themselves are in harness/bound_core.h, shared with the device references.
BoundPair softmax_bounds(const SoftmaxModel& m, const SoftmaxRowMags& row) {
  const SoftmaxScalars s = softmax_scalars(m);
  return {softmax_level(s, row.weighted_dev, false), softmax_level(s, row.weighted_dev, true)};
}

BoundPair log_softmax_bounds(const SoftmaxModel& m, const SoftmaxRowMags& row) {
  const SoftmaxScalars s = softmax_scalars(m);
  return {log_softmax_level(s, row.weighted_dev, row.log_sum_exp, false),
          log_softmax_level(s, row.weighted_dev, row.log_sum_exp, true)};
}

BoundPair cross_entropy_bounds(const SoftmaxModel& m, const SoftmaxRowMags& row) {
  return log_softmax_bounds(m, row);
}

double cross_entropy_mean_tol(const SoftmaxModel& m, int64_t rows, double mean_row_tol, double mean_abs_loss,
                              bool expected) {
  const double g =
      g_level(rows + 1, unit_roundoff(m.acc), m.lambda, expected) + gamma_n(rows + 1, unit_roundoff(m.ref_acc));
  return (1 + g) * mean_row_tol + g * mean_abs_loss;
}

// ---- LayerNorm, RMSNorm -------------------------------------------------------------------------------
// The formulas are in harness/bound_core.h (layernorm_level, rmsnorm_level), shared with the
// device references.

NormScalars norm_scalars(const NormModel& m) {
  ReductionModel y, stats;
  y.acc = m.acc, y.out = m.out, y.n = m.n, y.ref_acc = m.ref_acc, y.lambda = m.lambda;
  stats.acc = DType::kF32, stats.out = DType::kF32, stats.n = m.n, stats.ref_acc = m.ref_acc, stats.lambda = m.lambda;
  NormScalars s;
  s.y = row_arith(y);
  s.stats = row_arith(stats);
  s.n = m.n;
  s.eps = m.eps;
  s.fast = m.fast_math && m.acc == DType::kF32;  // fast sqrt and reciprocal are fp32 intrinsics
  s.f32_max = max_finite(DType::kF32);
  return s;
}

BoundPair layernorm_bounds(const NormModel& m, const LayerNormRowMags& row) {
  const NormScalars s = norm_scalars(m);
  return {layernorm_level(s, row, false), layernorm_level(s, row, true)};
}

BoundPair rmsnorm_bounds(const NormModel& m, double mean_sq) {
  const NormScalars s = norm_scalars(m);
  return {rmsnorm_level(s, mean_sq, false), rmsnorm_level(s, mean_sq, true)};
}

// ---- ulps --------------------------------------------------------------------------------------------

namespace {

/// double -> float, round to nearest even, overflow to Inf exactly where IEEE does
/// (a plain cast of an out-of-range double is undefined behaviour).
float to_f32(double v) {
  if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
  constexpr double kOverflow = 0x1.ffffffp127;  // FLT_MAX + half an ulp: ties round up to Inf
  if (std::fabs(v) >= kOverflow)
    return v > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  return static_cast<float>(v);
}

uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

/// Position on the signed-magnitude line of `t`: (negative?, magnitude index); false for NaN
/// and values `t` cannot hold.
bool ordinal(double v, DType t, bool& neg, uint64_t& mag) {
  if (std::isnan(v)) return false;
  switch (t) {
    case DType::kF64: {
      uint64_t b;
      std::memcpy(&b, &v, sizeof b);
      neg = (b >> 63) != 0;
      mag = b & 0x7FFFFFFFFFFFFFFFull;
      return true;
    }
    case DType::kF32:
    case DType::kTF32: {
      float f = to_f32(v);
      if (t == DType::kTF32) f = round_to_tf32(f);
      const uint32_t b = f32_bits(f);
      neg = (b >> 31) != 0;
      mag = (b & 0x7FFFFFFFu) >> (t == DType::kTF32 ? 13 : 0);
      return true;
    }
    case DType::kF16: {
      const uint16_t h = f32_to_f16_bits(to_f32(v));
      if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0) return false;
      neg = (h >> 15) != 0;
      mag = h & 0x7FFFu;
      return true;
    }
    case DType::kBF16: {
      const uint16_t h = f32_to_bf16_bits(to_f32(v));
      if ((h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0) return false;
      neg = (h >> 15) != 0;
      mag = h & 0x7FFFu;
      return true;
    }
    case DType::kE4M3: {
      if (std::isinf(v)) return false;  // e4m3 has no infinity
      const uint8_t e = f32_to_e4m3_bits(to_f32(v), Overflow::kIeee);
      if ((e & 0x7Fu) == 0x7Fu) return false;  // NaN (also what overflow gives)
      neg = (e >> 7) != 0;
      mag = e & 0x7Fu;
      return true;
    }
    case DType::kE5M2: {
      const uint8_t e = f32_to_e5m2_bits(to_f32(v), Overflow::kIeee);
      if ((e & 0x7Cu) == 0x7Cu && (e & 0x3u) != 0) return false;
      neg = (e >> 7) != 0;
      mag = e & 0x7Fu;
      return true;
    }
    case DType::kI8:
    case DType::kI32: {
      if (std::isinf(v)) return false;
      const double lo = t == DType::kI8 ? -128.0 : -2147483648.0;
      const double r = std::clamp(std::nearbyint(v), lo, max_finite(t));
      neg = r < 0;
      mag = static_cast<uint64_t>(std::fabs(r));
      return true;
    }
  }
  return false;
}

}  // namespace

uint64_t ulp_distance(double a, double b, DType t) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na && nb ? 0 : std::numeric_limits<uint64_t>::max();
  bool sa = false, sb = false;
  uint64_t ma = 0, mb = 0;
  if (!ordinal(a, t, sa, ma) || !ordinal(b, t, sb, mb)) {
    // Both unrepresentable the same way (e.g. both +Inf in e4m3, both overflow to NaN) are equal.
    const bool ra = ordinal(a, t, sa, ma), rb = ordinal(b, t, sb, mb);
    if (!ra && !rb && a == b) return 0;
    return std::numeric_limits<uint64_t>::max();
  }
  if (ma == 0) sa = false;  // -0 == +0
  if (mb == 0) sb = false;
  if (sa == sb) return ma > mb ? ma - mb : mb - ma;
  return ma + mb;  // across zero; both < 2^63, no overflow
}

FloatFormat float_format(DType t) {
  return {precision_bits(t), max_finite(t), min_normal(t), min_subnormal(t)};
}

StoreRounding store_rounding_for(DType out) {
  return {out == DType::kF32, float_format(out)};
}

// The formula is harness/ulp_core.h's, which the device references' store rounding runs too.
double ulp_of(double x, DType t) {
  if (!dtype_is_float(t)) return 1.0;
  return ulp_in(x, float_format(t));
}

namespace {

constexpr FastBound kNoFast{};
constexpr FastBound fast_ulp(double u) {
  return {FastKind::kUlp, u, 0, 0, 0, 0, 0};
}
constexpr FastBound fast_linear(double u, double slope) {
  return {FastKind::kUlpLinear, u, slope, 0, 0, 0, 0};
}
constexpr FastBound fast_abs(double abs_err, double lo, double hi, double ulp_else) {
  return {FastKind::kAbsInRange, ulp_else, 0, abs_err, lo, hi, 0};
}
constexpr FastBound fast_rel(double rel) {
  return {FastKind::kRelative, 0, 0, 0, 0, 0, rel};
}
constexpr FastBound fast_derived() {
  return {FastKind::kDerived, 0, 0, 0, 0, 0, 0};
}

constexpr double kPi = std::numbers::pi;

const MathFnAccuracy kTable[] = {
    // name, ulp fp32, intrinsic under -use_fast_math, its bound, ulp fp64
    {"x+y", 0, "", kNoFast, 0},
    {"x*y", 0, "", kNoFast, 0},
    {"x/y", 0, "__fdividef", fast_ulp(2), 0},  // -prec-div=false: 2 ulp for |y| in [2^-126, 2^126]
    {"1/x", 0, "", fast_ulp(1), 0},            // -prec-div=false: 1 ulp
    {"rsqrtf", 2, "", kNoFast, 1},             // also 1/sqrtf when the compiler converts it
    {"sqrtf", 0, "", fast_ulp(1), 0},          // -prec-sqrt=false: 1 ulp (cc >= 5.2)
    {"cbrtf", 1, "", kNoFast, 1},
    {"rcbrtf", 1, "", kNoFast, 1},
    {"hypotf", 3, "", kNoFast, 2},
    {"rhypotf", 2, "", kNoFast, 1},
    {"norm3df", 3, "", kNoFast, 2},
    {"rnorm3df", 2, "", kNoFast, 1},
    {"norm4df", 3, "", kNoFast, 2},
    {"rnorm4df", 2, "", kNoFast, 1},
    {"expf", 2, "__expf", fast_linear(2, 1.173), 1},
    {"exp2f", 2, "", kNoFast, 1},
    {"exp10f", 2, "__exp10f", fast_linear(2, 2.97), 1},
    {"expm1f", 1, "", kNoFast, 1},
    {"logf", 1, "__logf", fast_abs(kE2141, 0.5, 2, 3), 1},
    {"log2f", 1, "__log2f", fast_abs(0x1p-22, 0.5, 2, 2), 1},
    {"log10f", 2, "__log10f", fast_abs(0x1p-24, 0.5, 2, 3), 1},
    {"log1pf", 1, "", kNoFast, 1},
    {"sinf", 2, "__sinf", fast_abs(kE2141, -kPi, kPi, -1), 2},  // "larger otherwise": no bound
    {"cosf", 2, "__cosf", fast_abs(kE2119, -kPi, kPi, -1), 2},
    {"tanf", 4, "__tanf", fast_derived(), 2},  // __sinf(x) * (1/__cosf(x))
    {"sinpif", 1, "", kNoFast, 2},
    {"cospif", 1, "", kNoFast, 2},
    {"asinf", 2, "", kNoFast, 2},
    {"acosf", 2, "", kNoFast, 2},
    {"atanf", 2, "", kNoFast, 2},
    {"atan2f", 3, "", kNoFast, 2},
    {"sinhf", 3, "", kNoFast, 2},
    {"coshf", 2, "", kNoFast, 1},
    {"tanhf", 2, "__tanhf", fast_rel(0x1p-11), 1},  // cc >= 7.5; subnormal results not flushed
    {"asinhf", 3, "", kNoFast, 3},
    {"acoshf", 4, "", kNoFast, 3},
    {"atanhf", 3, "", kNoFast, 2},
    {"powf", 4, "__powf", fast_derived(), 2},  // exp2f(y * __log2f(x))
    {"erff", 2, "", kNoFast, 2},
    {"erfcf", 4, "", kNoFast, 5},
    {"erfinvf", 2, "", kNoFast, 5},
    {"erfcinvf", 4, "", kNoFast, 6},
    {"erfcxf", 4, "", kNoFast, 4},
    {"normcdff", 5, "", kNoFast, 5},
    {"normcdfinvf", 5, "", kNoFast, 8},
    {"lgammaf", 6, "", kNoFast, 4},  // outside -10.001 ... -2.264 (fp64: -23.0001 ... -2.2637)
    {"tgammaf", 5, "", kNoFast, 10},
    {"fmaf", 0, "", kNoFast, 0},
};

/// (N + 0.5) ulps of `c` at |y|, taking the ulp at the binade N+1 ulps above (a result
/// N ulps away may sit in the next binade, where ulps are twice as large).
double ulps_abs(double n_ulps, double y, DType c) {
  const double up = std::fabs(y) * (1 + (n_ulps + 1) * 2 * unit_roundoff(c));
  return (n_ulps + 0.5) * ulp_of(up, c);
}

double fast_f32_budget(const MathFnAccuracy& fn, double x, double y, double x2) {
  const FastBound& f = fn.fast;
  constexpr DType c = DType::kF32;
  const double u = unit_roundoff(c);
  switch (f.kind) {
    case FastKind::kNone:
      return ulps_abs(fn.ulp_f32, y, c);
    case FastKind::kUlp:
      if (fn.name == "x/y" && !(std::fabs(x2) >= 0x1p-126 && std::fabs(x2) <= 0x1p126)) return kInf;
      return ulps_abs(f.ulp, y, c);
    case FastKind::kUlpLinear:
      return ulps_abs(f.ulp + std::floor(f.slope * std::fabs(x)), y, c);
    case FastKind::kAbsInRange:
      if (x >= f.lo && x <= f.hi) return f.abs_err + 0.5 * ulp_of(y, c);
      return f.ulp < 0 ? kInf : ulps_abs(f.ulp, y, c);
    case FastKind::kRelative:
      return f.rel * std::fabs(y) + 0.5 * ulp_of(y, c);
    case FastKind::kDerived: {
      if (fn.name == "tanf") {
        // __sinf(x) * (1/__cosf(x)): s, c err by at most 2^-21.41, 2^-21.19 on [-pi, pi];
        // |s^/c^ - s/c| <= (ds |c| + |s| dc) / (|c| (|c| - dc)), then the fast reciprocal
        // (1 ulp: 3u) and the product (u).
        if (!(std::fabs(x) <= kPi)) return kInf;
        const double s = std::sin(x), co = std::cos(x), ds = kE2141, dc = kE2119;
        if (!(std::fabs(co) > dc)) return kInf;
        const double q = (ds * std::fabs(co) + std::fabs(s) * dc) / (std::fabs(co) * (std::fabs(co) - dc));
        return q + 4.5 * u * (std::fabs(y) + q) + 0.5 * ulp_of(y, c);
      }
      if (fn.name == "powf") {
        // exp2f(y * __log2f(x)), y = x2: log2 errs by 2^-22 on [0.5, 2], else 2 ulp (+0.5);
        // the product rounds once; exp2f 2 ulp. Relative: (1+5u) 2^(dw) - 1.
        if (!(x > 0) || !std::isfinite(x) || !std::isfinite(x2)) return kInf;
        const double l = std::log2(x);
        const double dl = (x >= 0.5 && x <= 2) ? 0x1p-22 : 2.5 * ulp_of(l, c);
        const double dw = std::fabs(x2) * dl + u * std::fabs(x2) * (std::fabs(l) + dl);
        const double rel = (1 + 5 * u) * std::exp2(dw) - 1;
        return rel * std::fabs(y) + 0.5 * ulp_of(y, c);
      }
      return kInf;
    }
  }
  return kInf;
}

}  // namespace

std::span<const MathFnAccuracy> cuda_math_table() {
  return kTable;
}

const MathFnAccuracy* find_math_fn(std::string_view name) {
  for (const MathFnAccuracy& f : kTable)
    if (f.name == name) return &f;
  return nullptr;
}

double elementwise_budget(const MathFnAccuracy& fn, bool fast, double x, double y_exact, DType out, double x2) {
  if (out == DType::kF64) return fn.ulp_f64 < 0 ? kInf : ulps_abs(fn.ulp_f64, y_exact, DType::kF64);
  // fp32 and narrower outputs are computed in fp32 (the narrow ones then rounded once).
  double b = fast ? fast_f32_budget(fn, x, y_exact, x2) + min_normal(DType::kF32)  // -ftz=true
                  : ulps_abs(fn.ulp_f32, y_exact, DType::kF32);
  if (out != DType::kF32 && dtype_is_float(out)) b += 0.5 * ulp_of(std::fabs(y_exact) + b, out);
  return b;
}

double elementwise_budget_ulps(const MathFnAccuracy& fn, bool fast, double x, double y_exact, DType out, double x2) {
  return elementwise_budget(fn, fast, x, y_exact, out, x2) / ulp_of(y_exact, out);
}

// ---- vendor-relative --------------------------------------------------------------------------------

bool vendor_relative_ok(double kernel_err, double vendor_err, double floor, double alpha) {
  if (std::isnan(kernel_err) || std::isnan(vendor_err) || std::isnan(floor) || std::isnan(alpha)) return false;
  return kernel_err <= alpha * vendor_err + floor;
}

double vendor_floor(double ref_abs, DType out) {
  return ulp_of(ref_abs, out) + out_floor(out);
}

double narrow_softmax_tol(double tol32, double ref_abs, DType out, int64_t n) {
  if (out == DType::kF32) return tol32;
  return narrow_softmax_tol_of(tol32, ref_abs, unit_roundoff(out), min_subnormal(out), n);
}

}  // namespace assay
