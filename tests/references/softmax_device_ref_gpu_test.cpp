// The softmax device reference (references/device/softmax_f64.cu, OpDef::device_reference of
// properties/softmax.cpp) against the host reference and bound, on generated cases where the
// engine takes the device path (softmax and log-softmax, fp32, fp16 and bf16, masked rows,
// +Inf / NaN injections), under three contracts: the default, the masked-attention convention,
// and cuDNN's (fast-math, fp16/bf16 intermediates, masked rows by length, log-sum-exp first).
// Both run the host reference's steps with the two sums in the same order; CUDA's exp and log
// (1 ulp) stand in for the host libm's, so the references agree to a few fp64 ulps of |y| + the
// magnitude and the tolerances to 1e-12 relative, with the same NaN / Inf pattern. Then the
// engine itself: the online kernel passes such cases with the verdict naming the device
// reference, and the planted bugs that overflow or skip a tail are caught on this path. The
// same for the backward, whose saved output the device prepares from the drawn logits.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "harness/bounds.h"
#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

TEST(SoftmaxDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("softmax");
  const std::vector<Case> cases = test_util::rowwise_cases("softmax", 150, 21);
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
                                       test_util::rowwise_cases("softmax", 60, 22), 60);
}

// Cases just above the threshold (1024 to 2048 elements): the printed device-path and host-path
// times per case say whether properties/rowwise_values.h kRowwiseDeviceRefElems sits where the
// two cost the same.
TEST(SoftmaxDeviceRefGpu, EngineTimesBothPathsNearTheThreshold) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = test_util::rowwise_cases("softmax", 60, 23, 2048, 64);
  ASSERT_GE(cases.size(), 20u);
  test_util::expect_engine_device_path(test_util::model_op("softmax"), {find_variant("softmax", "online")}, cases,
                                       20);
}

// Large cases (2^18 elements and up, rows up to 16384 long): what the device path saves per case
// where the host reference is the lane's largest cost.
TEST(SoftmaxDeviceRefGpu, EngineTimesBothPathsOnLargeCases) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = test_util::rowwise_cases("softmax", 20, 25, INT64_MAX, 16384, int64_t{1} << 18);
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
  const std::vector<Case> cases = test_util::rowwise_cases("softmax", 60, 24);
  ASSERT_GE(cases.size(), 40u);
  for (const char* name : {"mutant_softmax_no_max", "mutant_softmax_vec_tail"}) {
    const auto [ran, failed] = test_util::run_on_device_path(op, name, cases, **lane);
    EXPECT_GT(failed, 0) << name << " passed every one of " << ran << " device-path cases";
  }
}

