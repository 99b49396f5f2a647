// The value generator's arithmetic, one copy for the host (harness/values.cpp, C++20) and the
// device (harness/gpu/materialize_device.cu, nvcc C++17): Philox4x32-10, the deterministic
// log / cos / exp2 built from correctly rounded basic operations, and each value class's
// element. Plain structs and C++17 only; no harness headers but host_device.h. The device file is compiled with
// -fmad=false and the host without FMA contraction, so both evaluate every expression in the
// same order with the same roundings: a recipe gives the same bits on either side.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/host_device.h"

namespace assay::value_core {

/// A ValueRecipe (harness/values.h) with the dtype constants its classes read.
struct Recipe {
  int32_t cls = 0;  ///< ValueClass as int (its numbering is part of the case format)
  uint64_t seed = 0;
  double scale = 1, mean = 0, spread = 0, pareto_alpha = 1.5, overflow_factor = 4;
  int64_t int_range = 2, exp_min = -8, exp_max = 8;
  uint8_t inject_kinds = 0, inject_at = 0;  ///< kSpecial* and kAt* bits
  double inject_rate = 0;
  int64_t inject_tile = 0;
  double max_finite = 0;         ///< max_finite(dtype)
  int sub_lo = 0, sub_bits = 0;  ///< ilogb(min_subnormal), ilogb(min_normal) - sub_lo; 0: not a float
  ASSAY_HD bool injects() const { return inject_kinds != 0 && (inject_rate > 0 || inject_at != 0); }
};

/// The tensor as the classes see it: the last two dims (each at least 1) and the element count.
struct Shape {
  uint64_t rows = 1, cols = 1, numel = 1;
  bool has_rows = false;
};

// ValueClass, kSpecial* and kAt* numbering of harness/values.h (static_asserts in values.cpp).
enum : int32_t {
  kNormal,
  kUniform,
  kSameSign,
  kSmallInt,
  kNaN,
  kLogUniform,
  kPareto,
  kMeanSpread,
  kNearOverflow,
  kSubnormal,
  kSignedZero,
  kOneHot,
  kPermutation
};
inline constexpr uint32_t kSpecialNaN = 1, kSpecialPosInf = 2, kSpecialNegInf = 4;
inline constexpr uint32_t kAtFirst = 1, kAtLast = 2, kAtTile = 4;

// Key tweaks: the base value of element i uses key = seed; each other draw about element i
// (injection, hot column, permutation) uses seed ^ tweak, an independent Philox stream, so adding
// them never changed the base values.
inline constexpr uint64_t kInjectTweak = 0x9E3779B97F4A7C15ull;
inline constexpr uint64_t kHotTweak = 0xC2B2AE3D27D4EB4Full;
inline constexpr uint64_t kPermTweak = 0x165667B19E3779F9ull;
inline constexpr double kLn2 = 0.69314718055994530942;

ASSAY_HD inline double from_bits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}
inline constexpr uint64_t kQuietNaNBits = 0x7FF8000000000000ull, kPosInfBits = 0x7FF0000000000000ull,
                          kNegInfBits = 0xFFF0000000000000ull;

// Philox4x32-10, constants from Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as
// 1, 2, 3" (SC'11), identical to Random123 and cuRAND.
ASSAY_HD inline void philox_rounds(uint32_t ctr[4], const uint32_t key_in[2]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t key[2] = {key_in[0], key_in[1]};
  for (int round = 0; round < 10; ++round) {
#if defined(__CUDA_ARCH__)
    // nvcc kept the 64-bit products below as 64-bit multiplies, shifts and masks (most of a
    // device draw's instructions); the same bits from 32-bit high and low halves.
    const uint32_t hi0 = __umulhi(kM0, ctr[0]), lo0 = kM0 * ctr[0];
    const uint32_t hi1 = __umulhi(kM1, ctr[2]), lo1 = kM1 * ctr[2];
#else
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
#endif
    const uint32_t n0 = hi1 ^ ctr[1] ^ key[0];
    const uint32_t n2 = hi0 ^ ctr[3] ^ key[1];
    ctr[0] = n0;
    ctr[1] = lo1;
    ctr[2] = n2;
    ctr[3] = lo0;
    key[0] += kW0;
    key[1] += kW1;
  }
}

