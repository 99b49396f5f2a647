#include "harness/generators.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace assay {
namespace {

/// Uniform in [lo, hi] (inclusive) whatever the size; shrinks toward lo.
template <typename T>
rc::Gen<T> gen_uniform(T lo, T hi) {
  return rc::Gen<T>([lo, hi](const rc::Random& random, int /*size*/) {
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    const uint64_t r = rc::Random(random).next();
    const T v = span == UINT64_MAX ? static_cast<T>(r) : static_cast<T>(lo + static_cast<T>(r % (span + 1)));
    return rc::shrinkable::shrinkRecur(v, [lo](T x) { return rc::shrink::towards<T>(x, lo); });
  });
}

}  // namespace

rc::Gen<int64_t> gen_int_uniform(int64_t lo, int64_t hi) {
  return gen_uniform<int64_t>(lo, hi);
}

namespace {

/// The full 64-bit range (seeds): uniform, shrinks toward 0.
rc::Gen<uint64_t> gen_seed() {
  return gen_uniform<uint64_t>(0, UINT64_MAX);
}

template <typename T, typename Pred>
std::vector<T> keep_if(std::vector<T> v, Pred pred, T fallback) {
  v.erase(std::remove_if(v.begin(), v.end(), [&](const T& x) { return !pred(x); }), v.end());
  if (v.empty()) v.push_back(fallback);
  return v;
}

ValueRecipe of_class(ValueClass c) {
  ValueRecipe r;
  r.cls = c;
  return r;
}

// Class parameters, simplest (default) first, bounded by the dtype so that
// most values are finite there; the fallback is the one entry left when the
// dtype is too narrow for all of them.
rc::Gen<ValueRecipe> class_params(ValueClass c, DType dtype, double max_abs) {
  const double mx = max_abs > 0 ? std::min(max_finite(dtype), max_abs) : max_finite(dtype);
  switch (c) {
    case ValueClass::kNormal:
    case ValueClass::kUniform:
    case ValueClass::kSameSign: {
      // 8 sigma fits: an N(0,1) draw beyond 8.3 needs ~2^53 tries.
      auto scales = keep_if<double>(
          {1, 0.5, 2, 1e-3, 1e3}, [&](double s) { return 8 * s <= mx; }, 1);
      return rc::gen::map(gen_element(std::move(scales)), [c](double s) {
        ValueRecipe r = of_class(c);
        r.scale = s;
        return r;
      });
    }
    case ValueClass::kSmallInt: {
      // Integers exact in the dtype: up to 1/u (2048 for fp16, 16 for e4m3).
      const double u = unit_roundoff(dtype);
      const double exact = u > 0 ? 1 / u : mx;
      auto ranges = keep_if<int64_t>(
          {2, 1, 3, 8, 64}, [&](int64_t k) { return k <= exact && k <= mx; }, 1);
      return rc::gen::map(gen_element(std::move(ranges)), [](int64_t k) {
        ValueRecipe r = of_class(ValueClass::kSmallInt);
        r.int_range = k;
        return r;
      });
    }
    case ValueClass::kLogUniform: {
      const int top = std::ilogb(mx);
      auto ranges = keep_if<std::pair<int64_t, int64_t>>({{-8, 8}, {-4, 4}, {-16, 16}, {-24, 24}, {-40, 40}, {-60, 60}},
                                                         [&](auto p) { return p.second <= top; }, {-2, 2});
      return rc::gen::map(gen_element(std::move(ranges)), [](std::pair<int64_t, int64_t> p) {
        ValueRecipe r = of_class(ValueClass::kLogUniform);
        r.exp_min = p.first;
        r.exp_max = p.second;
        return r;
      });
    }
    case ValueClass::kPareto: {
      // The 1 - 2^-20 quantile, x_m * 2^(20/alpha), stays below max.
      auto params = keep_if<std::pair<double, double>>(
          {{1.5, 1}, {3, 1}, {1.1, 1}, {0.7, 1}, {1.5, 1.0 / 64}},
          [&](auto p) { return std::log2(p.second) + 20 / p.first <= std::log2(mx); }, {3, 1.0 / 64});
      return rc::gen::map(gen_element(std::move(params)), [](std::pair<double, double> p) {
        ValueRecipe r = of_class(ValueClass::kPareto);
        r.pareto_alpha = p.first;
        r.scale = p.second;
        return r;
      });
    }
    case ValueClass::kMeanSpread: {
      auto params = keep_if<std::pair<double, double>>(
          {{1024, 1}, {100, 1}, {1e4, 1}, {-3000, 0.5}, {1e4, 1.0 / 64}, {1e6, 1}},
          [&](auto p) { return std::fabs(p.first) + p.second <= mx / 2; }, {16, 0.25});
      return rc::gen::map(gen_element(std::move(params)), [](std::pair<double, double> p) {
        ValueRecipe r = of_class(ValueClass::kMeanSpread);
        r.mean = p.first;
        r.spread = p.second;
        return r;
      });
    }
    case ValueClass::kNearOverflow:
      return rc::gen::map(gen_element<double>({4, 2, 1, 16, 1024}), [](double f) {
        ValueRecipe r = of_class(ValueClass::kNearOverflow);
        r.overflow_factor = f;
        return r;
      });
    case ValueClass::kNaN:
    case ValueClass::kSubnormal:
    case ValueClass::kSignedZero:
    case ValueClass::kOneHot:
    case ValueClass::kPermutation:
      break;
  }
  return rc::gen::just(of_class(c));
}

}  // namespace

