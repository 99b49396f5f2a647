// Kernels behind harness/gpu/materialize_device.h: plain structs, so that
// nvcc (C++17) never sees the harness's C++20 headers.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "harness/dtype_encode.h"
#include "harness/value_core.h"

namespace assay::gpu::detail {

inline constexpr int kMaxRank = 8;

/// The element formats the device draws: fp32, and fp16 / bf16 / e4m3 / e5m2 / int8 (rounded
/// from the fp32 value with harness/dtype_encode.h, as store_as does on the host).
enum class DevElem : int32_t { kF32, kF16, kBF16, kE4M3, kE5M2, kI8, kI32 };  // kI32: output poison only

/// The recipe, in the plain form the shared generator arithmetic takes.
using DevRecipe = value_core::Recipe;

/// The bits store_as writes for the float f of a value (the host's materialize()): the narrow
/// formats round it (Overflow::kIeee).
ASSAY_HD inline uint32_t stored_bits(DevElem elem, float f) {
  switch (elem) {
    case DevElem::kF32:
      return encode::float_bits(f);
    case DevElem::kF16:
      return encode::f32_to_f16(f);
    case DevElem::kBF16:
      return encode::f32_to_bf16(f);
    case DevElem::kE4M3:
      return encode::f32_to_e4m3(f, Overflow::kIeee);
    case DevElem::kE5M2:
      return encode::f32_to_e5m2(f, Overflow::kIeee);
    case DevElem::kI8:
      return static_cast<uint8_t>(encode::f32_to_i8(f));
    default:  // int32: outputs only, materialize_device turns int32 values away
      return 0;
  }
}

/// The bits of element `i` of a normal draw where value_core::normal_approx settles them: every
/// double within its err stores the same bits. Each step from a double to the stored bits (round
/// to fp32, then to the narrow format, saturating or overflowing) is monotone, so base_value's
/// double, inside that interval, stores them too. Elsewhere (about 1 fp32 element in 6,000, no
/// element of 2^18 in each narrower format: ValuesApprox, which runs this same function on the
/// host) the caller evaluates base_value.
ASSAY_HD inline bool normal_bits(const value_core::Recipe& r, uint64_t stream, uint64_t i, DevElem elem,
                                 uint32_t& bits) {
  const value_core::Approx a = value_core::normal_approx(r, stream, i);
  const double lo = a.x - a.err, hi = a.x + a.err;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return false;
  // Mostly one fp32 value: then one encoding serves both ends. The casts round to nearest on
  // both sides (cvt.rn.f32.f64 on the device).
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  bits = stored_bits(elem, flo);
  return encode::float_bits(flo) == encode::float_bits(fhi) || bits == stored_bits(elem, fhi);
}

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

/// `n` units of `width` bytes (1, 2 or 4; `dst` aligned to it) set to the low bytes of `pattern`.
struct FillJob {
  void* dst = nullptr;
  int64_t n = 0;
  uint32_t pattern = 0;
  int32_t width = 4;
};

/// A tensor's covered elements: the recipe's values (`values`), or else the output poison.
struct DrawJob {
  void* dst = nullptr;
  DevView v;
  DevRecipe r;
  uint64_t stream_id = 0;
  int32_t values = 0;
};

/// Jobs that one launch runs, a block row (blockIdx.y) per job. They go by value as the
/// kernel's parameter, which must stay within 4 KB.
inline constexpr int kMaxFillJobs = 48;
inline constexpr int kMaxDrawJobs = 11;
struct FillBatch {
  int32_t count = 0;
  FillJob job[kMaxFillJobs];
};
struct DrawBatch {
  int32_t count = 0;
  DrawJob job[kMaxDrawJobs];
};
static_assert(sizeof(FillBatch) <= 4000 && sizeof(DrawBatch) <= 4000, "a kernel's parameters stay within 4 KB");

/// A span of the working arena reset from the snapshot (src set) or to a 16-byte pattern; dst,
/// src and the span 16-byte aligned (Lane::restore).
struct RestoreJob {
  void* dst = nullptr;
  const void* src = nullptr;
  int64_t n16 = 0;  ///< 16-byte units
  uint32_t pattern[4] = {0, 0, 0, 0};
};
inline constexpr int kMaxRestoreJobs = 64;
struct RestoreBatch {
  int32_t count = 0;
  RestoreJob job[kMaxRestoreJobs];
};
static_assert(sizeof(RestoreBatch) <= 4000, "a kernel's parameters stay within 4 KB");

/// One launch each (none when the batch is empty); the launch's error.
cudaError_t launch_restore(const RestoreBatch& b, cudaStream_t stream);
cudaError_t launch_fills(const FillBatch& b, cudaStream_t stream);
cudaError_t launch_draws(const DrawBatch& b, cudaStream_t stream);

}  // namespace assay::gpu::detail
