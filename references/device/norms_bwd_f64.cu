// Compiled with -fmad=false (CMakeLists.txt): every product and sum must round as the host's.
#include "references/device/norms_bwd_f64.h"

#include <algorithm>
#include <cmath>

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 256;

/// A row's figures that thread 0 hands to the block.
enum RowStat { kM1, kM2, kA1, kA2, kMxh, kMdxh, kBm2, kXmax, kRowStats };

__device__ double unbounded_if_nan(double t) {
  return isnan(t) ? HUGE_VAL : t;
}

__global__ void __launch_bounds__(kThreads) norm_bwd_rows(NormBwdF64Problem p, NormBwdF64Io io) {
  __shared__ double st[kRowStats];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x, n = p.n;
  const int64_t x0 = r * io.x.ld, d0 = r * io.dy.ld;
  const double mu = p.rms ? 0.0 : io.mean.at(r), rs = io.rstd.at(r);
  if (tid == 0) {
    // backward.h layernorm_backward / rmsnorm_backward's row sums, then bound_bwd's.
    double m1 = 0, m2 = 0, a1 = 0, a2 = 0, m_xh = 0, m_dxh = 0, bm2 = 0, xmax = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double x = io.x.at(x0 + i), dy = io.dy.at(d0 + i), g = io.gamma.at(i);
      // xhat and dy * gamma, as both backwards and bound_bwd form them (rmsnorm's mu is 0, and
      // its term dy g x rs is (dy g) x rs, evaluated left to right).
      const double xhat = (x - mu) * rs, dxh = dy * g;
      if (p.rms) {
        const double t = dxh * x * rs;
        m2 += t;
        a2 += ::fabs(t);
      } else {
        m1 += dxh;
        m2 += dxh * xhat;
        a1 += ::fabs(dxh);
        a2 += ::fabs(dxh) * (::fabs(x) + ::fabs(mu)) * rs;
      }
      m_xh += ::fabs(xhat), m_dxh += ::fabs(dxh), bm2 += dxh * xhat;
      xmax = ::fmax(xmax, ::fabs(x) + ::fabs(mu));
    }
    const double nn = static_cast<double>(n), nd = ::fmax(1.0, nn);
    st[kM1] = m1 / nn, st[kM2] = m2 / nn, st[kA1] = a1 / nn, st[kA2] = a2 / nn;
    st[kMxh] = m_xh / nd, st[kMdxh] = m_dxh / nd, st[kBm2] = ::fabs(bm2) / nd, st[kXmax] = xmax;
  }
  __syncthreads();
  const bool rs_flushed = p.ftz && rs != 0 && ::fabs(rs) < 0x1p-126;
  for (int64_t i = tid; i < n; i += kThreads) {
    const double x = io.x.at(x0 + i), dy = io.dy.at(d0 + i), g = io.gamma.at(i);
    const double xhat = (x - mu) * rs, dxh = dy * g;
    double dx, mag;
    if (p.rms) {
      dx = rs * (dxh - xhat * st[kM2]);
      mag = rs * (::fabs(dxh) + ::fabs(xhat) * st[kA2]);
    } else {
      dx = rs * (dxh - st[kM1] - xhat * st[kM2]);
      mag = rs * (::fabs(dxh) + st[kA1] + (::fabs(x) + ::fabs(mu)) * rs * st[kA2]);
    }
    // bound_bwd's dX ceiling.
    const double under = ::fabs(rs) * p.U * (3 + st[kBm2] + ::fabs(xhat) * (1 + st[kMxh] + st[kMdxh])) + p.U;
    const double e = p.gdx * mag + under;
    double tol = e + p.store(::fabs(dx) * (1 + 0x1p-9) + e);
    if (rs_flushed) tol += ::fabs(dx);
    if (!(st[kXmax] < p.big && static_cast<double>(n) * mag < p.big)) tol = HUGE_VAL;
    const int64_t l = r * n + i;
    io.dx_ref[l] = dx;
    io.dx_tol[l] = unbounded_if_nan(tol);
  }
}

__global__ void __launch_bounds__(kThreads) norm_bwd_columns(NormBwdF64Problem p, NormBwdF64Io io) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.n) return;
  double dg = 0, dga = 0, db = 0, dba = 0, col_dy = 0, col_x = 0, col_lost = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    const double mu = p.rms ? 0.0 : io.mean.at(r), rs = io.rstd.at(r);
    const double up = io.dy.at(r * io.dy.ld + i), xi = io.x.at(r * io.x.ld + i);
    if (p.rms) {
      const double t = up * xi * rs;
      dg += t;
      dga += ::fabs(t);
    } else {
      dg += up * ((xi - mu) * rs);
      dga += ::fabs(up) * (::fabs(xi) + ::fabs(mu)) * rs;
      db += up;
      dba += ::fabs(up);
    }
    // bound_bwd's column sums.
    const double xh = (xi - mu) * rs;
    col_dy += p.ftz ? ::fabs(up) * ::fmax(1.0, ::fabs(rs)) + ::fabs(xh) : ::fabs(up);
    if (p.ftz && rs != 0 && ::fabs(rs) < 0x1p-126) col_lost += ::fabs(up * xh);
    col_x = ::fmax(col_x, ::fabs(xi) + ::fabs(mu));
  }
  double tg = p.gdg * dga + p.U * (col_dy + p.flushes) + col_lost * (1 + p.gdg);
  if (!(dga < p.big && col_x < p.big)) tg = HUGE_VAL;
  io.dgamma_ref[i] = dg;
  io.dgamma_tol[i] = unbounded_if_nan(tg);
  if (p.dbeta) {
    double tb = p.gdb * dba + p.U * p.flushes;
    if (!(dba < p.big)) tb = HUGE_VAL;
    io.dbeta_ref[i] = db;
    io.dbeta_tol[i] = unbounded_if_nan(tb);
  }
}

__global__ void saved_stats(const double* mean, const double* rstd, int64_t rows, float* mean_out, float* rstd_out) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (r >= rows) return;
  if (mean != nullptr) mean_out[r] = static_cast<float>(mean[r]);
  rstd_out[r] = static_cast<float>(rstd[r]);
}

}  // namespace

Status norm_bwd_f64_reference(const NormBwdF64Problem& p, const NormBwdF64Io& io, cudaStream_t stream) {
  if (p.rows <= 0 || p.n <= 0) return ok_status();
  if (p.rows > 0x7fffffff || (p.n + kThreads - 1) / kThreads > 0x7fffffff)
    return invalid_argument("norm backward device reference: problem too large for one launch");
  norm_bwd_rows<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p, io);
  CUDA_CHECK(cudaGetLastError());
  norm_bwd_columns<<<static_cast<unsigned>((p.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p, io);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status norm_saved_stats(const double* mean, const double* rstd, int64_t rows, float* mean_out, float* rstd_out,
                        cudaStream_t stream) {
  if (rows <= 0) return ok_status();
  saved_stats<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(mean, rstd, rows,
                                                                                                mean_out, rstd_out);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
