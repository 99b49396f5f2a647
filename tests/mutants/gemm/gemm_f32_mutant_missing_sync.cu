// MUTANT gemm_f32_mutant_missing_sync -- planted bug, not a kernel to use.
//
// Bug: the tiled kernel has only one __syncthreads() per k-tile, after the
// load; the one between the compute loop and the next tile's load is missing
// ("the loads come after a barrier anyway"). A warp that finishes its 32
// FMAs early starts overwriting as/bs with tile t+1 while slower warps of the
// block still read tile t, so some outputs mix terms of two k-tiles. Whether
// it shows depends on warp scheduling: a data race, not a deterministic bug.
// Needs k > 32 (at least two k-tiles) or several output tiles per block.
//
// Expected to be caught by: the exact tier (FailureKind::kExact) or the
// rounding-error bound (kBound) when the race fires in the checked launch, and
// the determinism rerun (kNondeterministic) when two launches race
// differently. It only fires under SM contention (several blocks per SM, long
// k): measured on an H200 with small-integer inputs, 20 launches per shape,
// it never showed at m = n <= 512 (any k up to 4096), showed in 2-4/20 runs at
// m = n >= 1024 with k = 512, and in 17-20/20 runs at 2048^2 with k >= 1024 or
// 1024^2 with k = 4096 (~1e-4 .. 1e-3 of the elements wrong). A case set of
// small shapes will let it pass; compute-sanitizer --tool racecheck flags it at
// any shape with k > 32.
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
    missing_sync_kernel(int64_t m, int64_t n, int64_t k, float alpha, const float* __restrict__ a, int64_t lda,
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
      for (int64_t k0 = 0; k0 < k; k0 += kTile) {
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
        // BUG: missing __syncthreads() -- the next iteration's stores into
        // as/bs race with other warps' reads above.
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
  missing_sync_kernel<TransA, TransB><<<grid, block, 0, stream>>>(g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb,
                                                                  g.beta, g.c, g.ldc, tiles_m, tiles_n);
}

}  // namespace

/// Tiled fp32 GEMM without the trailing __syncthreads() of the k-loop (planted bug).
cudaError_t gemm_f32_mutant_missing_sync(const GemmF32Args& args, cudaStream_t stream) {
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
