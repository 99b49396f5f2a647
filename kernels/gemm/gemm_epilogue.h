// GEMM with a fused bias + activation epilogue, and its backward (kernels under test).
//
// Forward:  Z = op(A) op(B) + bias (bias per output column, length n), Y = act(Z),
//           act in {none, relu, gelu}; GELU is the tanh form
//           0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the form cuBLASLt's
//           CUBLASLT_EPILOGUE_GELU_BIAS is taken to use (properties/gemm_epilogue.cpp says why).
//           Z is written too when z != nullptr (the auxiliary output of GELU_AUX_BIAS).
// Backward: given A, B, Z and dY:  dZ = dY * act'(Z) (kept in fp32, never stored),
//           dA  = dZ op(B)^T            (written, in A's storage layout),
//           dB += op(A)^T dZ            (accumulated, in B's storage layout),
//           dbias += sum_i dZ[i][:]     (accumulated; a fixed-order reduction: deterministic).
//           relu'(z) = 1 for z > 0, 0 otherwise (PyTorch's convention at z = 0).
// Storage: fp32, fp16 or bf16 for every tensor of a call (one dtype); accumulation and the
// epilogue in fp32 (fmaf), one rounding at each store. Row-major with leading dimensions
// (elements), as kernels/gemm/gemm.h: op(A) m x k (A[i][p] = a[i*lda + p], or a[p*lda + i]
// when trans_a), op(B) k x n (b[p*ldb + j], or b[j*ldb + p] when trans_b), Y, Z, dY m x n.
// Any m, n, k >= 0; k == 0 gives Y = act(bias). kernels/ includes nothing of harness/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels::epi {

enum class Dt : uint8_t { kF32, kF16, kBF16 };
enum class Act : uint8_t { kNone, kRelu, kGelu };

struct FwdArgs {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  Dt dt = Dt::kF32;
  Act act = Act::kNone;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  const void* bias = nullptr;  ///< n elements
  void* y = nullptr;
  int64_t ldy = 0;
  void* z = nullptr;  ///< optional pre-activation output (nullptr: not written)
  int64_t ldz = 0;
};

struct BwdArgs {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  Dt dt = Dt::kF32;
  Act act = Act::kNone;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  const void* z = nullptr;  ///< pre-activation, m x n
  int64_t ldz = 0;
  const void* dy = nullptr;  ///< m x n
  int64_t lddy = 0;
  void* da = nullptr;  ///< A's layout, written
  int64_t ldda = 0;
  void* db = nullptr;  ///< B's layout, accumulated
  int64_t lddb = 0;
  void* dbias = nullptr;  ///< n elements, accumulated
};

using FwdFn = cudaError_t (*)(const FwdArgs&, cudaStream_t);
using BwdFn = cudaError_t (*)(const BwdArgs&, cudaStream_t);

/// 32x32 shared-memory tiles of Y, 32-deep k-tiles, fp32 FMA, the epilogue fused into the store.
cudaError_t gemm_bias_act_tiled(const FwdArgs& args, cudaStream_t stream);
/// Backward: dA and dB by 32x32 shared-memory tiles with dZ formed on the fly while loading,
/// dbias by one thread per column summing rows 0..m-1 in order. Deterministic.
cudaError_t gemm_bias_act_bwd(const BwdArgs& args, cudaStream_t stream);

/// Tile edge of the kernels, for edge-biased shape generation.
inline constexpr int kEpilogueTile = 32;

}  // namespace assay::kernels::epi
