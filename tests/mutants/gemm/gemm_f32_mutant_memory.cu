// MUTANTS for the memory checks -- planted bugs, not kernels to use.
// Each computes C correctly (a plain naive k-loop) and then misbehaves in one
// way that only a memory check can see, so the tests can prove each check
// fires on its own:
//   mutant_writes_input:    after the product, zeroes the first element of A
//                           (a kernel that "reuses" its input as scratch).
//                           Caught by the input snapshot (input_written).
//   mutant_skips_last_row:  the rows-per-block bug: the grid covers
//                           floor(m / 8) * 8 rows, so up to 7 trailing rows
//                           are never written when m % 8 != 0.
//                           Caught by the output poison (unwritten).
//   mutant_writes_past_end: writes one extra element just past the end of
//                           each row of C (an off-by-one on the column
//                           guard, j <= n). Lands in the ldc gap when ldc > n
//                           (gap_written), in the guard band after the last
//                           row when ldc == n (guard).
#include <atomic>
#include <cstdint>

#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmF32Args;

__device__ float dot(const GemmF32Args& g, int64_t i, int64_t j) {
  float acc = 0.0f;
  for (int64_t p = 0; p < g.k; ++p) {
    const float av = g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
    const float bv = g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
    acc = fmaf(av, bv, acc);
  }
  return acc;
}

__device__ void store(const GemmF32Args& g, int64_t i, int64_t j) {
  float* pc = g.c + i * g.ldc + j;
  const float r = g.alpha * dot(g, i, j);
  *pc = g.beta == 0.0f ? r : fmaf(g.beta, *pc, r);
}

__global__ void rows_kernel(GemmF32Args g, int64_t rows, int64_t cols_plus) {
  const int64_t i = int64_t{blockIdx.y} * blockDim.y + threadIdx.y;
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= rows || j >= g.n + cols_plus) return;
  if (j < g.n) {
    store(g, i, j);
  } else {
    g.c[i * g.ldc + j] = 0.0f;  // the off-by-one column
  }
}

__global__ void scribble_input(const float* a) {
  const_cast<float*>(a)[0] = 0.0f;
}

cudaError_t launch_rows(const GemmF32Args& g, int64_t rows, int64_t cols_plus, cudaStream_t s) {
  if (rows <= 0 || g.n + cols_plus <= 0) return cudaGetLastError();
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((g.n + cols_plus + 31) / 32), static_cast<unsigned>((rows + 7) / 8));
  rows_kernel<<<grid, block, 0, s>>>(g, rows, cols_plus);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gemm_f32_mutant_writes_input(const GemmF32Args& g, cudaStream_t s) {
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  const cudaError_t e = launch_rows(g, g.m, 0, s);
  if (e != cudaSuccess || g.k == 0) return e;
  scribble_input<<<1, 1, 0, s>>>(g.a);
  return cudaGetLastError();
}

cudaError_t gemm_f32_mutant_skips_last_row(const GemmF32Args& g, cudaStream_t s) {
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  return launch_rows(g, g.m / 8 * 8, 0, s);
}

cudaError_t gemm_f32_mutant_writes_past_end(const GemmF32Args& g, cudaStream_t s) {
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  return launch_rows(g, g.m, 1, s);
}

}  // namespace assay::mutants

// mutant_degrades: correct for its first 200 launches in the process, then
// drops the last k term (a leaked workspace or a static counter that wraps).
// Only --repeat finds it within a few cases. Caught by: bound / exact.
namespace assay::mutants {
namespace {
__global__ void degraded_kernel(kernels::GemmF32Args g) {
  const int64_t i = int64_t{blockIdx.y} * blockDim.y + threadIdx.y;
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= g.m || j >= g.n) return;
  kernels::GemmF32Args h = g;
  h.k = g.k > 0 ? g.k - 1 : 0;
  store(h, i, j);
}
std::atomic<int64_t> g_launches{0};
}  // namespace

cudaError_t gemm_f32_mutant_degrades(const kernels::GemmF32Args& g, cudaStream_t s) {
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  if (g_launches.fetch_add(1) < 200) return launch_rows(g, g.m, 0, s);
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((g.n + 31) / 32), static_cast<unsigned>((g.m + 7) / 8));
  degraded_kernel<<<grid, block, 0, s>>>(g);
  return cudaGetLastError();
}

}  // namespace assay::mutants
