// Forward of scaled dot-product attention, FlashAttention-2 style (Dao 2023,
// Algorithm 1) on CUDA cores: a CTA owns 32 query rows of one (batch, head),
// 4 warps x 8 rows; it walks the keys in tiles of 64 (K and V staged in shared
// memory as fp32), keeps per row the running max m, the running sum l of
// exp(s - m) and the unnormalised output o (lane c owns columns c, c+32, ...),
// and rescales l and o by exp(m_old - m_new) whenever a tile raises the max
// (online softmax, Milakov and Gimelshein 2018). The Sq x Sk scores are never
// stored: each lane computes the scores of two keys of the tile for one row at
// a time (a serial fp32 FMA dot product over d, in column order), the warp
// reduces the tile's max and sum, and the row's 64 probabilities go through a
// per-warp shared buffer into o.
//
// Error budget the spec's bound (properties/attention.cpp) relies on:
// - a score is fl(fl(q.k) * scale) [+ mask, one more rounding]: gamma_{d+2};
// - p = expf(s - m) (expf, 2 ulp; never __expf), alpha = expf(m_old - m_new),
//   one rescale per tile: at most ceil(Sk/64) rescales on any term's path;
// - l and every o column are sums of <= Sk terms (tile sums by a warp
//   butterfly, tiles added serially), then o * (1/l) and m + logf(l);
// - keys beyond Sk and invisible keys score -inf, so p = 0 exactly, and the
//   tail rows of the V tile are zero-filled (0 * garbage could be NaN).
// Fully masked rows keep l = 0: O = 0 and LSE = -inf (attention.h).
#include <cmath>

#include "kernels/attention/common.cuh"

namespace assay::kernels::attention {
namespace {

using namespace detail;

template <typename T, int NC>
__global__ void __launch_bounds__(kFwdWarps * 32) flash_fwd_kernel(FwdParams<T> p) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(p.s.d), ks = odd_stride(d);
  float* qs = smem;              // [kFwdBq][d]
  float* kt = qs + kFwdBq * d;   // [kFwdBk][ks]
  float* vt = kt + kFwdBk * ks;  // [kFwdBk][d]
  float* ps = vt + kFwdBk * d;   // [warps][rows][kFwdBk]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int64_t sq = p.s.sq, sk = p.s.sk;
  const int64_t bh = blockIdx.y, b = bh / p.s.heads, h = bh % p.s.heads;
  const int64_t g = h / (p.s.heads / p.s.kv_heads);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kFwdBq;
  const T* Q = p.q + bh * sq * p.ldq;
  const T* K = p.k + (b * p.s.kv_heads + g) * sk * p.ldk;
  const T* V = p.v + (b * p.s.kv_heads + g) * sk * p.ldv;

