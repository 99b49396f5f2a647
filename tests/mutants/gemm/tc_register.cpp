// Registers the planted tensor-core GEMM bugs as [mutant] variants of gemm_tc, bound exactly like
// the kernels they replace (properties/gemm_tc_registry.h).
#include "properties/gemm_tc_registry.h"
#include "tests/mutants/gemm/tc_mutants.h"

namespace assay::gemm_tc {
namespace {

namespace m = assay::mutants::tc;

VariantInfo mutant(const char* name, const char* what) {
  return {name, what, true, true, "tests/mutants/gemm/tc_mutants.cu"};
}

[[maybe_unused]] const bool kTcMutants =
    register_gemm_tc(mutant("mutant_tc_mma_bf16_acc", "mma: accumulator rounded to bf16 every k-tile"),
                     m::gemm_tc_mma_bf16_acc) &&
    register_gemm_tc(mutant("mutant_tc_wmma_f16_acc", "wmma: accumulator rounded to fp16 every k-tile"),
                     m::gemm_tc_wmma_f16_acc) &&
    register_gemm_tc(mutant("mutant_tc_mma_no_wait", "mma: no cp.async wait before the mma"),
                     m::gemm_tc_mma_no_wait) &&
    register_gemm_tc(mutant("mutant_tc_mma_ldmatrix_row", "mma: one A ldmatrix row address swapped (r ^ 1)"),
                     m::gemm_tc_mma_ldmatrix_row) &&
    register_gemm_tc(mutant("mutant_tc_mma_k_tail", "mma: k tail of the last tile not zero-filled"),
                     m::gemm_tc_mma_k_tail) &&
    register_gemm_tc(mutant("mutant_tc_wmma_k_tail", "wmma: k tail of the last tile not zero-filled"),
                     m::gemm_tc_wmma_k_tail) &&
    register_gemm_tc(mutant("mutant_tc_wmma_missing_sync", "wmma: no barrier before the next tile's loads"),
                     m::gemm_tc_wmma_missing_sync) &&
    register_gemm_tc(mutant("mutant_tc_mma_beta0_reads_c", "mma: C read when beta == 0"),
                     m::gemm_tc_mma_beta0_reads_c);

}  // namespace
}  // namespace assay::gemm_tc
