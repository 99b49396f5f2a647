// Quantised GEMM kernels under test (properties/gemm_quant.cpp). Both take the "TN" layout
// cuBLASLt needs for int8 and fp8 (references/library/cublaslt_gemm.h): A is m x k and B is n x k,
// k contiguous in both, row i of A at a + i*lda, row j of B at b + j*ldb; outputs m x n row-major.
//
// int8: Acc[i][j] = sum_p A[i][p] B[j][p] in int32 (exact: k <= kInt8MaxK keeps |acc| <= 2^14 k
//       below 2^31), then the dequantisation, fused, in fp32 in this order:
//         D[i][j] = rn_out(fmaf(float(acc), sa[i] * sw[j], bias[j]))
//       (sa: per-row activation scale, m; sw: per-output-channel weight scale, n; bias: n, or
//       none = +0). Acc is optional (null: not written).
// fp8 e4m3: acc = sum_p float(A[i][p]) * float(B[j][p]) in fp32 by fmaf, 32 interleaved partial sums
//       and a shuffle tree (e4m3 -> fp32 is exact, the products of two e4m3 values are exact in
//       fp32), then D = rn_out((sa * sb) * acc) with
//       per-tensor scales sa = *scale_a, sb = *scale_b. Arbitrary m, n, k (k == 0: D = 0).
// kernels/ includes nothing of harness/ or references/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels::quant {

/// Output element type of D.
enum class OutDt : uint8_t { kF32, kF16, kBF16 };

/// Largest k of the int8 GEMM: (-128)^2 k = 2^14 k < 2^31 keeps every int32 partial sum exact.
inline constexpr int64_t kInt8MaxK = (int64_t{1} << 17) - 1;

struct GemmInt8Args {
  int64_t m = 0, n = 0, k = 0;
  const int8_t* a = nullptr;  ///< m x k, row stride lda >= k
  int64_t lda = 0;
  const int8_t* b = nullptr;  ///< n x k, row stride ldb >= k
  int64_t ldb = 0;
  const float* sa = nullptr;    ///< m per-row scales
  const float* sw = nullptr;    ///< n per-column scales
  const float* bias = nullptr;  ///< n, or null for none
  int32_t* acc = nullptr;       ///< m x n int32 accumulators, row stride ldacc; null: not written
  int64_t ldacc = 0;
  void* d = nullptr;  ///< m x n in `out`, row stride ldd
  int64_t ldd = 0;
  OutDt out = OutDt::kF32;
};

struct GemmFp8Args {
  int64_t m = 0, n = 0, k = 0;
  const uint8_t* a = nullptr;  ///< e4m3 bits, m x k, row stride lda >= k
  int64_t lda = 0;
  const uint8_t* b = nullptr;  ///< e4m3 bits, n x k, row stride ldb >= k
  int64_t ldb = 0;
  const float* scale_a = nullptr;  ///< one fp32 (device)
  const float* scale_b = nullptr;  ///< one fp32 (device)
  void* d = nullptr;               ///< m x n in `out` (kF32 or kBF16), row stride ldd
  int64_t ldd = 0;
  OutDt out = OutDt::kF32;
};

/// Launcher signatures shared by the kernels and their mutants: return the launch error
/// (cudaGetLastError after the launch), never synchronise.
using GemmInt8Launcher = cudaError_t (*)(const GemmInt8Args&, cudaStream_t);
using GemmFp8Launcher = cudaError_t (*)(const GemmFp8Args&, cudaStream_t);

/// One warp per output, lanes strided over k; __dp4a over 4-byte words where both rows are 4-byte aligned, then a
/// scalar tail (k % 4); a scalar loop for unaligned rows.
cudaError_t gemm_int8_dp4a(const GemmInt8Args& args, cudaStream_t stream);
/// One warp per output, lanes strided over k; e4m3 -> fp32 conversion and fmaf, then a shuffle sum.
cudaError_t gemm_fp8_simt(const GemmFp8Args& args, cudaStream_t stream);

}  // namespace assay::kernels::quant
