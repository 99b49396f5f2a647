// rope's fp64 device reference (references/device/rope_f64.cu, OpDef::device_reference of
// properties/rope.cpp) against the host reference and bound on generated cases the engine takes
// the device path for: fp32, fp16 and bf16, both layouts, both directions, positions up to 4095,
// NaN / Inf injections. The bound's terms are the same __host__ __device__ code on both sides;
// the transcendental functions are not: CUDA's fp64 pow, cos, sin and hypot are within 2 ulps
// where glibc's are within 1, and an error of a few ulps in the angle theta <= t moves an output
// by up to t (|a| + |b|) times them, far more than its own ulps where it cancels (cos theta near
// 0). So each output is held to 4 fp64 ulps of |ref| + mag + (t + 1)(|a| + |b|), its magnitude
// plus that sensitivity (|a| + |b| <= the pair's two mags added, (|a| + |b|)(|cos| + |sin|)), and
// the tolerances to 1e-8 relative (their angle term is a difference of two powers, |powf - pow|,
// whose few ulps are a larger share of it), with the same NaN / Inf pattern; the worst figures
// are printed. Then the engine: the correct kernel passes with the verdict naming the device
// reference, both paths timed, and the planted bug is caught on this path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

std::vector<Case> rope_cases(int want, uint64_t seed, int64_t max_dim, int64_t min_elems = 0) {
  return test_util::device_path_cases("rope", want, seed, max_dim, 400 * int64_t{want}, [&](const Params& p) {
    return p.i("tokens") * p.i("heads") * p.i("head_dim") >= min_elems;
  });
}

TEST(RopeDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("rope");
  const std::vector<Case> cases = rope_cases(120, 51, 4096);
  ASSERT_GE(cases.size(), 80u);
  int64_t interleaved = 0, inverse = 0, far = 0;
  for (const Case& c : cases) {
    const Params p(c.params);
    interleaved += p.b("interleaved") ? 1 : 0;
    inverse += p.b("inverse") ? 1 : 0;
    far += p.i("tokens") > 1024 ? 1 : 0;
  }
  // Element l of a case: row l / d at position row / heads; its pair's other element.
  const test_util::CaseScale scale_for = [](const Case& c) -> test_util::RefScale {
    const Params p(c.params);
    const int64_t heads = p.i("heads"), d = p.i("head_dim"), half = d / 2;
    const bool interleaved = p.b("interleaved");
    return [=](size_t o, size_t l, const std::vector<OutputRef>& h) {
      const int64_t e = static_cast<int64_t>(l), r = e / d, j = e % d, t = r / heads;
      const int64_t partner = interleaved ? (j ^ 1) : (j < half ? j + half : j - half);
      const double mag = h[o].aux[0][l], other = h[o].aux[0][static_cast<size_t>(r * d + partner)];
      const double sensitivity = std::isfinite(mag + other) ? static_cast<double>(t + 1) * (mag + other) : 0.0;
      return test_util::ref_and_aux_magnitude(o, l, h) + sensitivity;
    };
  };
  const int64_t nonfinite =
      test_util::expect_device_reference_matches(op, cases, {{"default", Contract()}}, 4, scale_for, 1e-8);
  if (HasFailure()) return;
  EXPECT_GT(nonfinite, 0) << "no case with NaN / Inf references or unbounded elements";
  EXPECT_GT(interleaved, 0) << "no interleaved case";
  EXPECT_LT(interleaved, static_cast<int64_t>(cases.size())) << "no half-split case";
  EXPECT_GT(inverse, 0) << "no inverse case";
  EXPECT_GT(far, 0) << "no case with positions past 1024";
  std::printf("[ measured ] rope: %zu cases, %lld interleaved, %lld inverse, %lld with positions past 1024\n",
              cases.size(), static_cast<long long>(interleaved), static_cast<long long>(inverse),
              static_cast<long long>(far));
}

TEST(RopeDeviceRefGpu, EngineTakesTheDevicePathAndTheCorrectKernelPasses) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  test_util::expect_engine_device_path(test_util::model_op("rope"), {find_variant("rope", "pairwise")},
                                       rope_cases(60, 52, 256), 60);
}

// Large cases (2^18 elements and up, positions to 4095): what the device path saves per case.
TEST(RopeDeviceRefGpu, EngineTimesBothPathsOnLargeCases) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = rope_cases(20, 53, 4096, int64_t{1} << 18);
  ASSERT_GE(cases.size(), 10u);
  test_util::expect_engine_device_path(test_util::model_op("rope"), {find_variant("rope", "pairwise")}, cases, 10);
}

TEST(RopeDeviceRefGpu, PlantedBugIsCaughtOnTheDevicePath) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const std::vector<Case> cases = rope_cases(80, 54, 256);
  ASSERT_GE(cases.size(), 40u);
  const auto [ran, failed] =
      test_util::run_on_device_path(test_util::model_op("rope"), "mutant_rope_wrong_pairing", cases, **lane);
  EXPECT_GT(failed, 0) << "mutant_rope_wrong_pairing passed every one of " << ran << " device-path cases";
}

}  // namespace
}  // namespace assay
