// Double-double references (references/host/dot2.h) against Boost.Multiprecision: the
// error-free transformations are exact, DoubleDouble's operations meet their [JMP] bounds,
// Dot2 with 1..8 lanes meets [ORO]'s bound on ill-conditioned dot products where plain
// double does not, and the double-double GEMM (and gemm_reference<DoubleDouble>) agree with a
// 332-bit GEMM on random small problems, bit-identical across thread counts.
// [ORO] Ogita, Rump, Oishi, Accurate sum and dot product, SISC 2005.
// [JMP] Joldes, Muller, Popescu, Tight and rigorous error bounds for basic building blocks of
//       double-word arithmetic, ACM TOMS 2017.
#include "references/host/dot2.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "harness/bounds.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

using Mp100 = boost::multiprecision::cpp_bin_float_100;  // ~332 bits
using ref::DD;
using ref::DoubleDouble;

constexpr double kU2 = kU64 * kU64;

Mp100 mp(const DoubleDouble& d) {
  return Mp100(d.hi) + Mp100(d.lo);
}
Mp100 mp(const DD& d) {
  return Mp100(d.hi) + Mp100(d.lo);
}

/// A double with a full random 53-bit significand, sign, and binary exponent in [lo, hi].
rc::Gen<double> gen_double(int lo, int hi) {
  return rc::gen::map(rc::gen::tuple(rc::gen::inRange<int64_t>(int64_t{1} << 52, int64_t{1} << 53),
                                     rc::gen::inRange(lo, hi + 1), rc::gen::arbitrary<bool>()),
                      [](const std::tuple<int64_t, int, bool>& t) {
                        const double v = std::ldexp(static_cast<double>(std::get<0>(t)), std::get<1>(t) - 52);
                        return std::get<2>(t) ? -v : v;
                      });
}

/// A normalised double-double: hi random, lo below half an ulp of hi.
rc::Gen<DoubleDouble> gen_dd(int lo, int hi) {
  return rc::gen::map(
      rc::gen::pair(gen_double(lo, hi), rc::gen::inRange<int64_t>(-(int64_t{1} << 52), int64_t{1} << 52)),
      [](const std::pair<double, int64_t>& p) {
        const double small = std::ldexp(static_cast<double>(p.second), std::ilogb(p.first) - 53 - 52);
        const DD n = ref::fast_two_sum(p.first, small);
        return DoubleDouble(n.hi, n.lo);
      });
}

// ---- error-free transformations ------------------------------------------------------------------------

RC_GTEST_PROP(ErrorFreeTransforms, TwoSumAndTwoProdAreExact, ()) {
  // Exponents within +-100: the exact sum needs at most ~260 bits, the product 106; both fit Mp100,
  // and no low part underflows.
  const double a = *gen_double(-100, 100), b = *gen_double(-100, 100);
  const DD s = ref::two_sum(a, b);
  RC_ASSERT(s.hi == a + b);
  RC_ASSERT(mp(s) == Mp100(a) + Mp100(b));
  const DD f = std::fabs(a) >= std::fabs(b) ? ref::fast_two_sum(a, b) : ref::fast_two_sum(b, a);
  RC_ASSERT(mp(f) == Mp100(a) + Mp100(b));
  const DD p = ref::two_prod(a, b);
  RC_ASSERT(p.hi == a * b);
  RC_ASSERT(mp(p) == Mp100(a) * Mp100(b));
}

TEST(ErrorFreeTransforms, SpecialCases) {
  EXPECT_EQ(mp(ref::two_sum(1.0, 0x1p-80)), Mp100(1) + Mp100(0x1p-80));  // the small one survives in lo
  EXPECT_EQ(ref::two_sum(1e308, 1e308).hi, std::numeric_limits<double>::infinity());
  const DD p = ref::two_prod(1.0 + 0x1p-52, 1.0 + 0x1p-52);  // (1+e)^2 = 1 + 2e + e^2
  EXPECT_EQ(p.hi, 1.0 + 0x1p-51);
  EXPECT_EQ(p.lo, 0x1p-104);
}

// ---- DoubleDouble arithmetic ---------------------------------------------------------------------------

/// |got - exact| <= c u^2 |exact| (relative), checked in Mp100.
bool rel_ok(const DoubleDouble& got, const Mp100& exact, double c) {
  return abs(mp(got) - exact) <= Mp100(c * kU2) * abs(exact);
}