/// Philox block for a 64-bit key and two 64-bit counter words, as one array.
struct Block {
  uint32_t w[4];
  ASSAY_HD uint64_t u64(int i) const { return (uint64_t{w[i]} << 32) | w[i + 1]; }
};
ASSAY_HD inline Block philox(uint64_t key, uint64_t c0, uint64_t c1) {
  Block b{{static_cast<uint32_t>(c0), static_cast<uint32_t>(c0 >> 32), static_cast<uint32_t>(c1),
           static_cast<uint32_t>(c1 >> 32)}};
  const uint32_t k[2] = {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)};
  philox_rounds(b.w, k);
  return b;
}

/// Uniform in (0, 1) with 53 random bits; never exactly 0 (Box-Muller takes a log).
ASSAY_HD inline double unit_open(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (uint64_t{hi} << 21) ^ (lo >> 11);  // 53 bits
  return (static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) + 0.5) * 0x1p-53;
}

// log and cos from +, -, *, / and frexp only: IEEE basic operations are correctly rounded
// everywhere, libm's transcendental functions are not (they differ by an ulp between glibc
// versions, and from CUDA's), and inputs must be bit-identical on every machine. Accuracy ~1e-13
// relative, ample for test data.
//
// The series are templates over T = double or a vector of doubles (harness/values.cpp draws four
// elements at a time in vector lanes): one copy of the operations and their order, so a lane
// rounds exactly as the scalar code does. Vectors go in and out by reference (by value, a
// 32-byte vector's ABI would depend on the caller's target: GCC's -Wpsabi).

/// log m + e ln 2 for m in [0.5, 1) (frexp's mantissa) and e its exponent as a double.
template <typename T>
ASSAY_HD inline void log_series(const T& m, const T& e, T& out) {
  const T s = (m - 1.0) / (m + 1.0);  // log m = 2 atanh(s), |s| <= 1/3
  const T s2 = s * s;
  T term = s, sum{};
  for (int k = 1; k <= 27; k += 2) {
    sum += term / static_cast<double>(k);
    term *= s2;
  }
  out = 2.0 * sum + e * kLn2;
}

/// cos phi and sin phi for phi in [0, pi/2), Taylor series.
template <typename T>
ASSAY_HD inline void cos_sin_series(const T& phi, T& c, T& sn) {
  const T p2 = phi * phi;
  c = T{}, sn = T{};
  T tc = c + 1.0, ts = phi;
  for (int k = 0; k < 12; ++k) {
    c += tc;
    sn += ts;
    tc *= -p2 / static_cast<double>((2 * k + 1) * (2 * k + 2));
    ts *= -p2 / static_cast<double>((2 * k + 2) * (2 * k + 3));
  }
}

/// exp(f) for f in [0, ln 2), Taylor series.
template <typename T>
ASSAY_HD inline void exp_series(const T& f, T& sum) {
  T term = T{} + 1.0;
  sum = term;
  for (int n = 1; n <= 22; ++n) {
    term *= f / static_cast<double>(n);
    sum += term;
  }
}

ASSAY_HD inline double det_log(double x) {  // x > 0
  int e = 0;
  const double m = frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  double r;
  log_series(m, static_cast<double>(e), r);
  return r;
}

/// cos(2*pi*u) for u in [0, 1): quadrant from u, Taylor series on [0, pi/2).
ASSAY_HD inline double det_cos_2pi(double u) {
  const double t = u * 4.0;
  const int q = static_cast<int>(t);  // 0..3
  const double phi = (t - q) * 1.57079632679489661923;
  double c, sn;
  cos_sin_series(phi, c, sn);
  switch (q & 3) {
    case 0:
      return c;
    case 1:
      return -sn;
    case 2:
      return -c;
    default:
      return sn;
  }
}

