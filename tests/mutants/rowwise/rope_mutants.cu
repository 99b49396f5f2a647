// MUTANT of kernels/rowwise/rope.cu -- a planted bug, not a kernel to use.
//   rope_wrong_pairing  The pair of index i is (i, i + head_dim/2) whatever `interleaved` says:
//                       the half-split (GPT-NeoX) pairing applied to an interleaved (GPT-J)
//                       layout. The angle of pair i is still theta_i, so every row is rotated,
//                       just in the wrong planes. Identical to the real kernel when
//                       interleaved is false, and at position t = 0 (theta = 0, the identity)
//                       whatever the layout; caught by the bound on interleaved cases with
//                       tokens >= 2.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "tests/mutants/rowwise/mutants.h"

namespace assay::mutants::rowwise {
namespace {

using namespace kernels::rowwise::detail;  // NOLINT(build/namespaces)

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    wrong_pairing_kernel(const T* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy, int64_t rows,
                         int64_t heads, int64_t head_dim, float base, bool interleaved, bool inverse) {
  (void)interleaved;  // the bug: read by the launcher, never by the pairing
  const int64_t half = head_dim / 2;
  const int64_t pairs = rows * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += stride) {
    const int64_t r = p / half;
    const int64_t i = p - r * half;
    const int64_t t = r / heads;
    const float inv_freq = powf(base, -static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const float theta = static_cast<float>(t) * inv_freq;
    float sn, cs;
    sincosf(theta, &sn, &cs);
    if (inverse) sn = -sn;
    const int64_t ia = i;         // BUG: should be interleaved ? 2 * i : i
    const int64_t ib = i + half;  // BUG: should be interleaved ? 2 * i + 1 : i + half
    const float a = to_float(x[r * ldx + ia]);
    const float b = to_float(x[r * ldx + ib]);
    y[r * ldy + ia] = from_float<T>(a * cs - b * sn);
    y[r * ldy + ib] = from_float<T>(a * sn + b * cs);
  }
}

}  // namespace

cudaError_t rope_wrong_pairing(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t tokens, int64_t heads,
                               int64_t head_dim, float base, bool interleaved, bool inverse, cudaStream_t s) {
  if (!valid_dt(dt) || tokens < 0 || heads < 0 || head_dim < 0 || head_dim % 2 != 0) return cudaErrorInvalidValue;
  if (tokens == 0 || heads == 0 || head_dim == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || ldx < head_dim || ldy < head_dim) return cudaErrorInvalidValue;
  const int64_t rows = tokens * heads;
  const int64_t pairs = rows * (head_dim / 2);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    wrong_pairing_kernel<T><<<grid_for(ceil_div(pairs, kThreads)), kThreads, 0, s>>>(
        static_cast<const T*>(x), ldx, static_cast<T*>(y), ldy, rows, heads, head_dim, base, interleaved, inverse);
    return cudaGetLastError();
  });
}

}  // namespace assay::mutants::rowwise
