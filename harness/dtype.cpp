// Bit-exact host conversions between fp32/fp64 and the narrow element types.
//
// Everything here is integer manipulation of IEEE bit patterns so that the
// result does not depend on the host FPU, the compiler's flags or the current
// rounding mode. The reference we must agree with is CUDA's host-side code in
// cuda_fp16.hpp, cuda_bf16.hpp and cuda_fp8.hpp (which is itself the same as
// what the device's cvt instructions produce); tests/harness/dtype_test.cpp
// checks that exhaustively. Deliberately no CUDA headers: this file is built
// by the host compiler into a library that must not depend on the toolkit.
//
// NaN outputs follow CUDA, not a textbook canonical NaN:
//   fp32 -> fp16  any NaN gives 0x7FFF (sign dropped)      (__float2half_rn)
//   fp32 -> bf16  any NaN gives 0x7FFF (sign dropped)      (__float2bfloat16_rn)
//   fp32 -> e4m3  any NaN gives 0x7F   (sign dropped)      (__nv_cvt_float_to_fp8)
//   fp32 -> e5m2  any NaN gives 0x7F   (sign dropped)      (__nv_cvt_float_to_fp8)
//   fp16/e4m3/e5m2 -> fp32  any NaN gives 0x7FFFFFFF       (__half2float, fp8 operator float)
//   bf16 -> fp32  bits shifted left by 16, payload and sign kept (__bfloat162float)

#include "harness/dtype.h"

#include "harness/dtype_encode.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>

namespace assay {

namespace {

uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32Inf = 0x7F800000u;

/// Decodes a magnitude encoding (no Inf/NaN: the callers handle those) of
/// fp16, e4m3 or e5m2 into fp32, exactly. Bit arithmetic rather than ldexp
/// because tensors are decoded element by element.
float decode_magnitude(uint32_t mag, int mant_bits, int bias) {
  const uint32_t field = mag >> mant_bits;
  if (field != 0) {
    // Normal: widen the mantissa and rebias the exponent to fp32's 127.
    return bits_float((mag << (23 - mant_bits)) + (static_cast<uint32_t>(127 - bias) << 23));
  }
  // Subnormal: frac * 2^(1 - bias - mant_bits); the scale is an fp32 normal
  // power of two for these formats (>= 2^-24), so the product is exact.
  const float scale = bits_float(static_cast<uint32_t>(127 + 1 - bias - mant_bits) << 23);
  return static_cast<float>(mag) * scale;
}

/// Clamps an overflowed (infinite) narrowing result to +-`max` for kSaturate.
float saturate_if(float r, float max, Overflow mode) {
  if (mode == Overflow::kSaturate && std::isinf(r)) return std::signbit(r) ? -max : max;
  return r;
}

constexpr float kTf32Max = 0x1.ffcp127f;  // bits 0x7F7FE000: (2 - 2^-10) * 2^127
constexpr float kBf16Max = 0x1.fep127f;   // bits 0x7F7F0000: (2 - 2^-7) * 2^127

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF64:
      return "fp64";
    case DType::kF32:
      return "fp32";
    case DType::kTF32:
      return "tf32";
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kE4M3:
      return "e4m3";
    case DType::kE5M2:
      return "e5m2";
    case DType::kI8:
      return "int8";
    case DType::kI32:
      return "int32";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF64:
      return 8;
    case DType::kF32:
    case DType::kTF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kE4M3:
    case DType::kE5M2:
    case DType::kI8:
      return 1;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  return t != DType::kI8 && t != DType::kI32;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::kF64:
      return std::ldexp(1.0, -53);
    case DType::kF32:
      return std::ldexp(1.0, -24);
    case DType::kTF32:
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    case DType::kE4M3:
      return std::ldexp(1.0, -4);
    case DType::kE5M2:
      return std::ldexp(1.0, -3);
    case DType::kI8:
    case DType::kI32:
      return 0.0;
  }
  return 0.0;
}

