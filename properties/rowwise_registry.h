// Registration of extra variants (the planted bugs of tests/mutants/rowwise)
// for the row-wise specs: each takes a launcher with the kernel's signature
// (kernels/rowwise/rowwise.h) and binds it exactly as the spec binds its own
// kernels, so a mutant differs from the kernel in its body alone.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "harness/exhaustive.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "kernels/rowwise/rowwise.h"

namespace assay::rowwise {

using kernels::rowwise::Act;
using kernels::rowwise::Dt;

// ---- norms (properties/norms.cpp) ----
using LayerNormFwdFn = cudaError_t (*)(Dt, const void*, int64_t, const void*, const void*, void*, int64_t, float*,
                                       float*, int64_t, int64_t, float, cudaStream_t);
using LayerNormBwdFn = cudaError_t (*)(Dt, const void*, int64_t, const void*, int64_t, const void*, const float*,
                                       const float*, void*, int64_t, float*, float*, int64_t, int64_t, cudaStream_t);
using RmsNormFwdFn = cudaError_t (*)(Dt, const void*, int64_t, const void*, void*, int64_t, float*, int64_t, int64_t,
                                     float, cudaStream_t);
using RmsNormBwdFn = cudaError_t (*)(Dt, const void*, int64_t, const void*, int64_t, const void*, const float*, void*,
                                     int64_t, float*, int64_t, int64_t, cudaStream_t);
bool register_layernorm_fwd(VariantInfo info, LayerNormFwdFn fn);
bool register_layernorm_bwd(VariantInfo info, LayerNormBwdFn fn);
bool register_rmsnorm_fwd(VariantInfo info, RmsNormFwdFn fn);
bool register_rmsnorm_bwd(VariantInfo info, RmsNormBwdFn fn);

// ---- cross-entropy (properties/cross_entropy.cpp) ----
// Target tensors are int32 (DType::kI32) on the harness side.
using CrossEntropyFn = cudaError_t (*)(Dt, const void*, int64_t, const int32_t*, int64_t, int64_t, int64_t, float,
                                       float*, void*, int64_t, cudaStream_t);
bool register_cross_entropy(VariantInfo info, CrossEntropyFn fn);
/// The specs' testbed definitions (prepare, reference and bound, properties, transform), for the
/// CPU tests of references and bounds (tests/properties/rowwise_specs_test.cpp).
const TensorOpDef& cross_entropy_def();

}  // namespace assay::rowwise
