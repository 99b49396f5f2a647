// Checks harness/dtype.cpp bit for bit against CUDA's host-callable
// conversions (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h compiled by the host
// compiler, no GPU needed). Those host paths are the reference because they
// are what CUDA documents as equivalent to the device cvt instructions.
//
// Coverage: every fp16/bf16/fp8 bit pattern is decoded; encoding is tried on
// every representable value, its fp32 neighbours, every rounding midpoint
// (ties) and the fp32 neighbours of each midpoint, for every format, so every
// rounding boundary (ties-to-even, subnormal, underflow-to-zero, overflow
// threshold) is hit exactly; plus 10M random fp32 bit patterns per format.
//
// CUDA quirks matched (see also the table at the top of harness/dtype.cpp):
//  * __float2half_rn and __float2bfloat16_rn return 0x7FFF for every NaN
//    input, dropping its sign and payload (not 0x7E00 / 0x7FC0).
//  * __nv_cvt_float_to_fp8 first canonicalises a NaN input to +NaN, so both
//    e4m3 and e5m2 give 0x7F for every NaN, whatever its sign.
//  * __nv_cvt_float_to_fp8 treats +-Inf as an overflowing value: SATFINITE
//    gives +-max finite (0x7E/0xFE, 0x7B/0xFB), NOSAT gives e4m3 sign|NaN
//    (0x7F/0xFF) and e5m2 sign|Inf (0x7C/0xFC).
//  * __half2float and the fp8 -> float operators return 0x7FFFFFFF for every
//    NaN (sign dropped); __bfloat162float keeps the bits (shift by 16).
// Decoded NaNs are therefore compared bit-exactly, not just as "both NaN".

#include "harness/dtype.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace assay {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// ---- CUDA references ---------------------------------------------------------

uint16_t cuda_f16(float x) {
  return static_cast<__half_raw>(__float2half_rn(x)).x;
}
uint16_t cuda_bf16(float x) {
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x;
}
uint8_t cuda_e4m3(float x, __nv_saturation_t s) {
  return __nv_cvt_float_to_fp8(x, s, __NV_E4M3);
}
uint8_t cuda_e5m2(float x, __nv_saturation_t s) {
  return __nv_cvt_float_to_fp8(x, s, __NV_E5M2);
}

float cuda_f16_to_f32(uint16_t b) {
  __half_raw r;
  r.x = b;
  return __half2float(__half(r));
}
float cuda_bf16_to_f32(uint16_t b) {
  __nv_bfloat16_raw r;
  r.x = b;
  return __bfloat162float(__nv_bfloat16(r));
}
float cuda_e4m3_to_f32(uint8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return static_cast<float>(v);
}
float cuda_e5m2_to_f32(uint8_t b) {
  __nv_fp8_e5m2 v;
  v.__x = b;
  return static_cast<float>(v);
}

// ---- mismatch bookkeeping ----------------------------------------------------

/// Counts disagreements and keeps the first few for the failure message;
/// one EXPECT per sweep keeps 10^7-element sweeps fast.
struct Mismatches {
  uint64_t count = 0;
  uint64_t checked = 0;
  std::string examples;

  void check(const char* what, uint32_t input_bits, uint32_t got, uint32_t want) {
    ++checked;
    if (got == want) return;
    if (++count <= 8) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %s(0x%08" PRIx32 " = %.9g): got 0x%" PRIx32 ", CUDA 0x%" PRIx32 "\n", what,
                    input_bits, static_cast<double>(from_bits(input_bits)), got, want);
      examples += buf;
    }
  }
};

#define EXPECT_NO_MISMATCHES(m) \
  EXPECT_EQ((m).count, 0u) << "of " << (m).checked << " checked; first ones:\n" << (m).examples

// ---- input sets ----------------------------------------------------------------

/// fp32 values whose bits are awkward on their own: zeros, infinities, NaNs
/// with either sign and several payloads, fp32 extremes and subnormals.
std::vector<float> special_values() {
  const uint32_t patterns[] = {
      0x00000000, 0x80000000,                          // +-0
      0x7F800000, 0xFF800000,                          // +-Inf
      0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF,  // quiet NaNs
      0x7F800001, 0xFF800001, 0x7FA00000, 0x7FC00001,  // signalling NaNs, payloads
      0x7F7FFFFF, 0xFF7FFFFF,                          // +-FLT_MAX
      0x00800000, 0x80800000,                          // +-FLT_MIN
      0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF,  // fp32 subnormal extremes
      0x00400000, 0x00001000, 0x00002000, 0x00003000,  // fp32 subnormals near tf32 ties
      0x3F800000, 0xBF800000, 0x3F800001, 0x3F7FFFFF,  // around 1
  };
  std::vector<float> v;
  for (uint32_t p : patterns) v.push_back(from_bits(p));
  return v;
}

