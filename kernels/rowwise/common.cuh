// Private device helpers of the row-wise kernels (kernels/rowwise/*.cu and the
// planted-bug copies in tests/mutants/rowwise/): dtype load/store, 16-byte
// packs, warp and block all-reductions, the two row-to-thread mappings and
// the runtime Dt dispatch. Not part of the interface (rowwise.h is).
//
// Row mappings (every row-wise kernel is a template over one of them):
//   WarpRows   one warp per row, 8 rows per 256-thread block; used when n <= kWarpRowMaxN
//   BlockRows  one 512-thread block per row; used for longer rows
// Both walk rows with a grid-stride loop whose bounds depend only on the
// block / warp index, so every thread of a reducing group takes the same trip
// count and the group's shuffles and barriers are never divergent.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/rowwise/rowwise.h"

namespace assay::kernels::rowwise::detail {

// ---- dtype conversion ------------------------------------------------------------------------
// Storage types are widened to fp32 exactly; fp32 results are rounded to
// nearest-even on store (the __*_rn conversions), never truncated.
__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

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

__device__ __forceinline__ float quiet_nan() {
  return __int_as_float(0x7fc00000);
}
__device__ __forceinline__ float neg_inf() {
  return __int_as_float(static_cast<int>(0xff800000u));
}

// ---- 16-byte packs ----------------------------------------------------------------------------
/// kN consecutive elements moved by one 16-byte access (4 fp32 or 8 fp16/bf16).
template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  T v[kN];
};

/// True when p may be accessed as a Pack. Checked on the actual row address:
/// a 16-byte aligned base with ld * sizeof(T) % 16 != 0 gives misaligned rows.
__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// ---- reduction values and their merge operators ------------------------------------------------
/// Online-softmax state: running max m and sum s of exp(x - m) (Milakov and
/// Gimelshein 2018). Empty state: m = -inf, s = 0.
struct MaxSum {
  float m, s;
};

/// The exponent shift for a running max m: m itself, except m = -inf (nothing
/// but -inf or NaN seen yet), where exp(x - m) would be exp(-inf + inf) = NaN
/// for x = -inf. Shifting by 0 instead gives exp(-inf) = 0 for those terms, so
/// a row with some -inf entries stays finite; a row of only -inf keeps
/// m = -inf, s = 0 and its outputs exp(-inf + inf) / 0 are NaN, as PyTorch.
/// m = +inf is kept: exp(inf - inf) = NaN makes the row NaN, as declared.
__device__ __forceinline__ float safe_shift(float m) {
  return m == neg_inf() ? 0.0f : m;
}

/// Adds one element. fmaxf ignores a NaN x, but its term exp(NaN) makes s NaN.
__device__ __forceinline__ void online_add(MaxSum& st, float x) {
  const float m = fmaxf(st.m, x);
  const float shift = safe_shift(m);
  st.s = st.s * expf(st.m - shift) + expf(x - shift);
  st.m = m;
}

/// Adds a pack with a single rescale of s (one expf per element plus one).
template <int N>
__device__ __forceinline__ void online_add(MaxSum& st, const float (&x)[N]) {
  float m = st.m;
#pragma unroll
  for (int k = 0; k < N; ++k) m = fmaxf(m, x[k]);
  const float shift = safe_shift(m);
  float s = st.s * expf(st.m - shift);
#pragma unroll
  for (int k = 0; k < N; ++k) s += expf(x[k] - shift);
  st.m = m;
  st.s = s;
}

/// Merges two states by the same rule: both sums rescaled to the larger max.
struct MaxSumOp {
  __device__ static MaxSum identity() { return {neg_inf(), 0.0f}; }
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float m = fmaxf(a.m, b.m);
    const float shift = safe_shift(m);
    return {m, a.s * expf(a.m - shift) + b.s * expf(b.m - shift)};
  }
};

/// Welford state (count, mean, sum of squared deviations M2), fp32. Counts
/// are exact in fp32 up to 2^24 elements per row.
struct Welford {
  float n, mean, m2;
};

__device__ __forceinline__ void welford_add(Welford& w, float x) {
  w.n += 1.0f;
  const float d = x - w.mean;
  w.mean += d / w.n;
  w.m2 += d * (x - w.mean);
}

/// Chan, Golub and LeVeque's pairwise merge ([CGL] 1983, eq. 2.1b); an empty
/// side is returned as is, which also keeps 0/0 out of lanes that saw nothing.
struct WelfordOp {
  __device__ static Welford identity() { return {0.0f, 0.0f, 0.0f}; }
  __device__ Welford operator()(Welford a, Welford b) const {
    if (b.n == 0.0f) return a;
    if (a.n == 0.0f) return b;
    const float n = a.n + b.n;
    const float d = b.mean - a.mean;
    return {n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * (b.n / n))};
  }
};

struct SumOp {
  __device__ static float identity() { return 0.0f; }
  __device__ float operator()(float a, float b) const { return a + b; }
};

struct Sum2Op {
  __device__ static float2 identity() { return make_float2(0.0f, 0.0f); }
  __device__ float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); }
};

