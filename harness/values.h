// Value recipes: a value class plus a 64-bit seed, expanded through a
// counter-based generator (Philox4x32-10), so the inputs of a case are a pure
// function of the case file: bit-identical across runs, threads and machines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "harness/status.h"
#include "harness/tensor.h"

namespace assay {

enum class ValueClass : uint8_t {
  kNormal,    ///< N(0, scale^2)
  kUniform,   ///< U(-scale, scale)
  kSameSign,  ///< U(0, scale): no cancellation, worst case for accumulation
  kSmallInt,  ///< integers in [-int_range, int_range]: exact-tier inputs
  kNaN,       ///< every element a quiet NaN (e.g. C when beta == 0)
  // Appended (the numbering above is part of the case format): the classes
  // below read the ValueRecipe fields named in their comment.
  kLogUniform,    ///< |x| = 2^e, e ~ U[exp_min, exp_max) (real-valued), random sign: heavy-tailed
  kPareto,        ///< |x| = scale * U^(-1/pareto_alpha) (Pareto, x_m = scale), random sign
  kMeanSpread,    ///< U(mean - spread, mean + spread): large mean, small spread (cancellation)
  kNearOverflow,  ///< |x| in [max/overflow_factor, max], log-uniform, random sign; max = max_finite(dtype)
  kSubnormal,     ///< random sign, nonzero subnormals of the dtype (0 for integer dtypes)
  kSignedZero,    ///< +0 or -0, half each
  kOneHot,        ///< one 1 per row (last dim) at a random column, 0 elsewhere
  kPermutation,   ///< per matrix (last two dims) a random partial permutation matrix of 0 and 1
};

/// Every value class, in declaration order.
inline constexpr ValueClass kAllValueClasses[] = {
    ValueClass::kNormal,       ValueClass::kUniform,    ValueClass::kSameSign,   ValueClass::kSmallInt,
    ValueClass::kNaN,          ValueClass::kLogUniform, ValueClass::kPareto,     ValueClass::kMeanSpread,
    ValueClass::kNearOverflow, ValueClass::kSubnormal,  ValueClass::kSignedZero, ValueClass::kOneHot,
    ValueClass::kPermutation};

std::string_view value_class_name(ValueClass c);
std::optional<ValueClass> parse_value_class(std::string_view name);

/// Special values that injection can place (bit flags of SpecialInjection::kinds).
inline constexpr uint8_t kSpecialNaN = 1;      ///< quiet NaN
inline constexpr uint8_t kSpecialPosInf = 2;   ///< +Inf
inline constexpr uint8_t kSpecialNegInf = 4;   ///< -Inf
inline constexpr uint8_t kSpecialNegZero = 8;  ///< -0
inline constexpr uint8_t kSpecialAll = 15;
/// Structured positions for injection (bit flags of SpecialInjection::at).
inline constexpr uint8_t kAtFirst = 1;  ///< logical element 0
inline constexpr uint8_t kAtLast = 2;   ///< logical element numel - 1
inline constexpr uint8_t kAtTile = 4;   ///< row or column index i with i % tile in {0, tile - 1}
inline constexpr uint8_t kAtAll = 7;

/// "nan", "+inf", "-inf", "-0" for one kSpecial* bit; "?" otherwise.
std::string_view special_name(uint8_t bit);
std::optional<uint8_t> parse_special(std::string_view name);
/// "first", "last", "tile" for one kAt* bit; "?" otherwise.
std::string_view inject_at_name(uint8_t bit);
std::optional<uint8_t> parse_inject_at(std::string_view name);

/// Special values laid over the class's values, composable with any class.
/// A position is injected when it is a structured position named in `at`, or
/// else with probability `rate` (an independent Philox draw per element); the
/// special put there is drawn uniformly from `kinds`. Row and column are the
/// indices in the last two dims (a rank-1 tensor has columns only; batch dims
/// are ignored). After rounding, formats without Inf (e4m3) hold NaN where
/// +-Inf was injected, integer dtypes hold 0 for NaN and saturate +-Inf.
struct SpecialInjection {
  uint8_t kinds = 0;  ///< OR of kSpecial*; 0 = no injection
  double rate = 0;    ///< probability per element of a special at a random position, in [0, 1]
  uint8_t at = 0;     ///< OR of kAt*: positions that always get a special
  int64_t tile = 0;   ///< tile size for kAtTile, >= 1 when kAtTile is set

