// MUTANT of kernels/rowwise/embedding.cu -- a planted bug, not a kernel to use.
//   embedding_bwd_overwrite  dtable[idx[r]][j] = dout[r][j], a plain store where the real kernel
//                            atomically adds: "each row of dtable is written once" only holds
//                            for distinct indices into a zeroed dtable. Duplicate indices keep
//                            one (unspecified) contribution instead of their sum, and whatever
//                            dtable held before the call is lost instead of accumulated into.
//                            Caught by the bound on cases with repeated indices or a nonzero
//                            prefill of dtable; invisible with distinct indices and a zero
//                            prefill.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "tests/mutants/rowwise/mutants.h"

namespace assay::mutants::rowwise {
namespace {

using namespace kernels::rowwise::detail;  // NOLINT(build/namespaces)

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    overwrite_kernel(const int32_t* __restrict__ idx, int64_t count, const T* __restrict__ dout, int64_t lddo,
                     float* __restrict__ dtable, int64_t lddt, int64_t vocab, int64_t dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < count; r += stride) {
    const int64_t v = idx[r];
    if (v < 0 || v >= vocab) continue;
    const T* src = dout + r * lddo;
    float* dst = dtable + v * lddt;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = to_float(src[j]);  // BUG: atomicAdd(dst + j, ...)
  }
}

dim3 embedding_block(int64_t dim) {
  int cols = 32;
  while (cols < kThreads && cols < dim) cols *= 2;
  return dim3(static_cast<unsigned>(cols), static_cast<unsigned>(kThreads / cols));
}

// embedding_fwd_off_by_one: the range check accepts v == vocab (`v > vocab` where `v >= vocab`
// was meant), so an index equal to vocab copies the row just past the table -- the guard band or
// whatever the allocator put there -- where the declared behaviour is a row of zeros. Caught by
// the bound / NaN-Inf pattern against the zero reference rows (the generator places index ==
// vocab), invisible while every index is in range.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    off_by_one_kernel(const int32_t* __restrict__ idx, int64_t count, const T* __restrict__ table, int64_t ldt,
                      int64_t vocab, int64_t dim, T* __restrict__ out, int64_t ldo) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < count; r += stride) {
    const int64_t v = idx[r];
    const bool in_range = v >= 0 && v <= vocab;  // BUG: <= vocab
    T* dst = out + r * ldo;
    if (in_range) {
      const T* src = table + v * ldt;
      for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = src[j];
    } else {
      for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = from_float<T>(0.0f);
    }
  }
}

}  // namespace

cudaError_t embedding_fwd_off_by_one(Dt dt, const int32_t* idx, int64_t count, const void* table, int64_t ldt,
                                     int64_t vocab, int64_t dim, void* out, int64_t ldo, cudaStream_t s) {
  if (!valid_dt(dt) || count < 0 || vocab < 0 || dim < 0) return cudaErrorInvalidValue;
  if (count == 0 || dim == 0) return cudaSuccess;
  if (idx == nullptr || out == nullptr || ldo < dim) return cudaErrorInvalidValue;
  if (vocab > 0 && (table == nullptr || ldt < dim)) return cudaErrorInvalidValue;
  const dim3 block = embedding_block(dim);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    off_by_one_kernel<T><<<grid_for(ceil_div(count, block.y)), block, 0, s>>>(
        idx, count, static_cast<const T*>(table), ldt, vocab, dim, static_cast<T*>(out), ldo);
    return cudaGetLastError();
  });
}

cudaError_t embedding_bwd_overwrite(Dt dt, const int32_t* idx, int64_t count, const void* dout, int64_t lddo,
                                    float* dtable, int64_t lddt, int64_t vocab, int64_t dim, cudaStream_t s) {
  if (!valid_dt(dt) || count < 0 || vocab < 0 || dim < 0) return cudaErrorInvalidValue;
  if (count == 0 || dim == 0 || vocab == 0) return cudaSuccess;
  if (idx == nullptr || dout == nullptr || dtable == nullptr || lddo < dim || lddt < dim) return cudaErrorInvalidValue;
  const dim3 block = embedding_block(dim);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    overwrite_kernel<T><<<grid_for(ceil_div(count, block.y)), block, 0, s>>>(idx, count, static_cast<const T*>(dout),
                                                                             lddo, dtable, lddt, vocab, dim);
    return cudaGetLastError();
  });
}

}  // namespace assay::mutants::rowwise
