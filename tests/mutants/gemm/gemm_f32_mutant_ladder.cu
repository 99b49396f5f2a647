// MUTANTS of the fp32 GEMM ladder (kernels/gemm/gemm_ladder_f32.cu) -- planted
// bugs, not kernels to use. One per rung; each is the rung's loop structure with
// one line changed, documented at its kernel:
//
//   mutant_coalesced_row_tail  coalesced: row loop `i <= m` (off by one): the
//        warp past the last row reads A's row m and writes C's row m, past the
//        end of C. Caught by: guard (kGuard) / gap (kGapWritten) when m % 8 != 0;
//        rows that exist are right, so no bound failure.
//   mutant_regblock_swizzle    regblock: the A tile's store swizzles rows (i ^ 1)
//        on odd k slices (a bank-conflict swizzle) but the compute loop reads
//        unswizzled: rows 2r and 2r+1 trade their k-terms 8..15, 24..31, ...
//        Only wrong when k > 8 (the second slice). Caught by: exact, bound.
//   mutant_vec4_misaligned     vec4: takes the float4 path whenever A's and B's
//        base pointers are 16-byte aligned, ignoring ld % 4, and indexes the
//        float4 array with (row*ld + col)/4: rows whose start is not a multiple
//        of 4 read data shifted by up to 3 elements (no fault: the address is
//        rounded down). Caught by: bound, exact on ld % 4 != 0 with offset 0/4.
//   mutant_cpasync_no_wait     cpasync: the wait_group + __syncthreads() before
//        each compute is missing: the compute reads a stage whose copies are
//        still in flight, and the refill overwrites the stage other warps are
//        still reading. Caught by: exact, bound (non-deterministically).
//   mutant_splitk_drops_tail   splitk: splits = k / chunk (floor), so the last,
//        shorter chunk is never launched when chunk does not divide k (k > 64).
//        Caught by: exact, bound.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm/gemm_ladder_f32.cuh"
#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmF32Args;
using namespace kernels::ladder;
constexpr int64_t kMaxGridY = 65535;

// ---- coalesced with `i <= m` ---------------------------------------------------------
__global__ void coalesced_row_tail_kernel(GemmF32Args g) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t j = int64_t{blockIdx.x} * 32 + lane;
  for (int64_t i = int64_t{blockIdx.y} * 8 + warp; i <= g.m; i += int64_t{gridDim.y} * 8) {  // BUG: <= m
    if (j >= g.n) continue;
    float acc0 = 0.0f, acc1 = 0.0f;
    int64_t p = 0;
    for (; p + 1 < g.k; p += 2) {
      acc0 = fmaf(op_a(g.a, g.lda, g.trans_a, i, p), op_b(g.b, g.ldb, g.trans_b, p, j), acc0);
      acc1 = fmaf(op_a(g.a, g.lda, g.trans_a, i, p + 1), op_b(g.b, g.ldb, g.trans_b, p + 1, j), acc1);
    }
    if (p < g.k) acc0 = fmaf(op_a(g.a, g.lda, g.trans_a, i, p), op_b(g.b, g.ldb, g.trans_b, p, j), acc0);
    store_c(g.c, g.ldc, i, j, g.alpha, g.beta, acc0 + acc1);
  }
}

// ---- the register-blocked rungs, one bug each ----------------------------------------
enum class Bug { kSwizzle, kVecMisaligned, kSplitDropsTail };

template <Bug B>
__global__ void __launch_bounds__(kThreads) regblock_mutant_kernel(GemmF32Args g, int64_t tiles_m, int64_t chunk) {
  __shared__ float as[kBK][kBM];
  __shared__ float bs[kBK][kBN];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int tid = ty * static_cast<int>(blockDim.x) + tx;
  const bool split = B == Bug::kSplitDropsTail;
  const int64_t k_begin = split ? int64_t{blockIdx.z} * chunk : 0;
  const int64_t k_end = split ? (k_begin + chunk < g.k ? k_begin + chunk : g.k) : g.k;
  // BUG (kVecMisaligned): alignment of the base pointers only; ld % 4 is not checked.
  const bool vec = B == Bug::kVecMisaligned && reinterpret_cast<uintptr_t>(g.a) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(g.b) % 16 == 0;
  const int64_t col0 = int64_t{blockIdx.x} * kBN;
  for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
    const int64_t row0 = tm * kBM;
    float acc[kTM][kTN] = {};
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK) {
      // BUG (kSwizzle): odd slices are stored with rows swapped in pairs.
      const int sw = B == Bug::kSwizzle && ((k0 / kBK) & 1) ? 1 : 0;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int e = tid + r * kThreads;
        int i, p, j;
        a_slot(g.trans_a, e, i, p);
        float av = 0.0f;
        if (row0 + i < g.m && k0 + p < k_end) {
          if (vec) {  // BUG (kVecMisaligned): float4 number idx/4, lane = position in the run
            const int64_t idx = g.trans_a ? (k0 + p) * g.lda + row0 + i : (row0 + i) * g.lda + k0 + p;
            const float4 x = reinterpret_cast<const float4*>(g.a)[idx / 4];
            const int t = static_cast<int>(g.trans_a ? i % 4 : p % 4);
            av = t == 0 ? x.x : t == 1 ? x.y : t == 2 ? x.z : x.w;
          } else {
            av = op_a(g.a, g.lda, g.trans_a, row0 + i, k0 + p);
          }
        }
        as[p][i ^ sw] = av;
        b_slot(g.trans_b, e, p, j);
        float bv = 0.0f;
        if (k0 + p < k_end && col0 + j < g.n) {
          if (vec) {
            const int64_t idx = g.trans_b ? (col0 + j) * g.ldb + k0 + p : (k0 + p) * g.ldb + col0 + j;
            const float4 x = reinterpret_cast<const float4*>(g.b)[idx / 4];
            const int t = static_cast<int>(g.trans_b ? p % 4 : j % 4);
            bv = t == 0 ? x.x : t == 1 ? x.y : t == 2 ? x.z : x.w;
          } else {
            bv = op_b(g.b, g.ldb, g.trans_b, k0 + p, col0 + j);
          }
        }
        bs[p][j] = bv;
      }
      __syncthreads();
      micro_tile(as, bs, tx, ty, acc);
      __syncthreads();
    }
    if constexpr (split) {
#pragma unroll
      for (int r = 0; r < kTM; ++r)
#pragma unroll
        for (int q = 0; q < kTN; ++q) {
          const int64_t i = row0 + ty * kTM + r, j = col0 + tx * kTN + q;
          if (i < g.m && j < g.n) atomicAdd(g.c + i * g.ldc + j, g.alpha * acc[r][q]);
        }
    } else {
      store_micro_tile(g.c, g.ldc, g.m, g.n, row0, col0, tx, ty, g.alpha, g.beta, acc);
    }
  }
}

