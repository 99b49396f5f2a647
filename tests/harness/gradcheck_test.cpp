// The gradient-check engine (harness/gradcheck.h): known derivatives (polynomials, exp, a
// linear map), the step rule, Richardson, the error estimate against the exact error,
// tolerances that scale with the function, and the five backward bugs seen most in real
// kernels, each caught: a wrong sign, a missing rstd factor in LayerNorm dX, a transposed
// GEMM dA, a gradient that overwrites instead of accumulating, and the wrong row of the
// upstream gradient in dV = P^T dO (which passes when every row of dO is equal).
#include "harness/gradcheck.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "references/host/backward.h"
#include "references/host/gemm.h"
#include "references/host/norms.h"
#include "references/host/softmax.h"

namespace assay {
namespace {

std::vector<double> normal_vec(int64_t n, uint64_t seed, double scale = 1, double mean = 0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, scale);
  std::vector<double> v(n);
  for (double& e : v) e = d(rng);
  return v;
}

GradCheckResult must(StatusOr<GradCheckResult> r) {
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : GradCheckResult{};
}

// ---- known derivatives ---------------------------------------------------------------------------

/// f(x0, x1, x2) = (x0^3 - 2 x0 x1 + 5, x1^4 x2, 7 x2^5 - x0): a polynomial with exact J.
Differentiable polynomial(double scale = 1) {
  Differentiable f;
  f.n = 3;
  f.m = 3;
  f.forward = [scale](const double* x, double* y) {
    y[0] = scale * (x[0] * x[0] * x[0] - 2 * x[0] * x[1] + 5);
    y[1] = scale * (x[1] * x[1] * x[1] * x[1] * x[2]);
    y[2] = scale * (7 * std::pow(x[2], 5) - x[0]);
  };
  f.vjp = [scale](const double* x, const double* v, double* g) {
    // J = [[3x0^2 - 2x1, -2x0, 0], [0, 4x1^3 x2, x1^4], [-1, 0, 35 x2^4]]
    g[0] = scale * (v[0] * (3 * x[0] * x[0] - 2 * x[1]) - v[2]);
    g[1] = scale * (v[0] * (-2 * x[0]) + v[1] * 4 * x[1] * x[1] * x[1] * x[2]);
    g[2] = scale * (v[1] * x[1] * x[1] * x[1] * x[1] + v[2] * 35 * std::pow(x[2], 4));
  };
  return f;
}

std::vector<double> polynomial_jacobian(const double* x) {
  return {3 * x[0] * x[0] - 2 * x[1], -2 * x[0], 0, 0, 4 * x[1] * x[1] * x[1] * x[2], std::pow(x[1], 4), -1, 0,
          35 * std::pow(x[2], 4)};
}

/// Elementwise exp(a x): J = diag(a exp(a x)).
Differentiable exp_map(int64_t n, double a) {
  Differentiable f;
  f.n = f.m = n;
  f.forward = [n, a](const double* x, double* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::exp(a * x[i]);
  };
  f.vjp = [n, a](const double* x, const double* v, double* g) {
    for (int64_t i = 0; i < n; ++i) g[i] = v[i] * a * std::exp(a * x[i]);
  };
  return f;
}

/// y = M x (m x n): J = M, J^T v = M^T v.
Differentiable linear_map(const std::vector<double>& mat, int64_t m, int64_t n) {
  Differentiable f;
  f.n = n;
  f.m = m;
  f.forward = [mat, m, n](const double* x, double* y) {
    for (int64_t i = 0; i < m; ++i) {
      y[i] = 0;
      for (int64_t j = 0; j < n; ++j) y[i] += mat[i * n + j] * x[j];
    }
  };
  f.vjp = [mat, m, n](const double*, const double* v, double* g) {
    for (int64_t j = 0; j < n; ++j) {
      g[j] = 0;
      for (int64_t i = 0; i < m; ++i) g[j] += mat[i * n + j] * v[i];
    }
  };
  return f;
}

TEST(Gradcheck, StepIsCbrtEpsTimesScaleRoundedToPowerOfTwo) {
  const Differentiable f = exp_map(1, 1e-3);
  const double cbrt_eps = std::cbrt(DBL_EPSILON);  // 6.06e-6
  for (double x : {0.0, 0.5, -1.0, 3.0, 1e4, -2.5e-7}) {
    const double u = 1;
    const auto d = fd_directional(f, &x, &u);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const double want = cbrt_eps * std::max(std::fabs(x), 1.0);
    EXPECT_LE(d->h, want) << x;
    EXPECT_GT(d->h, want / 2) << x;
    int e = 0;
    EXPECT_EQ(std::frexp(d->h, &e), 0.5) << "a power of two";
  }
  // Along u, no coordinate moves by more than cbrt(eps) max(|x_i|, 1).
  const Differentiable g = exp_map(3, 1e-3);
  const std::vector<double> x = {1e3, 0.1, -20}, u = {1, 50, -3};
  const auto d = fd_directional(g, x.data(), u.data());
  ASSERT_TRUE(d.ok());
  for (int i = 0; i < 3; ++i) EXPECT_LE(std::fabs(d->h * u[i]), cbrt_eps * std::max(std::fabs(x[i]), 1.0));
  EXPECT_GT(std::fabs(d->h * u[1]), cbrt_eps * 0.5);  // the binding coordinate moves at least half its limit
}

TEST(Gradcheck, JacobianOfKnownFunctionsWithinItsErrorEstimate) {
  const Differentiable f = polynomial();
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<double> x = normal_vec(3, seed, 2);
    for (bool rich : {false, true}) {
      FdOptions o;
      o.richardson = rich;
      const auto j = fd_jacobian(f, x.data(), o);
      ASSERT_TRUE(j.ok());
      const std::vector<double> exact = polynomial_jacobian(x.data());
      for (int e = 0; e < 9; ++e) {
        // The estimate is asymptotic; the check multiplies it by `safety`. The exact error
        // must be below that, and the estimate itself must not be loose by orders of magnitude.
        EXPECT_LE(std::fabs(j->jac[e] - exact[e]), o.safety * j->err[e] + 1e-300) << seed << " " << e;
        EXPECT_LE(j->err[e], 1e-7 * (1 + std::fabs(exact[e])) * 1e3) << seed << " " << e;
      }
    }
    EXPECT_TRUE(must(gradcheck_jacobian(f, x.data())).pass) << seed;
    EXPECT_TRUE(must(gradcheck_projections(f, x.data())).pass) << seed;
  }
  // exp(3x) on 8 inputs and a 6 x 9 linear map: Jacobian and projections.
  const Differentiable e = exp_map(8, 3.0);
  const std::vector<double> xe = normal_vec(8, 42);
  const auto je = fd_jacobian(e, xe.data());
  ASSERT_TRUE(je.ok());
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 8; ++k) {
      const double exact = i == k ? 3 * std::exp(3 * xe[i]) : 0.0;
      EXPECT_LE(std::fabs(je->jac[i * 8 + k] - exact), 4 * je->err[i * 8 + k] + 1e-300);
      EXPECT_NEAR(je->jac[i * 8 + k], exact, 1e-9 * std::fabs(exact) + 1e-12);
    }
  EXPECT_TRUE(must(gradcheck(e, xe.data())).pass);
  EXPECT_TRUE(must(gradcheck_projections(e, xe.data())).pass);

  const std::vector<double> mat = normal_vec(54, 5, 3), xl = normal_vec(9, 6, 10);
  const Differentiable l = linear_map(mat, 6, 9);
  const auto jl = fd_jacobian(l, xl.data());
  ASSERT_TRUE(jl.ok());
  for (int k = 0; k < 54; ++k) EXPECT_NEAR(jl->jac[k], mat[k], 1e-9 * (1 + std::fabs(mat[k])));
  const GradCheckResult rl = must(gradcheck_jacobian(l, xl.data()));
  EXPECT_TRUE(rl.pass) << rl.summary;
  EXPECT_TRUE(rl.jacobian);
  const GradCheckResult pl = must(gradcheck_projections(l, xl.data()));
  EXPECT_TRUE(pl.pass) << pl.summary;
  EXPECT_EQ(pl.projections.size(), static_cast<size_t>(GradCheckOptions{}.projections));
  EXPECT_LT(pl.max_ratio, 1.0);
}

