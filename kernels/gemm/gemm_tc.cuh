// Device code of the tensor-core GEMM kernels (kernels/gemm/gemm_tc.h), as templates over the
// input type, the output type, the transposes and a fault policy. The kernels instantiate them
// with NoFault (kernels/gemm/gemm_tc.cu); the planted bugs of tests/mutants/gemm/tc_mutants.cu
// instantiate the very same code with one switch on, so a mutant differs from its kernel by
// exactly the planted edit and nothing else.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "kernels/gemm/gemm_tc.h"
#include "kernels/rowwise/common.cuh"

namespace assay::kernels::tc {

/// Planted-fault switches; every kernel of this file takes one. All off: the correct kernel.
struct NoFault {
  static constexpr bool kRoundAccBf16 = false;     ///< mma: accumulator rounded to bf16 after every k-tile
  static constexpr bool kRoundAccF16 = false;      ///< wmma: accumulator rounded to fp16 after every k-tile
  static constexpr bool kNoCpAsyncWait = false;    ///< mma: no cp.async.wait_group before the mma
  static constexpr bool kSwapLdmatrixRow = false;  ///< mma: one A ldmatrix row address swapped (row ^ 1)
  static constexpr bool kNoKTailFill = false;      ///< both: k-tail elements of a tile left stale, not zeroed
  static constexpr bool kNoSyncAfterCompute = false;  ///< wmma: no barrier before the next tile overwrites
  static constexpr bool kBeta0ReadsC = false;      ///< both: C read (beta*C added) even when beta == 0
};

inline constexpr int kBM = kGemmTcTileMN, kBN = kGemmTcTileMN, kBK = kGemmTcTileK;
inline constexpr int kThreads = 128;  // 4 warps, 2 x 2 warp tiles of 32 x 32
inline constexpr int kStages = 3;     // cp.async pipeline depth of the mma kernel
inline constexpr int kPadK = kBK + 8;   // row length of a k-contiguous tile (16-byte rows, fewer bank conflicts)
inline constexpr int kPadMN = kBM + 8;  // row length of an m- or n-contiguous tile
inline constexpr int kStageElems = kBM * kPadK > kBK * kPadMN ? kBM * kPadK : kBK * kPadMN;

/// The launch arguments as the kernels take them (vec_*: 16-byte cp.async allowed for that operand).
struct Prob {
  int64_t m, n, k, lda, ldb, ldd;
  const void* a;
  const void* b;
  const float* scalars;
  void* d;
  bool vec_a, vec_b;
};

// fp32 <-> storage conversions (round to nearest even on store), shared with the row-wise kernels.
using rowwise::detail::from_float;
using rowwise::detail::to_float;

template <class T>
__device__ __forceinline__ T zero_of() {
  return from_float<T>(0.0f);
}

/// D[i][j] = alpha*acc + beta*C[i][j] (C not read when beta == 0), rounded once into O.
template <class F, class O>
__device__ __forceinline__ void epilogue_store(const Prob& p, int64_t i, int64_t j, float acc, float alpha,
                                               float beta) {
  O* d = static_cast<O*>(p.d) + i * p.ldd + j;
  float r = alpha * acc;
  if (F::kBeta0ReadsC || beta != 0.0f) r = fmaf(beta, to_float(*d), r);
  *d = from_float<O>(r);
}

// ---- wmma ------------------------------------------------------------------------------------------

template <class T, class O, class F>
__global__ void __launch_bounds__(kThreads) wmma_kernel(Prob p, bool ta, bool tb) {
  namespace w = nvcuda::wmma;
  __shared__ __align__(32) T as[kBM][kBK + 8];   // op(A) tile, k contiguous
  __shared__ __align__(32) T bs[kBK][kBN + 8];   // op(B) tile, n contiguous
  __shared__ __align__(32) float cs[kBM][kBN + 4];
  const T* A = static_cast<const T*>(p.a);
  const T* B = static_cast<const T*>(p.b);
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const int tid = int(threadIdx.x), warp = tid / 32, wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  w::fragment<w::accumulator, 16, 16, 16, float> acc[2][2];
  for (auto& r : acc)
    for (auto& f : r) w::fill_fragment(f, 0.0f);
  for (int64_t k0 = 0; k0 < p.k; k0 += kBK) {
    for (int e = tid; e < kBM * kBK; e += kThreads) {
      const int r = e / kBK, c = e % kBK;
      const int64_t i = m0 + r, q = k0 + c;
      if (F::kNoKTailFill && q >= p.k) continue;  // planted: stale shared memory past k
      as[r][c] = i < p.m && q < p.k ? (ta ? A[q * p.lda + i] : A[i * p.lda + q]) : zero_of<T>();
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int r = e / kBN, c = e % kBN;
      const int64_t q = k0 + r, j = n0 + c;
      if (F::kNoKTailFill && q >= p.k) continue;
      bs[r][c] = q < p.k && j < p.n ? (tb ? B[j * p.ldb + q] : B[q * p.ldb + j]) : zero_of<T>();
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      w::fragment<w::matrix_a, 16, 16, 16, T, w::row_major> fa[2];
      w::fragment<w::matrix_b, 16, 16, 16, T, w::row_major> fb[2];
      for (int x = 0; x < 2; ++x) {
        w::load_matrix_sync(fa[x], &as[wm + 16 * x][kk], kBK + 8);
        w::load_matrix_sync(fb[x], &bs[kk][wn + 16 * x], kBN + 8);
      }
      for (int x = 0; x < 2; ++x)
        for (int y = 0; y < 2; ++y) w::mma_sync(acc[x][y], fa[x], fb[y], acc[x][y]);
    }
    if constexpr (F::kRoundAccF16)
      for (auto& r : acc)
        for (auto& f : r)
          for (int t = 0; t < f.num_elements; ++t) f.x[t] = __half2float(__float2half_rn(f.x[t]));
    // The next iteration overwrites as/bs: every warp must be done reading them.
    if constexpr (!F::kNoSyncAfterCompute) __syncthreads();
  }
  for (int x = 0; x < 2; ++x)
    for (int y = 0; y < 2; ++y)
      w::store_matrix_sync(&cs[wm + 16 * x][wn + 16 * y], acc[x][y], kBN + 4, w::mem_row_major);
  __syncthreads();
  const float alpha = p.scalars[0], beta = p.scalars[1];
  for (int e = tid; e < kBM * kBN; e += kThreads) {
    const int r = e / kBN, c = e % kBN;
    if (m0 + r < p.m && n0 + c < p.n) epilogue_store<F, O>(p, m0 + r, n0 + c, cs[r][c], alpha, beta);
  }
}

// ---- mma.sync + ldmatrix + cp.async --------------------------------------------------------------------

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <bool Trans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/// c += a b for one m16n8k16 tile, fp32 accumulate (row-major A fragment, column-major B fragment).
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// One operand tile, rows [r0, r0 + 64) of the operand (m of op(A), n of op(B)) by k [k0, k0 + 32),
/// into shared memory. KC (k contiguous in memory: A untransposed, B transposed): element (r, q)
/// at x[r*ld + q], stored s[r*kPadK + q]; otherwise at x[q*ld + r], stored s[q*kPadMN + r].
/// 8-element chunks: one 16-byte cp.async when `vec` and the chunk lies inside; else element by
/// element with zero fill outside the operand.
template <class T, bool KC, class F>
__device__ __forceinline__ void load_tile(T* s, const T* x, int64_t ld, int64_t rows, int64_t k, int64_t r0,
                                          int64_t k0, bool vec) {
  for (int c = int(threadIdx.x); c < kBM * kBK / 8; c += kThreads) {
    const int rr = KC ? c / (kBK / 8) : (c % (kBM / 8)) * 8;
    const int qq = KC ? (c % (kBK / 8)) * 8 : c / (kBM / 8);
    const int64_t gr = r0 + rr, gq = k0 + qq;
    T* dst = KC ? s + rr * kPadK + qq : s + qq * kPadMN + rr;
    const bool inside = KC ? gr < rows && gq + 8 <= k : gq < k && gr + 8 <= rows;
    if (vec && inside) {
      cp_async16(dst, KC ? x + gr * ld + gq : x + gq * ld + gr);
      continue;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int64_t r = KC ? gr : gr + e, q = KC ? gq + e : gq;
      if (F::kNoKTailFill && q >= k) continue;  // planted: stale shared memory past k
      dst[e] = r < rows && q < k ? (KC ? x[r * ld + q] : x[q * ld + r]) : zero_of<T>();
    }
  }
}

template <class T, bool TA, bool TB, class O, class F>
__global__ void __launch_bounds__(kThreads) mma_kernel(Prob p) {
  __shared__ __align__(128) T sa[kStages][kStageElems];
  __shared__ __align__(128) T sb[kStages][kStageElems];
  const T* A = static_cast<const T*>(p.a);
  const T* B = static_cast<const T*>(p.b);
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  float acc[2][4][4] = {};
  const int64_t ktiles = (p.k + kBK - 1) / kBK;
  auto load = [&](int64_t kt, int st) {
    load_tile<T, !TA, F>(sa[st], A, p.lda, p.m, p.k, m0, kt * kBK, p.vec_a);
    load_tile<T, TB, F>(sb[st], B, p.ldb, p.n, p.k, n0, kt * kBK, p.vec_b);
  };
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < ktiles) load(st, st);
    cp_async_commit();
  }
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    // Tile kt's group is complete once at most kStages - 2 newer groups are pending; the barrier
    // publishes every thread's copies (and scalar stores) and frees the stage read at kt - 1.
    if constexpr (!F::kNoCpAsyncWait) cp_async_wait<kStages - 2>();
    __syncthreads();
    if (kt + kStages - 1 < ktiles) load(kt + kStages - 1, int((kt + kStages - 1) % kStages));
    cp_async_commit();
    const T* xa = sa[kt % kStages];
    const T* xb = sb[kt % kStages];
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int mb = wm + 16 * i;
        // x4: matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) = a0..a3.
        int r = (lane % 8) + (TA ? (lane / 16) * 8 : ((lane / 8) % 2) * 8);
        if (F::kSwapLdmatrixRow && kk == 16 && i == 0) r ^= 1;  // planted: wrong shared-memory row
        if constexpr (!TA)
          ldmatrix_x4<false>(af[i], xa + (mb + r) * kPadK + kk + (lane / 16) * 8);
        else
          ldmatrix_x4<true>(af[i], xa + (kk + r) * kPadMN + mb + ((lane / 8) % 2) * 8);
      }
