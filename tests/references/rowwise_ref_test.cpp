// Row-wise host references (reductions.h, softmax.h, norms.h): the double instantiation against
// the same templates in ~166-bit arithmetic (Boost cpp_bin_float_50), within the fp64 ceilings of
// harness/bounds.h (so these also exercise the bounds with acc = fp64); the double-double
// instantiation at least 2^40 times closer than that ceiling; known values; PyTorch's special
// values (-inf entries, all -inf rows, +inf, NaN, huge logits); thread count changes no bit.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "harness/bounds.h"
#include "references/host/dot2.h"
#include "references/host/norms.h"
#include "references/host/reductions.h"
#include "references/host/softmax.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

using Mp = boost::multiprecision::cpp_bin_float_50;
using ref::DoubleDouble;

constexpr double kDdFactor = 0x1p-40;  // double-double must beat the fp64 ceiling by this much

double d(const Mp& v) {
  return static_cast<double>(v);
}
double d(double v) {
  return v;
}
/// |a - b| in Mp for any of the three scalar types against an Mp value.
Mp diff(double a, const Mp& b) {
  return abs(Mp(a) - b);
}
Mp diff(const DoubleDouble& a, const Mp& b) {
  return abs(Mp(a.hi) + Mp(a.lo) - b);
}

/// Doubles with mixed signs over 2^-20..2^20, zeros and small integers (as gemm_ref_test).
rc::Gen<double> gen_row_value() {
  return rc::gen::weightedOneOf<double>({
      {1, rc::gen::just(0.0)},
      {2, rc::gen::map(rc::gen::inRange(-8, 9), [](int v) { return static_cast<double>(v); })},
      {6, rc::gen::map(
              rc::gen::pair(rc::gen::inRange<int64_t>(-(int64_t{1} << 53) + 1, int64_t{1} << 53),
                            rc::gen::inRange(-20, 21)),
              [](std::pair<int64_t, int> me) { return std::ldexp(static_cast<double>(me.first), me.second - 53); })},
  });
}

/// A row of n values; with `offset`, all shifted by a large common value (conditioning).
rc::Gen<std::vector<double>> gen_row(size_t lo, size_t hi) {
  return rc::gen::mapcat(rc::gen::inRange(lo, hi),
                         [](size_t n) { return rc::gen::container<std::vector<double>>(n, gen_row_value()); });
}

ReductionModel f64_reduction(int64_t n) {
  ReductionModel m;
  m.in = m.acc = m.out = DType::kF64;
  m.n = n;
  return m;
}

// ---- sum, mean, variance, norms -------------------------------------------------------------------------

