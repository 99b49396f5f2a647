// GEMM backward: dA through the tiled GEMM with B transposed, dB through the
// tiled GEMM with A transposed and beta = 1 (accumulate), or by atomics.
#include "kernels/gemm/gemm_backward.h"

#include <algorithm>

#include "kernels/gemm/gemm.h"

namespace assay::kernels {
namespace {

cudaError_t dA_tiled(const GemmBwdF32Args& g, cudaStream_t s) {
  // dA[i][p] = alpha * sum_j dC[i][j] * B[p][j]: op(A') = dC (m x n),
  // op(B') = B^T (n x k), stored k x n: trans_b with ldb.
  GemmF32Args x;
  x.m = g.m, x.n = g.k, x.k = g.n, x.trans_a = false, x.trans_b = true;
  x.alpha = g.alpha, x.beta = 0.0f;
  x.a = g.dc, x.lda = g.lddc, x.b = g.b, x.ldb = g.ldb, x.c = g.da, x.ldc = g.ldda;
  return gemm_f32_tiled(x, s);
}

// dB[p][j] += alpha * sum over rows i in [i0, i1) of A[i][p] * dC[i][j].
__global__ void dB_atomic_kernel(GemmBwdF32Args g, int64_t chunk) {
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t p = int64_t{blockIdx.y} * blockDim.y + threadIdx.y;
  const int64_t i0 = int64_t{blockIdx.z} * chunk;
  if (j >= g.n || p >= g.k) return;
  const int64_t i1 = min(g.m, i0 + chunk);
  float acc = 0.0f;
  for (int64_t i = i0; i < i1; ++i) acc = fmaf(g.a[i * g.lda + p], g.dc[i * g.lddc + j], acc);
  atomicAdd(&g.db[p * g.lddb + j], g.alpha * acc);
}

}  // namespace

cudaError_t gemm_bwd_f32_tiled(const GemmBwdF32Args& g, cudaStream_t s) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = dA_tiled(g, s); e != cudaSuccess) return e;
  // dB = alpha * A^T * dC + 1 * dB: op(A') = A^T (k x m) stored m x k.
  GemmF32Args x;
  x.m = g.k, x.n = g.n, x.k = g.m, x.trans_a = true, x.trans_b = false;
  x.alpha = g.alpha, x.beta = 1.0f;
  x.a = g.a, x.lda = g.lda, x.b = g.dc, x.ldb = g.lddc, x.c = g.db, x.ldc = g.lddb;
  return gemm_f32_tiled(x, s);
}

cudaError_t gemm_bwd_f32_atomic(const GemmBwdF32Args& g, cudaStream_t s) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = dA_tiled(g, s); e != cudaSuccess) return e;
  if (g.k == 0 || g.n == 0 || g.m == 0) return cudaSuccess;
  const int64_t chunk = 16;
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((g.n + 31) / 32), static_cast<unsigned>((g.k + 7) / 8),
                  static_cast<unsigned>(std::min<int64_t>((g.m + chunk - 1) / chunk, 65535)));
  dB_atomic_kernel<<<grid, block, 0, s>>>(g, chunk);
  return cudaGetLastError();
}

}  // namespace assay::kernels