rc::Gen<size_t> gen_weighted_index(std::vector<size_t> weights) {
  const size_t total = std::accumulate(weights.begin(), weights.end(), size_t{0});
  return rc::Gen<size_t>([weights = std::move(weights), total](const rc::Random& random, int /*size*/) {
    if (total == 0) throw rc::GenerationFailure("gen_weighted_index: weights sum to 0");
    uint64_t x = rc::Random(random).next() % total;
    size_t i = 0;
    while (x >= weights[i]) x -= weights[i++];
    return rc::shrinkable::shrinkRecur(i, [](size_t v) { return rc::shrink::towards<size_t>(v, 0); });
  });
}

int value_class_rank(ValueClass c) {
  switch (c) {
    case ValueClass::kNormal:
      return 0;
    case ValueClass::kSmallInt:
      return 1;
    case ValueClass::kUniform:
      return 2;
    case ValueClass::kSameSign:
      return 3;
    case ValueClass::kSignedZero:
      return 4;
    case ValueClass::kOneHot:
      return 5;
    case ValueClass::kPermutation:
      return 6;
    case ValueClass::kMeanSpread:
      return 7;
    case ValueClass::kLogUniform:
      return 8;
    case ValueClass::kPareto:
      return 9;
    case ValueClass::kSubnormal:
      return 10;
    case ValueClass::kNearOverflow:
      return 11;
    case ValueClass::kNaN:
      return 12;
  }
  return 99;
}

rc::Gen<SpecialInjection> gen_injection(uint8_t specials, int64_t tile) {
  specials &= kSpecialAll;
  if (specials == 0) specials = kSpecialNaN;
  // Kinds: each single special, lowest first, then all of them together.
  std::vector<uint8_t> kinds;
  for (uint8_t b = 1; b <= kSpecialAll; b = static_cast<uint8_t>(b << 1))
    if ((specials & b) != 0) kinds.push_back(b);
  if (kinds.size() > 1) kinds.push_back(specials);
  // Placements, fewest specials first.
  struct Placement {
    uint8_t at;
    bool random;
  };
  std::vector<Placement> places = {{kAtFirst, false}, {kAtLast, false}, {kAtFirst | kAtLast, false}};
  if (tile > 0) places.push_back({kAtTile, false});
  places.push_back({0, true});
  places.push_back({static_cast<uint8_t>(kAtFirst | kAtLast | (tile > 0 ? kAtTile : 0)), true});
  auto placed = rc::gen::mapcat(gen_element(std::move(places)), [tile](Placement p) {
    SpecialInjection in;
    in.at = p.at;
    in.tile = (p.at & kAtTile) != 0 ? tile : 0;
    if (!p.random) return rc::gen::just(in);
    return rc::gen::map(gen_element<double>({1.0 / 1024, 1.0 / 64, 1.0 / 8, 0.5}), [in](double rate) {
      SpecialInjection r = in;
      r.rate = rate;
      return r;
    });
  });
  return rc::gen::apply(
      [](uint8_t k, SpecialInjection in) {
        in.kinds = k;
        return in;
      },
      gen_element(std::move(kinds)), std::move(placed));
}