double max_finite(DType t) {
  switch (t) {
    case DType::kF64:
      return DBL_MAX;
    case DType::kF32:
      return FLT_MAX;
    case DType::kTF32:
      return kTf32Max;
    case DType::kF16:
      return 65504.0;
    case DType::kBF16:
      return kBf16Max;
    case DType::kE4M3:
      return 448.0;
    case DType::kE5M2:
      return 57344.0;
    case DType::kI8:
      return 127.0;
    case DType::kI32:
      return 2147483647.0;
  }
  return 0.0;
}

double min_normal(DType t) {
  switch (t) {
    case DType::kF64:
      return DBL_MIN;
    case DType::kF32:
    case DType::kTF32:
    case DType::kBF16:
      return std::ldexp(1.0, -126);
    case DType::kF16:
    case DType::kE5M2:
      return std::ldexp(1.0, -14);
    case DType::kE4M3:
      return std::ldexp(1.0, -6);
    case DType::kI8:
    case DType::kI32:
      return 0.0;
  }
  return 0.0;
}

double min_subnormal(DType t) {
  switch (t) {
    case DType::kF64:
      return std::ldexp(1.0, -1074);
    case DType::kF32:
      return std::ldexp(1.0, -149);
    case DType::kTF32:
      return std::ldexp(1.0, -136);  // fp32 exponent range, 10-bit mantissa field
    case DType::kF16:
      return std::ldexp(1.0, -24);
    case DType::kBF16:
      return std::ldexp(1.0, -133);
    case DType::kE4M3:
      return std::ldexp(1.0, -9);
    case DType::kE5M2:
      return std::ldexp(1.0, -16);
    case DType::kI8:
    case DType::kI32:
      return 0.0;
  }
  return 0.0;
}

uint16_t f32_to_f16_bits(float x) {
  return encode::f32_to_f16(x);
}

float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7FFFu;
  if (mag > 0x7C00u) return bits_float(0x7FFFFFFFu);  // CUDA: canonical NaN, sign dropped
  if (mag == 0x7C00u) return bits_float(sign | kF32Inf);
  return bits_float(sign | float_bits(decode_magnitude(mag, 10, 15)));
}

uint16_t f32_to_bf16_bits(float x) {
  return encode::f32_to_bf16(x);
}

float bf16_bits_to_f32(uint16_t h) {
  // bf16 is the top half of an fp32; this keeps NaN payloads, as CUDA does.
  return bits_float(static_cast<uint32_t>(h) << 16);
}

float round_to_tf32(float x) {
  return encode::f32_to_tf32(x);
}

uint8_t f32_to_e4m3_bits(float x, Overflow mode) {
  return encode::f32_to_e4m3(x, mode);
}

float e4m3_bits_to_f32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t mag = b & 0x7Fu;
  if (mag == 0x7F) return bits_float(0x7FFFFFFFu);  // CUDA: canonical NaN, sign dropped
  return bits_float(sign | float_bits(decode_magnitude(mag, 3, 7)));
}

uint8_t f32_to_e5m2_bits(float x, Overflow mode) {
  return encode::f32_to_e5m2(x, mode);
}

float e5m2_bits_to_f32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t mag = b & 0x7Fu;
  if (mag > 0x7C) return bits_float(0x7FFFFFFFu);  // CUDA: canonical NaN, sign dropped
  if (mag == 0x7C) return bits_float(sign | kF32Inf);
  return bits_float(sign | float_bits(decode_magnitude(mag, 2, 15)));
}

int8_t f32_to_i8(float x) {
  return encode::f32_to_i8(x);
}

int32_t f64_to_i32(double x) {
  return encode::f64_to_i32(x);
}

