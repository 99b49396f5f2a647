// Registers the planted row-wise bugs as [mutant] variants of their ops, bound
// exactly like the kernels they replace (add_variant with the op's launch template).
#include "properties/activation.h"
#include "properties/cross_entropy.h"
#include "properties/embedding.h"
#include "properties/norms.h"
#include "properties/rope.h"
#include "properties/softmax.h"
#include "tests/mutants/rowwise/mutants.h"

namespace assay::rowwise {
namespace {

namespace m = assay::mutants::rowwise;
const char* const kSoftmax = "tests/mutants/rowwise/softmax_mutants.cu";
const char* const kNorms = "tests/mutants/rowwise/norm_mutants.cu";

ASSAY_REGISTER(add_variant("softmax", {.name = "mutant_softmax_no_max",
                                       .description = "exp(x) without subtracting the row max: overflows",
                                       .launch = softmax_launch(m::softmax_no_max),
                                       .mutant = true,
                                       .source = kSoftmax}));
ASSAY_REGISTER(add_variant("softmax",
                           {.name = "mutant_softmax_vec_tail",
                            .description = "aligned rows skip the vector tail (n % 4 for fp32, n % 8 for fp16/bf16)",
                            .launch = softmax_launch(m::softmax_vec_tail),
                            .mutant = true,
                            .source = kSoftmax}));
// Inside its declared ceiling (fast_math), caught by the vendor-relative accuracy warning alone.
ASSAY_REGISTER(add_variant("softmax",
                           {.name = "mutant_softmax_fast_exp",
                            .description = "__expf / __logf (fast-math, declared): within the ceiling, far below "
                                           "cuDNN's accuracy (an accuracy warning, not a failure)",
                            .launch = softmax_launch(m::softmax_fast_exp),
                            .contract = Contract().fast_math(),
                            .mutant = true,
                            .source = kSoftmax}));
ASSAY_REGISTER(add_variant("softmax_bwd", {.name = "mutant_softmax_bwd_no_sum",
                                           .description = "backward forgets the - sum(y dy) term",
                                           .launch = softmax_bwd_launch(m::softmax_bwd_no_sum),
                                           .mutant = true,
                                           .source = kSoftmax}));

ASSAY_REGISTER(add_variant("layernorm", {.name = "mutant_layernorm_one_pass",
                                         .description = "variance as E[x^2] - E[x]^2 in fp32 (one pass)",
                                         .launch = layernorm_launch(m::layernorm_one_pass),
                                         .mutant = true,
                                         .source = kNorms}));
ASSAY_REGISTER(add_variant("layernorm_bwd", {.name = "mutant_layernorm_dbeta_skip_last_row",
                                             .description = "dgamma/dbeta reduction stops at rows - 1",
                                             .launch = layernorm_bwd_launch(m::layernorm_dbeta_skip_last_row),
                                             .mutant = true,
                                             .source = kNorms}));
ASSAY_REGISTER(add_variant("layernorm_bwd",
                           {.name = "mutant_layernorm_bwd_race",
                            .description = "block-per-row dx: shared partial sums read without a barrier",
                            .launch = layernorm_bwd_launch(m::layernorm_bwd_race),
                            .mutant = true,
                            .source = kNorms}));
ASSAY_REGISTER(add_variant("rmsnorm", {.name = "mutant_rmsnorm_no_eps",
                                       .description = "eps ignored: a zero row gives Inf/NaN",
                                       .launch = rmsnorm_launch(m::rmsnorm_no_eps),
                                       .mutant = true,
                                       .source = kNorms}));
ASSAY_REGISTER(add_variant("rmsnorm_bwd",
                           {.name = "mutant_rmsnorm_bwd_no_projection",
                            .description = "dx = rstd dy gamma: the d rstd/dx term missing",
                            .launch = rmsnorm_bwd_launch(m::rmsnorm_bwd_no_projection),
                            .mutant = true,
                            .source = kNorms}));

const char* const kAct = "tests/mutants/rowwise/activation_mutants.cu";
ASSAY_REGISTER(add_variant("activation", {.name = "mutant_gelu_tanh_wrong_const",
                                          .description = "tanh-GELU with c = 0.0447",
                                          .launch = activation_launch(m::gelu_tanh_wrong_const),
                                          .mutant = true,
                                          .source = kAct}));
ASSAY_REGISTER(add_variant("activation_bwd", {.name = "mutant_silu_bwd_missing_term",
                                              .description = "silu' = sigmoid only",
                                              .launch = activation_bwd_launch(m::silu_bwd_missing_term),
                                              .mutant = true,
                                              .source = kAct}));

const char* const kEmbedding = "tests/mutants/rowwise/embedding_mutants.cu";
ASSAY_REGISTER(add_variant("embedding", {.name = "mutant_embedding_fwd_off_by_one",
                                         .description = "range check accepts index == vocab",
                                         .launch = embedding_launch(m::embedding_fwd_off_by_one),
                                         .mutant = true,
                                         .source = kEmbedding}));
// Bound exactly as the kernel it replaces: it declares the kernel's accumulation into dtable.
ASSAY_REGISTER(add_variant("embedding_bwd", {.name = "mutant_embedding_bwd_overwrite",
                                             .description = "plain store instead of atomicAdd",
                                             .launch = embedding_bwd_launch(m::embedding_bwd_overwrite),
                                             .contract = Contract().accumulates("dtable"),
                                             .deterministic = false,
                                             .mutant = true,
                                             .source = kEmbedding}));

ASSAY_REGISTER(add_variant("rope", {.name = "mutant_rope_wrong_pairing",
                                    .description = "interleaved layout rotated as half-split pairs",
                                    .launch = rope_launch(m::rope_wrong_pairing),
                                    .mutant = true,
                                    .source = "tests/mutants/rowwise/rope_mutants.cu"}));

const char* const kCe = "tests/mutants/rowwise/cross_entropy_mutants.cu";
ASSAY_REGISTER(add_variant("cross_entropy", {.name = "mutant_ce_ignore_index_ignored",
                                             .description = "ignore_index rows not skipped",
                                             .launch = cross_entropy_launch(m::ce_ignore_index_ignored),
                                             .mutant = true,
                                             .source = kCe}));
ASSAY_REGISTER(add_variant("cross_entropy", {.name = "mutant_ce_smoothing_wrong",
                                             .description = "smoothing mass eps/(n-1) off the target",
                                             .launch = cross_entropy_launch(m::ce_smoothing_wrong),
                                             .mutant = true,
                                             .source = kCe}));

}  // namespace
}  // namespace assay::rowwise