RC_GTEST_PROP(DoubleDoubleOps, MeetTheirErrorBounds, ()) {
  const DoubleDouble x = *gen_dd(-60, 60), y = *gen_dd(-60, 60);
  const Mp100 mx = mp(x), my = mp(y);
  RC_ASSERT(rel_ok(x + y, mx + my, 4));  // [JMP]: 3u^2 / (1 - 4u)
  RC_ASSERT(rel_ok(x - y, mx - my, 4));
  RC_ASSERT(rel_ok(x * y, mx * my, 5));  // [JMP] DWTimesDW3: <= 4u^2 (5 keeps a margin)
  RC_ASSERT(rel_ok(x / y, mx / my, 8));  // three-quotient division
  const DoubleDouble ax = ref::abs(x);
  RC_ASSERT(rel_ok(ref::sqrt(ax), sqrt(abs(mx)), 4));
  // The result's hi is the double nearest the double-double (normalised).
  const DoubleDouble s = x + y;
  RC_ASSERT(s.hi == s.hi + s.lo);
}

RC_GTEST_PROP(DoubleDoubleOps, ExpAndLogMeetTheirErrorBounds, ()) {
  // exp: the argument reduction x - k ln2 errs by ~|x| u^2 absolute, so relative (c + 2|x|) u^2.
  // Below ~1e-292 the low part is subnormal and double-double loses its relative precision.
  const double e = *rc::gen::inRange(-600000, 700000) / 1000.0;
  const DoubleDouble x = DoubleDouble(e) + DoubleDouble(*rc::gen::inRange(-1000, 1000) * 0x1p-70);
  const Mp100 mx = mp(x);
  RC_ASSERT(rel_ok(ref::exp(x), exp(mx), 32 + 2 * std::fabs(e)));
  // log of a positive value: absolute error ~u^2 (relative to max(1, |log|)).
  const DoubleDouble a = ref::abs(*gen_dd(-300, 300));
  const Mp100 la = log(mp(a));
  RC_ASSERT(abs(mp(ref::log(a)) - la) <= Mp100(16 * kU2) * (Mp100(1) + abs(la)));
}

TEST(DoubleDoubleOps, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(ref::exp(DoubleDouble(-inf)).hi, 0.0);
  EXPECT_EQ(ref::exp(DoubleDouble(inf)).hi, inf);
  EXPECT_EQ(ref::exp(DoubleDouble(-800.0)).hi, 0.0);
  EXPECT_TRUE(std::isnan(ref::exp(DoubleDouble(kNaN)).hi));
  EXPECT_EQ(ref::log(DoubleDouble(0.0)).hi, -inf);
  EXPECT_TRUE(std::isnan(ref::log(DoubleDouble(-1.0)).hi));
  EXPECT_EQ(ref::log(DoubleDouble(1.0)).hi, 0.0);
  EXPECT_EQ((DoubleDouble(inf) - DoubleDouble(1.0)).hi, inf);  // infinities stay in hi, lo = 0
  EXPECT_EQ((DoubleDouble(inf) - DoubleDouble(1.0)).lo, 0.0);
  EXPECT_TRUE(std::isnan((DoubleDouble(-inf) - DoubleDouble(-inf)).hi));
  EXPECT_EQ(ref::sqrt(DoubleDouble(0.0)).hi, 0.0);
  EXPECT_EQ(ref::sqrt(DoubleDouble(4.0)), DoubleDouble(2.0));
  EXPECT_TRUE(DoubleDouble(1.0) < DoubleDouble(1.0, 0x1p-60));
  EXPECT_FALSE(DoubleDouble(kNaN) <= DoubleDouble(kNaN));
}

// ---- Dot2 --------------------------------------------------------------------------------------------------

/// An ill-conditioned dot product: products over 2^-40..2^40 that cancel in mirrored pairs up to a
/// one-ulp perturbation of y, so x.y is ~1e-16 of sum|x_i y_i| or less; shuffled.
void ill_conditioned(size_t n, uint64_t seed, std::vector<double>& x, std::vector<double>& y) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_int_distribution<int> expo(-20, 20);
  x.assign(n, 0);
  y.assign(n, 0);
  const size_t h = n / 2;
  for (size_t i = 0; i < h; ++i) {
    x[i] = std::ldexp(normal(rng), expo(rng));
    y[i] = std::ldexp(normal(rng), expo(rng));
    x[h + i] = -x[i];
    y[h + i] = std::nextafter(y[i], rng() % 2 ? 1e300 : -1e300);
  }
  for (size_t i = 2 * h; i < n; ++i) x[i] = normal(rng) * 1e-20, y[i] = normal(rng);
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<double> px(n), py(n);
  for (size_t i = 0; i < n; ++i) px[i] = x[perm[i]], py[i] = y[perm[i]];
  x.swap(px);
  y.swap(py);
}

