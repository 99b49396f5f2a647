// MUTANT gemm_f32_mutant_k_tail -- planted bug, not a kernel to use.
//
// Bug: the k-loop runs over k / 32 full k-tiles (`for (t = 0; t < k / 32; ++t)`),
// the classic integer-division tail drop: the last k % 32 terms of every dot
// product are silently skipped (for k < 32 the result is just beta*C, or 0).
// The loads still carry their (now useless) `p < k` guards, so nothing reads
// out of bounds and no memory check fires.
//
// Expected to be caught by: the exact tier (FailureKind::kExact) on small-
// integer inputs with k % 32 != 0, and the rounding-error bound (kBound) on
// any case with k % 32 != 0 -- a dropped term is O(|a||b|), far above
// gamma_k * |A||B|. Cases with k a multiple of 32 (including k == 0) pass.
#include <algorithm>
#include <cstdint>

#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmF32Args;
constexpr int kTile = 32;
constexpr int kRows = 8;
constexpr int kPerThread = kTile / kRows;

template <bool TransA, bool TransB>
__global__ void __launch_bounds__(kTile* kRows)
    k_tail_kernel(int64_t m, int64_t n, int64_t k, float alpha, const float* __restrict__ a, int64_t lda,
                  const float* __restrict__ b, int64_t ldb, float beta, float* __restrict__ c, int64_t ldc,
                  int64_t tiles_m, int64_t tiles_n) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
    for (int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
      const int64_t row0 = tm * kTile;
      const int64_t col0 = tn * kTile;
      float acc[kPerThread] = {};
      // BUG: integer division drops the partial last k-tile.
      for (int64_t t = 0; t < k / kTile; ++t) {
        const int64_t k0 = t * kTile;
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) {
          const int s = ty + r * kRows;
          if constexpr (!TransA) {
            const int64_t i = row0 + s, p = k0 + tx;
            as[s][tx] = (i < m && p < k) ? a[i * lda + p] : 0.0f;
          } else {
            const int64_t i = row0 + tx, p = k0 + s;
            as[tx][s] = (i < m && p < k) ? a[p * lda + i] : 0.0f;
          }
          if constexpr (!TransB) {
            const int64_t p = k0 + s, j = col0 + tx;
            bs[s][tx] = (p < k && j < n) ? b[p * ldb + j] : 0.0f;
          } else {
            const int64_t p = k0 + tx, j = col0 + s;
            bs[tx][s] = (p < k && j < n) ? b[j * ldb + p] : 0.0f;
          }
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < kTile; ++p) {
          const float bv = bs[p][tx];
#pragma unroll
          for (int r = 0; r < kPerThread; ++r) acc[r] = fmaf(as[ty + r * kRows][p], bv, acc[r]);
        }
        __syncthreads();
      }
      // Guarded store, as in the real tiled kernel.
      const int64_t j = col0 + tx;
      if (j < n) {
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) {
          const int64_t i = row0 + ty + r * kRows;
          if (i < m) {
            float* pc = c + i * ldc + j;
            *pc = (beta == 0.0f) ? alpha * acc[r] : fmaf(beta, *pc, alpha * acc[r]);
          }
        }
      }
    }
  }
}

template <bool TransA, bool TransB>
void launch(const GemmF32Args& g, int64_t tiles_m, int64_t tiles_n, cudaStream_t stream) {
  const dim3 block(kTile, kRows);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles_n, 2147483647)),
                  static_cast<unsigned>(std::min<int64_t>(tiles_m, 65535)));
  k_tail_kernel<TransA, TransB><<<grid, block, 0, stream>>>(g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c,
                                                            g.ldc, tiles_m, tiles_n);
}

}  // namespace

/// Tiled fp32 GEMM that drops the partial last k-tile (planted bug).
cudaError_t gemm_f32_mutant_k_tail(const GemmF32Args& args, cudaStream_t stream) {
  if (args.m < 0 || args.n < 0 || args.k < 0) return cudaErrorInvalidValue;
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  const int64_t tiles_m = (args.m + kTile - 1) / kTile;
  const int64_t tiles_n = (args.n + kTile - 1) / kTile;
  using Launch = void (*)(const GemmF32Args&, int64_t, int64_t, cudaStream_t);
  static constexpr Launch kLaunch[2][2] = {{launch<false, false>, launch<false, true>},
                                           {launch<true, false>, launch<true, true>}};
  kLaunch[args.trans_a][args.trans_b](args, tiles_m, tiles_n, stream);
  return cudaGetLastError();
}

}  // namespace assay::mutants