float round_to(DType t, float x, Overflow mode) {
  // kSaturate is applied to every narrowing float format, not only fp8: the
  // point of the mode is "never produce Inf from a finite-range conversion",
  // and, as CUDA's SATFINITE does for fp8, an Inf input also becomes +-max.
  // fp32/fp64 are not narrowed from a float and ignore the mode; so do the
  // integer types, which always saturate.
  switch (t) {
    case DType::kF64:
    case DType::kF32:
      return x;
    case DType::kTF32:
      return saturate_if(round_to_tf32(x), kTf32Max, mode);
    case DType::kF16:
      return saturate_if(f16_bits_to_f32(f32_to_f16_bits(x)), 65504.0f, mode);
    case DType::kBF16:
      return saturate_if(bf16_bits_to_f32(f32_to_bf16_bits(x)), kBf16Max, mode);
    case DType::kE4M3:
      return e4m3_bits_to_f32(f32_to_e4m3_bits(x, mode));
    case DType::kE5M2:
      return e5m2_bits_to_f32(f32_to_e5m2_bits(x, mode));
    case DType::kI8:
      return static_cast<float>(f32_to_i8(x));
    case DType::kI32:
      return static_cast<float>(f64_to_i32(static_cast<double>(x)));
  }
  return x;
}

void store_as(DType t, double x, void* dst, Overflow mode) {
  // Narrow formats go through (float)x, i.e. two roundings. That is exact for
  // assay's use, which generates every value as a float first (so (float)x
  // is x); for a general double it can differ from one direct rounding in the
  // last place at a tie. fp32 is a plain (float)x, so a double beyond
  // FLT_MAX becomes Inf whatever the mode.
  const float f = static_cast<float>(x);
  switch (t) {
    case DType::kF64:
      std::memcpy(dst, &x, sizeof x);
      return;
    case DType::kF32:
      std::memcpy(dst, &f, sizeof f);
      return;
    case DType::kTF32: {
      const float r = round_to(DType::kTF32, f, mode);
      std::memcpy(dst, &r, sizeof r);
      return;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t b = t == DType::kF16 ? f32_to_f16_bits(f) : f32_to_bf16_bits(f);
      const uint16_t inf = t == DType::kF16 ? 0x7C00 : 0x7F80;
      // Saturate as round_to does: an infinite result becomes sign | max finite.
      if (mode == Overflow::kSaturate && (b & 0x7FFFu) == inf) b = static_cast<uint16_t>(b - 1);
      std::memcpy(dst, &b, sizeof b);
      return;
    }
    case DType::kE4M3: {
      const uint8_t b = f32_to_e4m3_bits(f, mode);
      std::memcpy(dst, &b, sizeof b);
      return;
    }
    case DType::kE5M2: {
      const uint8_t b = f32_to_e5m2_bits(f, mode);
      std::memcpy(dst, &b, sizeof b);
      return;
    }
    case DType::kI8: {
      const int8_t b = f32_to_i8(f);
      std::memcpy(dst, &b, sizeof b);
      return;
    }
    case DType::kI32: {
      const int32_t b = f64_to_i32(x);  // direct from double: int32 needs more than 24 bits
      std::memcpy(dst, &b, sizeof b);
      return;
    }
  }
}

double load_as_double(DType t, const void* src) {
  switch (t) {
    case DType::kF64: {
      double d;
      std::memcpy(&d, src, sizeof d);
      return d;
    }
    case DType::kF32:
    case DType::kTF32: {
      float f;
      std::memcpy(&f, src, sizeof f);
      return f;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, src, sizeof b);
      return t == DType::kF16 ? f16_bits_to_f32(b) : bf16_bits_to_f32(b);
    }
    case DType::kE4M3:
    case DType::kE5M2: {
      uint8_t b;
      std::memcpy(&b, src, sizeof b);
      return t == DType::kE4M3 ? e4m3_bits_to_f32(b) : e5m2_bits_to_f32(b);
    }
    case DType::kI8: {
      int8_t b;
      std::memcpy(&b, src, sizeof b);
      return b;
    }
    case DType::kI32: {
      int32_t b;
      std::memcpy(&b, src, sizeof b);
      return b;
    }
  }
  return 0.0;
}

}  // namespace assay
