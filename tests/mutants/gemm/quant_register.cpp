// Registers the planted quantised-GEMM bugs (tests/mutants/gemm/quant_mutants.h) as [mutant]
// variants of gemm_int8 / gemm_fp8, bound exactly like the kernels (properties/gemm_quant_registry.h).
#include "properties/gemm_quant_registry.h"
#include "tests/mutants/gemm/quant_mutants.h"

namespace assay::quant {
namespace {

namespace m = assay::mutants::quant;
const char* const kSrc = "tests/mutants/gemm/quant_mutants.cu";

VariantInfo mutant(const char* name, const char* what) {
  return {name, what, true, true, kSrc};
}

[[maybe_unused]] const bool kQuantMutants =
    register_int8(
        mutant("mutant_int8_scale_by_row", "per-channel weight scale sw[i mod n] instead of sw[j] (caught by: bound)"),
        m::int8_scale_by_row) &&
    register_int8(mutant("mutant_int8_fp32_acc",
                         "int32 accumulation replaced by fp32, wrong once partial sums pass 2^24 (caught by: exact)"),
                  m::int8_fp32_acc) &&
    register_int8(mutant("mutant_int8_k_tail", "dp4a path drops the k % 4 leftovers (caught by: exact, bound)"),
                  m::int8_k_tail) &&
    register_fp8(mutant("mutant_fp8_ignore_scale_b", "D = scale_a * (A B), scale_b ignored (caught by: bound)"),
                 m::fp8_ignore_scale_b);

}  // namespace
}  // namespace assay::quant
