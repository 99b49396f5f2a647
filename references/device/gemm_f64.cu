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

// ref = alpha*P + beta*C and mag = |alpha|*M + |beta||C| from the products
// P = A*B and M = |A||B|, in the same order of operations as the host
// reference. alpha is applied here, not by cuBLAS: with alpha == 0 cuBLAS
// skips A*B entirely (the BLAS quick return), while the harness follows IEEE
// arithmetic, 0*Inf = NaN, exactly like references/host and the kernels.
__global__ void combine(const float* c, int64_t ldc, int64_t m, int64_t n, double alpha, double beta, double* ref,
                        double* mag) {
  const int64_t total = m * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    double r = alpha * ref[i];
    double s = fabs(alpha) * mag[i];
    // C given (read even with beta == 0, a variant's declared convention): 0 * C is NaN where C
    // is NaN or Inf, as in the kernel; its magnitude adds nothing then.
    if (c != nullptr) {
      const int64_t row = i / n, col = i % n;
      const double v = static_cast<double>(c[row * ldc + col]);
      r += beta * v;
      if (beta != 0) s += fabs(beta) * fabs(v);
    }
    ref[i] = r;
    mag[i] = s;
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
}

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
  if (g.k == 0) {
    CUDA_CHECK(cudaMemsetAsync(ref, 0, sizeof(double) * g.m * g.n, stream));
    CUDA_CHECK(cudaMemsetAsync(mag, 0, sizeof(double) * g.m * g.n, stream));
  } else {
    ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f64_pedantic(handle, out, 1.0, a64, b64, 0.0, ref));
    ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f64_pedantic(handle, out, 1.0, a_abs, b_abs, 0.0, mag));
  }
  combine<<<blocks_for(g.m * g.n), 256, 0, stream>>>(c, g.ldc, g.m, g.n, alpha, beta, ref, mag);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
