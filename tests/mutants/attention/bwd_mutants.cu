// MUTANT attn_dv_wrong_row -- planted bug, not a kernel to use.
//
// Bug: the dK/dV kernel of kernels/attention/flash_bwd.cu accumulates
// dV_j += P_ij dO_{i+1}: the staged dO row one below the right one (wrapping at
// the end of the 32-row query tile; past Sq the staged rows are zeros). The
// launcher runs the correct flash_bwd (dQ, dK, dV) and then this copy of the
// dK/dV kernel, which overwrites dK (correct) and dV (wrong).
// Exposed by any case with a visible key (Sq = 1 too: row 0 then pairs with a
// zero row); caught by the bound on dV (kBound).
#include <cmath>

#include "kernels/attention/common.cuh"
#include "tests/mutants/attention/mutants.h"

namespace assay::mutants::attention {
namespace {

using namespace kernels::attention::detail;
using kernels::attention::detail::BwdParams;

template <typename T, int NC>
__global__ void __launch_bounds__(kBwdWarps * 32) dkdv_wrong_row_kernel(BwdParams<T> p) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(p.s.d), st = odd_stride(d);
  float* kb = smem;
  float* vb = kb + kBwdBlock * d;
  float* qt = vb + kBwdBlock * d;
  float* dot = qt + kBwdTile * st;
  float* lse_t = dot + kBwdTile * st;
  float* d_t = lse_t + kBwdTile;
  float* pbuf = d_t + kBwdTile;
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
  const int64_t i_start = p.s.causal ? (j0 / kBwdTile) * kBwdTile : 0;
  for (int64_t hh = 0; hh < G; ++hh) {
    const int64_t bh = b * H + g * G + hh;
    const T* Q = p.q + bh * sq * p.ldq;
    const T* DO = p.dout + bh * sq * p.lddo;
    const T* O = p.o + bh * sq * p.ldo;
    for (int64_t i0 = i_start; i0 < sq; i0 += kBwdTile) {
      __syncthreads();
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
        const int64_t i = i0 + lane, j = j0 + jl;
        const float lse = lse_t[lane];
        float s = 0.f, dp = 0.f;
        for (int c = 0; c < d; ++c) {
          s = fmaf(qt[lane * st + c], kb[jl * d + c], s);
          dp = fmaf(dot[lane * st + c], vb[jl * d + c], dp);
        }
        float x = s * p.s.scale;
        const bool visible = i < sq && j < sk && (!p.s.causal || j <= i) && lse != neg_inf();
        if (visible && p.mask != nullptr) x = x + p.mask[i * p.ldm + j];
        const float pij = visible ? expf(x - lse) : 0.f;
        pw[kk * kBwdTile + lane] = pij;
        sw[kk * kBwdTile + lane] = visible ? pij * (dp - d_t[lane]) : 0.f;
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
            av = fmaf(pw[kk * kBwdTile + r], dot[((r + 1) % kBwdTile) * st + c], av);  // BUG: row r + 1 of dO
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

struct Launch {
  BwdParams<float> raw;  // pointers as given; cast per type below
  cudaStream_t stream;

  template <typename T, int NC>
  cudaError_t operator()() const {
    BwdParams<T> p{raw.s,
                   reinterpret_cast<const T*>(raw.q),
                   reinterpret_cast<const T*>(raw.k),
                   reinterpret_cast<const T*>(raw.v),
                   reinterpret_cast<const T*>(raw.o),
                   reinterpret_cast<const T*>(raw.dout),
                   raw.lse,
                   raw.mask,
                   reinterpret_cast<T*>(raw.dq),
                   reinterpret_cast<T*>(raw.dk),
                   reinterpret_cast<T*>(raw.dv),
                   raw.ldq,
                   raw.ldk,
                   raw.ldv,
                   raw.ldo,
                   raw.lddo,
                   raw.ldm,
                   raw.lddq,
                   raw.lddk,
                   raw.lddv};
    const size_t smem = bwd_smem_bytes(static_cast<int>(raw.s.d));
    // The instantiation's largest size, as kernels/attention/flash_bwd.cu sets it (a per-launch
    // cap races with other lanes' launches: tests/mutants/attention/fwd_mutants.cu).
    cudaError_t e = cudaFuncSetAttribute(dkdv_wrong_row_kernel<T, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bwd_smem_bytes(32 * NC)));
    if (e != cudaSuccess) return e;
    const dim3 grid(static_cast<unsigned>((raw.s.sk + kBwdBlock - 1) / kBwdBlock),
                    static_cast<unsigned>(raw.s.batch * raw.s.kv_heads));
    dkdv_wrong_row_kernel<T, NC><<<grid, kBwdWarps * 32, smem, stream>>>(p);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t attn_dv_wrong_row(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                              const void* v, int64_t ldv, const void* o, int64_t ldo, const void* dout, int64_t lddo,
                              const float* lse, const float* mask, int64_t ldm, void* dq, int64_t lddq, void* dk,
                              int64_t lddk, void* dv, int64_t lddv, cudaStream_t stream) {
  cudaError_t e = kernels::attention::flash_bwd(dt, s, q, ldq, k, ldk, v, ldv, o, ldo, dout, lddo, lse, mask, ldm, dq,
                                                lddq, dk, lddk, dv, lddv, stream);
  if (e != cudaSuccess || s.sk == 0) return e;
  BwdParams<float> raw{s,
                       static_cast<const float*>(q),
                       static_cast<const float*>(k),
                       static_cast<const float*>(v),
                       static_cast<const float*>(o),
                       static_cast<const float*>(dout),
                       lse,
                       mask,
                       static_cast<float*>(dq),
                       static_cast<float*>(dk),
                       static_cast<float*>(dv),
                       ldq,
                       ldk,
                       ldv,
                       ldo,
                       lddo,
                       ldm,
                       lddq,
                       lddk,
                       lddv};
  return dispatch(dt, s.d, Launch{raw, stream});
}

}  // namespace assay::mutants::attention
