// Storage loads and stores of the kernels' element types, computed in fp32: fp16 and bf16 widen
// exactly on load and round to nearest even on store (the __*_rn conversions), never truncated.
// Shared by the convolution and GEMM-epilogue kernels and their planted bugs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace assay::kernels::storage {

__device__ __forceinline__ float load(const float* p) {
  return *p;
}
__device__ __forceinline__ float load(const __half* p) {
  return __half2float(*p);
}
__device__ __forceinline__ float load(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(__half* p, float v) {
  *p = __float2half_rn(v);
}
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

}  // namespace assay::kernels::storage
