// MUTANTS of kernels/rowwise/activations.cu -- planted bugs, not kernels to use. Each replaces one
// activation of the launcher and hands the others to the real one:
//   gelu_tanh_wrong_const  Forward tanh-GELU with c = 0.0447 (a truncated 0.044715). With
//                          y = x sigmoid(2u), the error is dy = 2 sqrt(2/pi) x^4 sigmoid'(2u) dc,
//                          dc = 1.5e-5: ~4e-6 relative for x in [1, 2], but 2e-4 .. 1.5e-3 for x
//                          in [-4, -2] where y itself is small; zero at x = 0 and in saturation.
//                          Below fp16/bf16 rounding for x > 0, so caught by the fp32 bound (and the
//                          half-precision ones only at negative x around -2 .. -5).
//   silu_bwd_missing_term  silu'(x) = s instead of s (1 + x (1 - s)), s = sigmoid(x): the
//                          derivative of x alone forgotten in the product rule. Exact at x = 0
//                          and in saturation, ~20% off at x ~ 1-2 and several times off at
//                          x ~ -1. Caught by the bound (and by gradcheck) for moderate inputs.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "tests/mutants/rowwise/mutants.h"

namespace assay::mutants::rowwise {
namespace {

using namespace kernels::rowwise::detail;  // NOLINT(build/namespaces)

constexpr float kSqrt2OverPi = 0.797884560802865355880f;
constexpr float kGeluCWrong = 0.0447f;  // BUG: should be 0.044715f
constexpr int kThreads = 256;

__device__ __forceinline__ float x_sigmoid(float x, float z) {
  const float e = expf(-fabsf(z));
  return z >= 0.0f ? x / (1.0f + e) : (x * e) / (1.0f + e);
}

__device__ __forceinline__ float gelu_tanh_fwd(float x) {
  const float u = kSqrt2OverPi * fmaf(kGeluCWrong * x * x, x, x);
  return x_sigmoid(x, 2.0f * u);
}

__device__ __forceinline__ float silu_bwd(float x) {
  const float e = expf(-fabsf(x));
  const float big = 1.0f / (1.0f + e);
  const float s = x >= 0.0f ? big : e * big;
  return s;  // BUG: should be s * (1 + x * (1 - s))
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gelu_tanh_fwd_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t count, bool vec) {
  constexpr int kN = Pack<T>::kN;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = vec ? count / kN : 0;
  for (int64_t p = tid; p < packs; p += stride) {
    const Pack<T> v = reinterpret_cast<const Pack<T>*>(x)[p];
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < kN; ++k) o.v[k] = from_float<T>(gelu_tanh_fwd(to_float(v.v[k])));
    reinterpret_cast<Pack<T>*>(y)[p] = o;
  }
  for (int64_t i = packs * kN + tid; i < count; i += stride) y[i] = from_float<T>(gelu_tanh_fwd(to_float(x[i])));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    silu_bwd_kernel(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx, int64_t count, bool vec) {
  constexpr int kN = Pack<T>::kN;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = vec ? count / kN : 0;
  for (int64_t p = tid; p < packs; p += stride) {
    const Pack<T> xv = reinterpret_cast<const Pack<T>*>(x)[p];
    const Pack<T> gv = reinterpret_cast<const Pack<T>*>(dy)[p];
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < kN; ++k) o.v[k] = from_float<T>(to_float(gv.v[k]) * silu_bwd(to_float(xv.v[k])));
    reinterpret_cast<Pack<T>*>(dx)[p] = o;
  }
  for (int64_t i = packs * kN + tid; i < count; i += stride) {
    dx[i] = from_float<T>(to_float(dy[i]) * silu_bwd(to_float(x[i])));
  }
}

bool host_aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

template <typename T>
dim3 activation_grid(int64_t count, bool vec) {
  return grid_for(ceil_div(vec ? ceil_div(count, Pack<T>::kN) : count, kThreads));
}

}  // namespace

cudaError_t gelu_tanh_wrong_const(Dt dt, Act act, const void* x, void* y, int64_t count, cudaStream_t s) {
  if (act != Act::kGeluTanh || !valid_dt(dt) || count <= 0 || x == nullptr || y == nullptr)
    return kernels::rowwise::activation_fwd(dt, act, x, y, count, s);  // also its argument errors
  const bool vec = host_aligned16(x) && host_aligned16(y);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gelu_tanh_fwd_kernel<T>
        <<<activation_grid<T>(count, vec), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), count, vec);
    return cudaGetLastError();
  });
}

cudaError_t silu_bwd_missing_term(Dt dt, Act act, const void* x, const void* dy, void* dx, int64_t count,
                                  cudaStream_t s) {
  if (act != Act::kSilu || !valid_dt(dt) || count <= 0 || x == nullptr || dy == nullptr || dx == nullptr)
    return kernels::rowwise::activation_bwd(dt, act, x, dy, dx, count, s);  // also its argument errors
  const bool vec = host_aligned16(x) && host_aligned16(dy) && host_aligned16(dx);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    silu_bwd_kernel<T><<<activation_grid<T>(count, vec), kThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), count, vec);
    return cudaGetLastError();
  });
}

}  // namespace assay::mutants::rowwise
