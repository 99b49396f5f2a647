// cuBLAS GEMM as a vendor reference for row-major problems (kernels/gemm/gemm.h
// conventions). Row-major C = op(A)op(B) is column-major C^T = op(B)^T op(A)^T,
// so A and B swap places and keep their transpose flags.
#pragma once

#include <cstdint>

#include <cublas_v2.h>

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

}  // namespace assay::vendor
