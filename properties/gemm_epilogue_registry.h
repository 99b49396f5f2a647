// Registration and shared pieces of the GEMM + bias + activation specs (properties/gemm_epilogue.cpp):
// the planted bugs of tests/mutants/gemm/epilogue_mutants.cu bind through the same function
// pointers as the kernels, and the references + ceilings are callable on their own for the CPU
// tests and the cuBLASLt comparison (tests/properties/gemm_epilogue_test.cpp, _gpu_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "kernels/gemm/gemm_epilogue.h"
#include "references/host/gemm_epilogue.h"

namespace assay::epilogue {

enum class EpiPass : uint8_t { kFwd, kBwd };

/// "gemm_bias_act", "gemm_bias_act_bwd".
const char* epi_op_name(EpiPass pass);

bool register_epilogue_fwd(VariantInfo info, kernels::epi::FwdFn fn);
bool register_epilogue_bwd(VariantInfo info, kernels::epi::BwdFn fn);
/// The registered variants (kernels and mutants) of one pass.
const std::vector<TensorOpVariant>& epilogue_variants(EpiPass pass);

/// The problem of a case's params (validated by the spec first).
ref::EpilogueProblem epilogue_problem(const nlohmann::json& params);
/// A case of `pass` from params, the input recipes in tensor order (fwd: A, B, bias;
/// bwd: A, B, Z, dY, dB prefill, dbias prefill) and the row pad / offset of every 2-D tensor.
Case build_epilogue_case(EpiPass pass, const nlohmann::json& params, const std::vector<ValueRecipe>& recipes,
                         int64_t pad, int64_t off);

/// Forward references and ceilings for inputs already rounded to `dt` (dense): {Y, Z}.
/// int_range >= 0: A, B and bias are integers in [-int_range, int_range]; act none / relu are then
/// exact when every partial sum is (gemm_exact_tier_holds, k + 1 terms).
std::vector<OutputRef> forward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                    const double* bias, int64_t int_range);
/// Backward references and ceilings: {dA, dB, dbias}, dB and dbias including their prefills
/// (dense, B's storage layout and n elements). int_range as above over every input.
std::vector<OutputRef> backward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                     const double* z, const double* dy, const double* db0, const double* dbias0,
                                     int64_t int_range);

/// Bound pieces (fp32 evaluation, u = 2^-24), exposed for the CPU tests: the GELU (tanh form)
/// kernel's evaluation error at an fp32 argument x whose exact GELU is y, and that of GELU' at x.
double gelu_eval_error(double x, double y);
double gelu_grad_eval_error(double x);
/// max |GELU'| over the reals (tanh form): the Lipschitz constant the forward bound uses.
inline constexpr double kGeluLipschitz = 1.13;

/// The spec's testbed definition of `pass`, for the CPU tests.
const TensorOpDef& epilogue_def(EpiPass pass);

}  // namespace assay::epilogue
