// rmsnorm_bwd_atomic as a variant of assay's built-in rmsnorm_bwd op (tensors X,
// dY, gamma, rstd, dX, dgamma; `assay list --op rmsnorm_bwd`). Its conventions
// differ from the op's default, and the contract says so: dgamma is accumulated
// (assay prefills it and expects prefill + gradient, with the rounding of an
// in-place sum), the atomics make it non-deterministic, and the fast-math build
// (flush-to-zero, approximate division) is the arithmetic the bound assumes.
#include "harness/op.h"
#include "kernels/rmsnorm_bwd_atomic.h"

using namespace assay;

ASSAY_REGISTER(add_variant(
    "rmsnorm_bwd",
    {.name = "rmsnorm_bwd_atomic",
     .description = "block per row, dgamma by atomicAdd, --use_fast_math",
     .launch =
         [](const Params&, const std::vector<DevTensor>& t, cudaStream_t s) {
           return demo::rmsnorm_bwd_atomic(t[0].as<const float>(), t[0].v.ld, t[1].as<const float>(), t[1].v.ld,
                                           t[2].as<const float>(), t[3].as<const float>(), t[4].as<float>(),
                                           t[4].v.ld, t[5].as<float>(), t[0].v.rows, t[0].v.cols, s);
         },
     .contract = Contract().dtypes({DType::kF32}).accumulates("dgamma").fast_math(),
     .deterministic = false,
     .source = "kernels/rmsnorm_bwd_atomic.cu"}));
