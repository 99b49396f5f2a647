// Tensor-core GEMM kernels under test: D = alpha * op(A) op(B) + beta * C, A and B both fp16 or
// both bf16, fp32 accumulation, C/D one buffer (in place) in fp32, fp16 or bf16, the result
// rounded once from fp32 into it. Row-major with leading dimensions, as kernels/gemm/gemm.h:
//   op(A) m x k: A[i][p] = a[i*lda + p] (lda >= k), or a[p*lda + i] (lda >= m) when trans_a;
//   op(B) k x n: B[p][j] = b[p*ldb + j] (ldb >= n), or b[j*ldb + p] (ldb >= k) when trans_b;
//   C, D m x n:  d[i*ldd + j] (ldd >= n).
// alpha = scalars[0], beta = scalars[1] are read on the device (cuBLAS's device pointer mode), so
// a launch never synchronises. BLAS convention: when beta == 0, C is not read (NaN in C does not
// reach D). Any m, n, k >= 0 and any leading dimensions and pointer alignment (of the element
// type) are valid; k == 0 gives D = beta * C (alpha * 0 + beta * C). No other precondition.
// kernels/ includes nothing of harness/ or references/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels {

enum class TcIn : uint8_t { kF16, kBF16 };
enum class TcOut : uint8_t { kF32, kF16, kBF16 };

struct GemmTcArgs {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  TcIn in = TcIn::kF16;    ///< A and B
  TcOut out = TcOut::kF32;  ///< C and D
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  const float* scalars = nullptr;  ///< device: {alpha, beta}
  void* d = nullptr;               ///< C on entry (read only when beta != 0), D on exit
  int64_t ldd = 0;
};

/// Launcher signature of every tensor-core GEMM variant (and mutant): returns the launch error
/// (cudaInvalidValue for bad arguments), never synchronises. m or n == 0 launches nothing.
using GemmTcLauncher = cudaError_t (*)(const GemmTcArgs&, cudaStream_t);

/// True when the arguments describe a valid problem (sizes >= 0, leading dimensions large
/// enough, non-null pointers where elements exist, m and n at most kGemmTcMaxDim).
bool gemm_tc_args_valid(const GemmTcArgs& a);
inline constexpr int64_t kGemmTcMaxDim = int64_t{1} << 20;

/// nvcuda::wmma 16x16x16 fragments: 64x64 block tile, 32-deep k-tiles staged through shared
/// memory with zero fill at every edge, fp32 accumulator fragments, epilogue through shared memory
/// with guarded stores.
cudaError_t gemm_tc_wmma(const GemmTcArgs& args, cudaStream_t stream);
/// mma.sync.aligned.m16n8k16 (f32 accumulate) with ldmatrix (.trans for the operands whose m or n
/// is contiguous), a 3-stage cp.async pipeline of 64x64x32 tiles: 16-byte cp.async where the
/// operand is 16-byte aligned (pointer and leading dimension) and the chunk lies inside, else a
/// scalar load with zero fill.
cudaError_t gemm_tc_mma(const GemmTcArgs& args, cudaStream_t stream);

/// Block tile edges (m, n) and k-tile depth of both kernels, for edge-biased shape generation.
inline constexpr int kGemmTcTileMN = 64;
inline constexpr int kGemmTcTileK = 32;

}  // namespace assay::kernels
