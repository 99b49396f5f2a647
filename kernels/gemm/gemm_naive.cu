// Naive fp32 GEMM: one thread per element of C, a plain k-loop of fmaf.
// The baseline the harness measures every other variant against; it favours
// obviously-correct indexing over speed.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_ladder_f32.cuh"

namespace assay::kernels {
namespace {

// 32 threads along n so a warp reads B (non-transposed) and writes C with
// consecutive addresses; 8 rows per block keeps the block at 256 threads.
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;
// gridDim.y (and .z) are limited to 65535; larger m is covered by a
// grid-stride loop rather than by failing the launch.
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 2147483647;

__global__ void __launch_bounds__(kBlockX* kBlockY)
    gemm_f32_naive_kernel(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
                          const float* __restrict__ a, int64_t lda, const float* __restrict__ b, int64_t ldb,
                          float beta, float* __restrict__ c, int64_t ldc) {
  // Element strides of op(A) along p and op(B) along p: with a transpose the
  // k direction walks the leading dimension instead of the contiguous one.
  const int64_t a_step = trans_a ? lda : 1;
  const int64_t b_step = trans_b ? 1 : ldb;
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  const int64_t col_stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; i < m; i += row_stride) {
    for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += col_stride) {
      // All offsets in int64: i*lda alone exceeds 2^31 for m, lda ~ 50k.
      const float* pa = a + (trans_a ? i : i * lda);
      const float* pb = b + (trans_b ? j * ldb : j);
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc = fmaf(pa[p * a_step], pb[p * b_step], acc);
      float* pc = c + i * ldc + j;
      // BLAS: beta == 0 means C is write-only, so a NaN/Inf already in C must
      // not leak through 0*C. alpha*acc is kept even when k == 0 to match the
      // reference bit for bit (alpha = Inf gives NaN there too).
      *pc = (beta == 0.0f) ? alpha * acc : fmaf(beta, *pc, alpha * acc);
    }
  }
}

using ladder::validate;  // kernels/gemm/gemm_ladder_f32.cuh: what gemm.h declares invalid

}  // namespace

/// Launches the one-thread-per-element fp32 GEMM on `stream` (asynchronous).
cudaError_t gemm_f32_naive(const GemmF32Args& args, cudaStream_t stream) {
  if (const cudaError_t e = validate(args); e != cudaSuccess) return e;
  if (args.m == 0 || args.n == 0) return cudaSuccess;  // empty C: nothing to launch
  const dim3 block(kBlockX, kBlockY);
  const int64_t blocks_x = (args.n + kBlockX - 1) / kBlockX;
  const int64_t blocks_y = (args.m + kBlockY - 1) / kBlockY;
  const dim3 grid(static_cast<unsigned>(std::min(blocks_x, kMaxGridX)),
                  static_cast<unsigned>(std::min(blocks_y, kMaxGridY)));
  gemm_f32_naive_kernel<<<grid, block, 0, stream>>>(args.m, args.n, args.k, args.trans_a, args.trans_b, args.alpha,
                                                    args.a, args.lda, args.b, args.ldb, args.beta, args.c, args.ldc);
  return cudaGetLastError();
}

}  // namespace assay::kernels
