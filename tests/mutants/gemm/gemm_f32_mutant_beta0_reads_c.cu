// MUTANT gemm_f32_mutant_beta0_reads_c -- planted bug, not a kernel to use.
//
// Bug: the naive kernel's epilogue is the textbook formula
// `C = alpha*acc + beta*C` with no beta == 0 special case. Arithmetically
// 0*C is 0, so with finite C the output is bit-identical to the correct
// kernel -- but BLAS says C is not read when beta == 0, and 0*NaN = 0*Inf =
// NaN, so any NaN/Inf in C (including uninitialised memory, or the harness's
// output poison) ends up in the result.
//
// Expected to be caught by: the NaN/Inf pattern check (FailureKind::kNanInf)
// on beta == 0 cases whose C holds NaN (the kNaN value class, or the NaN
// output poison written before the launch). Cases with beta != 0, or with
// beta == 0 and finite C, cannot see it.
#include <algorithm>
#include <cstdint>

#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmF32Args;
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;

// No __launch_bounds__: with it ptxas (13.0, sm_90) squeezes this kernel to 32
// registers and spills 16 bytes, noise that has nothing to do with the bug.
__global__ void beta0_reads_c_kernel(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
                                     const float* __restrict__ a, int64_t lda, const float* __restrict__ b, int64_t ldb,
                                     float beta, float* __restrict__ c, int64_t ldc) {
  const int64_t a_step = trans_a ? lda : 1;
  const int64_t b_step = trans_b ? 1 : ldb;
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  const int64_t col_stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; i < m; i += row_stride) {
    for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += col_stride) {
      const float* pa = a + (trans_a ? i : i * lda);
      const float* pb = b + (trans_b ? j * ldb : j);
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc = fmaf(pa[p * a_step], pb[p * b_step], acc);
      float* pc = c + i * ldc + j;
      // BUG: C is read (and 0*NaN kept) even when beta == 0.
      *pc = fmaf(beta, *pc, alpha * acc);
    }
  }
}

}  // namespace

/// Naive fp32 GEMM that reads C when beta == 0 (planted bug).
cudaError_t gemm_f32_mutant_beta0_reads_c(const GemmF32Args& args, cudaStream_t stream) {
  if (args.m < 0 || args.n < 0 || args.k < 0) return cudaErrorInvalidValue;
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  const dim3 block(kBlockX, kBlockY);
  const int64_t blocks_x = (args.n + kBlockX - 1) / kBlockX;
  const int64_t blocks_y = (args.m + kBlockY - 1) / kBlockY;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks_x, 2147483647)),
                  static_cast<unsigned>(std::min<int64_t>(blocks_y, 65535)));
  beta0_reads_c_kernel<<<grid, block, 0, stream>>>(args.m, args.n, args.k, args.trans_a, args.trans_b, args.alpha,
                                                   args.a, args.lda, args.b, args.ldb, args.beta, args.c, args.ldc);
  return cudaGetLastError();
}

}  // namespace assay::mutants