/// Every value of a narrow format (given its decoder and pattern count), its
/// fp32 neighbours, the midpoint to its away-from-zero neighbour (the
/// rounding tie) and the fp32 neighbours of that midpoint. At the largest
/// finite value the "neighbour" is the next value of an unbounded exponent
/// range, so the midpoint is the overflow threshold. Covering both signs and
/// every pattern covers every midpoint once from each side.
template <typename Decode>
std::vector<float> boundary_values(uint32_t num_patterns, Decode decode) {
  const uint32_t sign_bit = num_patterns / 2;
  std::vector<float> out;
  out.reserve(num_patterns * 7);
  auto push_with_neighbours = [&](float x) {
    out.push_back(x);
    out.push_back(std::nextafter(x, std::numeric_limits<float>::infinity()));
    out.push_back(std::nextafter(x, -std::numeric_limits<float>::infinity()));
  };
  for (uint32_t p = 0; p < num_patterns; ++p) {
    const float v = decode(p);
    if (!std::isfinite(v)) continue;
    push_with_neighbours(v);
    // The next pattern has the next larger magnitude, same sign, unless it is
    // Inf/NaN or wraps into the other sign; then extend the top binade.
    const uint32_t next = p + 1;
    double up;
    if ((next & sign_bit) == (p & sign_bit) && std::isfinite(decode(next))) {
      up = decode(next);
    } else {
      up = 2.0 * static_cast<double>(v) - static_cast<double>(decode(p - 1));
    }
    const double mid = (static_cast<double>(v) + up) / 2.0;
    const float midf = static_cast<float>(mid);
    // The midpoint has one more significant bit than the format: exact in fp32.
    EXPECT_EQ(static_cast<double>(midf), mid) << "pattern " << p;
    push_with_neighbours(midf);
  }
  return out;
}

/// splitmix64: fixed-seed, fast, and good enough to scatter fp32 bit patterns.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

constexpr int kRandomCount = 10'000'000;  // per format

/// The shared boundary set: all formats' boundaries, each tried on every
/// encoder (another format's ties are ordinary values, which is cheap extra
/// coverage), plus the special values.
const std::vector<float>& all_boundaries() {
  static const std::vector<float> values = [] {
    std::vector<float> v = special_values();
    auto append = [&v](const std::vector<float>& w) { v.insert(v.end(), w.begin(), w.end()); };
    append(boundary_values(65536, [](uint32_t p) { return cuda_f16_to_f32(static_cast<uint16_t>(p)); }));
    append(boundary_values(65536, [](uint32_t p) { return cuda_bf16_to_f32(static_cast<uint16_t>(p)); }));
    append(boundary_values(256, [](uint32_t p) { return cuda_e4m3_to_f32(static_cast<uint8_t>(p)); }));
    append(boundary_values(256, [](uint32_t p) { return cuda_e5m2_to_f32(static_cast<uint8_t>(p)); }));
    return v;
  }();
  return values;
}

/// Runs `mine` against `cuda` on the boundary set and on kRandomCount random
/// fp32 bit patterns.
template <typename Mine, typename Cuda>
void compare_encoder(const char* what, Mine mine, Cuda cuda, uint64_t seed) {
  Mismatches m;
  for (float x : all_boundaries()) m.check(what, bits_of(x), mine(x), cuda(x));
  SplitMix64 rng{seed};
  for (int i = 0; i < kRandomCount; i += 2) {
    const uint64_t r = rng.next();
    for (uint32_t b : {static_cast<uint32_t>(r), static_cast<uint32_t>(r >> 32)}) {
      const float x = from_bits(b);
      m.check(what, b, mine(x), cuda(x));
    }
  }
  EXPECT_NO_MISMATCHES(m);
  EXPECT_GE(m.checked, static_cast<uint64_t>(kRandomCount) + 4 * 65536);
}

// ---- decode: exhaustive ----------------------------------------------------------

