// cuBLAS GEMM as a vendor reference for row-major problems (kernels/gemm/gemm.h
// conventions). Row-major C = op(A)op(B) is column-major C^T = op(B)^T op(A)^T,
// so A and B swap places and keep their transpose flags.
#pragma once

#include <cstdint>

#include <cublas_v2.h>

#include "harness/dtype.h"
#include "harness/status.h"

namespace assay::vendor {

struct RowMajorGemm {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

/// fp32 GEMM with CUBLAS_COMPUTE_32F_PEDANTIC (no tf32, no reduced precision).
/// Runs on the handle's stream; does not synchronise.
Status cublas_gemm_f32_pedantic(cublasHandle_t handle, const RowMajorGemm& g, float alpha, const float* a,
                                const float* b, float beta, float* c);

/// fp64 GEMM with CUBLAS_COMPUTE_64F_PEDANTIC.
Status cublas_gemm_f64_pedantic(cublasHandle_t handle, const RowMajorGemm& g, double alpha, const double* a,
                                const double* b, double beta, double* c);

/// cublasGemmEx for row-major problems: A and B of type `in` (kTF32: fp32 storage), C of type
/// `out`, any compute type cublasGemmEx accepts (alpha and beta are converted to its scalar
/// type: fp32 for the 32F family, int32 for 32I (they must be integers), half for 16F, double
/// for 64F). With an output narrower than the compute type, cuBLAS by default may reduce
/// split-K partials in the output type: a caller that promises compute-type accumulation
/// sets CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION on the handle's math mode.
/// int8 -> int32 (CUBLAS_COMPUTE_32I) runs IMMA kernels: keep to their documented layout
/// (cuBLAS docs, cublasLtMatmul, "To use IMMA kernels", regular data ordering), here in
/// row-major terms (cuBLAS's m is our n): trans_a = false, trans_b = true; n and k multiples
/// of 4; lda, ldb, ldc multiples of 4; A and B 4-byte aligned. Outside it cuBLAS 13.1 on an
/// H200 returned CUBLAS_STATUS_NOT_SUPPORTED for 6536 of 6666 random layouts.
/// Errors: kUnavailable for CUBLAS_STATUS_NOT_SUPPORTED, kInvalidArgument for
/// CUBLAS_STATUS_INVALID_VALUE, kInternal otherwise. Does not synchronise.
Status cublas_gemm_ex(cublasHandle_t handle, const RowMajorGemm& g, DType in, DType out, cublasComputeType_t compute,
                      double alpha, const void* a, const void* b, double beta, void* c);

}  // namespace assay::vendor
