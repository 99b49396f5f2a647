// The fp32 GEMM optimisation ladder (gemm.h conventions: every transpose, any
// m, n, k >= 0, arbitrary leading dimensions and offsets, BLAS beta == 0):
//
//   coalesced  one thread per element of C on a flat 256-thread block: lane l of
//              warp w owns C[8*by + w][32*bx + l], so a warp's 32 lanes touch 32
//              consecutive columns of C and (non-transposed) B, and read one
//              broadcast element of A. naive gets the same footprint from a
//              32x8 two-dimensional block; this rung does the index arithmetic
//              by hand and sums even and odd k in two chains (a different
//              summation order, held to the same order-free bound).
//   regblock   64x64 C tile per 256 threads, 4x4 register micro-tile per thread,
//              8-wide k slices staged through shared memory, zero-filled tails.
//   vec4       regblock with 16-byte float4 global loads of 4-element runs
//              along each matrix's contiguous dimension, taken only when the
//              view allows it: base pointer 16-byte aligned AND leading
//              dimension % 4 == 0 (so every row start stays aligned) AND the
//              whole run in bounds. Otherwise that run falls back to 4 guarded
//              scalar loads. With the generator's layouts: offset 0 or 4 and a
//              leading dimension that is a multiple of 4 (cols % 4 == 0 with pad
//              0, 4 or 16) take the vector path except at a tail run past the
//              last column; offsets 1, 2, 5 or pads 1, 3, 33 on cols % 4 == 0
//              take the scalar path for the whole matrix (decided per matrix).
//   cpasync    regblock's tiles filled by 4-byte cp.async (sm_80+) in a
//              3-stage software pipeline: commit_group per k slice,
//              wait_group(1) + one __syncthreads() before each compute, src-size
//              0 zero-fills out-of-bounds elements.
//   splitk     regblock over one k chunk per blockIdx.z (chunks of a multiple
//              of 8, every chunk nonempty); a first pass sets C = beta*C (C not
//              read when beta == 0), then each chunk atomicAdds alpha*partial.
//              Summation order varies between launches: non-deterministic,
//              judged by the bound only.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_ladder_f32.cuh"

namespace assay::kernels {
namespace {

using namespace ladder;

constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 2147483647;

// ---- coalesced ----------------------------------------------------------------
constexpr int kCoalRows = 8;  // warps per block, one row of C each

__global__ void __launch_bounds__(32 * kCoalRows)
    gemm_f32_coalesced_kernel(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
                              const float* __restrict__ a, int64_t lda, const float* __restrict__ b, int64_t ldb,
                              float beta, float* __restrict__ c, int64_t ldc) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t j = int64_t{blockIdx.x} * 32 + lane;
  for (int64_t i = int64_t{blockIdx.y} * kCoalRows + warp; i < m; i += int64_t{gridDim.y} * kCoalRows) {
    if (j >= n) continue;
    // Two independent chains (even / odd p), added at the end.
    float acc0 = 0.0f, acc1 = 0.0f;
    int64_t p = 0;
    for (; p + 1 < k; p += 2) {
      acc0 = fmaf(op_a(a, lda, trans_a, i, p), op_b(b, ldb, trans_b, p, j), acc0);
      acc1 = fmaf(op_a(a, lda, trans_a, i, p + 1), op_b(b, ldb, trans_b, p + 1, j), acc1);
    }
    if (p < k) acc0 = fmaf(op_a(a, lda, trans_a, i, p), op_b(b, ldb, trans_b, p, j), acc0);
    store_c(c, ldc, i, j, alpha, beta, acc0 + acc1);
  }
}

// ---- regblock / vec4 / splitk ----------------------------------------------------
enum class Load { kScalar, kVec4 };

/// Reads the 4-element run starting at stored element (row, col0) of a rows x cols
/// matrix: one float4 when `vec_ok` (aligned view) and the run is in bounds,
/// else guarded scalars (0 outside). `col_end` <= cols clips a split-K chunk.
__device__ __forceinline__ void load_run(const float* base, int64_t ld, int64_t rows, int64_t col_end, int64_t row,
                                         int64_t col0, bool vec_ok, float (&v)[4]) {
  if (vec_ok && row < rows && col0 + 3 < col_end) {
    const float4 x = *reinterpret_cast<const float4*>(base + row * ld + col0);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    return;
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) v[t] = (row < rows && col0 + t < col_end) ? base[row * ld + col0 + t] : 0.0f;
}

template <Load L>
__device__ __forceinline__ void stage_tiles(const GemmF32Args& g, int64_t row0, int64_t col0, int64_t k0, int64_t k_end,
                                            bool a_vec, bool b_vec, float (&as)[kBK][kBM], float (&bs)[kBK][kBN]) {
  const int tid = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  if constexpr (L == Load::kScalar) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int e = tid + r * kThreads;
      int i, p, j;
      a_slot(g.trans_a, e, i, p);
      as[p][i] = (row0 + i < g.m && k0 + p < k_end) ? op_a(g.a, g.lda, g.trans_a, row0 + i, k0 + p) : 0.0f;
      b_slot(g.trans_b, e, p, j);
      bs[p][j] = (k0 + p < k_end && col0 + j < g.n) ? op_b(g.b, g.ldb, g.trans_b, k0 + p, col0 + j) : 0.0f;
    }
  } else {
    // 128 runs of 4 per tile: threads 0..127 stage A, 128..255 stage B.
    const int q = tid & 127;
    float v[4];
    if (tid < 128) {
      if (!g.trans_a) {  // runs along p: row i of the tile, p0 = 0 or 4
        const int i = q / 2, p0 = (q % 2) * 4;
        load_run(g.a, g.lda, g.m, k_end, row0 + i, k0 + p0, a_vec, v);
#pragma unroll
        for (int t = 0; t < 4; ++t) as[p0 + t][i] = v[t];
      } else {  // runs along i: stored row k0 + p
        const int p = q / 16, i0 = (q % 16) * 4;
        load_run(g.a, g.lda, k0 + p < k_end ? g.k : 0, g.m, k0 + p, row0 + i0, a_vec, v);
#pragma unroll
        for (int t = 0; t < 4; ++t) as[p][i0 + t] = v[t];
      }
    } else {
      if (!g.trans_b) {  // runs along j: stored row k0 + p
        const int p = q / 16, j0 = (q % 16) * 4;
        load_run(g.b, g.ldb, k0 + p < k_end ? g.k : 0, g.n, k0 + p, col0 + j0, b_vec, v);
#pragma unroll
        for (int t = 0; t < 4; ++t) bs[p][j0 + t] = v[t];
      } else {  // runs along p: stored row col0 + j
        const int j = q / 2, p0 = (q % 2) * 4;
        load_run(g.b, g.ldb, g.n, k_end, col0 + j, k0 + p0, b_vec, v);
#pragma unroll
        for (int t = 0; t < 4; ++t) bs[p0 + t][j] = v[t];
      }
    }
  }
}

