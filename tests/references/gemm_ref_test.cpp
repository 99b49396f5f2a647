// Host GEMM reference: the double instantiation against the same template in
// ~166-bit arithmetic (Boost.Multiprecision), which also proves the template
// works for multiprecision scalars; thread count must not change any bit.
// [H] = Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.
#include "references/host/gemm.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "harness/bounds.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

using Mp = boost::multiprecision::cpp_bin_float_50;  // 50 digits, ~166 bits
using Mpfr = boost::multiprecision::mpfr_float_50;   // expression templates on: another code path

/// A GEMM problem with its own padded storage; padding holds NaN so that any
/// read outside the logical matrices poisons the result.
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  std::vector<double> a, b, c;
  bool c_null = false;  ///< pass no C at all (allowed when beta == 0)
};

/// Lays out logical row-major op(A) (m x k), op(B) (k x n) and C (m x n) into
/// storage with leading dimensions padded by pad_a/pad_b/pad_c elements.
Problem make_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, const std::vector<double>& opa,
                     const std::vector<double>& opb, const std::vector<double>& cv, int64_t pad_a, int64_t pad_b,
                     int64_t pad_c) {
  Problem p;
  p.m = m, p.n = n, p.k = k, p.trans_a = ta, p.trans_b = tb;
  // BLAS: ld >= max(1, rows of the stored layout's inner extent).
  p.lda = std::max<int64_t>(1, ta ? m : k) + pad_a;
  p.ldb = std::max<int64_t>(1, tb ? k : n) + pad_b;
  p.ldc = std::max<int64_t>(1, n) + pad_c;
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
struct Result {
  std::vector<S> ref, mag;
};

/// Runs the reference template with scalar S on (exact conversions of) p's data.
template <typename S>
Result<S> run(const Problem& p, int threads = 1) {
  const std::vector<S> a(p.a.begin(), p.a.end()), b(p.b.begin(), p.b.end()), c(p.c.begin(), p.c.end());
  ref::GemmProblem<S> g;
  g.m = p.m, g.n = p.n, g.k = p.k;
  g.trans_a = p.trans_a, g.trans_b = p.trans_b;
  g.alpha = S(p.alpha), g.beta = S(p.beta);
  g.a = a.data(), g.lda = p.lda;
  g.b = b.data(), g.ldb = p.ldb;
  g.c = p.c_null ? nullptr : c.data(), g.ldc = p.ldc;
  Result<S> r;
  // Pre-filled with NaN: an element the reference forgets to write shows up.
  r.ref.assign(static_cast<size_t>(p.m * p.n), S(kNaN));
  r.mag.assign(static_cast<size_t>(p.m * p.n), S(kNaN));
  ref::gemm_reference(g, r.ref.data(), r.mag.data(), threads);
  return r;
}

/// Doubles with mixed signs and binades 2^-20..2^20, some zeros and integers,
/// so that sums cancel and products round.
rc::Gen<double> gen_value() {
  return rc::gen::weightedOneOf<double>({
      {1, rc::gen::just(0.0)},
      {2, rc::gen::map(rc::gen::inRange(-8, 9), [](int v) { return static_cast<double>(v); })},
      {6, rc::gen::map(
              rc::gen::pair(rc::gen::inRange<int64_t>(-(int64_t{1} << 53) + 1, int64_t{1} << 53),
                            rc::gen::inRange(-20, 21)),
              [](std::pair<int64_t, int> me) { return std::ldexp(static_cast<double>(me.first), me.second - 53); })},
  });
}

/// |ref_double - ref_mp| <= gamma_{k+2}(2^-53) * mag ([H] (3.5) for the dot,
/// plus the alpha* and +beta*c roundings, composed by [H] Lemma 3.3), with
/// mag and ref_mp taken from the ~166-bit run, whose own error is of the same
/// form with u = 2^-160 (a safe rounding of cpp_bin_float_50's unit roundoff).
/// The same bound covers mag (a sum of non-negative terms). Inputs stay far
/// from underflow, so the floor is only a token.
::testing::AssertionResult matches_mp(const Problem& p, const Result<double>& d, const Result<Mp>& mp) {
  const Mp g = Mp(gamma_n(p.k + 2, 0x1p-53)) + 2 * Mp(gamma_n(p.k + 2, 0x1p-160));
  const Mp floor_abs = Mp(1e-300);
  for (int64_t e = 0; e < p.m * p.n; ++e) {
    const double r = d.ref[e], mg = d.mag[e];
    if (!std::isfinite(r) || !std::isfinite(mg)) {
      return ::testing::AssertionFailure() << "element " << e << " not finite: ref " << r << " mag " << mg;
    }
    const Mp tol = g * mp.mag[e] + floor_abs;
    if (abs(Mp(r) - mp.ref[e]) > tol) {
      return ::testing::AssertionFailure()
             << "ref element " << e << ": double " << r << " vs mp " << mp.ref[e] << ", tol " << tol;
    }
    if (abs(Mp(mg) - mp.mag[e]) > tol) {
      return ::testing::AssertionFailure()
             << "mag element " << e << ": double " << mg << " vs mp " << mp.mag[e] << ", tol " << tol;
    }
  }
  return ::testing::AssertionSuccess();
}

RC_GTEST_PROP(GemmReference, DoubleMatchesMultiprecision, ()) {
  const auto m = *rc::gen::inRange<int64_t>(0, 25);
  const auto n = *rc::gen::inRange<int64_t>(0, 25);
  const auto k = *rc::gen::inRange<int64_t>(0, 25);
  const bool ta = *rc::gen::arbitrary<bool>(), tb = *rc::gen::arbitrary<bool>();
  const auto opa = *rc::gen::container<std::vector<double>>(static_cast<size_t>(m * k), gen_value());
  const auto opb = *rc::gen::container<std::vector<double>>(static_cast<size_t>(k * n), gen_value());
  const double alpha = *rc::gen::element(1.0, -1.0, 0.0, 0.5, 3.0, 0.1);
  // -0.0 compares equal to 0: C must not be read for it either.
  const double beta = *rc::gen::element(0.0, -0.0, 1.0, -2.0, 0.3);
  const bool beta_zero = beta == 0;
  // With beta == 0, C is all NaN (the harness poisons it) and must not leak.
  const auto mn = static_cast<size_t>(m * n);
  const auto cv = beta_zero ? std::vector<double>(mn, kNaN) : *rc::gen::container<std::vector<double>>(mn, gen_value());
  const auto pad = rc::gen::inRange<int64_t>(0, 4);
  Problem p = make_problem(m, n, k, ta, tb, opa, opb, cv, *pad, *pad, *pad);
  p.alpha = alpha;
  p.beta = beta;
  p.c_null = beta_zero && *rc::gen::arbitrary<bool>();

  const Result<double> d = run<double>(p);
  const Result<Mp> mp = run<Mp>(p);
  const ::testing::AssertionResult close = matches_mp(p, d, mp);
  if (!close) RC_FAIL(close.message());
  // threads > 1 changes nothing (these sizes mostly stay on one thread; see
  // ThreadsAreBitIdentical for a real split).
  const Result<double> d4 = run<double>(p, 4);
  RC_ASSERT(std::memcmp(d.ref.data(), d4.ref.data(), d.ref.size() * sizeof(double)) == 0);
  RC_ASSERT(std::memcmp(d.mag.data(), d4.mag.data(), d.mag.size() * sizeof(double)) == 0);
}

/// A random problem from a fixed seed (no shrinking needed for these).
Problem random_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, double beta, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> opa(static_cast<size_t>(m * k)), opb(static_cast<size_t>(k * n));
  std::vector<double> cv(static_cast<size_t>(m * n));
  for (double& v : opa) v = normal(rng);
  for (double& v : opb) v = normal(rng);
  for (double& v : cv) v = beta == 0 ? kNaN : normal(rng);
  Problem p = make_problem(m, n, k, ta, tb, opa, opb, cv, 3, 1, 2);
  p.alpha = 1.25;
  p.beta = beta;
  return p;
}

