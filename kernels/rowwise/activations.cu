// GELU (erf and tanh forms) and SiLU, forward and backward, elementwise over `count` contiguous
// values. Grid-stride, 256 threads per block; when every pointer is 16-byte aligned the body moves
// 16-byte packs (4 fp32 / 8 fp16 or bf16) and a scalar loop finishes the count % pack tail.
// Math is fp32 with the accurate library functions (erfcf, expf), never the __ intrinsics, and
// each formula is arranged so that no cancellation occurs for negative x (see each function).
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "kernels/rowwise/rowwise.h"

namespace assay::kernels::rowwise {
namespace {

using namespace detail;  // NOLINT(build/namespaces): the private helpers of this op family

constexpr float kSqrt1_2 = 0.707106781186547524401f;      // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.398942280401432677940f;   // 1 / sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.797884560802865355880f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

/// sigmoid(z) and 1 - sigmoid(z) = sigmoid(-z), each without cancellation:
/// e = exp(-|z|) <= 1 never overflows, and the small one is e / (1 + e)
/// rather than 1 - big (which would lose every digit for z >> 0).
__device__ __forceinline__ void sigmoid_pair(float z, float& s, float& sc) {
  const float e = expf(-fabsf(z));
  const float big = 1.0f / (1.0f + e);
  const float small = e * big;
  s = z >= 0.0f ? big : small;
  sc = z >= 0.0f ? small : big;
}

/// x * sigmoid(z) as x / (1 + exp(-z)) for z >= 0 and x e / (1 + e), e = exp(z),
/// for z < 0: stays accurate where exp(-z) would overflow (z < -88) and the
/// product is a tiny (possibly subnormal) value rather than -0.
__device__ __forceinline__ float x_sigmoid(float x, float z) {
  const float e = expf(-fabsf(z));
  return z >= 0.0f ? x / (1.0f + e) : (x * e) / (1.0f + e);
}

template <Act A>
struct ActFn;

template <>
struct ActFn<Act::kGeluErf> {
  // 0.5 x (1 + erf(x / sqrt 2)) written with erfc: 1 + erf(t) for t << 0 cancels, erfc(-t) does not.
  __device__ static float fwd(float x) { return x * 0.5f * erfcf(-x * kSqrt1_2); }
  // Phi(x) + x phi(x). For |x| > ~1e19 x * x overflows, exp(-inf) = 0 and x * 0 = 0 (finite x).
  __device__ static float bwd(float x) {
    const float cdf = 0.5f * erfcf(-x * kSqrt1_2);
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return fmaf(x, pdf, cdf);
  }
};

template <>
struct ActFn<Act::kGeluTanh> {
  // 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + c x^3): the same function without the
  // cancellation of 1 + tanh(u) at u << 0.
  __device__ static float fwd(float x) {
    const float u = kSqrt2OverPi * fmaf(kGeluC * x * x, x, x);
    return x_sigmoid(x, 2.0f * u);
  }
  // 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx with t = tanh(u), du/dx = sqrt(2/pi) (1 + 3c x^2). With
  // s = sigmoid(2u) and sc = 1 - s: 0.5 (1 + t) = s and 1 - t^2 = 4 s sc, so the derivative is
  // s + 2 s sc x du/dx, free of the cancellations in 1 + t and 1 - t^2.
  __device__ static float bwd(float x) {
    const float x2 = x * x;
    const float u = kSqrt2OverPi * fmaf(kGeluC * x2, x, x);
    float s, sc;
    sigmoid_pair(2.0f * u, s, sc);
    const float w = s * sc;
    const float du = kSqrt2OverPi * fmaf(3.0f * kGeluC, x2, 1.0f);
    // Saturated (w == 0 once |x| > ~10): the second term is 0 in fp32, but x * du alone overflows
    // for |x| > ~1e13 and 0 * inf would turn a large finite x into NaN, so it is skipped there.
    // x = +-inf still evaluates it and gives NaN, like PyTorch's formula.
    if (w == 0.0f && isfinite(x)) return s;
    return fmaf(2.0f * w * x, du, s);
  }
};

template <>
struct ActFn<Act::kSilu> {
  __device__ static float fwd(float x) { return x_sigmoid(x, x); }
  // s (1 + x (1 - s)), s = sigmoid(x), with 1 - s from sigmoid_pair (no cancellation at x >> 0).
  __device__ static float bwd(float x) {
    float s, sc;
    sigmoid_pair(x, s, sc);
    return s * fmaf(x, sc, 1.0f);
  }
};

constexpr int kThreads = 256;

template <typename T, Act A>
__global__ void __launch_bounds__(kThreads)
    activation_fwd_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t count, bool vec) {
  constexpr int kN = Pack<T>::kN;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = vec ? count / kN : 0;
  for (int64_t p = tid; p < packs; p += stride) {
    const Pack<T> v = reinterpret_cast<const Pack<T>*>(x)[p];
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < kN; ++k) o.v[k] = from_float<T>(ActFn<A>::fwd(to_float(v.v[k])));
    reinterpret_cast<Pack<T>*>(y)[p] = o;
  }
  for (int64_t i = packs * kN + tid; i < count; i += stride) y[i] = from_float<T>(ActFn<A>::fwd(to_float(x[i])));
}

