// Shared-memory tiled fp32 GEMM: each block owns a 32x32 tile of C and walks
// k in 32-wide tiles staged through shared memory. Every tail (m, n, k not a
// multiple of 32) is guarded: loads outside op(A)/op(B) read as 0, stores
// outside C are skipped. The same kernel serves the strided-batched and the
// pointer-array batched launchers: blockIdx.z walks the batch (grid-stride,
// so more than 65535 matrices work), each batch entry a whole GEMM.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_ladder_f32.cuh"

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
constexpr int64_t kMaxGridZ = 65535;

/// Where batch entry z's matrices are: base + z * stride, or the z-th pointer of an array.
struct BatchView {
  int64_t count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  const float* const* pa = nullptr;  // pointer-array form when non-null (all three are)
  const float* const* pb = nullptr;
  float* const* pc = nullptr;
};

// TransA / TransB are template parameters so each layout gets its own
// branch-free, coalesced load path.
template <bool TransA, bool TransB>
__global__ void __launch_bounds__(kTile* kRows)
    gemm_f32_tiled_kernel(int64_t m, int64_t n, int64_t k, float alpha, const float* a0, int64_t lda, const float* b0,
                          int64_t ldb, float beta, float* c0, int64_t ldc, int64_t tiles_m, int64_t tiles_n,
                          BatchView batch) {
  // as[i][p] = op(A)[row0+i][k0+p], bs[p][j] = op(B)[k0+p][col0+j]. The +1
  // column of padding makes column-wise accesses (stride 33 words) hit 32
  // distinct banks: the transposed loads store down a column.
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);

  // Grid-stride over the batch and the tiles so m/32 > 65535 still works; the
  // bounds depend on blockIdx only, so every thread of a block takes the same
  // trip count and the barriers below are never divergent.
  for (int64_t z = blockIdx.z; z < batch.count; z += gridDim.z) {
    const float* __restrict__ a = batch.pa != nullptr ? batch.pa[z] : a0 + z * batch.stride_a;
    const float* __restrict__ b = batch.pb != nullptr ? batch.pb[z] : b0 + z * batch.stride_b;
    float* __restrict__ c = batch.pc != nullptr ? batch.pc[z] : c0 + z * batch.stride_c;
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
  }  // batch
}

using ladder::validate;  // kernels/gemm/gemm_ladder_f32.cuh: what gemm.h declares invalid

template <bool TransA, bool TransB>
void launch(const GemmF32Args& g, int64_t tiles_m, int64_t tiles_n, const BatchView& batch, cudaStream_t stream) {
  const dim3 block(kTile, kRows);
  const dim3 grid(static_cast<unsigned>(std::min(tiles_n, kMaxGridX)),
                  static_cast<unsigned>(std::min(tiles_m, kMaxGridY)),
                  static_cast<unsigned>(std::min(batch.count, kMaxGridZ)));
  gemm_f32_tiled_kernel<TransA, TransB><<<grid, block, 0, stream>>>(g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb,
                                                                    g.beta, g.c, g.ldc, tiles_m, tiles_n, batch);
}

cudaError_t launch_tiled(const GemmF32Args& args, const BatchView& batch, cudaStream_t stream) {
  if (const cudaError_t e = validate(args); e != cudaSuccess) return e;
  if (batch.count < 0) return cudaErrorInvalidValue;
  if (args.m == 0 || args.n == 0 || batch.count == 0) return cudaSuccess;  // empty C: nothing to launch
  const int64_t tiles_m = (args.m + kTile - 1) / kTile;
  const int64_t tiles_n = (args.n + kTile - 1) / kTile;
  using Launch = void (*)(const GemmF32Args&, int64_t, int64_t, const BatchView&, cudaStream_t);
  static constexpr Launch kLaunch[2][2] = {{launch<false, false>, launch<false, true>},
                                           {launch<true, false>, launch<true, true>}};
  kLaunch[args.trans_a][args.trans_b](args, tiles_m, tiles_n, batch, stream);
  return cudaGetLastError();
}

}  // namespace

/// Launches the 32x32-tiled shared-memory fp32 GEMM on `stream` (asynchronous).
cudaError_t gemm_f32_tiled(const GemmF32Args& args, cudaStream_t stream) {
  return launch_tiled(args, BatchView{}, stream);
}

cudaError_t gemm_f32_tiled_strided_batched(const GemmF32Args& args, int64_t batch, int64_t stride_a, int64_t stride_b,
                                           int64_t stride_c, cudaStream_t stream) {
  // Outputs of different entries must not overlap: C's footprint is (m - 1) * ldc + n.
  if (batch > 1 && args.m > 0 && args.n > 0 && stride_c < (args.m - 1) * args.ldc + args.n)
    return cudaErrorInvalidValue;
  if (stride_a < 0 || stride_b < 0) return cudaErrorInvalidValue;
  BatchView v;
  v.count = batch, v.stride_a = stride_a, v.stride_b = stride_b, v.stride_c = stride_c;
  return launch_tiled(args, v, stream);
}

cudaError_t gemm_f32_tiled_ptr_batched(const GemmF32Args& args, int64_t batch, const float* const* a_array,
                                       const float* const* b_array, float* const* c_array, cudaStream_t stream) {
  if (batch > 0 && (a_array == nullptr || b_array == nullptr || c_array == nullptr)) return cudaErrorInvalidValue;
  BatchView v;
  v.count = batch, v.pa = a_array, v.pb = b_array, v.pc = c_array;
  return launch_tiled(args, v, stream);
}

}  // namespace assay::kernels