RC_GTEST_PROP(ReductionReferences, DoubleAndDoubleDoubleMatchMultiprecision, ()) {
  std::vector<double> x = *gen_row(1, 60);
  if (*rc::gen::arbitrary<bool>()) {  // shift: mean >> spread
    const double c = *rc::gen::element(1e3, -1e6, 1e9);
    for (double& v : x) v = v * 1e-3 + c;
  }
  const auto n = static_cast<int64_t>(x.size());
  const ReductionModel m = f64_reduction(n);

  const auto s = ref::sum_reference<double>(x.data(), n);
  const auto sm = ref::sum_reference<Mp>(x.data(), n);
  const auto sd = ref::sum_reference<DoubleDouble>(x.data(), n);
  const ElementBound bs = sum_bounds(m).ceiling;
  RC_ASSERT(diff(s.sum, sm.sum) <= Mp(bs.tol(d(abs(sm.sum)), d(sm.abs_sum))));
  RC_ASSERT(diff(sd.sum, sm.sum) <= Mp(kDdFactor * bs.tol(d(abs(sm.sum)), d(sm.abs_sum))));
  RC_ASSERT(diff(s.abs_sum, sm.abs_sum) <= Mp(bs.tol(d(sm.abs_sum), d(sm.abs_sum))));

  const auto mn = ref::mean_reference<double>(x.data(), n);
  const auto mm = ref::mean_reference<Mp>(x.data(), n);
  RC_ASSERT(diff(mn.mean, mm.mean) <= Mp(mean_bounds(m).ceiling.tol(d(abs(mm.mean)), d(mm.mean_abs))));

  for (int ddof : {0, 1}) {
    const auto v = ref::variance_reference<double>(x.data(), n, ddof);
    const auto vm = ref::variance_reference<Mp>(x.data(), n, ddof);
    const auto vd = ref::variance_reference<DoubleDouble>(x.data(), n, ddof);
    if (n - ddof <= 0) {
      RC_ASSERT(std::isnan(v.var));
      RC_ASSERT(std::isnan(vd.var.hi));
      continue;
    }
    const VarianceMags g{d(vm.mean_abs), d(vm.max_abs), d(vm.range)};
    const ElementBound bv = variance_bounds(m, ddof, g).ceiling;
    const double tol = bv.tol(d(vm.var), variance_mag(g));
    RC_ASSERT(diff(v.var, vm.var) <= Mp(tol));
    RC_ASSERT(diff(vd.var, vm.var) <= Mp(kDdFactor * tol));
    RC_ASSERT(v.max_abs == d(vm.max_abs));
  }

  const auto nr = ref::norm_reference<double>(x.data(), n);
  const auto nm = ref::norm_reference<Mp>(x.data(), n);
  const auto nd = ref::norm_reference<DoubleDouble>(x.data(), n);
  const ElementBound b2 = norm_bounds(m, NormKind::kL2).ceiling;
  RC_ASSERT(diff(nr.l2, nm.l2) <= Mp(b2.tol(d(nm.l2), 0)));
  RC_ASSERT(diff(nd.l2, nm.l2) <= Mp(kDdFactor * b2.tol(d(nm.l2), 0)));
  RC_ASSERT(diff(nr.l1, nm.l1) <= Mp(norm_bounds(m, NormKind::kL1).ceiling.tol(d(nm.l1), 0)));
  RC_ASSERT(nr.linf == d(nm.linf));
}

TEST(ReductionReferences, KnownValuesAndSpecialCases) {
  const std::vector<double> x = {1, 2, 3, 4};
  EXPECT_EQ(ref::sum_reference<double>(x.data(), 4).sum, 10.0);
  EXPECT_EQ(ref::mean_reference<double>(x.data(), 4).mean, 2.5);
  EXPECT_EQ(ref::variance_reference<double>(x.data(), 4, 0).var, 1.25);
  EXPECT_NEAR(ref::variance_reference<double>(x.data(), 4, 1).var, 5.0 / 3, 1e-15);
  EXPECT_EQ(ref::variance_reference<double>(x.data(), 4, 0).range, 3.0);
  EXPECT_TRUE(std::isnan(ref::variance_reference<double>(x.data(), 1, 1).var));  // torch.var of one value
  EXPECT_TRUE(std::isnan(ref::mean_reference<double>(x.data(), 0).mean));
  EXPECT_EQ(ref::sum_reference<double>(x.data(), 2, 2).sum, 4.0);  // stride 2: 1 + 3

  const std::vector<double> v = {3, -4};
  const auto nr = ref::norm_reference<double>(v.data(), 2);
  EXPECT_EQ(nr.l1, 7.0);
  EXPECT_EQ(nr.l2, 5.0);
  EXPECT_EQ(nr.linf, 4.0);
  const std::vector<double> huge = {1e300, 1e300}, tiny = {3e-310, 4e-310};  // no overflow, no underflow
  EXPECT_NEAR(ref::norm_reference<double>(huge.data(), 2).l2, std::sqrt(2.0) * 1e300, 1e285);
  EXPECT_NEAR(ref::norm_reference<double>(tiny.data(), 2).l2, 5e-310, 1e-322);
  const std::vector<double> with_inf = {1, kInf, 2}, with_nan = {1, kInf, kNaN};
  EXPECT_EQ(ref::norm_reference<double>(with_inf.data(), 3).l2, kInf);
  EXPECT_TRUE(std::isnan(ref::norm_reference<double>(with_nan.data(), 3).l2));
  // Large mean, small spread: the corrected two-pass keeps the variance of 1e9 + {0, 1, 2} (2/3).
  const std::vector<double> shifted = {1e9, 1e9 + 1, 1e9 + 2};
  EXPECT_NEAR(ref::variance_reference<double>(shifted.data(), 3, 0).var, 2.0 / 3, 1e-12);
}

