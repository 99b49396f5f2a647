// MUTANTS of the GEMM backward -- planted bugs, not kernels to use. Each is
// one line away from kernels/gemm/gemm_backward.cu:
//   bwd_wrong_sign     dA = -alpha dC B^T                       (bound, projection)
//   bwd_missing_alpha  dA = dC B^T: the scale factor forgotten   (bound when alpha != 1)
//   bwd_transposed     dA[i][p] = sum_j dC[i][j] B[j][p]: B not transposed
//                      (reads B with the wrong layout; bound, nan-inf)
//   bwd_overwrite      dB = alpha A^T dC: overwrites instead of accumulating
//                      (bound against prefill + product; a zero prefill would hide it)
//   bwd_wrong_row      dB uses row (i+1) mod m of dC: exact when every row of dC
//                      is equal, so constant upstream gradients never catch it
#include <algorithm>
#include <cstdint>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_backward.h"
#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmBwdF32Args;
using kernels::GemmF32Args;

cudaError_t dA(const GemmBwdF32Args& g, cudaStream_t s, float alpha, bool transpose_b) {
  GemmF32Args x;
  x.m = g.m, x.n = g.k, x.k = g.n, x.trans_a = false, x.trans_b = transpose_b;
  x.alpha = alpha, x.beta = 0.0f;
  // Untransposed, op(B') is read as n x k: claim ld >= k so the launcher accepts it.
  x.a = g.dc, x.lda = g.lddc, x.b = g.b, x.ldb = transpose_b ? g.ldb : std::max<int64_t>({g.ldb, g.k, 1});
  x.c = g.da, x.ldc = g.ldda;
  return kernels::gemm_f32_tiled(x, s);
}

cudaError_t dB(const GemmBwdF32Args& g, cudaStream_t s, float beta) {
  GemmF32Args x;
  x.m = g.k, x.n = g.n, x.k = g.m, x.trans_a = true, x.trans_b = false;
  x.alpha = g.alpha, x.beta = beta;
  x.a = g.a, x.lda = g.lda, x.b = g.dc, x.ldb = g.lddc, x.c = g.db, x.ldc = g.lddb;
  return kernels::gemm_f32_tiled(x, s);
}

__global__ void dB_wrong_row(GemmBwdF32Args g) {
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t p = int64_t{blockIdx.y} * blockDim.y + threadIdx.y;
  if (j >= g.n || p >= g.k) return;
  float acc = 0.0f;
  for (int64_t i = 0; i < g.m; ++i) acc = fmaf(g.a[i * g.lda + p], g.dc[((i + 1) % g.m) * g.lddc + j], acc);
  g.db[p * g.lddb + j] += g.alpha * acc;
}

}  // namespace

cudaError_t gemm_bwd_mutant_wrong_sign(const GemmBwdF32Args& g, cudaStream_t s) {
  if (const cudaError_t e = dA(g, s, -g.alpha, true); e != cudaSuccess) return e;
  return dB(g, s, 1.0f);
}
cudaError_t gemm_bwd_mutant_missing_alpha(const GemmBwdF32Args& g, cudaStream_t s) {
  if (const cudaError_t e = dA(g, s, 1.0f, true); e != cudaSuccess) return e;
  return dB(g, s, 1.0f);
}
cudaError_t gemm_bwd_mutant_transposed(const GemmBwdF32Args& g, cudaStream_t s) {
  if (const cudaError_t e = dA(g, s, g.alpha, false); e != cudaSuccess) return e;
  return dB(g, s, 1.0f);
}
cudaError_t gemm_bwd_mutant_overwrite(const GemmBwdF32Args& g, cudaStream_t s) {
  if (const cudaError_t e = dA(g, s, g.alpha, true); e != cudaSuccess) return e;
  return dB(g, s, 0.0f);
}
cudaError_t gemm_bwd_mutant_wrong_row(const GemmBwdF32Args& g, cudaStream_t s) {
  if (const cudaError_t e = dA(g, s, g.alpha, true); e != cudaSuccess) return e;
  if (g.m == 0 || g.n == 0 || g.k == 0) return cudaSuccess;
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((g.n + 31) / 32), static_cast<unsigned>((g.k + 7) / 8));
  dB_wrong_row<<<grid, block, 0, s>>>(g);
  return cudaGetLastError();
}

}  // namespace assay::mutants
