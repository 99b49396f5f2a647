#include "references/device/gemm_f64_batch.h"

#include <algorithm>

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

// One block per tile, one thread per output element: each element's k-loop is the host's
// sequential order (gemm_f64_batch_core.h), so no split of k and no reduction across threads.
// Threads of a warp share a row of A (a broadcast load) and read consecutive columns of B.
__global__ void __launch_bounds__(kF64TileRows * kF64TileCols)
    f64_gemm_batch_kernel(const F64GemmProblem* problems, const F64GemmTile* tiles, const unsigned char* image,
                          double* ref, double* mag) {
  const F64GemmTile t = tiles[blockIdx.x];
  const F64GemmProblem p = problems[t.problem];  // a copy in registers: read once
  const int64_t i = t.i0 + static_cast<int64_t>(threadIdx.y), j = t.j0 + static_cast<int64_t>(threadIdx.x);
  if (i >= p.m || j >= p.n) return;
  f64_gemm_element(p, image, t.entry, i, j, ref, mag);
}

// One problem by value: blocks over (column tiles, row tiles, entries).
__global__ void __launch_bounds__(kF64TileRows * kF64TileCols)
    f64_gemm_strided_kernel(const F64GemmProblem p, int64_t e0, const unsigned char* image, double* ref, double* mag) {
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kF64TileRows + threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kF64TileCols + threadIdx.x;
  if (i >= p.m || j >= p.n) return;
  f64_gemm_element(p, image, e0 + blockIdx.z, i, j, ref, mag);
}

/// Both sums of a warp's lanes into lane 0, by a shuffle tree (the split kernels below; their
/// sums are exact, so the tree's order gives the sequential order's bits).
__device__ __forceinline__ void warp_sums(double& acc, double& s) {
  for (int off = 16; off > 0; off /= 2) {
    acc = f64b_add(acc, __shfl_down_sync(0xffffffffu, acc, off));
    s = f64b_add(s, __shfl_down_sync(0xffffffffu, s, off));
  }
}

// Sums that are exact in any order (f64_gemm_sums_exact): one warp per output element, lane l
// summing q = l, l + 32, ..., then a shuffle reduction; long reductions over few outputs (the
// quantised GEMMs' k reaches 2^16 for m n = 64) would otherwise run one thread for milliseconds.
__global__ void __launch_bounds__(256)
    f64_gemm_warp_kernel(const F64GemmProblem p, int64_t e0, const unsigned char* image, double* ref, double* mag) {
  const int64_t el = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (el >= p.m * p.n) return;
  const int64_t i = el / p.n, j = el % p.n, e = e0 + blockIdx.y;
  const int lane = static_cast<int>(threadIdx.x % 32);
  double acc = 0, s = 0;
  f64_gemm_sums(p, image, e, i, j, lane, 32, acc, s);
  warp_sums(acc, s);
  if (lane == 0) f64_gemm_finish(p, image, e, i, j, acc, s, ref, mag);
}

// The same for k of thousands: a block of 256 threads per output element (the sums are exact,
// so the split and the tree below give the sequential order's bits).
__global__ void __launch_bounds__(256)
    f64_gemm_block_kernel(const F64GemmProblem p, int64_t e0, const unsigned char* image, double* ref, double* mag) {
  __shared__ double part_acc[8], part_s[8];
  const int64_t el = blockIdx.x;
  const int64_t i = el / p.n, j = el % p.n, e = e0 + blockIdx.y;
  double acc = 0, s = 0;
  f64_gemm_sums(p, image, e, i, j, threadIdx.x, 256, acc, s);
  warp_sums(acc, s);
  if (threadIdx.x % 32 == 0) part_acc[threadIdx.x / 32] = acc, part_s[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    acc = part_acc[0], s = part_s[0];
    for (int w = 1; w < 8; ++w) acc = f64b_add(acc, part_acc[w]), s = f64b_add(s, part_s[w]);
    f64_gemm_finish(p, image, e, i, j, acc, s, ref, mag);
  }
}

__global__ void f64_dot_tol_kernel(const F64DotTol t, double* ref, double* mag, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < n; l += stride)
    f64_dot_tol_element(t, ref + l, mag + l);
}

