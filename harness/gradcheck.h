// Finite-difference gradient checks of fp64 host backward references.
//
// A function f: R^n -> R^m is given by its fp64 host forward; its backward is a
// vector-Jacobian product g = J(x)^T v. The engine differences the forward and compares:
//   - directional derivative J u by central differences, D(h) = (f(x + h u) - f(x - h u)) / 2h,
//     at h and h/2, with optional Richardson extrapolation R = (4 D(h/2) - D(h)) / 3;
//   - the full Jacobian (one directional derivative per input) for tiny n;
//   - fast mode: the scalar v^T (J u) by differences against (J^T v)^T u from the backward,
//     for random u (input-sized) and v (output-sized, drawn from the value classes).
// The scalar check catches transposed and mis-indexed gradients cheaply: a wrong J^T v
// almost never agrees with a random projection.
//
// Tolerances follow from the step and the scale of the function, not from constants
// (the error model is spelt out at fd_directional). Only the fp64 host forward is ever
// differenced: never finite-difference a kernel in fp32 or narrower; its rounding
// (~u_32 |f| / h ~ 1e-2 |f| at the optimal step) swamps the signal. A GPU backward is
// compared with the fp64 host backward under the bound model instead, plus the scalar check.
//
// Library code: errors are Status values, results are structs; nothing asserts or exits.
//   [NR] W. H. Press et al., Numerical Recipes, 3rd ed., sec. 5.7 (step choice, Richardson).
//   [H]  N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/status.h"
#include "harness/values.h"

