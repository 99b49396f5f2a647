// my_gemm: this repository's fp32 GEMM, C = alpha * op(A) * op(B) + beta * C.
// Row-major with leading dimensions, in elements (the conventions of assay's
// kernels/gemm/gemm.h, so assay's gemm op can check it):
//   op(A) is m x k: A[i][p] = a[i*lda + p] (!trans_a) or a[p*lda + i] (trans_a);
//   op(B) is k x n: B[p][j] = b[p*ldb + j] (!trans_b) or b[j*ldb + p] (trans_b);
//   C is m x n:     C[i][j] = c[i*ldc + j].
// BLAS convention: with beta == 0, C is not read.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace my {

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
};

/// Launches my_gemm on `stream` (asynchronous); returns the launch error.
cudaError_t my_gemm(const GemmArgs& args, cudaStream_t stream);

}  // namespace my
