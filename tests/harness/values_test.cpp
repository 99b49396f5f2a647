// Value classes and special-value injection: each class has its shape in
// every dtype it applies to, injection lands where it is asked to, values are
// pure functions of (recipe, dtype, shape, stream, logical index), old classes
// are bit-for-bit unchanged, and the recipe's JSON fields round-trip with
// one-line errors for bad ones.
#include "harness/values.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "harness/case.h"

namespace assay {
namespace {

// Materialises `desc` and reads every logical element back as double.
std::vector<double> values_of(const TensorDesc& desc, const ValueRecipe& r, uint64_t stream = 1) {
  std::vector<unsigned char> buf(static_cast<size_t>(desc.extent()) * dtype_size(desc.dtype));
  materialize(desc, r, stream, buf.data());
  std::vector<double> out;
  const int64_t n = desc.numel();
  std::vector<int64_t> idx(desc.shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(load_as_double(desc.dtype, buf.data() + desc.linear_index(idx) * dtype_size(desc.dtype)));
    for (int64_t d = desc.rank() - 1; d >= 0; --d) {
      if (++idx[d] < desc.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

ValueRecipe recipe(ValueClass c, uint64_t seed = 7) {
  ValueRecipe r;
  r.cls = c;
  r.seed = seed;
  return r;
}

constexpr DType kFloatTypes[] = {DType::kF64,  DType::kF32,  DType::kTF32, DType::kF16,
                                 DType::kBF16, DType::kE4M3, DType::kE5M2};

TEST(ValueClass, NamesRoundTripAndAreDistinct) {
  std::set<std::string> names;
  for (ValueClass c : kAllValueClasses) {
    const std::string n(value_class_name(c));
    EXPECT_NE(n, "?");
    EXPECT_TRUE(names.insert(n).second) << n;
    ASSERT_TRUE(parse_value_class(n).has_value()) << n;
    EXPECT_EQ(*parse_value_class(n), c);
  }
  EXPECT_EQ(names.size(), 13u);
  // The numbering is part of the case format: old names keep their values.
  EXPECT_EQ(static_cast<int>(ValueClass::kNaN), 4);
  EXPECT_EQ(static_cast<int>(ValueClass::kLogUniform), 5);
  EXPECT_FALSE(parse_value_class("chaos").has_value());
  for (uint8_t b : {kSpecialNaN, kSpecialPosInf, kSpecialNegInf, kSpecialNegZero})
    EXPECT_EQ(parse_special(special_name(b)), b);
  for (uint8_t b : {kAtFirst, kAtLast, kAtTile}) EXPECT_EQ(parse_inject_at(inject_at_name(b)), b);
  EXPECT_FALSE(parse_special("inf").has_value());
}

TEST(ValueClass, OldClassesBitForBitUnchanged) {
  // Pinned with the code as it was before the new classes and injection (the
  // same program built against that values.cpp printed this hash): the five
  // original classes over seeds, scales, ranges, streams, dtypes and a strided
  // layout. Complements the GEMM golden hash in case_test.cpp.
  uint64_t h = 0xcbf29ce484222325ull;
  for (ValueClass c :
       {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign, ValueClass::kSmallInt, ValueClass::kNaN})
    for (uint64_t seed : {0ull, 1ull, 42ull, 0x0123456789abcdefull, ~0ull})
      for (double scale : {1.0, 0.5, 1e3})
        for (int64_t ir : {int64_t{0}, int64_t{2}, int64_t{127}}) {
          ValueRecipe r;
          r.cls = c;
          r.seed = seed;
          r.scale = scale;
          r.int_range = ir;
          for (uint64_t stream : {0ull, 7ull, 0xdeadbeefcafeull})
            for (uint64_t i = 0; i < 2000; ++i) {
              const double v = recipe_value(r, stream, i * 7919 + (i << 33));
              h = fnv1a64(&v, 8, h);
            }
          for (DType t : kAllDTypes) {
            TensorDesc d = TensorDesc::contiguous(t, {5, 7});
            d.strides = {9, 1};
            d.offset = 3;
            std::vector<unsigned char> buf(static_cast<size_t>(d.extent()) * dtype_size(t));
            materialize(d, r, seed ^ 5, buf.data());
            h = fnv1a64(buf.data(), buf.size(), h);
          }
        }
  EXPECT_EQ(h, 0x022131b6b0cbeaf1ull) << std::hex << "actual 0x" << h;
}

TEST(ValueClass, NewClassesGoldenHash) {
  // Pinned when the classes were added: a change means stored cases using
  // them no longer rebuild the same inputs. Update only with a format bump.
  uint64_t h = 0xcbf29ce484222325ull;
  for (ValueClass c : kAllValueClasses) {
    if (static_cast<int>(c) < 5) continue;
    ValueRecipe r = recipe(c, 0x5eed);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kE4M3, DType::kI8}) {
      const TensorDesc d = TensorDesc::contiguous(t, {3, 17, 19});
      std::vector<unsigned char> buf(static_cast<size_t>(d.extent()) * dtype_size(t));
      materialize(d, r, 99, buf.data());
      h = fnv1a64(buf.data(), buf.size(), h);
    }
  }
  ValueRecipe inj = recipe(ValueClass::kNormal, 3);
  inj.inject = {kSpecialAll, 0.05, kAtAll, 8};
  const TensorDesc d = TensorDesc::contiguous(DType::kF32, {33, 40});
  std::vector<unsigned char> buf(static_cast<size_t>(d.extent()) * 4);
  materialize(d, inj, 5, buf.data());
  h = fnv1a64(buf.data(), buf.size(), h);
  EXPECT_EQ(h, 0xc06dd60996fb0b60ull) << std::hex << "actual 0x" << h;
}

// materialize() draws the software-transcendental classes four elements at a time (vector
// lanes); each value must be the scalar expander's bit for bit: every such class, wide exponent
// ranges and overflow factors, fp64 and fp32 constants, injections, odd lengths.
TEST(ValueClass, FourAtATimeIsTheScalarBitForBit) {
  int64_t compared = 0;
  for (ValueClass cls : {ValueClass::kNormal, ValueClass::kLogUniform, ValueClass::kPareto, ValueClass::kNearOverflow})
    for (uint64_t seed : {1ull, 0x0123456789abcdefull})
      for (int variant = 0; variant < 3; ++variant)
        for (bool inject : {false, true})
          for (DType t : {DType::kF64, DType::kF32})
            for (int64_t n : {int64_t{3}, int64_t{4}, int64_t{257}, int64_t{20003}}) {
              ValueRecipe r;
              r.cls = cls, r.seed = seed, r.scale = std::vector<double>{1.0, 1e-3, 3e4}[static_cast<size_t>(variant)];
              r.exp_min = std::vector<int64_t>{-8, -140, 0}[static_cast<size_t>(variant)];
              r.exp_max = std::vector<int64_t>{8, 120, 1}[static_cast<size_t>(variant)];
              r.pareto_alpha = std::vector<double>{1.5, 0.7, 3.0}[static_cast<size_t>(variant)];
              r.overflow_factor = std::vector<double>{4.0, 1.0, 1024.0}[static_cast<size_t>(variant)];
              if (inject) r.inject.kinds = kSpecialAll, r.inject.rate = 0.01, r.inject.at = kAtFirst | kAtLast;
              TensorDesc d = TensorDesc::contiguous(t, {n});
              std::vector<unsigned char> got(static_cast<size_t>(n) * dtype_size(t));
              materialize(d, r, seed ^ 9, got.data());
              for (int64_t i = 0; i < n; ++i) {
                unsigned char want[8];
                store_as(t, recipe_value(r, d, seed ^ 9, static_cast<uint64_t>(i)), want);
                ASSERT_EQ(std::memcmp(got.data() + i * dtype_size(t), want, dtype_size(t)), 0)
                    << value_class_name(cls) << " seed " << seed << " variant " << variant << " " << dtype_name(t)
                    << " element " << i;
                ++compared;
              }
            }
  EXPECT_EQ(compared, 4 * 2 * 3 * 2 * 2 * (3 + 4 + 257 + 20003));
}

TEST(ValueClass, LogUniformCoversItsExponentRange) {
  ValueRecipe r = recipe(ValueClass::kLogUniform);
  r.exp_min = -20;
  r.exp_max = 12;
  const auto v = values_of(TensorDesc::contiguous(DType::kF64, {8192}), r);
  double lo = INFINITY, hi = 0;
  int neg = 0;
  std::set<int> binades;
  for (double x : v) {
    ASSERT_GE(std::fabs(x), std::ldexp(1.0, -20));
    ASSERT_LT(std::fabs(x), std::ldexp(1.0, 12));
    lo = std::min(lo, std::fabs(x));
    hi = std::max(hi, std::fabs(x));
    neg += x < 0;
    binades.insert(std::ilogb(x));
  }
  EXPECT_EQ(binades.size(), 32u);  // every binade of [2^-20, 2^12)
  EXPECT_GT(neg, 3500);
  EXPECT_LT(neg, 4700);
}

TEST(ValueClass, ParetoIsHeavyTailedAboveScale) {
  ValueRecipe r = recipe(ValueClass::kPareto);
  r.scale = 0.5;
  r.pareto_alpha = 1.5;
  const auto v = values_of(TensorDesc::contiguous(DType::kF64, {8192}), r);
  int tail = 0, neg = 0;
  for (double x : v) {
    ASSERT_GE(std::fabs(x), 0.5);
    ASSERT_TRUE(std::isfinite(x));
    tail += std::fabs(x) > 0.5 * 30;  // P = 30^-1.5 = 0.6%
    neg += x < 0;
  }
  EXPECT_GT(tail, 20);
  EXPECT_LT(tail, 90);
  EXPECT_GT(neg, 3500);
}

TEST(ValueClass, MeanSpreadStaysInItsBand) {
  ValueRecipe r = recipe(ValueClass::kMeanSpread);
  r.mean = 1e4;
  r.spread = 0.25;
  const auto v = values_of(TensorDesc::contiguous(DType::kF32, {4096}), r);
  double sum = 0;
  std::set<double> distinct;
  for (double x : v) {
    ASSERT_GE(x, 1e4 - 0.25);
    ASSERT_LE(x, 1e4 + 0.25);
    sum += x;
    distinct.insert(x);
  }
  EXPECT_NEAR(sum / v.size(), 1e4, 0.02);
  EXPECT_GT(distinct.size(), 100u);  // fp32 spacing at 1e4 is 2^-10
}

TEST(ValueClass, NearOverflowIsFiniteAndWithinFactorOfMax) {
  for (DType t : kAllDTypes) {
    for (double f : {1.0, 4.0, 1024.0}) {
      ValueRecipe r = recipe(ValueClass::kNearOverflow);
      r.overflow_factor = f;
      const double mx = max_finite(t);
      // Rounding to the dtype may step below max/f by up to one rounding.
      const double floor_ = mx / f * (1 - 2 * unit_roundoff(t)) - (dtype_is_float(t) ? 0 : 1);
      int neg = 0;
      for (double x : values_of(TensorDesc::contiguous(t, {2048}), r)) {
        ASSERT_TRUE(std::isfinite(x)) << dtype_name(t);
        ASSERT_LE(std::fabs(x), mx) << dtype_name(t);
        ASSERT_GE(std::fabs(x), floor_) << dtype_name(t) << " f=" << f;
        neg += x < 0;
      }
      EXPECT_GT(neg, 700) << dtype_name(t);  // int8 with f = 1024: |x| < 0.5 rounds to (+)0
    }
  }
}

TEST(ValueClass, SubnormalsAreSubnormalsOfTheDtype) {
  for (DType t : kFloatTypes) {
    const auto v = values_of(TensorDesc::contiguous(t, {4096}), recipe(ValueClass::kSubnormal));
    bool smallest = false, largest_binade = false;
    int neg = 0;
    for (double x : v) {
      const double a = std::fabs(x);
      ASSERT_GT(a, 0.0) << dtype_name(t);
      ASSERT_LT(a, min_normal(t)) << dtype_name(t);
      // A whole multiple of the smallest subnormal: representable, no rounding.
      ASSERT_EQ(a / min_subnormal(t), std::floor(a / min_subnormal(t))) << dtype_name(t);
      smallest |= a == min_subnormal(t);
      largest_binade |= a >= min_normal(t) / 2;
      neg += x < 0;
    }
    EXPECT_TRUE(smallest) << dtype_name(t);
    EXPECT_TRUE(largest_binade) << dtype_name(t);
    EXPECT_GT(neg, 1700) << dtype_name(t);
  }
  // Integer types have no subnormals: zeros.
  for (double x : values_of(TensorDesc::contiguous(DType::kI8, {64}), recipe(ValueClass::kSubnormal)))
    EXPECT_EQ(x, 0.0);
}

TEST(ValueClass, SignedZerosMixBothSigns) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kE4M3}) {
    int neg = 0;
    const auto v = values_of(TensorDesc::contiguous(t, {1000}), recipe(ValueClass::kSignedZero));
    for (double x : v) {
      ASSERT_EQ(x, 0.0);
      neg += std::signbit(x);
    }
    EXPECT_GT(neg, 400) << dtype_name(t);
    EXPECT_LT(neg, 600) << dtype_name(t);
  }
}

TEST(ValueClass, OneHotRowsHaveExactlyOneOne) {
  const TensorDesc d = TensorDesc::contiguous(DType::kF16, {5, 7, 13});
  const auto v = values_of(d, recipe(ValueClass::kOneHot));
  std::set<int> hot_cols;
  for (int row = 0; row < 35; ++row) {
    int ones = 0;
    for (int c = 0; c < 13; ++c) {
      const double x = v[static_cast<size_t>(row * 13 + c)];
      ASSERT_TRUE(x == 0.0 || x == 1.0);
      if (x == 1.0) {
        ++ones;
        hot_cols.insert(c);
      }
    }
    EXPECT_EQ(ones, 1) << "row " << row;
  }
  EXPECT_GT(hot_cols.size(), 6u);
}

// Ones per row and per column of each matrix of a batch.
void check_permutation(const std::vector<int64_t>& shape) {
  const TensorDesc d = TensorDesc::contiguous(DType::kF32, shape);
  const auto v = values_of(d, recipe(ValueClass::kPermutation, 11));
  const int64_t rows = shape[shape.size() - 2], cols = shape.back(), batch = d.numel() / (rows * cols);
  std::set<std::vector<double>> distinct;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int> per_col(static_cast<size_t>(cols), 0);
    std::vector<double> mat;
    for (int64_t i = 0; i < rows; ++i) {
      int ones = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double x = v[static_cast<size_t>((b * rows + i) * cols + j)];
        mat.push_back(x);
        ASSERT_TRUE(x == 0.0 || x == 1.0);
        ones += x == 1.0;
        per_col[static_cast<size_t>(j)] += x == 1.0;
      }
      if (rows <= cols)
        EXPECT_EQ(ones, 1) << "row " << i;
      else
        EXPECT_LE(ones, 1);
    }
    for (int c : per_col) {
      if (rows >= cols)
        EXPECT_EQ(c, 1);
      else
        EXPECT_LE(c, 1);
    }
    distinct.insert(mat);
  }
  if (batch > 1 && rows * cols > 4) {
    EXPECT_GT(distinct.size(), 1u) << "every matrix of the batch the same";
  }
}

