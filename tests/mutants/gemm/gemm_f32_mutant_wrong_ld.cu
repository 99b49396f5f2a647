// MUTANT gemm_f32_mutant_wrong_ld -- planted bug, not a kernel to use.
//
// Bug: the naive kernel ignores args.lda and args.ldc and derives them from
// the shape, as if A and C were always contiguous: lda := k (m when trans_a),
// ldc := n. ldb is honoured. With unpadded A and C this is exactly right, so
// no unpadded case can expose it.
//
// Expected to be caught only when a leading dimension is padded:
//   lda > k (or > m): A is read at the wrong offsets, some of them in the
//     gaps that the harness fills with a NaN canary -> NaN/Inf pattern
//     (FailureKind::kNanInf), else wrong values -> bound (kBound);
//   ldc > n: rows 1.. of C land at i*n + j, so valid elements keep the output
//     poison (kUnwritten), gap elements change (kGapWritten), and the values
//     that are there are wrong (kBound).
#include <algorithm>
#include <cstdint>

#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmF32Args;
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;

__global__ void __launch_bounds__(kBlockX* kBlockY)
    wrong_ld_kernel(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
                    const float* __restrict__ a, int64_t ldb, const float* __restrict__ b, float beta,
                    float* __restrict__ c) {
  // BUG: "A is m x k and C is m x n, so their row strides are k and n".
  const int64_t lda = trans_a ? m : k;
  const int64_t ldc = n;
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
      *pc = (beta == 0.0f) ? alpha * acc : fmaf(beta, *pc, alpha * acc);
    }
  }
}

}  // namespace

/// Naive fp32 GEMM that assumes lda and ldc are unpadded (planted bug).
cudaError_t gemm_f32_mutant_wrong_ld(const GemmF32Args& args, cudaStream_t stream) {
  if (args.m < 0 || args.n < 0 || args.k < 0) return cudaErrorInvalidValue;
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  const dim3 block(kBlockX, kBlockY);
  const int64_t blocks_x = (args.n + kBlockX - 1) / kBlockX;
  const int64_t blocks_y = (args.m + kBlockY - 1) / kBlockY;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks_x, 2147483647)),
                  static_cast<unsigned>(std::min<int64_t>(blocks_y, 65535)));
  wrong_ld_kernel<<<grid, block, 0, stream>>>(args.m, args.n, args.k, args.trans_a, args.trans_b, args.alpha, args.a,
                                              args.ldb, args.b, args.beta, args.c);
  return cudaGetLastError();
}

}  // namespace assay::mutants
