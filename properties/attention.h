// The attention ops (properties/attention.cpp) as the tests and the mutants' registration see
// them: the problem of a case's params, the forward reference with its ceiling (for the CPU
// tests and the library comparisons), and the binding of kernels with the
// kernels/attention/attention.h launcher signatures. Tensors in OpDef order:
//   attention      Q, K, V, M, O, LSE
//   attention_bwd  Q, K, V, O, dO, LSE, M, dQ, dK, dV
// Q, O, dO, dQ are [B, Hkv, G, Sq, D] and K, V, dK, dV [B, Hkv, Sk, D] (H = Hkv G query heads,
// head h = g G + j reads kv head g), so their rows x cols views are the kernels' [B*H*Sq, D] and
// [B*Hkv*Sk, D] with the row stride ld; LSE is fp32 [B*H*Sq]; M is the fp32 [Sq, Sk] additive
// mask when params.mask holds, else a [1, 1] placeholder the kernel is not given.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/dtype.h"
#include "harness/op.h"
#include "kernels/attention/attention.h"
#include "properties/gradcheck_relation.h"
#include "references/device/attention_bwd_f64_phases.h"
#include "references/device/attention_f64_row.h"

namespace assay::attention {

using kernels::attention::AttnShape;
using kernels::attention::Dt;

/// An attention problem as the ops read it from a case (params B, Hkv, G, Sq, Sk, D, causal,
/// mask, scale, dtype). `scale` is the fp32 value the kernel receives, widened.
struct AttnDims {
  int64_t B = 1, H = 1, Hkv = 1, Sq = 1, Sk = 1, D = 64;
  bool causal = false, has_mask = false;
  double scale = 0.125;
  DType dt = DType::kF16;
  AttnShape shape() const;
};

/// The problem of a validated case's params.
AttnDims dims_of(const Params& p);

/// Forward reference (fp64, LSE statistics) and the hard ceiling of every element of O
/// (storage dtype) and LSE (fp32) for a flash kernel with `key_tile` keys per online-softmax
/// tile (its rescale count) under IEEE or fast-math arithmetic (properties/attention.cpp
/// derives it). q: [B*H*Sq, D], k, v: [B*Hkv*Sk, D], mask [Sq, Sk] or null (decoded values).
void attention_fwd_reference(const AttnDims& d, const HostTensor& q, const HostTensor& k, const HostTensor& v,
                             const HostTensor* mask, OutputRef& o, OutputRef& lse,
                             int64_t key_tile = kernels::attention::kFwdKeyTile, bool fast_math = false);

/// The forward's device problem (references/device/attention_f64.h) of a case under a variant's
/// declared arithmetic `a` (its key tile, exp, narrow P).
device_ref::AttentionF64Problem attention_fwd_problem(const AttnDims& d, const Arithmetic& a);

/// The backward's device problem (references/device/attention_bwd_f64.h) of a case, under IEEE
/// or fast-math exp.
device_ref::AttentionBwdF64Problem attention_bwd_problem(const AttnDims& d, bool fast_math);

/// attention_bwd's gradcheck relation on the host: the problem of a case whose inputs `in`
/// (prepared), kernel gradients `out` (dQ, dK, dV) and references `refs` the caller keeps alive.
GradProblem grad_problem_bwd(const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                             const std::vector<OutputRef>& refs);

/// attention_bwd's gradcheck relation on the device path: the six sums, from what the device
/// reference left in its scratch (ctx) and the kernel's gradients (in.outputs); zero sums for a
/// case without the relation.
Status device_gradcheck_sums_bwd(const Case& c, const DevicePropertiesIn& in, const DeviceContext& ctx,
                                 GradSums& sums);

inline Dt to_attn_dt(DType t) {
  return t == DType::kF16 ? Dt::kF16 : t == DType::kBF16 ? Dt::kBF16 : Dt::kF32;
}

/// fn(dt, shape, q, ldq, k, ldk, v, ldv, mask, ldm, o, ldo, lse, stream) (flash_fwd's signature).
template <typename Fn>
Launch attention_fwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    const AttnDims d = dims_of(p);
    const DevTensor* m = d.has_mask ? &t[3] : nullptr;
    return fn(to_attn_dt(d.dt), d.shape(), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr, t[2].v.ld,
              m != nullptr ? m->as<float>() : nullptr, m != nullptr ? m->v.ld : 0, t[4].ptr, t[4].v.ld,
              t[5].as<float>(), s);
  };
}

/// fn(dt, shape, q, ldq, k, ldk, v, ldv, o, ldo, dout, lddo, lse, mask, ldm, dq, lddq, dk, lddk, dv,
/// lddv, stream) (flash_bwd's signature).
template <typename Fn>
Launch attention_bwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    const AttnDims d = dims_of(p);
    const DevTensor* m = d.has_mask ? &t[6] : nullptr;
    return fn(to_attn_dt(d.dt), d.shape(), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr, t[2].v.ld, t[3].ptr,
              t[3].v.ld, t[4].ptr, t[4].v.ld, t[5].as<float>(), m != nullptr ? m->as<float>() : nullptr,
              m != nullptr ? m->v.ld : 0, t[7].ptr, t[7].v.ld, t[8].ptr, t[8].v.ld, t[9].ptr, t[9].v.ld, s);
  };
}

}  // namespace assay::attention