/// std::clamp's order of comparisons (v < lo ? lo : hi < v ? hi : v).
ASSAY_HD inline double clamp(double v, double lo, double hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

// 2^t, for the same reason as det_log: floor and ldexp are exact (they only move the exponent),
// and 2^f for f in [0, 1) is a Taylor series of exp(f ln 2) in +, * and / (22 terms: truncation
// < 1e-20 relative).
ASSAY_HD inline double det_exp2(double t) {
  if (t != t) return t;              // NaN
  t = clamp(t, -4096.0, 4096.0);     // 2^+-4096 is Inf or 0 in fp64 anyway
  const double k = floor(t);
  const double f = (t - k) * kLn2;  // t - k is exact
  double sum;
  exp_series(f, sum);
  return ldexp(sum, static_cast<int>(k));
}

ASSAY_HD inline double det_log2(double x) {  // x > 0
  return det_log(x) / kLn2;
}

ASSAY_HD inline double with_sign(double mag, uint32_t bits) {
  return (bits & 1u) != 0 ? -mag : mag;
}

/// Bits needed for v (std::bit_width, in plain arithmetic for both compilers).
ASSAY_HD inline int bit_width(uint64_t v) {
  int b = 0;
  for (; v != 0; v >>= 1) ++b;
  return b;
}

// A bijection of [0, n) keyed by `key`: a 4-round Feistel network on 2h-bit words
// (2^(2h) < 4n), cycle-walked until the result lands in [0, n) (Black and Rogaway, "Ciphers with
// arbitrary finite domains", CT-RSA 2002). Lets a permutation matrix give element (i, j) from i
// alone, no table.
ASSAY_HD inline uint64_t feistel_permute(uint64_t x, uint64_t n, const Block& key) {
  const int bits = n <= 1 ? 1 : bit_width(n - 1);
  const int h = (bits + 1) / 2;
  const uint64_t mask = (uint64_t{1} << h) - 1;
  const uint64_t k = key.u64(0);
  do {
    uint64_t l = x >> h, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = philox(k, r, key.u64(2) ^ round).u64(0) & mask;
      const uint64_t nl = r;
      r = l ^ f;
      l = nl;
    }
    x = (l << h) | r;
  } while (x >= n);
  return x;
}

/// Column holding the 1 of global row `row` (batch included) of a one-hot or permutation
/// recipe (may be >= cols: no 1). Permutation: pi(i) over [0, max(rows, cols)), one key per
/// matrix of the batch; rows <= cols gives one 1 per row, rows > cols one per column.
ASSAY_HD inline uint64_t hot_column(const Recipe& r, const Shape& s, uint64_t stream, uint64_t row) {
  if (r.cls == kOneHot) return philox(r.seed ^ kHotTweak, row, stream).u64(0) % s.cols;
  const uint64_t batch = row / s.rows, i = row % s.rows;
  return feistel_permute(i, s.rows > s.cols ? s.rows : s.cols, philox(r.seed ^ kPermTweak, batch, stream));
}

