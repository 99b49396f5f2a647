// Softmax / log-softmax forward and backward over rows.
//   softmax_fwd  one pass over x keeping the online (max, sum) state per thread, merged across the
//                row's warp or block by the same rule; a second pass writes y. A row whose x starts
//                16-byte aligned is read in 16-byte packs plus a scalar tail (and written in packs
//                when its y row is aligned too); other rows go scalar.
//   softmax_bwd  one pass for sum(y * dy) (log: sum(dy)), a second for dx.
// Both: one warp per row for n <= 1024 (8 rows per block), one 512-thread block per row above.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "kernels/rowwise/rowwise.h"

namespace assay::kernels::rowwise {
namespace {

using namespace detail;  // NOLINT(build/namespaces): the private helpers of this op family

template <typename T, bool Log, typename G>
__global__ void __launch_bounds__(G::kThreads)
    softmax_fwd_kernel(const T* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy, int64_t rows, int64_t n) {
  constexpr int kN = Pack<T>::kN;
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    // Row-uniform decision (the whole group sees the same addresses): a
    // padded ld can misalign every other row even when x itself is aligned.
    const bool vec_x = aligned16(xr);
    const int64_t packs = vec_x ? n / kN : 0;

    MaxSum st = MaxSumOp::identity();
    const Pack<T>* xp = reinterpret_cast<const Pack<T>*>(xr);
    for (int64_t p = G::rank(); p < packs; p += G::size()) {
      const Pack<T> v = xp[p];
      float f[kN];
#pragma unroll
      for (int k = 0; k < kN; ++k) f[k] = to_float(v.v[k]);
      online_add(st, f);
    }
    // Scalar tail (n % kN elements), or the whole row when not aligned.
    for (int64_t j = packs * kN + G::rank(); j < n; j += G::size()) online_add(st, to_float(xr[j]));
    st = G::allreduce(st, MaxSumOp{});

    // Second pass: divide by s rather than multiply by 1/s (one rounding
    // fewer); log(s) once per row.
    const float m = st.m, s = st.s, log_s = logf(st.s);
    auto out = [&](float v) { return Log ? (v - m) - log_s : expf(v - m) / s; };
    const int64_t packs_y = (vec_x && aligned16(yr)) ? packs : 0;
    Pack<T>* yp = reinterpret_cast<Pack<T>*>(yr);
    for (int64_t p = G::rank(); p < packs_y; p += G::size()) {
      const Pack<T> v = xp[p];
      Pack<T> o;
#pragma unroll
      for (int k = 0; k < kN; ++k) o.v[k] = from_float<T>(out(to_float(v.v[k])));
      yp[p] = o;
    }
    for (int64_t j = packs_y * kN + G::rank(); j < n; j += G::size()) yr[j] = from_float<T>(out(to_float(xr[j])));
  }
}

template <typename T, bool Log, typename G>
__global__ void __launch_bounds__(G::kThreads)
    softmax_bwd_kernel(const T* __restrict__ y, int64_t ldy, const T* __restrict__ dy, int64_t lddy, T* __restrict__ dx,
                       int64_t lddx, int64_t rows, int64_t n) {
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* yr = y + r * ldy;
    const T* dyr = dy + r * lddy;
    T* dxr = dx + r * lddx;
    // softmax: the Jacobian-vector product needs sum_j y_j dy_j; log-softmax
    // (y = log p): dx = dy - p * sum_j dy_j with p = exp(y).
    float acc = 0.0f;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float g = to_float(dyr[j]);
      acc = Log ? acc + g : fmaf(to_float(yr[j]), g, acc);
    }
    const float dot = G::allreduce(acc, SumOp{});
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float yv = to_float(yr[j]), g = to_float(dyr[j]);
      dxr[j] = from_float<T>(Log ? g - expf(yv) * dot : yv * (g - dot));
    }
  }
}

}  // namespace

cudaError_t softmax_fwd(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                        cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || ldx < n || ldy < n) return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      if (log) {
        softmax_fwd_kernel<T, true, G><<<grid, block, 0, s>>>(xt, ldx, yt, ldy, rows, n);
      } else {
        softmax_fwd_kernel<T, false, G><<<grid, block, 0, s>>>(xt, ldx, yt, ldy, rows, n);
      }
    });
    return cudaGetLastError();
  });
}

cudaError_t softmax_bwd(Dt dt, const void* y, int64_t ldy, const void* dy, int64_t lddy, void* dx, int64_t lddx,
                        int64_t rows, int64_t n, bool log, cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (y == nullptr || dy == nullptr || dx == nullptr || ldy < n || lddy < n || lddx < n) return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* yt = static_cast<const T*>(y);
    const T* dyt = static_cast<const T*>(dy);
    T* dxt = static_cast<T*>(dx);
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      if (log) {
        softmax_bwd_kernel<T, true, G><<<grid, block, 0, s>>>(yt, ldy, dyt, lddy, dxt, lddx, rows, n);
      } else {
        softmax_bwd_kernel<T, false, G><<<grid, block, 0, s>>>(yt, ldy, dyt, lddy, dxt, lddx, rows, n);
      }
    });
    return cudaGetLastError();
  });
}

}  // namespace assay::kernels::rowwise