/// A 16-byte aligned view whose every row start stays 16-byte aligned.
__device__ __forceinline__ bool vec_view(const float* p, int64_t ld) {
  return (reinterpret_cast<uintptr_t>(p) % 16 == 0) && ld % 4 == 0;
}

template <Load L, bool Split>
__global__ void __launch_bounds__(kThreads) gemm_f32_regblock_kernel(GemmF32Args g, int64_t tiles_m, int64_t chunk) {
  __shared__ float as[kBK][kBM];
  __shared__ float bs[kBK][kBN];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const bool a_vec = L == Load::kVec4 && vec_view(g.a, g.lda);
  const bool b_vec = L == Load::kVec4 && vec_view(g.b, g.ldb);
  // Split-K: this block's k range; otherwise all of k.
  const int64_t k_begin = Split ? int64_t{blockIdx.z} * chunk : 0;
  const int64_t k_end = Split ? (k_begin + chunk < g.k ? k_begin + chunk : g.k) : g.k;
  const int64_t col0 = int64_t{blockIdx.x} * kBN;
  // The trip counts depend on blockIdx only: every barrier is block-uniform.
  for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
    const int64_t row0 = tm * kBM;
    float acc[kTM][kTN] = {};
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK) {
      stage_tiles<L>(g, row0, col0, k0, k_end, a_vec, b_vec, as, bs);
      __syncthreads();  // the slice is complete before anyone reads it
      micro_tile(as, bs, tx, ty, acc);
      __syncthreads();  // nobody restages while others still read
    }
    if constexpr (Split) {
#pragma unroll
      for (int r = 0; r < kTM; ++r) {
        const int64_t i = row0 + ty * kTM + r;
#pragma unroll
        for (int q = 0; q < kTN; ++q) {
          const int64_t j = col0 + tx * kTN + q;
          if (i < g.m && j < g.n) atomicAdd(g.c + i * g.ldc + j, g.alpha * acc[r][q]);
        }
      }
    } else {
      store_micro_tile(g.c, g.ldc, g.m, g.n, row0, col0, tx, ty, g.alpha, g.beta, acc);
    }
  }
}

/// Split-K first pass: C = beta*C, or 0 without reading C when beta == 0.
__global__ void scale_c_kernel(float* __restrict__ c, int64_t m, int64_t n, int64_t ldc, float beta) {
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (int64_t i = blockIdx.y; i < m; i += gridDim.y) {
    if (j < n) {
      float* pc = c + i * ldc + j;
      *pc = beta == 0.0f ? 0.0f : beta * *pc;
    }
  }
}

// ---- cpasync ---------------------------------------------------------------------
constexpr int kStages = 3;

