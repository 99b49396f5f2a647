// Registers every fp32 GEMM mutant as a [mutant] variant of the gemm op, so
// `assay fuzz gemm --variant mutant_tail_guard` and the GPU tests can aim the
// whole harness at a planted bug. Mutants are never fuzzed unless named.
#include "harness/testbeds/gemm_f32.h"
#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

bool register_all() {
  int n = 0;
  const MutantInfo* m = gemm_f32_mutants(&n);
  for (int i = 0; i < n; ++i) {
    const kernels::GemmF32Launcher fn = m[i].launch;
    register_gemm_f32_variant(
        {{m[i].name, std::string(m[i].bug) + " (caught by: " + m[i].caught_by + ")", true, true, m[i].source},
         [fn](const GemmF32Problem& p, cudaStream_t s) {
           kernels::GemmF32Args a;
           a.m = p.m, a.n = p.n, a.k = p.k, a.trans_a = p.trans_a, a.trans_b = p.trans_b;
           a.alpha = p.alpha, a.beta = p.beta;
           a.a = p.a, a.lda = p.lda, a.b = p.b, a.ldb = p.ldb, a.c = p.c, a.ldc = p.ldc;
           return fn(a, s);
         }});
  }
  return true;
}

[[maybe_unused]] const bool kRegistered = register_all();

}  // namespace
}  // namespace assay::mutants
