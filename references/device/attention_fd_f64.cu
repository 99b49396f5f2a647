// Compiled with -fmad=false (CMakeLists.txt): x +- h u and the difference quotients round as
// the host's do, so the step, u_eff and the points differenced are the host's bit for bit.
#include "references/device/attention_fd_f64.h"

#include <algorithm>

#include "harness/fd_core.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gradcheck_direction.h"
#include "references/device/attention_f64.h"
#include "references/host/attention.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 128;  // >= the largest D: thread c owns O's column c
static_assert(kThreads >= kAttentionF64MaxD);

/// The packed input l (Q, then K, then V, each dense rows x D) read from the snapshot.
struct Packed {
  InputRows q, k, v;
  int64_t nq = 0, nk = 0, D = 1;
  __device__ double at(int64_t l) const {
    const InputRows& t = l < nq ? q : l < nq + nk ? k : v;
    const int64_t e = l < nq ? l : l < nq + nk ? l - nq : l - nq - nk;
    return t.at(e / D * t.ld + e % D);
  }
};

/// Block-wide max or sum of one double per thread; every thread gets the result.
template <bool kMax>
__device__ double block_reduce(double x, double* sh) {
  sh[threadIdx.x] = x;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w)
      sh[threadIdx.x] = kMax ? fmax(sh[threadIdx.x], sh[threadIdx.x + w]) : sh[threadIdx.x] + sh[threadIdx.x + w];
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();
  return r;
}

/// The step from max_l 1 / max(|x_l|, 1) (|u_l| = 1), NaN where an input is not finite.
__global__ void __launch_bounds__(kThreads) fd_step(Packed x, int64_t n, double* h) {
  __shared__ double sh[kThreads];
  double move = 0, bad = 0;
  for (int64_t l = threadIdx.x; l < n; l += kThreads) {
    const double v = x.at(l);
    if (!isfinite(v)) bad = 1;
    move = fmax(move, 1.0 / fmax(fabs(v), 1.0));
  }
  move = block_reduce<true>(move, sh);
  bad = block_reduce<true>(bad, sh);
  if (threadIdx.x == 0) *h = bad != 0 ? NAN : fd::step(move, 1.0);
}

/// Per input: the four points x + t u and u_eff.
__global__ void fd_points(Packed x, int64_t n, uint64_t seed, AttentionFdIo io) {
  const int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (l >= n) return;
  const double h = *io.h, xl = x.at(l), u = gradcheck_sign(seed, l), h2 = h / 2;
  io.x[l] = xl + h * u;
  io.x[n + l] = xl - h * u;
  io.x[2 * n + l] = xl + h2 * u;
  io.x[3 * n + l] = xl - h2 * u;
  io.u_eff[l] = fd::u_eff(xl, u, h, true);
}

/// O and its rounding bound for query row blockIdx.x at point blockIdx.y: the host forward's
/// steps (attention_forward_packed), its sums over the keys as block reductions.
__global__ void __launch_bounds__(kThreads) fd_forward(AttentionF64Problem p, AttentionFdIo io, int64_t n) {
  __shared__ double sh[kThreads];
  const int64_t rows = p.B * p.H * p.Sq, row = blockIdx.x, pt = blockIdx.y, D = p.D, m = rows * D;
  const int64_t nq = rows * D, nk = p.B * p.Hkv * p.Sk * D;
  const int64_t i = row % p.Sq, bh = row / p.Sq, h = bh % p.H, b = bh / p.H, G = p.H / p.Hkv;
  const int64_t kbase = (b * p.Hkv + h / G) * p.Sk;
  const double* x = io.x + pt * n;
  const double* qi = x + row * D;
  double* s = io.s + (pt * rows + row) * p.Sk;
  double* smag = io.smag + (pt * rows + row) * p.Sk;
  double* y = io.y + pt * m + row * D;
  double* mg = io.mag + pt * m + row * D;
  const int tid = static_cast<int>(threadIdx.x);
  double mx = -HUGE_VAL;
  for (int64_t j = tid; j < p.Sk; j += kThreads) {
    const double mv = p.has_mask ? io.mask.at(i * io.mask.ld + j) : 0.0;
    ref::attn_score(qi, x + nq + (kbase + j) * D, D, p.scale, !(p.causal && j > i), p.has_mask, mv, s[j], smag[j]);
    mx = fmax(mx, s[j]);
  }
  mx = block_reduce<true>(mx, sh);
  if (mx == -HUGE_VAL) {  // fully masked: O = 0
    for (int64_t c = tid; c < D; c += kThreads) y[c] = 0, mg[c] = 0;
    return;
  }
  double z = 0;
  for (int64_t j = tid; j < p.Sk; j += kThreads) z += s[j] = exp(s[j] - mx);
  z = block_reduce<false>(z, sh);
  double pe = 0;
  for (int64_t j = tid; j < p.Sk; j += kThreads) {
    s[j] /= z;
    pe += s[j] * smag[j];
  }
  pe = block_reduce<false>(pe, sh);  // its barriers also publish every P_j
  if (tid >= D) return;
  const double* v = x + nq + nk + kbase * D + tid;
  double yc = 0, mc = 0;
  for (int64_t j = 0; j < p.Sk; ++j) {
    const double pj = s[j];
    if (pj == 0) continue;
    const double vj = v[j * D];
    yc += pj * vj;
    mc += ref::attn_fd_mag_weight(pj, smag[j], pe, D, p.Sk) * fabs(vj);
  }
  y[tid] = yc;
  mg[tid] = mc;
}

