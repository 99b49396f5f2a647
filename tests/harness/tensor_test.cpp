// TensorDesc: examples, exhaustive small views, and RapidCheck properties that
// compare extent / has_overlap / coverage_mask with brute-force enumeration.
#include "harness/tensor.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace assay {
namespace {

/// Everything the enumeration of all multi-indices says about a view.
struct Brute {
  int64_t extent = 0;
  bool overlap = false;
  std::vector<uint8_t> mask;
  std::vector<int64_t> linear;  ///< linear index of each multi-index, row-major order
};

/// Decodes every flat index in mixed radix and applies the stride formula
/// directly; shares no code with tensor.cpp.
Brute brute(const TensorDesc& t) {
  Brute b;
  int64_t numel = 1;
  for (int64_t e : t.shape) numel *= e;
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t rem = flat, lin = t.offset;
    for (size_t d = t.shape.size(); d-- > 0;) {
      lin += (rem % t.shape[d]) * t.strides[d];
      rem /= t.shape[d];
    }
    b.linear.push_back(lin);
  }
  b.extent = t.offset;
  for (int64_t lin : b.linear) b.extent = std::max(b.extent, lin + 1);
  b.overlap = std::set<int64_t>(b.linear.begin(), b.linear.end()).size() != b.linear.size();
  b.mask.assign(static_cast<size_t>(b.extent), 0);
  for (int64_t lin : b.linear) b.mask[static_cast<size_t>(lin)] = 1;
  return b;
}

TensorDesc make(std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset = 0, DType dt = DType::kF32) {
  TensorDesc t;
  t.dtype = dt;
  t.shape = std::move(shape);
  t.strides = std::move(strides);
  t.offset = offset;
  return t;
}

/// Multi-index of row-major flat position `flat`.
std::vector<int64_t> unflatten(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

// ---- examples ---------------------------------------------------------------

TEST(TensorDesc, ContiguousStrides) {
  const TensorDesc t = TensorDesc::contiguous(DType::kF16, {2, 3, 4});
  EXPECT_EQ(t.strides, (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(t.dtype, DType::kF16);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.extent(), 24);
  EXPECT_FALSE(t.has_overlap());
  // A zero extent must not turn outer strides into broadcasts.
  EXPECT_EQ(TensorDesc::contiguous(DType::kF32, {3, 0, 2}).strides, (std::vector<int64_t>{2, 2, 1}));
}

TEST(TensorDesc, RankZeroIsOneElement) {
  const TensorDesc t = make({}, {}, 7);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.extent(), 8);
  EXPECT_EQ(t.linear_index({}), 7);
  EXPECT_FALSE(t.has_overlap());
  std::vector<uint8_t> want(8, 0);
  want[7] = 1;
  EXPECT_EQ(t.coverage_mask(), want);
}

TEST(TensorDesc, ZeroSizeExtentIsOffset) {
  const TensorDesc t = make({4, 0, 3}, {0, 0, 0}, 5);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.extent(), 5);
  EXPECT_FALSE(t.has_overlap());  // stride 0, but no two elements exist
  EXPECT_EQ(t.coverage_mask(), std::vector<uint8_t>(5, 0));
  EXPECT_TRUE(t.validate("Z").ok());
}

TEST(TensorDesc, PaddedRowsExtentAndCoverage) {
  // 3 x 4 matrix with ld 6 at offset 2: rows [2,6), [8,12), [14,18).
  const TensorDesc t = make({3, 4}, {6, 1}, 2);
  EXPECT_EQ(t.extent(), 18);
  EXPECT_EQ(t.linear_index({2, 3}), 17);
  const std::vector<uint8_t> m = t.coverage_mask();
  ASSERT_EQ(m.size(), 18u);
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(m[i], (i % 6 >= 2) ? 1 : 0) << i;
}

