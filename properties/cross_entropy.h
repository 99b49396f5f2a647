// Binding of fused cross-entropy kernels (kernels/rowwise/rowwise.h
// cross_entropy_fwd_bwd's signature) to the cross_entropy op: tensors logits
// [rows, n], target [rows] (int32), loss [rows] (fp32), dlogits [rows, n].
#pragma once

#include <cstdint>

#include "harness/op.h"
#include "properties/rowwise_values.h"

namespace assay::rowwise {

/// fn(dt, logits, ldx, target, rows, n, ignore_index, smoothing, loss, dlogits, lddx, stream)
template <typename Fn>
Launch cross_entropy_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].as<const int32_t>(), t[0].v.rows, t[0].v.cols,
              p.i("ignore_index", -100), static_cast<float>(p.r("smoothing", 0)), t[2].as<float>(), t[3].ptr,
              t[3].v.ld, s);
  };
}

}  // namespace assay::rowwise
