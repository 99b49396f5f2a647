// Compiled with -fmad=false (CMakeLists.txt): y |t| and the bound's products must round as
// the host's do. The row's two sums (Z and D) run on thread 0 in index order, the host
// reference's order; the element-wise steps are strided across the block, each element's
// intermediate kept in the output buffers between the phases (a row may be longer than
// shared memory holds).
#include "references/device/softmax_f64.h"

#include <algorithm>
#include <cmath>

#include "harness/dtype_encode.h"
#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 256;

/// NaN-propagating maximum (the host's row_max returns at its first NaN).
/// -inf in the bits of an fp32, fp16 or bf16 element (input_rows_support's dtypes).
uint32_t neg_inf_bits(DType dtype) {
  return dtype == DType::kF32 ? 0xFF800000u : dtype == DType::kF16 ? 0xFC00u : 0xFF80u;
}

/// Element i of a 4- or 2-byte tensor set to `bits`.
__device__ void store_bits(void* x, int bytes, int64_t i, uint32_t bits) {
  if (bytes == 4)
    static_cast<uint32_t*>(x)[i] = bits;
  else
    static_cast<uint16_t*>(x)[i] = static_cast<uint16_t>(bits);
}

__device__ double max_nan(double a, double b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  return b > a ? b : a;
}

/// A row's softmax statistics, the same in every thread of the block.
struct RowSoftmax {
  double max, z, d, mean_t;
};

/// The steps the row kernels share, as references/host/softmax.h softmax_stats and softmax_row
/// take them: the row's maximum (exact in any order); e_j = exp(x_j - max), then Z = sum e_j in
/// index order on thread 0; p_j = e_j / Z into y and p_j |t_j| (0 where p_j is 0) into m, then D,
/// their sum in index order; with `mean_t`, mean_j |t_j| too (cross-entropy's smoothing term).
__device__ RowSoftmax row_softmax(const InputRows& x, int64_t in0, int64_t n, double* y, double* m, bool mean_t) {
  __shared__ double part[kThreads / 32];
  __shared__ double s_max, s_z, s_d, s_mean;
  const int tid = static_cast<int>(threadIdx.x);
  double mx = -HUGE_VAL;
  for (int64_t j = tid; j < n; j += kThreads) mx = max_nan(mx, x.at(in0 + j));
  for (int o = 16; o > 0; o >>= 1) mx = max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((tid & 31) == 0) part[tid / 32] = mx;
  __syncthreads();
  if (tid == 0) {
    double v = part[0];
    for (int w = 1; w < kThreads / 32; ++w) v = max_nan(v, part[w]);
    s_max = v;
  }
  __syncthreads();
  mx = s_max;
  for (int64_t j = tid; j < n; j += kThreads) y[j] = ::exp(x.at(in0 + j) - mx);
  __syncthreads();
  if (tid == 0) {
    double z = 0, ma = 0;
    for (int64_t j = 0; j < n; ++j) z += y[j];
    if (mean_t)
      for (int64_t j = 0; j < n; ++j) ma += ::fabs(x.at(in0 + j) - mx);
    s_z = z;
    s_mean = ma / static_cast<double>(n);
  }
  __syncthreads();
  const double Z = s_z;
  for (int64_t j = tid; j < n; j += kThreads) {
    const double pj = y[j] / Z;
    m[j] = pj == 0 ? 0.0 : pj * ::fabs(x.at(in0 + j) - mx);
    y[j] = pj;
  }
  __syncthreads();
  if (tid == 0) {
    double d = 0;
    for (int64_t j = 0; j < n; ++j)
      if (m[j] != 0) d += m[j];
    s_d = d;
  }
  __syncthreads();
  return {mx, Z, s_d, s_mean};
}

__global__ void __launch_bounds__(kThreads) softmax_f64(SoftmaxF64Problem p, InputRows x, double* ref, double* tol) {
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x, n = p.n;
  const int64_t in0 = r * x.ld;
  double* y = ref + r * n;
  double* m = tol + r * n;
  // y_j = softmax, m_j = y_j |t_j| (the softmax's magnitude), L = log Z.
  const RowSoftmax row = row_softmax(x, in0, n, y, m, false);
  const double mx = row.max, L = ::log(row.z), row_d = row.d;

  // The row's bound, as properties/softmax.cpp bound_fwd forms it from the reference's aux: D, L
  // and |max| where finite, else 0; under a masked-row convention a row of -inf only is exactly
  // 0 (log-softmax: -inf) with magnitude 0.
  const double D = isfinite(row_d) ? row_d : 0.0, Lf = isfinite(L) ? L : 0.0;
  const double max_abs = isfinite(mx) ? ::fabs(mx) : 0.0;
  const bool masked = p.masked_zero && mx == -HUGE_VAL;
  const ElementBound b = p.log ? log_softmax_level(p.soft, D, Lf, false) : softmax_level(p.soft, D, false);
  const double extra = p.log && p.lse_first ? lse_first_extra(max_abs, n, p.lse_u, p.lse_u_out) : 0.0;
  for (int64_t j = tid; j < n; j += kThreads) {
    const double t = x.at(in0 + j) - mx;
    double v = p.log ? t - L : y[j];
    double mag = p.log ? ::fabs(t) : m[j];
    if (masked) v = p.log ? -HUGE_VAL : 0.0, mag = 0;
    double tl = b.tol(::fabs(v), isfinite(mag) ? mag : 0.0);
    if (p.narrow && !p.log) tl = narrow_softmax_tol_of(tl, ::fabs(v), p.narrow_uo, p.narrow_sub, n);
    tl += extra;
    y[j] = v;
    m[j] = isnan(tl) ? HUGE_VAL : tl;
  }
}