// The backward: the device prepare makes the saved output (the drawn logits turned into a
// (log-)softmax and rounded into the dtype, in place), so the comparison starts from the drawn,
// unprepared inputs: the device-prepared Y against the host prepare's (the same bytes, or where
// the two fp64 softmaxes straddle a rounding boundary of the dtype, one unit in the last place
// apart), then the host reference and bound on the device-prepared inputs against the device's.
TEST(SoftmaxDeviceRefGpu, BackwardPreparesAndMatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("softmax_bwd");
  const std::vector<Case> cases = test_util::rowwise_cases("softmax_bwd", 120, 26);
  ASSERT_GE(cases.size(), 80u);
  test_util::DeviceRefStats st;
  int64_t prepared = 0, moved = 0, logs = 0;
  for (const Contract& k : {Contract(), Contract().fast_math()}) {
    for (const Case& c0 : cases) {
      Case c = c0;
      if (!k.conventions().empty()) c.params["conventions"] = k.conventions();
      const size_t nt = c.tensors.size();
      std::vector<std::vector<unsigned char>> drawn(nt), host_prep(nt), dev_prep(nt);
      std::vector<unsigned char*> ptrs;
      for (size_t t = 0; t < nt; ++t) {
        const auto& ts = c.tensors[t];
        drawn[t].resize(static_cast<size_t>(ts.desc.extent()) * dtype_size(ts.desc.dtype));
        if (ts.role == Role::kOut)
          materialize_output(ts.desc, drawn[t].data());
        else
          materialize(ts.desc, ts.values, fnv1a64(ts.name.data(), ts.name.size()), drawn[t].data());
        host_prep[t] = drawn[t];
        ptrs.push_back(host_prep[t].data());
      }
      op.prepare(c, ptrs);
      // The device side on the drawn images.
      test_util::DeviceRefBuffers b;
      ASSERT_NO_FATAL_FAILURE(test_util::upload_for_device_ref(c, drawn, {2}, b));
      const size_t n = static_cast<size_t>(b.douts[0].rows * b.douts[0].cols);
      DeviceContext ctx;
      ctx.scratch_bytes = op.device_reference.scratch(c);
      ASSERT_EQ(cudaMalloc(&ctx.scratch, static_cast<size_t>(ctx.scratch_bytes)), cudaSuccess);
      b.dev.push_back(ctx.scratch);  // freed with the inputs
      const Status p = op.device_reference.prepare(c, b.in, ctx);
      ASSERT_TRUE(p.ok()) << c.summary() << ": " << p.message();
      const Status s = op.device_reference.compute(c, k.arithmetic(), b.in, b.douts, ctx);
      ASSERT_TRUE(s.ok()) << c.summary() << ": " << s.message();
      std::vector<double> dr(2 * n);
      ASSERT_EQ(cudaMemcpy(dr.data(), b.douts[0].ref, sizeof(double) * 2 * n, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t t = 0; t < nt; ++t) {
        dev_prep[t].resize(drawn[t].size());
        ASSERT_EQ(cudaMemcpy(dev_prep[t].data(), b.dev[t], drawn[t].size(), cudaMemcpyDeviceToHost), cudaSuccess);
      }
      EXPECT_TRUE(test_util::prepared_within_an_ulp(c, 0, host_prep[0], dev_prep[0], prepared, moved));
      EXPECT_TRUE(dev_prep[1] == drawn[1]) << c.summary() << ": dY moved";
      // The host reference and bound on the device-prepared inputs.
      const test_util::HostOnImages h = test_util::host_refs_on(op, c, k, dev_prep);
      ASSERT_TRUE(h.ok);
      const std::vector<OutputRef>& refs = h.refs;
      const auto& yd = c.tensors[0].desc;
      ASSERT_EQ(refs.size(), 1u);
      ASSERT_EQ(refs[0].ref.size(), n);
      ++st.cases;
      ++st.by_dtype[yd.dtype == DType::kF16 ? 1 : yd.dtype == DType::kBF16 ? 2 : 0];
      logs += Params(c.params).b("log") ? 1 : 0;
      int reported = 0;
      for (size_t l = 0; l < n && reported < 5; ++l) {
        const double hr = refs[0].ref[l], ht = std::isnan(refs[0].tol[l]) ? INFINITY : refs[0].tol[l];
        const double vr = dr[l], vt = dr[n + l];
        // |dx| + mag: a few ulps of exp (log-softmax) and of the sums move dx by that much.
        const double mag = refs[0].aux[0][l];
        const double scale = std::fabs(hr) + (std::isfinite(mag) ? mag : 0.0) + DBL_MIN;
        const bool bad = !test_util::compare_element(hr, ht, vr, vt, scale, 8, 1e-12, st).empty();
        if (bad) {
          ADD_FAILURE() << c.summary() << " element " << l << ": host ref " << hr << " tol " << ht << ", device ref "
                        << vr << " tol " << vt;
          ++reported;
        }
      }
      if (HasFailure()) break;
    }
  }
  EXPECT_GT(st.by_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(st.by_dtype[2], 0) << "no bf16 case";
  EXPECT_GT(logs, 0) << "no log-softmax case";
  std::printf("[ measured ] softmax_bwd prepare on the device: %lld of %lld prepared Y elements differ from the "
              "host's (each by one ulp of the dtype at most)\n",
              static_cast<long long>(moved), static_cast<long long>(prepared));
  std::printf("[ measured ] %s\n", st.summary("softmax_bwd").c_str());
}

TEST(SoftmaxDeviceRefGpu, BackwardEngineTakesTheDevicePathAndTheKernelPasses) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  test_util::expect_engine_device_path(test_util::model_op("softmax_bwd"), {find_variant("softmax_bwd", "rowwise")},
                                       test_util::rowwise_cases("softmax_bwd", 60, 27), 60);
  test_util::expect_engine_device_path(
      test_util::model_op("softmax_bwd"), {find_variant("softmax_bwd", "rowwise")},
      test_util::rowwise_cases("softmax_bwd", 20, 28, INT64_MAX, 16384, int64_t{1} << 18), 10);
}

// The backward's planted bug (dx without the - sum y dy term) on the device path.
TEST(SoftmaxDeviceRefGpu, BackwardPlantedBugIsCaughtOnTheDevicePath) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const auto [ran, failed] =
      test_util::run_on_device_path(test_util::model_op("softmax_bwd"), "mutant_softmax_bwd_no_sum",
                                    test_util::rowwise_cases("softmax_bwd", 40, 29), **lane);
  EXPECT_GT(failed, ran / 2) << "mutant_softmax_bwd_no_sum passed " << ran - failed << " of " << ran;
}