TEST(ReductionReferences, RowsAndThreads) {
  const int64_t rows = 97, n = 1500;
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> x(rows * (n + 3));  // ld = n + 3
  for (double& v : x) v = normal(rng) + 10;
  std::vector<ref::VarianceResult<double>> a(rows), b(rows);
  ref::variance_rows<double>(x.data(), rows, n, n + 3, 1, a.data(), 1);
  ref::variance_rows<double>(x.data(), rows, n, n + 3, 1, b.data(), 4);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), rows * sizeof(a[0])), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const auto one = ref::variance_reference<double>(x.data() + r * (n + 3), n, 1);
    EXPECT_EQ(one.var, a[r].var);
  }
  std::vector<ref::NormResult<double>> na(rows), nb(rows);
  ref::norm_rows<double>(x.data(), rows, n, n + 3, na.data(), 1);
  ref::norm_rows<double>(x.data(), rows, n, n + 3, nb.data(), 3);
  EXPECT_EQ(std::memcmp(na.data(), nb.data(), rows * sizeof(na[0])), 0);
  std::vector<ref::SumResult<double>> sa(rows), sb(rows);
  ref::sum_rows<double>(x.data(), rows, n, n + 3, sa.data(), 1);
  ref::sum_rows<double>(x.data(), rows, n, n + 3, sb.data(), 8);
  EXPECT_EQ(std::memcmp(sa.data(), sb.data(), rows * sizeof(sa[0])), 0);
  std::vector<ref::MeanResult<double>> ma(rows), mb(rows);
  ref::mean_rows<double>(x.data(), rows, n, n + 3, ma.data(), 1);
  ref::mean_rows<double>(x.data(), rows, n, n + 3, mb.data(), 2);
  EXPECT_EQ(std::memcmp(ma.data(), mb.data(), rows * sizeof(ma[0])), 0);
}

// ---- softmax, log-softmax, cross-entropy ------------------------------------------------------------------

SoftmaxModel f64_softmax(int64_t n) {
  SoftmaxModel m;
  m.in = m.acc = m.out = DType::kF64;
  m.n = n;
  return m;
}

RC_GTEST_PROP(SoftmaxReferences, DoubleAndDoubleDoubleMatchMultiprecision, ()) {
  const auto n = *rc::gen::inRange<int64_t>(1, 50);
  const double scale = *rc::gen::element(1.0, 30.0, 1000.0);
  std::vector<double> x(n);
  const auto ints = *rc::gen::container<std::vector<int>>(static_cast<size_t>(n), rc::gen::inRange(-100000, 100000));
  for (int64_t i = 0; i < n; ++i) x[i] = ints[i] * 1e-5 * scale * 3;
  if (n > 2 && *rc::gen::arbitrary<bool>()) x[n / 2] = -kInf;  // a masked entry

  std::vector<double> y(n), mag(n), z(n), zmag(n);
  std::vector<Mp> ym(n), magm(n), zm(n), zmagm(n);
  std::vector<DoubleDouble> yd(n), magd(n), zd(n);
  const auto st = ref::softmax_row<double>(x.data(), n, y.data(), mag.data());
  const auto stm = ref::softmax_row<Mp>(x.data(), n, ym.data(), magm.data());
  ref::softmax_row<DoubleDouble>(x.data(), n, yd.data(), magd.data());
  ref::log_softmax_row<double>(x.data(), n, z.data(), zmag.data());
  ref::log_softmax_row<Mp>(x.data(), n, zm.data(), zmagm.data());
  ref::log_softmax_row<DoubleDouble>(x.data(), n, zd.data(), static_cast<DoubleDouble*>(nullptr));
  const SoftmaxRowMags row{d(stm.weighted_dev), d(stm.log_sum_exp)};
  const ElementBound bs = softmax_bounds(f64_softmax(n), row).ceiling;
  const ElementBound bl = log_softmax_bounds(f64_softmax(n), row).ceiling;
  RC_ASSERT(std::fabs(d(st.sum_exp) - d(stm.sum_exp)) <= 1e-12 * d(stm.sum_exp));
  for (int64_t i = 0; i < n; ++i) {
    const double ts = bs.tol(d(ym[i]), d(magm[i]));
    RC_ASSERT(diff(y[i], ym[i]) <= Mp(ts));
    RC_ASSERT(diff(yd[i], ym[i]) <= Mp(kDdFactor * ts));
    if (x[i] == -kInf) {
      RC_ASSERT(y[i] == 0.0);
      RC_ASSERT(z[i] == -kInf && zd[i].hi == -kInf && zm[i] == Mp(-kInf));
      continue;
    }
    const double tl = bl.tol(d(abs(zm[i])), d(zmagm[i]));
    RC_ASSERT(diff(z[i], zm[i]) <= Mp(tl));
    RC_ASSERT(diff(zd[i], zm[i]) <= Mp(kDdFactor * tl));
  }
}

