// Registers the planted tensor-core GEMM bugs as mutant variants of gemm_tc, bound exactly like
// the kernels they replace (gemm_tc_launch, properties/gemm_tc.h).
#include "properties/gemm_tc.h"
#include "tests/mutants/gemm/tc_mutants.h"

namespace assay::gemm_tc {
namespace {

namespace m = assay::mutants::tc;

template <typename Fn>
VariantDef mutant(const char* name, const char* what, Fn fn) {
  return {.name = name,
          .description = what,
          .launch = gemm_tc_launch(fn),
          .mutant = true,
          .source = "tests/mutants/gemm/tc_mutants.cu"};
}

ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_mma_bf16_acc", "mma: accumulator rounded to bf16 every k-tile",
                                             m::gemm_tc_mma_bf16_acc)));
ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_wmma_f16_acc",
                                             "wmma: accumulator rounded to fp16 every k-tile", m::gemm_tc_wmma_f16_acc)));
ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_mma_no_wait", "mma: no cp.async wait before the mma",
                                             m::gemm_tc_mma_no_wait)));
ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_mma_ldmatrix_row",
                                             "mma: one A ldmatrix row address swapped (r ^ 1)",
                                             m::gemm_tc_mma_ldmatrix_row)));
ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_mma_k_tail", "mma: k tail of the last tile not zero-filled",
                                             m::gemm_tc_mma_k_tail)));
ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_wmma_k_tail", "wmma: k tail of the last tile not zero-filled",
                                             m::gemm_tc_wmma_k_tail)));
ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_wmma_missing_sync",
                                             "wmma: no barrier before the next tile's loads",
                                             m::gemm_tc_wmma_missing_sync)));
ASSAY_REGISTER(add_variant("gemm_tc", mutant("mutant_tc_mma_beta0_reads_c", "mma: C read when beta == 0",
                                             m::gemm_tc_mma_beta0_reads_c)));

}  // namespace
}  // namespace assay::gemm_tc
