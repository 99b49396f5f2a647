// Backward of scaled dot-product attention, FlashAttention-2 style (Dao 2023,
// Algorithm 2) on CUDA cores, deterministic (no atomics), two kernels:
//
// dK/dV: a CTA owns 32 keys of one (batch, kv head), 4 warps x 8 keys, their
//   K and V rows staged in shared memory. It walks every query head of the
//   group (h = g*G .. g*G + G-1, G = H/Hkv) and, for each, every tile of 32
//   query rows in order (causal: from the tile holding row j0, the first
//   rows that see the block). Per tile: Q and dO rows staged (odd stride),
//   LSE, and D_i = dO_i . O_i (serial FMA over d). Lane l of a warp takes
//   query row l: for each of the warp's keys, s = scale (q_i . k_j) [+ mask],
//   P = expf(s - LSE_i) (0 when invisible or LSE_i = -inf), dP = dO_i . v_j,
//   dS = P (dP - D_i). Then lane c accumulates columns c, c+32, ... of
//   dV_j += P dO_i and dK_j += dS q_i over the 32 rows in row order. dK is
//   multiplied by scale at the end. Every sum has a fixed order.
// dQ: a CTA owns 32 query rows of one (batch, head), 4 warps x 8 rows; it
//   walks the key tiles of 32 in order (causal: up to its last row), lane l
//   takes key l for the scores (the same serial dot products as above, so
//   the same P and dS bits), then lane c accumulates dQ_i += dS k_j over the
//   tile's keys in order; dQ = scale * that sum.
//
// Error budget (properties/attention.cpp derives the bound): the scores and
// D_i, dP_ij are serial fp32 dot products over d (gamma_d, gamma_{d+2} with
// scale and mask); P one subtraction and expf; dS two roundings; dV_j and dK_j
// sums over G*Sq rows, dQ_i over Sk keys, one FMA rounding per term each, plus
// the final scale product.
#include <cmath>

#include "kernels/attention/common.cuh"

namespace assay::kernels::attention {
namespace {

using namespace detail;

/// P_ij and dS_ij for query row i and key j, from staged rows (qrow, dorow: stride 1;
/// krow, vrow: stride 1), with D_i and LSE_i.
template <typename T>
__device__ __forceinline__ void p_ds(const BwdParams<T>& p, const float* qrow, const float* dorow, const float* krow,
                                     const float* vrow, int64_t i, int64_t j, float lse, float di, float& pij,
                                     float& dsij) {
  const int d = static_cast<int>(p.s.d);
  float s = 0.f, dp = 0.f;
  for (int c = 0; c < d; ++c) {
    s = fmaf(qrow[c], krow[c], s);
    dp = fmaf(dorow[c], vrow[c], dp);
  }
  float x = s * p.s.scale;
  const bool visible = i < p.s.sq && j < p.s.sk && (!p.s.causal || j <= i) && lse != neg_inf();
  if (visible && p.mask != nullptr) x = x + p.mask[i * p.ldm + j];
  pij = visible ? expf(x - lse) : 0.f;
  dsij = visible ? pij * (dp - di) : 0.f;
}

template <typename T, int NC>
__global__ void __launch_bounds__(kBwdWarps * 32) flash_bwd_dkdv_kernel(BwdParams<T> p) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(p.s.d), st = odd_stride(d);
  float* kb = smem;                    // [32][d]
  float* vb = kb + kBwdBlock * d;      // [32][d]
  float* qt = vb + kBwdBlock * d;      // [32][st]
  float* dot = qt + kBwdTile * st;     // [32][st]
  float* lse_t = dot + kBwdTile * st;  // [32]
  float* d_t = lse_t + kBwdTile;       // [32]
  float* pbuf = d_t + kBwdTile;        // [warps][8][32]
  float* sbuf = pbuf + kBwdWarps * kBwdPerWarp * kBwdTile;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int64_t sq = p.s.sq, sk = p.s.sk, H = p.s.heads, Hkv = p.s.kv_heads, G = H / Hkv;
  const int64_t bg = blockIdx.y, b = bg / Hkv, g = bg % Hkv;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kBwdBlock;
  const T* K = p.k + bg * sk * p.ldk;
  const T* V = p.v + bg * sk * p.ldv;
  for (int e = tid; e < kBwdBlock * d; e += blockDim.x) {
    const int r = e / d, c = e % d;
    const bool in = j0 + r < sk;
    kb[e] = in ? to_float(K[(j0 + r) * p.ldk + c]) : 0.f;
    vb[e] = in ? to_float(V[(j0 + r) * p.ldv + c]) : 0.f;
  }
  float dk[kBwdPerWarp][NC], dv[kBwdPerWarp][NC];
#pragma unroll
  for (int kk = 0; kk < kBwdPerWarp; ++kk)
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) dk[kk][cc] = dv[kk][cc] = 0.f;
  float* pw = pbuf + warp * kBwdPerWarp * kBwdTile;
  float* sw = sbuf + warp * kBwdPerWarp * kBwdTile;
  // Causal (top-left): rows i < j0 see none of the block's keys.
  const int64_t i_start = p.s.causal ? (j0 / kBwdTile) * kBwdTile : 0;
  for (int64_t hh = 0; hh < G; ++hh) {
    const int64_t bh = b * H + g * G + hh;
    const T* Q = p.q + bh * sq * p.ldq;
    const T* DO = p.dout + bh * sq * p.lddo;
    const T* O = p.o + bh * sq * p.ldo;
    for (int64_t i0 = i_start; i0 < sq; i0 += kBwdTile) {
      __syncthreads();  // previous tile consumed
      for (int e = tid; e < kBwdTile * d; e += blockDim.x) {
        const int r = e / d, c = e % d;
        const bool in = i0 + r < sq;
        qt[r * st + c] = in ? to_float(Q[(i0 + r) * p.ldq + c]) : 0.f;
        dot[r * st + c] = in ? to_float(DO[(i0 + r) * p.lddo + c]) : 0.f;
      }
      __syncthreads();
      if (warp == 0) {
        const int64_t i = i0 + lane;
        float di = 0.f;
        if (i < sq)
          for (int c = 0; c < d; ++c) di = fmaf(dot[lane * st + c], to_float(O[i * p.ldo + c]), di);
        d_t[lane] = di;
        lse_t[lane] = i < sq ? p.lse[bh * sq + i] : neg_inf();
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kBwdPerWarp; ++kk) {
        const int jl = warp * kBwdPerWarp + kk;
        float pij, dsij;
        p_ds(p, qt + lane * st, dot + lane * st, kb + jl * d, vb + jl * d, i0 + lane, j0 + jl, lse_t[lane], d_t[lane],
             pij, dsij);
        pw[kk * kBwdTile + lane] = pij;
        sw[kk * kBwdTile + lane] = dsij;
      }
      __syncwarp();
#pragma unroll
      for (int kk = 0; kk < kBwdPerWarp; ++kk)
#pragma unroll
        for (int cc = 0; cc < NC; ++cc) {
          const int c = lane + 32 * cc;
          if (c >= d) continue;
          float av = dv[kk][cc], ak = dk[kk][cc];
          for (int r = 0; r < kBwdTile; ++r) {
            av = fmaf(pw[kk * kBwdTile + r], dot[r * st + c], av);
            ak = fmaf(sw[kk * kBwdTile + r], qt[r * st + c], ak);
          }
          dv[kk][cc] = av;
          dk[kk][cc] = ak;
        }
    }
  }
  T* DK = p.dk + bg * sk * p.lddk;
  T* DV = p.dv + bg * sk * p.lddv;
#pragma unroll
  for (int kk = 0; kk < kBwdPerWarp; ++kk) {
    const int64_t j = j0 + warp * kBwdPerWarp + kk;
    if (j >= sk) continue;
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) {
      const int c = lane + 32 * cc;
      if (c >= d) continue;
      DK[j * p.lddk + c] = from_float<T>(dk[kk][cc] * p.s.scale);
      DV[j * p.lddv + c] = from_float<T>(dv[kk][cc]);
    }
  }
}

