// MUTANTS of kernels/rowwise/norms.cu -- planted bugs, not kernels to use. Each is one edit of
// the real kernel:
//   layernorm_one_pass   var = E[x^2] - E[x]^2 from one fp32 pass of (sum x, sum x^2), clamped
//                        at 0. Fine for zero-mean data; for rows with |mean| >> spread (e.g.
//                        1000 + U(-1e-2, 1e-2)) both terms are ~1e6 and their difference is
//                        rounding noise, so rstd and y are wrong by orders of magnitude. Caught
//                        by the bound on such rows (the variance_bounds magnitude uses the range
//                        W, not the mean); invisible with centred inputs.
//   layernorm_dbeta_skip_last_row
//                        The dgamma / dbeta column loop runs r < rows - 1 ("the last row is
//                        handled below", and it is not): the last row's contribution is missing.
//                        dx is correct. Caught by the bound on dgamma / dbeta for any rows >= 1
//                        with a nonzero last row of dy; invisible at rows == 0.
//   layernorm_bwd_race   Block-per-row dx (n > 1024): each warp's partial (sum g, sum g xhat)
//                        goes to shared memory and every thread sums the slots without the
//                        __syncthreads() between the writes and the reads, so a fast warp can
//                        read slots not yet written for this row (the previous row's values, or
//                        uninitialised memory on the first). Timing-dependent: caught by the
//                        bound or the determinism rerun when it fires, always by
//                        compute-sanitizer --tool racecheck; never with n <= 1024 (the warp path
//                        has no shared memory).
//   rmsnorm_no_eps       rstd = 1/sqrt(mean(x^2)): eps dropped. Within rounding of the correct
//                        result whenever mean(x^2) >> eps; a zero row gives rstd = inf and
//                        y = 0 * inf = NaN, a tiny row gives a huge y. Caught by nan-inf / bound
//                        on zero or tiny rows only.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "tests/mutants/rowwise/mutants.h"