rc::Gen<ValueRecipe> gen_value_recipe(RecipeOptions opt) {
  std::vector<ValueClass> classes = opt.classes;
  if (classes.empty()) classes.push_back(ValueClass::kNormal);
  std::sort(classes.begin(), classes.end(),
            [](ValueClass a, ValueClass b) { return value_class_rank(a) < value_class_rank(b); });
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  const DType dtype = opt.dtype;
  const double max_abs = opt.max_abs;
  auto base = rc::gen::mapcat(gen_element(std::move(classes)),
                              [dtype, max_abs](ValueClass c) { return class_params(c, dtype, max_abs); });
  rc::Gen<SpecialInjection> inject = rc::gen::just(SpecialInjection{});
  const size_t p = static_cast<size_t>(std::clamp(opt.inject_percent, 0, 100));
  if ((opt.specials & kSpecialAll) != 0 && p > 0) {
    inject = rc::gen::mapcat(gen_weighted_index({100 - p, p}), [s = opt.specials, t = opt.tile](size_t i) {
      return i == 0 ? rc::gen::just(SpecialInjection{}) : gen_injection(s, t);
    });
  }
  return rc::gen::apply(
      [](ValueRecipe r, uint64_t seed, SpecialInjection in) {
        r.seed = seed;
        r.inject = in;
        return r;
      },
      std::move(base), gen_seed(), std::move(inject));
}

rc::Gen<ValueRecipe> gen_value_recipe(std::vector<ValueClass> classes) {
  RecipeOptions opt;
  opt.classes = std::move(classes);
  return gen_value_recipe(std::move(opt));
}

