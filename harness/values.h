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
};

std::string_view value_class_name(ValueClass c);
std::optional<ValueClass> parse_value_class(std::string_view name);

struct ValueRecipe {
  ValueClass cls = ValueClass::kNormal;
  uint64_t seed = 0;
  double scale = 1.0;     ///< spread for kNormal / kUniform / kSameSign
  int64_t int_range = 2;  ///< bound for kSmallInt (inclusive)
};

/// Philox4x32-10 (Salmon et al., SC'11): four 32-bit outputs per (counter, key).
struct Philox4x32 {
  static void block(uint32_t ctr[4], const uint32_t key[2]);
};

/// Deterministic element value (as double, before rounding to the dtype) for
/// element `index` of the stream `stream` under `recipe`.
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

/// 64-bit FNV-1a over bytes, for golden hashes and content ids.
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace assay
