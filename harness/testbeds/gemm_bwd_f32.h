// Testbed for fp32 GEMM backward kernels (kernels/gemm/gemm_backward.h):
//   dA = alpha dC B^T (overwrite), dB += alpha A^T dC (accumulate).
// Per case: A, B, the upstream gradient dC (from the value classes: rows
// differ, so a wrong-row bug shows) and a random dB prefill are materialised;
// dA starts as poison. Both outputs are compared on the GPU with fp64 host
// references (the same GEMM reference, with dB's prefill as beta*C) under
// the GEMM ceiling, with guards, poison, gaps, inputs untouched and, for
// variants that declare it, a bitwise rerun. Then the scalar check
// <dC, J (uA, uB)> = <uA, dA> + <uB, dB - prefill> against central
// differences of the fp64 host forward (harness/gradcheck.h), which catches
// transposed and mis-indexed gradients by one number.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "harness/case.h"
#include "harness/spec.h"
#include "harness/verdict.h"

namespace assay {

namespace gpu {
class Lane;
}

struct GemmBwdF32Problem {
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  const float* dc = nullptr;
  int64_t lddc = 0;
  float* da = nullptr;
  int64_t ldda = 0;
  float* db = nullptr;
  int64_t lddb = 0;
};

using GemmBwdF32Launch = std::function<cudaError_t(const GemmBwdF32Problem&, cudaStream_t)>;

struct GemmBwdF32Variant {
  VariantInfo info;
  GemmBwdF32Launch launch;
};

bool register_gemm_bwd_f32_variant(GemmBwdF32Variant v);
const std::vector<GemmBwdF32Variant>& gemm_bwd_f32_variants();

/// A case of op "gemm_bwd"; pads and offsets in elements; recipes for A, B, dC and the dB prefill.
Case make_gemm_bwd_case(int64_t m, int64_t n, int64_t k, double alpha, int64_t pad, int64_t off, const ValueRecipe& ra,
                        const ValueRecipe& rb, const ValueRecipe& rdc, const ValueRecipe& rdb);
Status validate_gemm_bwd_case(const Case& c);
std::vector<Case> shrink_gemm_bwd_case(const Case& c);
StatusOr<std::vector<Verdict>> run_gemm_bwd_f32(const Case& c, const std::vector<std::string>& variants,
                                                gpu::Lane& lane);

}  // namespace assay
