// fp32 GEMM kernels under test: C = alpha * op(A) * op(B) + beta * C.
// Row-major with leading dimensions (in elements):
//   op(A) is m x k: A[i][p] = a[i*lda + p]         (lda >= k) when !trans_a,
//                   A[i][p] = a[p*lda + i]         (lda >= m) when  trans_a;
//   op(B) is k x n: B[p][j] = b[p*ldb + j]         (ldb >= n) when !trans_b,
//                   B[p][j] = b[j*ldb + p]         (ldb >= k) when  trans_b;
//   C is m x n:     C[i][j] = c[i*ldc + j]         (ldc >= n).
// BLAS convention: when beta == 0, C is not read (NaN in C does not propagate).
// Any m, n, k >= 0 is valid; k == 0 gives C = beta*C.
// kernels/ includes nothing of harness/ or references/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels {

struct GemmF32Args {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
};

/// Launcher signature shared by every fp32 GEMM variant (and mutant). Returns
/// the launch error (cudaGetLastError after the launch), never synchronises.
using GemmF32Launcher = cudaError_t (*)(const GemmF32Args&, cudaStream_t);

/// One thread per element of C, k-loop in fp32 FMA.
cudaError_t gemm_f32_naive(const GemmF32Args& args, cudaStream_t stream);
/// Shared-memory tiled (32x32 tiles of C, 32-wide k-tiles), guarded tails.
cudaError_t gemm_f32_tiled(const GemmF32Args& args, cudaStream_t stream);

/// Strided-batched form of gemm_f32_tiled: entry z (0 <= z < batch) is the GEMM
/// of `args` with a, b, c advanced by z * stride_a / stride_b / stride_c
/// elements. stride_a or stride_b 0 broadcasts one matrix to every entry; C's
/// entries must not overlap (stride_c >= (m - 1) * ldc + n when batch > 1).
cudaError_t gemm_f32_tiled_strided_batched(const GemmF32Args& args, int64_t batch, int64_t stride_a,
                                           int64_t stride_b, int64_t stride_c, cudaStream_t stream);
/// Pointer-array batched form (cublasGemmBatchedEx's): entry z uses the device
/// pointers a_array[z], b_array[z], c_array[z] (arrays in device memory);
/// args.a, args.b, args.c are ignored. The C pointers must not overlap.
cudaError_t gemm_f32_tiled_ptr_batched(const GemmF32Args& args, int64_t batch, const float* const* a_array,
                                       const float* const* b_array, float* const* c_array, cudaStream_t stream);

/// Tile edge of gemm_f32_tiled, for edge-biased shape generation.
inline constexpr int kGemmTiledTile = 32;

// The optimisation ladder (gemm_ladder_f32.cu states each rung's design).
/// Flat 256-thread blocks, lane -> column of C, one element per thread, two k chains.
cudaError_t gemm_f32_coalesced(const GemmF32Args& args, cudaStream_t stream);
/// 64x64 block tile, 4x4 register micro-tile per thread, 8-wide shared k slices.
cudaError_t gemm_f32_regblock(const GemmF32Args& args, cudaStream_t stream);
/// regblock with float4 global loads where the view is 16-byte aligned, scalar fallback otherwise.
cudaError_t gemm_f32_vec4(const GemmF32Args& args, cudaStream_t stream);
/// regblock tiles filled by a 3-stage cp.async pipeline (sm_80+), zero-filled tails.
cudaError_t gemm_f32_cpasync(const GemmF32Args& args, cudaStream_t stream);
/// Split-K: C = beta*C, then one atomicAdd of alpha*partial per k chunk (non-deterministic order).
cudaError_t gemm_f32_splitk(const GemmF32Args& args, cudaStream_t stream);
/// Split-K chunking for k >= 0: `splits` nonempty chunks of `chunk` (a multiple of 8) k each; 0, 0 for k == 0.
void gemm_f32_splitk_plan(int64_t k, int64_t& splits, int64_t& chunk);

}  // namespace assay::kernels
