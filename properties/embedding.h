// Binding of embedding kernels (kernels/rowwise/rowwise.h signatures) to the
// embedding and embedding_bwd ops: tensors table [vocab, dim], idx [count]
// (int32), out [count, dim] (forward) and dout [count, dim], idx [count],
// dtable [vocab, dim] (fp32; backward), each with its own row stride.
#pragma once

#include <cstdint>

#include "harness/op.h"
#include "properties/rowwise_values.h"

namespace assay::rowwise {

/// fn(dt, idx, count, table, ldt, vocab, dim, out, ldo, stream)
template <typename Fn>
Launch embedding_launch(Fn fn) {
  return [fn](const Params&, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[1].as<const int32_t>(), t[1].v.cols, t[0].ptr, t[0].v.ld, t[0].v.rows, t[0].v.cols,
              t[2].ptr, t[2].v.ld, s);
  };
}
/// fn(dt, idx, count, dout, lddo, dtable, lddt, vocab, dim, stream)
template <typename Fn>
Launch embedding_bwd_launch(Fn fn) {
  return [fn](const Params&, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[1].as<const int32_t>(), t[1].v.cols, t[0].ptr, t[0].v.ld, t[2].as<float>(),
              t[2].v.ld, t[2].v.rows, t[2].v.cols, s);
  };
}

}  // namespace assay::rowwise
