// Registers the planted GEMM + bias + activation bugs as mutant variants of their ops, bound
// exactly like the kernels they replace (epilogue_fwd_launch / epilogue_bwd_launch,
// properties/gemm_epilogue.h), with the kernels' contracts (the backward accumulates dB and dbias).
#include "properties/gemm_epilogue.h"
#include "tests/mutants/gemm/epilogue_mutants.h"

namespace assay::epilogue {
namespace {

namespace m = assay::mutants::epi;
const char* const kSrc = "tests/mutants/gemm/epilogue_mutants.cu";

VariantDef fwd(const char* name, const char* what, kernels::epi::FwdFn fn) {
  return {.name = name, .description = what, .launch = epilogue_fwd_launch(fn), .mutant = true, .source = kSrc};
}
VariantDef bwd(const char* name, const char* what, kernels::epi::BwdFn fn) {
  return {.name = name,
          .description = what,
          .launch = epilogue_bwd_launch(fn),
          .contract = Contract().accumulates("dB").accumulates("dbias"),
          .mutant = true,
          .source = kSrc};
}

ASSAY_REGISTER(add_variant("gemm_bias_act", fwd("mutant_epi_bias_after_act",
                                                "Y = act(acc) + bias (caught by: bound, exact, property)",
                                                m::epi_bias_after_act)));
ASSAY_REGISTER(add_variant("gemm_bias_act",
                           fwd("mutant_epi_store_tail",
                               "epilogue store guard c <= n: column n written (caught by: gap, guard)",
                               m::epi_store_tail)));
ASSAY_REGISTER(add_variant("gemm_bias_act_bwd",
                           bwd("mutant_epi_dbias_overwrite",
                               "dbias overwritten, not accumulated (caught by: bound, projection)",
                               m::epi_dbias_overwrite)));
ASSAY_REGISTER(add_variant("gemm_bias_act_bwd",
                           bwd("mutant_epi_gelu_grad_half",
                               "GELU' first term (1 + t), the 0.5 lost (caught by: bound, projection)",
                               m::epi_gelu_grad_half)));
ASSAY_REGISTER(add_variant("gemm_bias_act_bwd",
                           bwd("mutant_epi_relu_grad_at_zero",
                               "relu'(0) = 1: z >= 0 (caught by: exact, bound on exact zeros of Z)",
                               m::epi_relu_grad_at_zero)));

}  // namespace
}  // namespace assay::epilogue