TEST(TensorDesc, ByteAlignment) {
  EXPECT_EQ(make({1}, {1}, 0).byte_alignment(), 256);
  EXPECT_EQ(make({1}, {1}, 1, DType::kF32).byte_alignment(), 4);
  EXPECT_EQ(make({1}, {1}, 3, DType::kF32).byte_alignment(), 4);
  EXPECT_EQ(make({1}, {1}, 2, DType::kF32).byte_alignment(), 8);
  EXPECT_EQ(make({1}, {1}, 32, DType::kF32).byte_alignment(), 128);
  EXPECT_EQ(make({1}, {1}, 64, DType::kF32).byte_alignment(), 256);
  EXPECT_EQ(make({1}, {1}, 1000, DType::kF32).byte_alignment(), 32);  // 4000 = 2^5 * 125
  EXPECT_EQ(make({1}, {1}, 1, DType::kF16).byte_alignment(), 2);
  EXPECT_EQ(make({1}, {1}, 3, DType::kI8).byte_alignment(), 1);
  EXPECT_EQ(make({1}, {1}, 16, DType::kF64).byte_alignment(), 128);
  // 2^62 * 8 bytes overflows int64; the alignment is still 256.
  EXPECT_EQ(make({1}, {1}, int64_t{1} << 62, DType::kF64).byte_alignment(), 256);
}

TEST(TensorDesc, OverlapExamples) {
  EXPECT_TRUE(make({2, 2}, {1, 1}).has_overlap());
  EXPECT_TRUE(make({3}, {0}).has_overlap());
  EXPECT_FALSE(make({1, 5}, {0, 1}).has_overlap());  // stride 0 on a size-1 dim is harmless
  EXPECT_FALSE(make({4, 3}, {1, 4}).has_overlap());  // column-major
  EXPECT_TRUE(make({3, 3}, {2, 1}).has_overlap());   // rows of 3 with ld 2
  // Not caught by "each stride > span of the smaller ones" (3 <= 2*2), yet
  // injective: {0,2,4} and {3,5,7}.
  EXPECT_FALSE(make({3, 2}, {2, 3}).has_overlap());
  EXPECT_TRUE(make({3, 2}, {2, 4}).has_overlap());
  // The gcd of the strides does not matter.
  EXPECT_FALSE(make({3, 2}, {int64_t{2} << 40, int64_t{3} << 40}).has_overlap());
}

TEST(TensorDesc, OverlapLargeViews) {
  // Inner contiguous run of n0 and two dims with strides 3*n0 and 4*n0: block
  // starts {0,3,6,4,7,10}*n0 are n0 apart, so injective, but neither the
  // greedy test nor peeling decides it; 6*n0 elements.
  const int64_t n0 = int64_t{1} << 21;  // 2^23.6 elements, 2^24.5 positions: bitmap path
  EXPECT_FALSE(make({3, 2, n0}, {3 * n0, 4 * n0, 1}).has_overlap());
  EXPECT_TRUE(make({3, 2, n0 + 1}, {3 * n0, 4 * n0, 1}).has_overlap());
  // Beyond the enumeration budget the answer is the safe one ("overlap").
  const int64_t big = int64_t{1} << 25;
  EXPECT_TRUE(make({3, 2, big}, {3 * big, 4 * big, 1}).has_overlap());
  // ...but views the peeling decides are exact at any size.
  EXPECT_FALSE(make({1 << 20, 1 << 20}, {int64_t{1} << 21, 1}).has_overlap());
}