struct Dot2Exact {
  Mp100 value = 0, mag = 0;
};
Dot2Exact exact_dot(const std::vector<double>& x, const std::vector<double>& y) {
  Dot2Exact e;
  for (size_t i = 0; i < x.size(); ++i) {
    const Mp100 p = Mp100(x[i]) * Mp100(y[i]);  // exact: 106 bits
    e.value += p;
    e.mag += abs(p);
  }
  return e;
}

template <int Lanes>
::testing::AssertionResult dot2_within(const std::vector<double>& x, const std::vector<double>& y) {
  const auto n = static_cast<int64_t>(x.size());
  const ref::Dot2Result r = ref::dot2<Lanes>(x.data(), 1, y.data(), 1, n);
  const Dot2Exact e = exact_dot(x, y);
  // [ORO] sec. 5 (Dot2) with 2n in place of n for the lanes' merge.
  const double g = gamma_n(2 * n, kU64);
  const Mp100 err_dd = abs(mp(r.value) - e.value);
  const Mp100 err_hi = abs(Mp100(r.value.hi) - e.value);
  const Mp100 tol_dd = Mp100(g) * Mp100(g) * e.mag;
  if (err_dd > tol_dd || err_hi > Mp100(kU64) * abs(e.value) + tol_dd) {
    return ::testing::AssertionFailure() << "Lanes=" << Lanes << " n=" << n << " err " << err_dd << " tol " << tol_dd;
  }
  if (abs(Mp100(r.mag) - e.mag) > Mp100(gamma_n(n, kU64)) * e.mag) return ::testing::AssertionFailure() << "mag";
  return ::testing::AssertionSuccess();
}

RC_GTEST_PROP(Dot2, MeetsTheTwiceWorkingPrecisionBound, ()) {
  const auto n = *rc::gen::inRange<size_t>(0, 300);
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  std::vector<double> x, y;
  ill_conditioned(n, seed, x, y);
  for (const auto& r : {dot2_within<1>(x, y), dot2_within<2>(x, y), dot2_within<4>(x, y), dot2_within<8>(x, y)})
    if (!r) RC_FAIL(r.message());
}

TEST(Dot2, PlainDoubleFailsWhereDot2Holds) {
  // cond = mag/|x.y| ~ sqrt(n) 2^52: recursive double summation loses every digit; Dot2 is as
  // accurate as double with twice the precision: relative error ~ u + cond u^2.
  std::vector<double> x, y;
  double worst_plain = 0, worst_dot2 = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    ill_conditioned(1000, seed, x, y);
    const Dot2Exact e = exact_dot(x, y);
    double plain = 0;
    for (size_t i = 0; i < x.size(); ++i) plain += x[i] * y[i];
    const ref::Dot2Result r = ref::dot2<4>(x.data(), 1, y.data(), 1, 1000);
    worst_plain = std::max(worst_plain, static_cast<double>(abs(Mp100(plain) - e.value) / abs(e.value)));
    worst_dot2 = std::max(worst_dot2, static_cast<double>(abs(Mp100(r.value.hi) - e.value) / abs(e.value)));
    EXPECT_TRUE(dot2_within<4>(x, y));
  }
  std::printf("[ measured ] ill-conditioned n=1000 dots: max relative error plain double %.3g, Dot2 %.3g (u = %.3g)\n",
              worst_plain, worst_dot2, kU64);
  EXPECT_GT(worst_plain, 1e-6);
  EXPECT_LE(worst_dot2, 1e-12);
}

TEST(Dot2, StridesAndEmpty) {
  const std::vector<double> a = {1, 100, 2, 100, 3, 100};
  const std::vector<double> b = {4, 5, 6};
  const ref::Dot2Result r = ref::dot2<2>(a.data(), 2, b.data(), 1, 3);
  EXPECT_EQ(r.value.hi, 32.0);
  EXPECT_EQ(r.value.lo, 0.0);
  EXPECT_EQ(r.mag, 32.0);
  const ref::Dot2Result z = ref::dot2<4>(a.data(), 1, b.data(), 1, 0);
  EXPECT_EQ(z.value.hi, 0.0);
  EXPECT_EQ(z.mag, 0.0);
}

// ---- GEMM in double-double -------------------------------------------------------------------------------

struct DotProblem {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  double alpha = 1, beta = 0;
  std::vector<double> a, b, c;  // stored with lda = (ta ? m : k) + 1 etc.: padding holds NaN
  int64_t lda = 0, ldb = 0, ldc = 0;
};

