// The gradcheck relation on the device path: its sums are reduced on the device
// (DeviceReference::properties), from J u evaluated beside the device reference (conv's
// backward passes: the forward at u; attention_bwd: differences of the fp64 forward) and the
// kernel's gradients. On generated gradcheck cases that take the device path, the correct
// variant passes with the relation run (no not-run note for it), and a planted bug whose
// gradients are wrong fails the projection check there too.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "properties/gradcheck_relation.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

struct GradOp {
  const char* op;
  const char* good;
  const char* bad;  ///< a planted bug in the gradient the relation differentiates
};

class GradcheckDevicePathGpu : public ::testing::TestWithParam<GradOp> {};

TEST_P(GradcheckDevicePathGpu, RunsOnTheDeviceReferenceAndCatchesTheMutant) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const GradOp g = GetParam();
  const OpSpec* spec = find_spec(g.op);
  ASSERT_NE(spec, nullptr);
  const OpDef& op = test_util::model_op(g.op);
  const VariantDef* good = find_variant(g.op, g.good);
  const VariantDef* bad = find_variant(g.op, g.bad);
  ASSERT_NE(good, nullptr);
  ASSERT_NE(bad, nullptr);
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  int64_t cases = 0, passed = 0, projection = 0, caught = 0;
  for (int64_t i = 0; cases < 40 && i < 20000; ++i) {
    const Case c = generate_case(*spec, GenPlan{7, GenConfig{64}}, i);
    if (!wants_gradcheck(c) || !op.device_reference.when(Params(c.params))) continue;
    ++cases;
    auto r = run_model(op, {good}, c, **lane, false);
    ASSERT_TRUE(r.ok()) << c.summary() << ": " << r.status().message();
    const Verdict& v = r->front();
    EXPECT_EQ(v.metrics.reference, op.device_reference.name) << c.summary();
    EXPECT_EQ(v.metrics.not_run.find("relation"), std::string::npos) << c.summary() << ": " << v.metrics.not_run;
    EXPECT_TRUE(v.passed()) << c.summary() << ": " << v.summary();
    passed += v.passed() ? 1 : 0;
    auto rb = run_model(op, {bad}, c, **lane, false);
    ASSERT_TRUE(rb.ok()) << c.summary() << ": " << rb.status().message();
    const Verdict& vb = rb->front();
    caught += vb.passed() ? 0 : 1;
    for (const Failure& f : vb.failures) projection += f.kind == FailureKind::kProjection ? 1 : 0;
  }
  std::printf("[ measured ] %s gradcheck on the device path: %lld cases, %s passes %lld; %s fails %lld, the "
              "projection check among its failures in %lld\n",
              g.op, static_cast<long long>(cases), g.good, static_cast<long long>(passed), g.bad,
              static_cast<long long>(caught), static_cast<long long>(projection));
  EXPECT_GE(cases, 20);
  EXPECT_GT(projection, 0) << "the relation never failed the planted bug on the device path";
}

INSTANTIATE_TEST_SUITE_P(Ops, GradcheckDevicePathGpu,
                         ::testing::Values(GradOp{"conv2d_bwd_filter", "direct", "mutant_conv_bwd_filter_last_batch"},
                                           GradOp{"attention_bwd", "flash", "mutant_attn_dv_wrong_row"}),
                         [](const ::testing::TestParamInfo<GradOp>& i) { return std::string(i.param.op); });

}  // namespace
}  // namespace assay
