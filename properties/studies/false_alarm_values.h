// The inputs of assay false-alarm, one copy for the host (fa_value, fa_materialize: the
// sampled host reference, CPU tests) and the device (false_alarm_inputs.cu, which writes a
// whole batch's image where the vendor reads it, so that no input crosses PCIe). A case's
// image is a few regions (A, B, the two fp8 scales, C), each an allocation of `extent`
// elements holding a strided [batch, rows, cols] view; fa_region_element writes one element
// of it: the gap canary outside the view, and inside it a value of the campaign's generator
// rounded to the dtype, the output poison, or a constant.
//
// The generator is splitmix64 counters (one hash per element, or per pair of elements for
// Box-Muller) with log, sin, cos and 2^x as fixed polynomials: only IEEE basic operations and
// sqrt, each correctly rounded on both sides. The device file is compiled with -fmad=false and
// the host without FMA contraction, so every expression rounds the same way and the device
// writes the host's bytes. Plain C++17; no harness headers but host_device.h and
// dtype_encode.h (whose fp32 -> narrow encoders are host/device functions).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/dtype_encode.h"
#include "harness/host_device.h"

namespace assay {

// ValueClass numbering of harness/values.h (static_asserts in false_alarm.cpp): the classes
// the generator knows. Others (Pareto, mean-spread, one-hot, permutation) and tile injection
// are not drawn by the campaign; fa_value takes them from recipe_value on the host only.
enum : int32_t {
  kFaGenNormal = 0,
  kFaGenUniform = 1,
  kFaGenSameSign = 2,
  kFaGenSmallInt = 3,
  kFaGenNaN = 4,
  kFaGenLogUniform = 5,
  kFaGenNearOverflow = 8,
  kFaGenSubnormal = 9,
  kFaGenSignedZero = 10,
};
// kSpecial* and kAt* bits of harness/values.h.
inline constexpr uint8_t kFaSpecialNaN = 1, kFaSpecialPosInf = 2, kFaSpecialNegInf = 4;
inline constexpr uint8_t kFaAtFirst = 1, kFaAtLast = 2;

inline constexpr uint64_t kFaGolden = 0x9e3779b97f4a7c15ull;
inline constexpr uint64_t kFaInjectKey = 0xC2B2AE3D27D4EB4Full;
inline constexpr double kFaLn2 = 0.69314718055994530942;

/// One recipe over one tensor, expanded for the element function (fa_gen in false_alarm.cpp
/// fills it from a ValueRecipe and the dtype's constants).
struct FaGen {
  uint64_t key = 0, inject_key = 0;  ///< hash keys of the values and of the injection draws
  uint64_t numel = 0;                ///< elements of the view (kAtLast)
  double scale = 1;                  ///< normal, uniform, same-sign
  double lo = 0, width = 0;          ///< log-uniform: exponents [lo, lo + width)
  double max = 0, factor = 1, log2_factor = 0;  ///< near-overflow: [max / factor, max]
  double inject_rate = 0;
  int64_t int_range = 0;            ///< small-int: [-int_range, int_range]
  int32_t cls = kFaGenNormal;       ///< kFaGen*
  int32_t sub_lo = 0, sub_bits = 0;  ///< subnormal: ilogb(min_subnormal), ilogb(min_normal) - sub_lo
  uint8_t inject_kinds = 0;         ///< kFaSpecial* and -0 (8); 0: no injection
  uint8_t inject_at = 0;            ///< kFaAtFirst | kFaAtLast
};

/// splitmix64: a small counter-based mixer; cases and values are pure functions of their seeds.
ASSAY_HD inline uint64_t fa_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The value key of stream `stream` (A 1, B 2, C 3) of a recipe seeded `seed`.
ASSAY_HD inline uint64_t fa_value_key(uint64_t seed, uint64_t stream) {
  return fa_mix64(seed ^ fa_mix64(stream * kFaGolden + 0x51ed270b7a4f0c3dull));
}

ASSAY_HD inline double fa_bits_double(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

ASSAY_HD inline uint64_t fa_double_bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

/// 2^k for an integer k in the normal range of fp64 (exact; no libm call).
ASSAY_HD inline double fa_pow2i(int64_t k) {
  return fa_bits_double(static_cast<uint64_t>(k + 1023) << 52);
}

/// ln x for a positive normal x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s),
/// s = (m - 1) / (m + 1), |s| <= 0.172, the series to s^17 (truncation < 1e-15 relative).
ASSAY_HD inline double fa_poly_ln(double x) {
  const uint64_t b = fa_double_bits(x);
  int64_t e = static_cast<int64_t>((b >> 52) & 0x7ff) - 1023;
  double m = fa_bits_double((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.41421356237309504880) {
    m *= 0.5;
    ++e;
  }
  const double s = (m - 1.0) / (m + 1.0), y = s * s, y2 = y * y, y4 = y2 * y2;
  // 1 + y/3 + ... + y^8/17 (Estrin: short dependency chains).
  const double p = ((1.0 + y * (1.0 / 3)) + y2 * (1.0 / 5 + y * (1.0 / 7))) +
                   y4 * (((1.0 / 9 + y * (1.0 / 11)) + y2 * (1.0 / 13 + y * (1.0 / 15))) + y4 * (1.0 / 17));
  return 2.0 * s * p + static_cast<double>(e) * kFaLn2;
}

/// 2^t for |t| < 1000: 2^round(t) exactly times 2^f, f in [-1/2, 1/2], as the Taylor series
/// of e^(f ln 2) to degree 11 (truncation < 1e-13 relative), evaluated in even and odd halves
/// (Estrin) so that the chain of dependent multiplications stays short.
ASSAY_HD inline double fa_poly_exp2(double t) {
  const int64_t k = static_cast<int64_t>(t + (t >= 0 ? 0.5 : -0.5));
  const double x = (t - static_cast<double>(k)) * kFaLn2, x2 = x * x, x4 = x2 * x2;
  // Even: 1 + x^2/2! + ... + x^10/10!; odd: x (1 + x^2/3! + ... + x^10/11!).
  const double e =
      (1.0 + x2 * 0.5) + x4 * ((1.0 / 24 + x2 * (1.0 / 720)) + x4 * ((1.0 / 40320 + x2 * (1.0 / 3628800))));
  const double o =
      (1.0 + x2 * (1.0 / 6)) + x4 * ((1.0 / 120 + x2 * (1.0 / 5040)) + x4 * ((1.0 / 362880 + x2 * (1.0 / 39916800))));
  return (e + x * o) * fa_pow2i(k);
}

/// cos and sin of 2 pi u, u in [0, 1): quadrant from u, Taylor series on [0, pi/2) to
/// degree 16 / 17 (truncation < 1e-12).
ASSAY_HD inline void fa_poly_cos_sin_2pi(double u, double& c, double& s) {
  const double t = u * 4.0;
  const int q = static_cast<int>(t) & 3;
  const double phi = (t - static_cast<double>(static_cast<int>(t))) * 1.57079632679489661923, p2 = phi * phi;
  double cp = 1.0 / 20922789888000.0;  // 1/16!
  cp = cp * -p2 + 1.0 / 87178291200.0;
  cp = cp * -p2 + 1.0 / 479001600.0;
  cp = cp * -p2 + 1.0 / 3628800.0;
  cp = cp * -p2 + 1.0 / 40320.0;
  cp = cp * -p2 + 1.0 / 720.0;
  cp = cp * -p2 + 1.0 / 24.0;
  cp = cp * -p2 + 0.5;
  cp = cp * -p2 + 1.0;
  double sp = 1.0 / 355687428096000.0;  // 1/17!
  sp = sp * -p2 + 1.0 / 1307674368000.0;
  sp = sp * -p2 + 1.0 / 6227020800.0;
  sp = sp * -p2 + 1.0 / 39916800.0;
  sp = sp * -p2 + 1.0 / 362880.0;
  sp = sp * -p2 + 1.0 / 5040.0;
  sp = sp * -p2 + 1.0 / 120.0;
  sp = sp * -p2 + 1.0 / 6.0;
  sp = sp * -p2 + 1.0;
  sp *= phi;
  switch (q) {
    case 0:
      c = cp, s = sp;
      break;
    case 1:
      c = -sp, s = cp;
      break;
    case 2:
      c = -cp, s = -sp;
      break;
    default:
      c = sp, s = -cp;
      break;
  }
}

/// (0, 1) from the top 53 bits.
ASSAY_HD inline double fa_unit53(uint64_t h) {
  return (static_cast<double>(h >> 11) + 0.5) * 0x1p-53;
}

/// The hash of element (or Box-Muller pair) `counter`.
ASSAY_HD inline uint64_t fa_hash(const FaGen& g, uint64_t counter) {
  return fa_mix64(g.key + counter * kFaGolden);
}

/// Box-Muller: elements 2 pair and 2 pair + 1 of a normal tensor, from one hash.
ASSAY_HD inline void fa_normal_pair(const FaGen& g, uint64_t pair, double z[2]) {
  const uint64_t h = fa_hash(g, pair);
  const double u1 = (static_cast<double>(h >> 32) + 0.5) * 0x1p-32;    // (0, 1)
  const double u2 = static_cast<double>(h & 0xffffffffull) * 0x1p-32;  // [0, 1)
  const double rad = sqrt(-2.0 * fa_poly_ln(u1));
  double c, s;
  fa_poly_cos_sin_2pi(u2, c, s);
  z[0] = g.scale * rad * c;
  z[1] = g.scale * rad * s;
}

/// Replaces element `index` by a special where the injection says so: at the structured
/// positions (first, last) and at rate `inject_rate`, the kind uniform over inject_kinds.
ASSAY_HD inline void fa_inject(const FaGen& g, uint64_t index, double& v) {
  const bool structured = ((g.inject_at & kFaAtFirst) != 0 && index == 0) ||
                          ((g.inject_at & kFaAtLast) != 0 && g.numel != 0 && index == g.numel - 1);
  const uint64_t h = fa_mix64(g.inject_key + index * kFaGolden);
  if (!structured && !(fa_unit53(h) < g.inject_rate)) return;
  // The k-th set bit of kinds, k uniform (from bits the rate draw did not use).
  int n = 0;
  for (unsigned b = g.inject_kinds; b != 0; b >>= 1) n += static_cast<int>(b & 1u);
  int k = static_cast<int>((h & 0x3ff) % static_cast<uint64_t>(n));
  unsigned bit = 1;
  for (;; bit <<= 1) {
    if ((g.inject_kinds & bit) != 0 && k-- == 0) break;
  }
  switch (bit) {
    case kFaSpecialNaN:
      v = fa_bits_double(0x7FF8000000000000ull);
      break;
    case kFaSpecialPosInf:
      v = fa_bits_double(0x7FF0000000000000ull);
      break;
    case kFaSpecialNegInf:
      v = fa_bits_double(0xFFF0000000000000ull);
      break;
    default:
      v = -0.0;
      break;
  }
}

/// The value (before rounding) of logical element `index` of the tensor `g` describes.
ASSAY_HD inline double fa_gen_value(const FaGen& g, uint64_t index) {
  double v = 0.0;
  switch (g.cls) {
    case kFaGenNormal: {
      double z[2];
      fa_normal_pair(g, index >> 1, z);
      v = z[index & 1];
      break;
    }
    case kFaGenUniform:
      v = g.scale * (2.0 * fa_unit53(fa_hash(g, index)) - 1.0);
      break;
    case kFaGenSameSign:
      v = g.scale * fa_unit53(fa_hash(g, index));
      break;
    case kFaGenSmallInt: {
      const uint64_t span = 2 * static_cast<uint64_t>(g.int_range) + 1;
      v = static_cast<double>(static_cast<int64_t>(fa_hash(g, index) % span) - g.int_range);
      break;
    }
    case kFaGenNaN:
      v = fa_bits_double(0x7FF8000000000000ull);
      break;
    case kFaGenLogUniform: {
      const uint64_t h = fa_hash(g, index);
      const double mag = fa_poly_exp2(g.lo + fa_unit53(h) * g.width);
      v = (h & 1) != 0 ? -mag : mag;
      break;
    }
    case kFaGenNearOverflow: {
      // Log-uniform in [max / f, max], clamped (std::clamp's comparisons) so that no rounding
      // steps past max.
      const uint64_t h = fa_hash(g, index);
      const double x = g.max * fa_poly_exp2(-fa_unit53(h) * g.log2_factor), lo = g.max / g.factor;
      const double mag = x < lo ? lo : (g.max < x ? g.max : x);
      v = (h & 1) != 0 ? -mag : mag;
      break;
    }
    case kFaGenSubnormal: {
      // k * min_subnormal, 1 <= k < 2^bits, the bit length of k drawn first (as values.h).
      if (g.sub_bits <= 0) break;
      const uint64_t h = fa_hash(g, index);
      const int len = 1 + static_cast<int>((h >> 40) % static_cast<uint64_t>(g.sub_bits));
      const uint64_t k = (uint64_t{1} << (len - 1)) | (h & ((uint64_t{1} << (len - 1)) - 1));
      const double mag = static_cast<double>(k) * fa_pow2i(g.sub_lo);
      v = (h >> 63) != 0 ? -mag : mag;
      break;
    }
    case kFaGenSignedZero:
      v = (fa_hash(g, index) & 1) != 0 ? -0.0 : 0.0;
      break;
    default:
      break;
  }
  if (g.inject_kinds != 0) fa_inject(g, index, v);
  return v;
}

/// Writes v rounded to `t` at p, as store_as(t, v, p) does (Overflow::kIeee): narrow floats
/// through fp32, int8 through fp32 (round to nearest even, saturating, NaN -> 0), int32 from
/// the double.
ASSAY_HD inline void fa_encode(DType t, double v, unsigned char* p) {
  const float f = static_cast<float>(v);
  switch (t) {
    case DType::kF64:
      std::memcpy(p, &v, 8);
      return;
    case DType::kF32:
      std::memcpy(p, &f, 4);
      return;
    case DType::kTF32: {
      const float r = encode::f32_to_tf32(f);
      std::memcpy(p, &r, 4);
      return;
    }
    case DType::kF16: {
      const uint16_t h = encode::f32_to_f16(f);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kBF16: {
      const uint16_t h = encode::f32_to_bf16(f);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kE4M3:
      p[0] = encode::f32_to_e4m3(f, Overflow::kIeee);
      return;
    case DType::kE5M2:
      p[0] = encode::f32_to_e5m2(f, Overflow::kIeee);
      return;
    case DType::kI8: {
      const int8_t b = encode::f32_to_i8(f);
      std::memcpy(p, &b, 1);
      return;
    }
    case DType::kI32: {
      const int32_t b = encode::f64_to_i32(v);
      std::memcpy(p, &b, 4);
      return;
    }
  }
}

/// What a region's view holds.
enum : int32_t {
  kFaRegionValues = 0,    ///< fa_gen_value of the logical index, rounded
  kFaRegionPoison = 1,    ///< the output poison (C where beta == 0)
  kFaRegionConstant = 2,  ///< `constant`, rounded (the fp8 scales)
};

/// One allocation of a case's image: elements [0, extent) of `size` bytes at byte `dst` of
/// the batch image, holding the view [batch, rows, cols] with strides [stride, ld, 1] from
/// element `offset`; the gap canary everywhere else.
struct FaRegion {
  uint64_t dst = 0;
  int64_t extent = 0;
  int64_t offset = 0, batch = 1, rows = 1, cols = 1, ld = 1, stride = 0;
  DType dtype = DType::kF32;
  uint8_t size = 4;          ///< bytes per element
  int32_t mode = kFaRegionValues;
  uint64_t canary = 0;       ///< write_gap_canary's bytes (little-endian, `size` of them)
  uint64_t poison = 0;       ///< write_output_poison's bytes
  double constant = 0;
  FaGen gen;
};

/// The view's logical (row-major) index of allocation element `lin`, or -1 outside the view.
/// Quotients in 32 bits where the allocation allows (the device's 64-bit division is slow).
ASSAY_HD inline int64_t fa_region_logical(const FaRegion& r, int64_t lin) {
  const int64_t rel = lin - r.offset;
  if (rel < 0) return -1;
  int64_t bi = 0, row = 0, col = 0;
  if (r.extent <= int64_t{0x7fffffff}) {
    const uint32_t rl = static_cast<uint32_t>(rel), st = static_cast<uint32_t>(r.stride),
                   ld = static_cast<uint32_t>(r.ld);
    const uint32_t b32 = r.batch > 1 ? rl / st : 0u, rem = rl - b32 * (r.batch > 1 ? st : 0u), row32 = rem / ld;
    bi = b32;
    row = row32;
    col = rem - row32 * ld;
  } else {
    bi = r.batch > 1 ? rel / r.stride : 0;
    const int64_t rem = rel - bi * (r.batch > 1 ? r.stride : 0);
    row = rem / r.ld;
    col = rem - row * r.ld;
  }
  if (bi >= r.batch || row >= r.rows || col >= r.cols) return -1;
  return (bi * r.rows + row) * r.cols + col;
}

/// Writes allocation element `lin` of region r into the batch image.
ASSAY_HD inline void fa_region_element(const FaRegion& r, int64_t lin, unsigned char* image) {
  unsigned char* p = image + r.dst + static_cast<uint64_t>(lin) * r.size;
  const int64_t logical = fa_region_logical(r, lin);
  if (logical < 0 || r.mode == kFaRegionPoison) {
    const uint64_t pattern = logical < 0 ? r.canary : r.poison;
    for (int b = 0; b < r.size; ++b) p[b] = static_cast<unsigned char>(pattern >> (8 * b));
    return;
  }
  const double v = r.mode == kFaRegionConstant ? r.constant : fa_gen_value(r.gen, static_cast<uint64_t>(logical));
  fa_encode(r.dtype, v, p);
}

}  // namespace assay
