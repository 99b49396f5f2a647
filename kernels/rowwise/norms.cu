// LayerNorm and RMSNorm, forward and backward.
//   layernorm_fwd  per-thread Welford, Chan merge across the row's warp or block; a second pass
//                  writes y. One warp per row for n <= 1024 (8 rows per block), else one
//                  512-thread block per row.
//   rmsnorm_fwd    the same mapping with a sum of squares.
//   *_bwd          two kernels: dx per row (same mapping; two row sums), then dgamma / dbeta by a
//                  column kernel that owns 32 columns per block and sums rows in a fixed order
//                  (deterministic, no atomics, overwrites; zeros when rows == 0).
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "kernels/rowwise/rowwise.h"

namespace assay::kernels::rowwise {
namespace {

using namespace detail;  // NOLINT(build/namespaces): the private helpers of this op family

// A null gamma / beta reads as 1 / 0 (the header only promises a nullable beta; accepting a
// null gamma as "no weight" costs one branch per element and avoids a fault).
template <typename T>
__device__ __forceinline__ float weight(const T* __restrict__ w, int64_t j, float dflt) {
  return w != nullptr ? to_float(w[j]) : dflt;
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreads)
    layernorm_fwd_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ gamma, const T* __restrict__ beta,
                         T* __restrict__ y, int64_t ldy, float* __restrict__ mean, float* __restrict__ rstd,
                         int64_t rows, int64_t n, float eps) {
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    // Welford rather than E[x^2] - E[x]^2: the one-pass formula loses every
    // digit of the variance when |mean| >> spread ([CGL] 1983).
    Welford w = WelfordOp::identity();
    for (int64_t j = G::rank(); j < n; j += G::size()) welford_add(w, to_float(xr[j]));
    w = G::allreduce(w, WelfordOp{});
    const float mu = w.mean;
    const float rs = rsqrtf(w.m2 / w.n + eps);  // population variance (ddof 0)
    if (G::rank() == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float xhat = (to_float(xr[j]) - mu) * rs;
      yr[j] = from_float<T>(fmaf(xhat, weight(gamma, j, 1.0f), weight(beta, j, 0.0f)));
    }
  }
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreads)
    rmsnorm_fwd_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ gamma, T* __restrict__ y,
                       int64_t ldy, float* __restrict__ rstd, int64_t rows, int64_t n, float eps) {
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    float ss = 0.0f;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float v = to_float(xr[j]);
      ss = fmaf(v, v, ss);
    }
    ss = G::allreduce(ss, SumOp{});
    const float rs = rsqrtf(ss / static_cast<float>(n) + eps);
    if (G::rank() == 0) rstd[r] = rs;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      yr[j] = from_float<T>(to_float(xr[j]) * rs * weight(gamma, j, 1.0f));
    }
  }
}

// dx for both norms, with xhat = (x - mean) * rstd (Centered) or x * rstd and g = dy * gamma:
//   LayerNorm  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   RMSNorm    dx = rstd * (g - xhat * mean(g * xhat))
// The two row means come from one float2 all-reduction.
template <typename T, bool Centered, typename G>
__global__ void __launch_bounds__(G::kThreads)
    norm_bwd_dx_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ dy, int64_t lddy,
                       const T* __restrict__ gamma, const float* __restrict__ mean, const float* __restrict__ rstd,
                       T* __restrict__ dx, int64_t lddx, int64_t rows, int64_t n) {
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    const T* dyr = dy + r * lddy;
    T* dxr = dx + r * lddx;
    const float mu = Centered ? mean[r] : 0.0f;
    const float rs = rstd[r];
    float2 acc = make_float2(0.0f, 0.0f);  // (sum g, sum g * xhat)
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float xhat = (to_float(xr[j]) - mu) * rs;
      const float g = to_float(dyr[j]) * weight(gamma, j, 1.0f);
      acc.x += g;
      acc.y = fmaf(g, xhat, acc.y);
    }
    acc = G::allreduce(acc, Sum2Op{});
    const float mean_g = Centered ? acc.x * inv_n : 0.0f;
    const float mean_gx = acc.y * inv_n;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float xhat = (to_float(xr[j]) - mu) * rs;
      const float g = to_float(dyr[j]) * weight(gamma, j, 1.0f);
      dxr[j] = from_float<T>(rs * (g - mean_g - xhat * mean_gx));
    }
  }
}

// dgamma[j] = sum_r dy[r][j] * xhat[r][j], dbeta[j] = sum_r dy[r][j]. A block owns kColX
// adjacent columns (a warp reads 32 consecutive elements of a row: coalesced); its kColY
// thread rows take rows ty, ty + kColY, ... in increasing order, then a fixed shared-memory
// tree adds the kColY partials. The order depends on nothing but the shape, so results are
// bitwise reproducible, unlike atomics. Parallelism is ceil(n / 32) blocks: splitting rows
// across blocks as well would need a workspace the interface does not provide.
constexpr int kColX = 32;
constexpr int kColY = 16;
static_assert((kColY & (kColY - 1)) == 0, "the tree halves kColY");