// ---- warp and block all-reductions -------------------------------------------------------------
// Any trivially copyable value made of 4-byte words, shuffled word by word.
template <typename V>
__device__ __forceinline__ V shfl_down(V v, int delta) {
  static_assert(sizeof(V) % 4 == 0, "shuffled values are made of 4-byte words");
  constexpr int kWords = static_cast<int>(sizeof(V) / 4);
  float w[kWords];
  memcpy(w, &v, sizeof(V));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_down_sync(0xffffffffu, w[i], delta);
  memcpy(&v, w, sizeof(V));
  return v;
}

template <typename V>
__device__ __forceinline__ V shfl_lane0(V v) {
  constexpr int kWords = static_cast<int>(sizeof(V) / 4);
  float w[kWords];
  memcpy(w, &v, sizeof(V));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_sync(0xffffffffu, w[i], 0);
  memcpy(&v, w, sizeof(V));
  return v;
}

/// Tree reduction down to lane 0, then lane 0's value broadcast: every lane
/// gets bit-identical results even for a merge that is not commutative in
/// rounding (Welford), so all lanes of a row normalise with the same mean.
/// All 32 lanes must call it.
template <typename V, typename Op>
__device__ __forceinline__ V warp_allreduce(V v, Op op) {
#pragma unroll
  for (int delta = 16; delta > 0; delta >>= 1) v = op(v, shfl_down(v, delta));
  return shfl_lane0(v);
}

/// Block-wide all-reduction (blockDim.x a multiple of 32, at most 1024); every
/// thread must call it. Warp results go through shared memory: barrier 1
/// makes them visible to warp 0, barrier 2 publishes warp 0's total in a slot
/// of its own. Two barriers suffice for back-to-back calls: a thread can only
/// write sh[] again after barrier 1 of the next call, which every thread
/// reaches only after reading the previous total.
template <typename V, typename Op>
__device__ V block_allreduce(V v, Op op) {
  __shared__ V sh[33];
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  v = warp_allreduce(v, op);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    V w = lane < warps ? sh[lane] : Op::identity();
    w = warp_allreduce(w, op);
    if (lane == 0) sh[32] = w;
  }
  __syncthreads();
  return sh[32];
}

// ---- row-to-thread mappings ----------------------------------------------------------------
/// Rows up to this length go one warp per row (at most 32 elements per lane
/// for fp32; the row stays in L1 between the passes); longer ones one block
/// per row.
inline constexpr int64_t kWarpRowMaxN = 1024;
/// Grid size cap: rows beyond it are covered by the grid-stride row loops.
inline constexpr int64_t kMaxGridBlocks = int64_t{1} << 20;

struct WarpRows {
  static constexpr int kThreads = 256;  ///< 8 rows per block
  __device__ static int64_t first_row() {
    return static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  }
  __device__ static int64_t row_stride() { return static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5); }
  __device__ static int rank() { return static_cast<int>(threadIdx.x) & 31; }
  __device__ static int size() { return 32; }
  template <typename V, typename Op>
  __device__ static V allreduce(V v, Op op) {
    return warp_allreduce(v, op);
  }
};

struct BlockRows {
  static constexpr int kThreads = 512;
  __device__ static int64_t first_row() { return static_cast<int64_t>(blockIdx.x); }
  __device__ static int64_t row_stride() { return static_cast<int64_t>(gridDim.x); }
  __device__ static int rank() { return static_cast<int>(threadIdx.x); }
  __device__ static int size() { return static_cast<int>(blockDim.x); }
  template <typename V, typename Op>
  __device__ static V allreduce(V v, Op op) {
    return block_allreduce(v, op);
  }
};

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Grid for `want` blocks of work (at least 1, at most kMaxGridBlocks).
inline dim3 grid_for(int64_t want) {
  const int64_t g = want < 1 ? 1 : (want > kMaxGridBlocks ? kMaxGridBlocks : want);
  return dim3(static_cast<unsigned>(g));
}

/// Calls launch(Group{}, grid, block) with the row mapping suited to rows of n.
template <typename F>
void launch_rows(int64_t rows, int64_t n, F&& launch) {
  if (n <= kWarpRowMaxN) {
    launch(WarpRows{}, grid_for(ceil_div(rows, WarpRows::kThreads / 32)), dim3(WarpRows::kThreads));
  } else {
    launch(BlockRows{}, grid_for(rows), dim3(BlockRows::kThreads));
  }
}

// ---- runtime dtype dispatch -------------------------------------------------------------------
template <typename T>
struct TypeTag {
  using type = T;
};

inline bool valid_dt(Dt dt) {
  return dt == Dt::kF32 || dt == Dt::kF16 || dt == Dt::kBF16;
}

/// f(TypeTag<T>{}) for the storage type of dt; cudaErrorInvalidValue for an
/// unknown dt. Use: dispatch_dt(dt, [&](auto tag) { using T = typename decltype(tag)::type; ... }).
template <typename F>
cudaError_t dispatch_dt(Dt dt, F&& f) {
  switch (dt) {
    case Dt::kF32:
      return f(TypeTag<float>{});
    case Dt::kF16:
      return f(TypeTag<__half>{});
    case Dt::kBF16:
      return f(TypeTag<__nv_bfloat16>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace assay::kernels::rowwise::detail
