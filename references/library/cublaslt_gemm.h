// cuBLASLt GEMM as a vendor reference for row-major problems (kernels/gemm/gemm.h
// conventions), per dtype: fp32 (pedantic compute), tf32, fp16, bf16 (fp32
// accumulation, output fp32 or the input type), fp8 e4m3 / e5m2 (per-tensor
// scales, fast accumulation on or off, output fp32 or bf16), int8 -> int32.
// Row-major C = op(A)op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's
// "A" is our B and its "B" is our A, each keeping its transpose flag. So the
// "TN" layout cuBLASLt requires for fp8 and int8 (its A transposed, its B not)
// is, in row-major terms, trans_a = false and trans_b = true: A is m x k and B
// is n x k, both with k contiguous.
//
// Accumulation stays in the compute type: for an fp16 or bf16 output the heuristic
// may only pick algorithms that reduce split-K partials in the compute type
// (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = COMPUTE_TYPE), never in the output
// buffer or type (INPLACE, OUTPUT_TYPE round every partial to the output type).
//
// D = alpha * scale_a * scale_b * op(A)op(B) + beta * C, computed in place
// (C and D are the same buffer, the same layout), optionally as a strided
// batch. Checked against /usr/local/cuda/include/cublasLt.h (CUDA 13.0,
// cuBLASLt 13.1): attribute names and value types are those of that header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "harness/dtype.h"
#include "harness/status.h"
#include "references/library/cublas_gemm.h"

namespace assay::vendor {

/// A fused epilogue (CUBLASLT_MATMUL_DESC_EPILOGUE): D = act(alpha op(A)op(B) + beta C + bias), the bias
/// broadcast along the rows of our row-major D (one value per column j < n). cuBLASLt's bias runs
/// along the rows of its column-major D, which is our D transposed: its "bias per row" is our bias per
/// column, so no other orientation is needed. GELU: CUBLASLT_EPILOGUE_GELU_BIAS (its form is not
/// documented; properties/gemm_epilogue.cpp tests it against the tanh form).
enum class LtEpilogue : uint8_t { kNone, kBias, kReluBias, kGeluBias };

/// One cuBLASLt GEMM, row-major. Element types decide the compute type:
///   kF32 x kF32      -> CUBLAS_COMPUTE_32F_PEDANTIC
///   kTF32 x kTF32    -> CUBLAS_COMPUTE_32F_FAST_TF32 (fp32 storage)
///   kF16 / kBF16     -> CUBLAS_COMPUTE_32F, out kF32 or the input type
///   kE4M3 / kE5M2    -> CUBLAS_COMPUTE_32F, out kF32 or kBF16 (fp8 x fp8, not e5m2 x e5m2)
///   kI8 x kI8        -> CUBLAS_COMPUTE_32I, out kI32, alpha/beta int32
struct LtGemm {
  RowMajorGemm g;  ///< m, n, k, transposes, leading dimensions (elements)
  DType a = DType::kF32, b = DType::kF32;
  DType out = DType::kF32;                           ///< C and D
  int64_t batch = 1;                                 ///< strided batch count, >= 1
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  ///< elements between batch entries
  bool fast_accum = false;                           ///< fp8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM
  /// fp8 only: device pointers to one fp32 each (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER, per
  /// tensor), or null for 1. They scale our A and B (the descriptor's B and A). Give each the
  /// alignment of the matrices (16 bytes; the campaign gives 256). Not documented: our reading
  /// of an H200 run (cuBLASLt 13.1) where cublasLtMatmul declined every fp8 GEMM, all within
  /// the documented FP8 rules, while the B scale sat 4 bytes after the A scale.
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  /// Epilogue and its bias: a device pointer to n elements of `out`'s type
  /// (CUBLASLT_MATMUL_DESC_BIAS_POINTER, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = out), required
  /// unless epilogue is kNone; batch entries share it (bias batch stride 0).
  LtEpilogue epilogue = LtEpilogue::kNone;
  const void* bias = nullptr;
};

/// The cudaDataType of a dtype (kTF32: CUDA_R_32F).
cudaDataType_t cuda_data_type(DType t);

/// Largest power of two (<= 256) that divides the byte address `p` and, for a batch, the
/// byte stride between entries: what CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES may promise.
uint32_t lt_alignment(const void* p, int64_t batch, int64_t stride_elems, size_t elem_size);

/// A cuBLASLt handle and the workspace it lends its algorithms.
class CublasLt {
 public:
  /// Creates the handle and a device workspace of `workspace_bytes` on the current device.
  static StatusOr<std::unique_ptr<CublasLt>> create(size_t workspace_bytes = size_t{32} << 20);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  cublasLtHandle_t handle() const { return handle_; }

  /// Runs `g` on `stream` (does not synchronise): the first of up to 8 algorithms of
  /// cublasLtMatmulAlgoGetHeuristic (under the pointers' actual alignment and the workspace)
  /// that cublasLtMatmul accepts; one it declines with CUBLAS_STATUS_NOT_SUPPORTED (for what
  /// the heuristic does not see) passes to the next.
  ///
  /// The documented layout requirements (cuBLAS docs, cublasLtMatmul), in this row-major
  /// interface's terms (the library's m is our n, its n our m):
  ///   fp8:  trans_a = false, trans_b = true (the library's "TN"); k, lda, ldb multiples of 16;
  ///         n * sizeof(out) and ldc * sizeof(out) multiples of 16 bytes; A, B, C (and batch
  ///         strides) 16-byte aligned; out fp32 or bf16 (C = D); m free.
  ///   int8: trans_a = false, trans_b = true; n and k multiples of 4; lda, ldb, ldc multiples
  ///         of 4; A, B, C 4-byte aligned; m free (IMMA, regular data ordering).
  /// alpha and beta are converted to the scale type (fp32, or int32 for int8: they must be
  /// integers then). Errors: kInvalidArgument for a bad description, kUnavailable when
  /// cuBLASLt has no algorithm for it (CUBLAS_STATUS_NOT_SUPPORTED, or an empty heuristic),
  /// kInternal for any other cuBLASLt failure. m or n == 0 does nothing.
  Status matmul(const LtGemm& g, double alpha, const void* a, const void* b, double beta, void* c, cudaStream_t stream);

 private:
  CublasLt() = default;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace assay::vendor
