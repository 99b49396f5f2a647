// Rounding-error bounds: gamma_n, the GEMM ceiling against constructed
// worst cases and random fp32 dot products (errors measured against an exact
// sum), its power to flag an fp16-accumulation bug, and the exact tier.
// [H] = Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.
#include "harness/bounds.h"
#include "tests/test_values.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace assay {
namespace {

using namespace test_values;

// 100 decimal digits (~332 bits): every sum below is exact, since the fp32
// products (exact in double) span far fewer than 332 - log2(k) binades.
using Exact = boost::multiprecision::cpp_bin_float_100;


// ---- summation orders a kernel might use ---------------------------------------

enum class Order { kForward, kReverse, kPairwise, kBlocked32 };
constexpr Order kOrders[] = {Order::kForward, Order::kReverse, Order::kPairwise, Order::kBlocked32};

/// acc + x*y in fp32, the product rounded separately or fused.
float step(float acc, float x, float y, bool fma) {
  return fma ? std::fma(x, y, acc) : acc + x * y;
}

/// Recursive summation over [0, n), forward or reversed.
float recursive(const float* x, const float* y, size_t n, bool fma, bool reverse = false) {
  float acc = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = reverse ? n - 1 - i : i;
    acc = step(acc, x[j], y[j], fma);
  }
  return acc;
}

/// Pairwise (cascade) summation: halves summed recursively, leaves of <= 2.
float pairwise(const float* x, const float* y, size_t n, bool fma) {
  if (n <= 2) return recursive(x, y, n, fma);
  const size_t h = n / 2;
  return pairwise(x, y, h, fma) + pairwise(x + h, y + h, n - h, fma);
}

/// One partial sum per 32-wide k-tile (as a tiled kernel does), then the tiles in order.
float blocked32(const float* x, const float* y, size_t n, bool fma) {
  float acc = 0;
  for (size_t b = 0; b < n; b += 32) acc += recursive(x + b, y + b, std::min<size_t>(32, n - b), fma);
  return acc;
}

float dot_f32(const std::vector<float>& x, const std::vector<float>& y, Order o, bool fma) {
  switch (o) {
    case Order::kForward:
      return recursive(x.data(), y.data(), x.size(), fma);
    case Order::kReverse:
      return recursive(x.data(), y.data(), x.size(), fma, true);
    case Order::kPairwise:
      return pairwise(x.data(), y.data(), x.size(), fma);
    case Order::kBlocked32:
      return blocked32(x.data(), y.data(), x.size(), fma);
  }
  return 0;
}

/// Exact x.y and sum |x_i y_i| (the GEMM `mag` with alpha = 1, no beta).
struct ExactDot {
  Exact value = 0, mag = 0;
};

ExactDot exact_dot(const std::vector<float>& x, const std::vector<float>& y) {
  ExactDot e;
  for (size_t i = 0; i < x.size(); ++i) {
    const Exact p = static_cast<double>(x[i]) * static_cast<double>(y[i]);  // exact: 24+24 bits
    e.value += p;
    e.mag += abs(p);
  }
  return e;
}

/// |computed - exact| against a bound, compared exactly; ratio for reporting.
struct Check {
  bool within = false;
  double ratio = 0;  ///< error / tol
};

Check check(double computed, const ExactDot& e, const ElementBound& b) {
  const Exact err = abs(Exact(computed) - e.value);
  // The harness sees |ref| and mag as doubles; so does this check.
  const double tol = b.tol(static_cast<double>(abs(e.value)), static_cast<double>(e.mag));
  return {err <= Exact(tol), static_cast<double>(err / Exact(tol))};
}

/// The ceiling for an fp32 dot product of length k (alpha = 1, beta = 0, fp64 reference).
ElementBound dot_ceiling(int64_t k, DType in = DType::kF32, DType out = DType::kF32) {
  GemmBoundModel m;
  m.in = in;
  m.acc = DType::kF32;
  m.out = out;
  m.k = k;
  return gemm_ceiling(m);
}

// ---- value classes -----------------------------------------------------------

enum class Cls { kNormal, kSameSign, kCancel };
constexpr Cls kClasses[] = {Cls::kNormal, Cls::kSameSign, Cls::kCancel};
const char* cls_name(Cls c) {
  return c == Cls::kNormal ? "normal" : c == Cls::kSameSign ? "same-sign" : "cancellation";
}