TEST(SoftmaxReferences, KnownValues) {
  const std::vector<double> x = {0, std::log(3.0)};
  std::vector<double> y(2), z(2), mag(2);
  ref::softmax_row<double>(x.data(), 2, y.data(), mag.data());
  EXPECT_NEAR(y[0], 0.25, 1e-16);
  EXPECT_NEAR(y[1], 0.75, 1e-16);
  EXPECT_NEAR(mag[0], 0.25 * std::log(3.0), 1e-16);  // y_i |x_i - max|
  EXPECT_EQ(mag[1], 0.0);
  const auto st = ref::log_softmax_row<double>(x.data(), 2, z.data(), mag.data());
  EXPECT_NEAR(z[0], std::log(0.25), 1e-15);
  EXPECT_NEAR(st.log_sum_exp, std::log(4.0 / 3.0), 1e-16);
  EXPECT_NEAR(st.weighted_dev, 0.25 * std::log(3.0), 1e-16);
  const std::vector<double> one = {123.0};
  ref::softmax_row<double>(one.data(), 1, y.data(), nullptr);
  EXPECT_EQ(y[0], 1.0);
  ref::log_softmax_row<double>(one.data(), 1, z.data(), nullptr);
  EXPECT_EQ(z[0], 0.0);
}

/// Softmax and log-softmax of one row in double, Mp and DoubleDouble; NaN patterns must agree.
void special_row(const std::vector<double>& x, std::vector<double>& y, std::vector<double>& z) {
  const auto n = static_cast<int64_t>(x.size());
  y.assign(n, 0);
  z.assign(n, 0);
  std::vector<Mp> ym(n), zm(n);
  std::vector<DoubleDouble> yd(n), zd(n);
  ref::softmax_row<double>(x.data(), n, y.data(), static_cast<double*>(nullptr));
  ref::log_softmax_row<double>(x.data(), n, z.data(), static_cast<double*>(nullptr));
  ref::softmax_row<Mp>(x.data(), n, ym.data(), static_cast<Mp*>(nullptr));
  ref::log_softmax_row<Mp>(x.data(), n, zm.data(), static_cast<Mp*>(nullptr));
  ref::softmax_row<DoubleDouble>(x.data(), n, yd.data(), static_cast<DoubleDouble*>(nullptr));
  ref::log_softmax_row<DoubleDouble>(x.data(), n, zd.data(), static_cast<DoubleDouble*>(nullptr));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(std::isnan(y[i]), std::isnan(d(ym[i]))) << i;
    EXPECT_EQ(std::isnan(y[i]), std::isnan(yd[i].hi)) << i;
    EXPECT_EQ(std::isnan(z[i]), std::isnan(d(zm[i]))) << i;
    EXPECT_EQ(std::isnan(z[i]), std::isnan(zd[i].hi)) << i;
    if (!std::isnan(y[i])) {
      EXPECT_NEAR(y[i], d(ym[i]), 1e-15) << i;
    }
    if (std::isfinite(z[i])) {
      EXPECT_NEAR(z[i], d(zm[i]), 1e-12 * (1 + std::fabs(z[i]))) << i;
    }
    if (std::isinf(z[i])) {
      EXPECT_EQ(z[i], zd[i].hi) << i;
    }
  }
}

