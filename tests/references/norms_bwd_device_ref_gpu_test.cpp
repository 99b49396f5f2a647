// The LayerNorm and RMSNorm backward device reference (references/device/norms_bwd_f64.cu,
// OpDef::device_reference of properties/norms.cpp) against the host reference and bound, on
// generated cases where the engine takes the device path (fp32, fp16 and bf16, constant and zero
// rows, LayerNorm with and without dbeta), under the default contract, flush-to-zero alone and
// fast math. Both run backward.h's steps with every sum in the same order and bound_bwd's
// formulas with its constants (bwd_constants), IEEE operations only: the references and
// tolerances are expected to have the host's bits, and are held to 1 fp64 ulp of the magnitude
// and 1e-14 relative. The device prepare writes the saved statistics into the snapshot: from
// unprepared images they must be the host prepare's, bit for bit. Then the engine: the correct
// kernels pass with the verdict naming the device reference, both paths timed; the planted bugs
// are caught on this path; a variant that accumulates dgamma takes the host path.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

const char* const kBwdOps[] = {"layernorm_bwd", "rmsnorm_bwd"};

TEST(NormsBwdDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  // |ref| plus the terms' magnitude backward.h keeps (dx_mag, dgamma_mag, dbeta_mag), plus
  // fp64's smallest normal for zeros.
  const test_util::RefScale scale = test_util::ref_and_aux_magnitude;
  const std::vector<std::pair<const char*, Contract>> contracts = {
      {"default", Contract()}, {"flush-to-zero", Contract().ftz()}, {"fast math", Contract().fast_math()}};
  for (const char* name : kBwdOps) {
    const OpDef& op = test_util::model_op(name);
    const std::vector<Case> cases = test_util::rowwise_cases(name, 120, 41);
    ASSERT_GE(cases.size(), 80u) << name;
    int64_t constant = 0, zero_rows = 0, bias = 0;
    for (const Case& c : cases) {
      const Params p(c.params);
      const int64_t every = p.i("constant_every", 0);
      constant += every > 0 ? 1 : 0;
      zero_rows += every > 0 && every % 2 == 0 ? 1 : 0;
      bias += p.has("bias") && p.i("bias") != 0 ? 1 : 0;
    }
    test_util::expect_device_reference_matches(op, cases, contracts, 1, scale, 1e-14);
    if (HasFailure()) return;
    EXPECT_GT(constant, 0) << name << ": no constant-row case";
    if (std::string(name) == "rmsnorm_bwd") EXPECT_GT(zero_rows, 0) << "no zero-row case";
    if (std::string(name) == "layernorm_bwd") {
      EXPECT_GT(bias, 0) << "no case with dbeta";
      EXPECT_LT(bias, static_cast<int64_t>(cases.size())) << "no case without dbeta";
    }
    std::printf("[ measured ] %s: %zu cases, %lld with constant rows (%lld zero)\n", name, cases.size(),
                static_cast<long long>(constant), static_cast<long long>(zero_rows));
  }
}

// The device prepare writes prepare's work into the snapshot (constant rows, then the saved
// statistics as a correct forward stores them): from images drawn but not prepared, the device's
// X, mean and rstd must be the host prepare's, bit for bit, after compute too (which must leave
// the inputs as they are).
TEST(NormsBwdDeviceRefGpu, SavedStatisticsOnTheDeviceAreThePrepares) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  for (const char* name : kBwdOps) {
    const OpDef& op = test_util::model_op(name);
    OpDef bare = op;
    bare.prepare = nullptr;
    int64_t checked = 0, constant = 0, elements = 0;
    for (const Case& c : test_util::rowwise_cases(name, 60, 42)) {
      const test_util::ModelHostRun before = test_util::model_host_run(bare, c),
                                    after = test_util::model_host_run(op, c);
      test_util::DeviceRefBuffers b;
      ASSERT_NO_FATAL_FAILURE(test_util::upload_for_device_ref(c, before.images, after.outs, b));
      DeviceContext ctx;
      ctx.scratch_bytes = op.device_reference.scratch(c);
      ASSERT_EQ(cudaMalloc(&ctx.scratch, static_cast<size_t>(ctx.scratch_bytes)), cudaSuccess);
      b.dev.push_back(ctx.scratch);
      const Status s = op.device_reference.prepare(c, b.in, ctx);
      ASSERT_TRUE(s.ok()) << c.summary() << ": " << s.message();
      ASSERT_TRUE(op.device_reference.compute(c, Arithmetic(), b.in, b.douts, ctx).ok()) << c.summary();
      // X, then the statistics: LayerNorm's mean and rstd, RMSNorm's rstd.
      const std::vector<size_t> prepared =
          std::string(name) == "layernorm_bwd" ? std::vector<size_t>{0, 3, 4} : std::vector<size_t>{0, 3};
      for (size_t t : prepared) {
        const auto& d = c.tensors[t].desc;
        std::vector<unsigned char> img(static_cast<size_t>(d.extent()) * dtype_size(d.dtype));
        ASSERT_EQ(cudaMemcpy(img.data(), b.dev[t], img.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(std::memcmp(img.data(), after.images[t].data(), img.size()), 0)
            << c.summary() << ": tensor " << c.tensors[t].name << " differs from the host prepare's";
        elements += d.extent();
      }
      constant += Params(c.params).i("constant_every", 0) > 0 ? 1 : 0;
      ++checked;
    }
    EXPECT_GT(checked, 30) << name;
    EXPECT_GT(constant, 0) << name << ": no constant-row case";
    std::printf("[ measured ] %s: %lld cases (%lld with constant rows) prepared on the device as on the host, %lld "
                "elements bit for bit\n",
                name, static_cast<long long>(checked), static_cast<long long>(constant),
                static_cast<long long>(elements));
  }
}

TEST(NormsBwdDeviceRefGpu, EngineTakesTheDevicePathAndTheCorrectKernelsPass) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  for (const char* name : kBwdOps)
    test_util::expect_engine_device_path(test_util::model_op(name), {find_variant(name, "rowwise")},
                                         test_util::rowwise_cases(name, 60, 43), 60);
}

