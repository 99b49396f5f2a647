// Device building blocks shared by the fp32 GEMM optimisation ladder
// (gemm_ladder_f32.cu) and its planted-bug copies (tests/mutants/gemm): the
// operand accessors, argument validation, the guarded epilogue, the register
// micro-tile and the cp.async primitives. Each rung's own loop structure (the
// thing its mutant breaks) stays in its own file.
#pragma once

#include <cstdint>

#include "kernels/gemm/gemm.h"

namespace assay::kernels::ladder {

/// op(A)[i][p] for a row-major A with leading dimension lda (gemm.h conventions).
__device__ __forceinline__ float op_a(const float* a, int64_t lda, bool trans_a, int64_t i, int64_t p) {
  return trans_a ? a[p * lda + i] : a[i * lda + p];
}
/// op(B)[p][j] for a row-major B with leading dimension ldb.
__device__ __forceinline__ float op_b(const float* b, int64_t ldb, bool trans_b, int64_t p, int64_t j) {
  return trans_b ? b[j * ldb + p] : b[p * ldb + j];
}

/// The one-pass epilogue: C = alpha*acc + beta*C, C not read when beta == 0 (BLAS).
__device__ __forceinline__ void store_c(float* c, int64_t ldc, int64_t i, int64_t j, float alpha, float beta,
                                        float acc) {
  float* pc = c + i * ldc + j;
  *pc = (beta == 0.0f) ? alpha * acc : fmaf(beta, *pc, alpha * acc);
}

/// Rejects what gemm.h declares invalid; lda/ldb only checked when k > 0 (A, B not read).
inline cudaError_t validate(const GemmF32Args& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return cudaErrorInvalidValue;
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  if (g.ldc < g.n) return cudaErrorInvalidValue;
  if (g.k > 0) {
    if (g.lda < (g.trans_a ? g.m : g.k)) return cudaErrorInvalidValue;
    if (g.ldb < (g.trans_b ? g.k : g.n)) return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

/// Register-blocked tile geometry shared by regblock, vec4, cpasync and splitk:
/// a 64x64 tile of C per block of 16x16 threads, each thread a 4x4 micro-tile,
/// k in 8-wide slices. Shared tiles are kept k-major (as[p][i], bs[p][j]) so
/// the compute loop reads 4 consecutive words of each per slice.
inline constexpr int kBM = 64, kBN = 64, kBK = 8, kTM = 4, kTN = 4;
inline constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
static_assert(kThreads == 256 && kBM * kBK == 2 * kThreads && kBK * kBN == 2 * kThreads);

/// acc += as[p][ty*4 + r] * bs[p][tx*4 + c] over the kBK slices of one staged tile.
__device__ __forceinline__ void micro_tile(const float (&as)[kBK][kBM], const float (&bs)[kBK][kBN], int tx, int ty,
                                           float (&acc)[kTM][kTN]) {
#pragma unroll
  for (int p = 0; p < kBK; ++p) {
    float af[kTM], bf[kTN];
#pragma unroll
    for (int r = 0; r < kTM; ++r) af[r] = as[p][ty * kTM + r];
#pragma unroll
    for (int q = 0; q < kTN; ++q) bf[q] = bs[p][tx * kTN + q];
#pragma unroll
    for (int r = 0; r < kTM; ++r)
#pragma unroll
      for (int q = 0; q < kTN; ++q) acc[r][q] = fmaf(af[r], bf[q], acc[r][q]);
  }
}

/// Guarded one-pass store of a thread's 4x4 micro-tile at (row0, col0) of the block tile.
__device__ __forceinline__ void store_micro_tile(float* c, int64_t ldc, int64_t m, int64_t n, int64_t row0,
                                                 int64_t col0, int tx, int ty, float alpha, float beta,
                                                 const float (&acc)[kTM][kTN]) {
#pragma unroll
  for (int r = 0; r < kTM; ++r) {
    const int64_t i = row0 + ty * kTM + r;
    if (i >= m) continue;
#pragma unroll
    for (int q = 0; q < kTN; ++q) {
      const int64_t j = col0 + tx * kTN + q;
      if (j < n) store_c(c, ldc, i, j, alpha, beta, acc[r][q]);
    }
  }
}

/// Position of staged element e (0 <= e < 512) of the A tile: (i, p) inside the
/// 64x8 tile, chosen so consecutive threads walk A's contiguous dimension.
__device__ __forceinline__ void a_slot(bool trans_a, int e, int& i, int& p) {
  if (trans_a) {  // a[p*lda + i]: contiguous along i
    p = e / kBM, i = e % kBM;
  } else {  // a[i*lda + p]: contiguous along p
    i = e / kBK, p = e % kBK;
  }
}
/// Position of staged element e of the B tile: (p, j) inside the 8x64 tile.
__device__ __forceinline__ void b_slot(bool trans_b, int e, int& p, int& j) {
  if (trans_b) {  // b[j*ldb + p]: contiguous along p
    j = e / kBK, p = e % kBK;
  } else {  // b[p*ldb + j]: contiguous along j
    p = e / kBN, j = e % kBN;
  }
}

/// 4-byte asynchronous global -> shared copy; src-size 0 writes a zero and reads nothing.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool in_bounds) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(in_bounds ? 4 : 0));
#else
  *dst = in_bounds ? *src : 0.0f;  // synchronous fallback below sm_80
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/// Issues the copies of k slice `k0` into one stage (out-of-bounds elements zero-filled).
__device__ __forceinline__ void issue_slice(const GemmF32Args& g, int64_t row0, int64_t col0, int64_t k0,
                                            float (&as)[kBK][kBM], float (&bs)[kBK][kBN]) {
  const int tid = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int e = tid + r * kThreads;
    int i, p, j;
    a_slot(g.trans_a, e, i, p);
    const bool ina = row0 + i < g.m && k0 + p < g.k;
    cp_async4(&as[p][i], ina ? &g.a[g.trans_a ? (k0 + p) * g.lda + row0 + i : (row0 + i) * g.lda + k0 + p] : g.a, ina);
    b_slot(g.trans_b, e, p, j);
    const bool inb = k0 + p < g.k && col0 + j < g.n;
    cp_async4(&bs[p][j], inb ? &g.b[g.trans_b ? (col0 + j) * g.ldb + k0 + p : (k0 + p) * g.ldb + col0 + j] : g.b, inb);
  }
}

}  // namespace assay::kernels::ladder
