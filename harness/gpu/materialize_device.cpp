#include "harness/gpu/materialize_device.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "harness/dtype.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/materialize_device_kernels.h"
#include "harness/value_core_recipe.h"

namespace assay::gpu {
namespace {

using detail::DevRecipe;
using detail::DevView;
using detail::kMaxRank;

using detail::DevElem;

/// The gap canary of `t` (write_gap_canary) as a fill of `extent` elements.
Status fill_gap_canary(DeviceDraw& draw, DType t, void* dst, int64_t extent) {
  unsigned char canary[4] = {};
  write_gap_canary(t, canary);
  const int width = static_cast<int>(dtype_size(t));
  uint32_t pattern = 0;
  std::memcpy(&pattern, canary, static_cast<size_t>(width));  // little-endian: the low bytes
  return draw.fill(dst, width, pattern, extent);
}

/// The device's element format for `t`; nullopt: the device does not draw it.
std::optional<DevElem> elem_of(DType t) {
  switch (t) {
    case DType::kF32:
      return DevElem::kF32;
    case DType::kF16:
      return DevElem::kF16;
    case DType::kBF16:
      return DevElem::kBF16;
    case DType::kE4M3:
      return DevElem::kE4M3;
    case DType::kE5M2:
      return DevElem::kE5M2;
    case DType::kI8:
      return DevElem::kI8;
    case DType::kI32:
      return DevElem::kI32;
    default:
      return std::nullopt;
  }
}

/// The layout of `d` for the kernels; `output`: its poison only, which int32 has too (the value
/// generator has no int32 encoder: int32 inputs stay on the host).
StatusOr<DevView> view_of(const TensorDesc& d, bool output) {
  if (!(output ? materialize_output_device_supports(d) : materialize_device_supports(d)))
    return invalid_argument(fmt::format(
        "device materialisation needs an fp32, fp16, bf16, e4m3, e5m2 or int8 tensor (int32 too as an output) "
        "of rank 1..{} without overlap, got {} of rank {}",
        kMaxRank, dtype_name(d.dtype), d.rank()));
  DevView v;
  v.elem = *elem_of(d.dtype);
  v.rank = static_cast<int32_t>(d.rank());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = d.shape[i];
    v.strides[i] = d.strides[i];
  }
  v.offset = d.offset;
  v.numel = d.numel();
  // As the host Expander: the last two dims give rows and columns.
  v.cols = static_cast<uint64_t>(std::max<int64_t>(d.shape[v.rank - 1], 1));
  v.rows = v.rank >= 2 ? static_cast<uint64_t>(std::max<int64_t>(d.shape[v.rank - 2], 1)) : 1;
  v.has_rows = v.rank >= 2;
  bool folds = d.strides[static_cast<size_t>(v.rank - 1)] == 1;
  for (int i = 0; folds && i + 2 < v.rank; ++i) folds = d.strides[i] == d.strides[i + 1] * d.shape[i + 1];
  if (folds) v.row_stride = v.rank >= 2 ? d.strides[static_cast<size_t>(v.rank - 2)] : d.shape[0];
  return v;
}

}  // namespace

bool materialize_output_device_supports(const TensorDesc& d) {
  return elem_of(d.dtype).has_value() && d.rank() >= 1 && d.rank() <= kMaxRank && !d.has_overlap();
}

bool materialize_device_supports(const TensorDesc& d) {
  return d.dtype != DType::kI32 && materialize_output_device_supports(d);
}

Status DeviceDraw::fill(void* dst, int width, uint32_t pattern, int64_t n) {
  if (n <= 0) return ok_status();
  if (width != 1 && width != 2 && width != 4) return invalid_argument(fmt::format("fill of {}-byte units", width));
  if (fills_.count == detail::kMaxFillJobs) ASSAY_RETURN_IF_ERROR(launch_fills());
  fills_.job[fills_.count++] = {dst, n, pattern, width};
  return ok_status();
}

Status DeviceDraw::values(const TensorDesc& desc, const ValueRecipe& recipe, uint64_t stream_id, void* dst) {
  ASSAY_ASSIGN_OR_RETURN(DevView v, view_of(desc, false));
  // A view that covers its whole allocation has no gap to fill (its indices are distinct).
  if (desc.offset != 0 || desc.extent() != desc.numel())
    ASSAY_RETURN_IF_ERROR(fill_gap_canary(*this, desc.dtype, dst, desc.extent()));
  // The dtype's constants (near-overflow's max, the subnormal range), as the host Expander.
  return queue({dst, v, core_recipe(recipe, desc.dtype), stream_id, 1});
}

Status DeviceDraw::poison(const TensorDesc& desc, void* dst) {
  ASSAY_ASSIGN_OR_RETURN(DevView v, view_of(desc, true));
  ASSAY_RETURN_IF_ERROR(fill_gap_canary(*this, desc.dtype, dst, desc.extent()));
  return queue({dst, v, DevRecipe{}, 0, 0});
}

Status DeviceDraw::queue(const detail::DrawJob& job) {
  if (job.v.numel <= 0) return ok_status();
  if (draws_.count == detail::kMaxDrawJobs) ASSAY_RETURN_IF_ERROR(launch());
  draws_.job[draws_.count++] = job;
  return ok_status();
}

Status DeviceDraw::launch_fills() {
  CUDA_CHECK(detail::launch_fills(fills_, stream_));
  fills_.count = 0;
  return ok_status();
}

// The fills first: a tensor's gap canary covers its whole allocation, and its draw then
// overwrites the covered elements.
Status DeviceDraw::launch() {
  ASSAY_RETURN_IF_ERROR(launch_fills());
  CUDA_CHECK(detail::launch_draws(draws_, stream_));
  draws_.count = 0;
  return ok_status();
}

Status materialize_device(const TensorDesc& desc, const ValueRecipe& recipe, uint64_t stream_id, void* dst,
                          cudaStream_t stream) {
  DeviceDraw draw(stream);
  ASSAY_RETURN_IF_ERROR(draw.values(desc, recipe, stream_id, dst));
  return draw.launch();
}

Status materialize_output_device(const TensorDesc& desc, void* dst, cudaStream_t stream) {
  DeviceDraw draw(stream);
  ASSAY_RETURN_IF_ERROR(draw.poison(desc, dst));
  return draw.launch();
}

}  // namespace assay::gpu
