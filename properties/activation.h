// Binding of activation kernels (kernels/rowwise/rowwise.h signatures) to the
// activation and activation_bwd ops: tensors X, Y (forward) and X, dY, dX
// (backward), each [count] contiguous from its own offset. Also the per-element
// reference and ceiling under a variant's declared arithmetic, which the spec,
// the exhaustive sweep (assay exhaustive) and the CPU tests share.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "harness/exhaustive.h"
#include "harness/op.h"
#include "kernels/rowwise/rowwise.h"
#include "properties/rowwise_values.h"

namespace assay::rowwise {

using kernels::rowwise::Act;

/// "gelu_erf", "gelu_tanh", "silu" (the case param "act"); nullopt for any other name.
std::optional<Act> parse_act(std::string_view name);
std::string_view act_name(Act a);

/// fn(dt, act, x, y, count, stream)
template <typename Fn>
Launch activation_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), parse_act(p.s("act")).value_or(Act::kGeluErf), t[0].ptr, t[1].ptr, t[0].v.cols, s);
  };
}
/// fn(dt, act, x, dy, dx, count, stream)
template <typename Fn>
Launch activation_bwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return fn(to_dt(t[0].dtype), parse_act(p.s("act")).value_or(Act::kGeluErf), t[0].ptr, t[1].ptr, t[2].ptr,
              t[0].v.cols, s);
  };
}

/// Reference (fp64, references/host/backward.h) and absolute tolerance (the spec's hard ceiling,
/// derived in properties/activation.cpp) of one element computed in fp32 under the arithmetic `a`
/// (IEEE, or fast-math intrinsics and flush-to-zero) and stored in `out` (fp32, fp16, bf16).
/// tol = 0 where the reference is NaN or +-Inf (pattern check only).
struct ActivationPoint {
  double ref = 0;
  double tol = 0;
};
ActivationPoint activation_fwd_point(Act act, DType out, double x, const Arithmetic& a = {});
/// dx = dy act'(x).
ActivationPoint activation_bwd_point(Act act, DType out, double x, double dy, const Arithmetic& a = {});

/// The documented worst relative error of __tanhf (tanh.approx.f32), vs the exact value.
double fast_tanh_rel();

/// All 2^16 inputs of `dt` (fp16 or bf16) through the registered `variant` (its launcher and
/// declared arithmetic, found with find_variant) in one launch, on `device`, against
/// activation_*_point (backward: dy = 1). Not found: no such variant; invalid: the sweep's
/// case is outside the variant's contract.
StatusOr<ExhaustiveReport> activation_exhaustive(const std::string& variant, Act act, DType dt, bool backward,
                                                 int device);

}  // namespace assay::rowwise
