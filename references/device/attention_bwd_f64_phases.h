// The attention backward's device reference (attention_bwd_f64.cu) as ASSAY_HD phases, each
// the body of one kernel thread: the kernels launch one thread per query row, per (row, key)
// pair or per output element, and a CPU test runs the same phases in loops over host buffers
// against the host reference and bound (tests/references/attention_bwd_device_ref_test.cpp).
// The arithmetic is references/host/attention.h's, which the host's bwd_pass calls, and every
// sum keeps the host's order: D_i and dP over c ascending; dQ[row, c] over the keys j
// ascending; dK and dV[(b, kv head g, j), c] over the query heads h = g G .. g G + G - 1, then
// the query positions i, ascending (the host's loops b, h, i, j visit a kv row's terms in that
// order). Pairs the host skips (an invisible key, a fully masked row) are flagged, not zeroed:
// adding a zero term could turn a -0 sum into +0.
// Also the device side of attention_bwd's prepare: O rounded into its dtype and LSE into fp32,
// as store_as rounds a double (through fp32, then harness/dtype_encode.h), and dO's per-row
// power-of-two scaling. No CUDA header.
#pragma once

#include <cstdint>

#include "harness/bound_core.h"
#include "harness/dtype_encode.h"
#include "harness/host_device.h"
#include "harness/ulp_core.h"
#include "references/device/input_rows.h"
#include "references/host/attention.h"

