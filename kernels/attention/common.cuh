// Private device helpers of the attention kernels (kernels/attention/*.cu and
// the planted-bug copies in tests/mutants/attention/): dtype conversion, warp
// reductions, kernel parameters, shared-memory layouts and the Dt x head-dim
// dispatch. Not part of the interface (attention.h is).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attention/attention.h"

namespace assay::kernels::attention::detail {

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

/// fp32 -> storage, round to nearest even.
template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "storage type must be float, __half or __nv_bfloat16");
    return __float2bfloat16_rn(v);
  }
}

__device__ __forceinline__ float neg_inf() {
  return __int_as_float(static_cast<int>(0xff800000u));
}

/// Max over the warp; exact, so the order does not matter.
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
/// Sum over the warp by a butterfly: every lane gets the same bits (the same
/// pairs are added in the same order on every lane, IEEE addition commutes).
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/// An odd shared-memory row stride >= d: a warp whose lanes read column c of 32
/// different rows hits 32 different banks.
__host__ __device__ __forceinline__ int odd_stride(int d) {
  return d | 1;
}

template <typename T>
struct FwdParams {
  AttnShape s;
  const T *q, *k, *v;
  const float* mask;
  T* o;
  float* lse;
  int64_t ldq, ldk, ldv, ldm, ldo;
};

template <typename T>
struct BwdParams {
  AttnShape s;
  const T *q, *k, *v, *o, *dout;
  const float *lse, *mask;
  T *dq, *dk, *dv;
  int64_t ldq, ldk, ldv, ldo, lddo, ldm, lddq, lddk, lddv;
};

// ---- forward layout: 4 warps, 8 query rows each (32 per CTA), tiles of 64 keys ----
inline constexpr int kFwdWarps = 4, kFwdRowsPerWarp = 8, kFwdBq = kFwdWarps * kFwdRowsPerWarp;
inline constexpr int kFwdBk = kFwdKeyTile;
static_assert(kFwdBk == 64, "the forward kernel gives each lane two keys of a tile");
/// Q block [32][d] (broadcast reads), K tile [64][odd], V tile [64][d], P [4 warps][8 rows][64].
inline size_t fwd_smem_bytes(int d) {
  return sizeof(float) * (static_cast<size_t>(kFwdBq) * d + static_cast<size_t>(kFwdBk) * odd_stride(d) +
                          static_cast<size_t>(kFwdBk) * d + static_cast<size_t>(kFwdWarps) * kFwdRowsPerWarp * kFwdBk);
}

// ---- backward layout: 4 warps x 8 keys (dK/dV) or 8 query rows (dQ), tiles of 32 ----
inline constexpr int kBwdWarps = 4, kBwdPerWarp = 8, kBwdBlock = kBwdWarps * kBwdPerWarp, kBwdTile = 32;
/// dK/dV: K, V block [32][d] each (broadcast), Q, dO tile [32][odd] each, LSE and D [32] each, P and dS [4][8][32]
/// each. dQ: Q, dO block [32][d] each, K, V tile [32][odd] each, LSE and D [32] each, dS [4][8][32] (P reuses it).
inline size_t bwd_smem_bytes(int d) {
  return sizeof(float) *
         (2 * static_cast<size_t>(kBwdBlock) * d + 2 * static_cast<size_t>(kBwdTile) * odd_stride(d) +
          2 * static_cast<size_t>(kBwdTile) + 2 * static_cast<size_t>(kBwdWarps) * kBwdPerWarp * kBwdTile);
}

/// Launches `fn.template operator()<T, NC>()` for the storage type and NC = ceil(d/32) in 1..4.
template <typename F>
cudaError_t dispatch(Dt dt, int64_t d, F&& fn) {
  if (d < 1 || d > 128) return cudaErrorInvalidValue;
  const int nc = static_cast<int>((d + 31) / 32);
  auto by_nc = [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    switch (nc) {
      case 1:
        return fn.template operator()<T, 1>();
      case 2:
        return fn.template operator()<T, 2>();
      case 3:
        return fn.template operator()<T, 3>();
      default:
        return fn.template operator()<T, 4>();
    }
  };
  switch (dt) {
    case Dt::kF16:
      return by_nc(__half{});
    case Dt::kBF16:
      return by_nc(__nv_bfloat16{});
    case Dt::kF32:
      return by_nc(float{});
  }
  return cudaErrorInvalidValue;
}

/// Checks the sizes every launcher accepts: B, H, Hkv >= 1 with Hkv | H, Sq, Sk >= 0, 1 <= d <= 128,
/// B*H and B*Hkv within a grid dimension.
inline bool shape_ok(const AttnShape& s) {
  return s.batch >= 1 && s.heads >= 1 && s.kv_heads >= 1 && s.heads % s.kv_heads == 0 && s.sq >= 0 && s.sk >= 0 &&
         s.d >= 1 && s.d <= 128 && s.batch * s.heads <= 65535;
}

}  // namespace assay::kernels::attention::detail