TEST(GemmReference, ThreadsAreBitIdentical) {
  // Work m*n*k / 2^16 must reach the thread count for gemm_reference to split.
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{64, 64, 64}, Shape{5, 512, 512}, Shape{67, 33, 129}}) {
    for (int t = 0; t < 4; ++t) {
      const Problem p = random_problem(s.m, s.n, s.k, t & 1, t & 2, t == 3 ? 0.0 : -0.75, 42 + t);
      const Result<double> one = run<double>(p, 1);
      for (int threads : {2, 3, 4, 7, 64}) {
        const Result<double> many = run<double>(p, threads);
        EXPECT_EQ(std::memcmp(one.ref.data(), many.ref.data(), one.ref.size() * sizeof(double)), 0)
            << s.m << "x" << s.n << "x" << s.k << " threads=" << threads;
        EXPECT_EQ(std::memcmp(one.mag.data(), many.mag.data(), one.mag.size() * sizeof(double)), 0);
      }
      for (double v : one.ref) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

TEST(GemmReference, MpfrInstantiationAgrees) {
  // mpfr_float_50 uses expression templates, so abs(), * and += go through a
  // different overload set than cpp_bin_float_50's; both must compile and agree.
  for (int t = 0; t < 4; ++t) {
    const Problem p = random_problem(7, 9, 23, t & 1, t & 2, t == 0 ? 0.0 : 0.5, 7 + t);
    const Result<Mp> a = run<Mp>(p);
    const Result<Mpfr> b = run<Mpfr>(p);
    const Mp g = 2 * Mp(gamma_n(p.k + 2, 0x1p-160));
    for (size_t e = 0; e < a.ref.size(); ++e) {
      // Through a full-precision string: no conversion loss between the backends.
      const Mp bref(b.ref[e].str(0, std::ios_base::scientific));
      const Mp bmag(b.mag[e].str(0, std::ios_base::scientific));
      EXPECT_LE(abs(a.ref[e] - bref), g * a.mag[e]) << e;
      EXPECT_LE(abs(a.mag[e] - bmag), g * a.mag[e]) << e;
    }
    EXPECT_TRUE(matches_mp(p, run<double>(p), a));
  }
}

TEST(GemmReference, KnownValues) {
  // op(A) = [[1, 2], [3, 4]], op(B) = [[5, 6], [7, 8]]: A B = [[19, 22], [43, 50]].
  Problem p = make_problem(2, 2, 2, true, false, {1, 2, 3, 4}, {5, 6, 7, 8}, {1, -1, 2, -2}, 1, 0, 2);
  p.alpha = 2;
  p.beta = -1;
  const Result<double> r = run<double>(p);
  EXPECT_EQ(r.ref, (std::vector<double>{37, 45, 84, 102}));
  EXPECT_EQ(r.mag, (std::vector<double>{39, 45, 88, 102}));
  // k == 0: C = beta*C, mag = |beta||C|.
  Problem z = make_problem(2, 2, 0, false, true, {}, {}, {1, -1, 2, -2}, 0, 0, 0);
  z.beta = 3;
  const Result<double> rz = run<double>(z);
  EXPECT_EQ(rz.ref, (std::vector<double>{3, -3, 6, -6}));
  EXPECT_EQ(rz.mag, (std::vector<double>{3, 3, 6, 6}));
  // beta == 0 and no C at all.
  z.beta = 0;
  z.c_null = true;
  const Result<double> r0 = run<double>(z);
  EXPECT_EQ(r0.ref, (std::vector<double>{0, 0, 0, 0}));
  // m == 0 or n == 0: nothing to do, nothing touched.
  const Problem e = make_problem(0, 3, 4, false, false, {}, std::vector<double>(12, 1.0), {}, 0, 0, 0);
  EXPECT_TRUE(run<double>(e).ref.empty());
}

}  // namespace
}  // namespace assay