TEST(Gradcheck, RichardsonImprovesAccuracy) {
  // exp(10 x): |f'''| / |f'| = 100, so the plain central difference's truncation h^2 f'''/6
  // (~6e-10 relative) dominates its rounding; Richardson removes the h^2 term.
  const Differentiable f = exp_map(1, 10.0);
  double worst_plain = 0, worst_rich = 0;
  for (double x : {-0.7, -0.2, 0.1, 0.3, 0.55, 0.9}) {
    const double u = 1, exact = 10 * std::exp(10 * x);
    FdOptions plain;
    plain.richardson = false;
    const auto dp = fd_directional(f, &x, &u, plain);
    const auto dr = fd_directional(f, &x, &u);
    ASSERT_TRUE(dp.ok() && dr.ok());
    const double ep = std::fabs(dp->jvp[0] / dp->u_eff[0] - exact) / exact;
    const double er = std::fabs(dr->jvp[0] / dr->u_eff[0] - exact) / exact;
    worst_plain = std::max(worst_plain, ep);
    worst_rich = std::max(worst_rich, er);
    EXPECT_LT(er, ep / 30) << x;                 // extrapolation helps ...
    EXPECT_LT(dr->err[0], dp->err[0]) << x;      // ... and its error estimate says so
    EXPECT_LE(ep * exact, dp->err[0] * 4) << x;  // both estimates cover the true error
    EXPECT_LE(er * exact, dr->err[0] * 4) << x;
  }
  EXPECT_GT(worst_plain, 1e-10);
  EXPECT_LT(worst_rich, 1e-11);
}