/// x, y of length k: N(0,1); U(0,1) for both (no cancellation, errors pile up);
/// or mirrored pairs x_{h+i} = -x_i, y_{h+i} = y_i(1 + ~2^-20), shuffled, with
/// x spread over 2^-6..2^6, so the exact result is ~1e-6 of mag.
void fill(Cls c, size_t k, uint64_t seed, std::vector<float>& x, std::vector<float>& y) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  x.assign(k, 0.0f);
  y.assign(k, 0.0f);
  if (c == Cls::kNormal) {
    for (size_t i = 0; i < k; ++i) x[i] = normal(rng), y[i] = normal(rng);
  } else if (c == Cls::kSameSign) {
    for (size_t i = 0; i < k; ++i) x[i] = unit(rng), y[i] = unit(rng);
  } else {
    std::uniform_int_distribution<int> expo(-6, 6);
    const size_t h = k / 2;
    for (size_t i = 0; i < h; ++i) {
      x[i] = std::ldexp(normal(rng), expo(rng));
      y[i] = normal(rng);
      x[h + i] = -x[i];
      y[h + i] = y[i] * (1.0f + std::ldexp(2.0f * unit(rng) - 1.0f, -20));
    }
    for (size_t i = 2 * h; i < k; ++i) x[i] = normal(rng), y[i] = normal(rng);
    std::vector<size_t> perm(k);
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<float> px(k), py(k);
    for (size_t i = 0; i < k; ++i) px[i] = x[perm[i]], py[i] = y[perm[i]];
    x.swap(px);
    y.swap(py);
  }
}

/// Rounds v to p significant bits, round-to-nearest-even (exponent range not
/// modelled: the partial sums here stay well inside fp16's normal range).
double round_to_bits(double v, int p) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  std::frexp(v, &e);                                               // |v| = f * 2^e, f in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(v, p - e)), e - p);  // nearbyint: RNE by default
}

// ---- gamma_n -------------------------------------------------------------------

TEST(GammaN, Values) {
  EXPECT_EQ(gamma_n(0, kU32), 0.0);
  EXPECT_EQ(gamma_n(-3, kU32), 0.0);
  EXPECT_EQ(gamma_n(7, 0.0), 0.0);
  EXPECT_EQ(gamma_n(1, kU32), kU32 / (1 - kU32));
  EXPECT_DOUBLE_EQ(gamma_n(1000, kU32), 1000 * kU32 / (1 - 1000 * kU32));
  EXPECT_EQ(gamma_n(int64_t{1} << 23, kU32), 1.0);  // n*u = 1/2
  EXPECT_EQ(gamma_n((int64_t{1} << 24) - 1, kU32), std::ldexp(1.0, 24) - 1);
  EXPECT_DOUBLE_EQ(gamma_n(2047, 0x1p-11), 2047.0);
}

TEST(GammaN, InfiniteWhenNuReachesOne) {
  EXPECT_EQ(gamma_n(int64_t{1} << 24, kU32), kInf);  // n*u == 1 exactly
  EXPECT_EQ(gamma_n((int64_t{1} << 24) + 1, kU32), kInf);
  EXPECT_EQ(gamma_n(2048, 0x1p-11), kInf);  // fp16 accumulation at k + 2 = 2048
  EXPECT_EQ(gamma_n(256, 0x1p-8), kInf);    // bf16
  EXPECT_EQ(gamma_n(std::numeric_limits<int64_t>::max(), 0x1p-53), kInf);
}

RC_GTEST_PROP(GammaNProp, DominatesCompoundedRoundings, ()) {
  // [H] Lemma 3.1: prod (1 + delta_i) = 1 + theta_n, |theta_n| <= gamma_n; the
  // extreme the sums and products of a GEMM reach is (1+u)^n. (The slack,
  // >= u relative, exceeds gamma_n's own rounding in double, <= 2^-53.)
  const double u = *rc::gen::element(0x1p-53, 0x1p-24, 0x1p-11, 0x1p-8);
  const int64_t hi = std::min<int64_t>(static_cast<int64_t>(0.99 / u), int64_t{1} << 40);
  const auto n = *rc::gen::inRange<int64_t>(1, hi);
  RC_ASSERT(pow(Exact(1) + u, static_cast<long long>(n)) - 1 <= Exact(gamma_n(n, u)));
  RC_ASSERT(gamma_n(n + 1, u) >= gamma_n(n, u));
}

// ---- the ceiling's structure ------------------------------------------------------

