// The LayerNorm and RMSNorm forward device reference (references/device/norms_f64.cu,
// OpDef::device_reference of properties/norms.cpp) against the host reference and bound, on
// generated cases where the engine takes the device path (fp32, fp16 and bf16, constant and zero
// rows, +Inf / NaN injections, LayerNorm with and without beta, its shift relation among them),
// under the default contract and fast math. Both run the host reference's steps with every sum in
// the same order and the bound through the same functions (harness/bound_core.h), with IEEE
// operations only (+, -, *, /, sqrt): the references and tolerances are expected to have the
// host's bits, and are held to 1 fp64 ulp of the magnitude and 1e-14 relative, with the same
// NaN / Inf pattern. The host images reach the device already prepared; the device's own
// constant rows are checked against the host prepare separately. Then the engine itself: the
// correct kernels pass such cases with the verdict naming the device reference, both paths timed,
// and the planted bugs (one-pass variance, rsqrt without eps) are caught on this path.
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

const char* const kOps[] = {"layernorm", "rmsnorm"};

/// The correct kernel of each op.
const VariantDef* correct_variant(const std::string& op) {
  return find_variant(op, op == "layernorm" ? "welford" : "rowwise");
}

TEST(NormsDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  // |ref| plus its terms' magnitude where the reference keeps one (y: |gamma xhat|; the mean:
  // mean|x|; RMSNorm's rstd: mean(x^2)), plus fp64's smallest normal for zeros.
  const test_util::RefScale scale = test_util::ref_and_aux_magnitude;
  const std::vector<std::pair<const char*, Contract>> contracts = {{"default", Contract()},
                                                                   {"fast math", Contract().fast_math()}};
  for (const char* name : kOps) {
    const OpDef& op = test_util::model_op(name);
    const std::vector<Case> cases = test_util::rowwise_cases(name, 120, 31);
    ASSERT_GE(cases.size(), 80u) << name;
    int64_t constant = 0, zero_rows = 0, bias = 0, shift = 0;
    for (const Case& c : cases) {
      const Params p(c.params);
      const int64_t every = p.i("constant_every", 0);
      constant += every > 0 ? 1 : 0;
      zero_rows += every > 0 && every % 2 == 0 ? 1 : 0;
      bias += p.has("bias") && p.i("bias") != 0 ? 1 : 0;
      shift += p.s("relation") == "shift" ? 1 : 0;
    }
    // Cases whose host reference has a NaN or Inf (injections, overflow) or an unbounded element.
    const int64_t nonfinite = test_util::expect_device_reference_matches(op, cases, contracts, 1, scale, 1e-14);
    if (HasFailure()) return;
    EXPECT_GT(nonfinite, 0) << name << ": no case with NaN / Inf references or unbounded elements";
    EXPECT_GT(constant, 0) << name << ": no constant-row case";
    if (std::string(name) == "rmsnorm") {
      EXPECT_GT(zero_rows, 0) << "no zero-row case";
    }
    if (std::string(name) == "layernorm") {
      EXPECT_GT(bias, 0) << "no case with beta";
      EXPECT_LT(bias, static_cast<int64_t>(cases.size())) << "no case without beta";
    }
    std::printf("[ measured ] %s: %zu cases, %lld with constant rows (%lld zero), %lld with beta, %lld shift\n", name,
                cases.size(), static_cast<long long>(constant), static_cast<long long>(zero_rows),
                static_cast<long long>(bias), static_cast<long long>(shift));
  }
}

