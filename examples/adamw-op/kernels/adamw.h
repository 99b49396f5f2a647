// An AdamW step (decoupled weight decay), fp32, in place on p, m and v.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace my {

struct AdamW {
  float lr, beta1, beta2, eps, wd;
  float bc1, bc2;  // 1 - beta^t, computed on the host in double and rounded once to fp32
};

/// float4 loads: n a multiple of 4 and every pointer 16-byte aligned.
cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamW& h, cudaStream_t s);

}  // namespace my
