// Compiled with -fmad=false (CMakeLists.txt): (x - mean) rstd gamma + beta, the squared
// deviations and the bound's products must round as the host's do. The row's sums run on
// thread 0 in index order, the host reference's order; the element-wise steps are strided
// across the block. Every thread forms the row's bound from the statistics thread 0 leaves in
// shared memory (the same few hundred operations, so the same bits on every thread).
#include "references/device/norms_f64.h"

#include <algorithm>
#include <cmath>

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 256;

/// Statistics of one row that thread 0 hands to the block.
enum Stat { kMean, kVar, kRstd, kMeanAbs, kMaxAbs, kRange, kMaxGamma, kMeanSq, kStats };

__device__ double unbounded_if_nan(double t) {
  return isnan(t) ? HUGE_VAL : t;
}

__global__ void __launch_bounds__(kThreads) norm_f64(NormF64Problem p, InputRows x, InputRows gamma, InputRows beta,
                                                     NormF64Out y, NormF64Out mean, NormF64Out rstd) {
  __shared__ double part[kThreads / 32];
  __shared__ double st[kStats];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x, n = p.s.n;
  const int64_t in0 = r * x.ld;
  double* yr = y.ref + r * n;
  double* yt = y.tol + r * n;

  if (!p.rms) {
    // max |gamma_i| over the non-NaN weights (the host's running `>` skips NaN): exact in any order.
    double mg = 0;
    for (int64_t j = tid; j < n; j += kThreads) {
      const double a = ::fabs(gamma.at(j));
      if (a > mg) mg = a;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const double other = __shfl_xor_sync(0xffffffffu, mg, o);
      if (other > mg) mg = other;
    }
    if ((tid & 31) == 0) part[tid / 32] = mg;
    __syncthreads();
    if (tid == 0) {
      double v = part[0];
      for (int w = 1; w < kThreads / 32; ++w)
        if (part[w] > v) v = part[w];
      st[kMaxGamma] = v;
    }
  }

  if (tid == 0) {
    const double nn = static_cast<double>(n);
    if (p.rms) {
      // references/host/norms.h rmsnorm_reference.
      double ss = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double v = x.at(in0 + j);
        ss += v * v;
      }
      st[kMeanSq] = ss / nn;
      st[kRstd] = 1 / ::sqrt(st[kMeanSq] + p.eps);
    } else {
      // references/host/reductions.h variance_reference (ddof 0), then layernorm_reference's rstd.
      const double x0 = x.at(in0);
      double sum = 0, abs_sum = 0, mx = x0, mn = x0, max_abs = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double v = x.at(in0 + j);
        sum += v;
        abs_sum += ::fabs(v);
        if (v > mx) mx = v;
        if (v < mn) mn = v;
        if (::fabs(v) > max_abs) max_abs = ::fabs(v);
      }
      const double mu = sum / nn;
      double ss = 0, dev = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double d = x.at(in0 + j) - mu;
        ss += d * d;
        dev += d;
      }
      double var = (ss - dev * dev / nn) / nn;
      if (var < 0) var = 0;  // the correction can only overshoot by rounding
      st[kMean] = mu;
      st[kVar] = var;
      st[kRstd] = 1 / ::sqrt(var + p.eps);
      st[kMeanAbs] = abs_sum / nn;
      st[kMaxAbs] = max_abs;
      st[kRange] = mx - mn;
    }
  }
  __syncthreads();

  const double rs = st[kRstd];
  if (p.rms) {
    const RmsNormRowBound b = rmsnorm_row_bound(p.s, st[kMeanSq], rs);
    if (tid == 0) rstd.ref[r] = rs, rstd.tol[r] = unbounded_if_nan(b.rstd_tol);
    for (int64_t j = tid; j < n; j += kThreads) {
      const double g = gamma.at(j);
      const double v = x.at(in0 + j) * rs * g;
      yr[j] = v;
      yt[j] = unbounded_if_nan(rmsnorm_y_tol(b, ::fabs(v), ::fabs(g)));
    }
    return;
  }
  const double mu = st[kMean];
  LayerNormRowMags lm;
  lm.var = st[kVar];
  lm.stats = {st[kMeanAbs], st[kMaxAbs], st[kRange]};
  lm.max_abs_gamma = st[kMaxGamma];
  const LayerNormRowBound b = layernorm_row_bound(p.s, mu, rs, lm);
  if (tid == 0) {
    mean.ref[r] = mu, mean.tol[r] = unbounded_if_nan(b.mean_tol);
    rstd.ref[r] = rs, rstd.tol[r] = unbounded_if_nan(b.rstd_tol);
  }
  for (int64_t j = tid; j < n; j += kThreads) {
    const double xhat = (x.at(in0 + j) - mu) * rs;
    const double g = gamma.at(j);
    const double bt = p.bias ? beta.at(j) : 0.0;  // + 0 as the host adds it (-0 becomes +0)
    const double v = g * xhat + bt;
    yr[j] = v;
    yt[j] = unbounded_if_nan(layernorm_y_tol(b, ::fabs(v), ::fabs(g * xhat), ::fabs(g)));
  }
}

/// Element e of the constant rows (row (e / cols) * every, column e % cols) set to the row's
/// first element, or to +0. Column 0 keeps its bits (it is the source the others read).
__global__ void constant_rows_kernel(void* x, int bytes, bool zero, int64_t rows, int64_t cols, int64_t ld,
                                     int64_t every) {
  const int64_t chosen = (rows + every - 1) / every;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < chosen * cols; e += stride) {
    const int64_t row0 = (e / cols) * every * ld, j = e % cols;
    if (!zero && j == 0) continue;
    if (bytes == 4) {
      uint32_t* p = static_cast<uint32_t*>(x);
      p[row0 + j] = zero ? 0u : p[row0];
    } else {
      uint16_t* p = static_cast<uint16_t*>(x);
      p[row0 + j] = zero ? uint16_t{0} : p[row0];
    }
  }
}

}  // namespace

Status norm_f64_reference(const NormF64Problem& p, InputRows x, InputRows gamma, InputRows beta, NormF64Out y,
                          NormF64Out mean, NormF64Out rstd, cudaStream_t stream) {
  if (p.rows <= 0 || p.s.n <= 0) return ok_status();
  if (p.rows > int64_t{0x7fffffff}) return invalid_argument("norm device reference: too many rows");
  norm_f64<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p, x, gamma, beta, y, mean, rstd);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status norm_constant_rows(void* x, DType dtype, int64_t rows, int64_t cols, int64_t ld, int64_t every, bool zero,
                          cudaStream_t stream) {
  if (every <= 0 || rows <= 0 || cols <= 0) return ok_status();
  if (!input_rows_support(dtype)) return invalid_argument("norm device constant rows: fp32, fp16 or bf16 only");
  const int64_t n = (rows + every - 1) / every * cols;
  constant_rows_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096)), 256, 0, stream>>>(
      x, dtype == DType::kF32 ? 4 : 2, zero, rows, cols, ld, every);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