TEST(DTypeDecode, Fp16AllPatterns) {
  Mismatches m;
  for (uint32_t p = 0; p < 65536; ++p) {
    const auto h = static_cast<uint16_t>(p);
    m.check("f16_bits_to_f32", p, bits_of(f16_bits_to_f32(h)), bits_of(cuda_f16_to_f32(h)));
  }
  EXPECT_NO_MISMATCHES(m);
}

TEST(DTypeDecode, Bf16AllPatterns) {
  Mismatches m;
  for (uint32_t p = 0; p < 65536; ++p) {
    const auto h = static_cast<uint16_t>(p);
    m.check("bf16_bits_to_f32", p, bits_of(bf16_bits_to_f32(h)), bits_of(cuda_bf16_to_f32(h)));
  }
  EXPECT_NO_MISMATCHES(m);
}

TEST(DTypeDecode, Fp8AllPatterns) {
  Mismatches m;
  for (uint32_t p = 0; p < 256; ++p) {
    const auto b = static_cast<uint8_t>(p);
    m.check("e4m3_bits_to_f32", p, bits_of(e4m3_bits_to_f32(b)), bits_of(cuda_e4m3_to_f32(b)));
    m.check("e5m2_bits_to_f32", p, bits_of(e5m2_bits_to_f32(b)), bits_of(cuda_e5m2_to_f32(b)));
  }
  EXPECT_NO_MISMATCHES(m);
}

TEST(DTypeDecode, Fp8KnownValues) {
  // Independent of CUDA: the format definitions.
  EXPECT_EQ(e4m3_bits_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_bits_to_f32(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_bits_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_bits_to_f32(0xFF)));
  EXPECT_EQ(e4m3_bits_to_f32(0x78), 256.0f);  // S.1111.000 is an ordinary number in e4m3
  EXPECT_EQ(e4m3_bits_to_f32(0x01), 0x1p-9f);
  EXPECT_EQ(e4m3_bits_to_f32(0x08), 0x1p-6f);
  EXPECT_EQ(e4m3_bits_to_f32(0x38), 1.0f);
  EXPECT_EQ(e5m2_bits_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_bits_to_f32(0x7C), std::numeric_limits<float>::infinity());
  EXPECT_EQ(e5m2_bits_to_f32(0xFC), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(e5m2_bits_to_f32(0x7D)));
  EXPECT_EQ(e5m2_bits_to_f32(0x01), 0x1p-16f);
  EXPECT_EQ(e5m2_bits_to_f32(0x3C), 1.0f);
  EXPECT_TRUE(std::signbit(e4m3_bits_to_f32(0x80)) && e4m3_bits_to_f32(0x80) == 0.0f);
  EXPECT_TRUE(std::signbit(e5m2_bits_to_f32(0x80)) && e5m2_bits_to_f32(0x80) == 0.0f);
}

// ---- encode: boundaries + random against CUDA -------------------------------------

TEST(DTypeEncode, Fp16MatchesCuda) {
  compare_encoder(
      "f32_to_f16_bits", [](float x) -> uint32_t { return f32_to_f16_bits(x); },
      [](float x) -> uint32_t { return cuda_f16(x); }, 1);
}

TEST(DTypeEncode, Bf16MatchesCuda) {
  compare_encoder(
      "f32_to_bf16_bits", [](float x) -> uint32_t { return f32_to_bf16_bits(x); },
      [](float x) -> uint32_t { return cuda_bf16(x); }, 2);
}

TEST(DTypeEncode, E4m3SaturateMatchesCuda) {
  compare_encoder(
      "f32_to_e4m3_bits/sat", [](float x) -> uint32_t { return f32_to_e4m3_bits(x, Overflow::kSaturate); },
      [](float x) -> uint32_t { return cuda_e4m3(x, __NV_SATFINITE); }, 3);
}

TEST(DTypeEncode, E4m3IeeeMatchesCudaNoSat) {
  compare_encoder(
      "f32_to_e4m3_bits/ieee", [](float x) -> uint32_t { return f32_to_e4m3_bits(x, Overflow::kIeee); },
      [](float x) -> uint32_t { return cuda_e4m3(x, __NV_NOSAT); }, 4);
}

TEST(DTypeEncode, E5m2SaturateMatchesCuda) {
  compare_encoder(
      "f32_to_e5m2_bits/sat", [](float x) -> uint32_t { return f32_to_e5m2_bits(x, Overflow::kSaturate); },
      [](float x) -> uint32_t { return cuda_e5m2(x, __NV_SATFINITE); }, 5);
}

