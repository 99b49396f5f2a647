// Binding of rotary-embedding kernels (kernels/rowwise/rowwise.h signature) to
// the rope op: tensors X, Y, each [tokens, heads, head_dim] (rows tokens*heads
// of head_dim, each tensor with its own row stride).
#pragma once

#include "harness/op.h"
#include "properties/rowwise_values.h"

namespace assay::rowwise {

/// fn(dt, x, ldx, y, ldy, tokens, heads, head_dim, base, interleaved, inverse, stream)
template <typename Fn>
Launch rope_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, p.i("tokens"), p.i("heads"),
              p.i("head_dim"), static_cast<float>(p.r("base", 10000)), p.b("interleaved"), p.b("inverse"), s);
  };
}

}  // namespace assay::rowwise
