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
    ASSERT_EQ(cudaMalloc(&dscratch, 8 * device_ref::gemm_f64_scratch_doubles(a.size(), b.size())), cudaSuccess);
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

}  // namespace
}  // namespace assay
