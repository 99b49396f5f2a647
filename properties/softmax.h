// Binding of softmax-shaped kernels (kernels/rowwise/rowwise.h signatures) to
// the softmax and softmax_bwd ops: tensors X, Y (forward) and Y, dY, dX
// (backward), each [rows, n] with its own row stride.
#pragma once

#include "harness/op.h"
#include "properties/rowwise_values.h"

namespace assay::rowwise {

/// fn(dt, x, ldx, y, ldy, rows, n, log, stream)
template <typename Fn>
Launch softmax_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[0].v.rows, t[0].v.cols, p.b("log"), s);
  };
}
/// fn(dt, y, ldy, dy, lddy, dx, lddx, rows, n, log, stream)
template <typename Fn>
Launch softmax_bwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr, t[2].v.ld, t[0].v.rows,
              t[0].v.cols, p.b("log"), s);
  };
}

}  // namespace assay::rowwise