TEST(ValueClass, PermutationMatricesArePermutations) {
  check_permutation({4, 6, 6});
  check_permutation({4, 9});
  check_permutation({9, 4});
  check_permutation({1, 1});
  check_permutation({2, 1000, 1000 + 3});
  check_permutation({3, 37, 37});
}

TEST(ValueClass, DeterministicAndLayoutIndependent) {
  const TensorDesc dense = TensorDesc::contiguous(DType::kBF16, {6, 10});
  TensorDesc padded = dense;
  padded.strides = {13, 1};
  padded.offset = 5;
  for (ValueClass c : kAllValueClasses) {
    ValueRecipe r = recipe(c, 0xabc);
    r.inject = {kSpecialNaN | kSpecialNegZero, 0.1, kAtFirst | kAtTile, 4};
    const auto a = values_of(dense, r), b = values_of(padded, r), again = values_of(dense, r);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      // Bitwise equal, NaN included.
      EXPECT_EQ(std::memcmp(&a[i], &b[i], 8), 0) << value_class_name(c) << " " << i;
      EXPECT_EQ(std::memcmp(&a[i], &again[i], 8), 0) << value_class_name(c) << " " << i;
      // recipe_value gives the element directly, before rounding.
      double direct = recipe_value(r, dense, 1, i);
      unsigned char tmp[8];
      store_as(DType::kBF16, direct, tmp);
      direct = load_as_double(DType::kBF16, tmp);
      EXPECT_EQ(std::memcmp(&direct, &a[i], 8), 0) << value_class_name(c) << " " << i;
    }
  }
  // The dtype overload agrees with the desc overload where the shape does not matter.
  const ValueRecipe r = recipe(ValueClass::kNearOverflow);
  for (uint64_t i = 0; i < 100; ++i)
    EXPECT_EQ(recipe_value(r, DType::kF16, 3, i), recipe_value(r, TensorDesc::contiguous(DType::kF16, {100}), 3, i));
  EXPECT_EQ(recipe_value(r, 3, 5), recipe_value(r, DType::kF32, 3, 5));
}