__global__ void mask_rows_kernel(void* x, int bytes, uint32_t neg_inf, int64_t rows, int64_t cols, int64_t ld,
                                 int64_t every) {
  const int64_t masked = (rows + every - 1) / every;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < masked * cols; e += stride) {
    store_bits(x, bytes, (e / cols) * every * ld + e % cols, neg_inf);
  }
}

__global__ void store_rows_kernel(const double* src, void* y, int dt, int64_t rows, int64_t n, int64_t ld) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * n; e += stride) {
    const int64_t i = (e / n) * ld + e % n;
    const float f = static_cast<float>(src[e]);  // store_as: through fp32, then the narrow encoding
    if (dt == 0)
      static_cast<float*>(y)[i] = f;
    else
      static_cast<uint16_t*>(y)[i] = dt == 1 ? encode::f32_to_f16(f) : encode::f32_to_bf16(f);
  }
}

__global__ void __launch_bounds__(kThreads)
    softmax_bwd_f64(SoftmaxBwdF64Problem p, InputRows y, InputRows dy, double* ref, double* tol) {
  __shared__ double row_s, row_sa;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x, n = p.n;
  const int64_t y0 = r * y.ld, g0 = r * dy.ld;
  if (tid == 0) {
    double s = 0, sa = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double yj = y.at(y0 + j), gj = dy.at(g0 + j);
      s += p.log ? gj : yj * gj;
      sa += p.log ? ::fabs(gj) : yj * ::fabs(gj);
    }
    row_s = s, row_sa = sa;
  }
  __syncthreads();
  const double s = row_s, sa = row_sa;
  for (int64_t j = tid; j < n; j += kThreads) {
    const double yj = y.at(y0 + j), gj = dy.at(g0 + j);
    double dx, mag;
    if (p.log) {
      const double pj = ::exp(yj);
      dx = gj - pj * s;
      mag = ::fabs(gj) + pj * sa;
    } else {
      dx = yj * (gj - s);
      mag = yj * (::fabs(gj) + sa);
    }
    const double e32 = p.g * mag + p.fl;
    const double t = e32 + p.store(::fabs(dx) * (1 + 0x1p-9) + e32);
    ref[r * n + j] = dx;
    tol[r * n + j] = isnan(t) ? HUGE_VAL : t;
  }
}

__global__ void __launch_bounds__(kThreads)
    cross_entropy_prepare_kernel(CrossEntropyF64Problem p, void* logits, int bytes, uint32_t neg_inf, int64_t ld,
                                 int32_t* target) {
  __shared__ int64_t row_t;
  const int64_t r = blockIdx.x, n = p.n;
  if (threadIdx.x == 0) {
    int64_t t = target[r];
    if (!p.oob_targets && n > 0) t = ((t % n) + n) % n;
    if (p.ignore_every > 0 && r % p.ignore_every == 0) t = p.ignore_index;
    target[r] = static_cast<int32_t>(t);
    row_t = t;
  }
  __syncthreads();
  const int64_t t = row_t, every = p.inf_every;
  if (every <= 0 || r % every != every - 1 || t == p.ignore_index || t < 0 || t >= n) return;
  const bool all_but_target = (r / every) % 2 == 0;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    if (all_but_target == (j == t)) continue;  // all but the target's logit, or the target's alone
    store_bits(logits, bytes, r * ld + j, neg_inf);
  }
}