DotProblem make(int64_t m, int64_t n, int64_t k, bool ta, bool tb, double alpha, double beta,
             const std::vector<double>& opa, const std::vector<double>& opb, const std::vector<double>& cv) {
  DotProblem p{m, n, k, ta, tb, alpha, beta, {}, {}, {}, 0, 0, 0};
  p.lda = std::max<int64_t>(1, ta ? m : k) + 1;
  p.ldb = std::max<int64_t>(1, tb ? k : n) + 2;
  p.ldc = std::max<int64_t>(1, n) + 1;
  p.a.assign(static_cast<size_t>((ta ? k : m) * p.lda), kNaN);
  p.b.assign(static_cast<size_t>((tb ? n : k) * p.ldb), kNaN);
  p.c.assign(static_cast<size_t>(m * p.ldc), kNaN);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q) p.a[ta ? q * p.lda + i : i * p.lda + q] = opa[i * k + q];
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = 0; j < n; ++j) p.b[tb ? j * p.ldb + q : q * p.ldb + j] = opb[q * n + j];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) p.c[i * p.ldc + j] = cv[i * n + j];
  return p;
}

template <typename S>
ref::GemmProblem<S> view(const DotProblem& p, const std::vector<S>& a, const std::vector<S>& b, const std::vector<S>& c) {
  ref::GemmProblem<S> g;
  g.m = p.m, g.n = p.n, g.k = p.k, g.trans_a = p.ta, g.trans_b = p.tb;
  g.alpha = S(p.alpha), g.beta = S(p.beta);
  g.a = a.data(), g.lda = p.lda, g.b = b.data(), g.ldb = p.ldb, g.c = c.data(), g.ldc = p.ldc;
  return g;
}

struct DdOut {
  std::vector<double> ref, lo, mag;
};

DdOut run_dd(const DotProblem& p, int threads) {
  DdOut o;
  const size_t mn = static_cast<size_t>(p.m * p.n);
  o.ref.assign(mn, kNaN);
  o.lo.assign(mn, kNaN);
  o.mag.assign(mn, kNaN);
  ref::gemm_reference_dd<4>(view<double>(p, p.a, p.b, p.c), o.ref.data(), o.lo.data(), o.mag.data(), threads);
  return o;
}

/// Exact (332-bit) reference through the existing template.
std::pair<std::vector<Mp100>, std::vector<Mp100>> run_mp(const DotProblem& p) {
  const std::vector<Mp100> a(p.a.begin(), p.a.end()), b(p.b.begin(), p.b.end()), c(p.c.begin(), p.c.end());
  std::vector<Mp100> ref(static_cast<size_t>(p.m * p.n)), mag(ref.size());
  ref::gemm_reference(view<Mp100>(p, a, b, c), ref.data(), mag.data());
  return {ref, mag};
}

rc::Gen<double> gen_dot_value() {
  return rc::gen::weightedOneOf<double>({
      {1, rc::gen::just(0.0)},
      {2, rc::gen::map(rc::gen::inRange(-8, 9), [](int v) { return static_cast<double>(v); })},
      {6, gen_double(-20, 20)},
  });
}

