// Shared-memory tiled fp32 GEMM: each block owns a 32x32 tile of C and walks
// k in 32-wide tiles staged through shared memory. Every tail (m, n, k not a
// multiple of 32) is guarded: loads outside op(A)/op(B) read as 0, stores
// outside C are skipped.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm/gemm.h"

namespace assay::kernels {
namespace {

constexpr int kTile = kGemmTiledTile;  // 32: edge of the C tile and of the k-tile
// 32x8 threads, each computing kTile/kRows = 4 rows of one column of the C
// tile: 256 threads per block (several blocks per SM) and 4 independent FMA
// chains per thread, instead of 1024 threads with one output each.
constexpr int kRows = 8;
constexpr int kPerThread = kTile / kRows;
static_assert(kTile == 32, "thread mapping assumes a warp spans one tile row");
static_assert(kTile % kRows == 0);
constexpr int64_t kMaxGridY = 65535;  // hardware limit of gridDim.y
constexpr int64_t kMaxGridX = 2147483647;

// TransA / TransB are template parameters so each layout gets its own
// branch-free, coalesced load path.
template <bool TransA, bool TransB>
__global__ void __launch_bounds__(kTile* kRows)
    gemm_f32_tiled_kernel(int64_t m, int64_t n, int64_t k, float alpha, const float* __restrict__ a, int64_t lda,
                          const float* __restrict__ b, int64_t ldb, float beta, float* __restrict__ c, int64_t ldc,
                          int64_t tiles_m, int64_t tiles_n) {
  // as[i][p] = op(A)[row0+i][k0+p], bs[p][j] = op(B)[k0+p][col0+j]. The +1
  // column of padding makes column-wise accesses (stride 33 words) hit 32
  // distinct banks: the transposed loads store down a column.
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);

  // Grid-stride over tiles so m/32 > 65535 still works; the bounds depend on
  // blockIdx only, so every thread of a block takes the same trip count and
  // the barriers below are never divergent.
  for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
    for (int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
      const int64_t row0 = tm * kTile;
      const int64_t col0 = tn * kTile;
      float acc[kPerThread] = {};

      for (int64_t k0 = 0; k0 < k; k0 += kTile) {
        // Load phase. In each case tx runs along the matrix's contiguous
        // dimension, so a warp reads 32 consecutive floats (one 128-byte line).
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) {
          const int s = ty + r * kRows;
          if constexpr (!TransA) {  // A[i][p] = a[i*lda + p]: contiguous along p
            const int64_t i = row0 + s, p = k0 + tx;
            as[s][tx] = (i < m && p < k) ? a[i * lda + p] : 0.0f;
          } else {  // A[i][p] = a[p*lda + i]: contiguous along i
            const int64_t i = row0 + tx, p = k0 + s;
            as[tx][s] = (i < m && p < k) ? a[p * lda + i] : 0.0f;
          }
          if constexpr (!TransB) {  // B[p][j] = b[p*ldb + j]: contiguous along j
            const int64_t p = k0 + s, j = col0 + tx;
            bs[s][tx] = (p < k && j < n) ? b[p * ldb + j] : 0.0f;
          } else {  // B[p][j] = b[j*ldb + p]: contiguous along p
            const int64_t p = k0 + tx, j = col0 + s;
            bs[tx][s] = (p < k && j < n) ? b[j * ldb + p] : 0.0f;
          }
        }
        __syncthreads();  // the tile is complete before anyone reads it

        // Compute phase: as[...][p] is one address per warp (broadcast),
        // bs[p][tx] is 32 consecutive words (conflict-free). Zero-filled
        // tails contribute exact zeros, so the k-tail needs no extra guard.
#pragma unroll
        for (int p = 0; p < kTile; ++p) {
          const float bv = bs[p][tx];
#pragma unroll
          for (int r = 0; r < kPerThread; ++r) acc[r] = fmaf(as[ty + r * kRows][p], bv, acc[r]);
        }
        __syncthreads();  // nobody overwrites the tile while others still read it
      }

      // Store phase: tx along n, so a warp writes one contiguous row segment.
      const int64_t j = col0 + tx;
      if (j < n) {
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) {
          const int64_t i = row0 + ty + r * kRows;
          if (i < m) {
            float* pc = c + i * ldc + j;
            // BLAS: beta == 0 means C is write-only (NaN in C must not leak).
            *pc = (beta == 0.0f) ? alpha * acc[r] : fmaf(beta, *pc, alpha * acc[r]);
          }
        }
      }
    }
  }
}

// Rejects what the header declares invalid; the leading dimensions are only
// checked for matrices the kernel actually reads (A, B not read when k == 0).
cudaError_t validate(const GemmF32Args& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return cudaErrorInvalidValue;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  if (g.ldc < g.n) return cudaErrorInvalidValue;
  if (g.k > 0) {
    if (g.lda < (g.trans_a ? g.m : g.k)) return cudaErrorInvalidValue;
    if (g.ldb < (g.trans_b ? g.k : g.n)) return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

template <bool TransA, bool TransB>
void launch(const GemmF32Args& g, int64_t tiles_m, int64_t tiles_n, cudaStream_t stream) {
  const dim3 block(kTile, kRows);
  const dim3 grid(static_cast<unsigned>(std::min(tiles_n, kMaxGridX)),
                  static_cast<unsigned>(std::min(tiles_m, kMaxGridY)));
  gemm_f32_tiled_kernel<TransA, TransB><<<grid, block, 0, stream>>>(g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb,
                                                                    g.beta, g.c, g.ldc, tiles_m, tiles_n);
}

}  // namespace

/// Launches the 32x32-tiled shared-memory fp32 GEMM on `stream` (asynchronous).
cudaError_t gemm_f32_tiled(const GemmF32Args& args, cudaStream_t stream) {
  if (const cudaError_t e = validate(args); e != cudaSuccess) return e;
  if (args.m == 0 || args.n == 0) return cudaSuccess;  // empty C: nothing to launch
  const int64_t tiles_m = (args.m + kTile - 1) / kTile;
  const int64_t tiles_n = (args.n + kTile - 1) / kTile;
  using Launch = void (*)(const GemmF32Args&, int64_t, int64_t, cudaStream_t);
  static constexpr Launch kLaunch[2][2] = {{launch<false, false>, launch<false, true>},
                                           {launch<true, false>, launch<true, true>}};
  kLaunch[args.trans_a][args.trans_b](args, tiles_m, tiles_n, stream);
  return cudaGetLastError();
}

}  // namespace assay::kernels