TEST(TensorDesc, ValidateMessages) {
  const auto msg = [](const TensorDesc& t, const std::string& name) {
    const Status s = t.validate(name);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
    return s.message();
  };
  EXPECT_EQ(msg(make({2, 3}, {1}), "A"), "tensor A: strides has 1 entries, shape has 2");
  EXPECT_EQ(msg(make({2, 3}, {-3, 1}), "C"), "tensor C: negative stride -3 at dim 0");
  EXPECT_EQ(msg(make({2, -1}, {1, 1}), "A"), "tensor A: negative shape extent -1 at dim 1");
  EXPECT_EQ(msg(make({2}, {1}, -4), "A"), "tensor A: negative offset -4");
  EXPECT_EQ(msg(make({int64_t{1} << 20, int64_t{1} << 20}, {int64_t{1} << 20, 1}), "B"),
            "tensor B: shape has 2^40 elements, exceeds limit 2^34");
  EXPECT_EQ(msg(make({2}, {(int64_t{1} << 40) - 1}), "B"), "tensor B: extent 2^40 elements exceeds limit 2^34");
  EXPECT_EQ(make({2}, {1}, 100).validate("D", 101).message(), "tensor D: extent 102 elements exceeds limit 101");
  // Hostile sizes: the checks must not overflow.
  EXPECT_NE(msg(make({int64_t{1} << 40, int64_t{1} << 40}, {0, 0}), "E").find("more than 2^63 elements"),
            std::string::npos);
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_NE(msg(make({2, 2}, {huge, 1}), "F").find("extent overflows"), std::string::npos);
  EXPECT_NE(msg(make({2}, {1}, huge), "G").find("extent overflows"), std::string::npos);
  // A product that wraps to exactly 0 must not look like an empty tensor.
  EXPECT_FALSE(make({int64_t{1} << 32, int64_t{1} << 32}, {0, 0}).validate("H").ok());

  EXPECT_TRUE(make({2, 3}, {3, 1}).validate("A").ok());
  EXPECT_TRUE(make({0, huge, huge}, {huge, huge, huge}, 3).validate("A").ok());  // empty: extent = offset
  EXPECT_TRUE(make({2}, {1}, 100).validate("D").ok());
  EXPECT_TRUE(make({2}, {1}, 99).validate("D", 101).ok());  // extent 101 == limit
}

// ---- exhaustive small views ---------------------------------------------------

TEST(TensorDesc, ExhaustiveRankThreeMatchesBruteForce) {
  // Every rank-3 view with extents 0..3 and strides 0..6: all the corner
  // cases (size 1, size 0, stride 0, equal strides, non-greedy injective).
  int64_t non_greedy_injective = 0;
  for (int64_t code = 0; code < 4 * 4 * 4 * 7 * 7 * 7; ++code) {
    int64_t c = code;
    std::vector<int64_t> shape(3), strides(3);
    for (auto& e : shape) e = c % 4, c /= 4;
    for (auto& s : strides) s = c % 7, c /= 7;
    const TensorDesc t = make(shape, strides, 1);
    const Brute b = brute(t);
    ASSERT_EQ(t.extent(), b.extent) << code;
    ASSERT_EQ(t.has_overlap(), b.overlap) << code;
    ASSERT_EQ(t.coverage_mask(), b.mask) << code;
    // Count the views the classic greedy test would wrongly call overlapping.
    std::vector<std::pair<int64_t, int64_t>> ds;
    for (int d = 0; d < 3; ++d)
      if (shape[d] > 1) ds.push_back({strides[d], shape[d]});
    std::sort(ds.begin(), ds.end());
    int64_t span = 0;
    bool greedy = true;
    for (auto [s, n] : ds) {
      greedy = greedy && s > span;
      span += (n - 1) * s;
    }
    if (!b.overlap && !greedy && b.linear.size() > 0) ++non_greedy_injective;
  }
  EXPECT_GT(non_greedy_injective, 0);  // the exact fallback was exercised
}

// ---- properties ------------------------------------------------------------------

/// A random small view: rank 0..4, extents 0..4, strides 0..max_stride, offset 0..5.
TensorDesc gen_small_view(int64_t max_stride) {
  const auto rank = *rc::gen::inRange<size_t>(0, 5);
  TensorDesc t;
  t.dtype = *rc::gen::elementOf(std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)));
  t.shape = *rc::gen::container<std::vector<int64_t>>(rank, rc::gen::inRange<int64_t>(0, 5));
  t.strides = *rc::gen::container<std::vector<int64_t>>(rank, rc::gen::inRange<int64_t>(0, max_stride + 1));
  t.offset = *rc::gen::inRange<int64_t>(0, 6);
  return t;
}

