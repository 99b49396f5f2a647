#include "references/device/gemm_f64.h"

#include <cmath>

#include "harness/bound_core.h"
#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

__global__ void widen(const float* x, int64_t n, double* v, double* abs_v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double d = static_cast<double>(x[i]);
    v[i] = d;
    abs_v[i] = fabs(d);
  }
}

// ref = alpha*P + beta*C and mag = |alpha|*M + |beta||C| from the products
// P = A*B and M = |A||B|, in the same order of operations as the host
// reference. alpha is applied here, not by cuBLAS: with alpha == 0 cuBLAS
// skips A*B entirely (the BLAS quick return), while the harness follows IEEE
// arithmetic, 0*Inf = NaN, exactly like references/host and the kernels.
// `stats` (the alpha-scaled operand rule, null: off): max |x| and sum |x| per row of op(A)
// then per column of op(B), [max_a m][sum_a m][max_b n][sum_b n]. properties/gemm_common.h
// AlphaScaledOperands on the host: where |alpha| > 1 scales an element an output reads to
// FLT_MAX, mag is +Inf (the output unchecked); elsewhere half a subnormal spacing per product,
// times slack_to_mag (1 / the ceiling's rel_mag), so that the ceiling grows by that slack.
__global__ void combine(const float* c, int64_t ldc, int64_t m, int64_t n, double alpha, double beta, double* ref,
                        double* mag, const double* stats, double slack_to_mag) {
  const int64_t total = m * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    double r = alpha * ref[i];
    double s = fabs(alpha) * mag[i];
    const int64_t row = i / n, col = i % n;
    // C given (read even with beta == 0, a variant's declared convention): 0 * C is NaN where C
    // is NaN or Inf, as in the kernel; its magnitude adds nothing then.
    if (c != nullptr) {
      const double v = static_cast<double>(c[row * ldc + col]);
      r += beta * v;
      if (beta != 0) s += fabs(beta) * fabs(v);
    }
    if (stats != nullptr) {
      const double max_x = fmax(stats[row], stats[2 * m + col]), sum_x = fmax(stats[m + row], stats[2 * m + n + col]);
      if (alpha_scaled_overflows(fabs(alpha), max_x))
        s = INFINITY;
      else
        s += alpha_scaled_slack(sum_x) * slack_to_mag;
    }
    ref[i] = r;
    mag[i] = s;
  }
}

// max |x| and sum |x| of each of `lines` lines of `len` elements, line l's element q at
// x[l * line_step + q * elem_step]: one warp per line (reads coalesced where elem_step is 1,
// and where line_step is 1 across the warps of a block).
__global__ void line_stats(const float* x, int64_t lines, int64_t len, int64_t line_step, int64_t elem_step,
                           double* max_out, double* sum_out) {
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t l = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; l < lines; l += warps) {
    double mx = 0, sm = 0;
    for (int64_t q = threadIdx.x % 32; q < len; q += 32) {
      const double v = fabs(static_cast<double>(x[l * line_step + q * elem_step]));
      mx = fmax(mx, v);
      sm += v;
    }
    for (int o = 16; o > 0; o >>= 1) {
      mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      sm += __shfl_xor_sync(0xffffffffu, sm, o);
    }
    if (threadIdx.x % 32 == 0) max_out[l] = mx, sum_out[l] = sm;
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
}

}  // namespace

Status gemm_f64_reference(cublasHandle_t handle, cudaStream_t stream, const vendor::RowMajorGemm& g, double alpha,
                          const float* a, int64_t extent_a, const float* b, int64_t extent_b, double beta,
                          const float* c, double* ref, double* mag, double* scratch, double slack_to_mag) {
  if (g.m == 0 || g.n == 0) return ok_status();
  double* a64 = scratch;
  double* a_abs = a64 + extent_a;
  double* b64 = a_abs + extent_a;
  double* b_abs = b64 + extent_b;
  double* stats = nullptr;
  if (slack_to_mag > 0 && fabs(alpha) != 0 && fabs(alpha) != 1 && g.k > 0) {
    stats = b_abs + extent_b;
    // Row i of op(A): A[i][q] (lda apart per row) or, transposed, A[q][i]; column j of op(B):
    // B[q][j] or, transposed, B[j][q].
    const int64_t a_line = g.trans_a ? 1 : g.lda, a_elem = g.trans_a ? g.lda : 1;
    const int64_t b_line = g.trans_b ? g.ldb : 1, b_elem = g.trans_b ? 1 : g.ldb;
    line_stats<<<blocks_for(32 * g.m), 256, 0, stream>>>(a, g.m, g.k, a_line, a_elem, stats, stats + g.m);
    line_stats<<<blocks_for(32 * g.n), 256, 0, stream>>>(b, g.n, g.k, b_line, b_elem, stats + 2 * g.m,
                                                         stats + 2 * g.m + g.n);
  }
  // Gap elements hold NaN canaries; they widen to NaN and are never read by a
  // correct GEMM, so they cannot reach ref.
  if (extent_a > 0) widen<<<blocks_for(extent_a), 256, 0, stream>>>(a, extent_a, a64, a_abs);
  if (extent_b > 0) widen<<<blocks_for(extent_b), 256, 0, stream>>>(b, extent_b, b64, b_abs);
  CUDA_CHECK(cudaGetLastError());
  vendor::RowMajorGemm out = g;
  out.ldc = g.n;
  if (g.k == 0) {
    CUDA_CHECK(cudaMemsetAsync(ref, 0, sizeof(double) * g.m * g.n, stream));
    CUDA_CHECK(cudaMemsetAsync(mag, 0, sizeof(double) * g.m * g.n, stream));
  } else {
    ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f64_pedantic(handle, out, 1.0, a64, b64, 0.0, ref));
    ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f64_pedantic(handle, out, 1.0, a_abs, b_abs, 0.0, mag));
  }
  combine<<<blocks_for(g.m * g.n), 256, 0, stream>>>(c, g.ldc, g.m, g.n, alpha, beta, ref, mag, stats, slack_to_mag);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
