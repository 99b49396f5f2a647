// harness/bound_core.h: the reduction and normalisation bounds moved there from bounds.cpp and
// properties/norms.cpp (so that the device references run them) keep the host's results bit for
// bit. The expected bits were printed by the code before the move, on the same inputs:
// sum_bounds, mean_bounds, variance_bounds, layernorm_bounds and rmsnorm_bounds (both levels,
// fp32/fp16/bf16 outputs, n from 1 to 16384, ordinary, ill-conditioned, constant and NaN rows)
// as one FNV-1a hash of their 1369 values; bound_ln's and bound_rms's per-row formulas (y on
// three elements, the saved mean and rstd; ordinary, ill-conditioned, subnormal, constant,
// overflowing and NaN rows) value by value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "harness/bound_core.h"
#include "harness/bounds.h"

namespace assay {
namespace {

/// The public bound functions on a grid of models and rows, every coefficient of both levels.
void api_values(std::vector<double>& v) {
  auto push = [&](const ElementBound& b) {
    v.push_back(b.rel_out);
    v.push_back(b.rel_mag);
    v.push_back(b.floor);
  };
  auto pair = [&](const BoundPair& p) {
    push(p.ceiling);
    push(p.expected);
  };
  for (DType out : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t n : {1, 7, 1024, 16384}) {
      ReductionModel rm;
      rm.in = out, rm.out = out, rm.n = n;
      pair(sum_bounds(rm));
      pair(mean_bounds(rm));
      for (int ddof : {0, 1}) pair(variance_bounds(rm, ddof, {0.8, 2.5, 4.0}));
      pair(variance_bounds(rm, 0, {1e4, 1e4 + 4, 8}));
      for (bool fast : {false, true}) {
        NormModel m;
        m.in = out, m.out = out, m.n = n, m.eps = static_cast<float>(1e-5), m.fast_math = fast;
        pair(layernorm_bounds(m, {1.3, {0.8, 2.5, 4.0}, 1.7}));
        pair(layernorm_bounds(m, {1e-12, {1e4, 1e4 + 1e-6, 2e-6}, 0.5}));
        pair(layernorm_bounds(m, {0.0, {3.0, 3.0, 0.0}, 1.0}));
        pair(layernorm_bounds(m, {NAN, {NAN, 2.0, NAN}, 1.0}));
        pair(rmsnorm_bounds(m, 2.1));
        pair(rmsnorm_bounds(m, 0.0));
        pair(rmsnorm_bounds(m, 1e30));
      }
    }
  v.push_back(variance_mag({0.8, 2.5, 4.0}));
}

/// One LayerNorm row of bound_ln's inputs (the reference's statistics) and three elements.
struct LnRow {
  DType dt;
  int64_t n;
  double eps;
  bool fast;
  double mu, var, mean_abs, max_abs, range, max_gamma;
};
struct RmsRow {
  DType dt;
  int64_t n;
  double eps;
  bool fast;
  double mean_sq;
};
// (|y|, |gamma xhat|, |gamma|): an ordinary element, a zero, an unbounded magnitude.
constexpr double kElems[3][3] = {{0.5, 0.7, 1.7}, {0.0, 0.0, 0.0}, {3.0, INFINITY, 2.0}};
std::vector<LnRow> ln_rows() {
  const double e5 = static_cast<float>(1e-5), e12 = static_cast<float>(1e-12);
  return {{DType::kF32, 1024, e5, false, 0.1, 1.3, 0.8, 2.5, 4.0, 1.7},
          {DType::kF16, 37, e5, false, 1e4, 1e-6, 1e4, 1e4 + 2e-3, 4e-3, 881},
          {DType::kBF16, 4096, e12, true, 1e-41, 1e-82, 1e-41, 3e-41, 4e-41, 2.0},
          {DType::kF32, 16384, e5, false, 0.0, 0.0, 3.0, 3.0, 0.0, 1.0},
          {DType::kF32, 64, e5, false, 1e18, 1e36, 1e18, 1e19, 2e19, 1.0},
          {DType::kF32, 64, e5, false, 1e38, 1e70, 1e38, 2e38, 1e36, 1.0},
          {DType::kF16, 128, e5, false, NAN, NAN, NAN, 5.0, NAN, 1.0}};
}
std::vector<RmsRow> rms_rows() {
  const double e5 = static_cast<float>(1e-5), e12 = static_cast<float>(1e-12);
  return {{DType::kF32, 1024, e5, false, 2.1},
          {DType::kF16, 37, e5, true, 0.0},
          {DType::kBF16, 4096, e12, false, 1e-80},
          {DType::kF32, 64, e5, false, 1e37},
          {DType::kF32, 64, e5, false, NAN}};
}

uint64_t fnv1a(const std::vector<double>& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (double x : v) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    for (int k = 0; k < 8; ++k) {
      h ^= (b >> (8 * k)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

uint64_t bits(double x) {
  uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

/// NaN tolerances read +Inf, as the engine leaves them (unbounded_where_nan).
double unbounded_if_nan(double t) {
  return std::isnan(t) ? INFINITY : t;
}

TEST(BoundCoreNorms, ReductionAndNormBoundsKeepTheirBits) {
  std::vector<double> v;
  api_values(v);
  ASSERT_EQ(v.size(), 1369u);
  EXPECT_EQ(fnv1a(v), 0x6bdff658ac8ad164ull);
}

TEST(BoundCoreNorms, NormRowBoundsKeepBoundLnAndBoundRmsBits) {
  const uint64_t expected[] = {
      0x3f2d0bcdb49838c2ull, 0x3f1e3baae3b180b1ull, 0x3f1e47aae3bde0b1ull, 0x3f208b616720922eull, 0x3f216d69a9d47d00ull,
      0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x3fa3af12993a4bd0ull, 0x7ff0000000000000ull,
      0x3f6001076cd18ad4ull, 0x381dfbb96f7df59bull, 0x3f880018180018daull, 0x3828038073eaf7fcull, 0x3fde8480235aee73ull,
      0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x3f7205414455359cull, 0x7ff0000000000000ull,
      0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x42b8b8498d95b03eull, 0x7ff0000000000000ull,
      0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull,
      0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull,
      0x3ef0446c0cee8000ull, 0x38100000bc2a01d8ull, 0x3f1866a21365c000ull, 0x3ef65d5a211dd771ull, 0x3f300580a00e99d3ull,
      0x3e60000000000000ull, 0x3f5807a0f015e6bcull, 0x3f23c3a50866e69eull, 0x3f60008080017473ull, 0x3813f0908020bbceull,
      0x3f8800c0c0022eacull, 0x3fd6e3601b7856d6ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull,
      0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull, 0x7ff0000000000000ull,
  };
  std::vector<double> v;
  for (const LnRow& q : ln_rows()) {
    NormModel m;
    m.in = q.dt, m.out = q.dt, m.n = q.n, m.eps = q.eps, m.fast_math = q.fast;
    const NormScalars s = norm_scalars(m);
    const double rs = 1 / std::sqrt((q.var < 0 ? 0 : q.var) + q.eps);
    const LayerNormRowBound b =
        layernorm_row_bound(s, q.mu, rs, {q.var, {q.mean_abs, q.max_abs, q.range}, q.max_gamma});
    for (const auto& e : kElems) v.push_back(unbounded_if_nan(layernorm_y_tol(b, e[0], e[1], e[2])));
    v.push_back(unbounded_if_nan(b.mean_tol));
    v.push_back(unbounded_if_nan(b.rstd_tol));
  }
  for (const RmsRow& q : rms_rows()) {
    NormModel m;
    m.in = q.dt, m.out = q.dt, m.n = q.n, m.eps = q.eps, m.fast_math = q.fast;
    const RmsNormRowBound b = rmsnorm_row_bound(norm_scalars(m), q.mean_sq, 1 / std::sqrt(q.mean_sq + q.eps));
    for (const auto& e : kElems) v.push_back(unbounded_if_nan(rmsnorm_y_tol(b, e[0], e[2])));
    v.push_back(unbounded_if_nan(b.rstd_tol));
  }
  ASSERT_EQ(v.size(), std::size(expected));
  int finite = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(bits(v[i]), expected[i]) << "value " << i << ": " << v[i];
    finite += std::isfinite(v[i]) ? 1 : 0;
  }
  EXPECT_GE(finite, 20) << "the rows should exercise finite tolerances, not only the unbounded zones";
}

}  // namespace
}  // namespace assay
