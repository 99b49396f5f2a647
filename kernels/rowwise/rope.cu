// Rotary position embedding (forward and its inverse, the backward). One thread per rotated pair,
// grid-stride over tokens * heads * head_dim / 2 pairs; 256 threads per block. Consecutive threads
// take consecutive pairs of a row, so the half-split layout reads two contiguous runs and the
// interleaved one a contiguous run of (2i, 2i+1). Angles are computed per pair in fp32 from the
// position and the pair index (no table): inv_freq = powf(base, -2i / head_dim), theta =
// t * inv_freq, sincosf with full range reduction (theta reaches ~1e6 rad for long sequences).
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "kernels/rowwise/rowwise.h"

namespace assay::kernels::rowwise {
namespace {

using namespace detail;  // NOLINT(build/namespaces): the private helpers of this op family

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(const T* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy, int64_t rows, int64_t heads,
                int64_t head_dim, float base, bool interleaved, bool inverse) {
  const int64_t half = head_dim / 2;
  const int64_t pairs = rows * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += stride) {
    const int64_t r = p / half;
    const int64_t i = p - r * half;
    const int64_t t = r / heads;  // row r = t * heads + h holds token t at position t
    // The exponent -2i / head_dim rounded once (as torch.arange(0, d, 2).float() / d), then powf.
    const float inv_freq = powf(base, -static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const float theta = static_cast<float>(t) * inv_freq;
    float sn, cs;
    sincosf(theta, &sn, &cs);
    if (inverse) sn = -sn;  // R(-theta) = R(theta)^T: the backward of the rotation
    const int64_t ia = interleaved ? 2 * i : i;
    const int64_t ib = interleaved ? 2 * i + 1 : i + half;
    const float a = to_float(x[r * ldx + ia]);
    const float b = to_float(x[r * ldx + ib]);
    y[r * ldy + ia] = from_float<T>(a * cs - b * sn);
    y[r * ldy + ib] = from_float<T>(a * sn + b * cs);
  }
}

}  // namespace

cudaError_t rope(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t tokens, int64_t heads,
                 int64_t head_dim, float base, bool interleaved, bool inverse, cudaStream_t s) {
  if (!valid_dt(dt) || tokens < 0 || heads < 0 || head_dim < 0 || head_dim % 2 != 0) return cudaErrorInvalidValue;
  if (tokens == 0 || heads == 0 || head_dim == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || ldx < head_dim || ldy < head_dim) return cudaErrorInvalidValue;
  const int64_t rows = tokens * heads;
  const int64_t pairs = rows * (head_dim / 2);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rope_kernel<T><<<grid_for(ceil_div(pairs, kThreads)), kThreads, 0, s>>>(
        static_cast<const T*>(x), ldx, static_cast<T*>(y), ldy, rows, heads, head_dim, base, interleaved, inverse);
    return cudaGetLastError();
  });
}

}  // namespace assay::kernels::rowwise
