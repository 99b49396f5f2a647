// Registers the planted attention bugs as [mutant] variants of their ops, bound
// exactly like the kernels they replace (properties/attention_registry.h).
#include "properties/attention_registry.h"
#include "tests/mutants/attention/mutants.h"

namespace assay::attention {
namespace {

namespace m = assay::mutants::attention;
const char* const kFwd = "tests/mutants/attention/fwd_mutants.cu";
const char* const kBwd = "tests/mutants/attention/bwd_mutants.cu";

VariantInfo mutant(const char* name, const char* what, const char* src) {
  return {name, what, true, true, src};
}

[[maybe_unused]] const bool kMutants =
    register_attention_fwd(
        mutant("mutant_attn_tail_guard", "last key tile used whole: keys beyond Sk read and weighted", kFwd),
        m::attn_tail_guard) &&
    register_attention_fwd(mutant("mutant_attn_causal_off_by_one", "causal visibility j <= i + 1", kFwd),
                           m::attn_causal_off_by_one) &&
    register_attention_fwd(
        mutant("mutant_attn_no_rescale", "online softmax: l and o not rescaled when the running max rises", kFwd),
        m::attn_no_rescale) &&
    register_attention_bwd(mutant("mutant_attn_dv_wrong_row", "dV accumulates P_ij dO_{i+1} (off by one row)", kBwd),
                           m::attn_dv_wrong_row);

}  // namespace
}  // namespace assay::attention