#pragma unroll
      for (int j2 = 0; j2 < 2; ++j2) {
        const int nb = wn + 16 * j2;
        // x4: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0, b1 of two n8 tiles.
        uint32_t r[4];
        if constexpr (TB)
          ldmatrix_x4<false>(r, xb + (nb + (lane % 8) + (lane / 16) * 8) * kPadK + kk + ((lane / 8) % 2) * 8);
        else
          ldmatrix_x4<true>(r, xb + (kk + (lane % 8) + ((lane / 8) % 2) * 8) * kPadMN + nb + (lane / 16) * 8);
        bf[2 * j2][0] = r[0], bf[2 * j2][1] = r[1], bf[2 * j2 + 1][0] = r[2], bf[2 * j2 + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
    if constexpr (F::kRoundAccBf16)
      for (auto& x : acc)
        for (auto& y : x)
          for (float& v : y) v = __bfloat162float(__float2bfloat16_rn(v));
  }
  cp_async_wait<0>();
  const float alpha = p.scalars[0], beta = p.scalars[1];
  // Accumulator fragment: c0, c1 at (lane/4, 2*(lane%4) + {0, 1}), c2, c3 eight rows below.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const int64_t row = m0 + wm + 16 * i + lane / 4 + 8 * (h / 2), col = n0 + wn + 8 * j + 2 * (lane % 4) + h % 2;
        if (row < p.m && col < p.n) epilogue_store<F, O>(p, row, col, acc[i][j][h], alpha, beta);
      }
}