TEST(SoftmaxReferences, PyTorchSpecialValues) {
  std::vector<double> y, z;
  special_row({1.0, -kInf, 2.0, -kInf}, y, z);  // masked entries
  EXPECT_EQ(y[1], 0.0);
  EXPECT_EQ(z[1], -kInf);
  EXPECT_NEAR(y[0] + y[2], 1.0, 1e-16);
  special_row({-kInf, -kInf, -kInf}, y, z);  // fully masked row: NaN, as torch.softmax
  for (double v : y) EXPECT_TRUE(std::isnan(v));
  for (double v : z) EXPECT_TRUE(std::isnan(v));
  special_row({1.0, kInf, 2.0}, y, z);  // +inf: inf - inf
  for (double v : y) EXPECT_TRUE(std::isnan(v));
  special_row({1.0, kNaN, 2.0}, y, z);
  for (double v : y) EXPECT_TRUE(std::isnan(v));
  special_row({1e300, -1e300, 1e300}, y, z);  // huge logits: max subtraction keeps them finite
  EXPECT_EQ(y[0], 0.5);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_NEAR(z[0], -std::log(2.0), 1e-16);
  EXPECT_EQ(z[1], -2e300);                 // finite: t - L, no exp involved
  special_row({1.7e308, -1.7e308}, y, z);  // x - max overflows to -inf
  EXPECT_EQ(y[0], 1.0);
  EXPECT_EQ(y[1], 0.0);
}

TEST(CrossEntropyReferences, RowsMeanIgnoreIndexAndThreads) {
  const int64_t rows = 40, n = 4096;
  std::mt19937_64 rng(2);
  std::normal_distribution<double> normal(0, 3);
  std::vector<double> x(rows * n);
  for (double& v : x) v = normal(rng);
  std::vector<int64_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = (r * 977) % n;
  t[3] = -100;              // ignored
  t[4] = n;                 // out of range: NaN (PyTorch raises)
  x[5 * n + t[5]] = -kInf;  // target masked: loss +inf
  std::vector<ref::CrossEntropyRow<double>> a(rows), b(rows);
  const int64_t rows_mp = 8;  // multiprecision exp is slow: the first rows only
  std::vector<ref::CrossEntropyRow<Mp>> am(rows_mp);
  ref::cross_entropy_reference<double>(x.data(), rows, n, n, t.data(), a.data(), 1);
  ref::cross_entropy_reference<double>(x.data(), rows, n, n, t.data(), b.data(), 4);
  ref::cross_entropy_reference<Mp>(x.data(), rows_mp, n, n, t.data(), am.data(),
                                   1);  // Boost caches constants lazily: one thread
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(std::memcmp(&a[r].loss, &b[r].loss, sizeof(double)), 0);
  for (int64_t r = 0; r < rows_mp; ++r) {
    if (r == 3) {
      EXPECT_TRUE(a[r].ignored);
      continue;
    }
    if (r == 4) {
      EXPECT_TRUE(std::isnan(a[r].loss));
      continue;
    }
    if (r == 5) {
      EXPECT_EQ(a[r].loss, kInf);
      continue;
    }
    const ElementBound bc =
        cross_entropy_bounds(f64_softmax(n), {d(am[r].stats.weighted_dev), d(am[r].stats.log_sum_exp)}).ceiling;
    EXPECT_LE(d(diff(a[r].loss, am[r].loss)), bc.tol(d(am[r].loss), d(am[r].target_dev)));
    // loss = logsumexp(x) - x_c, directly in Mp
    Mp lse = 0;
    for (int64_t i = 0; i < n; ++i) lse += exp(Mp(x[r * n + i]));
    EXPECT_NEAR(d(log(lse) - Mp(x[r * n + t[r]])), d(am[r].loss), 1e-30);
  }
  // Mean over the valid rows (drop the NaN and +inf rows first).
  std::vector<ref::CrossEntropyRow<double>> valid;
  for (int64_t r = 0; r < rows; ++r)
    if (r != 4 && r != 5) valid.push_back(a[r]);
  const auto mean = ref::cross_entropy_mean<double>(valid.data(), static_cast<int64_t>(valid.size()));
  EXPECT_EQ(mean.count, static_cast<int64_t>(valid.size()) - 1);  // row 3 ignored
  EXPECT_GT(mean.mean, 0.0);
  std::vector<ref::CrossEntropyRow<double>> none(2);
  none[0].ignored = none[1].ignored = true;
  EXPECT_TRUE(std::isnan(ref::cross_entropy_mean<double>(none.data(), 2).mean));  // all ignored: NaN
}

