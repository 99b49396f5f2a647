// Backward of the fp32 GEMM C = alpha * A * B (row-major, leading dimensions):
//   dA  = alpha * dC * B^T      (m x k)  overwritten
//   dB += alpha * A^T * dC      (k x n)  accumulated: the caller's dB is added to
// which is how frameworks accumulate a weight gradient over micro-batches.
// Any m, n, k >= 0. kernels/ includes nothing of harness/ or references/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels {

struct GemmBwdF32Args {
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;  ///< m x k, lda >= k
  int64_t lda = 0;
  const float* b = nullptr;  ///< k x n, ldb >= n
  int64_t ldb = 0;
  const float* dc = nullptr;  ///< m x n, lddc >= n
  int64_t lddc = 0;
  float* da = nullptr;  ///< m x k, ldda >= k (written)
  int64_t ldda = 0;
  float* db = nullptr;  ///< k x n, lddb >= n (accumulated)
  int64_t lddb = 0;
};

using GemmBwdF32Launcher = cudaError_t (*)(const GemmBwdF32Args&, cudaStream_t);

/// Both products through the tiled GEMM (deterministic).
cudaError_t gemm_bwd_f32_tiled(const GemmBwdF32Args& args, cudaStream_t stream);
/// dB by atomicAdd over chunks of the m (batch) dimension: the order of the
/// additions varies between launches, so it is NOT bitwise deterministic.
cudaError_t gemm_bwd_f32_atomic(const GemmBwdF32Args& args, cudaStream_t stream);

}  // namespace assay::kernels
