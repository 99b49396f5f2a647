// Adds every fp32 GEMM mutant as a [mutant] variant of the gemm op (and the
// backward mutants to gemm_bwd), so `assay fuzz gemm --variant mutant_tail_guard`
// and the GPU tests can aim the whole harness at a planted bug. Mutants are
// never fuzzed unless named. Each declares the contract of the kernel it
// pretends to be: the BLAS convention and any layout for the forward, dB
// accumulated for the backward.
#include "properties/gemm.h"
#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

bool register_all() {
  int n = 0;
  const MutantInfo* m = gemm_f32_mutants(&n);
  for (int i = 0; i < n; ++i)
    registered(add_variant("gemm", {.name = m[i].name,
                                    .description = std::string(m[i].bug) + " (caught by: " + m[i].caught_by + ")",
                                    .launch = gemm_launch(m[i].launch),
                                    .mutant = true,
                                    .source = m[i].source}),
               m[i].name);
  return true;
}

[[maybe_unused]] const bool kRegistered = register_all();

bool register_backward() {
  struct M {
    const char* name;
    kernels::GemmBwdF32Launcher fn;
    const char* bug;
  };
  const M ms[] = {
      {"bwd_wrong_sign", gemm_bwd_mutant_wrong_sign, "dA = -alpha dC B^T (caught by: bound, projection)"},
      {"bwd_missing_alpha", gemm_bwd_mutant_missing_alpha,
       "dA without the factor alpha (caught by: bound, projection)"},
      {"bwd_transposed", gemm_bwd_mutant_transposed, "dA from B untransposed (caught by: bound, nan-inf, projection)"},
      {"bwd_overwrite", gemm_bwd_mutant_overwrite,
       "dB overwritten instead of accumulated (caught by: bound, projection)"},
      {"bwd_wrong_row", gemm_bwd_mutant_wrong_row,
       "dB from row (i+1) mod m of dC; exact when all rows of dC are equal (caught by: bound, projection)"},
  };
  for (const M& m : ms)
    registered(add_variant("gemm_bwd", {.name = m.name,
                                        .description = m.bug,
                                        .launch = gemm_bwd_launch(m.fn),
                                        .contract = Contract().accumulates("dB"),
                                        .mutant = true,
                                        .source = "tests/mutants/gemm/gemm_bwd_mutants.cu"}),
               m.name);
  return true;
}

[[maybe_unused]] const bool kRegisteredBackward = register_backward();

}  // namespace
}  // namespace assay::mutants
