// GPU tests of large fp32 GEMM cases (m*n*k > kDeviceRefWork): inputs drawn
// on the device (harness/gpu/materialize_device.h) have their class's
// properties, the same bits on every run (and, by design, the host's bits);
// the correct "tiled" variant passes and mutant_k_tail is caught on a large
// case; sampled-out cases say what they left out. Skipped, visibly, where no
// GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "harness/gpu/lane.h"
#include "harness/gpu/materialize_device.h"
#include "properties/gemm.h"
#include "harness/values.h"

namespace assay {
namespace {

class GemmLargeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    auto lane = gpu::Lane::create(0);
    ASSERT_TRUE(lane.ok()) << lane.status().to_string();
    lane_ = std::move(lane).value();
  }

  // The device image of `desc` under `r` (stream "A"), copied back.
  std::vector<uint32_t> draw(const TensorDesc& desc, const ValueRecipe& r) {
    std::vector<uint32_t> out(static_cast<size_t>(desc.extent()));
    void* dev = nullptr;
    EXPECT_EQ(cudaMalloc(&dev, out.size() * 4), cudaSuccess);
    const Status s = gpu::materialize_device(desc, r, fnv1a64("A", 1), dev, lane_->stream());
    EXPECT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(cudaMemcpyAsync(out.data(), dev, out.size() * 4, cudaMemcpyDeviceToHost, lane_->stream()), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(lane_->stream()), cudaSuccess);
    cudaFree(dev);
    return out;
  }

  std::unique_ptr<gpu::Lane> lane_;
};

// A padded, offset 2048 x 2000 view: 2048 * 2048 * 2048 is far above kDeviceRefWork.
TensorDesc big_view() {
  TensorDesc d;
  d.dtype = DType::kF32;
  d.shape = {2048, 2000};
  d.strides = {2003, 1};
  d.offset = 5;
  return d;
}