TEST(DTypeEncode, E5m2IeeeMatchesCudaNoSat) {
  compare_encoder(
      "f32_to_e5m2_bits/ieee", [](float x) -> uint32_t { return f32_to_e5m2_bits(x, Overflow::kIeee); },
      [](float x) -> uint32_t { return cuda_e5m2(x, __NV_NOSAT); }, 6);
}

TEST(DTypeEncode, DocumentedEdgeCases) {
  // Spelled out so a reader sees the behaviour without running CUDA; all of
  // these are also covered by the sweeps above.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(f32_to_f16_bits(nan), 0x7FFF);
  EXPECT_EQ(f32_to_f16_bits(-nan), 0x7FFF);  // CUDA drops the NaN's sign
  EXPECT_EQ(f32_to_bf16_bits(-nan), 0x7FFF);
  EXPECT_EQ(f32_to_f16_bits(65519.998f), 0x7BFF);  // below the 65520 threshold
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7C00);    // tie with 65536: to even, i.e. Inf
  EXPECT_EQ(f32_to_f16_bits(-65520.0f), 0xFC00);
  EXPECT_EQ(f32_to_f16_bits(0x1p-25f), 0x0000);  // tie between 0 and 2^-24: to 0
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(-0x1p-26f), 0x8000);     // underflow keeps the sign
  EXPECT_EQ(f32_to_f16_bits(0x1.802p-24f), 0x0002);  // 1.5 ulp, ties up to even
  EXPECT_EQ(f32_to_bf16_bits(FLT_MAX), 0x7F80);      // rounds beyond bf16 max
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x7F7F8000)), 0x7F80);  // tie, to even (Inf)
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x00008000)), 0x0000);  // subnormal tie to even
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x00018000)), 0x0002);

  EXPECT_EQ(f32_to_e4m3_bits(464.0f, Overflow::kIeee), 0x7E);  // tie 448|480: to even 448
  EXPECT_EQ(f32_to_e4m3_bits(std::nextafter(464.0f, inf), Overflow::kIeee), 0x7F);
  EXPECT_EQ(f32_to_e4m3_bits(-500.0f, Overflow::kIeee), 0xFF);  // NaN with the sign kept
  EXPECT_EQ(f32_to_e4m3_bits(-500.0f, Overflow::kSaturate), 0xFE);
  EXPECT_EQ(f32_to_e4m3_bits(inf, Overflow::kSaturate), 0x7E);
  EXPECT_EQ(f32_to_e4m3_bits(-inf, Overflow::kIeee), 0xFF);
  EXPECT_EQ(f32_to_e4m3_bits(-nan, Overflow::kSaturate), 0x7F);
  EXPECT_EQ(f32_to_e4m3_bits(0x1p-10f, Overflow::kIeee), 0x00);  // half the smallest subnormal
  EXPECT_EQ(f32_to_e4m3_bits(-0x1.8p-9f, Overflow::kIeee), 0x82);

  EXPECT_EQ(f32_to_e5m2_bits(61440.0f, Overflow::kIeee), 0x7C);  // tie 57344|65536: Inf
  EXPECT_EQ(f32_to_e5m2_bits(std::nextafter(61440.0f, 0.0f), Overflow::kIeee), 0x7B);
  EXPECT_EQ(f32_to_e5m2_bits(61440.0f, Overflow::kSaturate), 0x7B);
  EXPECT_EQ(f32_to_e5m2_bits(-inf, Overflow::kSaturate), 0xFB);
  EXPECT_EQ(f32_to_e5m2_bits(-inf, Overflow::kIeee), 0xFC);
  EXPECT_EQ(f32_to_e5m2_bits(-nan, Overflow::kIeee), 0x7F);
}

// ---- tf32 against an independent reference ----------------------------------------

/// tf32 by arithmetic instead of bits: scale by the quantum of x's binade
/// (never finer than the subnormal quantum 2^-136), round to an integer
/// with nearbyint (ties-to-even in the default environment), scale back.
/// Out of the top binade this gives exactly 2^128, which the fp32 cast
/// turns into Inf.
float reference_tf32(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  const int e = std::max(std::ilogb(x), -126);
  const long double quantum = std::ldexp(1.0L, e - 10);
  const long double r = std::nearbyint(static_cast<long double>(x) / quantum) * quantum;
  return static_cast<float>(r);
}

