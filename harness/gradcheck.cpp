#include "harness/gradcheck.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "harness/fd_core.h"

namespace assay {
namespace {

using fd::kU;  // unit roundoff of fp64
constexpr double kInf = std::numeric_limits<double>::infinity();

/// gamma_k(u) = k u / (1 - k u) ([H] Lemma 3.1); +Inf when k u >= 1.
double gamma_k(int64_t k) {
  const double ku = static_cast<double>(k) * kU;
  return ku >= 1 ? kInf : ku / (1 - ku);
}

bool all_finite(const double* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

/// discrepancy / tol, +Inf for NaN or a positive discrepancy over a zero tolerance.
double ratio(double disc, double tol) {
  if (std::isnan(disc)) return kInf;
  if (disc == 0) return 0;
  return tol > 0 ? disc / tol : kInf;
}

Status validate(const Differentiable& f, const double* x) {
  if (!f.forward) return invalid_argument("gradcheck: the function has no forward");
  if (f.n < 0 || f.m < 0) return invalid_argument(fmt::format("gradcheck: n = {}, m = {} (must be >= 0)", f.n, f.m));
  if (f.n > 0 && x == nullptr) return invalid_argument("gradcheck: x is null");
  if (!all_finite(x, f.n)) return invalid_argument("gradcheck: x is not finite");
  return ok_status();
}

}  // namespace

std::vector<double> draw_values(ValueClass cls, uint64_t seed, uint64_t stream, int64_t n) {
  ValueRecipe r;
  r.cls = cls;
  r.seed = seed;
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) out[i] = recipe_value(r, DType::kF64, stream, static_cast<uint64_t>(i));
  return out;
}

StatusOr<FdDirectional> fd_directional(const Differentiable& f, const double* x, const double* u,
                                       const FdOptions& opts) {
  ASSAY_RETURN_IF_ERROR(validate(f, x));
  if (f.n > 0 && u == nullptr) return invalid_argument("fd_directional: u is null");
  if (!all_finite(u, f.n)) return invalid_argument("fd_directional: u is not finite");
  if (!(opts.step_factor > 0) || !(opts.forward_ulps >= 0) || !(opts.safety > 0))
    return invalid_argument("fd_directional: step_factor and safety must be > 0, forward_ulps >= 0");
  const int64_t n = f.n, m = f.m;

  // Step: every coordinate moves by at most cbrt(eps) * max(|x_i|, 1).
  double move = 0;
  for (int64_t i = 0; i < n; ++i) move = std::max(move, std::fabs(u[i]) / std::max(std::fabs(x[i]), 1.0));
  if (!(move > 0)) return invalid_argument("fd_directional: u is zero");
  const double h = fd::step(move, opts.step_factor);  // largest power of two <= cbrt(eps) step_factor / move
  if (!(h > 0)) return invalid_argument("fd_directional: no finite step for this u");

  FdDirectional out;
  out.h = h;
  std::vector<double> xp(n), xm(n), fp(m), fm(m), mp, mm;
  std::vector<double> d[2], scale_i(m, 0.0);
  double scale_max = 0;
  for (int k = 0; k < 2; ++k) {
    const double hk = k == 0 ? h : h / 2;
    for (int64_t i = 0; i < n; ++i) {
      xp[i] = x[i] + hk * u[i];
      xm[i] = x[i] - hk * u[i];
    }
    // The forward, and the magnitude where given: in one evaluation where forward_mag shares their work.
    const bool mags = static_cast<bool>(f.magnitude);
    if (mags) mp.resize(m), mm.resize(m);
    auto eval = [&](const std::vector<double>& at, std::vector<double>& y, std::vector<double>& mag) {
      if (mags && f.forward_mag) return f.forward_mag(at.data(), y.data(), mag.data());
      f.forward(at.data(), y.data());
      if (mags) f.magnitude(at.data(), mag.data());
    };
    eval(xp, fp, mp);
    eval(xm, fm, mm);
    if (!all_finite(fp.data(), m) || !all_finite(fm.data(), m))
      return invalid_argument(fmt::format("fd_directional: the forward is not finite at x +- {:g} u", hk));
    d[k].resize(m);
    for (int64_t i = 0; i < m; ++i) {
      d[k][i] = (fp[i] - fm[i]) / (2 * hk);
      const double s = std::max(std::fabs(fp[i]), std::fabs(fm[i]));
      scale_i[i] = std::max(scale_i[i], s);
      scale_max = std::max(scale_max, s);
    }
    if (mags) {
      for (int64_t i = 0; i < m; ++i) {
        const double s = std::max(std::fabs(mp[i]), std::fabs(mm[i]));
        if (!std::isfinite(s)) return invalid_argument("fd_directional: the magnitude is not finite");
        scale_i[i] = std::max(scale_i[i], s);
        scale_max = std::max(scale_max, s);
      }
    }
  }
  out.scale = scale_max;

  out.jvp.resize(m);
  out.err.resize(m);
  for (int64_t i = 0; i < m; ++i)
    fd::estimate(d[0][i], d[1][i], f.magnitude ? scale_i[i] : scale_max, h, opts.forward_ulps, opts.richardson,
                 out.jvp[i], out.err[i]);
  out.u_eff.resize(n);
  for (int64_t i = 0; i < n; ++i) out.u_eff[i] = fd::u_eff(x[i], u[i], h, opts.richardson);
  return out;
}

StatusOr<FdJacobian> fd_jacobian(const Differentiable& f, const double* x, const FdOptions& opts) {
  ASSAY_RETURN_IF_ERROR(validate(f, x));
  FdJacobian out;
  out.m = f.m;
  out.n = f.n;
  out.jac.assign(static_cast<size_t>(f.m * f.n), 0.0);
  out.err.assign(static_cast<size_t>(f.m * f.n), 0.0);
  std::vector<double> e(f.n, 0.0);
  for (int64_t j = 0; j < f.n; ++j) {
    e[j] = 1;
    ASSAY_ASSIGN_OR_RETURN(FdDirectional col, fd_directional(f, x, e.data(), opts));
    e[j] = 0;
    const double c = col.u_eff[j];  // 1 up to the rounding of x_j +- h
    for (int64_t i = 0; i < f.m; ++i) {
      out.jac[i * f.n + j] = col.jvp[i] / c;
      out.err[i * f.n + j] = col.err[i] / std::fabs(c);
    }
  }
  return out;
}

StatusOr<ProjectionCheck> check_projection(const Differentiable& f, const double* x, const double* u, const double* v,
                                           const FdOptions& opts) {
  ASSAY_RETURN_IF_ERROR(validate(f, x));
  if (!f.vjp) return invalid_argument("check_projection: the function has no backward (vjp)");
  if (f.m > 0 && v == nullptr) return invalid_argument("check_projection: v is null");
  if (!all_finite(v, f.m)) return invalid_argument("check_projection: v is not finite");
  ASSAY_ASSIGN_OR_RETURN(FdDirectional dd, fd_directional(f, x, u, opts));
  std::vector<double> g(f.n, 0.0);
  f.vjp(x, v, g.data());

  ProjectionCheck pc;
  pc.h = dd.h;
  double fd_err = 0, fd_mag = 0, an_mag = 0;
  for (int64_t i = 0; i < f.m; ++i) {
    pc.fd += v[i] * dd.jvp[i];
    fd_mag += std::fabs(v[i] * dd.jvp[i]);
    fd_err += std::fabs(v[i]) * dd.err[i];
  }
  for (int64_t j = 0; j < f.n; ++j) {
    pc.analytic += g[j] * dd.u_eff[j];
    an_mag += std::fabs(g[j] * dd.u_eff[j]);
  }
  pc.discrepancy = std::fabs(pc.fd - pc.analytic);
  pc.tol = opts.safety * fd_err + gamma_k(f.m) * fd_mag + gamma_k(f.n) * an_mag + DBL_MIN;
  pc.pass = pc.discrepancy <= pc.tol;  // false for NaN
  return pc;
}

namespace {

void summarise(GradCheckResult& r, const char* mode, int64_t n, int64_t m) {
  r.summary =
      fmt::format("gradcheck {} (n={}, m={}): {}; max |fd - analytic| = {:.3g}, max ratio = {:.3g} (tol {:.3g})", mode,
                  n, m, r.pass ? "pass" : "FAIL", r.max_discrepancy, r.max_ratio, r.tol_at_max);
  if (r.failed_projection >= 0) {
    const ProjectionCheck& p = r.projections[r.failed_projection];
    r.summary += fmt::format("; projection {} failed (upstream {}): fd {:.17g} vs analytic {:.17g}",
                             r.failed_projection, value_class_name(p.upstream), p.fd, p.analytic);
  }
  if (r.failed_row >= 0) r.summary += fmt::format("; worst entry d f[{}] / d x[{}]", r.failed_row, r.failed_col);
}

}  // namespace

StatusOr<GradCheckResult> gradcheck_projections(const Differentiable& f, const double* x,
                                                const GradCheckOptions& opts) {
  ASSAY_RETURN_IF_ERROR(validate(f, x));
  if (!f.vjp) return invalid_argument("gradcheck: the function has no backward (vjp)");
  if (opts.projections < 1) return invalid_argument("gradcheck: projections must be >= 1");
  if (opts.upstream_classes.empty()) return invalid_argument("gradcheck: no upstream value classes");
  GradCheckResult r;
  r.pass = true;
  if (f.n == 0 || f.m == 0) {  // nothing to differentiate
    summarise(r, "projections", f.n, f.m);
    return r;
  }
  for (int p = 0; p < opts.projections; ++p) {
    const ValueClass uc = p % 2 == 0 ? ValueClass::kNormal : ValueClass::kUniform;
    const ValueClass vc = opts.upstream_classes[p % opts.upstream_classes.size()];
    const std::vector<double> u = draw_values(uc, opts.seed, 2 * static_cast<uint64_t>(p), f.n);
    const std::vector<double> v = draw_values(vc, opts.seed, 2 * static_cast<uint64_t>(p) + 1, f.m);
    ASSAY_ASSIGN_OR_RETURN(ProjectionCheck pc, check_projection(f, x, u.data(), v.data(), opts.fd));
    pc.upstream = vc;
    const double q = ratio(pc.discrepancy, pc.tol);
    if (q > r.max_ratio || (p == 0)) {
      r.max_ratio = q;
      r.tol_at_max = pc.tol;
    }
    if (!(pc.discrepancy <= r.max_discrepancy)) r.max_discrepancy = pc.discrepancy;  // keeps NaN
    if (!pc.pass && r.failed_projection < 0) r.failed_projection = p;
    r.pass = r.pass && pc.pass;
    r.projections.push_back(pc);
  }
  summarise(r, "projections", f.n, f.m);
  return r;
}

StatusOr<GradCheckResult> gradcheck_jacobian(const Differentiable& f, const double* x, const GradCheckOptions& opts) {
  ASSAY_RETURN_IF_ERROR(validate(f, x));
  if (!f.vjp) return invalid_argument("gradcheck: the function has no backward (vjp)");
  ASSAY_ASSIGN_OR_RETURN(FdJacobian fj, fd_jacobian(f, x, opts.fd));
  GradCheckResult r;
  r.jacobian = true;
  r.pass = true;
  std::vector<double> e(f.m, 0.0), g(f.n, 0.0);
  for (int64_t i = 0; i < f.m; ++i) {
    e[i] = 1;
    f.vjp(x, e.data(), g.data());  // row i of J
    e[i] = 0;
    for (int64_t j = 0; j < f.n; ++j) {
      const double fd = fj.jac[i * f.n + j];
      const double disc = std::fabs(fd - g[j]);
      const double tol = opts.fd.safety * fj.err[i * f.n + j] + 2 * kU * std::fabs(fd) + DBL_MIN;
      const double q = ratio(disc, tol);
      if (q > r.max_ratio || (i == 0 && j == 0)) {
        r.max_ratio = q;
        r.tol_at_max = tol;
        if (!(disc <= tol)) {
          r.failed_row = i;
          r.failed_col = j;
        }
      }
      if (!(disc <= r.max_discrepancy)) r.max_discrepancy = disc;
      if (!(disc <= tol)) r.pass = false;
    }
  }
  summarise(r, "jacobian", f.n, f.m);
  return r;
}

StatusOr<GradCheckResult> gradcheck(const Differentiable& f, const double* x, const GradCheckOptions& opts) {
  if (f.n <= opts.jacobian_max_inputs && f.n * f.m <= 64 * opts.jacobian_max_inputs)
    return gradcheck_jacobian(f, x, opts);
  return gradcheck_projections(f, x, opts);
}

WriteCheck check_write_semantics(const std::function<void(double* grad)>& backward, int64_t n, const double* prefill,
                                 const double* grad, GradWrite mode, int64_t roundings, const double* mag) {
  WriteCheck w;
  if (!backward || n < 0 || (n > 0 && (prefill == nullptr || grad == nullptr)) || roundings < 0) {
    w.summary = "check_write_semantics: invalid arguments";
    return w;
  }
  std::vector<double> buf(prefill, prefill + n);
  backward(buf.data());
  const bool acc = mode == GradWrite::kAccumulate;
  const double g = gamma_k(roundings);
  w.pass = true;
  for (int64_t j = 0; j < n; ++j) {
    const double expected = acc ? prefill[j] + grad[j] : grad[j];
    const double err = std::fabs(buf[j] - expected);
    bool ok;
    double tol = 0;
    if (std::isnan(expected)) {
      ok = std::isnan(buf[j]);
    } else if (roundings == 0) {
      ok = buf[j] == expected;
    } else {
      const double m = mag != nullptr ? std::fabs(mag[j]) : std::fabs(grad[j]);
      tol = g * ((acc ? std::fabs(prefill[j]) : 0.0) + m);
      ok = err <= tol;
    }
    if (!(err <= w.max_err)) w.max_err = err;
    if (!ok && w.first_bad < 0) {
      w.first_bad = j;
      w.tol_at_bad = tol;
    }
    w.pass = w.pass && ok;
  }
  if (w.pass) {
    w.summary = fmt::format("{}: pass (n={}, max err {:.3g})", acc ? "accumulate" : "overwrite", n, w.max_err);
  } else {
    const int64_t j = w.first_bad;
    w.summary =
        fmt::format("{}: FAIL at [{}]: got {:.17g}, expected {:.17g} (prefill {:.17g}, grad {:.17g}, tol {:.3g})",
                    acc ? "accumulate" : "overwrite", j, buf[j], acc ? prefill[j] + grad[j] : grad[j], prefill[j],
                    grad[j], w.tol_at_bad);
  }
  return w;
}

}  // namespace assay
