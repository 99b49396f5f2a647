// Embedding lookup (gather) and its backward (scatter-add). 256-thread blocks of kCols x (256 /
// kCols) threads: kCols (32..256, the power of two nearest above dim) threads walk one row's dim
// columns, the block's other thread rows take other indices; grid-stride over the `count` indices.
//   embedding_fwd  out[r][:] = table[idx[r]][:], zeros for an index outside [0, vocab).
//   embedding_bwd  dtable[idx[r]][:] += dout[r][:] with fp32 atomicAdd (duplicate indices sum in an
//                  unspecified order, so results may differ in the last bits between runs);
//                  indices outside [0, vocab) are skipped.
#include <cstdint>

#include "kernels/rowwise/common.cuh"
#include "kernels/rowwise/rowwise.h"

namespace assay::kernels::rowwise {
namespace {

using namespace detail;  // NOLINT(build/namespaces): the private helpers of this op family

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    embedding_fwd_kernel(const int32_t* __restrict__ idx, int64_t count, const T* __restrict__ table, int64_t ldt,
                         int64_t vocab, int64_t dim, T* __restrict__ out, int64_t ldo) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < count; r += stride) {
    const int64_t v = idx[r];
    const bool in_range = v >= 0 && v < vocab;
    T* dst = out + r * ldo;
    if (in_range) {
      const T* src = table + v * ldt;
      for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = src[j];
    } else {
      // Declared behaviour for a bad index: a zero row, and no read of the table.
      for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = from_float<T>(0.0f);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    embedding_bwd_kernel(const int32_t* __restrict__ idx, int64_t count, const T* __restrict__ dout, int64_t lddo,
                         float* __restrict__ dtable, int64_t lddt, int64_t vocab, int64_t dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < count; r += stride) {
    const int64_t v = idx[r];
    if (v < 0 || v >= vocab) continue;
    const T* src = dout + r * lddo;
    float* dst = dtable + v * lddt;
    // Atomics: two indices r, r' may name the same table row and run concurrently.
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) atomicAdd(dst + j, to_float(src[j]));
  }
}

/// kCols x (kThreads / kCols) threads with kCols the power of two >= dim, clamped to [32, kThreads]:
/// short rows still fill the block with several indices, and no warp straddles two rows.
dim3 embedding_block(int64_t dim) {
  int cols = 32;
  while (cols < kThreads && cols < dim) cols *= 2;
  return dim3(static_cast<unsigned>(cols), static_cast<unsigned>(kThreads / cols));
}

}  // namespace

cudaError_t embedding_fwd(Dt dt, const int32_t* idx, int64_t count, const void* table, int64_t ldt, int64_t vocab,
                          int64_t dim, void* out, int64_t ldo, cudaStream_t s) {
  if (!valid_dt(dt) || count < 0 || vocab < 0 || dim < 0) return cudaErrorInvalidValue;
  if (count == 0 || dim == 0) return cudaSuccess;
  if (idx == nullptr || out == nullptr || ldo < dim) return cudaErrorInvalidValue;
  if (vocab > 0 && (table == nullptr || ldt < dim)) return cudaErrorInvalidValue;
  const dim3 block = embedding_block(dim);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    embedding_fwd_kernel<T><<<grid_for(ceil_div(count, block.y)), block, 0, s>>>(
        idx, count, static_cast<const T*>(table), ldt, vocab, dim, static_cast<T*>(out), ldo);
    return cudaGetLastError();
  });
}

cudaError_t embedding_bwd(Dt dt, const int32_t* idx, int64_t count, const void* dout, int64_t lddo, float* dtable,
                          int64_t lddt, int64_t vocab, int64_t dim, cudaStream_t s) {
  if (!valid_dt(dt) || count < 0 || vocab < 0 || dim < 0) return cudaErrorInvalidValue;
  if (count == 0 || dim == 0 || vocab == 0) return cudaSuccess;  // vocab == 0: every index is out of range
  if (idx == nullptr || dout == nullptr || dtable == nullptr || lddo < dim || lddt < dim) return cudaErrorInvalidValue;
  const dim3 block = embedding_block(dim);
  return dispatch_dt(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    embedding_bwd_kernel<T><<<grid_for(ceil_div(count, block.y)), block, 0, s>>>(
        idx, count, static_cast<const T*>(dout), lddo, dtable, lddt, vocab, dim);
    return cudaGetLastError();
  });
}

}  // namespace assay::kernels::rowwise