template <typename T, bool Centered>
__global__ void __launch_bounds__(kColX* kColY)
    norm_param_grad_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ dy, int64_t lddy,
                           const float* __restrict__ mean, const float* __restrict__ rstd, float* __restrict__ dgamma,
                           float* __restrict__ dbeta, int64_t rows, int64_t n) {
  __shared__ float sg[kColY][kColX + 1];
  __shared__ float sb[kColY][kColX + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t tiles = ceil_div(n, kColX);
  // Bounds depend on blockIdx only: the barriers below are never divergent.
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t j = tile * kColX + tx;
    float ag = 0.0f, ab = 0.0f;
    if (j < n) {
      for (int64_t r = ty; r < rows; r += kColY) {
        const float d = to_float(dy[r * lddy + j]);
        const float xhat = (to_float(x[r * ldx + j]) - (Centered ? mean[r] : 0.0f)) * rstd[r];
        ag = fmaf(d, xhat, ag);
        ab += d;
      }
    }
    sg[ty][tx] = ag;
    sb[ty][tx] = ab;
    __syncthreads();
#pragma unroll
    for (int half = kColY / 2; half > 0; half >>= 1) {
      if (ty < half) {
        sg[ty][tx] += sg[ty + half][tx];
        sb[ty][tx] += sb[ty + half][tx];
      }
      __syncthreads();
    }
    if (ty == 0 && j < n) {
      dgamma[j] = sg[0][tx];
      if (dbeta != nullptr) dbeta[j] = sb[0][tx];
    }
    __syncthreads();  // row 0 of the tile is read before the next tile overwrites it
  }
}

template <typename T, bool Centered>
void launch_norm_bwd(const void* x, int64_t ldx, const void* dy, int64_t lddy, const void* gamma, const float* mean,
                     const float* rstd, void* dx, int64_t lddx, float* dgamma, float* dbeta, int64_t rows, int64_t n,
                     cudaStream_t s) {
  const T* xt = static_cast<const T*>(x);
  const T* dyt = static_cast<const T*>(dy);
  if (rows > 0) {
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      norm_bwd_dx_kernel<T, Centered, G><<<grid, block, 0, s>>>(xt, ldx, dyt, lddy, static_cast<const T*>(gamma), mean,
                                                                rstd, static_cast<T*>(dx), lddx, rows, n);
    });
  }
  // Launched even for rows == 0: dgamma and dbeta are overwritten with the empty sums (zeros).
  norm_param_grad_kernel<T, Centered><<<grid_for(ceil_div(n, kColX)), dim3(kColX, kColY), 0, s>>>(
      xt, ldx, dyt, lddy, mean, rstd, dgamma, dbeta, rows, n);
}

}  // namespace

cudaError_t layernorm_fwd(Dt dt, const void* x, int64_t ldx, const void* gamma, const void* beta, void* y, int64_t ldy,
                          float* mean, float* rstd, int64_t rows, int64_t n, float eps, cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || mean == nullptr || rstd == nullptr || ldx < n || ldy < n)
    return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      layernorm_fwd_kernel<T, G><<<grid, block, 0, s>>>(static_cast<const T*>(x), ldx, static_cast<const T*>(gamma),
                                                        static_cast<const T*>(beta), static_cast<T*>(y), ldy, mean,
                                                        rstd, rows, n, eps);
    });
    return cudaGetLastError();
  });
}

cudaError_t layernorm_bwd(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy, const void* gamma,
                          const float* mean, const float* rstd, void* dx, int64_t lddx, float* dgamma, float* dbeta,
                          int64_t rows, int64_t n, cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;  // rows == 0 still has work: dgamma = dbeta = 0
  if (dgamma == nullptr) return cudaErrorInvalidValue;
  if (rows > 0 && (x == nullptr || dy == nullptr || mean == nullptr || rstd == nullptr || dx == nullptr || ldx < n ||
                   lddy < n || lddx < n))
    return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_norm_bwd<T, true>(x, ldx, dy, lddy, gamma, mean, rstd, dx, lddx, dgamma, dbeta, rows, n, s);
    return cudaGetLastError();
  });
}

cudaError_t rmsnorm_fwd(Dt dt, const void* x, int64_t ldx, const void* gamma, void* y, int64_t ldy, float* rstd,
                        int64_t rows, int64_t n, float eps, cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || rstd == nullptr || ldx < n || ldy < n) return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      rmsnorm_fwd_kernel<T, G><<<grid, block, 0, s>>>(static_cast<const T*>(x), ldx, static_cast<const T*>(gamma),
                                                      static_cast<T*>(y), ldy, rstd, rows, n, eps);
    });
    return cudaGetLastError();
  });
}

cudaError_t rmsnorm_bwd(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy, const void* gamma,
                        const float* rstd, void* dx, int64_t lddx, float* dgamma, int64_t rows, int64_t n,
                        cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;  // rows == 0 still has work: dgamma = 0
  if (dgamma == nullptr) return cudaErrorInvalidValue;
  if (rows > 0 &&
      (x == nullptr || dy == nullptr || rstd == nullptr || dx == nullptr || ldx < n || lddy < n || lddx < n))
    return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_norm_bwd<T, false>(x, ldx, dy, lddy, gamma, nullptr, rstd, dx, lddx, dgamma, nullptr, rows, n, s);
    return cudaGetLastError();
  });
}

}  // namespace assay::kernels::rowwise
