// Kernels behind harness/gpu/materialize_device.h: plain structs, so that
// nvcc (C++17) never sees the harness's C++20 headers.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::gpu::detail {

inline constexpr int kMaxRank = 8;

/// A ValueRecipe's fields (harness/values.h), plus the fp32 constants the classes read.
struct DevRecipe {
  int32_t cls = 0;  ///< ValueClass as int (its numbering is part of the case format)
  uint64_t seed = 0;
  double scale = 1, mean = 0, spread = 0, pareto_alpha = 1.5, overflow_factor = 4;
  int64_t int_range = 2, exp_min = -8, exp_max = 8;
  uint8_t inject_kinds = 0, inject_at = 0;  ///< kSpecial* and kAt* bits
  double inject_rate = 0;
  int64_t inject_tile = 0;
  double max_finite = 0;       ///< max_finite(kF32)
  int sub_lo = 0, sub_bits = 0;  ///< ilogb(min_subnormal), ilogb(min_normal) - sub_lo
};

/// A strided view: logical row-major index -> offset + sum(idx[d] * strides[d]).
struct DevView {
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t offset = 0;
  int64_t numel = 0;
  uint64_t rows = 1, cols = 1;  ///< last two dims, each at least 1 (as the host Expander)
  bool has_rows = false;
};

/// `values`: the recipe's values at covered elements; else the output poison there.
cudaError_t launch_materialize(float* dst, const DevView& v, const DevRecipe& r, uint64_t stream_id, bool values,
                               cudaStream_t stream);
cudaError_t launch_fill_words(void* dst, uint32_t word, int64_t n_words, cudaStream_t stream);

}  // namespace assay::gpu::detail