/// Element `index` of the class, before injection. `hot`: hot_column of the element's row
/// (read by the one-hot and permutation classes only; the host caches it per row).
ASSAY_HD inline double base_value(const Recipe& r, const Shape& s, uint64_t stream, uint64_t index, uint64_t hot) {
  const Block b = philox(r.seed, index, stream);
  const uint32_t* ctr = b.w;
  switch (r.cls) {
    case kNormal: {
      // Box-Muller, first output only: one element per counter keeps the mapping element ->
      // value independent of the tensor's size.
      const double u1 = unit_open(ctr[0], ctr[1]), u2 = unit_open(ctr[2], ctr[3]);
      return r.scale * sqrt(-2.0 * det_log(u1)) * det_cos_2pi(u2);
    }
    case kUniform:
      return r.scale * (2.0 * unit_open(ctr[0], ctr[1]) - 1.0);
    case kSameSign:
      return r.scale * unit_open(ctr[0], ctr[1]);
    case kSmallInt: {
      const uint64_t span = 2 * static_cast<uint64_t>(r.int_range) + 1;
      const uint64_t x = ((uint64_t{ctr[0]} << 32) | ctr[1]) % span;
      return static_cast<double>(static_cast<int64_t>(x) - r.int_range);
    }
    case kNaN:
      return from_bits(kQuietNaNBits);
    case kLogUniform: {
      const double u = unit_open(ctr[0], ctr[1]);
      const double e = static_cast<double>(r.exp_min) + u * static_cast<double>(r.exp_max - r.exp_min);
      return with_sign(det_exp2(e), ctr[2]);
    }
    case kPareto: {
      // Inverse CDF: x = x_m * U^(-1/alpha) = x_m * 2^(-log2(U) / alpha).
      const double u = unit_open(ctr[0], ctr[1]);
      return with_sign(r.scale * det_exp2(-det_log2(u) / r.pareto_alpha), ctr[2]);
    }
    case kMeanSpread:
      return r.mean + r.spread * (2.0 * unit_open(ctr[0], ctr[1]) - 1.0);
    case kNearOverflow: {
      // Log-uniform in [max / f, max]; clamped, so that rounding in the series can never step
      // past max (and into Inf after rounding).
      const double mx = r.max_finite, f = r.overflow_factor < 1.0 ? 1.0 : r.overflow_factor;
      const double mag = mx * det_exp2(-unit_open(ctr[0], ctr[1]) * det_log2(f));
      return with_sign(clamp(mag, mx / f, mx), ctr[2]);
    }
    case kSubnormal: {
      if (r.sub_bits <= 0) return 0.0;  // an integer dtype
      // k * min_subnormal with 1 <= k < 2^bits: every subnormal. The bit length of k is drawn
      // first, so the tiny ones (k = 1, 2, 3...) are as frequent as those next to min_normal.
      // ldexp of an integer is exact.
      const int len = 1 + static_cast<int>(ctr[2] % static_cast<uint32_t>(r.sub_bits));
      const uint64_t k = (uint64_t{1} << (len - 1)) | (b.u64(0) & ((uint64_t{1} << (len - 1)) - 1));
      return with_sign(ldexp(static_cast<double>(k), r.sub_lo), ctr[3]);
    }
    case kSignedZero:
      return with_sign(0.0, ctr[0]);
    case kOneHot:
    case kPermutation:
      return index % s.cols == hot ? 1.0 : 0.0;
  }
  return 0;
}

// The normal class evaluated cheaply, for a store that rounds to fp32 or narrower: the same
// truncated series as det_log and det_cos_2pi (14 odd terms, 12 terms), by Horner's rule with
// fused multiply-adds on precomputed coefficients, where those spend 38 IEEE divisions an
// element (most of a large draw's time). Its bits are not base_value's; `err` bounds the
// difference, and a store may use x only where every value within err of it rounds alike
// (materialize_device.cu). Why err holds, with room to spare:
//   log: both sum the same 14 terms, all of one sign (s <= 0), to within about 30 roundings of
//     the sum each; e ln 2 has the sum's sign for u < 1, so the paths differ by < 2^-46
//     relative, and sqrt(-2 log u) by < 2^-46 relative;
//   cos, sin: both sum the same 12 terms, of absolute sum at most cosh(pi/2) < 2.6, each to
//     within about 100 roundings of unit size: they differ by < 2^-44 absolutely;
//   so |x - base_value| < |scale sqrt(-2 log u)| (2^-44 + 2^-46 + 2^-52), and err is 2^-40 of
//     that factor: 12 times the sum, and the roundings of x +- err (2^-53 of |x|) stay inside
//     it. A subnormal fp64 product adds at most 2^-1074. ValuesApprox.NormalWithinItsBound
//     measures the ratio over 2^21 draws, and ValuesApprox.SeriesAtTheirEnds the two series
//     at the ends of their ranges.
constexpr double inv_factorial(int n) {
  double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return 1.0 / f;
}

// Horner steps as templates rather than loops: each coefficient a constant of the code whether
// or not a compiler unrolls.
template <int K>
ASSAY_HD inline double log_horner(double h, double s2) {
  if constexpr (K < 1) {
    return h;
  } else {
    return log_horner<K - 2>(fma(h, s2, 1.0 / K), s2);
  }
}