template <typename T, Act A>
__global__ void __launch_bounds__(kThreads) activation_bwd_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                                                  T* __restrict__ dx, int64_t count, bool vec) {
  constexpr int kN = Pack<T>::kN;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = vec ? count / kN : 0;
  for (int64_t p = tid; p < packs; p += stride) {
    const Pack<T> xv = reinterpret_cast<const Pack<T>*>(x)[p];
    const Pack<T> gv = reinterpret_cast<const Pack<T>*>(dy)[p];
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < kN; ++k) o.v[k] = from_float<T>(to_float(gv.v[k]) * ActFn<A>::bwd(to_float(xv.v[k])));
    reinterpret_cast<Pack<T>*>(dx)[p] = o;
  }
  for (int64_t i = packs * kN + tid; i < count; i += stride) {
    dx[i] = from_float<T>(to_float(dy[i]) * ActFn<A>::bwd(to_float(x[i])));
  }
}

bool valid_act(Act act) {
  return act == Act::kGeluErf || act == Act::kGeluTanh || act == Act::kSilu;
}

bool host_aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

/// Enough blocks for one pack (or element) per thread, capped; the grid-stride loops do the rest.
template <typename T>
dim3 activation_grid(int64_t count, bool vec) {
  return grid_for(ceil_div(vec ? ceil_div(count, Pack<T>::kN) : count, kThreads));
}

}  // namespace

cudaError_t activation_fwd(Dt dt, Act act, const void* x, void* y, int64_t count, cudaStream_t s) {
  if (!valid_dt(dt) || !valid_act(act) || count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr) return cudaErrorInvalidValue;
  const bool vec = host_aligned16(x) && host_aligned16(y);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    const dim3 grid = activation_grid<T>(count, vec);
    switch (act) {
      case Act::kGeluErf:
        activation_fwd_kernel<T, Act::kGeluErf><<<grid, kThreads, 0, s>>>(xt, yt, count, vec);
        break;
      case Act::kGeluTanh:
        activation_fwd_kernel<T, Act::kGeluTanh><<<grid, kThreads, 0, s>>>(xt, yt, count, vec);
        break;
      case Act::kSilu:
        activation_fwd_kernel<T, Act::kSilu><<<grid, kThreads, 0, s>>>(xt, yt, count, vec);
        break;
    }
    return cudaGetLastError();
  });
}

cudaError_t activation_bwd(Dt dt, Act act, const void* x, const void* dy, void* dx, int64_t count, cudaStream_t s) {
  if (!valid_dt(dt) || !valid_act(act) || count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (x == nullptr || dy == nullptr || dx == nullptr) return cudaErrorInvalidValue;
  const bool vec = host_aligned16(x) && host_aligned16(dy) && host_aligned16(dx);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    T* dxt = static_cast<T*>(dx);
    const dim3 grid = activation_grid<T>(count, vec);
    switch (act) {
      case Act::kGeluErf:
        activation_bwd_kernel<T, Act::kGeluErf><<<grid, kThreads, 0, s>>>(xt, dyt, dxt, count, vec);
        break;
      case Act::kGeluTanh:
        activation_bwd_kernel<T, Act::kGeluTanh><<<grid, kThreads, 0, s>>>(xt, dyt, dxt, count, vec);
        break;
      case Act::kSilu:
        activation_bwd_kernel<T, Act::kSilu><<<grid, kThreads, 0, s>>>(xt, dyt, dxt, count, vec);
        break;
    }
    return cudaGetLastError();
  });
}

}  // namespace assay::kernels::rowwise
