// Rounding-error bounds. Each formula cites its source.
// A bound is per element: tol = rel_out*|ref| + rel_mag*mag + floor, where
// `mag` is the magnitude term returned beside the reference (|A||B| for GEMM).
// Every op has two levels (BoundPair): a hard `ceiling` that a correct kernel
// never exceeds, and an `expected` level (probabilistic, Higham & Mary 2019)
// that drives warnings and the accuracy ratio error/bound.
//
// Sources, cited below by tag:
//   [H]   N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002.
//   [HM]  N. J. Higham, T. Mary, A new approach to probabilistic rounding error analysis,
//         SIAM J. Sci. Comput. 41(5), 2019.
//   [BHM] P. Blanchard, N. J. Higham, T. Mary, A class of fast and accurate summation
//         algorithms, SIAM J. Sci. Comput. 42(3), 2020 (blocked summation).
//   [BHLMP] P. Blanchard, N. J. Higham, F. Lopez, T. Mary, S. Pranesh, Mixed precision block
//         fused multiply-add: error analysis and application to GPU tensor cores, SISC 42(3), 2020.
//   [FHMP] M. Fasi, N. J. Higham, M. Mikaitis, S. Pranesh, Numerical behavior of NVIDIA tensor
//         cores, PeerJ Comput. Sci. 7:e330, 2021 (products exact, alignment and normalisation
//         by truncation inside the block).
//   [CGL] T. F. Chan, G. H. Golub, R. J. LeVeque, Algorithms for computing the sample
//         variance: analysis and recommendations, Amer. Statist. 37(3), 1983.
//   [MG]  M. Milakov, N. Gimelshein, Online normalizer calculation for softmax, 2018.
//   [CUDA] CUDA C++ Programming Guide, appendix "Mathematical Functions", tables of maximum
//         ulp errors (standard functions) and error bounds (intrinsic functions).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "harness/bound_core.h"
#include "harness/dtype.h"

namespace assay {

// gamma_n, gamma_tilde, kDefaultLambda and ElementBound: harness/bound_core.h (host and device).

/// The two levels of one op's bound: `expected` <= `ceiling` coefficient by coefficient.
struct BoundPair {
  ElementBound ceiling;   ///< hard: a correct kernel never exceeds it (failure)
  ElementBound expected;  ///< probabilistic: exceeding it is a warning; error/expected is the accuracy ratio
};

/// Where an error falls against a BoundPair.
enum class BoundLevel : uint8_t { kWithinExpected, kAboveExpected, kAboveCeiling };

/// err / b.tol(ref_abs, mag); 0 when err == 0; +Inf when tol == 0 < err; NaN err gives NaN.
double accuracy_ratio(double err, double ref_abs, double mag, const ElementBound& b);
/// kAboveCeiling when err > ceiling (or err is NaN), kAboveExpected when err > expected.
BoundLevel classify(double err, double ref_abs, double mag, const BoundPair& b);

// ---- dot / GEMM ----------------------------------------------------------------------

/// How the kernel accumulates a dot product.
enum class Accumulation : uint8_t {
  /// Scalar loop (CUDA cores): each product and sum rounded to nearest in `acc`, FMA or
  /// not, any order ([H] 3.1).
  kRoundNearest,
  /// Tensor-core block FMA: `block` exact products plus the running accumulator are
  /// aligned to the largest exponent and truncated, summed, and the sum is normalised by
  /// truncation (round toward zero) to `block_bits` significant bits ([FHMP];
  /// measured on Hopper for bf16-in/fp32-acc: same-sign data at K=8192 err ~260 * 2^-24 |A||B|).
  kTruncatingBlock,
};

/// What the kernel promises about a GEMM: input, accumulation and output types.
/// Inputs are the kernel's own rounded values (tf32-rounded, fp8-quantised...); the
/// reference reads exactly those (dequantised by the fp8 scales), so input rounding is
/// never kernel error and `in` only decides whether products are exact in the block.
struct GemmBoundModel {
  DType in = DType::kF32;
  DType acc = DType::kF32;
  DType out = DType::kF32;
  int64_t k = 0;
  double alpha_abs = 1;         ///< |alpha|, scales the accumulated underflow floor
  bool has_beta = false;        ///< beta != 0 (one more product and sum)
  DType ref_acc = DType::kF64;  ///< the reference's own arithmetic (its error is added)