// ---- injection ------------------------------------------------------------------

TEST(Injection, StructuredPositionsGetTheirSpecial) {
  const TensorDesc d = TensorDesc::contiguous(DType::kF32, {10, 12});
  ValueRecipe r = recipe(ValueClass::kSameSign);  // positive, so -0 and -Inf stand out
  r.inject = {kSpecialNaN, 0, kAtFirst, 0};
  auto v = values_of(d, r);
  EXPECT_TRUE(std::isnan(v[0]));
  for (size_t i = 1; i < v.size(); ++i) EXPECT_GT(v[i], 0.0) << i;

  r.inject = {kSpecialPosInf, 0, kAtLast, 0};
  v = values_of(d, r);
  EXPECT_EQ(v.back(), INFINITY);
  for (size_t i = 0; i + 1 < v.size(); ++i) EXPECT_TRUE(std::isfinite(v[i])) << i;

  r.inject = {kSpecialNegInf, 0, kAtFirst | kAtLast, 0};
  v = values_of(d, r);
  EXPECT_EQ(v.front(), -INFINITY);
  EXPECT_EQ(v.back(), -INFINITY);

  // Tile edges: row or column index i with i % 4 in {0, 3}.
  r.inject = {kSpecialNegZero, 0, kAtTile, 4};
  v = values_of(d, r);
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 12; ++j) {
      const double x = v[static_cast<size_t>(i * 12 + j)];
      const bool edge = i % 4 == 0 || i % 4 == 3 || j % 4 == 0 || j % 4 == 3;
      if (edge) {
        EXPECT_TRUE(x == 0.0 && std::signbit(x)) << i << "," << j;
      } else {
        EXPECT_GT(x, 0.0) << i << "," << j;
      }
    }
  }
  // Rank 1: columns only. Rank 3: batch ignored, rows and columns per matrix.
  const auto v1 = values_of(TensorDesc::contiguous(DType::kF32, {10}), r);
  for (int j = 0; j < 10; ++j) EXPECT_EQ(std::signbit(v1[static_cast<size_t>(j)]), j % 4 == 0 || j % 4 == 3) << j;
  const auto v3 = values_of(TensorDesc::contiguous(DType::kF32, {2, 5, 5}), r);
  EXPECT_FALSE(std::signbit(v3[25 + 1 * 5 + 1]));  // [1, 1, 1]
  EXPECT_TRUE(std::signbit(v3[25 + 0 * 5 + 1]));   // [1, 0, 1]: row 0 of matrix 1
}

