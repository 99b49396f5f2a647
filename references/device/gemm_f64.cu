#include "references/device/gemm_f64.h"

#include <cmath>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "harness/bound_core.h"
#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

// Every fp32, fp16 and bf16 value is exact in fp64.
__device__ inline double load_f64(const void* x, int64_t i, DType t) {
  switch (t) {
    case DType::kF16:
      return static_cast<double>(__half2float(static_cast<const __half*>(x)[i]));
    case DType::kBF16:
      return static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]));
    default:
      return static_cast<double>(static_cast<const float*>(x)[i]);
  }
}

// v = x and abs_v = |x|, or its nominal magnitude max(|x|, nominal) for x != 0. A gap's NaN
// canary stays NaN in both.
__global__ void widen(const void* x, DType t, int64_t n, double nominal, double* v, double* abs_v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double d = load_f64(x, i, t);
    v[i] = d;
    abs_v[i] = d != 0 && fabs(d) < nominal ? nominal : fabs(d);
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

// gemm_tc's D (gemm_tc_f64_finish). dot's magnitude without alpha and beta, which the overflow
// test reads as dmag, is the nominal one here: it exceeds the true one by less than 4 per term
// (a subnormal's nominal min_normal times the other factor's largest finite value, fp16 and
// bf16 alike), so the test differs from the host's only where dmag lies within 4k below half
// of FLT_MAX, and there the device leaves unchecked what the host checks.
__global__ void tc_finish(F64TcFinish f, double* ref, double* mag) {
  const int64_t total = f.m * f.n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / f.n, col = i % f.n;
    const double nmag = mag[i];
    double r = f.alpha * ref[i], s = fabs(f.alpha) * nmag;
    if (f.beta != 0) {
      const double v = load_f64(f.c, row * f.ldc + col, f.c_type);
      r += f.beta * v;
      s += fabs(f.beta) * fabs(v);
    }
    double slack = 0;
    bool overflows = false;
    if (f.stats != nullptr) {
      const double* st = f.stats;
      overflows = alpha_scaled_overflows(fabs(f.alpha), fmax(st[row], st[2 * f.m + col]));
      slack = alpha_scaled_slack(fmax(st[f.m + row], st[2 * f.m + f.n + col]));
    }
    const double tol = f64_tc_element_tol(f.tol, fabs(r), s, nmag, slack, overflows);
    ref[i] = r;
    mag[i] = tol != tol ? HUGE_VAL : tol;
  }
}

// gemm_bias_act's Z and Y (gemm_epi_f64_finish).
__global__ void epi_finish(F64EpiFinish f, double* y_ref, double* y_tol, double* z_ref, double* z_mag) {
  const int64_t total = f.m * f.n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const double b = load_f64(f.bias, i % f.n, f.bias_type);
    const double z = z_ref[i] + b, mag = z_mag[i] + fabs(b);
    double y = z;
    if (f.act == 1) {
      y = z > 0.0 ? z : 0.0;
    } else if (f.act == 2) {
      const double w = f.gelu_k * (z + 0.044715 * z * z * z);
      y = z * (1.0 / (1.0 + exp(-(2.0 * w))));
    }
    double ty = 0, tz = 0;
    f64_epi_element_tol(f.tol, z, y, mag, &ty, &tz);
    y_ref[i] = y;
    y_tol[i] = ty != ty ? HUGE_VAL : ty;
    z_ref[i] = z;
    z_mag[i] = tz != tz ? HUGE_VAL : tz;
  }
}

