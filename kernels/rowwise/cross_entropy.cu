// Fused softmax + cross-entropy with class-index targets and label smoothing, forward and backward
// in one kernel (reduction 'none'). One warp per row for n <= 1024 (8 rows per block), one
// 512-thread block per row above. Per row:
//   pass 1  online (max m, sum s of exp(x - m)) as in softmax_fwd, merged across the group;
//   pass 2  dlogits_j = exp(x_j - m) / s - q_j, and (smoothing only) sum_j (x_j - m);
//   loss    with L = log s, t_j = x_j - m (so log_softmax_j = t_j - L) and sum_j q_j = 1:
//             loss = -sum_j q_j (t_j - L) = (1 - eps) (L - t_c) + eps (L - mean_j t_j),
//           both brackets >= 0 (L >= 0, t_j <= 0): a sum without cancellation. The smoothing sum
//           is taken relative to m in pass 2 rather than as sum x - n m, which would cancel for
//           logits with a large common offset.
// Rows whose target is ignore_index (loss 0, dlogits 0) or outside [0, n) (NaN) skip the passes.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "kernels/rowwise/rowwise.h"

namespace assay::kernels::rowwise {
namespace {

using namespace detail;  // NOLINT(build/namespaces): the private helpers of this op family

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreads)
    cross_entropy_kernel(const T* __restrict__ logits, int64_t ldx, const int32_t* __restrict__ target, int64_t rows,
                         int64_t n, int64_t ignore_index, float eps, float* __restrict__ loss, T* __restrict__ dlogits,
                         int64_t lddx) {
  const float eps_n = eps / static_cast<float>(n);
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = logits + r * ldx;
    T* dr = dlogits + r * lddx;
    const int64_t c = target[r];  // the same for the whole group: the branches below are uniform
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
      const float q = j == c ? (1.0f - eps) + eps_n : eps_n;
      dr[j] = from_float<T>(expf(t) / s - q);
      sum_t += t;
    }
    // eps == 0 skips the smoothing term entirely (as PyTorch): eps * (L - mean t) would be
    // 0 * inf = NaN for a row with a -inf logit, whose unsmoothed loss is finite.
    if (eps != 0.0f) sum_t = G::allreduce(sum_t, SumOp{});
    if (G::rank() == 0) {
      const float log_s = logf(s);
      const float nll = log_s - (to_float(xr[c]) - m);
      loss[r] = eps != 0.0f ? (1.0f - eps) * nll + eps * (log_s - sum_t / static_cast<float>(n)) : nll;
    }
  }
}

}  // namespace

cudaError_t cross_entropy_fwd_bwd(Dt dt, const void* logits, int64_t ldx, const int32_t* target, int64_t rows,
                                  int64_t n, int64_t ignore_index, float smoothing, float* loss, void* dlogits,
                                  int64_t lddx, cudaStream_t s) {
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (logits == nullptr || target == nullptr || loss == nullptr || dlogits == nullptr || ldx < n || lddx < n)
    return cudaErrorInvalidValue;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      cross_entropy_kernel<T, G><<<grid, block, 0, s>>>(static_cast<const T*>(logits), ldx, target, rows, n,
                                                        ignore_index, smoothing, loss, static_cast<T*>(dlogits), lddx);
    });
    return cudaGetLastError();
  });
}

}  // namespace assay::kernels::rowwise
