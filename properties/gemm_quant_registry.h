// Registration and shared pieces of the quantised GEMM specs (properties/gemm_quant.cpp): extra
// variants (the planted bugs of tests/mutants/gemm/quant_mutants.cu) bind through the same
// function pointer as the kernels, and the references + bounds are callable on their own for the
// CPU tests and the cuBLASLt comparison (tests/properties/gemm_quant_test.cpp,
// gemm_quant_gpu_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <rapidcheck.h>
#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "kernels/gemm/gemm_quant.h"

namespace assay::quant {

enum class QuantOp : uint8_t { kInt8, kFp8 };

/// "gemm_int8", "gemm_fp8".
const char* quant_op_name(QuantOp op);

bool register_int8(VariantInfo info, kernels::quant::GemmInt8Launcher fn);
bool register_fp8(VariantInfo info, kernels::quant::GemmFp8Launcher fn);
/// The registered variants (kernels and mutants) of one op.
const std::vector<TensorOpVariant>& quant_variants(QuantOp op);
/// The launcher registered under `name`; nullptr if none.
kernels::quant::GemmInt8Launcher find_int8(const std::string& name);
kernels::quant::GemmFp8Launcher find_fp8(const std::string& name);

/// Largest k of either op (int8: int32 exactness, kernels::quant::kInt8MaxK; fp8: the exactness
/// of the double reference, references/host/gemm_quant.h).
inline constexpr int64_t kQuantMaxK = kernels::quant::kInt8MaxK;

/// A case from params (m, n, k, out, and for int8 "bias"; optional "relation"), the input
/// recipes in tensor order and the row pad / offset every tensor gets.
///   gemm_int8: A int8 [m, k], B int8 [n, k], sa fp32 [m], sw fp32 [n], bias fp32 [n],
///              Acc int32 [m, n] (out), D out-dtype [m, n] (out).
///   gemm_fp8:  A e4m3 [m, k], B e4m3 [n, k], scale_a fp32 [1], scale_b fp32 [1], D [m, n] (out).
Case build_quant_case(QuantOp op, const nlohmann::json& params, const std::vector<ValueRecipe>& recipes, int64_t pad,
                      int64_t off);

/// The spec's validation (params, k limit, tensors): one-line errors.
Status validate_quant(QuantOp op, const Case& c);
/// The spec's generator.
rc::Gen<Case> gen_quant_case(QuantOp op, const GenConfig& config);

/// int8 reference of both outputs from dense inputs (a: m*k, b: n*k, sa: m, sw: n, bias: n or
/// empty): Acc exactly (tol 0, exact tier) and D with the dequantisation bound (see the spec's header).
std::vector<OutputRef> int8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a,
                                      const std::vector<double>& b, const std::vector<double>& sa,
                                      const std::vector<double>& sw, const std::vector<double>& bias, DType out);
/// The int8 D tolerance of one element: x = |sa sw acc|, bias_abs = |bias|, ref_abs = |D|.
double int8_d_tol(double x, double bias_abs, double ref_abs, bool acc_zero, DType out);

/// fp8 reference of D from dense inputs (a: m*k, b: n*k, e4m3 values) and the scales, with the
/// fp32-accumulation ceiling; `exact_range` >= 0: both inputs are integers in [-r, r] (exact tier
/// when gemm_exact_tier_holds says so).
OutputRef fp8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a, const std::vector<double>& b,
                        double scale_a, double scale_b, DType out, int64_t exact_range);

/// The spec's testbed definition (reference, bound, relations), for the CPU tests.
const TensorOpDef& quant_def(QuantOp op);

}  // namespace assay::quant