template <typename T, int NC>
__global__ void __launch_bounds__(kBwdWarps * 32) flash_bwd_dq_kernel(BwdParams<T> p) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(p.s.d), st = odd_stride(d);
  float* qb = smem;                   // [32][d]
  float* dob = qb + kBwdBlock * d;    // [32][d]
  float* kt = dob + kBwdBlock * d;    // [32][st]
  float* vt = kt + kBwdTile * st;     // [32][st]
  float* lse_b = vt + kBwdTile * st;  // [32]
  float* d_b = lse_b + kBwdTile;      // [32]
  float* sbuf = d_b + kBwdTile;       // [warps][8][32]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int64_t sq = p.s.sq, sk = p.s.sk;
  const int64_t bh = blockIdx.y, b = bh / p.s.heads, h = bh % p.s.heads;
  const int64_t g = h / (p.s.heads / p.s.kv_heads);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kBwdBlock;
  const T* Q = p.q + bh * sq * p.ldq;
  const T* DO = p.dout + bh * sq * p.lddo;
  const T* O = p.o + bh * sq * p.ldo;
  const T* K = p.k + (b * p.s.kv_heads + g) * sk * p.ldk;
  const T* V = p.v + (b * p.s.kv_heads + g) * sk * p.ldv;
  for (int e = tid; e < kBwdBlock * d; e += blockDim.x) {
    const int r = e / d, c = e % d;
    const bool in = q0 + r < sq;
    qb[e] = in ? to_float(Q[(q0 + r) * p.ldq + c]) : 0.f;
    dob[e] = in ? to_float(DO[(q0 + r) * p.lddo + c]) : 0.f;
  }
  __syncthreads();
  if (warp == 0) {
    const int64_t i = q0 + lane;
    float di = 0.f;
    if (i < sq)
      for (int c = 0; c < d; ++c) di = fmaf(dob[lane * d + c], to_float(O[i * p.ldo + c]), di);
    d_b[lane] = di;
    lse_b[lane] = i < sq ? p.lse[bh * sq + i] : neg_inf();
  }
  float dq[kBwdPerWarp][NC];