TEST(GemmCeiling, Fp32Structure) {
  GemmBoundModel m;  // fp32 in/acc/out, fp64 reference
  m.k = 1000;
  const ElementBound b = gemm_ceiling(m);
  EXPECT_EQ(b.rel_out, 0.0);  // the output rounding is one of the k+2 fp32 roundings
  const double want = gamma_n(1002, kU32) + gamma_n(1002, 0x1p-53);
  EXPECT_GE(b.rel_mag, want);
  EXPECT_NEAR(b.rel_mag, want, 1e-12 * want);  // second-order terms only
  EXPECT_GE(b.floor, 2003 * 0x1p-126);
  EXPECT_LE(b.floor, 2004 * 0x1p-126);
}

TEST(GemmCeiling, NarrowOutputAddsOneRounding) {
  GemmBoundModel m;
  m.k = 64;
  m.out = DType::kF16;
  EXPECT_EQ(gemm_ceiling(m).rel_out, 0x1p-11);
  m.out = DType::kBF16;
  EXPECT_EQ(gemm_ceiling(m).rel_out, 0x1p-8);
  m.out = DType::kF64;  // wider than acc: exact conversion
  EXPECT_EQ(gemm_ceiling(m).rel_out, 0.0);
  m.acc = DType::kF16;  // fp16 accumulation, fp32 output: exact conversion
  m.out = DType::kF32;
  const ElementBound b = gemm_ceiling(m);
  EXPECT_EQ(b.rel_out, 0.0);
  EXPECT_NEAR(b.rel_mag, gamma_n(66, 0x1p-11), 1e-12);
}

TEST(GemmCeiling, NoBoundWhenGammaIsInfinite) {
  GemmBoundModel m;
  m.acc = DType::kF16;
  m.k = 2045;  // (k+2) u = 2047/2048
  EXPECT_TRUE(std::isfinite(gemm_ceiling(m).rel_mag));
  m.k = 2046;
  EXPECT_EQ(gemm_ceiling(m).rel_mag, kInf);
}

TEST(GemmCeiling, FloorScalesWithAlphaAndK) {
  GemmBoundModel m;
  m.k = 100;
  const double f1 = gemm_ceiling(m).floor;
  m.alpha_abs = 4;
  const double f4 = gemm_ceiling(m).floor;
  EXPECT_NEAR(f4 / f1, (800.0 + 3) / (200 + 3), 1e-6);
  m.k = 0;  // C = beta*C still rounds (and may flush) a few times
  EXPECT_GT(gemm_ceiling(m).floor, 0.0);
}

TEST(GemmCeiling, IntegerTypes) {
  GemmBoundModel m;
  m.in = DType::kI8;
  m.acc = DType::kI32;
  m.out = DType::kI32;
  m.k = 4096;
  ElementBound b = gemm_ceiling(m);
  EXPECT_EQ(b.rel_out, 0.0);
  EXPECT_LT(b.rel_mag, 1e-12);  // only the fp64 reference's own error
  EXPECT_LT(b.floor, 1e-290);
  m.out = DType::kF32;  // int32 accumulation written as fp32
  EXPECT_EQ(gemm_ceiling(m).rel_out, kU32);
  m.acc = DType::kF32;  // fp32 accumulation written as int8: rounds to an integer
  m.out = DType::kI8;
  b = gemm_ceiling(m);
  EXPECT_GE(b.floor, 0.5);
  EXPECT_LT(b.floor - 0.5, 1e-30);
}

// ---- constructed cases with known error ----------------------------------------------

TEST(DotBound, LostUnitsAttainTheBound) {
  // [1, u, u, ..., u] . [1, ..., 1] summed forward in fp32: 1 + u is a tie and
  // rounds to the even 1, so every u is lost and the error is (k-1)u exactly,
  // with mag = 1 + (k-1)u; [H] (3.5) allows gamma_{k-1}(u) * mag for this sum.
  for (int64_t k : {2, 17, 1024, 4096}) {
    std::vector<float> x(k, static_cast<float>(kU32)), y(k, 1.0f);
    x[0] = 1.0f;
    const ExactDot e = exact_dot(x, y);
    for (bool fma : {false, true}) {
      const float got = dot_f32(x, y, Order::kForward, fma);
      EXPECT_EQ(got, 1.0f);
      EXPECT_EQ(e.value - Exact(got), Exact(k - 1) * kU32);
      EXPECT_LE(abs(e.value - Exact(got)), Exact(gamma_n(k - 1, kU32)) * e.mag);
      const Check c = check(got, e, dot_ceiling(k));
      EXPECT_TRUE(c.within) << k;
      // (k-1)/(k+2) of the ceiling, up to O(ku) terms.
      EXPECT_GT(c.ratio, 0.99 * static_cast<double>(k - 1) / static_cast<double>(k + 2)) << k;
      if (k == 4096 && !fma) std::printf("[ measured ] lost-units k=4096: error/ceiling = %.6f\n", c.ratio);
    }
  }
}