/// f = scale * polynomial, backward optionally wrong by a relative `wrong` in one entry of J.
Differentiable scaled_polynomial(double scale, double wrong) {
  Differentiable f = polynomial(scale);
  const VjpFn good = f.vjp;
  f.vjp = [good, wrong, scale](const double* x, const double* v, double* g) {
    good(x, v, g);
    g[1] += wrong * scale * v[1] * 4 * x[1] * x[1] * x[1] * x[2];  // J[1][1] * (1 + wrong)
  };
  return f;
}

TEST(Gradcheck, ToleranceScalesWithTheFunction) {
  const std::vector<double> x = {0.8, -1.3, 1.1};
  for (double scale : {1.0, 1e6, 1e-6, 1e12}) {
    const GradCheckResult ok_j = must(gradcheck_jacobian(scaled_polynomial(scale, 0), x.data()));
    const GradCheckResult ok_p = must(gradcheck_projections(scaled_polynomial(scale, 0), x.data()));
    EXPECT_TRUE(ok_j.pass) << scale << ": " << ok_j.summary;
    EXPECT_TRUE(ok_p.pass) << scale << ": " << ok_p.summary;
    const GradCheckResult bad_j = must(gradcheck_jacobian(scaled_polynomial(scale, 1e-3), x.data()));
    const GradCheckResult bad_p = must(gradcheck_projections(scaled_polynomial(scale, 1e-3), x.data()));
    EXPECT_FALSE(bad_j.pass) << scale;
    EXPECT_EQ(bad_j.failed_row, 1);
    EXPECT_EQ(bad_j.failed_col, 1);
    EXPECT_FALSE(bad_p.pass) << scale;
    EXPECT_GE(bad_p.failed_projection, 0);
    // The tolerance is relative: the same 1e-3 error sits ~1e5 above it at every scale.
    EXPECT_GT(bad_j.max_ratio, 1e4) << scale;
  }
  // Inputs of size 1e4: the step grows with |x| and the check still resolves 1e-3.
  const std::vector<double> big = {3e3, -1.2e4, 0.5};
  EXPECT_TRUE(must(gradcheck_jacobian(scaled_polynomial(1, 0), big.data())).pass);
  EXPECT_FALSE(must(gradcheck_jacobian(scaled_polynomial(1, 1e-3), big.data())).pass);
  // A large offset raises the rounding floor eps |f| / h: what differences cannot resolve
  // is not demanded (x^2 + 1e12 at x = 1: derivative 2, |f| / h ~ 2e17).
  Differentiable off;
  off.n = off.m = 1;
  off.forward = [](const double* x, double* y) { y[0] = x[0] * x[0] + 1e12; };
  off.vjp = [](const double* x, const double* v, double* g) { g[0] = v[0] * 2 * x[0] * (1 + 1e-6); };
  const double one = 1;
  const GradCheckResult ro = must(gradcheck_jacobian(off, &one));
  EXPECT_TRUE(ro.pass) << ro.summary;
  EXPECT_GT(ro.tol_at_max, 1e-4);
}

