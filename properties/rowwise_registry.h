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

// ---- activations (properties/activation.cpp) ----
using ActivationFwdFn = cudaError_t (*)(Dt, Act, const void*, void*, int64_t, cudaStream_t);
using ActivationBwdFn = cudaError_t (*)(Dt, Act, const void*, const void*, void*, int64_t, cudaStream_t);
bool register_activation_fwd(VariantInfo info, ActivationFwdFn fn);
bool register_activation_bwd(VariantInfo info, ActivationBwdFn fn);
/// The launcher registered under `variant` (kernel or mutant); nullptr if none.
ActivationFwdFn find_activation_fwd(const std::string& variant);
ActivationBwdFn find_activation_bwd(const std::string& variant);
/// "gelu_erf", "gelu_tanh", "silu" (the case param "act"); nullopt for any other name.
std::optional<Act> parse_act(std::string_view name);
std::string_view act_name(Act a);
/// Reference (fp64, references/host/backward.h) and absolute tolerance (the spec's hard ceiling,
/// derived in properties/activation.cpp) of one element computed in fp32 and stored in `out`
/// (fp32, fp16, bf16). tol = 0 where the reference is NaN or +-Inf (pattern check only).
struct ActivationPoint {
  double ref = 0;
  double tol = 0;
};
ActivationPoint activation_fwd_point(Act act, DType out, double x);
/// dx = dy act'(x).
ActivationPoint activation_bwd_point(Act act, DType out, double x, double dy);
/// All 2^16 inputs of `dt` (fp16 or bf16) through the registered `variant` in one launch, on
/// `device`, against activation_*_point (backward: dy = 1). Not found: no such variant.
StatusOr<ExhaustiveReport> activation_exhaustive(const std::string& variant, Act act, DType dt, bool backward,
                                                 int device);

// ---- rope, embedding (properties/rope.cpp, embedding.cpp) ----
// Index tensors are int32 (DType::kI32) on the harness side.
using RopeFn = cudaError_t (*)(Dt, const void*, int64_t, void*, int64_t, int64_t, int64_t, int64_t, float, bool, bool,
                               cudaStream_t);
using EmbeddingFwdFn = cudaError_t (*)(Dt, const int32_t*, int64_t, const void*, int64_t, int64_t, int64_t, void*,
                                       int64_t, cudaStream_t);
using EmbeddingBwdFn = cudaError_t (*)(Dt, const int32_t*, int64_t, const void*, int64_t, float*, int64_t, int64_t,
                                       int64_t, cudaStream_t);
bool register_rope(VariantInfo info, RopeFn fn);
bool register_embedding_fwd(VariantInfo info, EmbeddingFwdFn fn);
bool register_embedding_bwd(VariantInfo info, EmbeddingBwdFn fn);
/// The specs' testbed definitions (prepare, reference and bound, properties, transform), for the
/// CPU tests of references and bounds (tests/properties/rowwise_specs_test.cpp).
const TensorOpDef& rope_def();
const TensorOpDef& embedding_def();
const TensorOpDef& embedding_bwd_def();

}  // namespace assay::rowwise