TEST(DTypeTf32, MatchesReferenceOnEveryBoundary) {
  Mismatches m;
  Mismatches idem;
  auto check = [&](float x) {
    const float got = round_to_tf32(x);
    m.check("round_to_tf32", bits_of(x), bits_of(got), bits_of(reference_tf32(x)));
    idem.check("round_to_tf32 twice", bits_of(x), bits_of(round_to_tf32(got)), bits_of(got));
    if (std::isfinite(got)) idem.check("low 13 bits", bits_of(x), bits_of(got) & 0x1FFFu, 0);
  };
  for (float x : special_values()) check(x);
  // Every finite tf32 value (sign, 8-bit exponent, 10-bit mantissa), its fp32
  // neighbours, the tie above it (bits | 0x1000, also the overflow threshold
  // at the top) and that tie's fp32 neighbours.
  for (uint32_t s = 0; s < 2; ++s) {
    for (uint32_t em = 0; em < (255u << 10); ++em) {
      const uint32_t b = (s << 31) | (em << 13);
      for (uint32_t c : {b, b | 0x1000u}) {
        const float x = from_bits(c);
        check(x);
        check(std::nextafter(x, std::numeric_limits<float>::infinity()));
        check(std::nextafter(x, -std::numeric_limits<float>::infinity()));
      }
    }
  }
  SplitMix64 rng{7};
  for (int i = 0; i < kRandomCount; ++i) check(from_bits(static_cast<uint32_t>(rng.next())));
  EXPECT_NO_MISMATCHES(m);
  EXPECT_NO_MISMATCHES(idem);
}

TEST(DTypeTf32, KnownValues) {
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0x3F801000))), 0x3F800000u);  // tie to even (down)
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0x3F803000))), 0x3F804000u);  // tie to even (up)
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0x3F801001))), 0x3F802000u);
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0x3FFFF000))), 0x40000000u);  // carry into exponent
  EXPECT_EQ(bits_of(round_to_tf32(FLT_MAX)), 0x7F800000u);                // beyond tf32 max: Inf
  EXPECT_EQ(bits_of(round_to_tf32(-FLT_MAX)), 0xFF800000u);
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0x7F7FEFFF))), 0x7F7FE000u);
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0x80001000))), 0x80000000u);  // subnormal tie to -0
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0x7FC00123))), 0x7FC00123u);  // NaN passes through
  EXPECT_EQ(bits_of(round_to_tf32(from_bits(0xFF800000))), 0xFF800000u);
}

// ---- integers ------------------------------------------------------------------

TEST(DTypeInt, F32ToI8) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float in;
    int8_t want;
  };
  const Case cases[] = {{0.0f, 0},       {-0.0f, 0},      {0.5f, 0},       {-0.5f, 0},        {1.5f, 2},
                        {2.5f, 2},       {-1.5f, -2},     {-2.5f, -2},     {0.49999997f, 0},  {0.50000006f, 1},
                        {126.5f, 126},   {125.5f, 126},   {127.0f, 127},   {127.49999f, 127}, {127.5f, 127},
                        {128.0f, 127},   {1e9f, 127},     {inf, 127},      {-127.5f, -128},   {-128.0f, -128},
                        {-128.5f, -128}, {-129.0f, -128}, {-1e30f, -128},  {-inf, -128},      {3.7f, 4},
                        {-3.7f, -4},     {FLT_MIN, 0},    {-FLT_MAX, -128}};
  for (const Case& c : cases) EXPECT_EQ(f32_to_i8(c.in), c.want) << c.in;
  EXPECT_EQ(f32_to_i8(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(f32_to_i8(-std::numeric_limits<float>::quiet_NaN()), 0);
  // Every half-integer in range and its neighbours against nearbyint + clamp.
  for (int k = -600; k <= 600; ++k) {
    const float h = static_cast<float>(k) / 2.0f;
    for (float x : {h, std::nextafter(h, inf), std::nextafter(h, -inf)}) {
      const float want = std::fmin(std::fmax(std::nearbyint(x), -128.0f), 127.0f);
      EXPECT_EQ(f32_to_i8(x), static_cast<int8_t>(want)) << x;
    }
  }
}

TEST(DTypeInt, F64ToI32) {
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double in;
    int32_t want;
  };
  const Case cases[] = {
      {0.0, 0},
      {0.5, 0},
      {1.5, 2},
      {2.5, 2},
      {-2.5, -2},
      {-3.5, -4},
      {0.49999999999999994, 0},
      {2147483646.5, 2147483646},
      {2147483645.5, 2147483646},
      {2147483647.0, 2147483647},
      {2147483647.4, 2147483647},
      {2147483647.5, 2147483647},  // would round to 2^31: saturates
      {2147483648.0, 2147483647},
      {4503599627370497.0, 2147483647},
      {1e300, 2147483647},
      {inf, 2147483647},
      {-2147483647.5, -2147483648},  // tie to even
      {-2147483646.5, -2147483646},
      {-2147483648.0, -2147483647 - 1},
      {-2147483648.5, -2147483647 - 1},
      {-2147483649.0, -2147483647 - 1},
      {-inf, -2147483647 - 1},
      {16777217.0, 16777217},  // beyond float precision: not routed through float
      {-123456789.5, -123456790},
  };
  for (const Case& c : cases) EXPECT_EQ(f64_to_i32(c.in), c.want) << std::hexfloat << c.in;
  EXPECT_EQ(f64_to_i32(std::numeric_limits<double>::quiet_NaN()), 0);
}