TEST(SoftmaxReferences, RowsAndThreadsBitIdentical) {
  const int64_t rows = 64, n = 2048;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 5);
  std::vector<double> x(rows * (n + 1));
  for (double& v : x) v = normal(rng);
  std::vector<double> y1(rows * n), y4(rows * n), m1(rows * n), m4(rows * n);
  std::vector<ref::SoftmaxRowStats<double>> s1(rows), s4(rows);
  ref::softmax_reference<double>(x.data(), rows, n, n + 1, y1.data(), m1.data(), s1.data(), 1);
  ref::softmax_reference<double>(x.data(), rows, n, n + 1, y4.data(), m4.data(), s4.data(), 4);
  EXPECT_EQ(std::memcmp(y1.data(), y4.data(), y1.size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(m1.data(), m4.data(), m1.size() * sizeof(double)), 0);
  ref::log_softmax_reference<double>(x.data(), rows, n, n + 1, y1.data(), m1.data(), s1.data(), 1);
  ref::log_softmax_reference<double>(x.data(), rows, n, n + 1, y4.data(), m4.data(), s4.data(), 3);
  EXPECT_EQ(std::memcmp(y1.data(), y4.data(), y1.size() * sizeof(double)), 0);
  for (int64_t r = 0; r < rows; ++r) {  // row r of the batch equals the single-row call
    std::vector<double> z(n);
    ref::log_softmax_row<double>(x.data() + r * (n + 1), n, z.data(), static_cast<double*>(nullptr));
    EXPECT_EQ(std::memcmp(z.data(), y1.data() + r * n, n * sizeof(double)), 0);
  }
}

// ---- LayerNorm, RMSNorm -------------------------------------------------------------------------------------

RC_GTEST_PROP(NormReferences, DoubleAndDoubleDoubleMatchMultiprecision, ()) {
  std::vector<double> x = *gen_row(2, 40);
  const auto n = static_cast<int64_t>(x.size());
  if (*rc::gen::arbitrary<bool>()) {
    for (double& v : x) v = v * 1e-4 + 100;  // mean >> spread
  }
  const auto gamma = *rc::gen::container<std::vector<double>>(static_cast<size_t>(n), gen_row_value());
  const auto beta = *rc::gen::container<std::vector<double>>(static_cast<size_t>(n), gen_row_value());
  const double eps = *rc::gen::element(1e-5, 1e-12, 0.1);
  std::vector<double> y(n), mag(n);
  std::vector<Mp> ym(n), magm(n);
  std::vector<DoubleDouble> yd(n), magd(n);
  ref::LayerNormRowStats<Mp> stm;
  ref::layernorm_reference<double>(x.data(), 1, n, n, gamma.data(), beta.data(), eps, y.data(), mag.data(),
                                   static_cast<ref::LayerNormRowStats<double>*>(nullptr));
  ref::layernorm_reference<Mp>(x.data(), 1, n, n, gamma.data(), beta.data(), eps, ym.data(), magm.data(), &stm);
  ref::layernorm_reference<DoubleDouble>(x.data(), 1, n, n, gamma.data(), beta.data(), eps, yd.data(), magd.data(),
                                         static_cast<ref::LayerNormRowStats<DoubleDouble>*>(nullptr));
  NormModel m;
  m.in = m.acc = m.out = DType::kF64;
  m.n = n;
  m.eps = eps;
  const ElementBound bl =
      layernorm_bounds(m, {d(stm.var), {d(stm.mean_abs), d(stm.max_abs), d(stm.range)}, d(stm.max_abs_gamma)}).ceiling;
  for (int64_t i = 0; i < n; ++i) {
    const double tol = bl.tol(d(abs(ym[i])), d(magm[i]));
    RC_ASSERT(diff(y[i], ym[i]) <= Mp(tol));
    RC_ASSERT(diff(yd[i], ym[i]) <= Mp(kDdFactor * tol));
  }
  std::vector<double> r(n);
  std::vector<Mp> rm(n);
  std::vector<DoubleDouble> rd(n);
  ref::RmsNormRowStats<Mp> rs;
  ref::rmsnorm_reference<double>(x.data(), 1, n, n, gamma.data(), eps, r.data(),
                                 static_cast<ref::RmsNormRowStats<double>*>(nullptr));
  ref::rmsnorm_reference<Mp>(x.data(), 1, n, n, gamma.data(), eps, rm.data(), &rs);
  ref::rmsnorm_reference<DoubleDouble>(x.data(), 1, n, n, gamma.data(), eps, rd.data(),
                                       static_cast<ref::RmsNormRowStats<DoubleDouble>*>(nullptr));
  const ElementBound br = rmsnorm_bounds(m, d(rs.mean_sq)).ceiling;
  for (int64_t i = 0; i < n; ++i) {
    const double tol = br.tol(d(abs(rm[i])), 0);
    RC_ASSERT(diff(r[i], rm[i]) <= Mp(tol));
    RC_ASSERT(diff(rd[i], rm[i]) <= Mp(kDdFactor * tol));
  }
}

