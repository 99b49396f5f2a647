// The attention forward's device reference (references/device/attention_f64.cu,
// OpDef::device_reference of properties/attention.cpp) against the host reference and bound
// on generated cases where the engine takes the device path, under the flash kernel's declared
// arithmetic (kv_tile 64) and, on every other case, fast-math with kv_tile 32. Both run the
// steps of references/host/attention.h in the same order; what may differ is exp and log
// (CUDA's fp64 exp/log against glibc's, each within an ulp or two), so:
//  - the scores and their max are identical, and every sum over the Sk keys may round
//    differently by an ulp of its magnitude per term: O within (Sk + 8) fp64 ulps of
//    sum_j P_j |v_j| + |O|, LSE within (Sk + 8) ulps of |LSE| + 2L + 1 (L = log sum exp);
//  - the tolerances, sums of non-negative terms of those quantities, agree to 1e-9
//    relative (+Inf and 0, on fully masked rows, exactly);
//  - the NaN / Inf pattern (LSE = -inf on masked rows) is the same;
// for fp32, fp16 and bf16 cases alike (Q, K, V read widened exactly; a narrow O's tolerance
// carries its store rounding, the same harness/ulp_core.h function on both sides).
// Then the engine: the flash kernel passes such cases with the verdict naming the device
// reference.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "references/device/attention_f64.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

int64_t work(const Params& p) {
  return p.i("B") * p.i("Hkv") * p.i("G") * p.i("Sq") * p.i("Sk") * p.i("D");
}

/// Generated attention cases the device path takes, with B H Sq Sk D at most `max_work`
/// (the host reference's cost) and Sk at least `min_sk`.
std::vector<Case> attn_cases(int want, uint64_t seed, int64_t max_dim, int64_t max_work, int64_t min_sk,
                               int64_t tries) {
  return test_util::device_path_cases("attention", want, seed, max_dim, tries, [&](const Params& p) {
    return work(p) <= max_work && p.i("Sk") >= min_sk;
  });
}

// properties/attention.cpp's aux: O's aux[4] = sum_j P_j |v_j|, LSE's aux[1] = L.
const test_util::RefScale kScale = [](size_t o, size_t l, const std::vector<OutputRef>& h) {
  return o == 0 ? h[0].aux[4][l] + std::fabs(h[0].ref[l]) : std::fabs(h[1].ref[l]) + 2 * h[1].aux[1][l] + 1;
};

void check_cases(const std::vector<Case>& cases, test_util::DeviceRefStats& st, int64_t& fast_cases) {
  const OpDef& op = test_util::model_op("attention");
  const Contract flash = test_util::variant_contract("attention", "flash");
  const Contract fast = Contract().fast_math().tile("kv_tile", 32);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const double ulps = static_cast<double>(Params(c.params).i("Sk") + 8);
    const bool use_fast = i % 2 == 1;
    fast_cases += use_fast ? 1 : 0;
    ASSERT_NO_FATAL_FAILURE(test_util::check_device_reference(op, c, use_fast ? fast : flash, ulps, kScale, 1e-9, st));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(AttentionDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = attn_cases(300, 17, 256, int64_t{1} << 21, 1, 400000);
  ASSERT_GE(cases.size(), 250u);
  int64_t causal = 0, mask = 0, gqa = 0, fast = 0;
  for (const Case& c : cases) {
    const Params p(c.params);
    causal += p.b("causal") ? 1 : 0;
    mask += p.b("mask") ? 1 : 0;
    gqa += p.i("G") > 1 ? 1 : 0;
  }
  EXPECT_GT(causal, 0);
  EXPECT_GT(mask, 0);
  EXPECT_GT(gqa, 0);
  test_util::DeviceRefStats st;
  check_cases(cases, st, fast);
  EXPECT_GT(st.by_dtype[0], 0);
  EXPECT_GT(st.by_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(st.by_dtype[2], 0) << "no bf16 case";
  std::printf("[ measured ] %s (%lld causal, %lld masked, %lld GQA, %lld under fast-math kv_tile 32)\n",
              st.summary("attention").c_str(), static_cast<long long>(causal), static_cast<long long>(mask),
              static_cast<long long>(gqa), static_cast<long long>(fast));
}

TEST(AttentionDeviceRefGpu, LongKeyRowsBeyond48KiBOfSharedMemory) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  // Sk > 2048: the kernel's three doubles per key need the opt-in shared memory size.
  const std::vector<Case> cases = attn_cases(12, 19, 4096, int64_t{1} << 22, 2049, 200000);
  ASSERT_GE(cases.size(), 1u) << "no generated case with Sk > 2048 inside the work limit";
  test_util::DeviceRefStats st;
  int64_t fast = 0;
  check_cases(cases, st, fast);
  std::printf("[ measured ] %s (Sk > 2048)\n", st.summary("attention").c_str());
}

TEST(AttentionDeviceRefGpu, EngineTakesTheDevicePathAndTheFlashKernelPasses) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  test_util::expect_engine_device_path(test_util::model_op("attention"), {find_variant("attention", "flash")},
                                       attn_cases(60, 23, 512, int64_t{1} << 24, 1, 400000), 50);
}