/// fp32 with flush-to-zero emulated: subnormal results become (signed) zero.
float ftz(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

TEST(DotBound, FloorCoversUnderflow) {
  // x_i, y_i ~ 2^-70: every product is ~2^-140, below fp32's 2^-126. Under
  // FTZ each product flushes to 0 and the whole result is lost: error == mag,
  // which no relative term covers; the floor (2k+3) min_normal does.
  const int64_t k = 16;
  std::vector<float> x(k), y(k);
  for (int64_t i = 0; i < k; ++i) {
    x[i] = std::ldexp(1.0f + static_cast<float>(i) / 3.0f, -70);
    y[i] = std::ldexp(1.0f + static_cast<float>(i) / 7.0f, -70);
  }
  const ExactDot e = exact_dot(x, y);
  const ElementBound b = dot_ceiling(k);
  const Exact relative_part = Exact(b.rel_out) * abs(e.value) + Exact(b.rel_mag) * e.mag;

  float flushed = 0;
  for (int64_t i = 0; i < k; ++i) flushed = ftz(flushed + ftz(x[i] * y[i]));
  EXPECT_EQ(flushed, 0.0f);
  EXPECT_EQ(abs(e.value - Exact(flushed)), e.mag);
  EXPECT_GT(abs(e.value - Exact(flushed)), relative_part);  // the floor is needed...
  EXPECT_TRUE(check(flushed, e, b).within);                 // ...and sufficient

  // Gradual underflow loses up to half a subnormal spacing per product: also
  // beyond the relative part, also under the floor.
  const float gradual = dot_f32(x, y, Order::kForward, false);
  EXPECT_GT(abs(e.value - Exact(gradual)), relative_part);
  EXPECT_TRUE(check(gradual, e, b).within);

  // Without underflow the floor is negligible: scale x and y up to ~1.
  std::vector<float> xs(k), ys(k);
  for (int64_t i = 0; i < k; ++i) xs[i] = std::ldexp(x[i], 70), ys[i] = std::ldexp(y[i], 70);
  const ExactDot es = exact_dot(xs, ys);
  EXPECT_LT(Exact(b.floor), 1e-20 * Exact(b.rel_mag) * es.mag);
}

// ---- random fp32 dot products -----------------------------------------------------

struct Sweep {
  double max_ratio = 0;
  bool all_within = true;
};

/// Every order, with and without FMA, on one (x, y).
Sweep sweep_one(const std::vector<float>& x, const std::vector<float>& y) {
  const ExactDot e = exact_dot(x, y);
  const ElementBound b = dot_ceiling(static_cast<int64_t>(x.size()));
  Sweep s;
  for (Order o : kOrders) {
    for (bool fma : {false, true}) {
      const Check c = check(dot_f32(x, y, o, fma), e, b);
      s.all_within = s.all_within && c.within;
      s.max_ratio = std::max(s.max_ratio, c.ratio);
    }
  }
  return s;
}

TEST(DotBound, RandomDotsStayUnderTheCeiling) {
  std::vector<float> x, y;
  for (Cls c : kClasses) {
    for (size_t k : {1, 2, 3, 5, 31, 32, 33, 100, 1000, 4096}) {
      const int seeds = k >= 1000 ? 4 : 24;
      double max_ratio = 0;
      for (int s = 0; s < seeds; ++s) {
        fill(c, k, 1000 * k + static_cast<uint64_t>(s), x, y);
        const Sweep r = sweep_one(x, y);
        EXPECT_TRUE(r.all_within) << cls_name(c) << " k=" << k << " seed=" << s;
        max_ratio = std::max(max_ratio, r.max_ratio);
      }
      if (k == 4096) {
        std::printf("[ measured ] %s k=4096: max error/ceiling = %.3g\n", cls_name(c), max_ratio);
      }
    }
  }
}

TEST(DotBound, NotAbsurdlyLooseForSameSignData) {
  // Same-sign data has no cancellation, so rounding errors accumulate with
  // the partial sums. Measured max error/ceiling over 8 seeds (libstdc++,
  // with or without FMA alike): forward 8.0e-3, reverse 9.3e-3, blocked-32
  // 1.2e-3, pairwise 2.5e-4. (The lost-units case above reaches 0.9988; random
  // normal or cancellation-heavy data ~3e-4: the ceiling is a worst case.)
  const size_t k = 4096;
  std::vector<float> x, y;
  double best = 0;
  for (Order o : kOrders) {
    for (bool fma : {false, true}) {
      double worst = 0;
      for (uint64_t s = 0; s < 8; ++s) {
        fill(Cls::kSameSign, k, 77 + s, x, y);
        const Check c = check(dot_f32(x, y, o, fma), exact_dot(x, y), dot_ceiling(k));
        EXPECT_TRUE(c.within);
        worst = std::max(worst, c.ratio);
      }
      std::printf("[ measured ] same-sign k=4096 order=%d fma=%d: max error/ceiling over 8 = %.3g\n",
                  static_cast<int>(o), fma ? 1 : 0, worst);
      best = std::max(best, worst);
    }
  }
  EXPECT_GT(best, 1e-3);
}

RC_GTEST_PROP(DotBoundProp, RandomOrdersAndClassesStayUnderTheCeiling, ()) {
  const auto k = *rc::gen::inRange<size_t>(1, 700);
  const Cls c = *rc::gen::elementOf(std::vector<Cls>(std::begin(kClasses), std::end(kClasses)));
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  std::vector<float> x, y;
  fill(c, k, seed, x, y);
  RC_ASSERT(sweep_one(x, y).all_within);
}

// ---- the bound catches the bugs it is for ---------------------------------------------

TEST(DotBound, Fp16AccumulationExceedsTheFp32Ceiling) {
  // A kernel that promises fp32 accumulation but keeps its partial sums in
  // fp16 (11 significant bits), emulated: products of fp16-representable
  // inputs are exact, each partial sum is rounded to 11 bits. The correct
  // fp32 kernel on the same data stays under the ceiling. Measured max
  // error/ceiling over 32 rows: 74 (k=64), 47 (256), 9.9 (1024), 7.9 (4096),
  // with 30, 29, 20, 9 of the 32 rows above 1. The margin shrinks roughly
  // like 1/k (typical fp16 error ~ k*u16 for N(0,1) data, ceiling ~ k^2*u32),
  // so at much larger k one element need not show the bug; a whole C does.
  std::vector<float> x, y;
  for (size_t k : {64, 256, 1024, 4096}) {
    double min_ratio = kInf, max_ratio = 0;
    int exceeding = 0;
    for (uint64_t row = 0; row < 32; ++row) {
      fill(Cls::kNormal, k, 5000 + 100 * k + row, x, y);
      for (size_t i = 0; i < k; ++i) {
        x[i] = static_cast<float>(round_to_bits(x[i], 11));
        y[i] = static_cast<float>(round_to_bits(y[i], 11));
      }
      double acc = 0;
      for (size_t i = 0; i < k; ++i) {
        acc = round_to_bits(acc + static_cast<double>(x[i]) * static_cast<double>(y[i]), 11);
        ASSERT_LT(std::abs(acc), 65504.0);  // stays in fp16 range, as round_to_bits assumes
      }
      const ExactDot e = exact_dot(x, y);
      const Check bug = check(acc, e, dot_ceiling(static_cast<int64_t>(k), DType::kF16));
      exceeding += bug.within ? 0 : 1;
      min_ratio = std::min(min_ratio, bug.ratio);
      max_ratio = std::max(max_ratio, bug.ratio);
      EXPECT_TRUE(check(dot_f32(x, y, Order::kForward, true), e, dot_ceiling(k, DType::kF16)).within);
    }
    // A verdict fails when any element of C exceeds; these 32 rows are 32 elements.
    EXPECT_GT(max_ratio, 1.0) << "k=" << k;
    std::printf(
        "[ measured ] fp16-accumulation k=%zu: error/fp32-ceiling over 32 rows in [%.3g, %.3g], "
        "%d rows exceed\n",
        k, min_ratio, max_ratio, exceeding);
  }
}

TEST(DotBound, NarrowOutputNeedsRelOut) {
  // fp32 accumulation rounded once to fp16 on output: within the ceiling for
  // out = fp16 (rel_out = 2^-11), beyond the one for out = fp32.
  const size_t k = 64;
  std::vector<float> x, y;
  double max_vs_f32 = 0;
  for (uint64_t row = 0; row < 16; ++row) {
    fill(Cls::kNormal, k, 900 + row, x, y);
    const ExactDot e = exact_dot(x, y);
    const double out = round_to_bits(dot_f32(x, y, Order::kForward, false), 11);
    EXPECT_TRUE(check(out, e, dot_ceiling(k, DType::kF32, DType::kF16)).within);
    max_vs_f32 = std::max(max_vs_f32, check(out, e, dot_ceiling(k)).ratio);
  }
  EXPECT_GT(max_vs_f32, 1.0);
}

// ---- exact tier ------------------------------------------------------------------

TEST(ExactTier, Boundaries) {
  // k * r^2 * |alpha| + |beta| |c| < 2^p.
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF32, (int64_t{1} << 22) - 1, 2, 1, 0, 0));  // 2^24 - 4
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, int64_t{1} << 22, 2, 1, 0, 0));       // 2^24
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF32, (int64_t{1} << 24) - 1, 1, 1, 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, int64_t{1} << 24, 1, 1, 0, 0));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF32, (int64_t{1} << 21) - 1, 2, 2, 0, 0));  // 2^24 - 8
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, int64_t{1} << 21, 2, 2, 0, 0));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF32, 1, 1, 1, 1, std::ldexp(1.0, 24) - 2));  // 2^24 - 1
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, 1, 1, 1, 1, std::ldexp(1.0, 24) - 1));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF32, 0, 5, 1, 3, 1000));  // k = 0: beta*C only

  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF16, 511, 2, 1, 0, 0));  // 2044 < 2^11
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF16, 512, 2, 1, 0, 0));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kTF32, 511, 2, 1, 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kTF32, 512, 2, 1, 0, 0));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kBF16, 63, 2, 1, 0, 0));  // 252 < 2^8
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kBF16, 64, 2, 1, 0, 0));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kE4M3, 3, 2, 1, 0, 0));  // 12 < 2^4
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kE4M3, 4, 2, 1, 0, 0));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF64, (int64_t{1} << 53) - 1, 1, 1, 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF64, int64_t{1} << 53, 1, 1, 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF64, (int64_t{1} << 51) + 1, 2, 1, 0, 0));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kI32, (int64_t{1} << 29) - 1, 2, 1, 0, 0));  // 2^31 - 4
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kI32, int64_t{1} << 29, 2, 1, 0, 0));
}