// ---- round_to / store_as / load_as_double ----------------------------------------

TEST(DTypeRoundTo, AgreesWithBitConversions) {
  Mismatches m;
  for (float x : all_boundaries()) {
    const uint32_t xb = bits_of(x);
    m.check("round_to f64", xb, bits_of(round_to(DType::kF64, x)), xb);
    m.check("round_to f32", xb, bits_of(round_to(DType::kF32, x)), xb);
    m.check("round_to tf32", xb, bits_of(round_to(DType::kTF32, x)), bits_of(round_to_tf32(x)));
    m.check("round_to f16", xb, bits_of(round_to(DType::kF16, x)), bits_of(f16_bits_to_f32(f32_to_f16_bits(x))));
    m.check("round_to bf16", xb, bits_of(round_to(DType::kBF16, x)), bits_of(bf16_bits_to_f32(f32_to_bf16_bits(x))));
    for (Overflow mode : {Overflow::kIeee, Overflow::kSaturate}) {
      m.check("round_to e4m3", xb, bits_of(round_to(DType::kE4M3, x, mode)),
              bits_of(e4m3_bits_to_f32(f32_to_e4m3_bits(x, mode))));
      m.check("round_to e5m2", xb, bits_of(round_to(DType::kE5M2, x, mode)),
              bits_of(e5m2_bits_to_f32(f32_to_e5m2_bits(x, mode))));
    }
    m.check("round_to int8", xb, bits_of(round_to(DType::kI8, x)), bits_of(static_cast<float>(f32_to_i8(x))));
  }
  EXPECT_NO_MISMATCHES(m);
}

TEST(DTypeRoundTo, SaturateClampsEveryNarrowFloat) {
  // kSaturate on fp16/bf16/tf32 (no CUDA reference; our definition): an
  // infinite result, including from an Inf input, becomes +-max finite.
  const float inf = std::numeric_limits<float>::infinity();
  for (DType t : {DType::kTF32, DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2}) {
    const auto max = static_cast<float>(max_finite(t));
    EXPECT_EQ(round_to(t, FLT_MAX, Overflow::kSaturate), max) << dtype_name(t);
    EXPECT_EQ(round_to(t, -inf, Overflow::kSaturate), -max) << dtype_name(t);
    EXPECT_EQ(round_to(t, max, Overflow::kSaturate), max) << dtype_name(t);
    EXPECT_TRUE(std::isnan(round_to(t, std::nanf(""), Overflow::kSaturate))) << dtype_name(t);
    EXPECT_EQ(round_to(t, -max, Overflow::kIeee), -max) << dtype_name(t);
  }
  EXPECT_EQ(round_to(DType::kF16, 1e6f, Overflow::kIeee), inf);
  EXPECT_EQ(round_to(DType::kBF16, FLT_MAX, Overflow::kIeee), inf);
  EXPECT_EQ(round_to(DType::kTF32, FLT_MAX, Overflow::kIeee), inf);
  EXPECT_TRUE(std::isnan(round_to(DType::kE4M3, 1e6f, Overflow::kIeee)));
  EXPECT_EQ(round_to(DType::kE5M2, 1e6f, Overflow::kIeee), inf);
  EXPECT_EQ(round_to(DType::kI32, 3e9f), 2147483648.0f);  // INT32_MAX as float rounds up
  EXPECT_EQ(round_to(DType::kI32, -2.5f), -2.0f);
}