float as_float(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

TEST_F(GemmLargeGpu, DeviceDrawnValuesHaveTheClassPropertiesAndRepeat) {
  const TensorDesc d = big_view();
  auto covered = [&](int64_t e, int64_t& i, int64_t& j) {
    const int64_t rel = e - d.offset;
    if (rel < 0) return false;
    i = rel / d.strides[0];
    j = rel % d.strides[0];
    return i < d.shape[0] && j < d.shape[1];
  };
  ValueRecipe ints;
  ints.cls = ValueClass::kSmallInt;
  ints.seed = 17;
  ints.int_range = 3;
  ValueRecipe same;
  same.cls = ValueClass::kSameSign;
  same.seed = 5;
  same.scale = 2;
  ValueRecipe nan_tiles;
  nan_tiles.cls = ValueClass::kNormal;
  nan_tiles.seed = 9;
  nan_tiles.inject.kinds = kSpecialNaN;
  nan_tiles.inject.at = kAtTile;
  nan_tiles.inject.tile = 32;
  ValueRecipe perm;
  perm.cls = ValueClass::kPermutation;
  perm.seed = 3;
  ValueRecipe sub;
  sub.cls = ValueClass::kSubnormal;
  sub.seed = 4;
  ValueRecipe pareto;
  pareto.cls = ValueClass::kPareto;
  pareto.seed = 6;
  pareto.inject.kinds = kSpecialAll;
  pareto.inject.rate = 0.01;

  for (const ValueRecipe& r : {ints, same, nan_tiles, perm, sub, pareto}) {
    SCOPED_TRACE(std::string(value_class_name(r.cls)));
    const std::vector<uint32_t> img = draw(d, r);
    EXPECT_EQ(img, draw(d, r)) << "two draws of one recipe differ";
    std::vector<int64_t> ones_per_row(static_cast<size_t>(d.shape[0]), 0);
    int64_t bad = 0, canary_bad = 0;
    for (int64_t e = 0; e < d.extent(); ++e) {
      int64_t i = 0, j = 0;
      const uint32_t w = img[static_cast<size_t>(e)];
      if (!covered(e, i, j)) {
        canary_bad += w != 0x7FC06A70u ? 1 : 0;  // write_gap_canary(kF32)
        continue;
      }
      const float x = as_float(w);
      bool ok = true;
      switch (r.cls) {
        case ValueClass::kSmallInt:
          ok = x == std::round(x) && std::fabs(x) <= 3;
          break;
        case ValueClass::kSameSign:
          ok = x >= 0 && x <= 2;
          break;
        case ValueClass::kNormal: {
          const bool edge = i % 32 == 0 || i % 32 == 31 || j % 32 == 0 || j % 32 == 31;
          ok = edge ? std::isnan(x) : std::isfinite(x);
          break;
        }
        case ValueClass::kPermutation:
          ok = x == 0 || x == 1;
          ones_per_row[static_cast<size_t>(i)] += x == 1 ? 1 : 0;
          break;
        case ValueClass::kSubnormal:
          ok = x != 0 && std::fpclassify(x) == FP_SUBNORMAL;
          break;
        default:
          ok = std::isnan(x) || std::isinf(x) || std::fabs(x) >= 1 || x == 0;  // Pareto: |x| >= x_m = 1, or injected
          break;
      }
      bad += ok ? 0 : 1;
    }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(canary_bad, 0);
    if (r.cls == ValueClass::kPermutation) {
      // pi over [0, max(rows, cols)): rows <= cols gives one 1 per row; rows > cols (this view,
      // 2048 x 2000) one per column, so exactly cols ones and no row with more than one.
      int64_t ones = 0, multi = 0;
      for (int64_t c : ones_per_row) ones += c, multi += c > 1 ? 1 : 0;
      EXPECT_EQ(ones, std::min(d.shape[0], d.shape[1]));
      EXPECT_EQ(multi, 0);
    }
    // Meant (not promised) to be the host's bits: same Philox, same IEEE operations.
    std::vector<uint32_t> host(img.size());
    materialize(d, r, fnv1a64("A", 1), host.data());
    int64_t differ = 0;
    for (size_t e = 0; e < host.size(); ++e) differ += host[e] != img[e] ? 1 : 0;
    EXPECT_EQ(differ, 0) << "device values differ from the host path (allowed by the design, but unexpected)";
    RecordProperty(std::string("host_differs_") + std::string(value_class_name(r.cls)), static_cast<int>(differ));
  }
}

TEST_F(GemmLargeGpu, TiledPassesAndKTailIsCaughtOnALargeCase) {
  const Case good = make_gemm_case(2048, 2048, 2048, false, true, 1.5, 0.5, 3, 0, 1, 0, 2, 0, ValueClass::kNormal, 5);
  ASSERT_TRUE(gemm_runs_every_check(good));
  auto v = find_spec("gemm")->run(good, {"tiled"}, *lane_);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->front().passed()) << v->front().summary();
  EXPECT_EQ(v->front().metrics.reference, "device-f64");
  EXPECT_TRUE(v->front().metrics.not_run.empty());
  EXPECT_GE(v->front().metrics.vendor_max_ratio, 0.0);
  // k % 32 = 8 terms dropped per dot product; small integers: the exact tier sees it.
  const Case tail = make_gemm_case(1024, 1024, 1000, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kSmallInt, 7);
  auto m = find_spec("gemm")->run(tail, {"mutant_k_tail", "tiled"}, *lane_);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_FALSE((*m)[0].passed());
  EXPECT_TRUE((*m)[1].passed()) << (*m)[1].summary();
  bool exact_or_bound = false;
  for (const auto& f : (*m)[0].failures) exact_or_bound |= f.kind == FailureKind::kExact || f.kind == FailureKind::kBound;
  EXPECT_TRUE(exact_or_bound) << (*m)[0].summary();
}

TEST_F(GemmLargeGpu, SampledOutCasesSayWhatTheyLeftOut) {
  // 4096 * 4096 * 512 = 2^33 > kSampledChecksWork: find one case of each kind.
  int found_full = 0, found_sampled = 0;
  for (uint64_t seed = 0; seed < 64 && (found_full == 0 || found_sampled == 0); ++seed) {
    const Case c = make_gemm_case(4096, 4096, 512, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kUniform, seed);
    const bool every = gemm_runs_every_check(c);
    if ((every && found_full > 0) || (!every && found_sampled > 0)) continue;
    (every ? found_full : found_sampled) = 1;
    auto v = find_spec("gemm")->run(c, {"tiled"}, *lane_);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    const Verdict& verdict = v->front();
    EXPECT_TRUE(verdict.passed()) << verdict.summary();
    if (every) {
      EXPECT_TRUE(verdict.metrics.not_run.empty());
      EXPECT_GE(verdict.metrics.vendor_max_ratio, 0.0);
    } else {
      EXPECT_NE(verdict.metrics.not_run.find("determinism not rerun"), std::string::npos);
      EXPECT_EQ(verdict.metrics.vendor_max_ratio, -1.0);
      EXPECT_EQ(Verdict::from_json(verdict.to_json()).metrics.not_run, verdict.metrics.not_run);
    }
  }
  EXPECT_EQ(found_full + found_sampled, 2);
}

}  // namespace
}  // namespace assay
