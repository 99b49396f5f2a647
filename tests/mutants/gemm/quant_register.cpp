// Registers the planted quantised-GEMM bugs (tests/mutants/gemm/quant_mutants.h) as mutant
// variants of gemm_int8 / gemm_fp8, bound exactly like the kernels (int8_launch / fp8_launch,
// properties/gemm_quant.h).
#include "properties/gemm_quant.h"
#include "tests/mutants/gemm/quant_mutants.h"

namespace assay::quant {
namespace {

namespace m = assay::mutants::quant;
const char* const kSrc = "tests/mutants/gemm/quant_mutants.cu";

VariantDef mutant(const char* name, const char* what, Launch launch) {
  return {.name = name, .description = what, .launch = std::move(launch), .mutant = true, .source = kSrc};
}

ASSAY_REGISTER(add_variant("gemm_int8", mutant("mutant_int8_scale_by_row",
                                               "per-channel weight scale sw[i mod n] instead of sw[j] (caught by: bound)",
                                               int8_launch(m::int8_scale_by_row))));
ASSAY_REGISTER(add_variant(
    "gemm_int8", mutant("mutant_int8_fp32_acc",
                        "int32 accumulation replaced by fp32, wrong once partial sums pass 2^24 (caught by: exact)",
                        int8_launch(m::int8_fp32_acc))));
ASSAY_REGISTER(add_variant("gemm_int8", mutant("mutant_int8_k_tail",
                                               "dp4a path drops the k % 4 leftovers (caught by: exact, bound)",
                                               int8_launch(m::int8_k_tail))));
ASSAY_REGISTER(add_variant("gemm_fp8", mutant("mutant_fp8_ignore_scale_b",
                                              "D = scale_a * (A B), scale_b ignored (caught by: bound)",
                                              fp8_launch(m::fp8_ignore_scale_b))));

}  // namespace
}  // namespace assay::quant