  bool active() const { return kinds != 0 && (rate > 0 || at != 0); }
  bool operator==(const SpecialInjection&) const = default;
};

struct ValueRecipe {
  ValueClass cls = ValueClass::kNormal;
  uint64_t seed = 0;
  double scale = 1.0;     ///< spread for kNormal / kUniform / kSameSign; x_m for kPareto
  int64_t int_range = 2;  ///< bound for kSmallInt (inclusive)
  // Fields below were appended with the classes that use them; their defaults
  // are never written to case files, so older files and ids are unchanged.
  int64_t exp_min = -8;          ///< kLogUniform: smallest base-2 exponent (inclusive)
  int64_t exp_max = 8;           ///< kLogUniform: largest base-2 exponent (exclusive unless == exp_min)
  double pareto_alpha = 1.5;     ///< kPareto: tail index, > 0 (moments of order >= alpha are infinite)
  double mean = 1024.0;          ///< kMeanSpread: centre
  double spread = 1.0;           ///< kMeanSpread: half-width, >= 0
  double overflow_factor = 4.0;  ///< kNearOverflow: magnitudes within this factor (>= 1) of max finite
  SpecialInjection inject;       ///< special values laid over any class

  bool operator==(const ValueRecipe&) const = default;
};

/// Checks the recipe's parameters (ranges above); one-line error naming the
/// field, prefixed by `path` (e.g. "x.json: $.tensors[0].values").
Status validate_recipe(const ValueRecipe& r, const std::string& path);

/// Philox4x32-10 (Salmon et al., SC'11): four 32-bit outputs per (counter, key).
struct Philox4x32 {
  static void block(uint32_t ctr[4], const uint32_t key[2]);
};

/// Deterministic element value (as double, before rounding to the dtype) for
/// logical (row-major) element `index` of the stream `stream` under `recipe`,
/// for a tensor `desc` (its dtype and shape; strides and offset do not matter).
/// A pure function of (recipe, dtype, shape, stream, index): only IEEE basic
/// operations, frexp/ldexp/floor and Philox, never libm's transcendental functions.
double recipe_value(const ValueRecipe& recipe, const TensorDesc& desc, uint64_t stream, uint64_t index);
/// The same for a tensor of dtype `dtype` whose shape is unknown: it is taken
/// to be rank 1 and unbounded, so kOneHot and kPermutation give a single 1
/// somewhere in 2^62 elements, kAtLast never fires and kAtTile looks at the
/// index as a column. Use the TensorDesc overload for shape-dependent recipes.
double recipe_value(const ValueRecipe& recipe, DType dtype, uint64_t stream, uint64_t index);
/// The same with dtype fp32 (kNearOverflow, kSubnormal depend on the dtype).
double recipe_value(const ValueRecipe& recipe, uint64_t stream, uint64_t index);

/// Bit pattern written into elements of an input allocation that no index of
/// the view reaches (gaps of a padded leading dimension): a quiet NaN with a
/// recognisable payload for float types, so a kernel reading a gap poisons
/// its result; a sentinel for integer types.
void write_gap_canary(DType t, void* dst);
/// Poison for outputs before a launch (a quiet NaN with another payload).
void write_output_poison(DType t, void* dst);
/// True when the element at `p` is exactly the output poison pattern.
bool is_output_poison(DType t, const void* p);

/// Fills `dst` (desc.extent() elements of desc.dtype) with the recipe's values,
/// rounded to the dtype, at covered elements and the gap canary elsewhere.
/// `stream` distinguishes tensors of one case that share a seed.
void materialize(const TensorDesc& desc, const ValueRecipe& recipe, uint64_t stream, void* dst);

/// Fills `dst` (desc.extent() elements) as an output before a launch: the
/// output poison at every covered element, the gap canary elsewhere.
void materialize_output(const TensorDesc& desc, void* dst);

/// 64-bit FNV-1a over bytes, for golden hashes and content ids.
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace assay
