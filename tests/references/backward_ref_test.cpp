// Host backward references (references/host/backward.h), each validated by the gradient-check
// engine (harness/gradcheck.h) against central differences of its fp64 host forward: the full
// Jacobian for tiny shapes, random projections v^T J u for larger ones, RapidCheck over shapes,
// options and input value classes. Beside that: every magnitude bounds its gradient, the long
// double instantiation agrees with double, and known identities (rows of a softmax or
// cross-entropy gradient sum to zero, rotary backward inverts rotary forward).
#include "references/host/backward.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/gradcheck.h"
#include "references/host/gemm.h"
#include "references/host/norms.h"
#include "references/host/softmax.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

using ref::Activation;


/// Input value classes for the data (the upstream gradients are the engine's business).
rc::Gen<ValueClass> gen_input_class() {
  return rc::gen::element(ValueClass::kNormal, ValueClass::kUniform, ValueClass::kLogUniform, ValueClass::kSameSign,
                          ValueClass::kSmallInt, ValueClass::kPareto, ValueClass::kMeanSpread);
}

/// n values of `cls`, plus (for classes that repeat values) nothing else: the engine copes
/// with ties and zeros; kinks are the caller's business.
std::vector<double> values(ValueClass cls, uint64_t seed, uint64_t stream, int64_t n) {
  return draw_values(cls, seed, stream, n);
}

void append(std::vector<double>& x, const std::vector<double>& more) {
  x.insert(x.end(), more.begin(), more.end());
}

/// Runs the automatic check (Jacobian when tiny, else projections) and the projections,
/// with RapidCheck's failure carrying the engine's one-line summary.
void check(const Differentiable& f, const std::vector<double>& x, uint64_t seed) {
  RC_ASSERT(static_cast<int64_t>(x.size()) == f.n);
  GradCheckOptions o;
  o.seed = seed;
  const auto a = gradcheck(f, x.data(), o);
  if (!a.ok()) RC_FAIL(a.status().to_string());
  if (!a->pass) RC_FAIL(a->summary);
  if (a->jacobian) {
    const auto p = gradcheck_projections(f, x.data(), o);
    if (!p.ok()) RC_FAIL(p.status().to_string());
    if (!p->pass) RC_FAIL(p->summary);
  }
}

/// |g_i| <= mag_i (1 + small): the magnitude is the sum of |terms| of g.
void check_mag(const std::vector<double>& g, const std::vector<double>& mag, const char* what) {
  RC_ASSERT(g.size() == mag.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(std::fabs(g[i]) <= mag[i] * (1 + 1e-12) + 1e-300))
      RC_FAIL(std::string(what) + ": |grad| > mag at " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs " +
              std::to_string(mag[i]));
  }
}

// ---- GEMM ----------------------------------------------------------------------------------------

struct GemmShape {
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
};

ref::GemmProblem<double> gemm_problem(const GemmShape& s, const double* x) {
  ref::GemmProblem<double> p;
  p.m = s.m, p.n = s.n, p.k = s.k;
  p.trans_a = s.ta, p.trans_b = s.tb;
  p.alpha = s.alpha, p.beta = s.beta;
  p.a = x, p.lda = s.ta ? s.m : s.k;
  p.b = x + s.m * s.k, p.ldb = s.tb ? s.k : s.n;
  p.c = s.beta != 0 ? x + s.m * s.k + s.k * s.n : nullptr, p.ldc = s.n;
  return p;
}

/// x = (A, B[, C0]) in storage layout; f(x) = C; J^T dC = (dA, dB[, beta dC]).
Differentiable gemm_fn(const GemmShape& s) {
  Differentiable f;
  const int64_t nc = s.beta != 0 ? s.m * s.n : 0;
  f.n = s.m * s.k + s.k * s.n + nc;
  f.m = s.m * s.n;
  f.forward = [s](const double* x, double* y) {
    std::vector<double> mag(s.m * s.n);
    ref::gemm_reference(gemm_problem(s, x), y, mag.data());
  };
  f.magnitude = [s](const double* x, double* mag) {
    std::vector<double> y(s.m * s.n);
    ref::gemm_reference(gemm_problem(s, x), y.data(), mag);
  };
  f.vjp = [s](const double* x, const double* v, double* g) {
    ref::GemmGrads<double> out;
    out.da = g;
    out.db = g + s.m * s.k;
    if (s.beta != 0) out.dc = g + s.m * s.k + s.k * s.n;
    ref::gemm_backward(gemm_problem(s, x), v, s.n, out);
  };
  return f;
}

rc::Gen<GemmShape> gen_gemm_shape(int64_t lo, int64_t hi) {
  return rc::gen::apply([](int64_t m, int64_t n, int64_t k, bool ta, bool tb, double alpha,
                           double beta) { return GemmShape{m, n, k, ta, tb, alpha, beta}; },
                        rc::gen::inRange<int64_t>(lo, hi), rc::gen::inRange<int64_t>(lo, hi),
                        rc::gen::inRange<int64_t>(lo, hi), rc::gen::arbitrary<bool>(), rc::gen::arbitrary<bool>(),
                        rc::gen::element(1.0, -0.5, 3.0), rc::gen::element(0.0, 0.75, -2.0));
}

