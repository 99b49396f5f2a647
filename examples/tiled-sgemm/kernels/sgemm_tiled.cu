// A classic shared-memory SGEMM: a BM x BN tile of C per block, K in steps of 8,
// each thread a 4 x 4 block of C held in registers, A and B staged through shared
// memory with float4 loads. No bounds checks: see the preconditions in the header.
#include "kernels/sgemm_tiled.h"

namespace demo {
namespace {

constexpr int kBK = 8;

template <int BM, int BN>
__global__ void __launch_bounds__((BM / 4) * (BN / 4))
    sgemm_tile(int k, float alpha, const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
               float beta, float* __restrict__ C, int ldc) {
  constexpr int kThreads = (BM / 4) * (BN / 4), kTx = BN / 4;
  __shared__ float As[kBK][BM];  // A's tile transposed: a thread's 4 rows are contiguous
  __shared__ __align__(16) float Bs[kBK][BN];
  const int tid = threadIdx.x, tx = tid % kTx, ty = tid / kTx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += kBK) {
    for (int l = tid; l < BM * kBK / 4; l += kThreads) {
      const int r = l / 2, c = (l % 2) * 4;
      const float4 v = *reinterpret_cast<const float4*>(A + static_cast<size_t>(row0 + r) * lda + k0 + c);
      As[c][r] = v.x, As[c + 1][r] = v.y, As[c + 2][r] = v.z, As[c + 3][r] = v.w;
    }
    for (int l = tid; l < kBK * BN / 4; l += kThreads) {
      const int r = l / (BN / 4), c = (l % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&Bs[r][c]) =
          *reinterpret_cast<const float4*>(B + static_cast<size_t>(k0 + r) * ldb + col0 + c);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i], b[i] = Bs[kk][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float4* p = reinterpret_cast<float4*>(C + static_cast<size_t>(row0 + ty * 4 + i) * ldc + col0 + tx * 4);
    const float4 old = *p;
    *p = make_float4(alpha * acc[i][0] + beta * old.x, alpha * acc[i][1] + beta * old.y,
                     alpha * acc[i][2] + beta * old.z, alpha * acc[i][3] + beta * old.w);
  }
}

template <int BM, int BN>
cudaError_t launch(const SgemmArgs& g, cudaStream_t s) {
  sgemm_tile<BM, BN><<<dim3(g.n / BN, g.m / BM), (BM / 4) * (BN / 4), 0, s>>>(g.k, g.alpha, g.a, g.lda, g.b, g.ldb,
                                                                            g.beta, g.c, g.ldc);
  return cudaGetLastError();
}

}  // namespace

cudaError_t sgemm_tiled(const SgemmArgs& g, cudaStream_t s) {
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  return g.m >= 256 ? launch<64, 64>(g, s) : launch<32, 32>(g, s);
}

}  // namespace demo