// Cross-entropy: the host-prepared images go up and the device prepare runs on them again
// (idempotent: folded targets stay, ignored rows are reset, -inf logits stay -inf), then loss and
// dlogits with their ceilings against the host's, under the default and the fast-math contract.
TEST(SoftmaxDeviceRefGpu, CrossEntropyMatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("cross_entropy");
  const std::vector<Case> cases = test_util::rowwise_cases("cross_entropy", 150, 30);
  ASSERT_GE(cases.size(), 100u);
  // loss: |loss| + L + mean|t| + |t_c| (what a few ulps of exp, the sums and log move it by);
  // dlogits: |d| + p + p|t|. Both + fp64's smallest normal (exp's underflow, as the forward).
  const test_util::RefScale scale = [](size_t o, size_t l, const std::vector<OutputRef>& h) {
    const auto fin = [](double v) { return std::isfinite(v) ? std::fabs(v) : 0.0; };
    if (o == 0)
      return fin(h[0].ref[l]) + fin(h[0].aux[3][l]) + fin(h[0].aux[4][l]) + fin(h[0].aux[2][l]) + DBL_MIN;
    return fin(h[1].ref[l]) + fin(h[1].aux[0][l]) + fin(h[1].aux[1][l]) + DBL_MIN;
  };
  int64_t smoothed = 0, ignored = 0, inf_rows = 0;
  for (const Case& c : cases) {
    const Params p(c.params);
    smoothed += p.r("smoothing", 0) > 0 ? 1 : 0;
    ignored += p.i("ignore_every", 0) > 0 ? 1 : 0;
    inf_rows += p.i("inf_every", 0) > 0 ? 1 : 0;
  }
  for (const Contract& k : {Contract(), Contract().fast_math()}) {
    test_util::DeviceRefStats st;
    for (const Case& c : cases) {
      ASSERT_NO_FATAL_FAILURE(test_util::check_device_reference(op, c, k, 8, scale, 1e-12, st));
      if (HasFailure()) break;
    }
    EXPECT_GT(st.by_dtype[1], 0) << "no fp16 case";
    EXPECT_GT(st.by_dtype[2], 0) << "no bf16 case";
    std::printf("[ measured ] %s%s\n", k.arithmetic().fast_math ? "fast-math: " : "", st.summary("cross_entropy").c_str());
  }
  EXPECT_GT(smoothed, 0);
  EXPECT_GT(ignored, 0);
  EXPECT_GT(inf_rows, 0);
  std::printf("[ measured ] cross_entropy cases: %zu, %lld with smoothing, %lld with ignored rows, %lld with -inf rows\n",
              cases.size(), static_cast<long long>(smoothed), static_cast<long long>(ignored),
              static_cast<long long>(inf_rows));
}

TEST(SoftmaxDeviceRefGpu, CrossEntropyEngineTakesTheDevicePathAndCatchesThePlantedBugs) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("cross_entropy");
  test_util::expect_engine_device_path(op, {find_variant("cross_entropy", "fused")},
                                       test_util::rowwise_cases("cross_entropy", 60, 31), 60);
  test_util::expect_engine_device_path(
      op, {find_variant("cross_entropy", "fused")},
      test_util::rowwise_cases("cross_entropy", 20, 32, INT64_MAX, 16384, int64_t{1} << 18), 10);
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const std::vector<Case> cases = test_util::rowwise_cases("cross_entropy", 60, 33);
  for (const char* name : {"mutant_ce_ignore_index_ignored", "mutant_ce_smoothing_wrong"}) {
    const auto [ran, failed] = test_util::run_on_device_path(op, name, cases, **lane);
    EXPECT_GT(failed, 0) << name << " passed every one of " << ran << " device-path cases";
  }
}

}  // namespace
}  // namespace assay