// Large cases (2^18 elements and up, rows up to 16384 long): what the device path saves per case.
TEST(NormsBwdDeviceRefGpu, EngineTimesBothPathsOnLargeCases) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  for (const char* name : kBwdOps) {
    const std::vector<Case> cases = test_util::rowwise_cases(name, 20, 44, INT64_MAX, 16384, int64_t{1} << 18);
    ASSERT_GE(cases.size(), 10u) << name;
    test_util::expect_engine_device_path(test_util::model_op(name), {find_variant(name, "rowwise")}, cases, 10);
  }
}

// The planted bugs of tests/mutants/rowwise/ on the device path, each caught on some cases. The
// race needs the block-per-row path (rows longer than 1024): its cases are drawn that long.
TEST(NormsBwdDeviceRefGpu, PlantedBugsAreCaughtOnTheDevicePath) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const std::pair<const char*, const char*> planted[] = {{"layernorm_bwd", "mutant_layernorm_dbeta_skip_last_row"},
                                                         {"layernorm_bwd", "mutant_layernorm_bwd_race"},
                                                         {"rmsnorm_bwd", "mutant_rmsnorm_bwd_no_projection"}};
  for (const auto& [name, mutant] : planted) {
    const OpDef& op = test_util::model_op(name);
    const bool long_rows = std::string(mutant) == "mutant_layernorm_bwd_race";
    const std::vector<Case> cases =
        long_rows
            ? test_util::device_path_cases(name, 60, 45, 4096, 24000, [](const Params& p) { return p.i("n") > 1024; })
            : test_util::rowwise_cases(name, 80, 45);
    ASSERT_GE(cases.size(), 40u) << name;
    const auto [ran, failed] = test_util::run_on_device_path(op, mutant, cases, **lane);
    EXPECT_GT(failed, 0) << mutant << " passed every one of " << ran << " device-path cases";
  }
}

// A variant that accumulates dgamma into its prefill (atomics across rows) gets its expectation
// from the host (prefill + result, the per-term roundings): on a case the device path would take
// it runs on the host path and passes, where it used to be refused.
TEST(NormsBwdDeviceRefGpu, AnAccumulatingVariantTakesTheHostPath) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const OpDef& op = test_util::model_op("rmsnorm_bwd");
  VariantDef atomic = *find_variant("rmsnorm_bwd", "rowwise");
  atomic.name = "rowwise_declared_accumulating";
  atomic.contract = Contract().accumulates("dgamma");
  int64_t host = 0;
  for (const Case& c : test_util::rowwise_cases("rmsnorm_bwd", 10, 46)) {
    auto v = run_model(op, {&atomic}, c, **lane, false);
    ASSERT_TRUE(v.ok()) << c.summary() << ": " << v.status().message();
    ASSERT_EQ(v->size(), 1u);
    // The verdict itself is not the point: the rowwise kernel overwrites dgamma, so declared
    // as accumulating it misses the prefill. The case must run, and on the host reference.
    EXPECT_EQ((*v)[0].metrics.reference, "host-f64") << c.summary();
    host += (*v)[0].metrics.reference == "host-f64" ? 1 : 0;
  }
  EXPECT_EQ(host, 10);
}

}  // namespace
}  // namespace assay