TEST(DTypeStore, RoundTripsEveryDType) {
  const double values[] = {0.0, -0.0, 1.0, -1.5, 0.1, 3.0, 100.25, -1e-3, 1e30, -7.0e4, 0.5, 2.5};
  for (DType t : kAllDTypes) {
    unsigned char buf[8];
    const double extremes[] = {max_finite(t), -max_finite(t), min_normal(t), min_subnormal(t)};
    // Representable values come back unchanged.
    for (double v : extremes) {
      std::memset(buf, 0xAB, sizeof buf);
      store_as(t, v, buf);
      EXPECT_EQ(load_as_double(t, buf), v) << dtype_name(t) << " " << v;
      for (size_t i = dtype_size(t); i < sizeof buf; ++i) EXPECT_EQ(buf[i], 0xAB) << "wrote past " << dtype_name(t);
    }
    // Anything else comes back as round_to would give (float formats) or the
    // documented integer rounding.
    for (double v : values) {
      store_as(t, v, buf);
      const double got = load_as_double(t, buf);
      double want;
      if (t == DType::kF64) {
        want = v;
      } else if (t == DType::kI32) {
        want = f64_to_i32(v);
      } else {
        want = round_to(t, static_cast<float>(v));
      }
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " " << v;
      } else {
        EXPECT_EQ(got, want) << dtype_name(t) << " " << v;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << dtype_name(t) << " " << v;
      }
      // Storing is idempotent: a loaded value stores to the same bytes.
      unsigned char again[8];
      std::memset(again, 0, sizeof again);
      if (!std::isnan(got)) {
        store_as(t, got, again);
        EXPECT_EQ(std::memcmp(buf, again, dtype_size(t)), 0) << dtype_name(t) << " " << v;
      }
    }
  }
}

TEST(DTypeStore, ByteLayoutAndModes) {
  uint16_t h;
  store_as(DType::kF16, 1.0, &h);
  EXPECT_EQ(h, 0x3C00);
  store_as(DType::kBF16, -2.0, &h);
  EXPECT_EQ(h, 0xC000);
  store_as(DType::kF16, 1e6, &h, Overflow::kSaturate);
  EXPECT_EQ(h, 0x7BFF);
  store_as(DType::kF16, -1e6, &h, Overflow::kIeee);
  EXPECT_EQ(h, 0xFC00);
  store_as(DType::kBF16, -1e39, &h, Overflow::kSaturate);
  EXPECT_EQ(h, 0xFF7F);
  uint8_t b;
  store_as(DType::kE4M3, 1000.0, &b, Overflow::kSaturate);
  EXPECT_EQ(b, 0x7E);
  store_as(DType::kE4M3, 1000.0, &b, Overflow::kIeee);
  EXPECT_EQ(b, 0x7F);
  store_as(DType::kE5M2, -1e5, &b, Overflow::kIeee);
  EXPECT_EQ(b, 0xFC);
  int8_t i8;
  store_as(DType::kI8, -300.0, &i8);
  EXPECT_EQ(i8, -128);
  int32_t i32;
  store_as(DType::kI32, 16777217.0, &i32);  // exact: int32 goes straight from double
  EXPECT_EQ(i32, 16777217);
  float f;
  store_as(DType::kTF32, 1.0 + 0x1p-11, &f);  // tie: to even, 1.0
  EXPECT_EQ(f, 1.0f);
  store_as(DType::kTF32, 1e39, &f, Overflow::kSaturate);
  EXPECT_EQ(f, static_cast<float>(max_finite(DType::kTF32)));
  double d;
  store_as(DType::kF64, 0.1, &d);
  EXPECT_EQ(d, 0.1);
  EXPECT_EQ(load_as_double(DType::kF64, &d), 0.1);
}

// ---- names and constants ----------------------------------------------------------

TEST(DTypeInfo, NamesRoundTrip) {
  const char* names[] = {"fp64", "fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int32"};
  size_t i = 0;
  for (DType t : kAllDTypes) {
    EXPECT_EQ(dtype_name(t), names[i++]);
    ASSERT_TRUE(parse_dtype(dtype_name(t)).has_value()) << dtype_name(t);
    EXPECT_EQ(*parse_dtype(dtype_name(t)), t);
  }
  EXPECT_FALSE(parse_dtype("").has_value());
  EXPECT_FALSE(parse_dtype("float").has_value());
  EXPECT_FALSE(parse_dtype("FP32").has_value());
  EXPECT_FALSE(parse_dtype("fp3").has_value());
}