// Small cases just above the device threshold (B H Sq Sk D in [4096, 16384), every dtype): the
// printed device-path and host-path times per case say whether the threshold
// (properties/attention.cpp kDeviceRefWork) sits where the two paths cost the same.
TEST(AttentionDeviceRefGpu, EngineTimesBothPathsNearTheThreshold) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = attn_cases(80, 29, 64, int64_t{1} << 14, 1, 400000);
  ASSERT_GE(cases.size(), 40u);
  test_util::expect_engine_device_path(test_util::model_op("attention"), {find_variant("attention", "flash")}, cases,
                                       30);
}

// A case with masked_every takes the device path: the device writes the fully masked rows into
// the drawn mask (attention_mask_rows), where the host path's prepare writes them. On generated
// such cases, the drawn mask uploaded as drawn and masked on the device must be the host's
// prepared image byte for byte.
TEST(AttentionDeviceRefGpu, MaskRowsOnTheDeviceAreThePreparedRows) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpSpec* spec = find_spec("attention");
  const OpDef& op = test_util::model_op("attention");
  ASSERT_NE(spec, nullptr);
  int64_t cases = 0, rows = 0;
  for (int64_t i = 0; cases < 40 && i < 200000; ++i) {
    const Case c = generate_case(*spec, GenPlan{31, GenConfig{256}}, i);
    const Params p(c.params);
    if (!p.b("mask") || p.i("masked_every", 0) <= 0 || !op.device_reference.when(p)) continue;
    const auto& d = c.tensors[3].desc;
    const size_t bytes = static_cast<size_t>(d.extent()) * dtype_size(d.dtype);
    std::vector<unsigned char> drawn(bytes), dev_img(bytes);
    materialize(d, c.tensors[3].values, fnv1a64(c.tensors[3].name.data(), c.tensors[3].name.size()), drawn.data());
    const test_util::ModelHostRun h = test_util::model_host_run(op, c, Contract());
    ASSERT_GE(h.images[3].size(), bytes);  // the host image may carry slack past the tensor
    unsigned char* buf = nullptr;
    ASSERT_EQ(cudaMalloc(&buf, std::max<size_t>(bytes, 4)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(buf, drawn.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    const View2D v = view_of(d);
    const Status st = device_ref::attention_mask_rows(reinterpret_cast<float*>(buf) + d.offset, v.rows, v.cols, v.ld,
                                                      p.i("masked_every"), nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaMemcpy(dev_img.data(), buf, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(buf);
    EXPECT_EQ(std::memcmp(dev_img.data(), h.images[3].data(), bytes), 0) << c.summary();
    EXPECT_NE(std::memcmp(drawn.data(), h.images[3].data(), bytes), 0) << "prepare masked no row: " << c.summary();
    ++cases;
    rows += (v.rows + p.i("masked_every") - 1) / p.i("masked_every");
  }
  std::printf("[ measured ] attention masked_every on the device: %lld cases, %lld rows set to -inf, the host's bytes\n",
              static_cast<long long>(cases), static_cast<long long>(rows));
  EXPECT_GE(cases, 20);
}

}  // namespace
}  // namespace assay
