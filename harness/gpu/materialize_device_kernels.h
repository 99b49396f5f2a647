// Kernels behind harness/gpu/materialize_device.h: plain structs, so that
// nvcc (C++17) never sees the harness's C++20 headers.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/value_core.h"

namespace assay::gpu::detail {

inline constexpr int kMaxRank = 8;

/// The element formats the device draws: fp32, and fp16 / bf16 / e4m3 / e5m2 / int8 (rounded
/// from the fp32 value with harness/dtype_encode.h, as store_as does on the host).
enum class DevElem : int32_t { kF32, kF16, kBF16, kE4M3, kE5M2, kI8, kI32 };  // kI32: output poison only

/// The recipe, in the plain form the shared generator arithmetic takes.
using DevRecipe = value_core::Recipe;

/// A strided view: logical row-major index -> offset + sum(idx[d] * strides[d]).
struct DevView {
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t offset = 0;
  int64_t numel = 0;
  uint64_t rows = 1, cols = 1;  ///< last two dims, each at least 1 (as the host Expander)
  bool has_rows = false;
  /// > 0 where the view is rows of `cols` unit-stride elements this far apart (every dim but
  /// the last folds into one row index): element i at offset + (i / cols) * row_stride + i % cols.
  int64_t row_stride = 0;
  DevElem elem = DevElem::kF32;
};

/// `values`: the recipe's values at covered elements; else the output poison there.
cudaError_t launch_materialize(void* dst, const DevView& v, const DevRecipe& r, uint64_t stream_id, bool values,
                               cudaStream_t stream);
cudaError_t launch_fill_words(void* dst, uint32_t word, int64_t n_words, cudaStream_t stream);
/// `n` consecutive 16-bit units at `dst` (2-byte aligned) set to `half`.
cudaError_t launch_fill_halves(void* dst, uint16_t half, int64_t n, cudaStream_t stream);
/// `n` bytes at `dst` set to `byte`.
cudaError_t launch_fill_bytes(void* dst, uint8_t byte, int64_t n, cudaStream_t stream);

}  // namespace assay::gpu::detail