__global__ void f64_int8_dequant_kernel(const F64Int8Dequant q, int64_t m, int64_t n, const double* acc,
                                        double* acc_mag, double* d_ref, double* d_tol) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < m * n; l += stride) {
    acc_mag[l] = 0;
    f64_int8_dequant_element(q, l / n, l % n, acc[l], d_ref + l, d_tol + l);
  }
}

/// Blocks for an elementwise pass over n elements (grid-stride beyond).
unsigned elementwise_blocks(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 4096));
}

}  // namespace

Status gemm_f64_strided(const F64GemmProblem& p, const unsigned char* image, double* ref, double* mag,
                        cudaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return ok_status();
  const int64_t tiles_i = (p.m + kF64TileRows - 1) / kF64TileRows, tiles_j = (p.n + kF64TileCols - 1) / kF64TileCols;
  if (tiles_i > 65535 || tiles_j > (int64_t{1} << 31) - 1)
    return invalid_argument("gemm_f64_strided: more than 65535 row tiles (m > 1048560)");
  // Which kernel: a block or a warp per output where the sums are exact and k long enough to
  // split, else a thread per output in the host's order.
  const bool exact = f64_gemm_sums_exact(p);
  const bool block = exact && p.k >= 2048 && p.m * p.n <= (int64_t{1} << 31) - 1;
  const bool warp = !block && exact && p.k >= 64 && (p.m * p.n + 7) / 8 <= (int64_t{1} << 31) - 1;
  for (int64_t e0 = 0; e0 < p.batch; e0 += 65535) {  // gridDim.y / z hold at most 65535 entries
    const int64_t entries = std::min<int64_t>(p.batch - e0, 65535);
    if (block) {
      f64_gemm_block_kernel<<<dim3(static_cast<unsigned>(p.m * p.n), static_cast<unsigned>(entries)), 256, 0,
                              stream>>>(p, e0, image, ref, mag);
      CUDA_CHECK(cudaGetLastError());
      continue;
    }
    if (warp) {
      f64_gemm_warp_kernel<<<dim3(static_cast<unsigned>((p.m * p.n + 7) / 8), static_cast<unsigned>(entries)), 256, 0,
                             stream>>>(p, e0, image, ref, mag);
      CUDA_CHECK(cudaGetLastError());
      continue;
    }
    f64_gemm_strided_kernel<<<dim3(static_cast<unsigned>(tiles_j), static_cast<unsigned>(tiles_i),
                                   static_cast<unsigned>(entries)),
                              dim3(kF64TileCols, kF64TileRows), 0, stream>>>(p, e0, image, ref, mag);
    CUDA_CHECK(cudaGetLastError());
  }
  return ok_status();
}

Status gemm_f64_dot_tol(const F64DotTol& t, double* ref, double* mag, int64_t n, cudaStream_t stream) {
  if (n <= 0) return ok_status();
  f64_dot_tol_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(t, ref, mag, n);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status gemm_f64_int8_dequant(const F64Int8Dequant& q, int64_t m, int64_t n, const double* acc, double* acc_mag,
                             double* d_ref, double* d_tol, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return ok_status();
  f64_int8_dequant_kernel<<<elementwise_blocks(m * n), 256, 0, stream>>>(q, m, n, acc, acc_mag, d_ref, d_tol);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status gemm_f64_batch(const F64GemmProblem* problems, const F64GemmTile* tiles, int64_t tile_count,
                      const unsigned char* image, double* ref, double* mag, cudaStream_t stream) {
  // Blocks in x: up to 2^31 - 1, far beyond any staging image's tiles.
  for (int64_t first = 0; first < tile_count; first += int64_t{1} << 30) {
    const int64_t n = std::min<int64_t>(tile_count - first, int64_t{1} << 30);
    f64_gemm_batch_kernel<<<static_cast<unsigned>(n), dim3(kF64TileCols, kF64TileRows), 0, stream>>>(
        problems, tiles + first, image, ref, mag);
    CUDA_CHECK(cudaGetLastError());
  }
  return ok_status();
}

}  // namespace assay::device_ref
