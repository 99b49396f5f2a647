// Generators: every value class, layout and edge extent shows up within a
// bounded number of draws, generated things are valid, layouts build the
// TensorDesc they claim, and shrinking ends at the simplest choice.
#include "harness/generators.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

namespace assay {
namespace {

constexpr int kDraws = 2000;

template <typename T>
std::vector<T> draw(const rc::Gen<T>& g, int n = kDraws, uint64_t seed = 1) {
  rc::Random random(seed);
  std::vector<T> out;
  for (int i = 0; i < n; ++i) out.push_back(g(random.split(), rc::kNominalSize).value());
  return out;
}

// Greedy shrinking as RapidCheck does it: take the first shrink that still
// satisfies `keep`, until none does.
template <typename T>
T minimise(rc::Shrinkable<T> s, const std::function<bool(const T&)>& keep) {
  for (int steps = 0; steps < 10000; ++steps) {
    auto shrinks = s.shrinks();
    bool moved = false;
    while (auto next = shrinks.next()) {
      if (keep(next->value())) {
        s = *next;
        moved = true;
        break;
      }
    }
    if (!moved) break;
  }
  return s.value();
}

// The first draw (by seed) that satisfies `want`, as a shrinkable.
template <typename T>
rc::Shrinkable<T> find_draw(const rc::Gen<T>& g, const std::function<bool(const T&)>& want) {
  rc::Random random(7);
  for (int i = 0; i < 100000; ++i) {
    auto s = g(random.split(), rc::kNominalSize);
    if (want(s.value())) return s;
  }
  throw std::runtime_error("no draw satisfies the predicate");
}

std::vector<ValueClass> all_classes() {
  return {std::begin(kAllValueClasses), std::end(kAllValueClasses)};
}

TEST(GenValueRecipe, EveryClassAppearsAndRecipesAreValid) {
  for (DType t : kAllDTypes) {
    RecipeOptions opt;
    opt.classes = all_classes();
    opt.dtype = t;
    opt.specials = kSpecialAll;
    opt.tile = 16;
    std::map<ValueClass, int> seen;
    int injected = 0;
    std::set<uint64_t> seeds;
    for (const ValueRecipe& r : draw(gen_value_recipe(opt))) {
      ++seen[r.cls];
      injected += r.inject.active();
      seeds.insert(r.seed);
      const Status s = validate_recipe(r, "r");
      ASSERT_TRUE(s.ok()) << s.message();
    }
    for (ValueClass c : kAllValueClasses) EXPECT_GT(seen[c], 0) << value_class_name(c) << " " << dtype_name(t);
    EXPECT_GT(injected, kDraws / 8);
    EXPECT_LT(injected, kDraws / 2);
    EXPECT_GT(seeds.size(), kDraws * 9 / 10u);
  }
}

TEST(GenValueRecipe, OnlyAllowedClassesAndParametersKeepValuesFinite) {
  RecipeOptions opt;
  opt.classes = {ValueClass::kNormal, ValueClass::kSmallInt, ValueClass::kLogUniform, ValueClass::kMeanSpread};
  opt.dtype = DType::kF16;
  for (const ValueRecipe& r : draw(gen_value_recipe(opt), 500)) {
    ASSERT_TRUE(r.cls == ValueClass::kNormal || r.cls == ValueClass::kSmallInt || r.cls == ValueClass::kLogUniform ||
                r.cls == ValueClass::kMeanSpread);
    EXPECT_FALSE(r.inject.active());
    const TensorDesc d = TensorDesc::contiguous(DType::kF16, {256});
    std::vector<uint16_t> buf(256);
    materialize(d, r, 3, buf.data());
    for (uint16_t b : buf) {
      const double x = load_as_double(DType::kF16, &b);
      ASSERT_TRUE(std::isfinite(x)) << value_class_name(r.cls);
      if (r.cls == ValueClass::kSmallInt) {
        ASSERT_EQ(x, std::round(x));
      }
    }
  }
}

TEST(GenValueRecipe, InjectionsUseOnlyTheAllowedSpecials) {
  std::set<uint8_t> at_seen;
  for (const SpecialInjection& in : draw(gen_injection(kSpecialNaN | kSpecialNegZero, 32))) {
    EXPECT_TRUE(in.active());
    EXPECT_EQ(in.kinds & ~(kSpecialNaN | kSpecialNegZero), 0);
    EXPECT_EQ(in.tile != 0, (in.at & kAtTile) != 0);
    if (in.tile != 0) {
      EXPECT_EQ(in.tile, 32);
    }
    EXPECT_GE(in.rate, 0.0);
    EXPECT_LE(in.rate, 1.0);
    at_seen.insert(in.at);
    ValueRecipe r;
    r.inject = in;
    EXPECT_TRUE(validate_recipe(r, "r").ok());
  }
  EXPECT_TRUE(at_seen.count(kAtFirst) && at_seen.count(kAtLast) && at_seen.count(kAtTile) && at_seen.count(0));
  for (const SpecialInjection& in : draw(gen_injection(kSpecialAll, 0), 300)) EXPECT_EQ(in.at & kAtTile, 0);
}

TEST(GenValueRecipe, ShrinksTowardSimplerRecipes) {
  RecipeOptions opt;
  opt.classes = {ValueClass::kPareto, ValueClass::kSubnormal, ValueClass::kSmallInt, ValueClass::kNaN};
  opt.specials = kSpecialPosInf | kSpecialNaN;
  opt.tile = 8;
  opt.inject_percent = 50;
  const auto g = gen_value_recipe(opt);
  // Anything shrinks to the simplest allowed class, no injection, seed 0.
  auto complex = find_draw<ValueRecipe>(
      g, [](const ValueRecipe& r) { return r.cls == ValueClass::kNaN && r.inject.active() && r.seed != 0; });
  const ValueRecipe simplest = minimise<ValueRecipe>(complex, [](const ValueRecipe&) { return true; });
  EXPECT_EQ(simplest.cls, ValueClass::kSmallInt);
  EXPECT_EQ(simplest.int_range, 2);
  EXPECT_FALSE(simplest.inject.active());
  EXPECT_EQ(simplest.seed, 0u);
  // A failure that needs a Pareto recipe with an injection keeps both, with
  // the fewest specials: one NaN at the first element.
  auto pareto_draw = find_draw<ValueRecipe>(g, [](const ValueRecipe& r) {
    return r.cls == ValueClass::kPareto && r.pareto_alpha != 1.5 && r.inject.kinds == (kSpecialPosInf | kSpecialNaN) &&
           r.inject.rate > 0;
  });
  const ValueRecipe pareto = minimise<ValueRecipe>(
      pareto_draw, [](const ValueRecipe& r) { return r.cls == ValueClass::kPareto && r.inject.active(); });
  EXPECT_EQ(pareto.cls, ValueClass::kPareto);
  EXPECT_EQ(pareto.pareto_alpha, 1.5);
  EXPECT_EQ(pareto.inject, (SpecialInjection{kSpecialNaN, 0, kAtFirst, 0}));
  EXPECT_EQ(pareto.seed, 0u);
  // The shrink order itself: the first candidate is the simplest class.
  auto first = complex.shrinks().next();
  ASSERT_TRUE(static_cast<bool>(first));
  EXPECT_EQ(first->value().cls, ValueClass::kSmallInt);
  EXPECT_LT(value_class_rank(ValueClass::kNormal), value_class_rank(ValueClass::kUniform));
  EXPECT_LT(value_class_rank(ValueClass::kSmallInt), value_class_rank(ValueClass::kPareto));
}

TEST(GenExtent, EdgeValuesAppear) {
  const std::vector<int64_t> tiles = {32, 48};
  const auto xs = draw(gen_extent(4096, tiles));
  const std::set<int64_t> seen(xs.begin(), xs.end());
  for (int64_t x : xs) {
    ASSERT_GE(x, 0);
    ASSERT_LE(x, 4096);
  }
  for (int64_t want : {0, 1, 2, 3, 31, 32, 33, 47, 48, 49, 63, 64, 65, 127, 4095, 4096})
    EXPECT_TRUE(seen.count(want)) << want;
  EXPECT_TRUE(seen.count(509) || seen.count(1021) || seen.count(2039)) << "no large prime";
  EXPECT_GT(*std::max_element(xs.begin(), xs.end()), 2048);
  // Odd sizes in the middle of the range too (the uniform part).
  EXPECT_GT(seen.size(), 200u);
  // A minimum is honoured.
  for (int64_t x : draw(gen_extent(100, {}, 5), 500)) EXPECT_GE(x, 5);
}

TEST(GenExtent, EdgeListIsSortedAndBounded) {
  const auto e = edge_extents(300, {64}, 1);
  EXPECT_TRUE(std::is_sorted(e.begin(), e.end()));
  EXPECT_EQ(std::adjacent_find(e.begin(), e.end()), e.end());
  EXPECT_EQ(e.front(), 1);
  EXPECT_EQ(e.back(), 300);
  for (int64_t want : {2, 63, 64, 65, 127, 128, 129, 192, 251, 257, 299}) {
    EXPECT_TRUE(std::binary_search(e.begin(), e.end(), want)) << want;
  }
  EXPECT_EQ(edge_extents(0), std::vector<int64_t>{0});
}

TEST(GenExtent, ShrinksToSmallEdges) {
  const auto g = gen_extent(100000, {64});
  auto big = find_draw<int64_t>(g, [](int64_t x) { return x > 5000; });
  EXPECT_EQ(minimise<int64_t>(big, [](int64_t) { return true; }), 0);
  const int64_t at_least_100 = minimise<int64_t>(big, [](int64_t x) { return x >= 100; });
  EXPECT_GE(at_least_100, 100);
  EXPECT_LE(at_least_100, 127);
}

TEST(GenShape, PreconditionsFilter) {
  const auto g = shapes_where(gen_shape(3, 512, {16}, 1), [](const std::vector<int64_t>& s) {
    return s[0] * s[1] * s[2] <= (int64_t{1} << 20) && s[2] % 2 == 0;
  });
  for (const auto& s : draw(g, 300)) {
    ASSERT_EQ(s.size(), 3u);
    EXPECT_LE(s[0] * s[1] * s[2], int64_t{1} << 20);
    EXPECT_EQ(s[2] % 2, 0);
    for (int64_t e : s) EXPECT_GE(e, 1);
  }
}

TEST(GenLayout, EveryLayoutAppearsWhereItApplies) {
  std::map<LayoutKind, int> in3, out3, in1;
  for (const auto& l : draw(gen_layout(DType::kF16, 3, true))) ++in3[l.kind];
  for (const auto& l : draw(gen_layout(DType::kF16, 3, false))) ++out3[l.kind];
  for (const auto& l : draw(gen_layout(DType::kF32, 1, true), 500)) ++in1[l.kind];
  for (LayoutKind k : kAllLayoutKinds) EXPECT_GT(in3[k], 0) << layout_kind_name(k);
  EXPECT_EQ(out3.count(LayoutKind::kBroadcast), 0u) << "outputs must not be broadcast";
  EXPECT_GT(out3[LayoutKind::kBatched], 0);
  for (LayoutKind k : {LayoutKind::kTransposed, LayoutKind::kPaddedLd, LayoutKind::kBatched})
    EXPECT_EQ(in1.count(k), 0u) << layout_kind_name(k) << " at rank 1";
  EXPECT_GT(in1[LayoutKind::kSliced], 0);
}

TEST(GenLayout, SlicedOffsetsMisalignByTwoToSixteenBytes) {
  for (DType t : kAllDTypes) {
    std::set<int64_t> bytes;
    for (const auto& l : draw(gen_layout(t, 2, true), 1000)) {
      if (l.kind != LayoutKind::kSliced) continue;
      const TensorDesc d = make_desc(t, {5, 7}, l);
      EXPECT_EQ(d.byte_alignment(), l.offset * static_cast<int64_t>(dtype_size(t)));
      bytes.insert(d.byte_alignment());
    }
    for (int64_t b : {2, 4, 8, 16}) {
      if (b >= static_cast<int64_t>(dtype_size(t))) {
        EXPECT_TRUE(bytes.count(b)) << dtype_name(t) << " " << b;
      }
    }
    EXPECT_TRUE(bytes.count(static_cast<int64_t>(dtype_size(t)))) << dtype_name(t);
  }
}

TEST(MakeDesc, EachKindGivesItsStrides) {
  const std::vector<int64_t> shape = {3, 4, 5};
  auto desc = [&](LayoutChoice l) { return make_desc(DType::kF32, shape, l); };
  EXPECT_EQ(desc({}).strides, (std::vector<int64_t>{20, 5, 1}));
  EXPECT_EQ(desc({LayoutKind::kTransposed}).strides, (std::vector<int64_t>{20, 1, 4}));
  EXPECT_EQ(desc({LayoutKind::kTransposed, 3}).strides, (std::vector<int64_t>{35, 1, 7}));
  EXPECT_EQ(desc({LayoutKind::kPaddedLd, 3}).strides, (std::vector<int64_t>{32, 8, 1}));
  EXPECT_EQ(desc({LayoutKind::kBroadcast, 0, 0, 1}).strides, (std::vector<int64_t>{5, 0, 1}));
  EXPECT_EQ(desc({LayoutKind::kBroadcast, 0, 0, 2}).strides, (std::vector<int64_t>{4, 1, 0}));
  EXPECT_EQ(desc({LayoutKind::kBatched, 2, 0, -1, 7}).strides, (std::vector<int64_t>{35, 7, 1}));
  const TensorDesc s = desc({LayoutKind::kSliced, 8, 3});
  EXPECT_EQ(s.strides, (std::vector<int64_t>{52, 13, 1}));
  EXPECT_EQ(s.offset, 3);
  EXPECT_EQ(make_desc(DType::kF32, {}, {LayoutKind::kSliced, 0, 2}).offset, 2);
  EXPECT_EQ(make_desc(DType::kF32, {0, 4}, {}).strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(describe({LayoutKind::kSliced, 8, 3}), "sliced(offset=3, pad=8)");
}

// Any generated shape and layout gives a valid desc whose materialised
// values sit at the logical positions recipe_value names.
RC_GTEST_PROP(MakeDesc, GeneratedLayoutsAreValidViews, ()) {
  const int rank = *rc::gen::inRange(0, 5);
  const DType dtype = *gen_element(std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)));
  const auto shape = *gen_shape(rank, 12, {4});
  const bool input = *rc::gen::arbitrary<bool>();
  const LayoutChoice l = *gen_layout(dtype, rank, input);
  const TensorDesc d = make_desc(dtype, shape, l);
  RC_ASSERT(d.validate("t").ok());
  RC_ASSERT(d.shape == shape);
  RC_ASSERT(d.has_overlap() ==
            (l.kind == LayoutKind::kBroadcast && d.numel() > 0 && shape[static_cast<size_t>(l.broadcast_dim)] > 1));
  if (!input) RC_ASSERT(l.kind != LayoutKind::kBroadcast);
  // A broadcast view holds one element for many indices (the last written
  // wins), so only views without overlap hold every logical value.
  if (d.has_overlap()) return;
  ValueRecipe r;
  r.cls = ValueClass::kSmallInt;
  r.seed = 5;
  std::vector<unsigned char> buf(static_cast<size_t>(d.extent()) * dtype_size(dtype));
  materialize(d, r, 1, buf.data());
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < d.numel(); ++i) {
    const double got = load_as_double(dtype, buf.data() + d.linear_index(idx) * dtype_size(dtype));
    RC_ASSERT(got == recipe_value(r, d, 1, static_cast<uint64_t>(i)));
    for (int64_t k = d.rank() - 1; k >= 0; --k) {
      if (++idx[static_cast<size_t>(k)] < shape[static_cast<size_t>(k)]) break;
      idx[static_cast<size_t>(k)] = 0;
    }
  }
}

TEST(GenLayout, ShrinksToContiguous) {
  const auto g = gen_layout(DType::kBF16, 3, true);
  auto sliced =
      find_draw<LayoutChoice>(g, [](const LayoutChoice& l) { return l.kind == LayoutKind::kSliced && l.pad > 0; });
  EXPECT_EQ(minimise<LayoutChoice>(sliced, [](const LayoutChoice&) { return true; }), LayoutChoice{});
  const LayoutChoice still_sliced =
      minimise<LayoutChoice>(sliced, [](const LayoutChoice& l) { return l.kind == LayoutKind::kSliced; });
  EXPECT_EQ(still_sliced.offset, 1);
  EXPECT_EQ(still_sliced.pad, 0);
}

}  // namespace
}  // namespace assay