TEST(Injection, RandomRateHitsAboutThatShareWithEveryKind) {
  const TensorDesc d = TensorDesc::contiguous(DType::kF32, {100, 100});
  ValueRecipe plain = recipe(ValueClass::kUniform);
  ValueRecipe r = plain;
  r.inject = {kSpecialAll, 0.1, 0, 0};
  const auto v = values_of(d, r), base = values_of(d, plain);
  int nan = 0, pinf = 0, ninf = 0, nzero = 0, changed = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    nan += std::isnan(x);
    pinf += x == INFINITY;
    ninf += x == -INFINITY;
    nzero += x == 0.0 && std::signbit(x);
    if (std::memcmp(&x, &base[i], 8) != 0) ++changed;
  }
  EXPECT_GT(changed, 850);
  EXPECT_LT(changed, 1150);
  EXPECT_EQ(changed, nan + pinf + ninf + nzero);  // untouched elements keep their value
  for (int k : {nan, pinf, ninf, nzero}) EXPECT_GT(k, 150);
  // Rate 1: every element; rate 0 with positions: only those.
  r.inject.rate = 1;
  for (double x : values_of(d, r)) EXPECT_FALSE(std::isfinite(x) && !(x == 0.0 && std::signbit(x)));
}

TEST(Injection, NarrowFormatsKeepWhatTheyCan) {
  ValueRecipe r = recipe(ValueClass::kNormal);
  r.inject = {kSpecialNegInf, 0, kAtFirst, 0};
  EXPECT_EQ(values_of(TensorDesc::contiguous(DType::kF16, {4}), r)[0], -INFINITY);
  EXPECT_EQ(values_of(TensorDesc::contiguous(DType::kBF16, {4}), r)[0], -INFINITY);
  EXPECT_TRUE(std::isnan(values_of(TensorDesc::contiguous(DType::kE4M3, {4}), r)[0]));  // no Inf in e4m3
  r.inject.kinds = kSpecialNegZero;
  const double z = values_of(TensorDesc::contiguous(DType::kE5M2, {4}), r)[0];
  EXPECT_TRUE(z == 0.0 && std::signbit(z));
}