TEST(Gradcheck, MagnitudeTightensPerOutput) {
  // Outputs 1e8 x0 and x1: without a magnitude, the function scale (1e8) sets the rounding
  // term of both outputs; with one, the small output gets its own.
  Differentiable f;
  f.n = f.m = 2;
  f.forward = [](const double* x, double* y) {
    y[0] = 1e8 * x[0];
    y[1] = x[1] * x[1];
  };
  f.vjp = [](const double* x, const double* v, double* g) {
    g[0] = 1e8 * v[0];
    g[1] = 2 * x[1] * v[1];
  };
  const std::vector<double> x = {0.3, 0.7}, e1 = {0, 1};
  const auto global = fd_directional(f, x.data(), e1.data());
  f.magnitude = [](const double* x, double* m) {
    m[0] = std::fabs(1e8 * x[0]);
    m[1] = x[1] * x[1];
  };
  const auto local = fd_directional(f, x.data(), e1.data());
  ASSERT_TRUE(global.ok() && local.ok());
  EXPECT_GT(global->err[1], 1e5 * local->err[1]);
  EXPECT_TRUE(must(gradcheck_jacobian(f, x.data())).pass);
}

TEST(Gradcheck, ForwardAndMagnitudeInOneEvaluationGiveTheSameDifferences) {
  // forward_mag replaces forward + magnitude at each point: the same values, half the calls.
  Differentiable f;
  f.n = f.m = 2;
  int calls = 0;
  f.forward = [&](const double* x, double* y) {
    ++calls;
    y[0] = std::sin(x[0]) * x[1];
    y[1] = x[0] * x[0] - x[1];
  };
  f.magnitude = [&](const double* x, double* m) {
    ++calls;
    m[0] = std::fabs(std::sin(x[0]) * x[1]);
    m[1] = x[0] * x[0] + std::fabs(x[1]);
  };
  const std::vector<double> x = {0.3, -1.7}, u = {0.6, 0.8};
  const auto apart = fd_directional(f, x.data(), u.data());
  const int calls_apart = calls;
  calls = 0;
  f.forward_mag = [&](const double* x, double* y, double* m) {
    ++calls;
    y[0] = std::sin(x[0]) * x[1];
    y[1] = x[0] * x[0] - x[1];
    m[0] = std::fabs(std::sin(x[0]) * x[1]);
    m[1] = x[0] * x[0] + std::fabs(x[1]);
  };
  const auto together = fd_directional(f, x.data(), u.data());
  ASSERT_TRUE(apart.ok() && together.ok());
  EXPECT_EQ(calls_apart, 8);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(apart->jvp, together->jvp);
  EXPECT_EQ(apart->err, together->err);
  EXPECT_EQ(apart->scale, together->scale);
}

TEST(Gradcheck, MagnitudeCoversCancellationInTheForward) {
  // f = x0 x1 - x2 near 0 with terms ~2000: the forward errs by ~u |x0 x1|, not u |f|, so a
  // rounding model scaled by |f| is far too small. With the magnitude |x0 x1| + |x2| every
  // point passes with a wide margin; without it most points fail a correct backward.
  Differentiable f;
  f.n = 3;
  f.m = 1;
  f.forward = [](const double* x, double* y) { y[0] = x[0] * x[1] - x[2]; };
  f.vjp = [](const double* x, const double* v, double* g) {
    g[0] = v[0] * x[1];
    g[1] = v[0] * x[0];
    g[2] = -v[0];
  };
  Differentiable with_mag = f;
  with_mag.magnitude = [](const double* x, double* m) { m[0] = std::fabs(x[0] * x[1]) + std::fabs(x[2]); };
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> unit(-1, 1);
  int fails_without = 0;
  double worst_with = 0;
  for (int t = 0; t < 200; ++t) {
    const double a = 37 * (1 + unit(rng)), b = 53 * (1 + unit(rng));
    const std::vector<double> x = {a, b, a * b * (1 + 1e-12 * unit(rng))};
    const GradCheckResult j = must(gradcheck_jacobian(with_mag, x.data()));
    const GradCheckResult p = must(gradcheck_projections(with_mag, x.data()));
    EXPECT_TRUE(j.pass && p.pass) << j.summary << " / " << p.summary;
    worst_with = std::max({worst_with, j.max_ratio, p.max_ratio});
    fails_without += must(gradcheck_projections(f, x.data())).pass ? 0 : 1;
  }
  EXPECT_LT(worst_with, 0.1);
  EXPECT_GT(fails_without, 50) << "the documented limitation of the magnitude-free default";
}

