// Device code of the quantised GEMMs (kernels/gemm/gemm_quant.h), templated on a planted fault
// so that each mutant of tests/mutants/gemm/quant_mutants.cu is the kernel with one line changed
// (kernels/gemm/gemm_quant.cu instantiates QuantFault::kNone only).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/gemm/gemm_quant.h"

namespace assay::kernels::quant {

enum class QuantFault : int {
  kNone,
  kScaleByRow,    ///< int8: per-channel scale sw indexed by the row (i mod n) instead of the column
  kFp32Acc,       ///< int8: the accumulation in fp32 (fmaf), converted to int32 at the end
  kDropKTail,     ///< int8: the k % 4 leftovers after the dp4a words dropped
  kIgnoreScaleB,  ///< fp8: scale_b ignored
};

__device__ __forceinline__ void store_out(OutDt out, void* d, int64_t e, float y) {
  switch (out) {
    case OutDt::kF16:
      static_cast<__half*>(d)[e] = __float2half_rn(y);
      break;
    case OutDt::kBF16:
      static_cast<__nv_bfloat16*>(d)[e] = __float2bfloat16_rn(y);
      break;
    default:
      static_cast<float*>(d)[e] = y;
  }
}

/// The output element (i, j) of this thread (16 x 16 blocks over n x m); false outside m x n.
__device__ __forceinline__ bool output_index(int64_t m, int64_t n, int64_t& i, int64_t& j) {
  j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  i = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  return i < m && j < n;
}

template <QuantFault F>
__global__ void gemm_int8_kernel(const GemmInt8Args p) {
  int64_t i = 0, j = 0;
  if (!output_index(p.m, p.n, i, j)) return;
  const int8_t* ar = p.a + i * p.lda;
  const int8_t* br = p.b + j * p.ldb;
  int32_t acc = 0;
  float facc = 0.0f;  // QuantFault::kFp32Acc only
  int64_t t = 0;
  // dp4a needs both rows 4-byte aligned (a padded row stride or an offset may break that).
  const bool aligned = ((reinterpret_cast<uintptr_t>(ar) | reinterpret_cast<uintptr_t>(br)) & 3u) == 0;
  if (aligned) {
    const int64_t words = p.k / 4;
    const int* a4 = reinterpret_cast<const int*>(ar);
    const int* b4 = reinterpret_cast<const int*>(br);
    for (int64_t q = 0; q < words; ++q) {
      if constexpr (F == QuantFault::kFp32Acc) {
        const int32_t w = __dp4a(a4[q], b4[q], 0);
        facc += static_cast<float>(w);
      } else {
        acc = __dp4a(a4[q], b4[q], acc);
      }
    }
    t = words * 4;
    if constexpr (F == QuantFault::kDropKTail) t = p.k;  // the bug: leftovers never added
  }
  for (; t < p.k; ++t) {
    const int32_t prod = static_cast<int32_t>(ar[t]) * static_cast<int32_t>(br[t]);
    if constexpr (F == QuantFault::kFp32Acc)
      facc += static_cast<float>(prod);
    else
      acc += prod;
  }
  if constexpr (F == QuantFault::kFp32Acc) acc = static_cast<int32_t>(facc);
  if (p.acc != nullptr) p.acc[i * p.ldacc + j] = acc;
  const int64_t col = F == QuantFault::kScaleByRow ? i % p.n : j;
  const float s = p.sa[i] * p.sw[col];
  const float bias = p.bias != nullptr ? p.bias[j] : 0.0f;
  store_out(p.out, p.d, i * p.ldd + j, fmaf(static_cast<float>(acc), s, bias));
}

template <QuantFault F>
__global__ void gemm_fp8_kernel(const GemmFp8Args p) {
  int64_t i = 0, j = 0;
  if (!output_index(p.m, p.n, i, j)) return;
  const uint8_t* ar = p.a + i * p.lda;
  const uint8_t* br = p.b + j * p.ldb;
  float acc = 0.0f;
  for (int64_t t = 0; t < p.k; ++t) {
    __nv_fp8_e4m3 x, y;
    x.__x = ar[t];
    y.__x = br[t];
    acc = fmaf(static_cast<float>(x), static_cast<float>(y), acc);  // exact product, one rounding
  }
  const float s = F == QuantFault::kIgnoreScaleB ? *p.scale_a : *p.scale_a * *p.scale_b;
  store_out(p.out, p.d, i * p.ldd + j, s * acc);
}

inline dim3 quant_grid(int64_t m, int64_t n) {
  return dim3(static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>((m + 15) / 16));
}

template <QuantFault F>
cudaError_t launch_gemm_int8(const GemmInt8Args& p, cudaStream_t s) {
  if (p.m <= 0 || p.n <= 0) return cudaSuccess;
  gemm_int8_kernel<F><<<quant_grid(p.m, p.n), dim3(16, 16), 0, s>>>(p);
  return cudaGetLastError();
}

template <QuantFault F>
cudaError_t launch_gemm_fp8(const GemmFp8Args& p, cudaStream_t s) {
  if (p.m <= 0 || p.n <= 0) return cudaSuccess;
  gemm_fp8_kernel<F><<<quant_grid(p.m, p.n), dim3(16, 16), 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace assay::kernels::quant
