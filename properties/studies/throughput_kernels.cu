#include "properties/studies/throughput_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace assay::tput {
namespace {

__device__ __forceinline__ float load(int dt, const void* p, int64_t i) {
  if (dt == 1) return __half2float(static_cast<const __half*>(p)[i]);
  if (dt == 2) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void store(int dt, void* p, int64_t i, float v) {
  if (dt == 3)  // int8: 40 v rounded, clamped to [-127, 127]
    static_cast<int8_t*>(p)[i] = static_cast<int8_t>(fminf(fmaxf(rintf(40.0f * v), -127.0f), 127.0f));
  else if (dt == 4)  // fp8 e4m3, saturating
    static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
  else if (dt == 1)
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  else if (dt == 2)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float*>(p)[i] = v;
}

__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_normal_kernel(int dt, void* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = mix(seed * 0x100000001B3ull ^ mix(static_cast<uint64_t>(i)));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777217.0f);  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFFu) * (1.0f / 16777216.0f);
    store(dt, p, i, scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

__global__ void gate_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

constexpr int kThreads = 256;

/// Block-wide reduction (max or sum) of one value per thread; every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // sh may still be read from a previous reduction
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? sh[lane] : (kMax ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  return v;
}

__global__ void softmax_rows_kernel(int dt, const float* S, void* P, int64_t sq, int64_t sk, bool causal) {
  __shared__ float sh[kThreads / 32];
  const int64_t row = blockIdx.x, i = row % sq;
  const int64_t visible = causal ? (i + 1 < sk ? i + 1 : sk) : sk;
  const float* s = S + row * sk;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += kThreads) mx = fmaxf(mx, s[j]);
  mx = block_reduce<true>(mx, sh);
  float z = 0;
  for (int64_t j = threadIdx.x; j < visible; j += kThreads) z += __expf(s[j] - mx);
  z = block_reduce<false>(z, sh);
  const float inv = 1.0f / z;
  for (int64_t j = threadIdx.x; j < sk; j += kThreads) store(dt, P, row * sk + j, j < visible ? __expf(s[j] - mx) * inv : 0.0f);
}

__global__ void softmax_bwd_rows_kernel(int dt, const void* P, const float* dP, void* dS, int64_t sk) {
  __shared__ float sh[kThreads / 32];
  const int64_t row = blockIdx.x, base = row * sk;
  float d = 0;
  for (int64_t j = threadIdx.x; j < sk; j += kThreads) d += load(dt, P, base + j) * dP[base + j];
  d = block_reduce<false>(d, sh);
  for (int64_t j = threadIdx.x; j < sk; j += kThreads) {
    const float p = load(dt, P, base + j);
    store(dt, dS, base + j, p * (dP[base + j] - d));
  }
}

}  // namespace

cudaError_t fill_normal(int dt, void* p, int64_t n, uint64_t seed, float scale, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  fill_normal_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, s>>>(dt, p, n, seed, scale);
  return cudaGetLastError();
}

cudaError_t gate(uint64_t ns, cudaStream_t s) {
  gate_kernel<<<1, 1, 0, s>>>(ns);
  return cudaGetLastError();
}

cudaError_t softmax_rows(int dt, const float* S, void* P, int64_t rows, int64_t sq, int64_t sk, bool causal,
                         cudaStream_t s) {
  if (rows <= 0 || rows > 2147483647 || sq <= 0 || sk <= 0) return cudaErrorInvalidValue;
  softmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(dt, S, P, sq, sk, causal);
  return cudaGetLastError();
}

cudaError_t softmax_bwd_rows(int dt, const void* P, const float* dP, void* dS, int64_t rows, int64_t sk,
                             cudaStream_t s) {
  if (rows <= 0 || rows > 2147483647 || sk <= 0) return cudaErrorInvalidValue;
  softmax_bwd_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(dt, P, dP, dS, sk);
  return cudaGetLastError();
}

}  // namespace assay::tput
