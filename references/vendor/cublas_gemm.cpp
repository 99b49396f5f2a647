#include "references/vendor/cublas_gemm.h"

#include <limits>

#include "harness/gpu/cuda_check.h"

namespace assay::vendor {
namespace {

Status gemm_ex(cublasHandle_t handle, const RowMajorGemm& g, const void* alpha, const void* a, const void* b,
               const void* beta, void* c, cudaDataType_t type, cublasComputeType_t compute) {
  if (g.m == 0 || g.n == 0) return ok_status();
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (g.m > kMax || g.n > kMax || g.k > kMax || g.lda > kMax || g.ldb > kMax || g.ldc > kMax)
    return invalid_argument("cuBLAS reference: a dimension exceeds 2^31-1");
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k),
                            alpha, b, type, static_cast<int>(g.ldb), a, type, static_cast<int>(g.lda), beta, c, type,
                            static_cast<int>(g.ldc), compute, CUBLAS_GEMM_DEFAULT));
  return ok_status();
}

}  // namespace

Status cublas_gemm_f32_pedantic(cublasHandle_t handle, const RowMajorGemm& g, float alpha, const float* a,
                                const float* b, float beta, float* c) {
  return gemm_ex(handle, g, &alpha, a, b, &beta, c, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC);
}

Status cublas_gemm_f64_pedantic(cublasHandle_t handle, const RowMajorGemm& g, double alpha, const double* a,
                                const double* b, double beta, double* c) {
  return gemm_ex(handle, g, &alpha, a, b, &beta, c, CUDA_R_64F, CUBLAS_COMPUTE_64F_PEDANTIC);
}

}  // namespace assay::vendor