// max |x| and sum |x| of each of `lines` lines of `len` elements, line l's element q at
// x[l * line_step + q * elem_step]: one warp per line (reads coalesced where elem_step is 1,
// and where line_step is 1 across the warps of a block).
__global__ void line_stats(const void* x, DType t, int64_t lines, int64_t len, int64_t line_step, int64_t elem_step,
                           double* max_out, double* sum_out) {
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t l = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; l < lines; l += warps) {
    double mx = 0, sm = 0;
    for (int64_t q = threadIdx.x % 32; q < len; q += 32) {
      const double v = fabs(load_f64(x, l * line_step + q * elem_step, t));
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

Status gemm_f64_products(cublasHandle_t handle, cudaStream_t stream, const vendor::RowMajorGemm& g,
                         const F64Operands& x, double* dot, double* mag, double* scratch, double* stats) {
  if (g.m == 0 || g.n == 0) return ok_status();
  if (x.in != DType::kF32 && x.in != DType::kF16 && x.in != DType::kBF16)
    return invalid_argument("gemm_f64_products: operands must be fp32, fp16 or bf16");
  double* a64 = scratch;
  double* a_abs = a64 + x.extent_a;
  double* b64 = a_abs + x.extent_a;
  double* b_abs = b64 + x.extent_b;
  if (stats != nullptr && g.k > 0) {
    // Row i of op(A): A[i][q] (lda apart per row) or, transposed, A[q][i]; column j of op(B):
    // B[q][j] or, transposed, B[j][q].
    const int64_t a_line = g.trans_a ? 1 : g.lda, a_elem = g.trans_a ? g.lda : 1;
    const int64_t b_line = g.trans_b ? g.ldb : 1, b_elem = g.trans_b ? 1 : g.ldb;
    line_stats<<<blocks_for(32 * g.m), 256, 0, stream>>>(x.a, x.in, g.m, g.k, a_line, a_elem, stats, stats + g.m);
    line_stats<<<blocks_for(32 * g.n), 256, 0, stream>>>(x.b, x.in, g.n, g.k, b_line, b_elem, stats + 2 * g.m,
                                                         stats + 2 * g.m + g.n);
  } else if (stats != nullptr) {
    CUDA_CHECK(cudaMemsetAsync(stats, 0, sizeof(double) * 2 * (g.m + g.n), stream));
  }
  // Gap elements hold NaN canaries; they widen to NaN and are never read by a
  // correct GEMM, so they cannot reach ref.
  if (x.extent_a > 0) widen<<<blocks_for(x.extent_a), 256, 0, stream>>>(x.a, x.in, x.extent_a, x.nominal, a64, a_abs);
  if (x.extent_b > 0) widen<<<blocks_for(x.extent_b), 256, 0, stream>>>(x.b, x.in, x.extent_b, x.nominal, b64, b_abs);
  CUDA_CHECK(cudaGetLastError());
  vendor::RowMajorGemm out = g;
  out.ldc = g.n;
  if (g.k == 0) {
    CUDA_CHECK(cudaMemsetAsync(dot, 0, sizeof(double) * g.m * g.n, stream));
    CUDA_CHECK(cudaMemsetAsync(mag, 0, sizeof(double) * g.m * g.n, stream));
    return ok_status();
  }
  ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f64_pedantic(handle, out, 1.0, a64, b64, 0.0, dot));
  return vendor::cublas_gemm_f64_pedantic(handle, out, 1.0, a_abs, b_abs, 0.0, mag);
}

Status gemm_f64_reference(cublasHandle_t handle, cudaStream_t stream, const vendor::RowMajorGemm& g, double alpha,
                          const float* a, int64_t extent_a, const float* b, int64_t extent_b, double beta,
                          const float* c, double* ref, double* mag, double* scratch, double slack_to_mag) {
  if (g.m == 0 || g.n == 0) return ok_status();
  double* stats = slack_to_mag > 0 && fabs(alpha) != 0 && fabs(alpha) != 1 && g.k > 0
                      ? gemm_f64_stats(scratch, extent_a, extent_b)
                      : nullptr;
  const F64Operands x{DType::kF32, a, extent_a, b, extent_b, 0};
  ASSAY_RETURN_IF_ERROR(gemm_f64_products(handle, stream, g, x, ref, mag, scratch, stats));
  combine<<<blocks_for(g.m * g.n), 256, 0, stream>>>(c, g.ldc, g.m, g.n, alpha, beta, ref, mag, stats, slack_to_mag);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status gemm_tc_f64_finish(const F64TcFinish& f, double* ref, double* mag, cudaStream_t stream) {
  if (f.m == 0 || f.n == 0) return ok_status();
  tc_finish<<<blocks_for(f.m * f.n), 256, 0, stream>>>(f, ref, mag);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status gemm_epi_f64_finish(const F64EpiFinish& f, double* y_ref, double* y_tol, double* z_ref, double* z_mag,
                           cudaStream_t stream) {
  if (f.m == 0 || f.n == 0) return ok_status();
  epi_finish<<<blocks_for(f.m * f.n), 256, 0, stream>>>(f, y_ref, y_tol, z_ref, z_mag);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