TEST(Gradcheck, ErrorsAreStatusesNotCrashes) {
  Differentiable none;
  none.n = none.m = 1;
  const double x = 1, u = 0, nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(fd_directional(none, &x, &x).ok());  // no forward
  const Differentiable f = exp_map(1, 1);
  EXPECT_FALSE(fd_directional(f, &x, &u).ok());    // zero direction
  EXPECT_FALSE(fd_directional(f, &nan, &x).ok());  // non-finite x
  Differentiable no_vjp = f;
  no_vjp.vjp = nullptr;
  EXPECT_FALSE(gradcheck_projections(no_vjp, &x).ok());
  Differentiable root;  // finite at 0, NaN at 0 - h
  root.n = root.m = 1;
  root.forward = [](const double* x, double* y) { y[0] = std::sqrt(x[0]); };
  const double at = 0;
  const auto r = fd_directional(root, &at, &x);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  // A NaN backward fails the check; it does not pass and does not crash.
  Differentiable nan_bw = f;
  nan_bw.vjp = [](const double*, const double*, double* g) { g[0] = std::numeric_limits<double>::quiet_NaN(); };
  const GradCheckResult rn = must(gradcheck_projections(nan_bw, &x));
  EXPECT_FALSE(rn.pass);
  EXPECT_EQ(rn.failed_projection, 0);
  EXPECT_NE(rn.summary.find("FAIL"), std::string::npos);
  // Empty functions pass trivially.
  Differentiable empty;
  empty.forward = [](const double*, double*) {};
  empty.vjp = [](const double*, const double*, double*) {};
  EXPECT_TRUE(must(gradcheck_projections(empty, nullptr)).pass);
}

TEST(Gradcheck, UpstreamGradientsComeFromTheValueClasses) {
  // Fast mode draws v from every class in turn, and no draw is constant.
  const std::vector<double> mat = normal_vec(40 * 3, 9);
  const Differentiable l = linear_map(mat, 40, 3);
  const std::vector<double> x = {1, 2, 3};
  GradCheckOptions o;
  o.projections = static_cast<int>(o.upstream_classes.size());
  const GradCheckResult r = must(gradcheck_projections(l, x.data(), o));
  ASSERT_EQ(r.projections.size(), o.upstream_classes.size());
  for (size_t p = 0; p < r.projections.size(); ++p) EXPECT_EQ(r.projections[p].upstream, o.upstream_classes[p]);
  for (ValueClass c : o.upstream_classes) {
    const std::vector<double> v = draw_values(c, 1, 3, 40);
    EXPECT_NE(*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())) << value_class_name(c);
  }
}

// ---- mutants -------------------------------------------------------------------------------------

/// The five planted bugs run through fast mode with the default upstream classes; besides
/// failing overall, most projections must fail on their own (a random projection of a wrong
/// J^T v almost never agrees), whatever the distribution of v.
void expect_caught(const Differentiable& mutant, const std::vector<double>& x, const char* what) {
  const GradCheckResult r = must(gradcheck_projections(mutant, x.data()));
  EXPECT_FALSE(r.pass) << what;
  EXPECT_EQ(r.failed_projection, 0) << what << ": " << r.summary;
  int failed = 0;
  for (const ProjectionCheck& p : r.projections) failed += p.pass ? 0 : 1;
  EXPECT_GE(failed, static_cast<int>(r.projections.size()) - 1) << what << ": " << r.summary;
  EXPECT_GT(r.max_ratio, 1e3) << what;
  if (mutant.n <= 24) {
    EXPECT_FALSE(must(gradcheck_jacobian(mutant, x.data())).pass) << what;
  }
}

void expect_clean(const Differentiable& f, const std::vector<double>& x, const char* what) {
  const GradCheckResult r = must(gradcheck_projections(f, x.data()));
  EXPECT_TRUE(r.pass) << what << ": " << r.summary;
  if (f.n <= 24) {
    const GradCheckResult j = must(gradcheck_jacobian(f, x.data()));
    EXPECT_TRUE(j.pass) << what << ": " << j.summary;
  }
}