RC_GTEST_PROP(GemmReferenceDd, MatchesMultiprecision, ()) {
  const auto m = *rc::gen::inRange<int64_t>(0, 10), n = *rc::gen::inRange<int64_t>(0, 10);
  const auto k = *rc::gen::inRange<int64_t>(0, 40);
  const bool ta = *rc::gen::arbitrary<bool>(), tb = *rc::gen::arbitrary<bool>();
  auto opa = *rc::gen::container<std::vector<double>>(static_cast<size_t>(m * k), gen_dot_value());
  auto opb = *rc::gen::container<std::vector<double>>(static_cast<size_t>(k * n), gen_dot_value());
  // Half the time, make the rows of A cancel against themselves: second half = -first half.
  if (*rc::gen::arbitrary<bool>() && k >= 2) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < k / 2; ++q) opa[i * k + k / 2 + q] = -opa[i * k + q];
    for (int64_t q = 0; q < k / 2; ++q)
      for (int64_t j = 0; j < n; ++j) {
        const double v = opb[q * n + j];  // one ulp away (a zero stays zero: no subnormal products)
        opb[(k / 2 + q) * n + j] = v == 0 ? 0.0 : std::nextafter(v, 1e300);
      }
  }
  const double alpha = *rc::gen::element(1.0, -1.0, 0.0, 0.1, 3.0);
  const double beta = *rc::gen::element(0.0, 1.0, -0.7);
  const auto cv = beta == 0 ? std::vector<double>(static_cast<size_t>(m * n), kNaN)
                            : *rc::gen::container<std::vector<double>>(static_cast<size_t>(m * n), gen_dot_value());
  const DotProblem p = make(m, n, k, ta, tb, alpha, beta, opa, opb, cv);
  const DdOut d = run_dd(p, 1);
  const auto [exact, mag] = run_mp(p);
  // Dot2 bound for the dot, then alpha* (2u^2 relative) and + beta*c (3u^2): (c + 2 gamma_2k^2) mag.
  const double g = gamma_n(2 * k + 2, kU64);
  for (size_t e = 0; e < exact.size(); ++e) {
    const Mp100 tol = (Mp100(g) * Mp100(g) * 2 + Mp100(8 * kU2)) * mag[e] + Mp100(1e-300);
    RC_ASSERT(abs(Mp100(d.ref[e]) + Mp100(d.lo[e]) - exact[e]) <= tol);
    RC_ASSERT(abs(Mp100(d.ref[e]) - exact[e]) <= Mp100(kU64) * abs(exact[e]) + tol);
    RC_ASSERT(abs(Mp100(d.mag[e]) - mag[e]) <= Mp100(gamma_n(k + 2, kU64)) * mag[e]);
  }
  // The existing template instantiated with DoubleDouble: recursive double-double sums,
  // ~(3k + 5k) u^2 relative to mag.
  std::vector<DoubleDouble> a(p.a.begin(), p.a.end()), b(p.b.begin(), p.b.end()), c(p.c.begin(), p.c.end());
  std::vector<DoubleDouble> rdd(exact.size()), mdd(exact.size());
  ref::gemm_reference(view<DoubleDouble>(p, a, b, c), rdd.data(), mdd.data());
  for (size_t e = 0; e < exact.size(); ++e)
    RC_ASSERT(abs(mp(rdd[e]) - exact[e]) <= Mp100(10.0 * static_cast<double>(k + 2) * kU2) * mag[e] + Mp100(1e-300));
}

TEST(GemmReferenceDd, ThreadsAreBitIdenticalAndPlainDoubleIsNot) {
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal(0, 1);
  const int64_t m = 48, n = 40, k = 256;
  std::vector<double> opa(m * k), opb(k * n), cv(m * n);
  for (double& v : opa) v = normal(rng);
  for (double& v : opb) v = normal(rng);
  for (double& v : cv) v = normal(rng);
  for (int64_t i = 0; i < m; ++i)  // cancelling halves: results ~1e-16 of mag
    for (int64_t q = 0; q < k / 2; ++q) opa[i * k + k / 2 + q] = -opa[i * k + q];
  for (int64_t q = 0; q < k / 2; ++q)
    for (int64_t j = 0; j < n; ++j) opb[(k / 2 + q) * n + j] = std::nextafter(opb[q * n + j], 1e300);
  const DotProblem p = make(m, n, k, true, false, 1.0, 0.0, opa, opb, cv);
  const DdOut one = run_dd(p, 1);
  for (int threads : {2, 3, 8}) {
    const DdOut many = run_dd(p, threads);
    EXPECT_EQ(std::memcmp(one.ref.data(), many.ref.data(), one.ref.size() * sizeof(double)), 0) << threads;
    EXPECT_EQ(std::memcmp(one.lo.data(), many.lo.data(), one.lo.size() * sizeof(double)), 0) << threads;
  }
  std::vector<double> plain(m * n), pmag(m * n);
  ref::gemm_reference(view<double>(p, p.a, p.b, p.c), plain.data(), pmag.data());
  const auto [exact, mag] = run_mp(p);
  // Against the double-double bound u|c| + 2 gamma_2k^2 mag: plain double is far outside it.
  double worst_plain = 0, worst_dd = 0;
  const double g = gamma_n(2 * k + 2, kU64);
  for (size_t e = 0; e < exact.size(); ++e) {
    const Mp100 tol = Mp100(kU64) * abs(exact[e]) + (Mp100(g) * Mp100(g) * 2 + Mp100(8 * kU2)) * mag[e];
    worst_plain = std::max(worst_plain, static_cast<double>(abs(Mp100(plain[e]) - exact[e]) / tol));
    worst_dd = std::max(worst_dd, static_cast<double>(abs(Mp100(one.ref[e]) - exact[e]) / tol));
  }
  std::printf(
      "[ measured ] cancelling 48x40x256 GEMM: max error/double-double-bound: double %.3g, double-double %.3g\n",
      worst_plain, worst_dd);
  EXPECT_GT(worst_plain, 1e3);
  EXPECT_LE(worst_dd, 1.0);
}

}  // namespace
}  // namespace assay
