// Shrinkable RapidCheck generators that every op spec composes: value
// recipes, edge-biased extents and shapes, and memory layouts (with the
// TensorDesc they give for a logical shape).
//
// Shrinking. Every choice here is "uniform over a list, shrinking toward its
// first entry", and the lists are ordered simplest first: classes from
// normal / small_int to the exotic ones, no injection before injection, one
// special at the first element before many at random places, extents from
// small to large, the contiguous layout before the others. RapidCheck's own
// elementOf does not shrink at all, and its inRange / sizedElementOf draw
// from a prefix that grows with the test's size; the generators here ignore
// the size, so rare edge values appear from the first draws on.
//
// Preconditions. An op with a precondition on its shapes (K a multiple of 8,
// M*N*K under a budget, rank-3 batch equal to another tensor's) filters with
// shapes_where() (rc::gen::suchThat): shrinking then only proposes shapes that
// satisfy the predicate too. suchThat gives up after 100 consecutive
// rejections, so the predicate must accept a sizeable share of draws; for a
// rare one (exact divisibility by a large number, equal extents) build the
// shape constructively instead (draw a quotient and multiply, draw one extent
// and reuse it), which also shrinks better.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "harness/dtype.h"
#include "harness/tensor.h"
#include "harness/values.h"

namespace assay {

// ---- building blocks ---------------------------------------------------------

/// Uniform index in [0, weights.size()) drawn with the given weights (each
/// >= 0, sum > 0), shrinking toward 0 (not toward the heaviest entry).
rc::Gen<size_t> gen_weighted_index(std::vector<size_t> weights);

/// Uniform element of `items` (non-empty), independent of the size,
/// shrinking toward items[0].
template <typename T>
rc::Gen<T> gen_element(std::vector<T> items) {
  rc::Gen<size_t> index = gen_weighted_index(std::vector<size_t>(items.size(), 1));
  return rc::gen::map(std::move(index), [items = std::move(items)](size_t i) { return items[i]; });
}

/// Uniform in [lo, hi] (inclusive) whatever the size; shrinks toward lo.
rc::Gen<int64_t> gen_int_uniform(int64_t lo, int64_t hi);

// ---- value recipes -------------------------------------------------------------

/// Simplicity rank of a class, 0 = simplest; shrinking moves toward lower
/// ranks: normal 0, small_int 1, uniform, same_sign, signed_zero, one_hot,
/// permutation, mean_spread, log_uniform, pareto, subnormal, near_overflow, nan.
int value_class_rank(ValueClass c);

struct RecipeOptions {
  std::vector<ValueClass> classes = {ValueClass::kNormal};  ///< allowed classes, any order, non-empty
  /// Dtype the values are meant for: class parameters are kept where the
  /// values stay finite in it (near_overflow and injection aside).
  DType dtype = DType::kF32;
  double max_abs = 0;       ///< > 0: class parameters also keep the values below this magnitude
  uint8_t specials = 0;     ///< OR of kSpecial* that injection may use; 0 = never inject
  int64_t tile = 0;         ///< > 0: injections may target tile edges of this size
  int inject_percent = 25;  ///< share of recipes, in percent [0, 100], that carry an injection
};

/// Recipes over `opt.classes` with class-appropriate parameters, a random
/// seed and (when opt.specials != 0) sometimes a special-value injection.
/// Shrinks toward the simplest allowed class, no injection, seed 0.
rc::Gen<ValueRecipe> gen_value_recipe(RecipeOptions opt);
/// Shorthand: these classes, fp32, no injection.
rc::Gen<ValueRecipe> gen_value_recipe(std::vector<ValueClass> classes);

/// Injections using `specials` (non-zero), with tile edges when tile > 0.
/// Shrinks toward one special (the lowest bit of `specials`) at the first element.
rc::Gen<SpecialInjection> gen_injection(uint8_t specials, int64_t tile);

// ---- extents and shapes --------------------------------------------------------

/// Edge extents in [min, max], ascending, unique: 0, 1, 2, small primes and
/// primes just below powers of two, 2^k - 1, 2^k, 2^k + 1, for each tile t:
/// t - 1, t, t + 1, 2t - 1, 2t, 2t + 1, 3t, and max - 1, max.
std::vector<int64_t> edge_extents(int64_t max, const std::vector<int64_t>& tiles = {}, int64_t min = 0);

/// Extents in [min, max] (0 <= min <= max): mostly edge_extents(), else
/// uniform among small values (up to min + 64) or over the whole range.
/// Shrinks toward small edge values.
rc::Gen<int64_t> gen_extent(int64_t max, std::vector<int64_t> tiles = {}, int64_t min = 0);

/// Shapes of `rank` extents, each from gen_extent(max, tiles, min).
rc::Gen<std::vector<int64_t>> gen_shape(int rank, int64_t max, std::vector<int64_t> tiles = {}, int64_t min = 0);

/// Shapes from `gen` that satisfy `pred` (see "Preconditions" above).
template <typename Pred>
rc::Gen<std::vector<int64_t>> shapes_where(rc::Gen<std::vector<int64_t>> gen, Pred pred) {
  return rc::gen::suchThat(std::move(gen), std::move(pred));
}

// ---- layouts -------------------------------------------------------------------

enum class LayoutKind : uint8_t {
  kContiguous,  ///< row-major, dense
  kTransposed,  ///< last two dims stored column-major (ld = rows + pad)
  kPaddedLd,    ///< row-major, leading dimension cols + pad (pad > 0)
  kBroadcast,   ///< one dim with stride 0 (inputs only: the view overlaps)
  kSliced,      ///< a view into a larger parent: element offset misaligning by 1-16 bytes, maybe a wider ld
  kBatched,     ///< rank >= 3: a gap between consecutive matrices of the batch
};

inline constexpr LayoutKind kAllLayoutKinds[] = {LayoutKind::kContiguous, LayoutKind::kTransposed,
                                                 LayoutKind::kPaddedLd,   LayoutKind::kBroadcast,
                                                 LayoutKind::kSliced,     LayoutKind::kBatched};

/// "contiguous", "transposed", "padded_ld", "broadcast", "sliced", "batched".
std::string_view layout_kind_name(LayoutKind k);

/// How a logical shape is laid out in memory; applied by make_desc().
struct LayoutChoice {
  LayoutKind kind = LayoutKind::kContiguous;
  int64_t pad = 0;         ///< elements added to the leading dimension (the stride of the second-innermost dim)
  int64_t offset = 0;      ///< element offset of [0, ..., 0] in the allocation
  int broadcast_dim = -1;  ///< dim given stride 0, or -1
  int64_t batch_gap = 0;   ///< elements between consecutive matrices beyond rows * ld (rank >= 3)

  bool operator==(const LayoutChoice&) const = default;
};

/// One line, e.g. "sliced(offset=3, pad=8)".
std::string describe(const LayoutChoice& l);

/// Layouts for a tensor of `rank` and `dtype`: the kinds that make sense at
/// that rank (transposed and padded need rank >= 2, batched rank >= 3,
/// broadcast only when `input`). Sliced offsets misalign the base address by
/// 2, 4, 8 or 16 bytes (or one element for wider types) from the 256-byte
/// allocation alignment. Shrinks toward contiguous, then to smaller knobs.
rc::Gen<LayoutChoice> gen_layout(DType dtype, int rank, bool input);

/// The TensorDesc of a logical `shape` under `layout`: strides in memory order
/// (innermost first: last dim, or the second-to-last when transposed), the
/// leading dimension widened by pad, the batch stride by batch_gap, the
/// broadcast dim at stride 0. Knobs that do not apply at this rank are ignored.
TensorDesc make_desc(DType dtype, const std::vector<int64_t>& shape, const LayoutChoice& layout);

}  // namespace assay
