// GPU tests of the batched GEMM spec (properties/gemm_batched.cpp): the strided and pointer-array
// launchers pass a campaign with every check on (guards, poison, gaps, bound, NaN/Inf pattern,
// exact tier, determinism, the permute_batches relation), each planted launcher bug of
// tests/mutants/gemm/batched_mutants.cpp is caught, shrunk and stored, and both agree with
// cuBLASLt's strided-batched fp32 GEMM (pedantic compute) within the sum of both ceilings.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "harness/bounds.h"
#include "harness/gpu/lane.h"
#include "properties/gemm_batched.h"
#include "references/host/gemm.h"
#include "references/library/cublaslt_gemm.h"
#include "tests/properties/campaign_checks.h"

namespace assay {
namespace {

using GemmBatchedGpu = GpuCampaignTest<int>;

TEST_P(GemmBatchedGpu, CorrectVariantsPass) {
  expect_campaign_passes("gemm_batched", 400, 2048);
}
INSTANTIATE_TEST_SUITE_P(Campaign, GemmBatchedGpu, ::testing::Values(0));

using GemmBatchedGpuMutants = GpuCampaignTest<PlantedMutant>;

TEST_P(GemmBatchedGpuMutants, CaughtShrunkAndStored) {
  expect_mutant_caught(GetParam(), 1000, 2048, 30, dir_.string());
}

using namespace failure_kinds;

INSTANTIATE_TEST_SUITE_P(
    Planted, GemmBatchedGpuMutants,
    ::testing::Values(PlantedMutant{"gemm_batched", "mutant_batched_swapped_stride", {kB, kE, kP, kN, kC, kL}, true},
                      PlantedMutant{"gemm_batched", "mutant_batched_even_batches", {kU, kN, kB, kE, kP}}),
    [](const ::testing::TestParamInfo<PlantedMutant>& i) { return std::string(i.param.variant); });

// Both launchers and cuBLASLt (fp32 pedantic, strided batch) on the same device data, each held
// to the host ceiling; prints the largest error / ceiling of each.
TEST(GemmBatchedVendor, StridedPointerArrayAndCublasLtAgreeWithTheHost) {
  auto n = gpu::device_count();
  if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
  auto lt = vendor::CublasLt::create();
  ASSERT_TRUE(lt.ok()) << lt.status().to_string();
  struct Shape {
    int64_t batch, m, n, k;
    bool ta, tb;
  };
  const Shape shapes[] = {{1, 1, 1, 1, false, false},   {3, 17, 33, 65, false, true}, {7, 64, 64, 64, true, false},
                          {5, 31, 97, 129, true, true}, {40, 8, 8, 300, false, false}, {2, 96, 96, 1024, false, true}};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (const Shape& s : shapes) {
    const int64_t ra = s.ta ? s.k : s.m, ca = s.ta ? s.m : s.k, rb = s.tb ? s.n : s.k, cb = s.tb ? s.k : s.n;
    const int64_t sa = ra * ca + 3, sb = rb * cb + 5, sc = s.m * s.n + 7;  // padded batch strides
    std::mt19937_64 rng(static_cast<uint64_t>(s.m * 131 + s.k));
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> a(static_cast<size_t>(s.batch * sa)), b(static_cast<size_t>(s.batch * sb)),
        c(static_cast<size_t>(s.batch * sc));
    for (float& x : a) x = nd(rng);
    for (float& x : b) x = nd(rng);
    for (float& x : c) x = nd(rng);
    const double alpha = 0.75, beta = -1.5;
    float *da = nullptr, *db = nullptr, *dc[3] = {};
    ASSERT_EQ(cudaMalloc(&da, a.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, b.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    for (float*& p : dc) {
      ASSERT_EQ(cudaMalloc(&p, c.size() * 4), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(p, c.data(), c.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    }
    gemm_batched::BatchedCall call;
    call.g.m = s.m, call.g.n = s.n, call.g.k = s.k, call.g.trans_a = s.ta, call.g.trans_b = s.tb;
    call.g.alpha = static_cast<float>(alpha), call.g.beta = static_cast<float>(beta);
    call.g.a = da, call.g.lda = ca, call.g.b = db, call.g.ldb = cb, call.g.ldc = s.n;
    call.batch = s.batch, call.stride_a = sa, call.stride_b = sb, call.stride_c = sc;
    call.g.c = dc[0];
    ASSERT_EQ(kernels::gemm_f32_tiled_strided_batched(call.g, s.batch, sa, sb, sc, stream), cudaSuccess);
    call.g.c = dc[1];
    ASSERT_EQ(gemm_batched::launch_ptr_array(call, s.batch, stream), cudaSuccess);
    vendor::LtGemm g;
    g.g.m = s.m, g.g.n = s.n, g.g.k = s.k, g.g.trans_a = s.ta, g.g.trans_b = s.tb;
    g.g.lda = ca, g.g.ldb = cb, g.g.ldc = s.n;
    g.batch = s.batch, g.stride_a = sa, g.stride_b = sb, g.stride_c = sc;
    ASSERT_TRUE((*lt)->matmul(g, alpha, da, db, beta, dc[2], stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    GemmBoundModel model;
    model.k = s.k, model.alpha_abs = alpha, model.has_beta = true;
    const ElementBound bound = gemm_ceiling(model);
    double worst[3] = {0, 0, 0};
    std::vector<float> got(c.size());
    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), cd(c.begin(), c.end());
    std::vector<double> ref(static_cast<size_t>(s.m * s.n)), mag(ref.size());
    for (int w = 0; w < 3; ++w) {
      ASSERT_EQ(cudaMemcpy(got.data(), dc[w], got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t z = 0; z < s.batch; ++z) {
        ref::GemmProblem<double> p;
        p.m = s.m, p.n = s.n, p.k = s.k, p.trans_a = s.ta, p.trans_b = s.tb, p.alpha = alpha, p.beta = beta;
        p.a = ad.data() + z * sa, p.lda = ca, p.b = bd.data() + z * sb, p.ldb = cb, p.c = cd.data() + z * sc,
        p.ldc = s.n;
        ref::gemm_reference<double>(p, ref.data(), mag.data());
        for (int64_t l = 0; l < s.m * s.n; ++l) {
          const double e = std::fabs(got[static_cast<size_t>(z * sc + l)] - ref[static_cast<size_t>(l)]);
          const double t = bound.tol(std::fabs(ref[static_cast<size_t>(l)]), mag[static_cast<size_t>(l)]);
          worst[w] = std::max(worst[w], e / t);
          ASSERT_LE(e, t) << "launcher " << w << " entry " << z << " element " << l;
        }
        for (int64_t g2 = s.m * s.n; g2 < sc; ++g2)  // the gap between entries is left alone
          ASSERT_EQ(got[static_cast<size_t>(z * sc + g2)], c[static_cast<size_t>(z * sc + g2)]);
      }
    }
    std::printf("[ measured ] batch %lld %lldx%lldx%lld: max error / ceiling strided %.3g ptr_array %.3g cuBLASLt %.3g\n",
                static_cast<long long>(s.batch), static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), worst[0], worst[1], worst[2]);
    cudaFree(da), cudaFree(db);
    for (float* p : dc) cudaFree(p);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace assay