TEST(Injection, ValidateRejectsHalfSpecifiedOrOutOfRange) {
  struct Bad {
    std::function<void(ValueRecipe&)> edit;
    const char* field;
  };
  const std::vector<Bad> bad = {
      {[](ValueRecipe& r) { r.inject.rate = 0.5; }, ".inject.kinds"},
      {[](ValueRecipe& r) { r.inject.kinds = kSpecialNaN; }, ".inject:"},
      {[](ValueRecipe& r) {
         r.inject = {kSpecialNaN, 1.5, 0, 0};
       },
       ".inject.rate"},
      {[](ValueRecipe& r) {
         r.inject = {kSpecialNaN, 0, kAtTile, 0};
       },
       ".inject.tile"},
      {[](ValueRecipe& r) {
         r.inject = {0x30, 0.5, 0, 0};
       },
       ".inject.kinds"},
      {[](ValueRecipe& r) { r.exp_max = -9; }, ".exp_max"},
      {[](ValueRecipe& r) { r.exp_min = -5000; }, ".exp_min"},
      {[](ValueRecipe& r) { r.pareto_alpha = 0; }, ".pareto_alpha"},
      {[](ValueRecipe& r) { r.spread = -1; }, ".spread"},
      {[](ValueRecipe& r) { r.mean = NAN; }, ".mean"},
      {[](ValueRecipe& r) { r.overflow_factor = 0.5; }, ".overflow_factor"},
  };
  EXPECT_TRUE(validate_recipe(ValueRecipe{}, "r").ok());
  for (const auto& b : bad) {
    ValueRecipe r;
    b.edit(r);
    const Status s = validate_recipe(r, "r");
    ASSERT_FALSE(s.ok()) << b.field;
    EXPECT_NE(s.message().find(b.field), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
  }
}

// ---- case JSON -------------------------------------------------------------------------

Case one_tensor_case(const ValueRecipe& r) {
  Case c;
  c.op = "ew";
  TensorSpec t;
  t.name = "X";
  t.role = Role::kIn;
  t.desc = TensorDesc::contiguous(DType::kF16, {4, 8});
  t.values = r;
  c.tensors.push_back(t);
  return c;
}

TEST(CaseJsonRecipe, DefaultsWriteNoNewFields) {
  for (ValueClass cls : kAllValueClasses) {
    const Case c = one_tensor_case(recipe(cls));
    const nlohmann::json v = c.to_json()["tensors"][0]["values"];
    EXPECT_EQ(v.size(), 4u) << v.dump();  // class, seed, scale, int_range
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->tensors[0].values, c.tensors[0].values);
  }
}

