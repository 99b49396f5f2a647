// FlashAttention-style scaled dot-product attention (issue 9): forward and
// backward over fp32 / fp16 / bf16 storage with fp32 arithmetic (CUDA cores,
// round-to-nearest FMA; no tensor cores), never materialising the Sq x Sk
// score matrix.
//
// Layout (every tensor a 2-D row-major view with a row stride, in elements,
// pointers at element [0][0], no alignment assumed; nothing outside a view is
// read or written):
//   Q, O, dO, dQ   [B*H*Sq, D]   row (b*H + h)*Sq + i
//   K, V, dK, dV   [B*Hkv*Sk, D] row (b*Hkv + g)*Sk + j
//   LSE            fp32 [B*H*Sq], contiguous
//   mask           fp32 [Sq, Sk] with row stride ldm, additive, broadcast over
//                  batch and heads; may be null.
// Semantics (declared; the spec's reference implements exactly these):
//   S_ij = scale * (q_i . k_j) + mask_ij, with scale the fp32 value given;
//   causal: key j is visible to query i iff j <= i (top-left aligned, as
//     PyTorch's is_causal=True; for Sq > Sk rows i >= Sk see every key);
//     invisible keys have S_ij = -inf;
//   grouped-query: Hkv divides H; query head h uses kv head h / (H / Hkv);
//   P = softmax_j(S), O_i = sum_j P_ij v_j, LSE_i = log sum_j exp(S_ij);
//   a row whose scores are all -inf (fully masked) gives O_i = 0 and
//     LSE_i = -inf (FlashAttention-2's zero output, with log 0 = -inf); its
//     backward gradients are 0 (P_i = 0);
//   backward from the saved O and LSE: P_ij = exp(S_ij - LSE_i),
//     D_i = dO_i . O_i, dP_ij = dO_i . v_j, dS_ij = P_ij (dP_ij - D_i),
//     dV_j = sum_i P_ij dO_i, dK_j = scale sum_i dS_ij q_i,
//     dQ_i = scale sum_j dS_ij k_j (sums over i run over all H/Hkv query heads
//     of the group).
// Supported: 1 <= D <= 128, any Sq, Sk >= 1, B, H >= 1.
// The backward is deterministic (no atomics): one CTA owns a block of keys and
// walks every query head of its group and every query tile in a fixed order;
// dQ comes from a second kernel that owns a block of query rows.
// Launchers return the launch status (cudaGetLastError) and never sync.
// kernels/ includes nothing from harness/ or references/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels::attention {

enum class Dt : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

/// Problem sizes and options shared by forward and backward.
struct AttnShape {
  int64_t batch = 1, heads = 1, kv_heads = 1;  ///< B, H, Hkv (Hkv divides H)
  int64_t sq = 1, sk = 1, d = 64;              ///< query length, key length, head dim (1..128)
  bool causal = false;                         ///< top-left aligned: key j visible to query i iff j <= i
  float scale = 0.125f;                        ///< multiplies q.k (1/sqrt(D) by convention)
};

/// Keys per tile of the forward kernel: the online softmax rescales once per tile.
inline constexpr int kFwdKeyTile = 64;

/// Forward: O (dt) and LSE (fp32). Online softmax over tiles of kFwdKeyTile keys
/// (Milakov and Gimelshein 2018; Dao 2023, FlashAttention-2, Algorithm 1).
cudaError_t flash_fwd(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk, const void* v,
                      int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo, float* lse,
                      cudaStream_t stream);

/// Backward: dQ, dK, dV (dt, overwritten) from Q, K, V, the saved O and LSE, and dO.
cudaError_t flash_bwd(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk, const void* v,
                      int64_t ldv, const void* o, int64_t ldo, const void* dout, int64_t lddo, const float* lse,
                      const float* mask, int64_t ldm, void* dq, int64_t lddq, void* dk, int64_t lddk, void* dv,
                      int64_t lddv, cudaStream_t stream);

}  // namespace assay::kernels::attention
