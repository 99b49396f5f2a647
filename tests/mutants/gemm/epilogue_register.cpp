// Registers the planted GEMM + bias + activation bugs as [mutant] variants of their ops, bound
// exactly like the kernels they replace (properties/gemm_epilogue_registry.h).
#include "properties/gemm_epilogue_registry.h"
#include "tests/mutants/gemm/epilogue_mutants.h"

namespace assay::epilogue {
namespace {

namespace m = assay::mutants::epi;
const char* const kSrc = "tests/mutants/gemm/epilogue_mutants.cu";

VariantInfo mutant(const char* name, const char* what) {
  return {name, what, true, true, kSrc};
}

[[maybe_unused]] const bool kEpilogueMutants =
    register_epilogue_fwd(
        mutant("mutant_epi_bias_after_act", "Y = act(acc) + bias (caught by: bound, exact, property)"),
        m::epi_bias_after_act) &&
    register_epilogue_fwd(
        mutant("mutant_epi_store_tail", "epilogue store guard c <= n: column n written (caught by: gap, guard)"),
        m::epi_store_tail) &&
    register_epilogue_bwd(
        mutant("mutant_epi_dbias_overwrite", "dbias overwritten, not accumulated (caught by: bound, projection)"),
        m::epi_dbias_overwrite) &&
    register_epilogue_bwd(
        mutant("mutant_epi_gelu_grad_half", "GELU' first term (1 + t), the 0.5 lost (caught by: bound, projection)"),
        m::epi_gelu_grad_half) &&
    register_epilogue_bwd(
        mutant("mutant_epi_relu_grad_at_zero", "relu'(0) = 1: z >= 0 (caught by: exact, bound on exact zeros of Z)"),
        m::epi_relu_grad_at_zero);

}  // namespace
}  // namespace assay::epilogue
