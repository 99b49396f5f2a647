// The "gradcheck" relation of the backward specs: a finite-difference projection
// check of the kernel's gradients, on the host, from the op's properties hook (OpDef::properties);
// on the device path its sums are reduced on the device (references/device/gradcheck_f64.h,
// DeviceReference::properties) and judged here alike.
//
// A backward kernel returns g = J(x)^T v for a forward f (attention: (Q, K, V) -> O; conv
// backward-data: x -> y, backward-filter: w -> y) and the upstream gradient v (dO, dY). Along one
// direction u over the differentiated inputs (random signs seeded from the case,
// harness/gradcheck_direction.h: a fraction of a nanosecond an element, where a normal direction
// cost over a hundred, and the same signs on the device)
//   fd     = sum_i v_i (J u)_i          central differences of the fp64 forward
//                                       (harness/gradcheck.h fd_directional, Richardson); for a
//                                       forward linear in the operands (conv), f(u) itself
//   kernel = sum_l u_l g_l              the kernel's own gradients (first launch)
// and the two agree within
//   tol = 4 sum_i |v_i| err_i                       the differences' error estimate (x the safety 4;
//                                                   linear: the forward's rounding bound, x 1)
//       + sum_l |u_l| (tol_l + dev_l)               the kernel's ceiling per element (OutputRef.tol),
//                                                   plus any declared deviation of the spec's gradient
//                                                   from the exact J^T v (attention: the saved,
//                                                   rounded O and LSE it differentiates from)
//       + gamma_{n+m}(2^-53) (sum_l |u_l g_l| + sum_i |v_i (J u)_i|)   the two contractions' rounding
//       + min_normal
// (u stands for u_eff, the direction actually differenced). On the device path J u is
// evaluated beside the device reference, conv's at u, attention_bwd's by the same differences
// (references/device/attention_fd_f64.h), and only the six sums come back. A disagreement is
// one FailureKind::kProjection failure with a one-line detail. Cases with a non-finite input,
// upstream or kernel gradient, or an unchecked element (tol = +Inf), are skipped: the element
// checks own those.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/case.h"
#include "harness/gradcheck.h"
#include "harness/gradcheck_direction.h"
#include "harness/op.h"
#include "harness/values.h"
#include "harness/verdict.h"
#include "references/device/gradcheck_f64.h"