#pragma unroll
  for (int rr = 0; rr < kBwdPerWarp; ++rr)
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) dq[rr][cc] = 0.f;
  float* sw = sbuf + warp * kBwdPerWarp * kBwdTile;
  const int64_t kend = p.s.causal ? std::min<int64_t>(sk, q0 + kBwdBlock) : sk;
  for (int64_t k0 = 0; k0 < kend; k0 += kBwdTile) {
    __syncthreads();  // previous tile consumed; D and LSE stored
    for (int e = tid; e < kBwdTile * d; e += blockDim.x) {
      const int r = e / d, c = e % d;
      const bool in = k0 + r < sk;
      kt[r * st + c] = in ? to_float(K[(k0 + r) * p.ldk + c]) : 0.f;
      vt[r * st + c] = in ? to_float(V[(k0 + r) * p.ldv + c]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kBwdPerWarp; ++rr) {
      const int lr = warp * kBwdPerWarp + rr;
      float pij, dsij;
      p_ds(p, qb + lr * d, dob + lr * d, kt + lane * st, vt + lane * st, q0 + lr, k0 + lane, lse_b[lr], d_b[lr], pij,
           dsij);
      sw[rr * kBwdTile + lane] = dsij;
    }
    __syncwarp();
#pragma unroll
    for (int rr = 0; rr < kBwdPerWarp; ++rr)
#pragma unroll
      for (int cc = 0; cc < NC; ++cc) {
        const int c = lane + 32 * cc;
        if (c >= d) continue;
        float a = dq[rr][cc];
        for (int jl = 0; jl < kBwdTile; ++jl) a = fmaf(sw[rr * kBwdTile + jl], kt[jl * st + c], a);
        dq[rr][cc] = a;
      }
    __syncwarp();
  }
  T* DQ = p.dq + bh * sq * p.lddq;
#pragma unroll
  for (int rr = 0; rr < kBwdPerWarp; ++rr) {
    const int64_t i = q0 + warp * kBwdPerWarp + rr;
    if (i >= sq) continue;
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) {
      const int c = lane + 32 * cc;
      if (c < d) DQ[i * p.lddq + c] = from_float<T>(dq[rr][cc] * p.s.scale);
    }
  }
}

struct BwdLaunch {
  const AttnShape& s;
  const void *q, *k, *v, *o, *dout;
  const float *lse, *mask;
  void *dq, *dk, *dv;
  int64_t ldq, ldk, ldv, ldo, lddo, ldm, lddq, lddk, lddv;
  cudaStream_t stream;

  template <typename T, int NC>
  cudaError_t operator()() const {
    BwdParams<T> p{s,
                   static_cast<const T*>(q),
                   static_cast<const T*>(k),
                   static_cast<const T*>(v),
                   static_cast<const T*>(o),
                   static_cast<const T*>(dout),
                   lse,
                   mask,
                   static_cast<T*>(dq),
                   static_cast<T*>(dk),
                   static_cast<T*>(dv),
                   ldq,
                   ldk,
                   ldv,
                   ldo,
                   lddo,
                   ldm,
                   lddq,
                   lddk,
                   lddv};
    const size_t smem = bwd_smem_bytes(static_cast<int>(s.d));
    // The instantiation's largest size, the same from every thread (flash_fwd.cu says why).
    const int cap = static_cast<int>(bwd_smem_bytes(32 * NC));
    cudaError_t e =
        cudaFuncSetAttribute(flash_bwd_dkdv_kernel<T, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize, cap);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(flash_bwd_dq_kernel<T, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize, cap);
    if (e != cudaSuccess) return e;
    if (s.sk > 0) {
      const dim3 grid(static_cast<unsigned>((s.sk + kBwdBlock - 1) / kBwdBlock),
                      static_cast<unsigned>(s.batch * s.kv_heads));
      flash_bwd_dkdv_kernel<T, NC><<<grid, kBwdWarps * 32, smem, stream>>>(p);
      if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (s.sq > 0) {
      const dim3 grid(static_cast<unsigned>((s.sq + kBwdBlock - 1) / kBwdBlock),
                      static_cast<unsigned>(s.batch * s.heads));
      flash_bwd_dq_kernel<T, NC><<<grid, kBwdWarps * 32, smem, stream>>>(p);
      e = cudaGetLastError();
    }
    return e;
  }
};

}  // namespace

cudaError_t flash_bwd(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk, const void* v,
                      int64_t ldv, const void* o, int64_t ldo, const void* dout, int64_t lddo, const float* lse,
                      const float* mask, int64_t ldm, void* dq, int64_t lddq, void* dk, int64_t lddk, void* dv,
                      int64_t lddv, cudaStream_t stream) {
  if (!detail::shape_ok(s)) return cudaErrorInvalidValue;
  return detail::dispatch(dt, s.d, BwdLaunch{s,   q,   k,   v,   o,    dout, lse,  mask, dq,   dk,    dv,
                                             ldq, ldk, ldv, ldo, lddo, ldm,  lddq, lddk, lddv, stream});
}

}  // namespace assay::kernels::attention
