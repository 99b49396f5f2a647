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

/// Warps per block of both kernels: each warp computes one output element.
inline constexpr int kQuantWarps = 8;

/// The output element (i, j) of this thread's warp (row-major over m x n); false past m x n.
__device__ __forceinline__ bool output_index(int64_t m, int64_t n, int64_t& i, int64_t& j) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kQuantWarps + threadIdx.x / 32;
  if (e >= m * n) return false;
  i = e / n;
  j = e % n;
  return true;
}

/// The sum of v over the warp, in lane 0 (a butterfly: the same tree for every element).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Both kernels split k across a warp: lane l takes the 4-byte words (or bytes) l, l + 32, ...
// of both rows, so a warp reads 128 contiguous bytes of each row per step, and a long reduction
// over few outputs (k reaches 2^16 where m n = 64) runs 32 lanes wide instead of one thread.
template <QuantFault F>
__global__ void __launch_bounds__(32 * kQuantWarps) gemm_int8_kernel(const GemmInt8Args p) {
  int64_t i = 0, j = 0;
  if (!output_index(p.m, p.n, i, j)) return;  // a whole warp leaves together
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int8_t* ar = p.a + i * p.lda;
  const int8_t* br = p.b + j * p.ldb;
  int32_t acc = 0;
  float facc = 0.0f;  // QuantFault::kFp32Acc only
  // dp4a needs both rows 4-byte aligned (a padded row stride or an offset may break that).
  const bool aligned = ((reinterpret_cast<uintptr_t>(ar) | reinterpret_cast<uintptr_t>(br)) & 3u) == 0;
  int64_t t = 0;
  if (aligned) {
    const int64_t words = p.k / 4;
    const int* a4 = reinterpret_cast<const int*>(ar);
    const int* b4 = reinterpret_cast<const int*>(br);
    for (int64_t q = lane; q < words; q += 32) {
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
  for (t += lane; t < p.k; t += 32) {
    const int32_t prod = static_cast<int32_t>(ar[t]) * static_cast<int32_t>(br[t]);
    if constexpr (F == QuantFault::kFp32Acc)
      facc += static_cast<float>(prod);
    else
      acc += prod;
  }
  if constexpr (F == QuantFault::kFp32Acc)
    acc = static_cast<int32_t>(warp_sum(facc));
  else
    acc = warp_sum(acc);
  if (lane != 0) return;
  if (p.acc != nullptr) p.acc[i * p.ldacc + j] = acc;
  const int64_t col = F == QuantFault::kScaleByRow ? i % p.n : j;
  const float s = p.sa[i] * p.sw[col];
  const float bias = p.bias != nullptr ? p.bias[j] : 0.0f;
  store_out(p.out, p.d, i * p.ldd + j, fmaf(static_cast<float>(acc), s, bias));
}

/// e4m3 bits -> fp32 (exact).
__device__ __forceinline__ float e4m3_value(uint32_t bits) {
  __nv_fp8_e4m3 x;
  x.__x = static_cast<__nv_fp8_storage_t>(bits & 0xFFu);
  return static_cast<float>(x);
}

template <QuantFault F>
__global__ void __launch_bounds__(32 * kQuantWarps) gemm_fp8_kernel(const GemmFp8Args p) {
  int64_t i = 0, j = 0;
  if (!output_index(p.m, p.n, i, j)) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint8_t* ar = p.a + i * p.lda;
  const uint8_t* br = p.b + j * p.ldb;
  float acc = 0.0f;  // every product of two e4m3 values is exact in fp32: fmaf rounds once, at the add
  int64_t t = 0;
  if (((reinterpret_cast<uintptr_t>(ar) | reinterpret_cast<uintptr_t>(br)) & 3u) == 0) {
    const int64_t words = p.k / 4;
    const uint32_t* a4 = reinterpret_cast<const uint32_t*>(ar);
    const uint32_t* b4 = reinterpret_cast<const uint32_t*>(br);
    for (int64_t q = lane; q < words; q += 32) {
      const uint32_t wa = a4[q], wb = b4[q];
      for (int s = 0; s < 32; s += 8) acc = fmaf(e4m3_value(wa >> s), e4m3_value(wb >> s), acc);
    }
    t = words * 4;
  }
  for (t += lane; t < p.k; t += 32) acc = fmaf(e4m3_value(ar[t]), e4m3_value(br[t]), acc);
  acc = warp_sum(acc);
  if (lane != 0) return;
  const float s = F == QuantFault::kIgnoreScaleB ? *p.scale_a : *p.scale_a * *p.scale_b;
  store_out(p.out, p.d, i * p.ldd + j, s * acc);
}

/// Blocks for m x n outputs, one warp each.
inline unsigned quant_blocks(int64_t m, int64_t n) {
  return static_cast<unsigned>((m * n + kQuantWarps - 1) / kQuantWarps);
}

template <QuantFault F>
cudaError_t launch_gemm_int8(const GemmInt8Args& p, cudaStream_t s) {
  if (p.m <= 0 || p.n <= 0) return cudaSuccess;
  gemm_int8_kernel<F><<<quant_blocks(p.m, p.n), 32 * kQuantWarps, 0, s>>>(p);
  return cudaGetLastError();
}

template <QuantFault F>
cudaError_t launch_gemm_fp8(const GemmFp8Args& p, cudaStream_t s) {
  if (p.m <= 0 || p.n <= 0) return cudaSuccess;
  gemm_fp8_kernel<F><<<quant_blocks(p.m, p.n), 32 * kQuantWarps, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace assay::kernels::quant