namespace assay {

/// The relation name the backward specs accept.
inline constexpr const char* kGradcheckRelation = "gradcheck";

inline bool wants_gradcheck(const Case& c) {
  auto it = c.params.find("relation");
  return it != c.params.end() && it->is_string() && it->get<std::string>() == kGradcheckRelation;
}

/// A HostTensor's rows x cols elements, dense row-major.
inline std::vector<double> pack_dense(const HostTensor& h) {
  std::vector<double> v(static_cast<size_t>(h.v.rows * h.v.cols));
  for (int64_t i = 0; i < h.v.rows; ++i)
    for (int64_t j = 0; j < h.v.cols; ++j) v[static_cast<size_t>(i * h.v.cols + j)] = h.at(i, j);
  return v;
}

/// One differentiated input: its value and the kernel's gradient of it.
struct GradOperand {
  std::string name;            ///< the gradient's tensor name ("dQ")
  HostTensor x;                ///< the input (decoded)
  HostTensor grad;             ///< the kernel's gradient (first launch, decoded), same rows x cols
  const OutputRef* ref = nullptr;  ///< the gradient's reference and ceiling, dense
  std::vector<double> dev;     ///< optional, dense: declared |g_spec - J^T v| per element
};

/// Everything the check needs: forward over the operands packed in order (each dense), the
/// upstream gradient (dense, the forward's m outputs), and a seed.
struct GradProblem {
  std::vector<GradOperand> operands;
  std::vector<double> upstream;
  ForwardFn forward;    ///< packed operands -> m outputs
  ForwardFn magnitude;  ///< optional (see Differentiable::magnitude)
  /// Optional: forward and magnitude in one evaluation (Differentiable::forward_mag).
  std::function<void(const double* x, double* y, double* mag)> forward_mag;
  /// > 0: the forward is linear in the operands (f(x) = J x with J independent of x, as conv is
  /// in either operand), and no output sums more than linear_terms products. J u is then f(u),
  /// one forward_mag evaluation instead of differences at four points: the fp64 forward's
  /// rounding is its only error, at most gamma_T(2^-53) times the magnitude sum_j |J_ij u_j|
  /// [H, sec. 3.1], a bound where the differences' error is an estimate.
  int64_t linear_terms = 0;
  uint64_t seed = 1;
  std::string label = "<v, J u>";  ///< how the detail names the contraction ("<dO, J u>")
};

/// The seed of a case's direction: its id hashed (deterministic per case).
inline uint64_t gradcheck_seed(const Case& c) {
  const std::string id = c.id();
  return fnv1a64(id.data(), id.size()) ^ 0x9e3779b97f4a7c15ull;
}

/// The direction of a problem: n signs gradcheck_sign(seed, l), 64 per Philox block.
inline std::vector<double> gradcheck_signs(uint64_t seed, int64_t n) {
  std::vector<double> u(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 64) {
    const uint64_t bits = value_core::philox(seed, static_cast<uint64_t>(b) >> 6, kGradcheckSignStream).u64(0);
    for (int64_t l = b; l < std::min<int64_t>(n, b + 64); ++l)
      u[static_cast<size_t>(l)] = ((bits >> (l - b)) & 1) != 0 ? -1.0 : 1.0;
  }
  return u;
}

/// The verdict on a problem's sums (host or device): at most one kProjection failure. err_factor
/// scales sum |v| err (4 for central differences, whose error is an estimate; 1 for a linear
/// forward's rounding bound); `how` says how J u was evaluated.
inline void judge_grad_projection(const GradSums& s, double err_factor, const std::string& how,
                                  const std::string& label, const std::string& names, std::vector<Failure>& out) {
  if (s.skip || s.n == 0 || s.m == 0) return;
  const double tol = err_factor * s.fd_err + s.ceil + gamma_n(s.n + s.m, 0x1p-53) * (s.kern_abs + s.fd_abs) + DBL_MIN;
  const double diff = std::fabs(s.kern - s.fd_val);
  if (!(diff <= tol))
    out.push_back({FailureKind::kProjection, "", 1, -1,
                   fmt::format("gradcheck: {} = {:.10g} {}, {:.10g} from the kernel's {}; |diff| {:.3g} > tolerance "
                               "{:.3g} (forward {:.3g}, ceiling {:.3g})",
                               label, s.fd_val, how, s.kern, names, diff, tol, err_factor * s.fd_err, s.ceil)});
}

inline std::string operand_names(const GradProblem& p) {
  std::string names;
  for (const auto& o : p.operands) names += (names.empty() ? "" : ", ") + o.name;
  return names;
}

/// The words the failure uses for J u evaluated at u on the device (a linear forward).
inline constexpr const char* kJvpOnDevice = "by the fp64 forward at u (linear, on the device)";

/// The sums of a problem on the host, the factor on sum |v| err (err_factor) and the words for
/// how J u was evaluated; false where the relation skips the case (a non-finite input, gradient,
/// tolerance, upstream element or forward point: the element checks own those).
inline bool grad_projection_sums(const GradProblem& p, GradSums& s, double& err_factor, std::string& how) {
  s = GradSums{};
  std::vector<double> x, g, tl;
  for (const auto& o : p.operands) {
    const std::vector<double> xv = pack_dense(o.x), gv = pack_dense(o.grad);
    if (o.ref == nullptr || o.ref->tol.size() != xv.size() || gv.size() != xv.size() ||
        (!o.dev.empty() && o.dev.size() != xv.size()))
      return false;
    for (size_t l = 0; l < xv.size(); ++l) {
      const double t = o.ref->tol[l] + (o.dev.empty() ? 0.0 : o.dev[l]);
      if (!std::isfinite(xv[l]) || !std::isfinite(gv[l]) || !std::isfinite(t)) return false;
      x.push_back(xv[l]);
      g.push_back(gv[l]);
      tl.push_back(t);
    }
  }
  const int64_t n = static_cast<int64_t>(x.size()), m = static_cast<int64_t>(p.upstream.size());
  if (n == 0 || m == 0) return false;
  for (double v : p.upstream)
    if (!std::isfinite(v)) return false;
  // J u and its error per output: evaluated at u for a linear forward (the error a bound), else
  // by central differences (the error an asymptotic estimate, hence the safety factor 4).
  FdDirectional fd;
  err_factor = FdOptions{}.safety;
  const bool linear = p.linear_terms > 0 && p.forward_mag;
  const std::vector<double> u = gradcheck_signs(p.seed, n);
  if (linear) {
    fd.jvp.resize(static_cast<size_t>(m));
    fd.err.resize(static_cast<size_t>(m));
    p.forward_mag(u.data(), fd.jvp.data(), fd.err.data());
    // The magnitude is itself an fp64 sum, low by at most a factor 1 - gamma_T: doubling T covers it.
    const double g_t = gamma_n(2 * p.linear_terms, 0x1p-53);
    for (double& e : fd.err) e *= g_t;
    for (size_t i = 0; i < fd.err.size(); ++i)
      if (!std::isfinite(fd.jvp[i]) || !std::isfinite(fd.err[i])) return false;
    fd.u_eff = u;
    err_factor = 1;
  } else {
    Differentiable f;
    f.n = n;
    f.m = m;
    f.forward = p.forward;
    f.magnitude = p.magnitude;
    f.forward_mag = p.forward_mag;
    auto d = fd_directional(f, x.data(), u.data());
    if (!d.ok()) return false;  // a non-finite forward point: nothing to compare
    fd = *std::move(d);
  }
  s.n = n, s.m = m;
  for (int64_t i = 0; i < m; ++i) {
    const double v = p.upstream[static_cast<size_t>(i)];
    s.fd_val += v * fd.jvp[static_cast<size_t>(i)];
    s.fd_abs += std::fabs(v * fd.jvp[static_cast<size_t>(i)]);
    s.fd_err += std::fabs(v) * fd.err[static_cast<size_t>(i)];
  }
  for (int64_t l = 0; l < n; ++l) {
    const double ue = fd.u_eff[static_cast<size_t>(l)];
    s.kern += ue * g[static_cast<size_t>(l)];
    s.kern_abs += std::fabs(ue * g[static_cast<size_t>(l)]);
    s.ceil += std::fabs(ue) * tl[static_cast<size_t>(l)];
  }
  how = linear ? std::string("by the fp64 forward at u (linear)")
               : fmt::format("by central differences of the fp64 forward (h {:.3g})", fd.h);
  return true;
}

/// Runs the check; appends at most one kProjection failure.
inline void check_grad_projection(const GradProblem& p, std::vector<Failure>& out) {
  GradSums s;
  double err_factor = 1;
  std::string how;
  if (grad_projection_sums(p, s, err_factor, how)) judge_grad_projection(s, err_factor, how, p.label, operand_names(p), out);
}

}  // namespace assay
