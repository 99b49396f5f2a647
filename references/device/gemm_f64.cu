#include "references/device/gemm_f64.h"

#include <cmath>

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

__global__ void widen(const float* x, int64_t n, double* v, double* abs_v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double d = static_cast<double>(x[i]);
    v[i] = d;
    abs_v[i] = fabs(d);
  }
}

// ref = beta*C, mag = |beta||C| as the starting values the two GEMMs add to.
__global__ void init_from_c(const float* c, int64_t ldc, int64_t m, int64_t n, double beta, double* ref, double* mag) {
  const int64_t total = m * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / n, col = i % n;
    const double v = static_cast<double>(c[r * ldc + col]);
    ref[i] = beta * v;
    mag[i] = fabs(beta) * fabs(v);
  }
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096)); }

}  // namespace

Status gemm_f64_reference(cublasHandle_t handle, cudaStream_t stream, const vendor::RowMajorGemm& g, double alpha,
                          const float* a, int64_t extent_a, const float* b, int64_t extent_b, double beta,
                          const float* c, double* ref, double* mag, double* scratch) {
  if (g.m == 0 || g.n == 0) return ok_status();
  double* a64 = scratch;
  double* a_abs = a64 + extent_a;
  double* b64 = a_abs + extent_a;
  double* b_abs = b64 + extent_b;
  // Gap elements hold NaN canaries; they widen to NaN and are never read by a
  // correct GEMM, so they cannot reach ref.
  if (extent_a > 0) widen<<<blocks_for(extent_a), 256, 0, stream>>>(a, extent_a, a64, a_abs);
  if (extent_b > 0) widen<<<blocks_for(extent_b), 256, 0, stream>>>(b, extent_b, b64, b_abs);
  CUDA_CHECK(cudaGetLastError());
  vendor::RowMajorGemm out = g;
  out.ldc = g.n;
  double acc_beta = 0;
  if (beta != 0 && c != nullptr) {
    init_from_c<<<blocks_for(g.m * g.n), 256, 0, stream>>>(c, g.ldc, g.m, g.n, beta, ref, mag);
    CUDA_CHECK(cudaGetLastError());
    acc_beta = 1;
  }
  if (g.k == 0 && acc_beta == 0) {
    CUDA_CHECK(cudaMemsetAsync(ref, 0, sizeof(double) * g.m * g.n, stream));
    CUDA_CHECK(cudaMemsetAsync(mag, 0, sizeof(double) * g.m * g.n, stream));
    return ok_status();
  }
  ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f64_pedantic(handle, out, alpha, a64, b64, acc_beta, ref));
  ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f64_pedantic(handle, out, std::fabs(alpha), a_abs, b_abs, acc_beta, mag));
  return ok_status();
}

}  // namespace assay::device_ref
