// value_core::normal_approx, the device draw's cheap evaluation of the normal class: its
// difference from base_value stays far inside its err (the margin the store's interval test
// rests on), and the store's decision (the same bits at x - err and x + err, or base_value)
// gives base_value's bits in every format the device draws: the device's own normal_bits and
// stored_bits (materialize_device_kernels.h), run here on the host. The device kernel's bytes
// are MaterializeDeviceGpu's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "harness/gpu/materialize_device_kernels.h"
#include "harness/value_core.h"

namespace assay {
namespace {

using value_core::Recipe;

Recipe normal(uint64_t seed, double scale) {
  Recipe r;
  r.cls = value_core::kNormal;
  r.seed = seed;
  r.scale = scale;
  return r;
}

double exact(const Recipe& r, uint64_t stream, uint64_t i) {
  return value_core::base_value(r, value_core::Shape{}, stream, i, 0);
}

TEST(ValuesApprox, NormalWithinItsBound) {
  // err is 2^-40 of |scale sqrt(-2 log u)|; the analysis in value_core.h puts the difference
  // under 2^-43.9 of it. Held here to 2^-4 of err (2^-44), over 2^21 draws at two scales.
  double worst = 0;
  for (double scale : {1.0, 3.0e-5}) {
    const Recipe r = normal(41, scale);
    for (uint64_t i = 0; i < (uint64_t{1} << 20); ++i) {
      const value_core::Approx a = value_core::normal_approx(r, 7, i);
      const double d = std::fabs(a.x - exact(r, 7, i));
      ASSERT_LE(d, a.err / 16) << "element " << i << " scale " << scale << ": " << a.x << " vs " << exact(r, 7, i);
      worst = std::fmax(worst, d / a.err);
    }
  }
  std::printf("[ measured ] normal_approx: largest |x - base_value| / err over 2^21 draws: 2^%.1f\n", std::log2(worst));
}

TEST(ValuesApprox, SeriesAtTheirEnds) {
  // log: u at the top of (0, 1) (log u ~ -2^-53, s tiny), at each side of a power of two (s at
  // -1/3 and near 0) and the smallest unit_open value; relative difference under 2^-46.
  const double us[] = {1.0 - 0x1p-53, 1.0 - 0x1p-40, 0.5, 0.5 + 0x1p-53, 0.5 - 0x1p-54, 0.75, 0x1p-54, 0x1.fffffp-30};
  for (double u : us) {
    const double e = value_core::det_log(u), a = value_core::log_approx(u);
    EXPECT_LE(std::fabs(a - e), 0x1p-46 * std::fabs(e)) << "u = " << u;
  }
  // cos and sin over [0, pi/2): both ends and across; absolute difference under 2^-44.
  for (int k = 0; k <= 4096; ++k) {
    const double phi = k == 4096 ? std::nextafter(1.57079632679489661923, 0.0) : 1.57079632679489661923 * k / 4096;
    double c, s, ca, sa;
    value_core::cos_sin_series(phi, c, s);
    value_core::cos_sin_approx(phi, ca, sa);
    ASSERT_LE(std::fabs(ca - c), 0x1p-44) << "cos at " << phi;
    ASSERT_LE(std::fabs(sa - s), 0x1p-44) << "sin at " << phi;
  }
}

using gpu::detail::DevElem;

TEST(ValuesApprox, IntervalDecisionGivesBaseValuesBits) {
  // Scales that put the values in each format's normal range, past its largest finite value and
  // among its subnormals. Where the decision takes x, the bits must be base_value's; it must
  // take x almost always, or the draw pays for both evaluations.
  struct Run {
    DevElem f;
    const char* name;
    double scale, most_fallbacks;
  };
  const Run runs[] = {{DevElem::kF32, "fp32", 1.0, 1e-3},
                      {DevElem::kF32, "fp32 overflow", 1.5e38, 1e-3},
                      {DevElem::kF32, "fp32 subnormal", 1e-41, 1e-3},
                      {DevElem::kF16, "fp16", 3e4, 1e-4},
                      {DevElem::kBF16, "bf16", 3.0, 1e-4},
                      {DevElem::kE4M3, "e4m3", 300.0, 1e-4},
                      {DevElem::kE5M2, "e5m2", 3e4, 1e-4},
                      {DevElem::kI8, "int8", 100.0, 1e-4}};
  constexpr uint64_t kDraws = uint64_t{1} << 18;
  for (const Run& run : runs) {
    const Recipe r = normal(97, run.scale);
    uint64_t fallbacks = 0;
    for (uint64_t i = 0; i < kDraws; ++i) {
      uint32_t bits = 0;
      if (!gpu::detail::normal_bits(r, 3, i, run.f, bits)) {
        ++fallbacks;
        continue;
      }
      ASSERT_EQ(bits, gpu::detail::stored_bits(run.f, static_cast<float>(exact(r, 3, i))))
          << run.name << " element " << i;
    }
    const double rate = static_cast<double>(fallbacks) / kDraws;
    std::printf("[ measured ] normal_approx %s: base_value needed for %llu of %llu draws\n", run.name,
                static_cast<unsigned long long>(fallbacks), static_cast<unsigned long long>(kDraws));
    EXPECT_LE(rate, run.most_fallbacks) << run.name;
  }
}

}  // namespace
}  // namespace assay
