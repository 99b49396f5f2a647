// Element types and bit-exact host conversions. No CUDA headers here: the
// conversions are checked exhaustively against CUDA's host-callable ones in
// tests/harness/dtype_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace assay {

enum class DType : uint8_t {
  kF64,
  kF32,
  kTF32,  ///< fp32 storage whose mantissa is rounded to 10 bits (RNE)
  kF16,
  kBF16,
  kE4M3,  ///< fp8, 4 exponent bits, bias 7, no infinity, max 448
  kE5M2,  ///< fp8, 5 exponent bits, bias 15, IEEE-like, max 57344
  kI8,
  kI32,
};

/// Every dtype, in declaration order.
inline constexpr DType kAllDTypes[] = {DType::kF64,  DType::kF32,  DType::kTF32, DType::kF16, DType::kBF16,
                                       DType::kE4M3, DType::kE5M2, DType::kI8,   DType::kI32};

/// "fp64", "fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int32".
std::string_view dtype_name(DType t);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);

/// Storage size in bytes (tf32 is stored as 4 bytes).
size_t dtype_size(DType t);
bool dtype_is_float(DType t);

/// Unit roundoff u = 2^-(p) where p is the number of stored mantissa bits + 1
/// minus one, i.e. half the spacing at 1.0: fp64 2^-53, fp32 2^-24, tf32 2^-11,
/// fp16 2^-11, bf16 2^-8, e4m3 2^-4, e5m2 2^-3. 0 for integer types.
double unit_roundoff(DType t);
/// Largest finite value (int types: max value).
double max_finite(DType t);
/// Smallest positive normal value (0 for int types).
double min_normal(DType t);
/// Smallest positive subnormal value (0 for int types).
double min_subnormal(DType t);

/// What a narrowing conversion does with values beyond the largest finite one.
enum class Overflow {
  kIeee,      ///< to +-Inf where the format has it (fp16, bf16, e5m2); e4m3 gives NaN
  kSaturate,  ///< clamp to +-max finite (CUDA's __NV_SATFINITE); NaN stays NaN
};

// ---- bit-level conversions, all round-to-nearest-even ----------------------
uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float x);
float bf16_bits_to_f32(uint16_t h);
/// Rounds the mantissa of x to 10 bits (RNE); NaN and Inf pass through.
float round_to_tf32(float x);
uint8_t f32_to_e4m3_bits(float x, Overflow mode);
float e4m3_bits_to_f32(uint8_t b);
uint8_t f32_to_e5m2_bits(float x, Overflow mode);
float e5m2_bits_to_f32(uint8_t b);
/// Round to nearest even, saturating at the type's range; NaN -> 0.
int8_t f32_to_i8(float x);
int32_t f64_to_i32(double x);

/// Rounds a float to the nearest value of `t` and returns it as float
/// (exact for every type but fp64 and int32 beyond 2^24).
float round_to(DType t, float x, Overflow mode = Overflow::kIeee);

/// Writes x, rounded to `t`, into `dst` (dtype_size(t) bytes).
void store_as(DType t, double x, void* dst, Overflow mode = Overflow::kIeee);
/// Reads one element of type `t` at `src` as double (exact for every dtype).
double load_as_double(DType t, const void* src);

}  // namespace assay