TEST(DTypeInfo, SizesAndKinds) {
  const size_t sizes[] = {8, 4, 4, 2, 2, 1, 1, 1, 4};
  size_t i = 0;
  for (DType t : kAllDTypes) {
    EXPECT_EQ(dtype_size(t), sizes[i++]) << dtype_name(t);
    EXPECT_EQ(dtype_is_float(t), t != DType::kI8 && t != DType::kI32) << dtype_name(t);
  }
}

TEST(DTypeInfo, ConstantsMatchFormats) {
  EXPECT_EQ(unit_roundoff(DType::kF64), std::numeric_limits<double>::epsilon() / 2);
  EXPECT_EQ(unit_roundoff(DType::kF32), static_cast<double>(std::numeric_limits<float>::epsilon()) / 2);
  EXPECT_EQ(unit_roundoff(DType::kTF32), 0x1p-11);
  EXPECT_EQ(unit_roundoff(DType::kF16), 0x1p-11);
  EXPECT_EQ(unit_roundoff(DType::kBF16), 0x1p-8);
  EXPECT_EQ(unit_roundoff(DType::kE4M3), 0x1p-4);
  EXPECT_EQ(unit_roundoff(DType::kE5M2), 0x1p-3);
  EXPECT_EQ(unit_roundoff(DType::kI8), 0.0);
  EXPECT_EQ(unit_roundoff(DType::kI32), 0.0);
  // u is half the spacing at 1: 1+u ties to 1 (even), anything above goes up.
  for (DType t : {DType::kTF32, DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2}) {
    const auto u = static_cast<float>(unit_roundoff(t));
    EXPECT_EQ(round_to(t, 1.0f + u), 1.0f) << dtype_name(t);
    EXPECT_EQ(round_to(t, std::nextafter(1.0f + u, 2.0f)), 1.0f + 2 * u) << dtype_name(t);
  }

  EXPECT_EQ(max_finite(DType::kF64), DBL_MAX);
  EXPECT_EQ(min_normal(DType::kF64), DBL_MIN);
  EXPECT_EQ(min_subnormal(DType::kF64), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(max_finite(DType::kF32), FLT_MAX);
  EXPECT_EQ(min_normal(DType::kF32), FLT_MIN);
  EXPECT_EQ(min_subnormal(DType::kF32), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(max_finite(DType::kTF32), from_bits(0x7F7FE000));
  EXPECT_EQ(min_normal(DType::kTF32), FLT_MIN);
  EXPECT_EQ(min_subnormal(DType::kTF32), from_bits(0x00002000));
  // The narrow formats' constants are the decoded extreme patterns (CUDA's decoders).
  EXPECT_EQ(max_finite(DType::kF16), 65504.0);
  EXPECT_EQ(max_finite(DType::kF16), cuda_f16_to_f32(0x7BFF));
  EXPECT_EQ(min_normal(DType::kF16), cuda_f16_to_f32(0x0400));
  EXPECT_EQ(min_subnormal(DType::kF16), cuda_f16_to_f32(0x0001));
  EXPECT_EQ(max_finite(DType::kBF16), cuda_bf16_to_f32(0x7F7F));
  EXPECT_EQ(min_normal(DType::kBF16), cuda_bf16_to_f32(0x0080));
  EXPECT_EQ(min_subnormal(DType::kBF16), cuda_bf16_to_f32(0x0001));
  EXPECT_EQ(max_finite(DType::kE4M3), 448.0);
  EXPECT_EQ(max_finite(DType::kE4M3), cuda_e4m3_to_f32(0x7E));
  EXPECT_EQ(min_normal(DType::kE4M3), cuda_e4m3_to_f32(0x08));
  EXPECT_EQ(min_subnormal(DType::kE4M3), cuda_e4m3_to_f32(0x01));
  EXPECT_EQ(max_finite(DType::kE5M2), 57344.0);
  EXPECT_EQ(max_finite(DType::kE5M2), cuda_e5m2_to_f32(0x7B));
  EXPECT_EQ(min_normal(DType::kE5M2), cuda_e5m2_to_f32(0x04));
  EXPECT_EQ(min_subnormal(DType::kE5M2), cuda_e5m2_to_f32(0x01));
  EXPECT_EQ(max_finite(DType::kI8), 127.0);
  EXPECT_EQ(max_finite(DType::kI32), 2147483647.0);
  for (DType t : {DType::kI8, DType::kI32}) {
    EXPECT_EQ(min_normal(t), 0.0);
    EXPECT_EQ(min_subnormal(t), 0.0);
  }
}

}  // namespace
}  // namespace assay