namespace assay {

/// The fp64 host forward: reads x[0, n), writes y[0, m).
using ForwardFn = std::function<void(const double* x, double* y)>;
/// The analytic backward (vector-Jacobian product): reads x[0, n) and the upstream gradient
/// v[0, m), writes g[0, n) = J(x)^T v, overwriting g.
using VjpFn = std::function<void(const double* x, const double* v, double* g)>;

/// A differentiable function as the engine sees it.
struct Differentiable {
  int64_t n = 0;      ///< inputs, >= 0
  int64_t m = 0;      ///< outputs, >= 0
  ForwardFn forward;  ///< required
  VjpFn vjp;          ///< required by the gradcheck_* functions, not by fd_*
  /// Optional: per output, a magnitude M_i(x) >= |f_i(x)| such that the forward's rounding
  /// error is at most about forward_ulps * u * M_i (for a GEMM, |A||B|: what the references
  /// return beside their outputs). Empty: the scale of the function, max_i |f_i| over the
  /// evaluation points, stands for every output; that covers small outputs beside large ones,
  /// but not a forward whose outputs all cancel (|f| << the terms it adds: a GEMM + bias near
  /// 0, x - mean with |mean| >> spread, logsumexp - x_c): give the magnitude there, or the
  /// check may fail a correct backward (the h, h/2 noise estimate catches most, not all).
  ForwardFn magnitude;
  /// Optional: y and the magnitude in one evaluation (y = forward, mag = magnitude), where they
  /// share their work (the softmax of an attention forward): fd_directional then evaluates each
  /// point once instead of twice.
  std::function<void(const double* x, double* y, double* mag)> forward_mag;
};

/// Options of the finite-difference engine.
struct FdOptions {
  bool richardson = true;  ///< return R = (4 D(h/2) - D(h)) / 3 instead of D(h)
  double step_factor = 1;  ///< multiplies the default step (tests only; > 0)
  /// The forward's own rounding error in units of u = 2^-53 times its scale (magnitude, or
  /// max |f|). The fp64 references err by a few roundings per output, mostly mean-zero.
  double forward_ulps = 16;
  /// Multiplies the estimated finite-difference error (truncation from the h, h/2 difference
  /// plus rounding) in a tolerance: the estimate is asymptotic, not a bound.
  double safety = 4;
};

/// A directional derivative by central differences.
struct FdDirectional {
  double h = 0;               ///< step of D(h) (a power of two); D(h/2) also evaluated
  std::vector<double> jvp;    ///< m values: estimate of J u_eff
  std::vector<double> err;    ///< m values: estimated |jvp - J u_eff| (truncation + rounding), >= 0
  std::vector<double> u_eff;  ///< n values: the direction actually differenced (u up to the rounding
                              ///< of x +- h u); compare the backward against this, not u
  double scale = 0;           ///< max_i of the forward's scale (|f_i| or magnitude) over the points
};

/// J u by central differences at x along u (n values, not all zero).
///
/// Step: h = cbrt(eps) * step_factor / max_i(|u_i| / max(|x_i|, 1)), rounded down to a power
/// of two, eps = 2^-52. Every coordinate moves by at most cbrt(eps) max(|x_i|, 1), so for
/// u = e_j this is the textbook h = cbrt(eps) max(|x_j|, 1) [NR 5.7], which balances the
/// truncation h^2 |f'''| / 6 against the rounding eps |f| / h when f varies on the scale of
/// max(|x|, 1). A power of two keeps h u_i and h/2 exact; the rounding of x +- h u is
/// removed by differencing along u_eff = ((x + h u) - (x - h u)) / 2h (exact subtraction).
///
/// Error estimate, per output i, with D1 = D(h), D2 = D(h/2), u = 2^-53:
///   rounding   r_k = forward_ulps * u * S_i / h_k + 2u |D_k|     (h_1 = h, h_2 = h/2)
///              S_i: output i's magnitude, or the function scale max_j |f_j| (see Differentiable);
///              the forward errs by <= forward_ulps u S_i at each point, the difference
///              quotient divides two such errors by 2h_k, plus its own two roundings.
///   truncation D1 - D2 = (3/4) c h^2 + noise with c = f'''[u,u,u] / 6 [NR 5.7], so
///     plain:      err = (4/3)|D1 - D2| + (7/3) r_1 + (4/3) r_2              (error of D1)
///     Richardson: err = |D1 - D2| + (r_1 + 4 r_2) / 3
///       R errs by (4 n_2 - n_1)/3 + O(h^4) (n_k: rounding noise of D_k, |n_k| <= r_k). |D1 - D2|
///       bounds the O(h^4) term with room to spare (it is 3x the h^2 error of D2), and it is
///       the empirical noise estimate: where noise dominates, D1 - D2 = n_1 - n_2, whose spread
///       is ~0.8 of that of R's noise (n_2 ~ 2 n_1, independent). That covers a forward that
///       errs more than its model says, on average; a Differentiable::magnitude covers it always.
///   Richardson returns u_eff = (4 u_eff2 - u_eff1)/3.
/// Errors (Status): missing forward, n or m negative, x or u non-finite, u zero, or a forward
/// value that is not finite at one of the four points.
StatusOr<FdDirectional> fd_directional(const Differentiable& f, const double* x, const double* u,
                                       const FdOptions& opts = {});

/// The full Jacobian by columns (fd_directional along e_j, h_j = cbrt(eps) max(|x_j|, 1)):
/// 4n forward evaluations, for tiny n.
struct FdJacobian {
  int64_t m = 0, n = 0;
  std::vector<double> jac;  ///< m x n row-major: jac[i*n + j] ~ df_i/dx_j
  std::vector<double> err;  ///< m x n: estimated error of each entry (fd_directional's model)
};
StatusOr<FdJacobian> fd_jacobian(const Differentiable& f, const double* x, const FdOptions& opts = {});

/// One scalar check <v, J u> (differences) against <J^T v, u> (backward).
struct ProjectionCheck {
  double fd = 0;           ///< v^T (J u_eff) from finite differences
  double analytic = 0;     ///< (J^T v)^T u_eff from the backward
  double discrepancy = 0;  ///< |fd - analytic| (NaN when either is NaN)
  /// allowed discrepancy: safety * sum_i |v_i| err_i + gamma_m sum_i |v_i jvp_i|
  ///   + gamma_n sum_j |g_j u_eff_j| + min_normal  (the two dot products' rounding, [H] (3.5))
  double tol = 0;
  double h = 0;                               ///< the step used
  ValueClass upstream = ValueClass::kNormal;  ///< class v was drawn from (fast mode)
  bool pass = false;                          ///< discrepancy <= tol (false for NaN)
};

/// The check along given u (n values) and v (m values).
StatusOr<ProjectionCheck> check_projection(const Differentiable& f, const double* x, const double* u, const double* v,
                                           const FdOptions& opts = {});

/// Options of a whole check.
struct GradCheckOptions {
  FdOptions fd;
  int projections = 7;  ///< fast mode: random (u, v) pairs, >= 1 (default: each upstream class once)
  uint64_t seed = 1;    ///< of the Philox streams for u and v
  /// Classes the upstream gradients v are drawn from, cycled over the projections: never
  /// constant only (a dV that reads the wrong row of dO is exact when every row of dO is equal).
  std::vector<ValueClass> upstream_classes = {ValueClass::kNormal,   ValueClass::kUniform, ValueClass::kLogUniform,
                                              ValueClass::kSameSign, ValueClass::kPareto,  ValueClass::kMeanSpread,
                                              ValueClass::kSmallInt};
  /// gradcheck(): the full Jacobian when n <= this and n*m <= 64*this; projections otherwise.
  int64_t jacobian_max_inputs = 24;
};

/// Outcome of a check. Fast mode fills `projections`; Jacobian mode the failing element.
struct GradCheckResult {
  bool pass = false;
  double max_discrepancy = 0;  ///< max |fd - analytic| over projections or Jacobian entries
  double max_ratio = 0;        ///< max discrepancy / tol (accuracy ratio; > 1 fails; NaN -> +Inf)
  double tol_at_max = 0;       ///< the tolerance where max_ratio occurs
  int failed_projection = -1;  ///< fast mode: first failing projection, -1 if none
  int64_t failed_row = -1;     ///< Jacobian mode: output index of the worst failing entry, -1 if none
  int64_t failed_col = -1;     ///< Jacobian mode: input index of that entry
  bool jacobian = false;       ///< which mode ran
  std::vector<ProjectionCheck> projections;
  std::string summary;  ///< one line, for a report
};

/// Fast mode: `projections` pairs, u_p ~ N(0,1) (U(-1,1) for odd p), v_p from
/// upstream_classes[p % size], Philox-seeded: deterministic for (seed, n, m).
StatusOr<GradCheckResult> gradcheck_projections(const Differentiable& f, const double* x,
                                                const GradCheckOptions& opts = {});

/// Full Jacobian: differences by columns against the rows J^T e_i of the backward (m calls),
/// entry by entry: |J_fd - J_an| <= safety * err_ij + 2u |J_fd| + min_normal.
StatusOr<GradCheckResult> gradcheck_jacobian(const Differentiable& f, const double* x,
                                             const GradCheckOptions& opts = {});

/// gradcheck_jacobian for tiny functions (see jacobian_max_inputs), else gradcheck_projections.
StatusOr<GradCheckResult> gradcheck(const Differentiable& f, const double* x, const GradCheckOptions& opts = {});

/// The draw fast mode uses: n values of class `cls` (ValueRecipe defaults, dtype fp64) from
/// Philox stream `stream` under `seed`.
std::vector<double> draw_values(ValueClass cls, uint64_t seed, uint64_t stream, int64_t n);

// ---- write semantics: overwrite or accumulate ----------------------------------------------

/// What a spec declares about a gradient output.
enum class GradWrite : uint8_t {
  kOverwrite,   ///< grad = J^T v; the buffer's previous contents are never read
  kAccumulate,  ///< grad += J^T v
};

/// Outcome of check_write_semantics.
struct WriteCheck {
  bool pass = false;
  int64_t first_bad = -1;  ///< first element outside its tolerance, -1 if none
  double max_err = 0;      ///< max |result - expected|
  double tol_at_bad = 0;   ///< the tolerance at first_bad
  std::string summary;
};

/// Runs `backward` (which writes its gradient into the n-element buffer it is given, as the
/// spec declares) on a copy of `prefill` and checks the result against
///   kAccumulate: prefill + grad,   kOverwrite: grad   (grad: the reference J^T v, n values).
/// roundings == 0: exact, result_j == fl(prefill_j + grad_j) (accumulate) or grad_j (NaN matches NaN).
/// roundings k >= 1: |result_j - expected_j| <= gamma_k(u) (|prefill_j| + mag_j), the error of
/// adding the k terms of the gradient into the buffer in any order ([H] (4.4)); mag_j
/// (n values, may be null: |grad_j|) is the gradient's magnitude term.
/// For kOverwrite pass a prefill of NaN (poison): a backward that reads it shows NaN.
/// Prefill an accumulating buffer from the value classes, never with zeros: an overwriting
/// backward is exact on a zero buffer.
WriteCheck check_write_semantics(const std::function<void(double* grad)>& backward, int64_t n, const double* prefill,
                                 const double* grad, GradWrite mode, int64_t roundings = 0,
                                 const double* mag = nullptr);

}  // namespace assay
