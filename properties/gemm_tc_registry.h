// Registration and shared pieces of the tensor-core GEMM spec (properties/gemm_tc.cpp): extra
// variants (the planted bugs of tests/mutants/gemm/tc_mutants.cu) bind through the same function
// pointer as the kernels, and the reference + ceiling is callable on its own for the CPU tests and
// the cuBLASLt comparison (tests/properties/gemm_tc_test.cpp, gemm_tc_gpu_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bounds.h"
#include "harness/case.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "kernels/gemm/gemm_tc.h"

namespace assay::gemm_tc {

inline constexpr const char* kOp = "gemm_tc";

bool register_gemm_tc(VariantInfo info, kernels::GemmTcLauncher fn);
/// The registered variants (kernels and mutants).
const std::vector<TensorOpVariant>& gemm_tc_variants();
/// The launcher registered under `name`; nullptr if none.
kernels::GemmTcLauncher find_gemm_tc(const std::string& name);

/// A case from params (m, n, k, trans_a, trans_b, dtype, out_dtype, alpha, beta, optional relation
/// and shift), the recipes of A, B, scalars, C (in that order; missing ones default) and the row
/// pad / leading offset of every tensor.
Case build_gemm_tc_case(const nlohmann::json& params, const std::vector<ValueRecipe>& recipes, int64_t pad,
                        int64_t off);

/// The ceiling's model for one case: fp16/bf16 products exact, truncating block accumulation in
/// fp32 with any block size and any split of k (see the header of properties/gemm_tc.cpp).
GemmBoundModel gemm_tc_model(DType in, int64_t k, double alpha, double beta);

/// Reference and ceiling of every element of D (dense m x n) from op(A), op(B) (read through the
/// views and transposes of `p`) and C, already rounded to the kernel's types:
///   tol = e32 + 0.5 ulp_out(|ref| + e32), e32 = gemm_ceiling(gemm_tc_model)(|ref|, mag);
/// +Inf (unchecked) where an fp32 intermediate or the output may overflow. `exact`: the case is
/// in the exact tier (see exact_tier_case).
struct TcProblem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  DType in = DType::kF16, out = DType::kF32;
  double alpha = 1, beta = 0;
  const double* a = nullptr;
  int64_t lda = 0;
  const double* b = nullptr;
  int64_t ldb = 0;
  const double* c = nullptr;  ///< may be null when beta == 0
  int64_t ldc = 0;
};
OutputRef gemm_tc_reference(const TcProblem& p, bool exact);

/// True when a case's D must be bit-identical to the reference: k == 0 with |beta| in {0, 1}
/// (D = beta*C), or small-integer A, B (and C where beta != 0) whose every partial sum stays exact
/// in fp32 and in the output type (gemm_exact_tier_holds).
bool exact_tier_case(const Case& c);

/// The spec's testbed definition (prepare, reference, relations), for the CPU tests.
const TensorOpDef& gemm_tc_def();

}  // namespace assay::gemm_tc
