// MUTANTS of kernels/rowwise/softmax.cu -- planted bugs, not kernels to use. Each is the real
// kernel (same row mappings, same vector path) with one edit:
//   softmax_no_max      The online state keeps only s = sum exp(x): the max subtraction "is just
//                       for stability". Exact in exact arithmetic; in fp32 exp(x) overflows to
//                       inf for x > ~88.7 (inf / inf = NaN outputs) and underflows to 0 for
//                       x < ~-103 (0 / 0). Caught by the bound / nan-inf checks on rows with
//                       large logits; invisible with inputs in [-10, 10].
//   softmax_vec_tail    The 16-byte pack loops cover n / kN packs and the scalar tail loop only
//                       runs for misaligned rows: on aligned rows with n % kN != 0 (kN = 4 fp32,
//                       8 fp16/bf16) the last elements are missing from the sum and, when y is
//                       aligned too, never written (canaries / stale values remain). Caught by
//                       the bound and unwritten-output checks; invisible when n % kN == 0 or
//                       every row is misaligned (odd offsets, padded ld).
//   softmax_fast_exp    Every expf of the online pass (running sum, rescales, outputs) is
//                       __expf, and the log-sum-exp's logf is __logf, as --use_fast_math
//                       would make them. The variant declares fast_math (so the hard
//                       ceiling allows __expf's 2 + floor(1.173 |x|) ulp and stays quiet),
//                       but on rows with a spread of logits its outputs carry many ulps
//                       where cuDNN's carry one or two: the vendor-relative accuracy
//                       warning, not a failure, is what must catch it.
//   softmax_bwd_no_sum  dx = y dy (log: dx = dy): the projection "- sum_j y_j dy_j" forgotten.
//                       Caught by the bound check whenever sum_j y_j dy_j != 0, i.e. almost
//                       always (constant dy with softmax is the exception: sum = dy, and the
//                       correct dx is 0).
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "tests/mutants/rowwise/mutants.h"

namespace assay::mutants::rowwise {
namespace {

using namespace kernels::rowwise::detail;  // NOLINT(build/namespaces)

// softmax_fwd_kernel with the running max removed: s accumulates exp(x) directly.
template <typename T, bool Log, typename G>
__global__ void __launch_bounds__(G::kThreads)
    no_max_kernel(const T* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy, int64_t rows, int64_t n) {
  constexpr int kN = Pack<T>::kN;
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    const bool vec_x = aligned16(xr);
    const int64_t packs = vec_x ? n / kN : 0;
    float s = 0.0f;  // BUG: no max, so exp(x) is not shifted into range
    const Pack<T>* xp = reinterpret_cast<const Pack<T>*>(xr);
    for (int64_t p = G::rank(); p < packs; p += G::size()) {
      const Pack<T> v = xp[p];
#pragma unroll
      for (int k = 0; k < kN; ++k) s += expf(to_float(v.v[k]));
    }
    for (int64_t j = packs * kN + G::rank(); j < n; j += G::size()) s += expf(to_float(xr[j]));
    s = G::allreduce(s, SumOp{});
    const float log_s = logf(s);
    auto out = [&](float v) { return Log ? v - log_s : expf(v) / s; };
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

// softmax_fwd_kernel whose scalar loops only serve misaligned rows.
template <typename T, bool Log, typename G>
__global__ void __launch_bounds__(G::kThreads)
    vec_tail_kernel(const T* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy, int64_t rows, int64_t n) {
  constexpr int kN = Pack<T>::kN;
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
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
    // BUG: "the vector loop covers aligned rows": the n % kN tail is never visited there.
    if (!vec_x)
      for (int64_t j = G::rank(); j < n; j += G::size()) online_add(st, to_float(xr[j]));
    st = G::allreduce(st, MaxSumOp{});
    const float m = st.m, s = st.s, log_s = logf(st.s);
    auto out = [&](float v) { return Log ? (v - m) - log_s : expf(v - m) / s; };
    const bool vec_y = vec_x && aligned16(yr);
    const int64_t packs_y = vec_y ? packs : 0;
    Pack<T>* yp = reinterpret_cast<Pack<T>*>(yr);
    for (int64_t p = G::rank(); p < packs_y; p += G::size()) {
      const Pack<T> v = xp[p];
      Pack<T> o;
#pragma unroll
      for (int k = 0; k < kN; ++k) o.v[k] = from_float<T>(out(to_float(v.v[k])));
      yp[p] = o;
    }
    if (!vec_y)  // BUG: same for the output tail
      for (int64_t j = G::rank(); j < n; j += G::size()) yr[j] = from_float<T>(out(to_float(xr[j])));
  }
}

// online_add / MaxSumOp of common.cuh with __expf in place of expf.
__device__ __forceinline__ void fast_add(MaxSum& st, float x) {
  const float m = fmaxf(st.m, x);
  const float shift = safe_shift(m);
  st.s = st.s * __expf(st.m - shift) + __expf(x - shift);  // BUG: approximate exp
  st.m = m;
}
struct FastMaxSumOp {
  __device__ static MaxSum identity() { return {neg_inf(), 0.0f}; }
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float m = fmaxf(a.m, b.m);
    const float shift = safe_shift(m);
    return {m, a.s * __expf(a.m - shift) + b.s * __expf(b.m - shift)};
  }
};

// softmax_fwd_kernel's scalar path with every exp and log approximate.
template <typename T, bool Log, typename G>
__global__ void __launch_bounds__(G::kThreads)
    fast_exp_kernel(const T* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy, int64_t rows, int64_t n) {
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    MaxSum st = FastMaxSumOp::identity();
    for (int64_t j = G::rank(); j < n; j += G::size()) fast_add(st, to_float(xr[j]));
    st = G::allreduce(st, FastMaxSumOp{});
    const float m = st.m, s = st.s, log_s = __logf(st.s);
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float v = to_float(xr[j]);
      yr[j] = from_float<T>(Log ? (v - m) - log_s : __expf(v - m) / s);
    }
  }
}

