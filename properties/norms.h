// Binding of LayerNorm / RMSNorm kernels (kernels/rowwise/rowwise.h signatures)
// to the layernorm, layernorm_bwd, rmsnorm and rmsnorm_bwd ops, in the ops'
// tensor order (properties/norms.cpp). Saved statistics and parameter
// gradients are fp32 vectors; beta and dbeta are [bias, n] (no bias: empty,
// passed as a null pointer).
#pragma once

#include "harness/op.h"
#include "properties/rowwise_values.h"

namespace assay::rowwise {

/// Tensors X, gamma, beta, Y, mean, rstd.
/// fn(dt, x, ldx, gamma, beta, y, ldy, mean, rstd, rows, n, eps, stream)
template <typename Fn>
Launch layernorm_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, p.i("bias") != 0 ? t[2].ptr : nullptr, t[3].ptr,
              t[3].v.ld, t[4].as<float>(), t[5].as<float>(), t[0].v.rows, t[0].v.cols,
              static_cast<float>(p.r("eps", 1e-5)), s);
  };
}

/// Tensors X, dY, gamma, mean, rstd, dX, dgamma, dbeta.
/// fn(dt, x, ldx, dy, lddy, gamma, mean, rstd, dx, lddx, dgamma, dbeta, rows, n, stream)
template <typename Fn>
Launch layernorm_bwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr, t[3].as<const float>(),
              t[4].as<const float>(), t[5].ptr, t[5].v.ld, t[6].as<float>(),
              p.i("bias") != 0 ? t[7].as<float>() : nullptr, t[0].v.rows, t[0].v.cols, s);
  };
}

/// Tensors X, gamma, Y, rstd.
/// fn(dt, x, ldx, gamma, y, ldy, rstd, rows, n, eps, stream)
template <typename Fn>
Launch rmsnorm_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[2].ptr, t[2].v.ld, t[3].as<float>(), t[0].v.rows,
              t[0].v.cols, static_cast<float>(p.r("eps", 1e-5)), s);
  };
}

/// Tensors X, dY, gamma, rstd, dX, dgamma.
/// fn(dt, x, ldx, dy, lddy, gamma, rstd, dx, lddx, dgamma, rows, n, stream)
template <typename Fn>
Launch rmsnorm_bwd_launch(Fn fn) {
  return [fn](const Params&, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr, t[3].as<const float>(), t[4].ptr,
              t[4].v.ld, t[5].as<float>(), t[0].v.rows, t[0].v.cols, s);
  };
}

}  // namespace assay::rowwise
