// The softmax device reference (references/device/softmax_f64.cu, OpDef::device_reference of
// properties/softmax.cpp) against the host reference and bound, on generated cases where the
// engine takes the device path (softmax and log-softmax, fp32, fp16 and bf16, masked rows,
// +Inf / NaN injections), under three contracts: the default, the masked-attention convention,
// and cuDNN's (fast-math, fp16/bf16 intermediates, masked rows by length, log-sum-exp first).
// Both run the host reference's steps with the two sums in the same order; CUDA's exp and log
// (1 ulp) stand in for the host libm's, so the references agree to a few fp64 ulps of |y| + the
// magnitude and the tolerances to 1e-12 relative, with the same NaN / Inf pattern. Then the
// engine itself: the online kernel passes such cases with the verdict naming the device
// reference, and the planted bugs that overflow or skip a tail are caught on this path.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>

#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

/// Up to `want` generated cases the device path takes with rows x n in [min_elems, max_elems]
/// (max_dim 256 by default: from 1024 elements, the threshold, to 65536).
std::vector<Case> device_cases(int want, uint64_t seed, int64_t max_elems = INT64_MAX, int64_t max_dim = 256,
                               int64_t min_elems = 0) {
  const OpSpec* spec = find_spec("softmax");
  const OpDef* op = find_op("softmax");
  std::vector<Case> out;
  if (spec == nullptr || op == nullptr) return out;
  for (int64_t i = 0; static_cast<int>(out.size()) < want && i < 400 * want; ++i) {
    Case c = generate_case(*spec, GenPlan{seed, GenConfig{max_dim}}, i);
    const Params p(c.params);
    const int64_t elems = p.i("rows") * p.i("n");
    if (op->device_reference.when(p) && elems <= max_elems && elems >= min_elems) out.push_back(std::move(c));
  }
  return out;
}

TEST(SoftmaxDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("softmax");
  const std::vector<Case> cases = device_cases(150, 21);
  ASSERT_GE(cases.size(), 100u);
  // |y| + y|t| (softmax) or |z| + |t| (log-softmax): what a few ulps of exp, of Z and of log Z
  // move the value by; plus fp64's smallest normal, where exp(t) underflows (t near -745 the host
  // libm gives the smallest subnormal, CUDA's exp 0): 10^-308, far below the bound's own fp64
  // underflow floor.
  const test_util::RefScale scale = [](size_t, size_t l, const std::vector<OutputRef>& h) {
    const double mag = h[0].aux[0][l];
    return std::fabs(h[0].ref[l]) + (std::isfinite(mag) ? mag : 0.0) + DBL_MIN;
  };
  const std::vector<std::pair<const char*, Contract>> contracts = {
      {"default", Contract()},
      {"masked rows zero", Contract().convention("masked_rows_zero")},
      {"cuDNN's", Contract()
                      .fast_math()
                      .narrow_intermediates()
                      .convention("masked_rows_by_length")
                      .convention("log_softmax_lse_first")}};
  int64_t logs = 0, masked = 0;
  for (const Case& c : cases) {
    const Params p(c.params);
    logs += p.b("log") ? 1 : 0;
    masked += p.i("masked_every", 0) > 0 ? 1 : 0;
  }
  for (const auto& [what, k] : contracts) {
    test_util::DeviceRefStats st;
    for (const Case& c : cases) {
      ASSERT_NO_FATAL_FAILURE(test_util::check_device_reference(op, c, k, 8, scale, 1e-12, st)) << what;
      if (HasFailure()) break;
    }
    EXPECT_GT(st.by_dtype[0], 0);
    EXPECT_GT(st.by_dtype[1], 0) << "no fp16 case";
    EXPECT_GT(st.by_dtype[2], 0) << "no bf16 case";
    std::printf("[ measured ] contract %s: %s\n", what, st.summary("softmax").c_str());
  }
  EXPECT_GT(logs, 0) << "no log-softmax case";
  EXPECT_GT(masked, 0) << "no masked-row case";
  std::printf("[ measured ] %lld of %zu cases log-softmax, %lld with masked rows\n", static_cast<long long>(logs),
              cases.size(), static_cast<long long>(masked));
}

TEST(SoftmaxDeviceRefGpu, EngineTakesTheDevicePathAndTheOnlineKernelPasses) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  test_util::expect_engine_device_path(test_util::model_op("softmax"), {find_variant("softmax", "online")},
                                       device_cases(60, 22), 60);
}

// Cases just above the threshold (1024 to 2048 elements): the printed device-path and host-path
// times per case say whether properties/softmax.cpp kDeviceRefElems sits where the two cost the same.
TEST(SoftmaxDeviceRefGpu, EngineTimesBothPathsNearTheThreshold) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = device_cases(60, 23, 2048, 64);
  ASSERT_GE(cases.size(), 20u);
  test_util::expect_engine_device_path(test_util::model_op("softmax"), {find_variant("softmax", "online")}, cases,
                                       20);
}

// Large cases (2^18 elements and up, rows up to 16384 long): what the device path saves per case
// where the host reference is the lane's largest cost.
TEST(SoftmaxDeviceRefGpu, EngineTimesBothPathsOnLargeCases) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = device_cases(20, 25, INT64_MAX, 16384, int64_t{1} << 18);
  ASSERT_GE(cases.size(), 10u);
  test_util::expect_engine_device_path(test_util::model_op("softmax"), {find_variant("softmax", "online")}, cases,
                                       10);
}

// The planted bugs on the device path: exp(x) without the max overflows on large logits, and a
// skipped vector tail leaves poison in the last n % 4 (or % 8) columns of aligned rows. Each is
// caught on some of the cases, every verdict naming the device reference.
TEST(SoftmaxDeviceRefGpu, PlantedBugsAreCaughtOnTheDevicePath) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const OpDef& op = test_util::model_op("softmax");
  const std::vector<Case> cases = device_cases(60, 24);
  ASSERT_GE(cases.size(), 40u);
  for (const char* name : {"mutant_softmax_no_max", "mutant_softmax_vec_tail"}) {
    const VariantDef* v = find_variant("softmax", name);
    ASSERT_NE(v, nullptr) << name;
    int64_t ran = 0, failed = 0;
    for (const Case& c : cases) {
      auto r = run_model(op, {v}, c, **lane, false);
      ASSERT_TRUE(r.ok()) << c.summary() << ": " << r.status().message();
      for (const Verdict& vd : *r) {
        if (!vd.not_applicable.empty()) continue;
        ++ran;
        failed += vd.passed() ? 0 : 1;
        EXPECT_EQ(vd.metrics.reference, op.device_reference.name) << c.summary();
      }
    }
    EXPECT_GT(failed, 0) << name << " passed every one of " << ran << " device-path cases";
    std::printf("[ measured ] %s on the device path: failed %lld of %lld cases\n", name, static_cast<long long>(failed),
                static_cast<long long>(ran));
  }
}

}  // namespace
}  // namespace assay