__global__ void __launch_bounds__(kThreads) gemm_f32_cpasync_kernel(GemmF32Args g, int64_t tiles_m) {
  __shared__ __align__(16) float as[kStages][kBK][kBM];
  __shared__ __align__(16) float bs[kStages][kBK][kBN];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t col0 = int64_t{blockIdx.x} * kBN;
  const int64_t nk = (g.k + kBK - 1) / kBK;
  for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
    const int64_t row0 = tm * kBM;
    float acc[kTM][kTN] = {};
    // Prologue: slices 0 .. kStages-2 in flight (a group is committed even when
    // empty so the wait_group count below is the same on every iteration).
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) issue_slice(g, row0, col0, s * kBK, as[s], bs[s]);
      cp_async_commit();
    }
    for (int64_t t = 0; t < nk; ++t) {
      cp_async_wait<kStages - 2>();  // this thread's copies of slice t have landed
      __syncthreads();               // everyone's copies visible; everyone done computing slice t-1
      // Refill the stage slice t-1 used, now free, with slice t + kStages - 1.
      const int64_t next = t + kStages - 1;
      if (next < nk) issue_slice(g, row0, col0, next * kBK, as[next % kStages], bs[next % kStages]);
      cp_async_commit();
      micro_tile(as[t % kStages], bs[t % kStages], tx, ty, acc);
    }
    cp_async_wait<0>();
    __syncthreads();  // the next row tile's prologue must not overwrite stages still read
    store_micro_tile(g.c, g.ldc, g.m, g.n, row0, col0, tx, ty, g.alpha, g.beta, acc);
  }
}

// ---- launchers -------------------------------------------------------------------
dim3 tile_grid(const GemmF32Args& g, int64_t splits, int64_t& tiles_m) {
  tiles_m = (g.m + kBM - 1) / kBM;
  const int64_t tiles_n = (g.n + kBN - 1) / kBN;
  return dim3(static_cast<unsigned>(std::min(tiles_n, kMaxGridX)), static_cast<unsigned>(std::min(tiles_m, kMaxGridY)),
              static_cast<unsigned>(splits));
}

template <Load L>
cudaError_t launch_regblock(const GemmF32Args& g, cudaStream_t stream) {
  if (const cudaError_t e = validate(g); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  int64_t tiles_m = 0;
  const dim3 grid = tile_grid(g, 1, tiles_m);
  gemm_f32_regblock_kernel<L, false><<<grid, dim3(kBN / kTN, kBM / kTM), 0, stream>>>(g, tiles_m, 0);
  return cudaGetLastError();
}

}  // namespace

/// Split-K chunking: about 64 k per chunk, at most 8 chunks, chunk a multiple of
/// kBK and every chunk nonempty (splits = ceil(k / chunk)).
void gemm_f32_splitk_plan(int64_t k, int64_t& splits, int64_t& chunk) {
  if (k <= 0) {
    splits = 0, chunk = 0;
    return;
  }
  const int64_t want = std::clamp<int64_t>((k + 63) / 64, 1, 8);
  chunk = ((k + want - 1) / want + kBK - 1) / kBK * kBK;
  splits = (k + chunk - 1) / chunk;
}

cudaError_t gemm_f32_coalesced(const GemmF32Args& g, cudaStream_t stream) {
  if (const cudaError_t e = validate(g); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  const int64_t bx = (g.n + 31) / 32, by = (g.m + kCoalRows - 1) / kCoalRows;
  const dim3 grid(static_cast<unsigned>(std::min(bx, kMaxGridX)), static_cast<unsigned>(std::min(by, kMaxGridY)));
  gemm_f32_coalesced_kernel<<<grid, 32 * kCoalRows, 0, stream>>>(g.m, g.n, g.k, g.trans_a, g.trans_b, g.alpha, g.a,
                                                                 g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
  return cudaGetLastError();
}

cudaError_t gemm_f32_regblock(const GemmF32Args& g, cudaStream_t stream) {
  return launch_regblock<Load::kScalar>(g, stream);
}

cudaError_t gemm_f32_vec4(const GemmF32Args& g, cudaStream_t stream) {
  return launch_regblock<Load::kVec4>(g, stream);
}

cudaError_t gemm_f32_cpasync(const GemmF32Args& g, cudaStream_t stream) {
  if (const cudaError_t e = validate(g); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  int64_t tiles_m = 0;
  const dim3 grid = tile_grid(g, 1, tiles_m);
  gemm_f32_cpasync_kernel<<<grid, dim3(kBN / kTN, kBM / kTM), 0, stream>>>(g, tiles_m);
  return cudaGetLastError();
}

cudaError_t gemm_f32_splitk(const GemmF32Args& g, cudaStream_t stream) {
  if (const cudaError_t e = validate(g); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  const dim3 sgrid(static_cast<unsigned>((g.n + 255) / 256), static_cast<unsigned>(std::min(g.m, kMaxGridY)));
  scale_c_kernel<<<sgrid, 256, 0, stream>>>(g.c, g.m, g.n, g.ldc, g.beta);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  int64_t splits = 0, chunk = 0;
  gemm_f32_splitk_plan(g.k, splits, chunk);
  if (splits == 0) return cudaSuccess;  // k == 0: C = beta*C is the whole answer
  int64_t tiles_m = 0;
  const dim3 grid = tile_grid(g, splits, tiles_m);
  gemm_f32_regblock_kernel<Load::kScalar, true><<<grid, dim3(kBN / kTN, kBM / kTM), 0, stream>>>(g, tiles_m, chunk);
  return cudaGetLastError();
}

}  // namespace assay::kernels