namespace assay::mutants::rowwise {
namespace {

using namespace kernels::rowwise::detail;  // NOLINT(build/namespaces)

template <typename T>
__device__ __forceinline__ float weight(const T* __restrict__ w, int64_t j, float dflt) {
  return w != nullptr ? to_float(w[j]) : dflt;
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreads)
    one_pass_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ gamma, const T* __restrict__ beta,
                    T* __restrict__ y, int64_t ldy, float* __restrict__ mean, float* __restrict__ rstd, int64_t rows,
                    int64_t n, float eps) {
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    float2 acc = make_float2(0.0f, 0.0f);  // (sum x, sum x^2)
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float v = to_float(xr[j]);
      acc.x += v;
      acc.y = fmaf(v, v, acc.y);
    }
    acc = G::allreduce(acc, Sum2Op{});
    const float mu = acc.x * inv_n;
    const float var = fmaxf(acc.y * inv_n - mu * mu, 0.0f);  // BUG: cancels when |mean| >> spread
    const float rs = rsqrtf(var + eps);
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

constexpr int kColX = 32;
constexpr int kColY = 16;

template <typename T>
__global__ void __launch_bounds__(kColX* kColY)
    skip_last_row_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ dy, int64_t lddy,
                         const float* __restrict__ mean, const float* __restrict__ rstd, float* __restrict__ dgamma,
                         float* __restrict__ dbeta, int64_t rows, int64_t n) {
  __shared__ float sg[kColY][kColX + 1];
  __shared__ float sb[kColY][kColX + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t tiles = ceil_div(n, kColX);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t j = tile * kColX + tx;
    float ag = 0.0f, ab = 0.0f;
    if (j < n) {
      for (int64_t r = ty; r < rows - 1; r += kColY) {  // BUG: should be r < rows
        const float d = to_float(dy[r * lddy + j]);
        const float xhat = (to_float(x[r * ldx + j]) - mean[r]) * rstd[r];
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
    __syncthreads();
  }
}

/// block_allreduce for float2 sums without the barrier between the slot writes and the reads.
__device__ float2 racy_block_sum(float2 v) {
  __shared__ float2 sh[32];
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  v = warp_allreduce(v, Sum2Op{});
  if (lane == 0) sh[warp] = v;
  // BUG: missing __syncthreads(): the other warps' slots may still hold the previous row's sums.
  float2 total = make_float2(0.0f, 0.0f);
  for (int w = 0; w < warps; ++w) total = make_float2(total.x + sh[w].x, total.y + sh[w].y);
  return total;
}

// norm_bwd_dx_kernel<T, /*Centered=*/true, BlockRows> with the racy reduction.
template <typename T>
__global__ void __launch_bounds__(BlockRows::kThreads)
    racy_dx_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ dy, int64_t lddy,
                   const T* __restrict__ gamma, const float* __restrict__ mean, const float* __restrict__ rstd,
                   T* __restrict__ dx, int64_t lddx, int64_t rows, int64_t n) {
  using G = BlockRows;
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    const T* dyr = dy + r * lddy;
    T* dxr = dx + r * lddx;
    const float mu = mean[r];
    const float rs = rstd[r];
    float2 acc = make_float2(0.0f, 0.0f);
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float xhat = (to_float(xr[j]) - mu) * rs;
      const float g = to_float(dyr[j]) * weight(gamma, j, 1.0f);
      acc.x += g;
      acc.y = fmaf(g, xhat, acc.y);
    }
    acc = racy_block_sum(acc);
    const float mean_g = acc.x * inv_n;
    const float mean_gx = acc.y * inv_n;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float xhat = (to_float(xr[j]) - mu) * rs;
      const float g = to_float(dyr[j]) * weight(gamma, j, 1.0f);
      dxr[j] = from_float<T>(rs * (g - mean_g - xhat * mean_gx));
    }
  }
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreads)
    no_eps_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ gamma, T* __restrict__ y, int64_t ldy,
                  float* __restrict__ rstd, int64_t rows, int64_t n) {
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    float ss = 0.0f;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float v = to_float(xr[j]);
      ss = fmaf(v, v, ss);
    }
    ss = G::allreduce(ss, SumOp{});
    const float rs = rsqrtf(ss / static_cast<float>(n));  // BUG: + eps missing
    if (G::rank() == 0) rstd[r] = rs;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      yr[j] = from_float<T>(to_float(xr[j]) * rs * weight(gamma, j, 1.0f));
    }
  }
}

}  // namespace

cudaError_t layernorm_one_pass(Dt dt, const void* x, int64_t ldx, const void* gamma, const void* beta, void* y,
                               int64_t ldy, float* mean, float* rstd, int64_t rows, int64_t n, float eps,
                               cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || mean == nullptr || rstd == nullptr || ldx < n || ldy < n)
    return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      one_pass_kernel<T, G><<<grid, block, 0, s>>>(static_cast<const T*>(x), ldx, static_cast<const T*>(gamma),
                                                   static_cast<const T*>(beta), static_cast<T*>(y), ldy, mean, rstd,
                                                   rows, n, eps);
    });
    return cudaGetLastError();
  });
}

// The two backward mutants run the real layernorm_bwd first (its argument checks, dx, dgamma,
// dbeta) and then overwrite the output their bug lives in with the mutated kernel, on the same
// stream: what the caller observes is exactly what a layernorm_bwd carrying that bug returns.
cudaError_t layernorm_dbeta_skip_last_row(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy,
                                          const void* gamma, const float* mean, const float* rstd, void* dx,
                                          int64_t lddx, float* dgamma, float* dbeta, int64_t rows, int64_t n,
                                          cudaStream_t s) {
  if (const cudaError_t e =
          kernels::rowwise::layernorm_bwd(dt, x, ldx, dy, lddy, gamma, mean, rstd, dx, lddx, dgamma, dbeta, rows, n, s);
      e != cudaSuccess || n == 0)
    return e;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    skip_last_row_kernel<T><<<grid_for(ceil_div(n, kColX)), dim3(kColX, kColY), 0, s>>>(
        static_cast<const T*>(x), ldx, static_cast<const T*>(dy), lddy, mean, rstd, dgamma, dbeta, rows, n);
    return cudaGetLastError();
  });
}