void gemm_property(const GemmShape& s, ValueClass cls, uint64_t seed) {
  const Differentiable f = gemm_fn(s);
  const std::vector<double> x = values(cls, seed, 0, f.n);
  check(f, x, seed);
  // Magnitudes bound the gradients.
  const std::vector<double> dc = values(ValueClass::kNormal, seed, 1, s.m * s.n);
  std::vector<double> da(s.m * s.k), dam(s.m * s.k), db(s.k * s.n), dbm(s.k * s.n);
  ref::GemmGrads<double> out{da.data(), dam.data(), db.data(), dbm.data(), nullptr};
  ref::gemm_backward(gemm_problem(s, x.data()), dc.data(), s.n, out);
  check_mag(da, dam, "dA");
  check_mag(db, dbm, "dB");
}

RC_GTEST_PROP(BackwardReferences, GemmTiny, ()) {
  gemm_property(*gen_gemm_shape(1, 5), *gen_input_class(), *rc::gen::arbitrary<uint64_t>());
}

RC_GTEST_PROP(BackwardReferences, GemmLarger, ()) {
  gemm_property(*gen_gemm_shape(6, 33), *gen_input_class(), *rc::gen::arbitrary<uint64_t>());
}

TEST(BackwardReferences, GemmThreadsAndLeadingDimension) {
  // dC with a padded leading dimension and 3 threads gives the same bits as contiguous, 1 thread.
  const GemmShape s{40, 30, 20, true, false, 1.5, 0};
  const std::vector<double> x = draw_values(ValueClass::kNormal, 1, 0, s.m * s.k + s.k * s.n);
  const std::vector<double> dc = draw_values(ValueClass::kNormal, 1, 1, s.m * s.n);
  std::vector<double> dc_pad(s.m * (s.n + 3), std::nan(""));
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) dc_pad[i * (s.n + 3) + j] = dc[i * s.n + j];
  std::vector<double> da1(s.m * s.k), db1(s.k * s.n), da3(s.m * s.k), db3(s.k * s.n);
  ref::gemm_backward(gemm_problem(s, x.data()), dc.data(), s.n,
                     ref::GemmGrads<double>{da1.data(), nullptr, db1.data()});
  ref::gemm_backward(gemm_problem(s, x.data()), dc_pad.data(), s.n + 3,
                     ref::GemmGrads<double>{da3.data(), nullptr, db3.data()}, 3);
  EXPECT_EQ(da1, da3);
  EXPECT_EQ(db1, db3);
}

// ---- GEMM + bias + activation ---------------------------------------------------------------------

/// x = (A, B, bias); f = act(alpha op(A) op(B) + bias); J^T dY = (dA, dB, dbias).
Differentiable gemm_bias_act_fn(const GemmShape& s, Activation act) {
  Differentiable f;
  f.n = s.m * s.k + s.k * s.n + s.n;
  f.m = s.m * s.n;
  auto bias = [s](const double* x) { return x + s.m * s.k + s.k * s.n; };
  f.forward = [=](const double* x, double* y) {
    ref::gemm_bias_act_forward(gemm_problem(s, x), bias(x), act, y, static_cast<double*>(nullptr),
                               static_cast<double*>(nullptr));
  };
  // Z = AB + bias cancels: the forward errs by ~u |act'(Z)| (|A||B| + |bias|), not u |Y|.
  f.magnitude = [=](const double* x, double* mag) {
    std::vector<double> y(s.m * s.n), z(s.m * s.n), zmag(s.m * s.n);
    ref::gemm_bias_act_forward(gemm_problem(s, x), bias(x), act, y.data(), z.data(), zmag.data());
    for (int64_t i = 0; i < s.m * s.n; ++i) {
      double gm = 0;
      (void)ref::activation_grad(act, z[i], &gm);
      mag[i] = std::fabs(y[i]) + gm * zmag[i];
    }
  };
  f.vjp = [=](const double* x, const double* v, double* g) {
    std::vector<double> y(s.m * s.n), z(s.m * s.n);
    ref::gemm_bias_act_forward(gemm_problem(s, x), bias(x), act, y.data(), z.data(), static_cast<double*>(nullptr));
    ref::BiasActGrads<double> ba;
    ba.dbias = g + s.m * s.k + s.k * s.n;
    ref::GemmGrads<double> gg;
    gg.da = g;
    gg.db = g + s.m * s.k;
    ref::gemm_bias_act_backward(gemm_problem(s, x), act, z.data(), v, s.n, ba, gg);
  };
  return f;
}

