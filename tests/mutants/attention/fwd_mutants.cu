// MUTANTS attn_tail_guard, attn_causal_off_by_one, attn_no_rescale -- planted
// bugs, not kernels to use. One copy of kernels/attention/flash_fwd.cu's kernel
// with a compile-time Bug switch; Bug::kNone would be the kernel itself.
//
// attn_tail_guard: the K/V tile loads and the score visibility drop the
//   `k0 + j < Sk` test, as if Sk were a multiple of 64: the last tile reads up
//   to 63 rows past the head's keys (the next head's keys, or past the end of K
//   and V into guards and other tensors) and gives them softmax weight.
//   Exposed by Sk % 64 != 0; caught by the bound (kBound) or, when the rows read
//   hold poison or NaN canaries, the NaN/Inf pattern (kNanInf).
// attn_causal_off_by_one: causal visibility j <= i + 1. Exposed by causal cases
//   with Sk >= 2 (row i sees key i + 1); caught by the bound (kBound).
// attn_no_rescale: l and o are not multiplied by exp(m_old - m_new) when a later
//   tile raises the running max, so earlier tiles keep weights relative to the
//   old max. Exposed by Sk > 64 with a larger score after the first tile; caught
//   by the bound (kBound) or overflow (kNanInf).
#include <cmath>

#include "kernels/attention/common.cuh"
#include "tests/mutants/attention/mutants.h"

namespace assay::mutants::attention {
namespace {

using namespace kernels::attention::detail;
using kernels::attention::detail::FwdParams;

enum class Bug { kTailGuard, kCausalOffByOne, kNoRescale };

template <typename T, int NC, Bug B>
__global__ void __launch_bounds__(kFwdWarps * 32) fwd_mutant_kernel(FwdParams<T> p) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(p.s.d), ks = odd_stride(d);
  float* qs = smem;
  float* kt = qs + kFwdBq * d;
  float* vt = kt + kFwdBk * ks;
  float* ps = vt + kFwdBk * d;
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
  const int64_t kend = p.s.causal ? std::min<int64_t>(sk, q0 + kFwdBq + (B == Bug::kCausalOffByOne ? 1 : 0)) : sk;
  float* pw = ps + warp * kFwdRowsPerWarp * kFwdBk;
  for (int64_t k0 = 0; k0 < kend; k0 += kFwdBk) {
    __syncthreads();
    for (int e = tid; e < kFwdBk * d; e += blockDim.x) {
      const int r = e / d, c = e % d;
      const bool in = B == Bug::kTailGuard || k0 + r < sk;  // BUG (kTailGuard): no tail guard
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
        const bool in_keys = B == Bug::kTailGuard || j < sk;                         // BUG (kTailGuard)
        const bool causal_ok = !p.s.causal || j <= i + (B == Bug::kCausalOffByOne);  // BUG (kCausalOffByOne)
        const bool visible = i < sq && in_keys && causal_ok;
        if (visible && p.mask != nullptr && j < sk) x = x + p.mask[i * p.ldm + j];
        s[t] = visible ? x : neg_inf();
      }
      const float m_new = fmaxf(m[r], warp_max(fmaxf(s[0], s[1])));
      float alpha = 1.f, p0 = 0.f, p1 = 0.f;
      if (m_new != neg_inf()) {
        alpha = B == Bug::kNoRescale ? 1.f : expf(m[r] - m_new);  // BUG (kNoRescale): old terms keep the old max
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

template <Bug B>
struct Launch {
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
    // The instantiation's largest size, as kernels/attention/flash_fwd.cu sets it: a per-launch
    // cap of this d's size races with other lanes' launches ("invalid argument"), which a
    // campaign then reports as the mutant's launch error instead of its planted bug.
    cudaError_t e = cudaFuncSetAttribute(fwd_mutant_kernel<T, NC, B>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(fwd_smem_bytes(32 * NC)));
    if (e != cudaSuccess) return e;
    const dim3 grid(static_cast<unsigned>((s.sq + kFwdBq - 1) / kFwdBq), static_cast<unsigned>(s.batch * s.heads));
    fwd_mutant_kernel<T, NC, B><<<grid, kFwdWarps * 32, smem, stream>>>(p);
    return cudaGetLastError();
  }
};

template <Bug B>
cudaError_t run(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk, const void* v,
                int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo, float* lse, cudaStream_t stream) {
  if (!shape_ok(s)) return cudaErrorInvalidValue;
  if (s.sq == 0) return cudaSuccess;
  return dispatch(dt, s.d, Launch<B>{s, q, k, v, mask, o, lse, ldq, ldk, ldv, ldm, ldo, stream});
}

}  // namespace

cudaError_t attn_tail_guard(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                            const void* v, int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo,
                            float* lse, cudaStream_t stream) {
  return run<Bug::kTailGuard>(dt, s, q, ldq, k, ldk, v, ldv, mask, ldm, o, ldo, lse, stream);
}
cudaError_t attn_causal_off_by_one(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                                   const void* v, int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo,
                                   float* lse, cudaStream_t stream) {
  return run<Bug::kCausalOffByOne>(dt, s, q, ldq, k, ldk, v, ldv, mask, ldm, o, ldo, lse, stream);
}
cudaError_t attn_no_rescale(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                            const void* v, int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo,
                            float* lse, cudaStream_t stream) {
  return run<Bug::kNoRescale>(dt, s, q, ldq, k, ldk, v, ldv, mask, ldm, o, ldo, lse, stream);
}

}  // namespace assay::mutants::attention
