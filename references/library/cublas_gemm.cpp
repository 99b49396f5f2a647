#include "references/library/cublas_gemm.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

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

Status cublas_gemm_ex(cublasHandle_t handle, const RowMajorGemm& g, DType in, DType out, cublasComputeType_t compute,
                      double alpha, const void* a, const void* b, double beta, void* c) {
  if (g.m == 0 || g.n == 0) return ok_status();
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.m > kMax || g.n > kMax || g.k > kMax || g.lda > kMax || g.ldb > kMax ||
      g.ldc > kMax)
    return invalid_argument("cuBLAS reference: a dimension is negative or exceeds 2^31-1");
  const auto type_of = [](DType t) -> cudaDataType_t {
    switch (t) {
      case DType::kF64:
        return CUDA_R_64F;
      case DType::kF16:
        return CUDA_R_16F;
      case DType::kBF16:
        return CUDA_R_16BF;
      case DType::kE4M3:
        return CUDA_R_8F_E4M3;
      case DType::kE5M2:
        return CUDA_R_8F_E5M2;
      case DType::kI8:
        return CUDA_R_8I;
      case DType::kI32:
        return CUDA_R_32I;
      default:
        return CUDA_R_32F;
    }
  };
  float af = static_cast<float>(alpha), bf = static_cast<float>(beta);
  double ad = alpha, bd = beta;
  int32_t ai = 0, bi = 0;
  uint16_t ah = 0, bh = 0;
  const void *pa = &af, *pb = &bf;
  switch (compute) {
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
      if (alpha != std::nearbyint(alpha) || beta != std::nearbyint(beta) || std::fabs(alpha) > 2147483647.0 ||
          std::fabs(beta) > 2147483647.0)
        return invalid_argument("cuBLAS reference: integer compute needs integer alpha and beta");
      ai = static_cast<int32_t>(alpha);
      bi = static_cast<int32_t>(beta);
      pa = &ai;
      pb = &bi;
      break;
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
      ah = f32_to_f16_bits(af);
      bh = f32_to_f16_bits(bf);
      pa = &ah;
      pb = &bh;
      break;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
      pa = &ad;
      pb = &bd;
      break;
    default:
      break;
  }
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasStatus_t st =
      cublasGemmEx(handle, op_b, op_a, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), pa, b,
                   type_of(in), static_cast<int>(g.ldb), a, type_of(in), static_cast<int>(g.lda), pb, c, type_of(out),
                   static_cast<int>(g.ldc), compute, CUBLAS_GEMM_DEFAULT);
  if (st == CUBLAS_STATUS_SUCCESS) return ok_status();
  const std::string m =
      fmt::format("cublasGemmEx({} -> {}): {}", dtype_name(in), dtype_name(out), cublasGetStatusName(st));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return unavailable(m);
  if (st == CUBLAS_STATUS_INVALID_VALUE) return invalid_argument(m);
  return internal_error(m);
}

}  // namespace assay::vendor