RC_GTEST_PROP(BackwardReferences, GemmBiasActivation, ()) {
  GemmShape s = *gen_gemm_shape(1, 9);
  s.beta = 0;  // the epilogue adds a bias, not C
  const Activation act = *rc::gen::element(Activation::kIdentity, Activation::kRelu, Activation::kGeluErf,
                                           Activation::kGeluTanh, Activation::kSilu);
  // ReLU is not differentiable at 0: small integers give Z == 0 exactly; use continuous classes.
  const ValueClass cls =
      act == Activation::kRelu ? *rc::gen::element(ValueClass::kNormal, ValueClass::kUniform) : *gen_input_class();
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const Differentiable f = gemm_bias_act_fn(s, act);
  const std::vector<double> x = values(cls, seed, 0, f.n);
  std::vector<double> y(s.m * s.n), z(s.m * s.n), zmag(s.m * s.n);
  ref::gemm_bias_act_forward(gemm_problem(s, x.data()), x.data() + s.m * s.k + s.k * s.n, act, y.data(), z.data(),
                             zmag.data());
  if (act == Activation::kRelu) {
    // Keep the kink further than the largest step can move Z (1e-3 of its magnitude).
    for (int64_t i = 0; i < s.m * s.n; ++i) RC_PRE(std::fabs(z[i]) > 1e-3 * (1 + zmag[i]));
  }
  check(f, x, seed);
  // dbias is the column sum of dZ, magnitudes bound every gradient.
  const std::vector<double> dy = values(ValueClass::kNormal, seed, 1, s.m * s.n);
  std::vector<double> dz(s.m * s.n), dzm(s.m * s.n), dbias(s.n), dbm(s.n), da(s.m * s.k), dam(s.m * s.k);
  ref::gemm_bias_act_backward(gemm_problem(s, x.data()), act, z.data(), dy.data(), s.n,
                              ref::BiasActGrads<double>{dz.data(), dzm.data(), dbias.data(), dbm.data()},
                              ref::GemmGrads<double>{da.data(), dam.data()});
  for (int64_t j = 0; j < s.n; ++j) {
    double sum = 0;
    for (int64_t i = 0; i < s.m; ++i) sum += dz[i * s.n + j];
    RC_ASSERT(dbias[j] == sum);
  }
  check_mag(dz, dzm, "dZ");
  check_mag(dbias, dbm, "dbias");
  check_mag(da, dam, "dA");
}

// ---- elementwise activations -----------------------------------------------------------------------

Differentiable activation_fn(Activation act, int64_t n) {
  Differentiable f;
  f.n = f.m = n;
  f.forward = [=](const double* x, double* y) { ref::activation_forward(act, x, n, y); };
  f.vjp = [=](const double* x, const double* v, double* g) {
    ref::activation_backward(act, x, v, n, g, static_cast<double*>(nullptr));
  };
  return f;
}

RC_GTEST_PROP(BackwardReferences, Activations, ()) {
  const Activation act = *rc::gen::element(Activation::kRelu, Activation::kGeluErf, Activation::kGeluTanh,
                                           Activation::kSilu, Activation::kIdentity);
  const auto n = *rc::gen::inRange<int64_t>(1, 60);
  const ValueClass cls = *gen_input_class();
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  std::vector<double> x = values(cls, seed, 0, n);
  if (act == Activation::kRelu)
    for (double& e : x)
      if (std::fabs(e) < 1e-3) e = 0.5;  // away from the kink
  check(activation_fn(act, n), x, seed);
  const std::vector<double> dy = values(ValueClass::kNormal, seed, 1, n);
  std::vector<double> dx(n), mag(n);
  ref::activation_backward(act, x.data(), dy.data(), n, dx.data(), mag.data());
  check_mag(dx, mag, "activation");
}

TEST(BackwardReferences, ActivationKnownValues) {
  for (Activation a : {Activation::kGeluErf, Activation::kGeluTanh, Activation::kSilu}) {
    EXPECT_EQ(ref::activation_grad(a, 0.0), 0.5);
    EXPECT_EQ(ref::activation(a, 0.0), 0.0);
    EXPECT_NEAR(ref::activation_grad(a, 40.0), 1.0, 1e-14);
    EXPECT_NEAR(ref::activation_grad(a, -40.0), 0.0, 1e-14);
  }
  EXPECT_EQ(ref::activation_grad(Activation::kRelu, 0.0), 0.0);  // PyTorch: threshold_backward at 0
  EXPECT_EQ(ref::activation_grad(Activation::kRelu, 1e-300), 1.0);
  // GELU' has its minimum ~ -0.17 near z = -0.75... -1.5; the magnitude is larger than |gelu'|.
  double mag = 0;
  const double g = ref::activation_grad(Activation::kGeluErf, -1.0, &mag);
  EXPECT_LT(g, 0.0);
  EXPECT_GT(mag, 2 * std::fabs(g));
  // SiLU' approaches 1 from above: silu'(30) = 1 + 30 sigmoid(-30) - ... ~ 1 + 2.7e-12.
  const double e30 = 1 / (1 + std::exp(30.0));
  EXPECT_NEAR(ref::activation_grad(Activation::kSilu, 30.0) - 1, 29 * e30 - 30 * e30 * e30, 1e-15);
  // Far left, every form keeps its relative accuracy (no 1 + erf cancellation):
  // gelu(-10) = -10 Phi(-10) = -7.6198530241605261e-23.
  EXPECT_NEAR(ref::activation(Activation::kGeluErf, -10.0) / -7.6198530241605261e-23, 1.0, 1e-13);
  EXPECT_NEAR(ref::activation(Activation::kSilu, -40.0) / (-40 * std::exp(-40.0)), 1.0, 1e-13);
  // The two GELU forms agree to ~1e-3 (the tanh approximation's error).
  for (double z = -5; z <= 5; z += 0.25)
    EXPECT_NEAR(ref::activation(Activation::kGeluErf, z), ref::activation(Activation::kGeluTanh, z), 1e-3);
}

