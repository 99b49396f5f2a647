// my_gemm: one thread per element of C in 16x16 blocks, a grid-stride loop
// over C (any m, n fits the grid limits), an fp32 FMA k-loop.
// Built into the assay executable (assay_add_kernel_spec ... KERNELS).
#include "kernels/my_gemm.h"

#include <algorithm>

namespace my {
namespace {

constexpr int kBlock = 16;

__global__ void __launch_bounds__(kBlock* kBlock) my_gemm_kernel(GemmArgs g) {
  const int64_t a_step = g.trans_a ? g.lda : 1;  // op(A) along p
  const int64_t b_step = g.trans_b ? 1 : g.ldb;  // op(B) along p
  for (int64_t i = int64_t{blockIdx.y} * kBlock + threadIdx.y; i < g.m; i += int64_t{gridDim.y} * kBlock) {
    for (int64_t j = int64_t{blockIdx.x} * kBlock + threadIdx.x; j < g.n; j += int64_t{gridDim.x} * kBlock) {
      const float* pa = g.a + (g.trans_a ? i : i * g.lda);
      const float* pb = g.b + (g.trans_b ? j * g.ldb : j);
      float acc = 0.0f;
      for (int64_t p = 0; p < g.k; ++p) acc = fmaf(pa[p * a_step], pb[p * b_step], acc);
      float* pc = g.c + i * g.ldc + j;
      *pc = g.beta == 0.0f ? g.alpha * acc : fmaf(g.beta, *pc, g.alpha * acc);  // beta == 0: C is not read
    }
  }
}

}  // namespace

cudaError_t my_gemm(const GemmArgs& g, cudaStream_t stream) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return cudaErrorInvalidValue;
  if (g.m == 0 || g.n == 0) return cudaSuccess;  // empty C: nothing to launch
  const dim3 block(kBlock, kBlock);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((g.n + kBlock - 1) / kBlock, 2147483647)),
                  static_cast<unsigned>(std::min<int64_t>((g.m + kBlock - 1) / kBlock, 65535)));
  my_gemm_kernel<<<grid, block, 0, stream>>>(g);
  return cudaGetLastError();
}

}  // namespace my