// The device prepare writes prepare's constant rows (zero rows for RMSNorm's even constant_every)
// into the drawn snapshot: from the unprepared images, the device's X must be the host prepare's.
// compute leaves the inputs as they are (the engine may run it more than once on a snapshot).
TEST(NormsDeviceRefGpu, ConstantRowsOnTheDeviceAreThePrepares) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  for (const char* name : kOps) {
    const OpDef& op = test_util::model_op(name);
    int64_t checked = 0;
    for (const Case& c : test_util::rowwise_cases(name, 120, 32)) {
      if (Params(c.params).i("constant_every", 0) <= 0) continue;
      Case bare = c;
      bare.params.erase("constant_every");
      const test_util::ModelHostRun before = test_util::model_host_run(op, bare),
                                    after = test_util::model_host_run(op, c);
      test_util::DeviceRefBuffers b;
      ASSERT_NO_FATAL_FAILURE(test_util::upload_for_device_ref(c, before.images, after.outs, b));
      const Status s = op.device_reference.prepare(c, b.in, DeviceContext{});
      ASSERT_TRUE(s.ok()) << c.summary() << ": " << s.message();
      ASSERT_TRUE(op.device_reference.compute(c, Arithmetic(), b.in, b.douts, DeviceContext{}).ok());
      const auto& d = c.tensors[0].desc;
      std::vector<unsigned char> x(static_cast<size_t>(d.extent()) * dtype_size(d.dtype));
      ASSERT_EQ(cudaMemcpy(x.data(), b.dev[0], x.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t i = 0; i < d.extent(); ++i) {
        const double got = load_as_double(d.dtype, x.data() + i * static_cast<int64_t>(dtype_size(d.dtype)));
        const double want = after.host[0][static_cast<size_t>(i)];
        ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
            << c.summary() << ": X element " << i << " is " << got << " on the device, " << want << " prepared";
      }
      ++checked;
    }
    EXPECT_GT(checked, 0) << name << ": no constant-row case";
    std::printf("[ measured ] %s: %lld constant-row cases prepared on the device as on the host\n", name,
                static_cast<long long>(checked));
  }
}

TEST(NormsDeviceRefGpu, EngineTakesTheDevicePathAndTheCorrectKernelsPass) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  for (const char* name : kOps)
    test_util::expect_engine_device_path(test_util::model_op(name), {correct_variant(name)},
                                         test_util::rowwise_cases(name, 60, 33), 60);
}

// Cases just above the threshold (1024 to 2048 elements): the printed device-path and host-path
// times per case say whether properties/rowwise_values.h kRowwiseDeviceRefElems sits where the
// two cost the same.
TEST(NormsDeviceRefGpu, EngineTimesBothPathsNearTheThreshold) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  for (const char* name : kOps) {
    const std::vector<Case> cases = test_util::rowwise_cases(name, 60, 34, 2048, 64);
    ASSERT_GE(cases.size(), 20u) << name;
    test_util::expect_engine_device_path(test_util::model_op(name), {correct_variant(name)}, cases, 20);
  }
}

// Large cases (2^18 elements and up, rows up to 16384 long): what the device path saves per case
// where the host reference and bound are the lane's largest cost.
TEST(NormsDeviceRefGpu, EngineTimesBothPathsOnLargeCases) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  for (const char* name : kOps) {
    const std::vector<Case> cases = test_util::rowwise_cases(name, 20, 35, INT64_MAX, 16384, int64_t{1} << 18);
    ASSERT_GE(cases.size(), 10u) << name;
    test_util::expect_engine_device_path(test_util::model_op(name), {correct_variant(name)}, cases, 10);
  }
}

// The planted bugs on the device path: a one-pass E[x^2] - E[x]^2 variance breaks on rows of a
// large mean over a small spread, an rsqrt without eps on zero and tiny rows. Each is caught on
// some of the cases, every verdict naming the device reference.
TEST(NormsDeviceRefGpu, PlantedBugsAreCaughtOnTheDevicePath) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const std::pair<const char*, const char*> planted[] = {{"layernorm", "mutant_layernorm_one_pass"},
                                                         {"rmsnorm", "mutant_rmsnorm_no_eps"}};
  for (const auto& [name, mutant] : planted) {
    const OpDef& op = test_util::model_op(name);
    const std::vector<Case> cases = test_util::rowwise_cases(name, 80, 36);
    ASSERT_GE(cases.size(), 40u) << name;
    const auto [ran, failed] = test_util::run_on_device_path(op, mutant, cases, **lane);
    EXPECT_GT(failed, 0) << mutant << " passed every one of " << ran << " device-path cases";
  }
}

}  // namespace
}  // namespace assay
