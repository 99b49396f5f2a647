// Registration and shared pieces of the convolution specs (properties/conv.cpp): extra variants
// (the planted bugs of tests/mutants/conv) bind through the same function pointer as the
// kernels, and the reference + ceiling is callable on its own for the CPU tests and the cuDNN
// comparison (tests/properties/conv_gen_test.cpp, conv_gpu_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "kernels/conv/conv.h"
#include "references/host/conv.h"

namespace assay::conv {

enum class ConvPass : uint8_t { kFwd, kBwdData, kBwdFilter };

/// "conv2d", "conv2d_bwd_data", "conv2d_bwd_filter".
const char* conv_op_name(ConvPass pass);

using ConvFn = cudaError_t (*)(const kernels::conv::ConvArgs&, cudaStream_t);
bool register_conv(ConvPass pass, VariantInfo info, ConvFn fn);
/// The registered variants (kernels and mutants) of one pass.
const std::vector<TensorOpVariant>& conv_variants(ConvPass pass);
/// The launcher registered under `name` for `pass`; nullptr if none.
ConvFn find_conv(ConvPass pass, const std::string& name);

/// The geometry of a case's params (validated by the spec first).
ref::Conv2dGeometry conv_geometry(const nlohmann::json& params);
/// A case of `pass` from params, the input recipes (in tensor order) and the row pad / offset
/// every tensor gets.
Case build_conv_case(ConvPass pass, const nlohmann::json& params, const std::vector<ValueRecipe>& recipes, int64_t pad,
                     int64_t off);

/// Reference (fp64, references/host/conv.h) and ceiling of every output element of `pass`
/// for packed inputs already rounded to `dt` (fwd: x, w; bwd-data: dy, w; bwd-filter: x, dy).
/// int_range >= 0: every input is an integer in [-int_range, int_range]; the output is then
/// marked exact when gemm_exact_tier_holds says every partial sum is. Output index = the
/// packed layout of conv.h = row * cols + col of the 2-D view.
OutputRef conv_reference(ConvPass pass, const ref::Conv2dGeometry& g, DType dt, const double* in0, const double* in1,
                         int64_t int_range);

/// The spec's testbed definition of `pass` (reference, ceiling and, for the backward passes, the
/// "gradcheck" properties hook), for the CPU tests.
const TensorOpDef& conv_def(ConvPass pass);

}  // namespace assay::conv