  for (int e = tid; e < kFwdBq * d; e += blockDim.x) {
    const int r = e / d, c = e % d;
    qs[e] = q0 + r < sq ? to_float(Q[(q0 + r) * p.ldq + c]) : 0.f;
  }
  float m[kFwdRowsPerWarp], l[kFwdRowsPerWarp], o[kFwdRowsPerWarp][NC];
#pragma unroll
  for (int r = 0; r < kFwdRowsPerWarp; ++r) {
    m[r] = neg_inf();
    l[r] = 0.f;
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) o[r][cc] = 0.f;
  }
  // Causal (top-left): the block's last row q0 + 31 sees keys j <= q0 + 31 only.
  const int64_t kend = p.s.causal ? std::min<int64_t>(sk, q0 + kFwdBq) : sk;
  float* pw = ps + warp * kFwdRowsPerWarp * kFwdBk;
  for (int64_t k0 = 0; k0 < kend; k0 += kFwdBk) {
    __syncthreads();  // the previous tile is consumed (and, first time, the Q block is stored)
    for (int e = tid; e < kFwdBk * d; e += blockDim.x) {
      const int r = e / d, c = e % d;
      const bool in = k0 + r < sk;  // tail guard: keys beyond Sk are zeros and score -inf below
      kt[r * ks + c] = in ? to_float(K[(k0 + r) * p.ldk + c]) : 0.f;
      vt[r * d + c] = in ? to_float(V[(k0 + r) * p.ldv + c]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kFwdRowsPerWarp; ++r) {
      const int lr = warp * kFwdRowsPerWarp + r;
      const int64_t i = q0 + lr;
      float s[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int jl = lane + 32 * t;
        const int64_t j = k0 + jl;
        float acc = 0.f;
        for (int c = 0; c < d; ++c) acc = fmaf(qs[lr * d + c], kt[jl * ks + c], acc);
        float x = acc * p.s.scale;
        const bool visible = i < sq && j < sk && (!p.s.causal || j <= i);
        if (visible && p.mask != nullptr) x = x + p.mask[i * p.ldm + j];
        s[t] = visible ? x : neg_inf();
      }
      const float m_new = fmaxf(m[r], warp_max(fmaxf(s[0], s[1])));
      float alpha = 1.f, p0 = 0.f, p1 = 0.f;
      if (m_new != neg_inf()) {      // else every key so far is invisible: nothing to add or rescale
        alpha = expf(m[r] - m_new);  // m = -inf: 0 (l and o are still 0)
        p0 = expf(s[0] - m_new);
        p1 = expf(s[1] - m_new);
      }
      l[r] = l[r] * alpha + warp_sum(p0 + p1);
      m[r] = m_new;
      pw[r * kFwdBk + lane] = p0;
      pw[r * kFwdBk + lane + 32] = p1;
      __syncwarp();
#pragma unroll
      for (int cc = 0; cc < NC; ++cc) {
        const int c = lane + 32 * cc;
        if (c < d) {
          float acc = o[r][cc] * alpha;
          for (int jl = 0; jl < kFwdBk; ++jl) acc = fmaf(pw[r * kFwdBk + jl], vt[jl * d + c], acc);
          o[r][cc] = acc;
        }
      }
      __syncwarp();
    }
  }
  T* O = p.o + bh * sq * p.ldo;
#pragma unroll
  for (int r = 0; r < kFwdRowsPerWarp; ++r) {
    const int64_t i = q0 + warp * kFwdRowsPerWarp + r;
    if (i >= sq) continue;
    const bool any = l[r] > 0.f;
    const float inv = any ? 1.f / l[r] : 0.f;
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) {
      const int c = lane + 32 * cc;
      if (c < d) O[i * p.ldo + c] = from_float<T>(any ? o[r][cc] * inv : 0.f);
    }
    if (lane == 0) p.lse[bh * sq + i] = any ? m[r] + logf(l[r]) : neg_inf();
  }
}

struct FwdLaunch {
  const AttnShape& s;
  const void *q, *k, *v;
  const float* mask;
  void* o;
  float* lse;
  int64_t ldq, ldk, ldv, ldm, ldo;
  cudaStream_t stream;

  template <typename T, int NC>
  cudaError_t operator()() const {
    FwdParams<T> p{s,
                   static_cast<const T*>(q),
                   static_cast<const T*>(k),
                   static_cast<const T*>(v),
                   mask,
                   static_cast<T*>(o),
                   lse,
                   ldq,
                   ldk,
                   ldv,
                   ldm,
                   ldo};
    const size_t smem = fwd_smem_bytes(static_cast<int>(s.d));
    // The cap is the function's, shared by every thread and stream: set per launch to this d's
    // size, one thread's smaller cap landed between another's setting and its launch ("invalid
    // argument", "too many resources requested for launch": 1 case in 10^4 under 8 lanes). Every
    // launch sets the instantiation's largest size (d = 32 NC), the same value from every thread.
    cudaError_t e = cudaFuncSetAttribute(flash_fwd_kernel<T, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(fwd_smem_bytes(32 * NC)));
    if (e != cudaSuccess) return e;
    const dim3 grid(static_cast<unsigned>((s.sq + kFwdBq - 1) / kFwdBq), static_cast<unsigned>(s.batch * s.heads));
    flash_fwd_kernel<T, NC><<<grid, kFwdWarps * 32, smem, stream>>>(p);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t flash_fwd(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk, const void* v,
                      int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo, float* lse,
                      cudaStream_t stream) {
  if (!detail::shape_ok(s)) return cudaErrorInvalidValue;
  if (s.sq == 0) return cudaSuccess;
  return detail::dispatch(dt, s.d, FwdLaunch{s, q, k, v, mask, o, lse, ldq, ldk, ldv, ldm, ldo, stream});
}

}  // namespace assay::kernels::attention