RC_GTEST_PROP(TensorDescProp, ExtentOverlapCoverageMatchBruteForce, ()) {
  const TensorDesc t = gen_small_view(*rc::gen::element(int64_t{3}, int64_t{12}, int64_t{40}));
  RC_ASSERT(t.validate("T").ok());
  const Brute b = brute(t);
  RC_ASSERT(t.extent() == b.extent);
  RC_ASSERT(t.has_overlap() == b.overlap);
  RC_ASSERT(t.coverage_mask() == b.mask);
  RC_ASSERT(t.numel() == static_cast<int64_t>(b.linear.size()));
  for (int64_t f = 0; f < t.numel(); ++f) RC_ASSERT(t.linear_index(unflatten(t.shape, f)) == b.linear[f]);
}

RC_GTEST_PROP(TensorDescProp, ContiguousIsDenseAndOverlapFree, ()) {
  const auto rank = *rc::gen::inRange<size_t>(0, 5);
  const auto shape = *rc::gen::container<std::vector<int64_t>>(rank, rc::gen::inRange<int64_t>(0, 5));
  const TensorDesc t = TensorDesc::contiguous(DType::kF32, shape);
  RC_ASSERT(!t.has_overlap());
  RC_ASSERT(t.extent() == t.numel());
  const auto m = t.coverage_mask();
  RC_ASSERT(std::all_of(m.begin(), m.end(), [](uint8_t v) { return v == 1; }));
}

RC_GTEST_PROP(TensorDescProp, ByteAlignmentIsLargestPowerOfTwoDivisor, ()) {
  TensorDesc t = make({1}, {1}, *rc::gen::inRange<int64_t>(0, 100000),
                      *rc::gen::elementOf(std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes))));
  const int64_t bytes = t.offset * static_cast<int64_t>(dtype_size(t.dtype));
  int64_t want = 256;
  while (bytes % want != 0) want /= 2;
  RC_ASSERT(t.byte_alignment() == want);
}

/// A value that is often small, sometimes at or near the int64 limits.
rc::Gen<int64_t> gen_hostile() {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  return rc::gen::oneOf(rc::gen::inRange<int64_t>(-2, 6), rc::gen::arbitrary<int64_t>(),
                        rc::gen::map(rc::gen::inRange(0, 63), [](int e) { return int64_t{1} << e; }),
                        rc::gen::element(kMax, kMin));
}

RC_GTEST_PROP(TensorDescProp, ValidateAgreesWithWideArithmetic, ()) {
  const auto rank = *rc::gen::inRange<size_t>(0, 5);
  TensorDesc t;
  t.shape = *rc::gen::container<std::vector<int64_t>>(rank, gen_hostile());
  t.strides = *rc::gen::container<std::vector<int64_t>>(rank, gen_hostile());
  t.offset = *gen_hostile();
  const int64_t limit = int64_t{1} << 34;
  // Reference verdict in 128-bit arithmetic, saturated at 2^64 (far above any
  // limit) so that no product of a saturated value and an int64 overflows.
  using Wide = __int128;
  const Wide cap = Wide{1} << 64;
  bool negative = t.offset < 0, empty = false;
  for (size_t d = 0; d < rank; ++d) {
    negative = negative || t.shape[d] < 0 || t.strides[d] < 0;
    empty = empty || t.shape[d] == 0;
  }
  Wide numel = empty ? 0 : 1, ext = t.offset;
  if (!negative && !empty) {
    for (size_t d = 0; d < rank; ++d) {
      numel = std::min<Wide>(numel * t.shape[d], cap);
      ext = std::min<Wide>(ext + Wide{t.shape[d] - 1} * t.strides[d], cap);
    }
    ext += 1;
  }
  const bool want_ok = !negative && (empty || numel <= limit) && ext <= limit;
  const Status s = t.validate("T", limit);
  RC_ASSERT(s.ok() == want_ok);
  if (!s.ok()) {
    RC_ASSERT(s.code() == StatusCode::kInvalidArgument);
    RC_ASSERT(s.message().rfind("tensor T: ", 0) == 0);
    RC_ASSERT(s.message().find('\n') == std::string::npos);
  } else {
    RC_ASSERT(t.extent() == static_cast<int64_t>(ext));
    RC_ASSERT(t.numel() == static_cast<int64_t>(empty ? 0 : numel));
  }
}

}  // namespace
}  // namespace assay
