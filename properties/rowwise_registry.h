// Registration of extra variants (the planted bugs of tests/mutants/rowwise)
// for the row-wise specs: each takes a launcher with the kernel's signature
// (kernels/rowwise/rowwise.h) and binds it exactly as the spec binds its own
// kernels, so a mutant differs from the kernel in its body alone.
#pragma once

#include "harness/spec.h"
#include "kernels/rowwise/rowwise.h"

namespace assay::rowwise {

using kernels::rowwise::Act;
using kernels::rowwise::Dt;

using SoftmaxFwdFn = cudaError_t (*)(Dt, const void*, int64_t, void*, int64_t, int64_t, int64_t, bool, cudaStream_t);
using SoftmaxBwdFn = cudaError_t (*)(Dt, const void*, int64_t, const void*, int64_t, void*, int64_t, int64_t, int64_t,
                                     bool, cudaStream_t);
bool register_softmax_fwd(VariantInfo info, SoftmaxFwdFn fn);
bool register_softmax_bwd(VariantInfo info, SoftmaxBwdFn fn);

// ---- norms (properties/norms.cpp) ----

// ---- activations (properties/activation.cpp) ----

// ---- rope, embedding, cross-entropy (properties/rope.cpp, embedding.cpp, cross_entropy.cpp) ----

}  // namespace assay::rowwise
