// The attention forward's device reference (attention_f64.cu) as the ASSAY_HD
// phases of one query row: the kernel runs one block per row, a phase "over j"
// or "over c" spread across its threads and a "serial" phase on thread 0, with a
// barrier between phases; a CPU test runs the same phases in the same sequence
// over host buffers against the host reference and bound
// (tests/references/attention_device_ref_test.cpp). Every sum over the keys is a
// serial phase, in key order, as the host reference takes it; only order-free
// work (scores, exponentials, the probabilities' division) is spread out.
// The arithmetic itself is references/host/attention.h's. No CUDA header.
#pragma once

#include <cstdint>

#include "harness/bound_core.h"
#include "harness/host_device.h"
#include "harness/ulp_core.h"
#include "references/device/input_rows.h"
#include "references/host/attention.h"

namespace assay::device_ref {

/// One attention forward: Q [B, H, Sq, D], K and V [B, Hkv, Sk, D] (query head h reads kv
/// head h / (H / Hkv)), an optional additive mask [Sq, Sk], causal top-left.
struct AttentionF64Problem {
  int64_t B = 1, H = 1, Hkv = 1, Sq = 1, Sk = 1, D = 1;
  bool causal = false, has_mask = false;
  double scale = 1;       ///< the kernel's fp32 scale, widened
  int64_t key_tile = 64;  ///< the variant's declared kv_tile (the bound's rescales)
  SoftmaxScalars soft;    ///< the case's softmax model (n = Sk, fast-math as declared)
  StoreRounding store;    ///< O's store rounding (its dtype's; none for fp32)
  ref::AttnNarrowP narrow;  ///< P rounded to the storage type (narrow_intermediates; u = 0: no)
};

/// The inputs (Q, K, V in the case's dtype, the mask fp32; padded rows) and the outputs (dense
/// fp64: O's reference and tolerance, B H Sq x D; LSE's, B H Sq).
struct AttentionF64Io {
  InputRows q, k, v, mask;
  double *o_ref = nullptr, *o_tol = nullptr, *lse_ref = nullptr, *lse_tol = nullptr;
};

/// What every thread of a row's block knows.
struct AttnRowCtx {
  int64_t row = 0, i = 0, kbase = 0;  ///< query row (b, h, i) flattened, its position i, its kv rows' start
  double gD = 0;                      ///< gamma_{D+2}: the scores' error (step 1)
};

/// A row's shared state: s, P and mg hold Sk doubles each (the kernel's shared memory).
struct AttnRowState {
  double* s = nullptr;   ///< scores
  double* P = nullptr;   ///< exp(s - max), then the probabilities
  double* mg = nullptr;  ///< score magnitudes, then tolP (step 2)
  double mx = 0, Z = 0, E = 0, PE = 0, Dw = 0;
};

ASSAY_HD inline AttnRowCtx attn_row_ctx(const AttentionF64Problem& p, int64_t row) {
  AttnRowCtx x;
  x.row = row;
  x.i = row % p.Sq;
  const int64_t bh = row / p.Sq, h = bh % p.H, b = bh / p.H, G = p.H / p.Hkv;
  x.kbase = (b * p.Hkv + h / G) * p.Sk;
  x.gD = gamma_n(p.D + 2, ref::kAttnU);
  return x;
}

/// Over j: key j's score and magnitude (step 1).
ASSAY_HD inline void attn_phase_score(const AttentionF64Problem& p, const AttentionF64Io& io, const AttnRowCtx& x,
                                      AttnRowState& st, int64_t j) {
  const InputAt qi{io.q, x.row * io.q.ld}, kj{io.k, (x.kbase + j) * io.k.ld};
  const double mv = p.has_mask ? io.mask.at(x.i * io.mask.ld + j) : 0.0;
  ref::attn_score(qi, kj, p.D, p.scale, !(p.causal && j > x.i), p.has_mask, mv, st.s[j], st.mg[j]);
}

/// Serial: the max score (-inf: every key invisible, the row is fully masked).
ASSAY_HD inline void attn_phase_max(const AttentionF64Problem& p, AttnRowState& st) {
  double mx = -HUGE_VAL;
  for (int64_t j = 0; j < p.Sk; ++j) mx = st.s[j] > mx ? st.s[j] : mx;  // std::max(mx, s_j)
  st.mx = mx;
}

/// Over c: a fully masked row's O (0, tolerance 0); serial (c = 0 only) its LSE (-inf, 0).
ASSAY_HD inline void attn_phase_masked(const AttentionF64Problem& p, const AttentionF64Io& io, const AttnRowCtx& x,
                                       int64_t c) {
  io.o_ref[x.row * p.D + c] = 0;
  io.o_tol[x.row * p.D + c] = 0;
  if (c == 0) io.lse_ref[x.row] = -HUGE_VAL, io.lse_tol[x.row] = 0;
}

/// Over j: exp(s_j - max).
ASSAY_HD inline void attn_phase_exp(AttnRowState& st, int64_t j) {
  st.P[j] = ::exp(st.s[j] - st.mx);
}

/// Serial: Z = sum_j exp(s_j - max), in key order.
ASSAY_HD inline void attn_phase_z(const AttentionF64Problem& p, AttnRowState& st) {
  double Z = 0;
  for (int64_t j = 0; j < p.Sk; ++j) Z += st.P[j];
  st.Z = Z;
}

/// Over j: P_j = exp(s_j - max) / Z.
ASSAY_HD inline void attn_phase_normalise(AttnRowState& st, int64_t j) {
  st.P[j] = st.P[j] / st.Z;
}

/// Serial: E = max_j E_j (over the keys that count) and PE = sum_j P_j E_j, E_j = gD mag_j.
ASSAY_HD inline void attn_phase_e(const AttentionF64Problem& p, const AttnRowCtx& x, AttnRowState& st) {
  double Emax = 0, PE = 0;
  for (int64_t j = 0; j < p.Sk; ++j) {
    const double E = x.gD * st.mg[j];
    if ((st.P[j] > 0 || finite_hd(st.s[j])) && Emax < E) Emax = E;  // std::max(Emax, E)
    PE += st.P[j] * E;
  }
  st.E = Emax;
  st.PE = PE;
}

/// Over j: tolP_j in place of key j's magnitude (step 2).
ASSAY_HD inline void attn_phase_tol_p(const AttnRowCtx& x, AttnRowState& st, int64_t j) {
  st.mg[j] = ref::attn_tol_p(st.P[j], x.gD * st.mg[j], st.PE, ::exp(st.E));
}

/// Serial: Dw = sum_j (P_j + tolP_j)(max - s_j + 2E) over the visible keys.
ASSAY_HD inline void attn_phase_dw(const AttentionF64Problem& p, AttnRowState& st) {
  double Dw = 0;
  for (int64_t j = 0; j < p.Sk; ++j)
    if (finite_hd(st.s[j])) Dw += (st.P[j] + st.mg[j]) * (st.mx - st.s[j] + 2 * st.E);
  st.Dw = Dw;
}

/// Over c < D: column c's O and bound sums over the visible keys in order (step 4), and the
/// column's max |v| (the caller takes the max over the columns).
ASSAY_HD inline ref::AttnOSums attn_phase_o(const AttentionF64Problem& p, const AttentionF64Io& io,
                                            const AttnRowCtx& x, const AttnRowState& st, int64_t c, double& vmax) {
  ref::AttnOSums a;
  vmax = 0;
  for (int64_t j = 0; j < p.Sk; ++j) {
    if (!finite_hd(st.s[j])) continue;
    const double v = io.v.at((x.kbase + j) * io.v.ld + c);
    a.add(st.P[j], st.mg[j], st.mx - st.s[j] + 2 * st.E, v);
    const double av = ::fabs(v);
    vmax = vmax < av ? av : vmax;  // std::max(vmax, |v|)
  }
  return a;
}

/// Serial: the row's bound (steps 3 and 5) from its stats and max |v|; writes LSE and its
/// tolerance (a NaN tolerance as +Inf, as the engine's host path has it).
ASSAY_HD inline ref::AttnRowBound attn_phase_row(const AttentionF64Problem& p, const AttentionF64Io& io,
                                                 const AttnRowCtx& x, const AttnRowState& st, double vmax) {
  ref::AttnRowStats r;
  r.Dw = st.Dw;
  r.L = ::log(st.Z);
  r.E = st.E;
  r.PE = st.PE;
  r.kend = p.causal ? (x.i + 1 < p.Sk ? x.i + 1 : p.Sk) : p.Sk;
  r.vmax = vmax;
  const double lse = st.mx + r.L;
  const ref::AttnRowBound b = ref::attn_row_bound(r, p.soft, p.Sk, p.key_tile, lse);
  io.lse_ref[x.row] = lse;
  io.lse_tol[x.row] = b.lse_tol != b.lse_tol ? HUGE_VAL : b.lse_tol;
  return b;
}

/// Over c < D: O's reference and tolerance (ref::attn_o_tol with O's store rounding; NaN as +Inf).
ASSAY_HD inline void attn_phase_o_out(const AttentionF64Problem& p, const AttentionF64Io& io, const AttnRowCtx& x,
                                      const ref::AttnRowBound& b, const ref::AttnOSums& a, int64_t c) {
  const double t = ref::attn_o_tol(b, a, p.store, p.narrow);
  io.o_ref[x.row * p.D + c] = a.o;
  io.o_tol[x.row * p.D + c] = t != t ? HUGE_VAL : t;
}

}  // namespace assay::device_ref
