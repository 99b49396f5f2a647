// MUTANTS of kernels/rowwise/cross_entropy.cu -- planted bugs, not kernels to use. Each is one
// edit of the real kernel:
//   ce_ignore_index_ignored  No ignore_index test: a row whose target is ignore_index is treated
//                            like any other, so with the usual ignore_index = -100 (outside
//                            [0, n)) it gets the invalid-target NaN loss and NaN dlogits instead
//                            of 0 and 0, and with an in-range ignore_index a real loss and
//                            gradient. Caught by the exact / nan-inf checks on any case with a
//                            masked row; invisible when no target equals ignore_index.
//   ce_smoothing_wrong       Label smoothing spread as eps / (n - 1) over the classes j != c
//                            (none on c) instead of eps / n over all classes (PyTorch's
//                            definition, the one the header declares): q_c = 1 - eps instead of
//                            1 - eps + eps / n. Exact when eps == 0; with eps > 0 the loss and
//                            every dlogit are off by O(eps / n) -- caught by the bound for small
//                            n (n = 1 gives 0 / 0 = NaN), harder to see as n grows.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "tests/mutants/rowwise/mutants.h"

namespace assay::mutants::rowwise {
namespace {

using namespace kernels::rowwise::detail;  // NOLINT(build/namespaces)

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreads)
    no_ignore_kernel(const T* __restrict__ logits, int64_t ldx, const int32_t* __restrict__ target, int64_t rows,
                     int64_t n, float eps, float* __restrict__ loss, T* __restrict__ dlogits, int64_t lddx) {
  const float eps_n = eps / static_cast<float>(n);
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = logits + r * ldx;
    T* dr = dlogits + r * lddx;
    const int64_t c = target[r];
    if (c < 0 || c >= n) {  // BUG: the c == ignore_index case (loss 0, dlogits 0) is missing
      for (int64_t j = G::rank(); j < n; j += G::size()) dr[j] = from_float<T>(quiet_nan());
      if (G::rank() == 0) loss[r] = quiet_nan();
      continue;
    }
    MaxSum st = MaxSumOp::identity();
    for (int64_t j = G::rank(); j < n; j += G::size()) online_add(st, to_float(xr[j]));
    st = G::allreduce(st, MaxSumOp{});
    const float m = st.m, s = st.s;
    float sum_t = 0.0f;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float t = to_float(xr[j]) - m;
      const float q = j == c ? (1.0f - eps) + eps_n : eps_n;
      dr[j] = from_float<T>(expf(t) / s - q);
      sum_t += t;
    }
    if (eps != 0.0f) sum_t = G::allreduce(sum_t, SumOp{});
    if (G::rank() == 0) {
      const float log_s = logf(s);
      const float nll = log_s - (to_float(xr[c]) - m);
      loss[r] = eps != 0.0f ? (1.0f - eps) * nll + eps * (log_s - sum_t / static_cast<float>(n)) : nll;
    }
  }
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreads)
    smoothing_kernel(const T* __restrict__ logits, int64_t ldx, const int32_t* __restrict__ target, int64_t rows,
                     int64_t n, int64_t ignore_index, float eps, float* __restrict__ loss, T* __restrict__ dlogits,
                     int64_t lddx) {
  const float eps_other = eps / static_cast<float>(n - 1);  // BUG: should be eps / n, on every class
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = logits + r * ldx;
    T* dr = dlogits + r * lddx;
    const int64_t c = target[r];
    if (c == ignore_index || c < 0 || c >= n) {
      const float fill = c == ignore_index ? 0.0f : quiet_nan();
      for (int64_t j = G::rank(); j < n; j += G::size()) dr[j] = from_float<T>(fill);
      if (G::rank() == 0) loss[r] = fill;
      continue;
    }
    MaxSum st = MaxSumOp::identity();
    for (int64_t j = G::rank(); j < n; j += G::size()) online_add(st, to_float(xr[j]));
    st = G::allreduce(st, MaxSumOp{});
    const float m = st.m, s = st.s;
    float sum_t = 0.0f;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float t = to_float(xr[j]) - m;
      const float q = j == c ? 1.0f - eps : eps_other;
      dr[j] = from_float<T>(expf(t) / s - q);
      sum_t += t;
    }
    if (eps != 0.0f) sum_t = G::allreduce(sum_t, SumOp{});
    if (G::rank() == 0) {
      const float log_s = logf(s);
      const float t_c = to_float(xr[c]) - m;
      const float nll = log_s - t_c;
      // -sum_j q_j (t_j - L) with the mutated q: the smoothing mean runs over the n - 1 others.
      loss[r] = eps != 0.0f ? (1.0f - eps) * nll + eps * (log_s - (sum_t - t_c) / static_cast<float>(n - 1)) : nll;
    }
  }
}

cudaError_t check(Dt dt, const void* logits, int64_t ldx, const int32_t* target, int64_t rows, int64_t n,
                  const float* loss, const void* dlogits, int64_t lddx, bool* work) {
  *work = false;
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (logits == nullptr || target == nullptr || loss == nullptr || dlogits == nullptr || ldx < n || lddx < n)
    return cudaErrorInvalidValue;
  *work = true;
  return cudaSuccess;
}

}  // namespace

cudaError_t ce_ignore_index_ignored(Dt dt, const void* logits, int64_t ldx, const int32_t* target, int64_t rows,
                                    int64_t n, int64_t ignore_index, float smoothing, float* loss, void* dlogits,
                                    int64_t lddx, cudaStream_t s) {
  (void)ignore_index;  // the bug: accepted and never looked at
  bool work = false;
  if (const cudaError_t e = check(dt, logits, ldx, target, rows, n, loss, dlogits, lddx, &work);
      e != cudaSuccess || !work)
    return e;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      no_ignore_kernel<T, G><<<grid, block, 0, s>>>(static_cast<const T*>(logits), ldx, target, rows, n, smoothing,
                                                    loss, static_cast<T*>(dlogits), lddx);
    });
    return cudaGetLastError();
  });
}

cudaError_t ce_smoothing_wrong(Dt dt, const void* logits, int64_t ldx, const int32_t* target, int64_t rows, int64_t n,
                               int64_t ignore_index, float smoothing, float* loss, void* dlogits, int64_t lddx,
                               cudaStream_t s) {
  bool work = false;
  if (const cudaError_t e = check(dt, logits, ldx, target, rows, n, loss, dlogits, lddx, &work);
      e != cudaSuccess || !work)
    return e;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      smoothing_kernel<T, G><<<grid, block, 0, s>>>(static_cast<const T*>(logits), ldx, target, rows, n, ignore_index,
                                                    smoothing, loss, static_cast<T*>(dlogits), lddx);
    });
    return cudaGetLastError();
  });
}

}  // namespace assay::mutants::rowwise