cudaError_t layernorm_bwd_race(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy, const void* gamma,
                               const float* mean, const float* rstd, void* dx, int64_t lddx, float* dgamma,
                               float* dbeta, int64_t rows, int64_t n, cudaStream_t s) {
  if (const cudaError_t e =
          kernels::rowwise::layernorm_bwd(dt, x, ldx, dy, lddy, gamma, mean, rstd, dx, lddx, dgamma, dbeta, rows, n, s);
      e != cudaSuccess || rows == 0 || n <= kWarpRowMaxN)
    return e;  // the warp-per-row path has no shared memory and no race
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    racy_dx_kernel<T><<<grid_for(rows), BlockRows::kThreads, 0, s>>>(
        static_cast<const T*>(x), ldx, static_cast<const T*>(dy), lddy, static_cast<const T*>(gamma), mean, rstd,
        static_cast<T*>(dx), lddx, rows, n);
    return cudaGetLastError();
  });
}

cudaError_t rmsnorm_no_eps(Dt dt, const void* x, int64_t ldx, const void* gamma, void* y, int64_t ldy, float* rstd,
                           int64_t rows, int64_t n, float eps, cudaStream_t s) {
  (void)eps;  // the bug: accepted and ignored
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || rstd == nullptr || ldx < n || ldy < n) return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      no_eps_kernel<T, G><<<grid, block, 0, s>>>(static_cast<const T*>(x), ldx, static_cast<const T*>(gamma),
                                                 static_cast<T*>(y), ldy, rstd, rows, n);
    });
    return cudaGetLastError();
  });
}

// rmsnorm_bwd_no_projection: dx = rstd * dy * gamma, the backward of y = x * c * gamma with c
// treated as a constant -- the "- xhat * mean(dy gamma xhat)" term of d rstd / dx is missing
// (dgamma from the real kernel). Caught by the bound whenever mean(dy gamma xhat) is not
// negligible against |dy gamma|: any row whose dy is correlated with x, and most random rows
// of a few elements; invisible only when that mean is ~0.
namespace {
template <typename T>
__global__ void rms_no_projection_kernel(const T* __restrict__ dy, int64_t lddy, const T* __restrict__ gamma,
                                         const float* __restrict__ rstd, T* __restrict__ dx, int64_t lddx,
                                         int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / n, i = e % n;
    const float g = gamma != nullptr ? to_float(gamma[i]) : 1.0f;
    dx[r * lddx + i] = from_float<T>(rstd[r] * to_float(dy[r * lddy + i]) * g);  // BUG: no projection term
  }
}
}  // namespace

cudaError_t rmsnorm_bwd_no_projection(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy,
                                      const void* gamma, const float* rstd, void* dx, int64_t lddx, float* dgamma,
                                      int64_t rows, int64_t n, cudaStream_t s) {
  const cudaError_t e = kernels::rowwise::rmsnorm_bwd(dt, x, ldx, dy, lddy, gamma, rstd, dx, lddx, dgamma, rows, n, s);
  if (e != cudaSuccess || rows == 0 || n == 0) return e;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_no_projection_kernel<T><<<grid_for(ceil_div(rows * n, 256)), 256, 0, s>>>(
        static_cast<const T*>(dy), lddy, static_cast<const T*>(gamma), rstd, static_cast<T*>(dx), lddx, rows, n);
    return cudaGetLastError();
  });
}

}  // namespace assay::mutants::rowwise