template <typename T, bool Log, typename G>
__global__ void __launch_bounds__(G::kThreads)
    bwd_no_sum_kernel(const T* __restrict__ y, int64_t ldy, const T* __restrict__ dy, int64_t lddy, T* __restrict__ dx,
                      int64_t lddx, int64_t rows, int64_t n) {
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* yr = y + r * ldy;
    const T* dyr = dy + r * lddy;
    T* dxr = dx + r * lddx;
    for (int64_t j = G::rank(); j < n; j += G::size()) {
      const float yv = to_float(yr[j]), g = to_float(dyr[j]);
      dxr[j] = from_float<T>(Log ? g : yv * g);  // BUG: the row sum term is missing
    }
  }
}

// softmax_fwd's argument checks: an error, or success with *work false when nothing is to be launched.
cudaError_t check_fwd(Dt dt, const void* x, int64_t ldx, const void* y, int64_t ldy, int64_t rows, int64_t n,
                      bool* work) {
  *work = false;
  if (!valid_dt(dt) || rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (rows == 0 || n == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || ldx < n || ldy < n) return cudaErrorInvalidValue;
  *work = true;
  return cudaSuccess;
}

// One forward mutant kernel per selector, launched as softmax_fwd launches its kernel.
#define ASSAY_MUTANT_FWD(Name, kernel)                                                                 \
  struct Name {                                                                                        \
    template <typename T, bool Log, typename G>                                                        \
    static void launch(dim3 grid, dim3 block, cudaStream_t s, const T* x, int64_t ldx, T* y, int64_t ldy, \
                       int64_t rows, int64_t n) {                                                      \
      kernel<T, Log, G><<<grid, block, 0, s>>>(x, ldx, y, ldy, rows, n);                               \
    }                                                                                                  \
  };
ASSAY_MUTANT_FWD(NoMax, no_max_kernel)
ASSAY_MUTANT_FWD(VecTail, vec_tail_kernel)
ASSAY_MUTANT_FWD(FastExp, fast_exp_kernel)
#undef ASSAY_MUTANT_FWD

template <typename K>
cudaError_t launch_fwd(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                       cudaStream_t s) {
  bool work = false;
  if (const cudaError_t e = check_fwd(dt, x, ldx, y, ldy, rows, n, &work); e != cudaSuccess || !work) return e;
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    launch_rows(rows, n, [&](auto group, dim3 grid, dim3 block) {
      using G = decltype(group);
      if (log) {
        K::template launch<T, true, G>(grid, block, s, xt, ldx, yt, ldy, rows, n);
      } else {
        K::template launch<T, false, G>(grid, block, s, xt, ldx, yt, ldy, rows, n);
      }
    });
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t softmax_no_max(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                           cudaStream_t s) {
  return launch_fwd<NoMax>(dt, x, ldx, y, ldy, rows, n, log, s);
}

cudaError_t softmax_vec_tail(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                             cudaStream_t s) {
  return launch_fwd<VecTail>(dt, x, ldx, y, ldy, rows, n, log, s);
}

cudaError_t softmax_fast_exp(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                             cudaStream_t s) {
  return launch_fwd<FastExp>(dt, x, ldx, y, ldy, rows, n, log, s);
}

cudaError_t softmax_bwd_no_sum(Dt dt, const void* y, int64_t ldy, const void* dy, int64_t lddy, void* dx, int64_t lddx,
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
        bwd_no_sum_kernel<T, true, G><<<grid, block, 0, s>>>(yt, ldy, dyt, lddy, dxt, lddx, rows, n);
      } else {
        bwd_no_sum_kernel<T, false, G><<<grid, block, 0, s>>>(yt, ldy, dyt, lddy, dxt, lddx, rows, n);
      }
    });
    return cudaGetLastError();
  });
}

}  // namespace assay::mutants::rowwise