  Accumulation accumulation = Accumulation::kRoundNearest;
  int64_t block = 1;               ///< b: products per block FMA (kTruncatingBlock), >= 1
  int block_bits = 0;              ///< significand bits kept inside the block, hidden bit included;
                                   ///< 0: those of `acc`. Hopper fp8 "fast accumulate" keeps about 14
                                   ///< (DeepSeek-V3 technical report, 2024, sec. 3.3.2).
  int64_t promote_every = 0;       ///< products after which the block accumulator is added into a
                                   ///< round-to-nearest `acc` accumulator (0: never; cuBLASLt fp8
                                   ///< without fast accumulate promotes, DeepSeek-V3 uses 128)
  int64_t split_k = 1;             ///< partial dot products over k/split_k, then summed in `acc`
  bool any_split = false;          ///< the kernel may split k into any number of chunks of any lengths,
                                   ///< summed in `acc` in any tree (library heuristics pick split-K or
                                   ///< stream-K per shape, undocumented): the ceiling is the largest over
                                   ///< those decompositions; split_k then only shapes the expected level
  double scale_a = 1;              ///< |fp8 dequantisation scale of A| (1: none); ref uses scale_a*A
  double scale_b = 1;              ///< |fp8 dequantisation scale of B|
  double scale_out = 1;            ///< |quantisation scale of the output|: stored = rn_out(scale_out*C),
                                   ///< compared as stored/scale_out
  double lambda = kDefaultLambda;  ///< confidence parameter of the expected level
  /// alpha*op(A)op(B) is rounded to `out` before beta*C is added (with beta != 0 and `out`
  /// narrower than `acc`): cuBLAS and cuBLASLt with bf16/fp16 output add beta*C to the product
  /// already converted, so the product's rounding is relative to |alpha P|, not to |ref|, and
  /// under cancellation (alpha P ~ -beta C) it is far above u_out |ref|. See gemm_bounds.
  bool product_to_out = false;
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
/// With the extended fields it is gemm_bounds(m).ceiling (identical for the defaults).
ElementBound gemm_ceiling(const GemmBoundModel& m);

/// Both levels of the GEMM bound, mag = |alpha| |A||B| + |beta||C| (dequantised values).
/// Ceiling, with u = u_acc, x/(1-x) >= prod(1+delta_i) - 1 for sum(delta bounds) = x < 1:
///   round-to-nearest: x = (path + 2 + s)*u with path = k, or ceil(k/S) + S - 1 under
///     split-K S ([H] (3.5): only the rounding count on each term's path matters), s = one
///     rounding per fp8 scale that is not a power of two;
///   truncating block: x = m*eta + r*u, eta = 2*u_b*(b+1) per block of b products
///     (each aligned term and the normalised sum lose < 1 ulp = 2u_b of the block's
///     largest magnitude [FHMP]; the blocked-summation recurrence of [BHM] and
///     [BHLMP] with truncation in place of rounding), m = ceil(chunk/b) chained
///     blocks, r = RN roundings after the blocks (promotion, split-K partials, alpha, beta,
///     scales, products when they are not exact in the block).
/// any_split: a term in a chunk of c products passes ceil(min(c, P)/b) blocks, ceil(c/P)
///   promotions (P = promote_every) and at most S - 1 sums of partials; with S nonempty chunks
///   c <= k - S + 1, so the ceiling takes the largest x over S = 1..k (round-to-nearest: path
///   k already bounds every order, [H] (3.5)). A model block b no larger than the hardware's b'
///   bounds it: a block of n <= b' products loses < 2u_b (n + 1) S_j, and
///   (b+1) ceil(k/b) >= k + ceil(k/b) >= k + ceil(k/b') (tests/harness/bounds_ext_test.cpp).
/// product_to_out (beta != 0, out narrower than acc): c^ = rn_out(rn_acc(rn_out(alpha P^) + beta c))
///   adds, to the ceiling above, the rounding of the product term, u_out |alpha P^| + eta_out
///   ([H] (2.4) with gradual underflow, eta_out half the subnormal spacing of `out`), and one
///   more acc rounding of the sum; |alpha P^| <= (1 + gamma) mag, so rel_mag grows by
///   (u_out + u_acc (1 + u_out)) (1 + gamma) and the floor by eta_out, each carried through the
///   later roundings (tests/harness/bounds_ext_test.cpp emulates this order).
/// Expected: round-to-nearest gamma~_{path+2+s}(lambda) [HM] sec. 3; truncation is
/// biased (not mean-zero), so its expected level keeps the mean loss m*eta/2 (half the
/// worst case for uniformly distributed discarded bits) and treats only the rest
/// probabilistically: x = m*eta/2 + lambda*sqrt(m*(b+1) + r)*max(u_b, u).
BoundPair gemm_bounds(const GemmBoundModel& m);

/// The product_to_out terms alone (see above), for a model whose ceiling adds the output's
/// rounding itself (gemm_tc): rel_mag = (u_out + u_acc (1 + u_out)) (1 + u_acc) mag_slack,
/// mag_slack >= |alpha P^| / mag, and floor = (1 + u_acc) eta_out; zeros when `out` is not a
/// float narrower than `acc`.
ElementBound product_to_out_terms(DType out, DType acc, double mag_slack);

/// True when every partial sum of an integer-valued GEMM with |a|,|b| <=
/// int_range, |alpha|,|beta|,|c| small is exactly representable in `acc`
/// (so any summation order gives the exact result): k*int_range^2*|alpha| +
/// |beta|*|c| < 2^(p) with p the precision of `acc` (24 for fp32); for an
/// integer `acc`, < max_finite + 1. False unless |alpha|, |beta| (and |c| when
/// beta != 0) are integers.
bool gemm_exact_tier_holds(DType acc, int64_t k, int64_t int_range, double alpha_abs, double beta_abs,
                           double c_abs_max);

/// The exact tier for a kernel described by a GemmBoundModel: every partial sum must stay
/// below 2^p, p the fewest significand bits anywhere on the path: `acc`, the truncating block
/// (block_bits), and a float `out` (the result itself must be representable); integers
/// |a|, |b| <= int_range must be exact in `in`. fp8 scales must be powers of two (the
/// dequantised products are then 2^e times integers, and the scaled result stays in the normal
/// range of `acc` and `out`); with beta != 0 they must be 1 (C is not scaled). An integer `acc`
/// defers to gemm_exact_tier_holds(acc, ...). False whenever exactness is not guaranteed.
bool gemm_exact_tier_holds(const GemmBoundModel& m, int64_t int_range, double beta_abs, double c_abs_max);

/// Exact tier generator range: the largest r >= 0 such that every integer in [-r, r] is
/// exact in `in` and every partial sum of a reduction of length k of products (|sum| <=
/// k r^2, `products`) or of plain values (|sum| <= k r) is exact in `acc`; then any order,
/// FMA, truncating blocks or split-K give the exact result, compared bit for bit.
/// Agrees with gemm_exact_tier_holds(acc, k, r, 1, 0, 0). 0 when even r = 1 fails.
int64_t exact_tier_int_range(DType in, DType acc, int64_t k, bool products = true);

/// Significand precision p in bits, hidden bit included (fp32 24, bf16 8); 0 for integers.
int precision_bits(DType t);

// ---- reductions --------------------------------------------------------------------------

/// What a row reduction kernel promises: n values of `in` reduced in `acc`, result in `out`.
struct ReductionModel {
  DType in = DType::kF32;
  DType acc = DType::kF32;
  DType out = DType::kF32;
  int64_t n = 0;
  DType ref_acc = DType::kF64;
  double lambda = kDefaultLambda;
};

/// The model's numbers for the shared formulas of harness/bound_core.h.
RowArith row_arith(const ReductionModel& m);

/// Sum, mag = sum |x_i|:  |s^ - s| <= gamma_{n-1}(u_acc) * sum|x_i|  ([H] (4.4), any order)
/// + u_out|s| + floor (flush-to-zero of n inputs and n-1 sums, < min_normal each).
/// Expected: gamma~_{n-1}(lambda) [HM] sec. 3.
BoundPair sum_bounds(const ReductionModel& m);

/// Mean, mag = sum|x_i| / n: the sum plus up to two roundings for /n or *(1/n):
/// gamma_{n+1}(u_acc) * mean|x|  ([H] (4.4) and Lemma 3.3).
BoundPair mean_bounds(const ReductionModel& m);

// VarianceMags (what the variance bound needs from the reference): harness/bound_core.h.

/// Variance with ddof (0 population, 1 sample) of one row, for a kernel that is
/// two-pass (mean, then sum of squared deviations) or Welford / Chan updating.
/// ref = V, mag = X*W (variance_mag), the rest is per row in `floor`:
///   |V^ - V| <= gamma_{n+4} V + (1+gamma_{n+4})/(n-ddof) * [ u X~ W (n^2+28n)/2
///               + n (gamma_{n+1} A)^2 + n (u X~ (n+14)/2)^2 ],   X~ = X / (1 - u(n+14)/2)
/// Two-pass: sum (x_i - mu^)^2 = S + n (mu^ - mu)^2 with |mu^ - mu| <= gamma_{n+1} A, then
/// gamma_{n+4} for the subtraction, square, n-1 sums and the division ([CGL],
/// [H] sec. 1.9). Welford: the running mean errs by e_k <= u X~ (k+14)/2
/// (local error u X~ (1 + 6/k), damped by (1 - 1/k)); each update (x-M_{k-1})(x-M_k)
/// then errs by W (e_k + e_{k-1}) + e_{k-1} e_k (bounds.cpp derives it; [CGL] give
/// the kappa*n*u form). These conditioning terms grow with the mean (X ~ |mean|) and the
/// spread, linearly in u, while a one-pass E[x^2]-E[x]^2 errs by ~u*mean^2 (kappa^2):
/// it exceeds the ceiling once |mean|/W >> n. Chan's pairwise merge of Welford partials
/// errs less (mean error ~log n) and is checked empirically in the tests.
/// n - ddof <= 0: the variance is NaN (0/0): every coefficient is +Inf.
/// Expected: gamma~ in place of gamma, and sqrt growth of the mean error [HM]:
/// u X~ W (n^2+28n)/2 -> (4/3) lambda u X~ W (n+14)^1.5.
BoundPair variance_bounds(const ReductionModel& m, int ddof, const VarianceMags& g);
/// mag of variance_bounds: X*W.
double variance_mag(const VarianceMags& g);

enum class NormKind : uint8_t { kL1, kL2, kLinf };

/// Vector norms of one row, mag unused (0): all relative to |ref| plus a floor.
///   L1: sum of |x|, non-negative terms: gamma_{n-1} relative ([H] (4.4)).
///   L2: sum of squares gamma_n relative, then sqrt: (1 - sqrt(1-gamma_n)) <= gamma_n and
///       one sqrt rounding, u (IEEE, 0 ulp) or 3u (fast_sqrt: 1 ulp, [CUDA] sqrtf with
///       -prec-sqrt=false); floor sqrt(2n min_normal) for squares flushed to zero.
///   Linf: max|x| is exact: output rounding only.
BoundPair norm_bounds(const ReductionModel& m, NormKind kind, bool fast_sqrt = false);

// ---- softmax, log-softmax, cross-entropy -----------------------------------------------------

/// A softmax-family kernel over rows of length n.
struct SoftmaxModel {
  DType in = DType::kF32;
  DType acc = DType::kF32;
  DType out = DType::kF32;
  int64_t n = 0;
  DType ref_acc = DType::kF64;
  double lambda = kDefaultLambda;
  bool fast_math = false;  ///< -use_fast_math: __expf, __logf, __fdividef ([CUDA] intrinsics)
  int64_t rescales = 0;    ///< online softmax [MG]: most running-max rescalings on one
                           ///< term's path (0: max first, then exp; n-1 worst for a serial scan)
};

/// What the softmax-family bounds need per row (the reference returns them).
struct SoftmaxRowMags {
  double weighted_dev = 0;  ///< D = sum_j y_j |x_j - max|  (y = softmax)
  double log_sum_exp = 0;   ///< L = log sum_j exp(x_j - max) in [0, log n]
};

/// Softmax y_i = e^{t_i}/Z, t_i = x_i - max, Z = sum e^{t_j}; per row, mag_i = y_i |t_i|.
/// Each exp errs by phi_i <= kappa (a + b|t_i|): a = (1+R) c0 + R u, c0 = 5u (expf 2 ulp
/// + rounding) or the same for __expf's constant part, b = (c1 + u)(1+u) with c1 = 0 or
/// 1.173*2u (__expf: 2 + floor(1.173|x|) ulp [CUDA]) and u|t| from rounding x - max;
/// kappa = exp(a + b*T) with T the largest |t| whose exp does not underflow. The sum Z^
/// errs relatively by R_Z = Phi(1+gamma_{n-1}) + gamma_{n-1} + n min_normal, Phi = kappa (a + bD)
/// ([H] (4.4) for the sum of positive terms; Z >= 1 because the max term is e^0). With the
/// division (2u, or 5u for __fdividef / rcp+mul), K = (1+c_div)/(1-R_Z):
///   |y^_i - y_i| <= [(K-1) + K kappa a] y_i + K kappa b y_i|t_i| + floor.
/// Expected: gamma~_{n-1}(lambda) in place of gamma_{n-1}. -inf entries (y = 0, mag 0)
/// and all -inf rows (NaN, as PyTorch) are the NaN/Inf pattern's business.
BoundPair softmax_bounds(const SoftmaxModel& m, const SoftmaxRowMags& row);

/// The model with its dtypes looked up, for softmax_level / log_softmax_level of
/// harness/bound_core.h (the arithmetic softmax_bounds and log_softmax_bounds run, on the
/// host or in a device reference).
SoftmaxScalars softmax_scalars(const SoftmaxModel& m);

/// Log-softmax z_i = t_i - log Z; per row, mag_i = |t_i| (|x_i - max|):
///   |z^_i - z_i| <= u|t_i| + l_Z + e_log(L + l_Z) + u|z^_i|, l_Z = -log(1 - R_Z) (R_Z as for
/// softmax), e_log(L) = 1.5 ulp of L (logf 1 ulp) or, fast, max(2^-21.41, 3.5 ulp) (__logf
/// on [0.5, 2] absolute, else 3 ulp [CUDA]); the row terms go in floor.
BoundPair log_softmax_bounds(const SoftmaxModel& m, const SoftmaxRowMags& row);

/// Softmax with fp16/bf16 intermediates (Arithmetic::narrow_intermediates): the ceiling of a
/// softmax whose exponentials are rounded to the storage type before the sum and the division,
/// from tol32, the fp32 model's (softmax_bounds), |ref| and the row length n; tol32 itself for
/// fp32. cuDNN's fp16/bf16 CUDNN_SOFTMAX_ACCURATE forward is not "fp32 throughout, one rounding
/// at the store". Measured on cuDNN 9.14, H200, fp16, rows 2 n 1000 (row 0, N(0, 2) logits), against
/// softmax_bounds' fp32 model tol32 = u_o |y| + (1 + u_o) E + s/2 (E bounds the fp32 quotient q
/// before the store, the fp64 reference's share included; u_o = 2^-11; s the storage type's
/// subnormal spacing):
///   element 38: got 0.002567291259765625, ref 0.0025688449605323666, |err| 1.5537e-06
///               = 1.24 u_o|y| (0.81 ulp, 1.63 half-ulps) > tol32 1.4427e-06 (1.15 u_o|y|)
///   element 88: got 0.0012683868408203125, ref 0.0012691891616571089, |err| 8.02e-07
///               = 1.29 u_o|y| (0.84 ulp, 1.68 half-ulps) > tol32 7.28e-07 (1.18 u_o|y|)
/// The store alone errs by at most half an ulp (<= u_o|y|) plus E (~0.15 u_o|y| here), so an
/// intermediate is rounded to the storage type. Of the documented candidates:
///  (a) the exponentials e_i = exp(t_i) are rounded to the storage type before they are summed
///      and divided (e.g. written to y, then normalised in a second pass): e~_i = e_i (1 + d_i)
///      + eta_i, |d_i| <= u_o, |eta_i| <= s/2 (an exponential in the subnormal range). With the
///      same fp32 roundings, the quotient q_a of the unrounded exponentials is within E of y.
///      The numerator moves by the factor 1 + d_i; Z~ = sum_j e~_j (1 + theta_j), a sum of
///      positive terms, moves relatively by at most u_Z = u_o + n s (the eta_j over Z~ >= 0.99:
///      Z >= 1 as its largest term is e^0, and the fp32 sum errs by far less than 1%); eta_i
///      adds at most s to the quotient. So |q~ - y| <= rho (|y| + E) + E + s with
///      rho = (1 + u_o)/(1 - u_Z) - 1 (= (1 + u_o)^2 - 1 to first order without underflow; it
///      also covers only the numerator rounded, a rounded 1/Z, or a truncating final store,
///      each one extra relative u_o). The store then gives
///      |y^ - y| <= u_o (|y| + E~) + E~ + s/2, E~ = rho |y| + (1 + rho) E + s, which is at most
///      (1 + rho) tol32 + rho |y| + (1 + u_o) s.
///  (b) t_i = x_i - max rounded to the storage type: exp(t~_i) errs relatively by u_o |t_i|,
///      an extra u_o |t_i| y_i (and u_o D in Z): at these elements |t_i| = 3.56 and 4.27, so
///      4.47e-06 and 2.65e-06 more, above (a)'s 2.7e-06 and 1.4e-06.
/// (a) explains both: its bound is 4.17e-06 at element 38 (err/bound 0.37) and 2.10e-06 at
/// element 88 (0.38). Even its numerator-only case (rho = u_o: 2.70e-06, 1.35e-06) would; (a)
/// is kept whole because whether cuDNN sums the rounded or the fp32 exponentials is not known.
/// (b) is larger and not needed, so the ceiling uses (a). Log-softmax (which passed under its fp32
/// model) and fp32 data are left as they are (fp32: u_o = 0, rho = 0).
double narrow_softmax_tol(double tol32, double ref_abs, DType out, int64_t n);

/// Cross-entropy of one row, loss = log Z - t_c = -z_c: the log-softmax bound with
/// mag = |x_c - max| (the reference's target_dev).
BoundPair cross_entropy_bounds(const SoftmaxModel& m, const SoftmaxRowMags& row);

/// Absolute tolerance of a mean over `rows` per-row losses (reduction='mean'):
///   (1+gamma_{rows+1}) * mean(row tol) + gamma_{rows+1} * mean|loss|   ([H] (4.4)).
/// `expected` selects gamma~(lambda).
double cross_entropy_mean_tol(const SoftmaxModel& m, int64_t rows, double mean_row_tol, double mean_abs_loss,
                              bool expected = false);

// ---- LayerNorm, RMSNorm -------------------------------------------------------------------------

/// A normalisation kernel over rows of length n: statistics in `acc`, eps added before rsqrt.
struct NormModel {
  DType in = DType::kF32;
  DType acc = DType::kF32;
  DType out = DType::kF32;
  int64_t n = 0;
  double eps = 1e-5;
  DType ref_acc = DType::kF64;
  double lambda = kDefaultLambda;
  bool fast_math = false;  ///< rsqrt via approximate sqrt and reciprocal (1 ulp each)
};

// LayerNormRowMags (what LayerNorm's bound needs per row): harness/bound_core.h.

/// The model's numbers for the shared formulas of harness/bound_core.h: y's arithmetic from
/// `m`, the saved statistics' as fp32 (properties/norms.cpp).
NormScalars norm_scalars(const NormModel& m);

/// LayerNorm y_i = gamma_i (x_i - mu) rstd + beta_i, rstd = 1/sqrt(V + eps), population
/// variance, mean and variance two-pass or Welford (as variance_bounds). Per row,
/// mag_i = |gamma_i xhat_i|:
///   rstd errs relatively by rho = (1/sqrt(1-r') - 1) then the rsqrt (rsqrtf 2 ulp: 5u),
///   r' = (1+r)(1+u) - 1, r = (e_V + u eps)/(V + eps), e_V the variance ceiling;
///   |y^_i - y_i| <= [(1+rho)(1+u)^3 - 1] |gamma_i xhat_i| + max|gamma| e_mu rstd (1+rho)(1+u)^3
///                  + u|y^_i|,  e_mu = max(gamma_{n+1} A, u X~ (n+14)/2)   ([H] Lemma 3.3).
/// The max|gamma| term goes in floor. r' >= 1: no bound (+Inf).
BoundPair layernorm_bounds(const NormModel& m, const LayerNormRowMags& row);

/// RMSNorm y_i = gamma_i x_i / sqrt(mean(x^2) + eps); per row (mean_sq = mean(x^2)), mag unused:
///   mean of squares errs relatively by gamma_{n+2} (positive terms, [H] (4.4)), plus flushed
///   squares (2n+1) min_normal / n absolute; rstd as LayerNorm; two products and the output:
///   relative (1+rho)(1+rsqrt)(1+u)^2 - 1 of |y_i|.
BoundPair rmsnorm_bounds(const NormModel& m, double mean_sq);

// ---- elementwise: ulps ------------------------------------------------------------------------------

/// Distance between a and b in steps of `t`'s representable values, ordered by sign and
/// magnitude (+0 and -0 are the same point; the largest finite value is 1 step from Inf).
/// Both NaN: 0; one NaN, or a value `t` cannot hold (Inf in e4m3): UINT64_MAX. Values not in
/// `t` are rounded to it first (RNE). Integer types: |a - b| after rounding to integers.
uint64_t ulp_distance(double a, double b, DType t);

/// Spacing of `t`'s values at |x|: 2^(floor(log2|x|) - p + 1), at least the smallest
/// subnormal, at most the spacing at max_finite; 1 for integer types.
double ulp_of(double x, DType t);

/// A documented fast-intrinsic accuracy: how it is stated in [CUDA] "Intrinsic Functions".
enum class FastKind : uint8_t {
  kNone,        ///< no intrinsic: -use_fast_math leaves the function as it is
  kUlp,         ///< `ulp` ulps (vs the correctly rounded result)
  kUlpLinear,   ///< ulp + floor(slope * |x|) ulps (__expf, __exp10f)
  kAbsInRange,  ///< abs_err absolute for x in [lo, hi]; otherwise `ulp` ulps, or no bound if ulp < 0
  kRelative,    ///< rel relative (__tanhf: 2^-11)
  kDerived,     ///< composed of other intrinsics; elementwise_budget derives it
};

struct FastBound {
  FastKind kind = FastKind::kNone;
  double ulp = 0;
  double slope = 0;
  double abs_err = 0;
  double lo = 0, hi = 0;
  double rel = 0;
};

/// One row of the accuracy table: [CUDA] Table "Single-Precision Mathematical Standard
/// Library Functions with Maximum ULP Error", the intrinsic -use_fast_math substitutes and its
/// bound, and the double-precision table's entry (-1: not listed). Ulps are against the
/// correctly rounded result (so against the exact value add 0.5). The guide says its bounds
/// come from extensive but not exhaustive tests.
struct MathFnAccuracy {
  std::string_view name;       ///< fp32 name: "expf", "x/y", ...
  double ulp_f32;              ///< precise (default flags: -prec-div=true, -prec-sqrt=true)
  std::string_view intrinsic;  ///< what -use_fast_math substitutes ("" if nothing)
  FastBound fast;              ///< its bound (kind kNone: same as precise)
  double ulp_f64;              ///< the fp64 function's bound, -1 if not tabulated
};

/// The table, in the guide's order.
std::span<const MathFnAccuracy> cuda_math_table();
/// Row by fp32 name ("expf", "tanhf", "x/y", "1/x", "sqrtf", ...); nullptr if absent.
const MathFnAccuracy* find_math_fn(std::string_view name);

/// Allowed |y^ - y| (absolute) for a kernel result y^ of `fn` at argument x whose exact value
/// is y, written in `out` (fp32 or fp64 computed natively; fp16/bf16 computed in fp32 then
/// rounded, adding half an ulp of `out`), precise or under -use_fast_math (which also flushes
/// subnormals: + min_normal(fp32)). Ceiling: (N + 0.5) ulps of the computing type at |y|
/// (at the larger neighbouring binade), N from the table; absolute/relative forms as stated;
/// __tanf and __powf derived from their documented implementations. +Inf where the guide
/// states no bound (__sinf outside [-pi, pi]). `x2` is the second argument (y of powf, x/y).
/// There is no accumulation, so the expected level equals the ceiling for elementwise ops.
double elementwise_budget(const MathFnAccuracy& fn, bool fast, double x, double y_exact, DType out, double x2 = 0);
/// The same in ulps of `out` at |y|.
double elementwise_budget_ulps(const MathFnAccuracy& fn, bool fast, double x, double y_exact, DType out, double x2 = 0);

// ---- vendor-relative ---------------------------------------------------------------------------------

/// kernel_err <= alpha * vendor_err + floor (both errors against the same high-precision
/// reference). False when any argument is NaN. Use vendor_floor so that a vendor error of 0
/// does not demand a bit-exact kernel.
bool vendor_relative_ok(double kernel_err, double vendor_err, double floor, double alpha);
/// Floor for vendor_relative_ok: one ulp of `out` at |ref| (a kernel may round the other way
/// from the vendor), plus half the smallest subnormal of `out`.
double vendor_floor(double ref_abs, DType out);

}  // namespace assay
