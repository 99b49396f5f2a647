// Registers the planted attention bugs as [mutant] variants of their ops, bound exactly like
// the kernels they replace (attention_fwd_launch / attention_bwd_launch, properties/attention.h),
// with the forward kernel's declared key tile (the bugs are edits of that kernel).
#include "properties/attention.h"
#include "tests/mutants/attention/mutants.h"

namespace assay::attention {
namespace {

namespace m = assay::mutants::attention;
const char* const kFwd = "tests/mutants/attention/fwd_mutants.cu";
const char* const kBwd = "tests/mutants/attention/bwd_mutants.cu";

template <typename Fn>
VariantDef fwd_mutant(const char* name, const char* what, Fn fn) {
  return {.name = name,
          .description = what,
          .launch = attention_fwd_launch(fn),
          .contract = Contract().tile("kv_tile", kernels::attention::kFwdKeyTile),
          .mutant = true,
          .source = kFwd};
}

ASSAY_REGISTER(add_variant("attention", fwd_mutant("mutant_attn_tail_guard",
                                                   "last key tile used whole: keys beyond Sk read and weighted",
                                                   m::attn_tail_guard)));
ASSAY_REGISTER(add_variant("attention", fwd_mutant("mutant_attn_causal_off_by_one", "causal visibility j <= i + 1",
                                                   m::attn_causal_off_by_one)));
ASSAY_REGISTER(add_variant("attention",
                           fwd_mutant("mutant_attn_no_rescale",
                                      "online softmax: l and o not rescaled when the running max rises",
                                      m::attn_no_rescale)));
ASSAY_REGISTER(add_variant("attention_bwd", {.name = "mutant_attn_dv_wrong_row",
                                             .description = "dV accumulates P_ij dO_{i+1} (off by one row)",
                                             .launch = attention_bwd_launch(m::attn_dv_wrong_row),
                                             .mutant = true,
                                             .source = kBwd}));

}  // namespace
}  // namespace assay::attention