template <int K>
ASSAY_HD inline void cos_sin_horner(double p2, double& hc, double& hs) {
  if constexpr (K >= 0) {
    constexpr double kC = (K % 2 == 0 ? 1.0 : -1.0) * inv_factorial(2 * K);
    constexpr double kS = (K % 2 == 0 ? 1.0 : -1.0) * inv_factorial(2 * K + 1);
    hc = fma(hc, p2, kC);
    hs = fma(hs, p2, kS);
    cos_sin_horner<K - 1>(p2, hc, hs);
  }
}

/// det_log(u) for u in (0, 1), evaluated as described above.
ASSAY_HD inline double log_approx(double u) {
  int e = 0;
  const double m = frexp(u, &e);
  const double s = (m - 1.0) / (m + 1.0);
  const double h = log_horner<25>(1.0 / 27, s * s);
  return fma(2.0 * s, h, static_cast<double>(e) * kLn2);
}

/// cos_sin_series's c and sn, evaluated as described above.
ASSAY_HD inline void cos_sin_approx(double phi, double& c, double& sn) {
  double hc = -inv_factorial(22), hs = -inv_factorial(23);  // the terms of p2^11
  cos_sin_horner<10>(phi * phi, hc, hs);
  c = hc;
  sn = phi * hs;
}

struct Approx {
  double x, err;
};

/// The normal class's element `index` (base_value's kNormal, before injection), within err.
ASSAY_HD inline Approx normal_approx(const Recipe& r, uint64_t stream, uint64_t index) {
  const Block b = philox(r.seed, index, stream);
  const double u1 = unit_open(b.w[0], b.w[1]), u2 = unit_open(b.w[2], b.w[3]);
  const double radius = r.scale * sqrt(-2.0 * log_approx(u1));
  const double t = u2 * 4.0;
  const int q = static_cast<int>(t);
  double c, sn;
  cos_sin_approx((t - q) * 1.57079632679489661923, c, sn);
  const double w = (q & 1) != 0 ? sn : c;
  return {radius * ((q + 1) & 2 ? -w : w), 0x1p-40 * fabs(radius) + 0x1p-1070};
}

/// Overwrites x with a special value where the recipe's injection hits element `index`, and
/// says whether it did.
ASSAY_HD inline bool inject(const Recipe& r, const Shape& s, uint64_t stream, uint64_t index, double& x) {
  const uint64_t col = index % s.cols, row = (index / s.cols) % s.rows;
  const uint64_t t = static_cast<uint64_t>(r.inject_tile);
  const bool tile = (r.inject_at & kAtTile) != 0 && r.inject_tile >= 1 &&
                    (col % t == 0 || col % t == t - 1 || (s.has_rows && (row % t == 0 || row % t == t - 1)));
  const bool structured = ((r.inject_at & kAtFirst) != 0 && index == 0) ||
                          ((r.inject_at & kAtLast) != 0 && s.numel != 0 && index == s.numel - 1) || tile;
  const Block b = philox(r.seed ^ kInjectTweak, index, stream);
  if (!structured && !(unit_open(b.w[0], b.w[1]) < r.inject_rate)) return false;
  // The k-th set bit of kinds, k uniform.
  int n = 0;
  for (uint32_t v = r.inject_kinds; v != 0; v >>= 1) n += static_cast<int>(v & 1u);
  int k = static_cast<int>(b.w[2] % static_cast<uint32_t>(n));
  uint32_t bit = 1;
  for (;; bit <<= 1) {
    if ((r.inject_kinds & bit) != 0 && k-- == 0) break;
  }
  switch (bit) {
    case kSpecialNaN:
      x = from_bits(kQuietNaNBits);
      break;
    case kSpecialPosInf:
      x = from_bits(kPosInfBits);
      break;
    case kSpecialNegInf:
      x = from_bits(kNegInfBits);
      break;
    default:
      x = -0.0;
      break;
  }
  return true;
}

}  // namespace assay::value_core