__global__ void __launch_bounds__(kThreads)
    cross_entropy_f64(CrossEntropyF64Problem p, InputRows x, const int32_t* target, double* loss_ref,
                      double* loss_tol, double* dl_ref, double* dl_tol) {
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x, n = p.n;
  const int64_t in0 = r * x.ld;
  double* y = dl_ref + r * n;
  double* m = dl_tol + r * n;
  const RowSoftmax row = row_softmax(x, in0, n, y, m, true);
  const double mx = row.max, Z = row.z, row_d = row.d, row_mean_t = row.mean_t;

  const int64_t c = target[r];
  const bool ignored = c == p.ignore_index, bad = !ignored && (c < 0 || c >= n);
  const double L = ::log(Z), D = isfinite(row_d) ? row_d : 0.0, Lf = isfinite(L) ? L : 0.0;
  if (tid == 0) {
    double loss = 0, tol = 0;
    if (bad) {
      loss = NAN;
    } else if (!ignored) {
      const double t = x.at(in0 + c) - mx;
      const double nll = L - t, mean_t = row_mean_t;
      loss = p.eps == 0 ? nll : (1 - p.eps) * nll + p.eps * (L + mean_t);
      if (isfinite(loss)) {
        const double dev = ::fabs(t);
        tol = cross_entropy_loss_tol(log_softmax_level(p.soft, D, Lf, false), n, p.eps, nll, isfinite(dev) ? dev : 0.0,
                                     L, mean_t, loss, p.f32_max);
      }
    }
    loss_ref[r] = loss;
    loss_tol[r] = isnan(tol) ? HUGE_VAL : tol;
  }
  const ElementBound sb = softmax_level(p.soft, D, false);
  const double u32 = 0x1p-24, g3 = gamma_n(3, u32);
  for (int64_t j = tid; j < n; j += kThreads) {
    double d = 0, tol = 0;
    if (bad) {
      d = NAN;
    } else if (!ignored) {
      const double q = (j == c ? 1 - p.eps : 0.0) + p.eps / static_cast<double>(n);
      const double pj = y[j], mag = isfinite(m[j]) ? m[j] : 0.0;
      d = pj - q;
      if (isfinite(d)) {
        const double e32 = (1 + u32) * (sb.tol(pj, mag) + g3 * q) + u32 * ::fabs(d);
        tol = e32 + p.store(::fabs(d) + e32);
      }
    }
    y[j] = d;
    m[j] = isnan(tol) ? HUGE_VAL : tol;
  }
}

}  // namespace

Status cross_entropy_prepare(const CrossEntropyF64Problem& p, void* logits, DType dtype, int64_t ld, int32_t* target,
                             cudaStream_t stream) {
  if (p.rows <= 0) return ok_status();
  if (!input_rows_support(dtype)) return invalid_argument("cross_entropy device prepare: fp32, fp16 or bf16 logits");
  if (p.rows > int64_t{0x7fffffff}) return invalid_argument("cross_entropy device prepare: too many rows");
  cross_entropy_prepare_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(
      p, logits, dtype == DType::kF32 ? 4 : 2, neg_inf_bits(dtype), ld, target);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status cross_entropy_f64_reference(const CrossEntropyF64Problem& p, InputRows logits, const int32_t* target,
                                   double* loss_ref, double* loss_tol, double* dl_ref, double* dl_tol,
                                   cudaStream_t stream) {
  if (p.rows <= 0 || p.n <= 0) return ok_status();
  if (p.rows > int64_t{0x7fffffff}) return invalid_argument("cross_entropy device reference: too many rows");
  cross_entropy_f64<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p, logits, target, loss_ref, loss_tol,
                                                                             dl_ref, dl_tol);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status softmax_prepare_saved(bool log, void* y, DType dtype, int64_t rows, int64_t n, int64_t ld, double* tmp_ref,
                             double* tmp_tol, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return ok_status();
  if (!input_rows_support(dtype)) return invalid_argument("softmax device prepare: fp32, fp16 or bf16 only");
  SoftmaxF64Problem q;
  q.rows = rows, q.n = n, q.log = log;  // the tolerances it also writes are not read
  ASSAY_RETURN_IF_ERROR(softmax_f64_reference(q, input_rows(y, n, ld, dtype), tmp_ref, tmp_tol, stream));
  const int dt = dtype == DType::kF32 ? 0 : dtype == DType::kF16 ? 1 : 2;
  store_rows_kernel<<<static_cast<unsigned>(std::min<int64_t>((rows * n + 255) / 256, 4096)), 256, 0, stream>>>(
      tmp_ref, y, dt, rows, n, ld);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status softmax_bwd_f64_reference(const SoftmaxBwdF64Problem& p, InputRows y, InputRows dy, double* ref, double* tol,
                                 cudaStream_t stream) {
  if (p.rows <= 0 || p.n <= 0) return ok_status();
  if (p.rows > int64_t{0x7fffffff}) return invalid_argument("softmax_bwd device reference: too many rows");
  softmax_bwd_f64<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p, y, dy, ref, tol);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status softmax_f64_reference(const SoftmaxF64Problem& p, InputRows x, double* ref, double* tol, cudaStream_t stream) {
  if (p.rows <= 0 || p.n <= 0) return ok_status();
  if (p.rows > int64_t{0x7fffffff}) return invalid_argument("softmax device reference: too many rows");
  softmax_f64<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p, x, ref, tol);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status softmax_mask_rows(void* x, DType dtype, int64_t rows, int64_t cols, int64_t ld, int64_t every,
                         cudaStream_t stream) {
  if (every <= 0 || rows <= 0 || cols <= 0) return ok_status();
  if (!input_rows_support(dtype)) return invalid_argument("softmax device mask: fp32, fp16 or bf16 only");
  const int64_t n = (rows + every - 1) / every * cols;
  mask_rows_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096)), 256, 0, stream>>>(
      x, dtype == DType::kF32 ? 4 : 2, neg_inf_bits(dtype), rows, cols, ld, every);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