/// Per output: the differences at h and h/2, the scale over the four points, J u and its error
/// (NaN where a point's O or bound is not finite: the relation skips the case).
__global__ void fd_estimate(AttentionFdIo io, int64_t m) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= m) return;
  const double h = *io.h;
  double y[4], scale = 0;
  bool finite = true;
  for (int k = 0; k < 4; ++k) {
    y[k] = io.y[k * m + e];
    const double mg = io.mag[k * m + e];
    finite = finite && isfinite(y[k]) && isfinite(mg);
    scale = fmax(scale, fmax(fabs(y[k]), fabs(mg)));
  }
  if (!finite || !(h > 0)) {
    io.jvp[e] = io.err[e] = NAN;
    return;
  }
  const double d1 = (y[0] - y[1]) / (2 * h), d2 = (y[2] - y[3]) / (2 * (h / 2));
  fd::estimate(d1, d2, scale, h, io.forward_ulps, true, io.jvp[e], io.err[e]);
}

unsigned blocks(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

Status attention_fd_f64(const AttentionF64Problem& p, const AttentionFdIo& io, cudaStream_t stream) {
  if (p.D < 1 || p.D > kAttentionF64MaxD || p.Sk < 1 || p.Hkv < 1 || p.H % p.Hkv != 0)
    return invalid_argument("attention gradcheck on the device: needs 1 <= D <= 128, Sk >= 1 and Hkv | H");
  if (io.h == nullptr || io.x == nullptr || io.s == nullptr || io.smag == nullptr || io.y == nullptr ||
      io.mag == nullptr || io.jvp == nullptr || io.err == nullptr || io.u_eff == nullptr)
    return invalid_argument("attention gradcheck on the device: scratch missing");
  const int64_t rows = p.B * p.H * p.Sq, n = attention_fd_inputs(p), m = rows * p.D;
  if (rows <= 0 || n <= 0) return ok_status();
  if (rows > int64_t{0x7fffffff} || n > int64_t{kThreads} * 0x7fffffff)
    return invalid_argument("attention gradcheck on the device: problem too large for one launch");
  const Packed x{io.q, io.k, io.v, rows * p.D, p.B * p.Hkv * p.Sk * p.D, p.D};
  fd_step<<<1, kThreads, 0, stream>>>(x, n, io.h);
  CUDA_CHECK(cudaGetLastError());
  fd_points<<<blocks(n, 256), 256, 0, stream>>>(x, n, io.seed, io);
  CUDA_CHECK(cudaGetLastError());
  fd_forward<<<dim3(static_cast<unsigned>(rows), 4), kThreads, 0, stream>>>(p, io, n);
  CUDA_CHECK(cudaGetLastError());
  fd_estimate<<<blocks(m, 256), 256, 0, stream>>>(io, m);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
