// fp32 -> tf32 / fp16 / bf16 / e4m3 / e5m2 / int8 and fp64 -> int32 rounding (round to nearest
// even, IEEE gradual underflow, CUDA's NaN outputs: see harness/dtype.cpp), inline and
// branch-free in the rounding step, for loops that encode millions of elements (assay
// false-alarm draws ~10^5 per case): a call into dtype.cpp and a mispredicted tie test per
// element cost more than the rest of the value. Host and device functions (ASSAY_HD), so that
// a device generator rounds with the host's code, not a second implementation
// (properties/studies/false_alarm_values.h, harness/gpu/materialize_device.cu).
// dtype.cpp's f32_to_*_bits, round_to_tf32, f32_to_i8 and f64_to_i32 are these functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/dtype.h"
#include "harness/host_device.h"

namespace assay::encode {

/// Magnitude encoding of a finite, nonzero |x| (fp32 bits `a`, sign cleared) in a binary
/// format with `mant_bits` stored mantissa bits and exponent `bias`, with IEEE gradual
/// underflow and round-to-nearest-even. The exponent range is unbounded above: a result beyond
/// the format's largest finite encoding means overflow and is the caller's to handle. Works
/// because a carry out of the rounded mantissa increments the exponent field, which is exactly
/// the IEEE encoding of the rounded-up value.
ASSAY_HD inline uint32_t magnitude_rne(uint32_t a, int mant_bits, int bias) {
  const int fe = static_cast<int>(a >> 23);
  // Significand as an integer, scaled by 2^-23; fp32 subnormals have no hidden bit.
  const uint64_t sig = fe != 0 ? ((a & 0x7FFFFFu) | 0x800000u) : (a & 0x7FFFFFu);
  const int e = (fe != 0 ? fe : 1) - 127;          // unbiased exponent of sig's bit 23
  const int min_e = 1 - bias;                      // target's smallest normal exponent
  const int eff_e = e > min_e ? e : min_e;         // below it the quantum stops shrinking
  const int shift = 23 - mant_bits + (eff_e - e);  // bits of sig below the target quantum
  // sig < 2^24 <= half a quantum: rounds to zero (also keeps the shift in range).
  if (shift >= 25) return 0;
  uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  q += static_cast<uint64_t>((rem > half) | ((rem == half) & ((q & 1u) != 0)));  // ties to even
  // For a subnormal target eff_e + bias - 1 == 0 and q is the whole encoding;
  // for a normal one q carries the hidden bit, which bumps the field by one.
  return (static_cast<uint32_t>(eff_e + bias - 1) << mant_bits) + static_cast<uint32_t>(q);
}

ASSAY_HD inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline constexpr uint32_t kAbsMask = 0x7FFFFFFFu, kInfBits = 0x7F800000u;

/// fp32 -> a binary format held in T (16 or 8 bits) with `mant_bits` and `bias`: `overflow` is
/// the magnitude code an overflowing value (and Inf) takes without saturation (fp16, bf16,
/// e5m2: Inf; e4m3: its NaN, it has no Inf), overflow - 1 the largest finite one (the result
/// under saturation). Every NaN gives the all-ones magnitude, sign dropped (CUDA's
/// __float2half_rn, __float2bfloat16_rn, __nv_cvt_float_to_fp8).
template <typename T>
ASSAY_HD inline T f32_to_narrow(float x, Overflow mode, int mant_bits, int bias, uint32_t overflow) {
  constexpr int kBits = 8 * static_cast<int>(sizeof(T));
  const uint32_t u = float_bits(x);
  const uint32_t a = u & kAbsMask;
  const uint32_t sign = (u >> (32 - kBits)) & (1u << (kBits - 1));
  if (a > kInfBits) return static_cast<T>((1u << (kBits - 1)) - 1u);
  if (a == 0) return static_cast<T>(sign);
  const uint32_t m = a == kInfBits ? overflow : magnitude_rne(a, mant_bits, bias);
  if (m >= overflow) return static_cast<T>(sign | (mode == Overflow::kSaturate ? overflow - 1 : overflow));
  return static_cast<T>(sign | m);
}

ASSAY_HD inline uint16_t f32_to_f16(float x) {
  return f32_to_narrow<uint16_t>(x, Overflow::kIeee, 10, 15, 0x7C00);
}

ASSAY_HD inline uint16_t f32_to_bf16(float x) {
  return f32_to_narrow<uint16_t>(x, Overflow::kIeee, 7, 127, 0x7F80);
}

ASSAY_HD inline uint8_t f32_to_e4m3(float x, Overflow mode) {
  return f32_to_narrow<uint8_t>(x, mode, 3, 7, 0x7F);
}

ASSAY_HD inline uint8_t f32_to_e5m2(float x, Overflow mode) {
  return f32_to_narrow<uint8_t>(x, mode, 2, 15, 0x7C);
}

ASSAY_HD inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Rounds the mantissa of x to 10 bits (RNE); NaN (payload kept) and Inf pass through. A carry
/// into the exponent field is the correct next binade, and out of the top binade it produces
/// exactly the Inf encoding.
ASSAY_HD inline float f32_to_tf32(float x) {
  const uint32_t u = float_bits(x);
  if ((u & kAbsMask) >= kInfBits) return x;
  const uint32_t lsb = (u >> 13) & 1u;
  return bits_float((u + 0x0FFFu + lsb) & ~uint32_t{0x1FFF});
}

/// Round to nearest even, saturating at [-128, 127]; NaN -> 0. Ties to even explicitly, so
/// that the result does not depend on the FP environment; floor and the difference are exact
/// for |x| < 2^23.
ASSAY_HD inline int8_t f32_to_i8(float x) {
  if (x != x) return 0;
  if (x >= 127.0f) return 127;    // also 127.5, which would round to 128
  if (x <= -128.0f) return -128;  // -128.5 ties to -128 anyway
  const float fl = floorf(x);
  const float diff = x - fl;
  int r = static_cast<int>(fl);
  if (diff > 0.5f || (diff == 0.5f && (r & 1) != 0)) ++r;
  return static_cast<int8_t>(r);
}

/// As f32_to_i8 for int32 from a double (floor and the difference are exact for |x| < 2^52).
ASSAY_HD inline int32_t f64_to_i32(double x) {
  if (x != x) return 0;
  if (x >= 2147483647.0) return INT32_MAX;   // also ...647.5, which would round up
  if (x <= -2147483648.0) return INT32_MIN;  // ...648.5 ties to even, i.e. INT32_MIN
  const double fl = floor(x);
  const double diff = x - fl;
  int64_t r = static_cast<int64_t>(fl);
  if (diff > 0.5 || (diff == 0.5 && (r & 1) != 0)) ++r;
  return static_cast<int32_t>(r);
}

}  // namespace assay::encode