TEST(NormReferences, KnownValuesAndThreads) {
  const std::vector<double> x = {1, 2, 3, 4};
  std::vector<double> y(4), mag(4);
  ref::LayerNormRowStats<double> st;
  ref::layernorm_reference<double>(x.data(), 1, 4, 4, static_cast<const double*>(nullptr),
                                   static_cast<const double*>(nullptr), 0.0, y.data(), mag.data(), &st);
  EXPECT_EQ(st.mean, 2.5);
  EXPECT_EQ(st.var, 1.25);
  EXPECT_NEAR(y[0], -1.5 / std::sqrt(1.25), 1e-15);
  EXPECT_NEAR(y[3], 1.5 / std::sqrt(1.25), 1e-15);
  EXPECT_EQ(mag[3], std::fabs(y[3]));
  EXPECT_EQ(st.max_abs_gamma, 1.0);
  const std::vector<double> g = {2, -3, 1, 1}, b = {1, 1, 1, 1};
  ref::layernorm_reference<double>(x.data(), 1, 4, 4, g.data(), b.data(), 0.0, y.data(), mag.data(), &st);
  EXPECT_NEAR(y[1], -3 * (-0.5 / std::sqrt(1.25)) + 1, 1e-15);
  EXPECT_EQ(st.max_abs_gamma, 3.0);
  const std::vector<double> v = {3, 4};
  std::vector<double> r(2);
  ref::RmsNormRowStats<double> rs;
  ref::rmsnorm_reference<double>(v.data(), 1, 2, 2, static_cast<const double*>(nullptr), 0.0, r.data(), &rs);
  EXPECT_EQ(rs.mean_sq, 12.5);
  EXPECT_NEAR(r[0], 3 / std::sqrt(12.5), 1e-15);
  // Threads.
  const int64_t rows = 50, n = 3000;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(5, 2);
  std::vector<double> xs(rows * n), gs(n), bs(n);
  for (double& e : xs) e = normal(rng);
  for (double& e : gs) e = normal(rng);
  for (double& e : bs) e = normal(rng);
  std::vector<double> y1(rows * n), y3(rows * n), m1(rows * n), m3(rows * n);
  ref::layernorm_reference<double>(xs.data(), rows, n, n, gs.data(), bs.data(), 1e-5, y1.data(), m1.data(),
                                   static_cast<ref::LayerNormRowStats<double>*>(nullptr), 1);
  ref::layernorm_reference<double>(xs.data(), rows, n, n, gs.data(), bs.data(), 1e-5, y3.data(), m3.data(),
                                   static_cast<ref::LayerNormRowStats<double>*>(nullptr), 3);
  EXPECT_EQ(std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(double)), 0);
  ref::rmsnorm_reference<double>(xs.data(), rows, n, n, gs.data(), 1e-5, y1.data(),
                                 static_cast<ref::RmsNormRowStats<double>*>(nullptr), 1);
  ref::rmsnorm_reference<double>(xs.data(), rows, n, n, gs.data(), 1e-5, y3.data(),
                                 static_cast<ref::RmsNormRowStats<double>*>(nullptr), 4);
  EXPECT_EQ(std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(double)), 0);
}

}  // namespace
}  // namespace assay