TEST(ExactTier, RejectsNonIntegerScalarsAndNonsense) {
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, 4, 2, 0.5, 0, 0));  // half-integers need another bit
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, 4, 2, 1, 0.25, 4));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, 4, 2, 1, 1, 2.5));
  EXPECT_TRUE(gemm_exact_tier_holds(DType::kF32, 4, 2, 1, 0, 2.5));  // C not read
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, 4, 2, std::nan(""), 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, 4, 2, kInf, 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, -1, 2, 1, 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, 4, -2, 1, 0, 0));
  EXPECT_FALSE(gemm_exact_tier_holds(DType::kF32, std::numeric_limits<int64_t>::max(), 1 << 30, 1, 0, 0));
}

TEST(ExactTier, PredicateMatchesFp32Arithmetic) {
  // At the boundary (r = 2): 2^22 - 1 products of 4 sum to 2^24 - 4, exactly.
  // One product more reaches 2^24, and then + 1 has no fp32 representation.
  const int64_t k_ok = (int64_t{1} << 22) - 1;
  ASSERT_TRUE(gemm_exact_tier_holds(DType::kF32, k_ok, 2, 1, 0, 0));
  float acc = 0;
  for (int64_t i = 0; i < k_ok; ++i) acc += 2.0f * 2.0f;
  EXPECT_EQ(acc, std::ldexp(1.0f, 24) - 4);

  const int64_t k_bad = (int64_t{1} << 22) + 1;
  ASSERT_FALSE(gemm_exact_tier_holds(DType::kF32, k_bad, 2, 1, 0, 0));
  acc = 0;
  for (int64_t i = 0; i + 1 < k_bad; ++i) acc += 2.0f * 2.0f;
  acc += 1.0f * 1.0f;
  EXPECT_NE(static_cast<double>(acc), std::ldexp(1.0, 24) + 1);
}

}  // namespace
}  // namespace assay