__global__ void scale_c_kernel(float* __restrict__ c, int64_t m, int64_t n, int64_t ldc, float beta) {
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (int64_t i = blockIdx.y; i < m; i += gridDim.y)
    if (j < n) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

template <Bug B>
cudaError_t launch_regblock_mutant(const GemmF32Args& g, cudaStream_t stream) {
  if (const cudaError_t e = validate(g); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  int64_t splits = 1, chunk = 0;
  if constexpr (B == Bug::kSplitDropsTail) {
    scale_c_kernel<<<dim3(static_cast<unsigned>((g.n + 255) / 256), static_cast<unsigned>(std::min(g.m, kMaxGridY))),
                     256, 0, stream>>>(g.c, g.m, g.n, g.ldc, g.beta);
    int64_t right = 0;
    kernels::gemm_f32_splitk_plan(g.k, right, chunk);
    splits = chunk > 0 ? std::max<int64_t>(g.k / chunk, 1) : 0;  // BUG: floor, not ceil
    if (splits == 0) return cudaGetLastError();
  }
  const int64_t tiles_m = (g.m + kBM - 1) / kBM;
  const dim3 grid(static_cast<unsigned>((g.n + kBN - 1) / kBN), static_cast<unsigned>(std::min(tiles_m, kMaxGridY)),
                  static_cast<unsigned>(splits));
  regblock_mutant_kernel<B><<<grid, dim3(kBN / kTN, kBM / kTM), 0, stream>>>(g, tiles_m, chunk);
  return cudaGetLastError();
}

// ---- cpasync without the wait before compute -------------------------------------------
constexpr int kStages = 3;

__global__ void __launch_bounds__(kThreads) cpasync_no_wait_kernel(GemmF32Args g, int64_t tiles_m) {
  __shared__ __align__(16) float as[kStages][kBK][kBM];
  __shared__ __align__(16) float bs[kStages][kBK][kBN];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t col0 = int64_t{blockIdx.x} * kBN;
  const int64_t nk = (g.k + kBK - 1) / kBK;
  for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
    const int64_t row0 = tm * kBM;
    float acc[kTM][kTN] = {};
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) issue_slice(g, row0, col0, s * kBK, as[s], bs[s]);
      cp_async_commit();
    }
    for (int64_t t = 0; t < nk; ++t) {
      // BUG: no cp.async.wait_group and no __syncthreads() here.
      const int64_t next = t + kStages - 1;
      if (next < nk) issue_slice(g, row0, col0, next * kBK, as[next % kStages], bs[next % kStages]);
      cp_async_commit();
      micro_tile(as[t % kStages], bs[t % kStages], tx, ty, acc);
    }
    cp_async_wait<0>();
    __syncthreads();
    store_micro_tile(g.c, g.ldc, g.m, g.n, row0, col0, tx, ty, g.alpha, g.beta, acc);
  }
}

}  // namespace

cudaError_t gemm_f32_mutant_coalesced_row_tail(const GemmF32Args& g, cudaStream_t stream) {
  if (const cudaError_t e = validate(g); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((g.n + 31) / 32), static_cast<unsigned>(std::min((g.m + 7) / 8, kMaxGridY)));
  coalesced_row_tail_kernel<<<grid, 256, 0, stream>>>(g);
  return cudaGetLastError();
}

cudaError_t gemm_f32_mutant_regblock_swizzle(const GemmF32Args& g, cudaStream_t stream) {
  return launch_regblock_mutant<Bug::kSwizzle>(g, stream);
}

cudaError_t gemm_f32_mutant_vec4_misaligned(const GemmF32Args& g, cudaStream_t stream) {
  return launch_regblock_mutant<Bug::kVecMisaligned>(g, stream);
}

cudaError_t gemm_f32_mutant_splitk_drops_tail(const GemmF32Args& g, cudaStream_t stream) {
  return launch_regblock_mutant<Bug::kSplitDropsTail>(g, stream);
}

cudaError_t gemm_f32_mutant_cpasync_no_wait(const GemmF32Args& g, cudaStream_t stream) {
  if (const cudaError_t e = validate(g); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  const int64_t tiles_m = (g.m + kBM - 1) / kBM;
  const dim3 grid(static_cast<unsigned>((g.n + kBN - 1) / kBN), static_cast<unsigned>(std::min(tiles_m, kMaxGridY)));
  cpasync_no_wait_kernel<<<grid, dim3(kBN / kTN, kBM / kTM), 0, stream>>>(g, tiles_m);
  return cudaGetLastError();
}

}  // namespace assay::mutants
