// The device fp64 GEMM reference agrees with the host fp64 reference on small
// shapes: same NaN/Inf pattern (alpha = 0 with Inf inputs included: IEEE
// 0*Inf = NaN in both, no BLAS quick return), values within the fp64 bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "harness/bounds.h"
#include "harness/gpu/lane.h"
#include "properties/gemm_common.h"
#include "references/device/gemm_f64.h"
#include "references/host/gemm.h"

namespace assay {
namespace {

TEST(GemmDeviceRefGpu, AgreesWithTheHostReference) {
  auto n = gpu::device_count();
  if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  std::mt19937_64 rng(7);
  for (int t = 0; t < 60; ++t) {
    const int64_t m = 1 + rng() % 9, nn = 1 + rng() % 9, k = rng() % 12;
    const bool ta = rng() & 1, tb = rng() & 2;
    const double alpha = std::vector<double>{0, 1, -1.5}[rng() % 3];
    const double beta = std::vector<double>{0, 0.5}[rng() % 2];
    const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? nn : k, cb = tb ? k : nn;
    const int64_t lda = std::max<int64_t>(ca, 1), ldb = std::max<int64_t>(cb, 1), ldc = nn;
    std::vector<float> a(static_cast<size_t>(std::max<int64_t>(ra * lda, 1))),
        b(static_cast<size_t>(std::max<int64_t>(rb * ldb, 1))), c(static_cast<size_t>(m * ldc));
    std::normal_distribution<float> nd;
    for (auto* v : {&a, &b, &c})
      for (auto& x : *v) x = std::round(nd(rng) * 3);
    if (t % 3 == 0 && !b.empty()) b[rng() % b.size()] = INFINITY;  // an Inf input
    if (t % 5 == 0 && !a.empty()) a[rng() % a.size()] = NAN;
    // Host.
    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), cd(c.begin(), c.end());
    std::vector<double> href(static_cast<size_t>(m * nn)), hmag(href.size());
    ref::GemmProblem<double> p{m, nn, k, ta, tb, alpha, beta, ad.data(), lda, bd.data(), ldb, cd.data(), ldc};
    ref::gemm_reference(p, href.data(), hmag.data(), 1);
    // Device.
    float *da, *db, *dc;
    double *dref, *dscratch;
    ASSERT_EQ(cudaMalloc(&da, a.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, b.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dc, c.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dref, href.size() * 16), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dscratch, 8 * device_ref::gemm_f64_scratch_doubles(a.size(), b.size(), m, nn)), cudaSuccess);
    cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice);
    vendor::RowMajorGemm g{m, nn, k, ta, tb, lda, ldb, ldc};
    ASSERT_TRUE(device_ref::gemm_f64_reference(h, nullptr, g, alpha, da, static_cast<int64_t>(a.size()), db,
                                               static_cast<int64_t>(b.size()), beta, beta != 0 ? dc : nullptr, dref,
                                               dref + href.size(), dscratch)
                    .ok());
    std::vector<double> dres(href.size() * 2);
    ASSERT_EQ(cudaMemcpy(dres.data(), dref, dres.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    const double gk = gamma_n(k + 2, 0x1p-53);
    for (size_t i = 0; i < href.size(); ++i) {
      const double hr = href[i], dr = dres[i];
      if (std::isnan(hr) || std::isnan(dr)) {
        EXPECT_TRUE(std::isnan(hr) && std::isnan(dr))
            << "case " << t << " element " << i << ": host " << hr << ", device " << dr << " (alpha " << alpha << ")";
      } else if (std::isinf(hr) || std::isinf(dr)) {
        EXPECT_EQ(hr, dr) << "case " << t << " element " << i;
      } else {
        EXPECT_LE(std::fabs(hr - dr), 2 * gk * hmag[i] + 1e-300) << "case " << t << " element " << i;
      }
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dref);
    cudaFree(dscratch);
  }
  cublasDestroy(h);
}

// The alpha-scaled operand rule on the device (gemm's large cases) gives the host's figures
// (gemm_common::AlphaScaledOperands): mag +Inf where |alpha| > 1 scales an element a row of
// op(A) or a column of op(B) holds to FLT_MAX, elsewhere mag plus the underflow slack times
// slack_to_mag; subnormal and near-overflow operands, both transposes, alpha 1 left alone.
TEST(GemmDeviceRefGpu, AlphaScaledOperandRuleGivesTheHostFigures) {
  auto count = gpu::device_count();
  if (!count.ok()) GTEST_SKIP() << "GPU test skipped: " << count.status().message();
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd;
  const double slack_to_mag = 1e6;  // any positive factor: the rule scales its slack by it
  int64_t unchecked = 0, slacked = 0;
  for (int t = 0; t < 48; ++t) {
    const int64_t m = 1 + rng() % 9, nn = 1 + rng() % 40, k = 1 + rng() % 70;
    const bool ta = rng() & 1, tb = rng() & 2;
    const double alpha = std::vector<double>{1.5, 0.5, -0.75, -2.0, 1.0}[t % 5];
    const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? nn : k, cb = tb ? k : nn;
    const int64_t lda = ca + 1, ldb = cb + 2;
    std::vector<float> a(static_cast<size_t>(ra * lda)), b(static_cast<size_t>(rb * ldb));
    for (auto& x : a)
      x = rng() % 3 == 0 ? std::ldexp(static_cast<float>(1 + rng() % 1000), -149) : std::round(nd(rng) * 3);
    for (auto& x : b) x = rng() % 7 == 0 ? (rng() & 1 ? 3e38f : -3e38f) * (t % 2 == 0 ? 1.0f : 1e-10f) : nd(rng);
    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
    std::vector<double> href(static_cast<size_t>(m * nn)), hmag(href.size());
    ref::GemmProblem<double> p{m, nn, k, ta, tb, alpha, 0.0, ad.data(), lda, bd.data(), ldb, nullptr, nn};
    ref::gemm_reference(p, href.data(), hmag.data(), 1);
    const HostTensor ha{ad.data(), View2D{ra, ca, lda}}, hb{bd.data(), View2D{rb, cb, ldb}};
    const gemm_common::AlphaScaledOperands scaled(
        alpha, m, nn, k, [&](int64_t i, int64_t q) { return gemm_common::op_at(ha, ta, i, q); },
        [&](int64_t q, int64_t j) { return gemm_common::op_at(hb, tb, q, j); });
    float *da, *db;
    double *dref, *dscratch;
    ASSERT_EQ(cudaMalloc(&da, a.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, b.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dref, href.size() * 16), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dscratch, 8 * device_ref::gemm_f64_scratch_doubles(a.size(), b.size(), m, nn)), cudaSuccess);
    cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
    vendor::RowMajorGemm g{m, nn, k, ta, tb, lda, ldb, nn};
    ASSERT_TRUE(device_ref::gemm_f64_reference(h, nullptr, g, alpha, da, static_cast<int64_t>(a.size()), db,
                                               static_cast<int64_t>(b.size()), 0.0, nullptr, dref,
                                               dref + href.size(), dscratch, slack_to_mag)
                    .ok());
    std::vector<double> dres(href.size() * 2);
    ASSERT_EQ(cudaMemcpy(dres.data(), dref, dres.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t l = 0; l < href.size(); ++l) {
      const int64_t i = static_cast<int64_t>(l) / nn, j = static_cast<int64_t>(l) % nn;
      const double dmag = dres[href.size() + l];
      if (scaled.may_overflow(i, j)) {
        ++unchecked;
        EXPECT_TRUE(std::isinf(dmag)) << "case " << t << " C[" << i << "][" << j << "] alpha " << alpha;
        continue;
      }
      const double slack = scaled.underflow_slack(i, j), want = hmag[l] + slack * slack_to_mag;
      slacked += slack > 0 ? 1 : 0;
      if (std::fabs(alpha) == 1) EXPECT_EQ(slack, 0);
      EXPECT_LE(std::fabs(dmag - want), 1e-12 * want) << "case " << t << " C[" << i << "][" << j << "] alpha " << alpha;
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dref);
    cudaFree(dscratch);
  }
  EXPECT_GT(unchecked, 0);
  EXPECT_GT(slacked, 0);
  cublasDestroy(h);
}

}  // namespace
}  // namespace assay
