// Helpers the row-wise and elementwise specs share: the dtypes their kernels
// take, the mapping to the kernels' Dt, editing host images element by
// element, the metamorphic shift, the rounding of an fp16/bf16 store, and when
// a row-wise op takes its device reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/bounds.h"
#include "harness/op.h"
#include "harness/values.h"
#include "kernels/rowwise/rowwise.h"
#include "references/device/input_rows.h"

namespace assay::rowwise {

inline kernels::rowwise::Dt to_dt(DType t) {
  switch (t) {
    case DType::kF16:
      return kernels::rowwise::Dt::kF16;
    case DType::kBF16:
      return kernels::rowwise::Dt::kBF16;
    default:
      return kernels::rowwise::Dt::kF32;
  }
}

/// Row-wise ops (softmax, softmax_bwd, cross_entropy, layernorm, rmsnorm) take their fp64 device
/// reference from this many elements, rows x n: inputs drawn on the device, the reference and
/// its ceiling beside them, a block per row. The host path costs drawing and uploading every
/// element and its reference per element (softmax: three exponentials); the device path a fixed
/// few launches. Just above it (1,024 to 2,048 elements) softmax's device path took 0.14 ms a
/// case on one lane of an H200 against the host path's 0.31 (docs/results.md); each op's
/// *DeviceRefGpu.EngineTimesBothPathsNearTheThreshold prints both, to check that choice for it
/// on the machine at hand.
inline constexpr int64_t kRowwiseDeviceRefElems = 1024;

/// The row-wise device path: a dtype the device reference reads and enough elements.
inline bool rowwise_device_when(const Params& p) {
  return device_ref::input_rows_support(p.dt("dtype")) && p.i("rows") * p.i("n") >= kRowwiseDeviceRefElems;
}

/// The activation dtypes these kernels take.
inline const std::vector<DType>& activation_dtypes() {
  static const std::vector<DType> v = {DType::kF32, DType::kF16, DType::kBF16};
  return v;
}

/// Writes value `x` (rounded to `t`) at element i of an image.
inline void poke(DType t, unsigned char* image, int64_t i, double x) {
  store_as(t, x, image + static_cast<size_t>(i) * dtype_size(t));
}
inline double peek(DType t, const unsigned char* image, int64_t i) {
  return load_as_double(t, image + static_cast<size_t>(i) * dtype_size(t));
}

/// Adds params.shift to every element of tensor `t`'s view in the host images, rounding into
/// its dtype (the metamorphic "shift" relation's transform).
inline void shift_tensor(const Case& c, std::vector<unsigned char*>& img, int t) {
  const auto& d = c.tensors[static_cast<size_t>(t)].desc;
  const View2D v = view_of(d);
  const double s = Params(c.params).r("shift", 0);
  unsigned char* image = img[static_cast<size_t>(t)];
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t j = 0; j < v.cols; ++j) {
      const int64_t e = d.offset + r * v.ld + j;
      poke(d.dtype, image, e, peek(d.dtype, image, e) + s);
    }
}

/// Output rounding of a value computed in fp32 and stored in `out`: half an ulp of `out` at |y| (0 for fp32 outputs
/// beyond the fp32 computation's own budget, which callers add).
inline double store_rounding(double y_abs, DType out) {
  return out == DType::kF32 ? 0.0 : 0.5 * ulp_of(y_abs, out);
}

}  // namespace assay::rowwise