std::vector<int64_t> edge_extents(int64_t max, const std::vector<int64_t>& tiles, int64_t min) {
  // Primes: small ones, then the largest below each power of two (no
  // power-of-two factor at all, so every tile size leaves a tail).
  std::vector<int64_t> v = {0,    1,    2,     3,     5,     7,      11,     13,     17,      31,        37,
                            61,   67,   97,    127,   131,   251,    257,    509,    521,     1021,      2039,
                            4093, 8191, 16381, 32749, 65521, 131071, 262139, 524287, 1048573, 2147483647};
  for (int k = 2; k <= 40; ++k) {
    const int64_t p = int64_t{1} << k;
    v.insert(v.end(), {p - 1, p, p + 1});
  }
  for (int64_t t : tiles) {
    if (t <= 0) continue;
    v.insert(v.end(), {t - 1, t, t + 1, 2 * t - 1, 2 * t, 2 * t + 1, 3 * t});
  }
  v.insert(v.end(), {max - 1, max});
  v = keep_if<int64_t>(
      std::move(v), [&](int64_t x) { return x >= min && x <= max; }, min);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

rc::Gen<int64_t> gen_extent(int64_t max, std::vector<int64_t> tiles, int64_t min) {
  min = std::max<int64_t>(min, 0);
  max = std::max(max, min);
  std::vector<int64_t> edges = edge_extents(max, tiles, min);
  const int64_t small_hi = std::min(max, min + 64);
  return rc::gen::mapcat(gen_weighted_index({6, 3, 1}), [edges = std::move(edges), min, max, small_hi](size_t i) {
    if (i == 0) return gen_element(edges);
    if (i == 1) return gen_uniform<int64_t>(min, small_hi);
    return gen_uniform<int64_t>(min, max);
  });
}

rc::Gen<std::vector<int64_t>> gen_shape(int rank, int64_t max, std::vector<int64_t> tiles, int64_t min) {
  return rc::gen::container<std::vector<int64_t>>(static_cast<size_t>(std::max(rank, 0)),
                                                  gen_extent(max, std::move(tiles), min));
}

std::string_view layout_kind_name(LayoutKind k) {
  switch (k) {
    case LayoutKind::kContiguous:
      return "contiguous";
    case LayoutKind::kTransposed:
      return "transposed";
    case LayoutKind::kPaddedLd:
      return "padded_ld";
    case LayoutKind::kBroadcast:
      return "broadcast";
    case LayoutKind::kSliced:
      return "sliced";
    case LayoutKind::kBatched:
      return "batched";
  }
  return "?";
}

std::string describe(const LayoutChoice& l) {
  std::string s(layout_kind_name(l.kind));
  std::vector<std::string> knobs;
  if (l.offset != 0) knobs.push_back(fmt::format("offset={}", l.offset));
  if (l.pad != 0) knobs.push_back(fmt::format("pad={}", l.pad));
  if (l.broadcast_dim >= 0) knobs.push_back(fmt::format("dim={}", l.broadcast_dim));
  if (l.batch_gap != 0) knobs.push_back(fmt::format("batch_gap={}", l.batch_gap));
  if (!knobs.empty()) s += "(" + fmt::format("{}", fmt::join(knobs, ", ")) + ")";
  return s;
}

rc::Gen<LayoutChoice> gen_layout(DType dtype, int rank, bool input) {
  std::vector<LayoutKind> kinds = {LayoutKind::kContiguous};
  if (rank >= 2) kinds.insert(kinds.end(), {LayoutKind::kTransposed, LayoutKind::kPaddedLd});
  if (input && rank >= 1) kinds.push_back(LayoutKind::kBroadcast);
  kinds.push_back(LayoutKind::kSliced);
  if (rank >= 3) kinds.push_back(LayoutKind::kBatched);
  // Misalignments of the base address, in elements: 2, 4, 8, 16 bytes where
  // the element size divides them, and one element (e.g. 1 byte for fp8).
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  std::vector<int64_t> offsets = {1};
  for (int64_t bytes : {2, 4, 8, 16})
    if (bytes > es && bytes % es == 0) offsets.push_back(bytes / es);
  const std::vector<int64_t> slice_pads = rank >= 2 ? std::vector<int64_t>{0, 1, 8, 32} : std::vector<int64_t>{0};

  return rc::gen::mapcat(gen_element(std::move(kinds)), [rank, offsets, slice_pads](LayoutKind k) {
    LayoutChoice base;
    base.kind = k;
    auto with = [base](std::vector<int64_t> vals, int64_t LayoutChoice::*field) {
      return rc::gen::map(gen_element(std::move(vals)), [base, field](int64_t x) {
        LayoutChoice l = base;
        l.*field = x;
        return l;
      });
    };
    switch (k) {
      case LayoutKind::kContiguous:
        break;
      case LayoutKind::kTransposed:
        return with({0, 1, 3, 16}, &LayoutChoice::pad);
      case LayoutKind::kPaddedLd:
        return with({1, 3, 4, 16, 33}, &LayoutChoice::pad);
      case LayoutKind::kBroadcast: {
        std::vector<int> dims(static_cast<size_t>(rank));
        std::iota(dims.begin(), dims.end(), 0);
        return rc::gen::map(gen_element(std::move(dims)), [base](int d) {
          LayoutChoice l = base;
          l.broadcast_dim = d;
          return l;
        });
      }
      case LayoutKind::kSliced:
        return rc::gen::apply(
            [base](int64_t off, int64_t pad) {
              LayoutChoice l = base;
              l.offset = off;
              l.pad = pad;
              return l;
            },
            gen_element(offsets), gen_element(slice_pads));
      case LayoutKind::kBatched:
        return rc::gen::apply(
            [base](int64_t gap, int64_t pad) {
              LayoutChoice l = base;
              l.batch_gap = gap;
              l.pad = pad;
              return l;
            },
            gen_element<int64_t>({1, 7, 32}), gen_element<int64_t>({0, 2}));
    }
    return rc::gen::just(base);
  });
}

TensorDesc make_desc(DType dtype, const std::vector<int64_t>& shape, const LayoutChoice& layout) {
  TensorDesc t;
  t.dtype = dtype;
  t.shape = shape;
  t.offset = std::max<int64_t>(layout.offset, 0);
  const int rank = static_cast<int>(shape.size());
  t.strides.assign(shape.size(), 0);
  // Memory order, innermost first.
  std::vector<int> order;
  for (int d = rank - 1; d >= 0; --d) order.push_back(d);
  if (layout.kind == LayoutKind::kTransposed && rank >= 2) std::swap(order[0], order[1]);
  int64_t s = 1;
  int placed = 0;  // dims laid out so far (broadcast dims excluded)
  for (int d : order) {
    if (d == layout.broadcast_dim) continue;  // stride 0, takes no room
    t.strides[static_cast<size_t>(d)] = s;
    // max(extent, 1) as TensorDesc::contiguous does: an empty dim must not
    // zero the outer strides (they would look like broadcasts).
    s *= std::max<int64_t>(shape[static_cast<size_t>(d)], 1);
    ++placed;
    if (placed == 1 && rank >= 2) s += std::max<int64_t>(layout.pad, 0);        // leading dimension
    if (placed == 2 && rank >= 3) s += std::max<int64_t>(layout.batch_gap, 0);  // batch stride
  }
  return t;
}

}  // namespace assay