// ---- softmax, log-softmax ------------------------------------------------------------------------------

Differentiable softmax_fn(int64_t rows, int64_t n, bool log) {
  Differentiable f;
  f.n = f.m = rows * n;
  f.forward = [=](const double* x, double* y) {
    if (log) {
      ref::log_softmax_reference<double>(x, rows, n, n, y, static_cast<double*>(nullptr),
                                         static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
    } else {
      ref::softmax_reference<double>(x, rows, n, n, y, static_cast<double*>(nullptr),
                                     static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
    }
  };
  // What the forward's rounding scales with (as softmax_bounds in harness/bounds.h):
  // softmax y_i (n + |t_i| + D), log-softmax |t_i| + L + n u-level terms, t = x - max.
  f.magnitude = [=](const double* x, double* mag) {
    std::vector<double> y(rows * n);
    std::vector<ref::SoftmaxRowStats<double>> st(rows);
    ref::softmax_reference<double>(x, rows, n, n, y.data(), static_cast<double*>(nullptr), st.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) {
        const double t = std::fabs(x[r * n + i] - st[r].max);
        mag[r * n + i] =
            log ? t + st[r].log_sum_exp + 1 : y[r * n + i] * (static_cast<double>(n) + t + st[r].weighted_dev);
      }
  };
  f.vjp = [=](const double* x, const double* v, double* g) {
    std::vector<double> y(rows * n);
    if (log) {
      ref::log_softmax_reference<double>(x, rows, n, n, y.data(), static_cast<double*>(nullptr),
                                         static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
      ref::log_softmax_backward<double>(y.data(), v, rows, n, n, g, static_cast<double*>(nullptr));
    } else {
      ref::softmax_reference<double>(x, rows, n, n, y.data(), static_cast<double*>(nullptr),
                                     static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
      ref::softmax_backward<double>(y.data(), v, rows, n, n, g, static_cast<double*>(nullptr));
    }
  };
  return f;
}

RC_GTEST_PROP(BackwardReferences, SoftmaxAndLogSoftmax, ()) {
  const auto rows = *rc::gen::inRange<int64_t>(1, 6);
  const auto n = *rc::gen::inRange<int64_t>(1, 40);
  const bool log = *rc::gen::arbitrary<bool>();
  const ValueClass cls = *gen_input_class();
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const std::vector<double> x = values(cls, seed, 0, rows * n);
  check(softmax_fn(rows, n, log), x, seed);
  // Row sums of dx vanish (softmax: sum_i y_i (dy_i - s) = 0; log-softmax: sum dz - sum dz).
  std::vector<double> y(rows * n), dx(rows * n), mag(rows * n);
  const std::vector<double> dy = values(ValueClass::kNormal, seed, 1, rows * n);
  softmax_fn(rows, n, log).forward(x.data(), y.data());
  if (log) {
    ref::log_softmax_backward<double>(y.data(), dy.data(), rows, n, n, dx.data(), mag.data());
  } else {
    ref::softmax_backward<double>(y.data(), dy.data(), rows, n, n, dx.data(), mag.data());
  }
  check_mag(dx, mag, log ? "log-softmax" : "softmax");
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, sm = 0;
    for (int64_t i = 0; i < n; ++i) {
      s += dx[r * n + i];
      sm += mag[r * n + i];
    }
    RC_ASSERT(std::fabs(s) <= 4 * (n + 2) * kU64 * sm + 1e-300);
  }
}

// ---- LayerNorm, RMSNorm ---------------------------------------------------------------------------------

/// x = (X, gamma, beta); f = LayerNorm; J^T dY = (dX, dgamma, dbeta). `saved`: the backward
/// reads the forward's mean and rstd (as a kernel does) instead of recomputing them.
Differentiable layernorm_fn(int64_t rows, int64_t n, double eps, bool saved) {
  Differentiable f;
  f.n = rows * n + 2 * n;
  f.m = rows * n;
  f.forward = [=](const double* x, double* y) {
    ref::layernorm_reference<double>(x, rows, n, n, x + rows * n, x + rows * n + n, eps, y,
                                     static_cast<double*>(nullptr),
                                     static_cast<ref::LayerNormRowStats<double>*>(nullptr));
  };
  // The forward's rounding: x - mean cancels when |mean| >> spread; what it loses is
  // ~u (|x| + |mean|) rstd |gamma| + u |beta|.
  f.magnitude = [=](const double* x, double* mag) {
    std::vector<double> y(rows * n);
    std::vector<ref::LayerNormRowStats<double>> st(rows);
    ref::layernorm_reference<double>(x, rows, n, n, x + rows * n, x + rows * n + n, eps, y.data(),
                                     static_cast<double*>(nullptr), st.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i)
        mag[r * n + i] = (std::fabs(x[r * n + i]) + std::fabs(st[r].mean)) * st[r].rstd * std::fabs(x[rows * n + i]) +
                         std::fabs(x[rows * n + n + i]) + std::fabs(y[r * n + i]);
  };
  f.vjp = [=](const double* x, const double* v, double* g) {
    std::vector<double> mean(rows), rstd(rows), y(rows * n);
    std::vector<ref::LayerNormRowStats<double>> st(rows);
    ref::layernorm_reference<double>(x, rows, n, n, x + rows * n, x + rows * n + n, eps, y.data(),
                                     static_cast<double*>(nullptr), st.data());
    for (int64_t r = 0; r < rows; ++r) mean[r] = st[r].mean, rstd[r] = st[r].rstd;
    ref::NormGrads<double> out;
    out.dx = g;
    out.dgamma = g + rows * n;
    out.dbeta = g + rows * n + n;
    ref::layernorm_backward<double>(x, v, rows, n, n, x + rows * n, saved ? mean.data() : nullptr,
                                    saved ? rstd.data() : nullptr, eps, out);
  };
  return f;
}

RC_GTEST_PROP(BackwardReferences, LayerNorm, ()) {
  const auto rows = *rc::gen::inRange<int64_t>(1, 5);
  const auto n = *rc::gen::inRange<int64_t>(1, 24);
  const double eps = *rc::gen::element(1e-5, 1e-2, 0.5);
  const bool saved = *rc::gen::arbitrary<bool>();
  const ValueClass cls = *gen_input_class();
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  std::vector<double> x = values(cls, seed, 0, rows * n);
  if (*rc::gen::arbitrary<bool>()) {
    for (double& e : x) e = 0.05 * e + 40;  // mean >> spread: cancellation in x - mean
  }
  append(x, values(ValueClass::kNormal, seed, 1, n));   // gamma
  append(x, values(ValueClass::kUniform, seed, 2, n));  // beta
  check(layernorm_fn(rows, n, eps, saved), x, seed);
  // dX of each row is orthogonal to 1 and to xhat; magnitudes bound the gradients.
  const std::vector<double> dy = values(ValueClass::kNormal, seed, 3, rows * n);
  std::vector<double> dx(rows * n), dxm(rows * n), dg(n), dgm(n), db(n), dbm(n);
  ref::layernorm_backward<double>(
      x.data(), dy.data(), rows, n, n, x.data() + rows * n, static_cast<const double*>(nullptr),
      static_cast<const double*>(nullptr), eps,
      ref::NormGrads<double>{dx.data(), dxm.data(), dg.data(), dgm.data(), db.data(), dbm.data()});
  check_mag(dx, dxm, "LayerNorm dX");
  check_mag(dg, dgm, "dgamma");
  check_mag(db, dbm, "dbeta");
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, sm = 0;
    for (int64_t i = 0; i < n; ++i) s += dx[r * n + i], sm += dxm[r * n + i];
    RC_ASSERT(std::fabs(s) <= 8 * (n + 4) * kU64 * sm + 1e-300);
  }
}

/// x = (X, gamma); f = RMSNorm; J^T dY = (dX, dgamma).
Differentiable rmsnorm_fn(int64_t rows, int64_t n, double eps, bool saved) {
  Differentiable f;
  f.n = rows * n + n;
  f.m = rows * n;
  f.forward = [=](const double* x, double* y) {
    ref::rmsnorm_reference<double>(x, rows, n, n, x + rows * n, eps, y,
                                   static_cast<ref::RmsNormRowStats<double>*>(nullptr));
  };
  f.vjp = [=](const double* x, const double* v, double* g) {
    std::vector<double> y(rows * n), rstd(rows);
    std::vector<ref::RmsNormRowStats<double>> st(rows);
    ref::rmsnorm_reference<double>(x, rows, n, n, x + rows * n, eps, y.data(), st.data());
    for (int64_t r = 0; r < rows; ++r) rstd[r] = st[r].rstd;
    ref::NormGrads<double> out;
    out.dx = g;
    out.dgamma = g + rows * n;
    ref::rmsnorm_backward<double>(x, v, rows, n, n, x + rows * n, saved ? rstd.data() : nullptr, eps, out);
  };
  return f;
}

RC_GTEST_PROP(BackwardReferences, RmsNorm, ()) {
  const auto rows = *rc::gen::inRange<int64_t>(1, 5);
  const auto n = *rc::gen::inRange<int64_t>(1, 24);
  const double eps = *rc::gen::element(1e-6, 1e-2, 0.5);
  const bool saved = *rc::gen::arbitrary<bool>();
  const ValueClass cls = *gen_input_class();
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  std::vector<double> x = values(cls, seed, 0, rows * n);
  append(x, values(ValueClass::kNormal, seed, 1, n));
  check(rmsnorm_fn(rows, n, eps, saved), x, seed);
  const std::vector<double> dy = values(ValueClass::kNormal, seed, 3, rows * n);
  std::vector<double> dx(rows * n), dxm(rows * n), dg(n), dgm(n);
  ref::rmsnorm_backward<double>(x.data(), dy.data(), rows, n, n, x.data() + rows * n,
                                static_cast<const double*>(nullptr), eps,
                                ref::NormGrads<double>{dx.data(), dxm.data(), dg.data(), dgm.data()});
  check_mag(dx, dxm, "RMSNorm dX");
  check_mag(dg, dgm, "dgamma");
}

// ---- cross-entropy ---------------------------------------------------------------------------------------

Differentiable cross_entropy_fn(int64_t rows, int64_t n, const std::vector<int64_t>& target,
                                const ref::CrossEntropyParams& prm) {
  Differentiable f;
  f.n = rows * n;
  f.m = prm.reduction == ref::Reduction::kNone ? rows : 1;
  f.forward = [=](const double* x, double* loss) {
    (void)ref::cross_entropy_forward<double>(x, rows, n, n, target.data(), prm, loss);
  };
  // loss = lse - x_c cancels: the forward errs by ~u (|lse| + |x|max).
  f.magnitude = [=](const double* x, double* mag) {
    std::vector<double> loss(f.m);
    (void)ref::cross_entropy_forward<double>(x, rows, n, n, target.data(), prm, loss.data());
    double xmax = 0;
    for (int64_t i = 0; i < rows * n; ++i) xmax = std::max(xmax, std::fabs(x[i]));
    for (int64_t i = 0; i < f.m; ++i) mag[i] = std::fabs(loss[i]) + 2 * xmax + std::log(static_cast<double>(n)) + 1;
  };
  f.vjp = [=](const double* x, const double* v, double* g) {
    ref::cross_entropy_backward<double>(x, rows, n, n, target.data(), prm, v, g, static_cast<double*>(nullptr));
  };
  return f;
}

RC_GTEST_PROP(BackwardReferences, CrossEntropyWithIgnoreIndexAndLabelSmoothing, ()) {
  const auto rows = *rc::gen::inRange<int64_t>(1, 6);
  const auto n = *rc::gen::inRange<int64_t>(1, 30);
  ref::CrossEntropyParams prm;
  prm.label_smoothing = *rc::gen::element(0.0, 0.1, 0.3, 1.0);
  prm.reduction = *rc::gen::element(ref::Reduction::kNone, ref::Reduction::kSum, ref::Reduction::kMean);
  prm.ignore_index = *rc::gen::element<int64_t>(-100, 0);
  std::vector<int64_t> target(rows);
  for (int64_t& t : target)
    t = *rc::gen::weightedOneOf<int64_t>({{4, rc::gen::inRange<int64_t>(0, n)}, {1, rc::gen::just(prm.ignore_index)}});
  const ValueClass cls = *gen_input_class();
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const std::vector<double> x = values(cls, seed, 0, rows * n);
  int64_t count = 0;
  for (int64_t t : target) count += t != prm.ignore_index ? 1 : 0;
  RC_PRE(count > 0 || prm.reduction != ref::Reduction::kMean);  // all ignored: NaN mean, no derivative
  check(cross_entropy_fn(rows, n, target, prm), x, seed);
  // Rows of dlogits sum to zero (sum_j p_j = sum_j q_j = 1); ignored rows are zero.
  std::vector<double> dl(rows * n), mag(rows * n);
  const std::vector<double> dloss = values(ValueClass::kNormal, seed, 1, rows);
  ref::cross_entropy_backward<double>(x.data(), rows, n, n, target.data(), prm, dloss.data(), dl.data(), mag.data());
  check_mag(dl, mag, "dlogits");
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, sm = 0;
    for (int64_t j = 0; j < n; ++j) s += dl[r * n + j], sm += mag[r * n + j];
    RC_ASSERT(std::fabs(s) <= 4 * (n + 4) * kU64 * sm + 1e-300);
    if (target[r] == prm.ignore_index) RC_ASSERT(sm == 0.0);
  }
}

TEST(BackwardReferences, CrossEntropyForwardAgreesWithTheExistingReference) {
  const int64_t rows = 7, n = 11;
  const std::vector<double> x = draw_values(ValueClass::kNormal, 3, 0, rows * n);
  const std::vector<int64_t> target = {0, 10, -100, 5, 3, 3, 9};
  std::vector<ref::CrossEntropyRow<double>> old(rows);
  ref::cross_entropy_reference<double>(x.data(), rows, n, n, target.data(), old.data());
  ref::CrossEntropyParams prm;
  prm.reduction = ref::Reduction::kNone;
  std::vector<double> loss(rows);
  EXPECT_EQ(ref::cross_entropy_forward<double>(x.data(), rows, n, n, target.data(), prm, loss.data()), 6);
  for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(loss[r], old[r].loss, 1e-14 * (1 + std::fabs(old[r].loss))) << r;
  prm.reduction = ref::Reduction::kMean;
  double mean = 0;
  (void)ref::cross_entropy_forward<double>(x.data(), rows, n, n, target.data(), prm, &mean);
  EXPECT_NEAR(mean, ref::cross_entropy_mean<double>(old.data(), rows).mean, 1e-14);
  // Full smoothing: the loss is the mean over classes of -z_j, the target does not matter.
  prm.label_smoothing = 1;
  prm.reduction = ref::Reduction::kNone;
  std::vector<double> l1(rows), l2(rows);
  const std::vector<int64_t> other = {1, 2, -100, 4, 0, 0, 1};
  (void)ref::cross_entropy_forward<double>(x.data(), rows, n, n, target.data(), prm, l1.data());
  (void)ref::cross_entropy_forward<double>(x.data(), rows, n, n, other.data(), prm, l2.data());
  EXPECT_EQ(l1, l2);
  // A target out of range (not ignore_index) gives NaN, as the forward reference.
  const std::vector<int64_t> bad = {0, 11, -100, 5, 3, 3, 9};
  std::vector<double> dl(rows * n);
  const std::vector<double> ones(rows, 1.0);
  ref::cross_entropy_backward<double>(x.data(), rows, n, n, bad.data(), prm, ones.data(), dl.data(),
                                      static_cast<double*>(nullptr));
  EXPECT_TRUE(std::isnan(dl[1 * n]));
  EXPECT_FALSE(std::isnan(dl[0]));
}

// ---- rotary embedding -------------------------------------------------------------------------------------

RC_GTEST_PROP(BackwardReferences, RotaryBothLayouts, ()) {
  const auto rows = *rc::gen::inRange<int64_t>(1, 6);
  const auto half_d = *rc::gen::inRange<int64_t>(1, 9);
  const int64_t d = 2 * half_d;
  const int64_t rd = 2 * *rc::gen::inRange<int64_t>(1, half_d + 1);  // partial rotary when rd < d
  const auto layout = *rc::gen::element(ref::RotaryLayout::kHalfSplit, ref::RotaryLayout::kInterleaved);
  const double base = *rc::gen::element(10000.0, 500000.0, 10.0);
  const int64_t positions = 64;
  std::vector<int64_t> pos(rows);
  for (int64_t& p : pos) p = *rc::gen::inRange<int64_t>(0, positions);
  std::vector<double> cs(positions * rd / 2), sn(positions * rd / 2);
  ref::rotary_tables<double>(positions, rd, base, cs.data(), sn.data());
  const ValueClass cls = *gen_input_class();
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const std::vector<double> x = values(cls, seed, 0, rows * d);
  Differentiable f;
  f.n = f.m = rows * d;
  f.forward = [=](const double* in, double* y) {
    ref::rotary_forward<double>(in, rows, d, d, rd, cs.data(), sn.data(), pos.data(), layout, y,
                                static_cast<double*>(nullptr));
  };
  f.magnitude = [=](const double* in, double* mag) {
    std::vector<double> y(rows * d);
    ref::rotary_forward<double>(in, rows, d, d, rd, cs.data(), sn.data(), pos.data(), layout, y.data(), mag);
  };
  f.vjp = [=](const double*, const double* v, double* g) {
    ref::rotary_backward<double>(v, rows, d, d, rd, cs.data(), sn.data(), pos.data(), layout, g,
                                 static_cast<double*>(nullptr));
  };
  check(f, x, seed);
  // The rotation is orthogonal: backward(forward(x)) = x up to rounding; magnitudes bound.
  std::vector<double> y(rows * d), back(rows * d), mag(rows * d), bmag(rows * d);
  ref::rotary_forward<double>(x.data(), rows, d, d, rd, cs.data(), sn.data(), pos.data(), layout, y.data(), mag.data());
  ref::rotary_backward<double>(y.data(), rows, d, d, rd, cs.data(), sn.data(), pos.data(), layout, back.data(),
                               bmag.data());
  check_mag(y, mag, "rotary");
  check_mag(back, bmag, "rotary backward");
  for (int64_t i = 0; i < rows * d; ++i) RC_ASSERT(std::fabs(back[i] - x[i]) <= 8 * kU64 * (bmag[i] + mag[i]) + 1e-300);
}

TEST(BackwardReferences, RotaryLayoutsPairTheRightDimensions) {
  // One row at position 1, d = 4, base 1: theta_0 = 1, theta_1 = 1 * 1^(-1/2) = 1.
  std::vector<double> cs(2 * 2), sn(2 * 2);
  ref::rotary_tables<double>(2, 4, 1.0, cs.data(), sn.data());
  const std::vector<double> e0 = {1, 0, 0, 0};
  const int64_t pos = 1;
  std::vector<double> y(4);
  ref::rotary_forward<double>(e0.data(), 1, 4, 4, 4, cs.data(), sn.data(), &pos, ref::RotaryLayout::kHalfSplit,
                              y.data(), static_cast<double*>(nullptr));
  EXPECT_EQ(y, (std::vector<double>{std::cos(1.0), 0, std::sin(1.0), 0}));  // pairs (0, 2)
  ref::rotary_forward<double>(e0.data(), 1, 4, 4, 4, cs.data(), sn.data(), &pos, ref::RotaryLayout::kInterleaved,
                              y.data(), static_cast<double*>(nullptr));
  EXPECT_EQ(y, (std::vector<double>{std::cos(1.0), std::sin(1.0), 0, 0}));  // pairs (0, 1)
}

// ---- scalar types --------------------------------------------------------------------------------------

/// Every backward in long double agrees with double within a few roundings of its magnitude.
TEST(BackwardReferences, LongDoubleInstantiationAgrees) {
  using LD = long double;
  const int64_t rows = 3, n = 7;
  const std::vector<double> x = draw_values(ValueClass::kNormal, 7, 0, rows * n);
  const std::vector<double> dy = draw_values(ValueClass::kUniform, 7, 1, rows * n);
  const std::vector<double> gamma = draw_values(ValueClass::kNormal, 7, 2, n);
  auto close = [](const std::vector<double>& a, const std::vector<LD>& b, const std::vector<double>& mag,
                  const char* what) {
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_LE(std::fabs(static_cast<LD>(a[i]) - b[i]), 64 * kU64 * mag[i] + 1e-300) << what << " " << i;
  };
  std::vector<double> d(rows * n), m(rows * n);
  std::vector<LD> l(rows * n);
  // softmax and log-softmax (y from the double forward: the saved output).
  std::vector<double> y(rows * n);
  ref::softmax_reference<double>(x.data(), rows, n, n, y.data(), static_cast<double*>(nullptr),
                                 static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
  ref::softmax_backward<double>(y.data(), dy.data(), rows, n, n, d.data(), m.data());
  ref::softmax_backward<LD>(y.data(), dy.data(), rows, n, n, l.data(), static_cast<LD*>(nullptr));
  close(d, l, m, "softmax");
  ref::log_softmax_backward<double>(x.data(), dy.data(), rows, n, n, d.data(), m.data());
  ref::log_softmax_backward<LD>(x.data(), dy.data(), rows, n, n, l.data(), static_cast<LD*>(nullptr));
  close(d, l, m, "log-softmax");
  // LayerNorm, RMSNorm dX.
  ref::layernorm_backward<double>(x.data(), dy.data(), rows, n, n, gamma.data(), static_cast<const double*>(nullptr),
                                  static_cast<const double*>(nullptr), 1e-5,
                                  ref::NormGrads<double>{d.data(), m.data()});
  ref::layernorm_backward<LD>(x.data(), dy.data(), rows, n, n, gamma.data(), static_cast<const double*>(nullptr),
                              static_cast<const double*>(nullptr), 1e-5, ref::NormGrads<LD>{l.data()});
  close(d, l, m, "layernorm");
  ref::rmsnorm_backward<double>(x.data(), dy.data(), rows, n, n, gamma.data(), static_cast<const double*>(nullptr),
                                1e-5, ref::NormGrads<double>{d.data(), m.data()});
  ref::rmsnorm_backward<LD>(x.data(), dy.data(), rows, n, n, gamma.data(), static_cast<const double*>(nullptr), 1e-5,
                            ref::NormGrads<LD>{l.data()});
  close(d, l, m, "rmsnorm");
  // Cross-entropy with smoothing, activations.
  const std::vector<int64_t> target = {1, -100, 6};
  ref::CrossEntropyParams prm;
  prm.label_smoothing = 0.1;
  const double one = 1;
  ref::cross_entropy_backward<double>(x.data(), rows, n, n, target.data(), prm, &one, d.data(), m.data());
  ref::cross_entropy_backward<LD>(x.data(), rows, n, n, target.data(), prm, &one, l.data(), static_cast<LD*>(nullptr));
  close(d, l, m, "cross-entropy");
  for (Activation a : {Activation::kGeluErf, Activation::kGeluTanh, Activation::kSilu}) {
    ref::activation_backward(a, x.data(), dy.data(), rows * n, d.data(), m.data());
    ref::activation_backward(a, x.data(), dy.data(), rows * n, l.data(), static_cast<LD*>(nullptr));
    close(d, l, m, "activation");
  }
  // GEMM dA, dB in long double (GemmProblem<long double> on the same values).
  const std::vector<double> a = draw_values(ValueClass::kNormal, 7, 5, 4 * 5),
                            b = draw_values(ValueClass::kNormal, 7, 6, 5 * 3),
                            dc = draw_values(ValueClass::kNormal, 7, 7, 4 * 3);
  const std::vector<LD> al(a.begin(), a.end()), bl(b.begin(), b.end()), dcl(dc.begin(), dc.end());
  ref::GemmProblem<double> pd;
  pd.m = 4, pd.n = 3, pd.k = 5, pd.a = a.data(), pd.lda = 5, pd.b = b.data(), pd.ldb = 3, pd.alpha = 0.3;
  ref::GemmProblem<LD> pl;
  pl.m = 4, pl.n = 3, pl.k = 5, pl.a = al.data(), pl.lda = 5, pl.b = bl.data(), pl.ldb = 3,
  pl.alpha = static_cast<LD>(0.3);
  std::vector<double> da(20), dam(20);
  std::vector<LD> dal(20);
  ref::gemm_backward(pd, dc.data(), 3, ref::GemmGrads<double>{da.data(), dam.data()});
  ref::gemm_backward(pl, dcl.data(), 3, ref::GemmGrads<LD>{dal.data()});
  close(da, dal, dam, "gemm dA");
}

}  // namespace
}  // namespace assay
