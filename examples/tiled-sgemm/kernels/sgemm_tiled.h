// sgemm_tiled: C = alpha * A * B + beta * C in fp32, row-major, no transposes.
// A is m x k (row stride lda), B is k x n (ldb), C is m x n (ldc), strides in
// elements. Preconditions, unchecked (the kernel is fast because it assumes them):
//   m and n multiples of 64, k a multiple of 8;
//   A, B, C and their row strides 16-byte aligned (float4 loads and stores);
//   C is always read: with beta == 0 a NaN in C gives NaN (beta * C is computed).
// Tiles: 32 x 32 below m = 256 (more blocks for short problems), 64 x 64 from there.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace demo {

struct SgemmArgs {
  int m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const float* a = nullptr;
  int lda = 0;
  const float* b = nullptr;
  int ldb = 0;
  float* c = nullptr;
  int ldc = 0;
};

cudaError_t sgemm_tiled(const SgemmArgs& args, cudaStream_t stream);

}  // namespace demo
