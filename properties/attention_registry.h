// Registration of attention variants (the kernels of kernels/attention and the
// planted bugs of tests/mutants/attention): each takes a launcher with the
// kernel's signature (kernels/attention/attention.h) and binds it exactly as
// the spec binds its own kernels, so a mutant differs from the kernel in its
// body alone. Also the spec's host reference and bound, for the CPU tests and
// the composite cuBLAS test.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/dtype.h"
#include "harness/spec.h"
#include "harness/status.h"
#include "harness/testbeds/tensor_op.h"
#include "kernels/attention/attention.h"

namespace assay::attention {

using kernels::attention::AttnShape;
using kernels::attention::Dt;

using AttnFwdFn = cudaError_t (*)(Dt, const AttnShape&, const void*, int64_t, const void*, int64_t, const void*,
                                  int64_t, const float*, int64_t, void*, int64_t, float*, cudaStream_t);
using AttnBwdFn = cudaError_t (*)(Dt, const AttnShape&, const void*, int64_t, const void*, int64_t, const void*,
                                  int64_t, const void*, int64_t, const void*, int64_t, const float*, const float*,
                                  int64_t, void*, int64_t, void*, int64_t, void*, int64_t, cudaStream_t);
bool register_attention_fwd(VariantInfo info, AttnFwdFn fn);
bool register_attention_bwd(VariantInfo info, AttnBwdFn fn);

/// An attention problem as the spec reads it from a case (params B, H, Hkv, Sq, Sk, D, causal,
/// mask, scale, dtype). `scale` is the fp32 value the kernel receives, widened.
struct AttnDims {
  int64_t B = 1, H = 1, Hkv = 1, Sq = 1, Sk = 1, D = 64;
  bool causal = false, has_mask = false;
  double scale = 0.125;
  DType dt = DType::kF16;
  AttnShape shape() const;
};

/// Forward reference (fp64, LSE statistics) and the hard ceiling of every element of O
/// (storage dtype) and LSE (fp32) for the flash kernel's arithmetic (properties/attention.cpp
/// derives it). q: [B*H*Sq, D], k, v: [B*Hkv*Sk, D], mask [Sq, Sk] or null (decoded values).
/// `key_tile` is the kernel's keys per online-softmax tile (its rescale count).
void attention_fwd_reference(const AttnDims& d, const HostTensor& q, const HostTensor& k, const HostTensor& v,
                             const HostTensor* mask, OutputRef& o, OutputRef& lse,
                             int64_t key_tile = kernels::attention::kFwdKeyTile);

/// The specs' testbed definitions, for the CPU tests of reference and bound.
const TensorOpDef& attention_def();
const TensorOpDef& attention_bwd_def();

}  // namespace assay::attention