/// Softmax over rows x n; `sign` +1 is the correct backward, -1 flips the sign of the
/// sum term: dx = y (dy + sum_j y_j dy_j).
Differentiable softmax_fn(int64_t rows, int64_t n, int sign) {
  Differentiable f;
  f.n = f.m = rows * n;
  f.forward = [rows, n](const double* x, double* y) {
    ref::softmax_reference<double>(x, rows, n, n, y, static_cast<double*>(nullptr),
                                   static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
  };
  f.vjp = [rows, n, sign](const double* x, const double* v, double* g) {
    std::vector<double> y(rows * n);
    ref::softmax_reference<double>(x, rows, n, n, y.data(), static_cast<double*>(nullptr),
                                   static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
    if (sign > 0) {
      ref::softmax_backward<double>(y.data(), v, rows, n, n, g, static_cast<double*>(nullptr));
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += y[r * n + j] * v[r * n + j];
      for (int64_t i = 0; i < n; ++i) g[r * n + i] = y[r * n + i] * (v[r * n + i] + s);  // wrong sign
    }
  };
  return f;
}

TEST(GradcheckMutants, WrongSignCaught) {
  const std::vector<double> x = normal_vec(3 * 7, 11, 2);
  expect_clean(softmax_fn(3, 7, +1), x, "softmax");
  expect_caught(softmax_fn(3, 7, -1), x, "softmax dx with the wrong sign of the sum term");
  // The whole gradient negated (GELU) too.
  Differentiable gelu;
  gelu.n = gelu.m = 10;
  gelu.forward = [](const double* x, double* y) { ref::activation_forward(ref::Activation::kGeluTanh, x, 10, y); };
  gelu.vjp = [](const double* x, const double* v, double* g) {
    ref::activation_backward(ref::Activation::kGeluTanh, x, v, 10, g, static_cast<double*>(nullptr));
    for (int i = 0; i < 10; ++i) g[i] = -g[i];
  };
  expect_caught(gelu, normal_vec(10, 3, 2), "negated GELU gradient");
}

/// LayerNorm of rows x n in x with fixed gamma, beta; `drop_rstd` forgets the final rstd
/// factor of dX (as a kernel that reuses the normalised upstream without rescaling).
Differentiable layernorm_fn(int64_t rows, int64_t n, const std::vector<double>& gamma, const std::vector<double>& beta,
                            bool drop_rstd) {
  Differentiable f;
  f.n = f.m = rows * n;
  const double eps = 1e-5;
  f.forward = [=](const double* x, double* y) {
    ref::layernorm_reference<double>(x, rows, n, n, gamma.data(), beta.data(), eps, y, static_cast<double*>(nullptr),
                                     static_cast<ref::LayerNormRowStats<double>*>(nullptr));
  };
  f.vjp = [=](const double* x, const double* v, double* g) {
    ref::NormGrads<double> out;
    out.dx = g;
    ref::layernorm_backward<double>(x, v, rows, n, n, gamma.data(), static_cast<const double*>(nullptr),
                                    static_cast<const double*>(nullptr), eps, out);
    if (!drop_rstd) return;
    for (int64_t r = 0; r < rows; ++r) {
      const auto st = ref::variance_reference<double>(x + r * n, n, 0);
      const double rstd = 1 / std::sqrt(st.var + eps);
      for (int64_t i = 0; i < n; ++i) g[r * n + i] /= rstd;  // the missing factor
    }
  };
  return f;
}

TEST(GradcheckMutants, MissingRstdInLayerNormDxCaught) {
  const int64_t rows = 4, n = 6;
  const std::vector<double> x = normal_vec(rows * n, 12, 3, 1);  // spread 3: rstd ~ 1/3
  const std::vector<double> gamma = normal_vec(n, 13), beta = normal_vec(n, 14);
  expect_clean(layernorm_fn(rows, n, gamma, beta, false), x, "layernorm");
  expect_caught(layernorm_fn(rows, n, gamma, beta, true), x, "LayerNorm dX without rstd");
}

/// C = A B with A m x k, B k x n; x = (A, B). `transpose_da` stores dA transposed
/// (dA[j][i] for dA[i][j], m == k so the shapes agree).
Differentiable gemm_fn(int64_t m, int64_t n, int64_t k, bool transpose_da) {
  Differentiable f;
  f.n = m * k + k * n;
  f.m = m * n;
  auto problem = [=](const double* x) {
    ref::GemmProblem<double> p;
    p.m = m, p.n = n, p.k = k;
    p.a = x, p.lda = k;
    p.b = x + m * k, p.ldb = n;
    return p;
  };
  f.forward = [=](const double* x, double* y) {
    std::vector<double> mag(m * n);
    ref::gemm_reference(problem(x), y, mag.data());
  };
  f.magnitude = [=](const double* x, double* mag) {
    std::vector<double> y(m * n);
    ref::gemm_reference(problem(x), y.data(), mag);
  };
  f.vjp = [=](const double* x, const double* v, double* g) {
    ref::GemmGrads<double> out;
    out.da = g;
    out.db = g + m * k;
    ref::gemm_backward(problem(x), v, n, out);
    if (!transpose_da) return;
    std::vector<double> da(g, g + m * k);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) g[j * m + i] = da[i * k + j];
  };
  return f;
}

TEST(GradcheckMutants, TransposedGemmDaCaught) {
  const int64_t m = 5, n = 4, k = 5;
  const std::vector<double> x = normal_vec(m * k + k * n, 15);
  expect_clean(gemm_fn(m, n, k, false), x, "gemm");
  expect_caught(gemm_fn(m, n, k, true), x, "GEMM dA stored transposed");
}

TEST(GradcheckMutants, OverwriteInsteadOfAccumulateCaught) {
  // (1) Between calls: the spec declares dW += (gradient accumulation over micro-batches).
  const int64_t m = 3, n = 4, k = 5;
  const std::vector<double> x = normal_vec(m * k + k * n, 16), dc = normal_vec(m * n, 17);
  ref::GemmProblem<double> p;
  p.m = m, p.n = n, p.k = k;
  p.a = x.data(), p.lda = k;
  p.b = x.data() + m * k, p.ldb = n;
  std::vector<double> db(k * n);
  ref::GemmGrads<double> gd;
  gd.db = db.data();
  ref::gemm_backward(p, dc.data(), n, gd);
  auto accumulating = [&](double* grad) {
    std::vector<double> t(k * n);
    ref::GemmGrads<double> o;
    o.db = t.data();
    ref::gemm_backward(p, dc.data(), n, o);
    for (int64_t j = 0; j < k * n; ++j) grad[j] += t[j];
  };
  auto overwriting = [&](double* grad) {
    ref::GemmGrads<double> o;
    o.db = grad;
    ref::gemm_backward(p, dc.data(), n, o);
  };
  for (ValueClass c : {ValueClass::kNormal, ValueClass::kLogUniform, ValueClass::kMeanSpread, ValueClass::kPareto}) {
    const std::vector<double> prefill = draw_values(c, 5, 0, k * n);
    const WriteCheck ok = check_write_semantics(accumulating, k * n, prefill.data(), db.data(), GradWrite::kAccumulate);
    EXPECT_TRUE(ok.pass) << ok.summary;
    const WriteCheck bad = check_write_semantics(overwriting, k * n, prefill.data(), db.data(), GradWrite::kAccumulate);
    EXPECT_FALSE(bad.pass) << value_class_name(c);
    EXPECT_EQ(bad.first_bad, 0);
    EXPECT_NE(bad.summary.find("FAIL"), std::string::npos);
  }
  // A zero prefill proves nothing: the overwriting backward is exact on it.
  const std::vector<double> zeros(k * n, 0.0);
  EXPECT_TRUE(check_write_semantics(overwriting, k * n, zeros.data(), db.data(), GradWrite::kAccumulate).pass);
  // Declared overwrite: a NaN prefill is not read; an accumulating kernel shows it.
  const std::vector<double> poison(k * n, std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(check_write_semantics(overwriting, k * n, poison.data(), db.data(), GradWrite::kOverwrite).pass);
  EXPECT_FALSE(check_write_semantics(accumulating, k * n, poison.data(), db.data(), GradWrite::kOverwrite).pass);
  // Accumulating term by term (the row sums go straight into the buffer) is within rounding
  // (gamma_{m+1}), not exact.
  auto termwise = [&](double* grad) {
    for (int64_t q = 0; q < k; ++q)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) grad[q * n + j] += x[i * k + q] * dc[i * n + j];
  };
  const std::vector<double> prefill = draw_values(ValueClass::kNormal, 8, 0, k * n);
  std::vector<double> db_mag(k * n);
  std::vector<double> tmp(k * n);
  ref::GemmGrads<double> gm;
  gm.db = tmp.data();
  gm.db_mag = db_mag.data();
  ref::gemm_backward(p, dc.data(), n, gm);
  const WriteCheck tw =
      check_write_semantics(termwise, k * n, prefill.data(), db.data(), GradWrite::kAccumulate, m + 1, db_mag.data());
  EXPECT_TRUE(tw.pass) << tw.summary;
  EXPECT_FALSE(
      check_write_semantics(overwriting, k * n, prefill.data(), db.data(), GradWrite::kAccumulate, m + 1, db_mag.data())
          .pass);

  // (2) Within one call: dgamma of RMSNorm is a sum over rows; a kernel that writes
  // (=) each row's contribution instead of adding keeps only the last row.
  const int64_t rows = 5, nn = 4;
  Differentiable f;
  f.n = rows * nn + nn;  // x, gamma
  f.m = rows * nn;
  f.forward = [=](const double* in, double* y) {
    ref::rmsnorm_reference<double>(in, rows, nn, nn, in + rows * nn, 1e-6, y,
                                   static_cast<ref::RmsNormRowStats<double>*>(nullptr));
  };
  auto vjp = [=](bool overwrite) {
    return [=](const double* in, const double* v, double* g) {
      ref::NormGrads<double> o;
      o.dx = g;
      o.dgamma = g + rows * nn;
      ref::rmsnorm_backward<double>(in, v, rows, nn, nn, in + rows * nn, static_cast<const double*>(nullptr), 1e-6, o);
      if (!overwrite) return;
      for (int64_t i = 0; i < nn; ++i) {  // dgamma_i = (last row's term only)
        const int64_t r = rows - 1;
        double ss = 0;
        for (int64_t j = 0; j < nn; ++j) ss += in[r * nn + j] * in[r * nn + j];
        g[rows * nn + i] = v[r * nn + i] * in[r * nn + i] / std::sqrt(ss / nn + 1e-6);
      }
    };
  };
  const std::vector<double> xin = normal_vec(rows * nn + nn, 18, 1.5);
  f.vjp = vjp(false);
  expect_clean(f, xin, "rmsnorm");
  f.vjp = vjp(true);
  expect_caught(f, xin, "RMSNorm dgamma overwritten per row");
}

/// Attention-like O = P V with fixed P (Lq x Lk, rows of a softmax) and V (Lk x d) the
/// input: dV = P^T dO. The mutant reads dO[(q + 1) % Lq] in place of dO[q].
Differentiable attention_dv_fn(const std::vector<double>& prob, int64_t lq, int64_t lk, int64_t d, bool wrong_row) {
  Differentiable f;
  f.n = lk * d;
  f.m = lq * d;
  f.forward = [=](const double* v, double* o) {
    for (int64_t q = 0; q < lq; ++q)
      for (int64_t c = 0; c < d; ++c) {
        double s = 0;
        for (int64_t j = 0; j < lk; ++j) s += prob[q * lk + j] * v[j * d + c];
        o[q * d + c] = s;
      }
  };
  f.vjp = [=](const double*, const double* dout, double* dv) {
    for (int64_t j = 0; j < lk; ++j)
      for (int64_t c = 0; c < d; ++c) {
        double s = 0;
        for (int64_t q = 0; q < lq; ++q) {
          const int64_t row = wrong_row ? (q + 1) % lq : q;
          s += prob[q * lk + j] * dout[row * d + c];
        }
        dv[j * d + c] = s;
      }
  };
  return f;
}

TEST(GradcheckMutants, WrongUpstreamRowCaughtButNotByEqualRows) {
  const int64_t lq = 6, lk = 5, d = 4;
  std::vector<double> logits = normal_vec(lq * lk, 19, 2), prob(lq * lk);
  ref::softmax_reference<double>(logits.data(), lq, lk, lk, prob.data(), static_cast<double*>(nullptr),
                                 static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
  const std::vector<double> v = normal_vec(lk * d, 20);
  const Differentiable good = attention_dv_fn(prob, lq, lk, d, false);
  const Differentiable bad = attention_dv_fn(prob, lq, lk, d, true);
  expect_clean(good, v, "dV = P^T dO");
  expect_caught(bad, v, "dV reading the next row of dO");

  // Every row of dO equal: dO[(q+1) % Lq] == dO[q], so the mutant is exact and passes.
  // A constant (or row-constant) upstream gradient proves nothing about row indexing.
  const std::vector<double> u = normal_vec(lk * d, 21);
  for (ValueClass c : {ValueClass::kNormal, ValueClass::kSameSign, ValueClass::kSmallInt}) {
    const std::vector<double> row = draw_values(c, 3, 0, d);
    std::vector<double> dout(lq * d);
    for (int64_t q = 0; q < lq; ++q)
      for (int64_t cc = 0; cc < d; ++cc) dout[q * d + cc] = row[cc];
    const auto eq = check_projection(bad, v.data(), u.data(), dout.data());
    ASSERT_TRUE(eq.ok());
    EXPECT_TRUE(eq->pass) << value_class_name(c) << ": the mutant passes when the rows of dO are equal";
    const std::vector<double> varied = draw_values(c, 3, 1, lq * d);
    const auto vr = check_projection(bad, v.data(), u.data(), varied.data());
    ASSERT_TRUE(vr.ok());
    EXPECT_FALSE(vr->pass) << value_class_name(c);
  }
}

}  // namespace
}  // namespace assay
