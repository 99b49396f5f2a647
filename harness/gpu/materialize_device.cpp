#include "harness/gpu/materialize_device.h"

#include <algorithm>
#include <cmath>

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

constexpr uint32_t kGapCanaryF32 = 0x7FC06A70u;  // write_gap_canary(kF32)

StatusOr<DevView> view_of(const TensorDesc& d) {
  if (!materialize_device_supports(d))
    return invalid_argument(fmt::format("device materialisation needs an fp32 tensor of rank 1..{} without overlap, "
                                        "got {} of rank {}",
                                        kMaxRank, dtype_name(d.dtype), d.rank()));
  DevView v;
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
  return v;
}

}  // namespace

bool materialize_device_supports(const TensorDesc& d) {
  return d.dtype == DType::kF32 && d.rank() >= 1 && d.rank() <= kMaxRank && !d.has_overlap();
}

Status fill_words_device(void* dst, uint32_t word, int64_t n_words, cudaStream_t stream) {
  CUDA_CHECK(detail::launch_fill_words(dst, word, n_words, stream));
  return ok_status();
}

Status materialize_device(const TensorDesc& desc, const ValueRecipe& recipe, uint64_t stream_id, void* dst,
                          cudaStream_t stream) {
  ASSAY_ASSIGN_OR_RETURN(DevView v, view_of(desc));
  ASSAY_RETURN_IF_ERROR(fill_words_device(dst, kGapCanaryF32, desc.extent(), stream));
  const DevRecipe r = core_recipe(recipe, DType::kF32);
  CUDA_CHECK(detail::launch_materialize(static_cast<float*>(dst), v, r, stream_id, true, stream));
  return ok_status();
}

Status materialize_output_device(const TensorDesc& desc, void* dst, cudaStream_t stream) {
  ASSAY_ASSIGN_OR_RETURN(DevView v, view_of(desc));
  ASSAY_RETURN_IF_ERROR(fill_words_device(dst, kGapCanaryF32, desc.extent(), stream));
  CUDA_CHECK(detail::launch_materialize(static_cast<float*>(dst), v, DevRecipe{}, 0, false, stream));
  return ok_status();
}

}  // namespace assay::gpu