// ---- launchers --------------------------------------------------------------------------------------------

inline Prob make_prob(const GemmTcArgs& a) {
  auto vec = [](const void* ptr, int64_t ld) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && ld % 8 == 0;
  };
  return {a.m, a.n, a.k, a.lda, a.ldb, a.ldd, a.a, a.b, a.scalars, a.d, vec(a.a, a.lda), vec(a.b, a.ldb)};
}

/// Calls f(T{}, O{}) with the element types of `a`.
template <class Fn>
cudaError_t dispatch_types(const GemmTcArgs& a, Fn&& f) {
  auto with_out = [&](auto t) {
    switch (a.out) {
      case TcOut::kF16:
        return f(t, __half{});
      case TcOut::kBF16:
        return f(t, __nv_bfloat16{});
      default:
        return f(t, float{});
    }
  };
  return a.in == TcIn::kF16 ? with_out(__half{}) : with_out(__nv_bfloat16{});
}

inline dim3 grid_of(const GemmTcArgs& a) {
  return dim3(static_cast<unsigned>((a.n + kBN - 1) / kBN), static_cast<unsigned>((a.m + kBM - 1) / kBM));
}

template <class F>
cudaError_t launch_wmma(const GemmTcArgs& a, cudaStream_t s) {
  if (!gemm_tc_args_valid(a)) return cudaErrorInvalidValue;
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  const Prob p = make_prob(a);
  return dispatch_types(a, [&](auto t, auto o) {
    wmma_kernel<decltype(t), decltype(o), F><<<grid_of(a), kThreads, 0, s>>>(p, a.trans_a, a.trans_b);
    return cudaGetLastError();
  });
}

template <class F>
cudaError_t launch_mma(const GemmTcArgs& a, cudaStream_t s) {
  if (!gemm_tc_args_valid(a)) return cudaErrorInvalidValue;
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  const Prob p = make_prob(a);
  return dispatch_types(a, [&](auto t, auto o) {
    using T = decltype(t);
    using O = decltype(o);
    if (!a.trans_a && !a.trans_b)
      mma_kernel<T, false, false, O, F><<<grid_of(a), kThreads, 0, s>>>(p);
    else if (!a.trans_a)
      mma_kernel<T, false, true, O, F><<<grid_of(a), kThreads, 0, s>>>(p);
    else if (!a.trans_b)
      mma_kernel<T, true, false, O, F><<<grid_of(a), kThreads, 0, s>>>(p);
    else
      mma_kernel<T, true, true, O, F><<<grid_of(a), kThreads, 0, s>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace assay::kernels::tc