TEST(CaseJsonRecipe, NewFieldsRoundTrip) {
  ValueRecipe r = recipe(ValueClass::kLogUniform, 0xfeed);
  r.exp_min = -30;
  r.exp_max = 5;
  r.pareto_alpha = 0.75;
  r.mean = -2.5e5;
  r.spread = 0.125;
  r.overflow_factor = 1.5;
  r.inject = {kSpecialNaN | kSpecialNegZero, 0.015625, kAtLast | kAtTile, 16};
  const Case c = one_tensor_case(r);
  const nlohmann::json j = c.to_json();
  const auto& v = j["tensors"][0]["values"];
  EXPECT_EQ(v["exp_min"], -30);
  EXPECT_EQ(v["exp_max"], 5);
  EXPECT_EQ(v["pareto_alpha"], 0.75);
  EXPECT_EQ(v["mean"], -2.5e5);
  EXPECT_EQ(v["spread"], 0.125);
  EXPECT_EQ(v["overflow_factor"], 1.5);
  EXPECT_EQ(v["inject"]["kinds"], nlohmann::json({"nan", "-0"}));
  EXPECT_EQ(v["inject"]["at"], nlohmann::json({"last", "tile"}));
  EXPECT_EQ(v["inject"]["rate"], 0.015625);
  EXPECT_EQ(v["inject"]["tile"], 16);
  auto back = Case::from_json(nlohmann::json::parse(j.dump()), "x.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->tensors[0].values, r);
  EXPECT_EQ(back->id(), c.id());
  // A changed field changes the id; only-rate injections omit "at" and "tile".
  ValueRecipe r2 = r;
  r2.inject = {kSpecialPosInf, 0.5, 0, 0};
  const auto j2 = one_tensor_case(r2).to_json()["tensors"][0]["values"]["inject"];
  EXPECT_EQ(j2, nlohmann::json({{"kinds", {"+inf"}}, {"rate", 0.5}}));
  EXPECT_NE(one_tensor_case(r2).id(), c.id());
  EXPECT_NE(c.summary().find("log_uniform"), std::string::npos);
}

TEST(CaseJsonRecipe, BadNewFieldsGiveOneLineErrors) {
  struct Hostile {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* expect;
  };
  ValueRecipe r = recipe(ValueClass::kNormal);
  r.inject = {kSpecialNaN, 0.25, 0, 0};
  const std::vector<Hostile> cases = {
      {"exp_min float", [](auto& v) { v["exp_min"] = 1.5; }, "values.exp_min: expected an integer"},
      {"exp_max below",
       [](auto& v) {
         v["exp_min"] = 3;
         v["exp_max"] = 2;
       },
       "values.exp_max: 2 is below exp_min 3"},
      {"exp huge", [](auto& v) { v["exp_max"] = 5000; }, "values.exp_max: 5000 is out of range"},
      {"alpha string", [](auto& v) { v["pareto_alpha"] = "1"; }, "values.pareto_alpha: expected a number"},
      {"alpha zero", [](auto& v) { v["pareto_alpha"] = 0; }, "values.pareto_alpha: must be in"},
      {"spread negative", [](auto& v) { v["spread"] = -1; }, "values.spread: must be finite and >= 0"},
      {"mean huge", [](auto& v) { v["mean"] = 1e308; }, "values.mean: must be finite"},
      {"factor below 1", [](auto& v) { v["overflow_factor"] = 0.5; },
       "values.overflow_factor: must be finite and >= 1"},
      {"inject not object", [](auto& v) { v["inject"] = 3; }, "values.inject: expected an object"},
      {"kinds missing", [](auto& v) { v["inject"].erase("kinds"); }, "values.inject.kinds: missing"},
      {"kinds not array", [](auto& v) { v["inject"]["kinds"] = "nan"; }, "values.inject.kinds: expected an array"},
      {"unknown kind", [](auto& v) { v["inject"]["kinds"] = {"inf"}; }, "values.inject.kinds[0]: unknown name 'inf'"},
      {"empty kinds", [](auto& v) { v["inject"]["kinds"] = nlohmann::json::array(); }, "values.inject.kinds: empty"},
      {"rate above 1", [](auto& v) { v["inject"]["rate"] = 2; }, "values.inject.rate: must be in [0, 1]"},
      {"unknown at", [](auto& v) { v["inject"]["at"] = {"middle"}; }, "values.inject.at[0]: unknown name 'middle'"},
      {"tile without size", [](auto& v) { v["inject"]["at"] = {"tile"}; }, "values.inject.tile: must be >= 1"},
      {"tile negative", [](auto& v) { v["inject"]["tile"] = -4; }, "values.inject.tile: -4 is out of range"},
      {"nothing to do", [](auto& v) { v["inject"].erase("rate"); }, "values.inject: kinds set, but neither"},
  };
  for (const auto& h : cases) {
    nlohmann::json j = one_tensor_case(r).to_json();
    h.edit(j["tensors"][0]["values"]);
    auto back = Case::from_json(j, "x.json");
    ASSERT_FALSE(back.ok()) << h.what;
    const std::string msg = back.status().message();
    EXPECT_NE(msg.find(h.expect), std::string::npos) << h.what << ": " << msg;
    EXPECT_EQ(msg.rfind("x.json: $.tensors[0].values", 0), 0u) << h.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << h.what;
  }
}

}  // namespace
}  // namespace assay
