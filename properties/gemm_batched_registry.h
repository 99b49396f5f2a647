// Registration and shared pieces of the batched fp32 GEMM spec (properties/gemm_batched.cpp):
// the planted bugs of tests/mutants/gemm bind through the same function pointer as the
// kernels; the reference and ceiling are callable on their own for the CPU tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "kernels/gemm/gemm.h"

namespace assay::gemm_batched {

/// One batched GEMM as the launchers see it: the problem of entry 0 (a, b, c point at it) and
/// the element strides between entries (stride_a == 0: A broadcast to every entry).
struct BatchedCall {
  kernels::GemmF32Args g;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};
using BatchedFn = cudaError_t (*)(const BatchedCall&, cudaStream_t);

bool register_gemm_batched(VariantInfo info, BatchedFn fn);
const std::vector<TensorOpVariant>& gemm_batched_variants();

/// The pointer-array launcher driven from a strided description: builds the device arrays
/// a + z*stride_a, b + z*stride_b, c + z*stride_c (one reused device buffer per stream, filled
/// by an asynchronous copy on `stream`) and calls kernels::gemm_f32_tiled_ptr_batched with
/// `batch_launched` entries (== call.batch for the kernel; a mutant may pass fewer).
cudaError_t launch_ptr_array(const BatchedCall& call, int64_t batch_launched, cudaStream_t stream);

/// Case of the spec from its params (m, n, k, batch, trans_a, trans_b, alpha, beta,
/// broadcast_a, pad_in[, relation]), recipes of A, B, C and the batch gap / leading offset.
Case build_batched_case(const nlohmann::json& params, const std::vector<ValueRecipe>& recipes, int64_t pad,
                        int64_t off);

/// The spec's testbed definition (reference, ceiling, the permute_batches relation).
const TensorOpDef& batched_def();

}  // namespace assay::gemm_batched