namespace assay::device_ref {

/// One attention backward: Q, O, dO [B, H, Sq, D], K and V [B, Hkv, Sk, D] (query head h reads
/// kv head h / (H / Hkv)), LSE [B H Sq], an optional additive mask [Sq, Sk], causal top-left.
struct AttentionBwdF64Problem {
  int64_t B = 1, H = 1, Hkv = 1, Sq = 1, Sk = 1, D = 1;
  bool causal = false, has_mask = false;
  double scale = 1;           ///< the kernel's fp32 scale, widened
  ref::AttnBwdConsts consts;  ///< gamma_D, gamma_{D+2}, fast-math (ref::attn_bwd_consts)
  StoreRounding store;        ///< dQ's, dK's and dV's store rounding (their dtype's; none for fp32)
  ASSAY_HD int64_t rows() const { return B * H * Sq; }
  ASSAY_HD int64_t kv_rows() const { return B * Hkv * Sk; }
  ASSAY_HD int64_t pairs() const { return rows() * Sk; }
};

/// Inputs (padded rows, read widened), the per-row and per-pair scratch, and the outputs (dense
/// fp64: reference and tolerance, B H Sq x D for dQ, B Hkv Sk x D for dK and dV).
struct AttentionBwdF64Io {
  InputRows q, k, v, o, dout, lse, mask;
  double *Di = nullptr, *Dmag = nullptr;                              ///< per query row
  double *P = nullptr, *dS = nullptr, *ep = nullptr, *eds = nullptr;  ///< per pair, row * Sk + j
  unsigned char* live = nullptr;  ///< per pair: 1 where the host adds the pair's terms
  double *dq_ref = nullptr, *dq_tol = nullptr, *dk_ref = nullptr, *dk_tol = nullptr, *dv_ref = nullptr,
         *dv_tol = nullptr;
};

/// Per query row: D_i = dO_i . O_i and its magnitude, in c order.
ASSAY_HD inline void attn_bwd_phase_row(const AttentionBwdF64Problem& p, const AttentionBwdF64Io& io, int64_t row) {
  const InputAt doi{io.dout, row * io.dout.ld}, oi{io.o, row * io.o.ld};
  ref::attn_dot_mag(doi, oi, p.D, io.Di[row], io.Dmag[row]);
}

/// Per pair (row, j), after attn_bwd_phase_row: the score, and where the host adds the pair
/// (a finite LSE and score) P, dS, e_p and e_dS.
ASSAY_HD inline void attn_bwd_phase_pair(const AttentionBwdF64Problem& p, const AttentionBwdF64Io& io, int64_t pair) {
  const int64_t row = pair / p.Sk, j = pair % p.Sk, i = row % p.Sq, bh = row / p.Sq;
  const int64_t h = bh % p.H, b = bh / p.H, G = p.H / p.Hkv, kr = (b * p.Hkv + h / G) * p.Sk + j;
  io.live[pair] = 0;
  const double L = io.lse.at(row);
  if (L == -HUGE_VAL) return;  // fully masked row: zero gradients
  const InputAt qi{io.q, row * io.q.ld}, kj{io.k, kr * io.k.ld};
  const double mv = p.has_mask ? io.mask.at(i * io.mask.ld + j) : 0.0;
  double s = 0, smag = 0;
  ref::attn_score(qi, kj, p.D, p.scale, !(p.causal && j > i), p.has_mask, mv, s, smag);
  if (!finite_hd(s)) return;
  const InputAt doi{io.dout, row * io.dout.ld}, vj{io.v, kr * io.v.ld};
  double dP = 0, dPmag = 0;
  ref::attn_dot_mag(doi, vj, p.D, dP, dPmag);
  const ref::AttnBwdPair r = ref::attn_bwd_pair(s, smag, L, dP, dPmag, io.Di[row], io.Dmag[row], p.consts, true);
  io.P[pair] = r.P, io.dS[pair] = r.dS, io.ep[pair] = r.ep, io.eds[pair] = r.eds;
  io.live[pair] = 1;
}

/// Writes an element's reference and tolerance (a NaN tolerance as +Inf, as the engine's host
/// path has it).
ASSAY_HD inline void attn_bwd_store(const AttentionBwdF64Problem& p, const ref::AttnBwdFinish& f,
                                    const ref::AttnBwdSums& a, double* ref_out, double* tol_out, int64_t e) {
  const double r = ref::attn_bwd_ref(f, a);
  const double t = ref::attn_bwd_tol(f, r, a, p.store);
  ref_out[e] = r;
  tol_out[e] = t != t ? HUGE_VAL : t;
}

/// Per element (row, c) of dQ, after every pair: scale sum_j dS_ij k_j,c over the live pairs,
/// j ascending, and its tolerance.
ASSAY_HD inline void attn_bwd_phase_dq(const AttentionBwdF64Problem& p, const AttentionBwdF64Io& io, int64_t e) {
  const int64_t row = e / p.D, c = e % p.D, bh = row / p.Sq;
  const int64_t h = bh % p.H, b = bh / p.H, G = p.H / p.Hkv, kbase = (b * p.Hkv + h / G) * p.Sk;
  ref::AttnBwdSums a;
  for (int64_t j = 0; j < p.Sk; ++j) {
    const int64_t pr = row * p.Sk + j;
    if (io.live[pr] == 0) continue;
    const double dS = io.dS[pr];
    a.add(dS, ::fabs(dS), io.eds[pr], io.k.at((kbase + j) * io.k.ld + c));
  }
  attn_bwd_store(p, ref::attn_bwd_finish(p.scale, p.Sk, true), a, io.dq_ref, io.dq_tol, e);
}

/// Per element (kv row, c) of dK and dV, after every pair: the sums over the query rows of the
/// kv head's group (h ascending, then i), scale sum dS q for dK, sum P dO for dV, and their
/// tolerances.
ASSAY_HD inline void attn_bwd_phase_dkv(const AttentionBwdF64Problem& p, const AttentionBwdF64Io& io, int64_t e) {
  const int64_t kr = e / p.D, c = e % p.D, j = kr % p.Sk, bg = kr / p.Sk;
  const int64_t g = bg % p.Hkv, b = bg / p.Hkv, G = p.H / p.Hkv;
  ref::AttnBwdSums dk, dv;
  for (int64_t h = g * G; h < g * G + G; ++h)
    for (int64_t i = 0; i < p.Sq; ++i) {
      const int64_t row = (b * p.H + h) * p.Sq + i, pr = row * p.Sk + j;
      if (io.live[pr] == 0) continue;
      const double P = io.P[pr], dS = io.dS[pr];
      dv.add(P, P, io.ep[pr], io.dout.at(row * io.dout.ld + c));
      dk.add(dS, ::fabs(dS), io.eds[pr], io.q.at(row * io.q.ld + c));
    }
  const int64_t n = G * p.Sq;
  attn_bwd_store(p, ref::attn_bwd_finish(p.scale, n, true), dk, io.dk_ref, io.dk_tol, e);
  attn_bwd_store(p, ref::attn_bwd_finish(1.0, n, false), dv, io.dv_ref, io.dv_tol, e);
}

// ---- prepare ---------------------------------------------------------------------------------

/// x rounded into `t` as store_as (harness/dtype.cpp) rounds a double: to fp32 first, then
/// to fp16 / bf16 by harness/dtype_encode.h (IEEE overflow to Inf), into element i of `base`.
ASSAY_HD inline void attn_store_as(InputType t, double x, void* base, int64_t i) {
  const float f = static_cast<float>(x);
  if (t == InputType::kF32)
    static_cast<float*>(base)[i] = f;
  else
    static_cast<uint16_t*>(base)[i] = t == InputType::kF16 ? encode::f32_to_f16(f) : encode::f32_to_bf16(f);
}

/// The prepared inputs: the forward's fp64 O (dense rows x D) and LSE (rows), and where they go
/// (the snapshot's O in the case's dtype, LSE fp32; dO rescaled in place where do_row_scale).
struct AttentionBwdPrepareIo {
  const double *o_ref = nullptr, *lse_ref = nullptr;
  void* o = nullptr;
  int64_t o_ld = 1;
  InputType o_type = InputType::kF32;
  float* lse = nullptr;
  void* dout = nullptr;
  int64_t do_ld = 1;
  InputType do_type = InputType::kF32;
  bool do_row_scale = false;
  int64_t rows = 0, D = 1;
};

/// Per element (row r, c): O[r, c] and, at c = 0, LSE[r] as a training step saves them; dO[r, c]
/// times 2^((r mod 9) - 4), exact in fp64 (the dtypes' values times a power of two in
/// [2^-4, 2^4] stay far inside fp64's range), then rounded back into dO's dtype.
ASSAY_HD inline void attn_bwd_prepare_phase(const AttentionBwdPrepareIo& io, int64_t e) {
  const int64_t r = e / io.D, c = e % io.D;
  attn_store_as(io.o_type, io.o_ref[e], io.o, r * io.o_ld + c);
  if (c == 0) io.lse[r] = static_cast<float>(io.lse_ref[r]);
  if (!io.do_row_scale) return;
  const InputRows d{io.dout, io.D, io.do_ld, io.do_type};
  const int64_t at = r * io.do_ld + c;
  const double scale = static_cast<double>(int64_t{1} << (r % 9)) * 0x1p-4;
  attn_store_as(io.do_type, d.at(at) * scale, io.dout, at);
}

}  // namespace assay::device_ref
