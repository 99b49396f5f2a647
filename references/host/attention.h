// The per-row arithmetic of the attention forward's fp64 reference and ceiling
// (properties/attention.cpp, whose header derives the bound, steps 1 to 5), as
// ASSAY_HD functions: the host reference loops over rows and keys with them, and
// the device reference (references/device/attention_f64.cu) runs the very same
// steps in the same order, one block per query row. Each sum below is taken over
// the keys j in increasing order by both. No CUDA header.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/bound_core.h"
#include "harness/host_device.h"

namespace assay::ref {

/// fp32 unit roundoff and smallest normal: the kernels' arithmetic.
inline constexpr double kAttnU = 0x1p-24;
inline constexpr double kAttnMinNormal = 0x1p-126;
/// The fp64 reference's own error, covered by this factor on every tolerance.
inline constexpr double kAttnRefSlack = 1 + 0x1p-30;

/// Step 1: the score s = scale q.k (+ mask) of one query row against one key and its
/// magnitude scale sum |q||k| (+ |mask|); (-inf, 0) for an invisible key (causal). Row: the
/// inputs' rows, indexable by c (const double* on the host; on the device an accessor that
/// widens an fp32 / fp16 / bf16 element exactly).
template <typename Row>
ASSAY_HD void attn_score(Row qi, Row kj, int64_t D, double scale, bool visible, bool has_mask, double mv, double& s,
                         double& mag) {
  s = -HUGE_VAL;
  mag = 0;
  if (!visible) return;
  double dot = 0, m = 0;
  for (int64_t c = 0; c < D; ++c) {
    const double prod = static_cast<double>(qi[c]) * static_cast<double>(kj[c]);
    dot += prod;
    m += ::fabs(prod);
  }
  double x = scale * dot, mg = scale * m;
  if (has_mask) {
    x += mv;
    mg += finite_hd(mv) ? ::fabs(mv) : 0;
  }
  s = x;
  mag = finite_hd(x) ? mg : 0;
}

/// The gradcheck relation's forward (properties/attention.cpp attention_forward_packed, and its
/// device twin references/device/attention_fd_f64.cu): key j's weight in the bound on the fp64
/// forward's rounding of an O element, in units of 16 u, sum_j weight_j |v_j|. P the key's
/// probability, smag its score's magnitude, PE = sum_l P_l smag_l.
ASSAY_HD inline double attn_fd_mag_weight(double P, double smag, double PE, int64_t D, int64_t Sk) {
  return P * (1 + (static_cast<double>(D + 2) * (smag + PE) + 2.0 * static_cast<double>(Sk) + 8) / 16);
}

/// Step 2: the bound on |P'_j - P_j| for a key with probability P, score error E and the
/// row's sum PE = sum_l P_l E_l, eE = exp(max_j E_j).
ASSAY_HD inline double attn_tol_p(double P, double E, double PE, double eE) {
  const double r = E + PE;
  return P * r * eE * ::exp(eE * r);
}

/// The per-row quantities the bound reads (the host keeps them in LSE's aux).
struct AttnRowStats {
  double Dw = 0;      ///< sum_j (P_j + tolP_j)(max - s_j + 2E) over the visible keys
  double L = 0;       ///< log sum_j exp(s_j - max)
  double E = 0;       ///< max_j E_j
  double PE = 0;      ///< sum_j P_j E_j
  int64_t kend = 0;   ///< visible keys (causal: min(Sk, i + 1))
  double vmax = 0;    ///< max |v| over the visible keys
  bool masked = false;  ///< every key invisible: O = 0, LSE = -inf (tolerance 0)
};

/// Per element of O: the sums over the visible keys j that step 4 combines (the host keeps
/// them in O's aux).
struct AttnOSums {
  double o = 0;   ///< sum P_j v_j: the reference
  double a0 = 0;  ///< sum tolP_j |v_j|
  double a1 = 0;  ///< sum (P_j + tolP_j)|v_j|
  double a2 = 0;  ///< sum (P_j + tolP_j)(max - s_j + 2E)|v_j|
  double a3 = 0;  ///< sum |v_j|
  double pv = 0;  ///< sum P_j |v_j|
  /// Adds key j: probability P, its bound tolP, dev = max - s_j + 2E, value v.
  ASSAY_HD void add(double P, double tolP, double dev, double v) {
    const double pp = P + tolP, av = ::fabs(v);
    o += P * v;
    a0 += tolP * av;
    a1 += pp * av;
    a2 += pp * dev * av;
    a3 += av;
    pv += P * av;
  }
};

/// Steps 3 and 5 for one row: what its elements' tolerances need. `soft` is the case's
/// SoftmaxScalars (n = Sk, the kernel's fast-math); rescales are set here per row.
struct AttnRowBound {
  ElementBound sb;   ///< softmax ceiling of the computed scores (step 3)
  double gO = 0;     ///< gamma_{Sk + T + 1}: O's accumulation (step 4)
  double floor = 0;  ///< O's underflow floor
  double lse_tol = 0;
};

ASSAY_HD inline AttnRowBound attn_row_bound(const AttnRowStats& r, SoftmaxScalars soft, int64_t Sk, int64_t key_tile,
                                            double lse_ref) {
  AttnRowBound b;
  if (r.masked) return b;
  soft.rescales = (r.kend + key_tile - 1) / key_tile;
  const double wd = r.Dw * kAttnRefSlack;
  b.sb = softmax_level(soft, wd, false);
  b.gO = gamma_n(Sk + soft.rescales + 1, kAttnU);
  b.floor = static_cast<double>(Sk + soft.rescales + 4) * kAttnMinNormal * (1 + r.vmax);
  // 5. The computed scores' log-sum-exp L' is within 2E of L: the logf error is taken at L + 2E.
  const ElementBound lb = log_softmax_level(soft, wd, r.L + 2 * r.E, false);
  const double es = ::exp(r.E) * r.PE;
  b.lse_tol = (lb.tol(::fabs(lse_ref) + es, 0) + es) * kAttnRefSlack;
  return b;
}

/// Step 4: O's fp32 error e32 at one element.
ASSAY_HD inline double attn_o_e32(const AttnRowBound& b, const AttnOSums& a) {
  const double err = a.a0 + b.sb.rel_out * a.a1 + b.sb.rel_mag * a.a2 + b.sb.floor * a.a3;
  const double amag = a.pv + err;
  return (err + b.gO * amag + b.floor) * kAttnRefSlack;
}

/// P in the storage type (Arithmetic::narrow_intermediates, fp16/bf16 data): the probabilities
/// are rounded to Q's dtype before the P V product, as FlashAttention-2 does for its second
/// matmul and cuDNN's SDPA was measured to (50x the fp32-P ceiling). Either the unnormalised
/// w_j = exp(s_j - max) <= 1 or the normalised P_j is rounded: w~_j = w_j (1 + d_j) + h_j,
/// |d_j| <= u, |h_j| <= s/2 (u the dtype's unit roundoff, s its smallest subnormal). The
/// numerator sum_j w~_j v_j moves by at most u sum_j w_j |v_j| + (s/2) sum_j |v_j|; divided by
/// l >= 1 (its largest term is exp(0)), that is u sum_j P'_j |v_j| + (s/2) sum_j |v_j|, with
/// P'_j the computed probabilities, sum_j P'_j |v_j| <= a1 (step 3). Where the denominator is the
/// sum of the rounded w~_j too, l~ = l (1 + t), |t| <= u_z = u + n s / 2 (n keys, l >= 1), which
/// moves O' by |O'| u_z / (1 - u_z) and the numerator's share by 1 / (1 - u_z). So
///   |O~ - O'| <= (u a1 + (s/2) a3 + u_z (|o| + e32)) / (1 - u_z),
/// |O'| <= |o| + e32, added to e32 before the store. u = 0: P stays fp32 (no term).
struct AttnNarrowP {
  double u = 0;         ///< unit roundoff of P's storage type (0: fp32 P)
  double half_sub = 0;  ///< half its smallest subnormal
  int64_t keys = 0;     ///< n: the keys a row sums (Sk)
};

ASSAY_HD inline double attn_narrow_p_err(const AttnNarrowP& n, const AttnOSums& a, double e32) {
  if (n.u == 0) return 0;
  const double uz = n.u + static_cast<double>(n.keys) * n.half_sub;
  return (n.u * a.a1 + n.half_sub * a.a3 + uz * (::fabs(a.o) + e32)) / (1 - uz) * kAttnRefSlack;
}

/// O's tolerance at one element: e32 (plus the rounded-P term under `narrow`) plus the store's
/// rounding into O's dtype at |ref| (1 + 2^-9) + e32 (`store`: harness/ulp_core.h StoreRounding,
/// none for fp32): the host bound (properties/attention.cpp fwd_tol) and the device reference
/// both call this.
template <typename Store>
ASSAY_HD double attn_o_tol(const AttnRowBound& b, const AttnOSums& a, const Store& store,
                           const AttnNarrowP& narrow = AttnNarrowP{}) {
  double e32 = attn_o_e32(b, a);
  e32 += attn_narrow_p_err(narrow, a, e32);
  return e32 + store(::fabs(a.o) * (1 + 0x1p-9) + e32);
}

// ---- backward ------------------------------------------------------------------------------
// The per-(query row i, key j) step and the per-element finish of the backward reference and
// its ceiling (the header of properties/attention.cpp derives the terms): the host's bwd_pass
// and the device reference (references/device/attention_bwd_f64.cu) both call these, so the
// only arithmetic that may differ between them is exp.

/// The backward's per-case constants: gamma_D (the dot products dP and D_i), gamma_{D+2} (the
/// scores) and whether expf is __expf (fast-math).
struct AttnBwdConsts {
  double gD = 0, gS = 0;
  bool fast_math = false;
};

ASSAY_HD inline AttnBwdConsts attn_bwd_consts(int64_t D, bool fast_math) {
  AttnBwdConsts k;
  k.gD = gamma_n(D, kAttnU);
  k.gS = gamma_n(D + 2, kAttnU);
  k.fast_math = fast_math;
  return k;
}

/// sum_c a_c b_c and sum_c |a_c b_c| in c order: D_i = dO_i . O_i and dP_ij = dO_i . v_j with
/// their magnitudes. Row: as attn_score's.
template <typename RowA, typename RowB>
ASSAY_HD void attn_dot_mag(RowA a, RowB b, int64_t D, double& sum, double& mag) {
  double s = 0, m = 0;
  for (int64_t c = 0; c < D; ++c) {
    const double prod = static_cast<double>(a[c]) * static_cast<double>(b[c]);
    s += prod;
    m += ::fabs(prod);
  }
  sum = s;
  mag = m;
}

/// One visible pair (finite score s): P = exp(s - L), dS = P (dP - D_i), and under `with_tol`
/// the bounds e_p on |p^ - P| and e_dS on |dS^ - dS| (0 without).
struct AttnBwdPair {
  double P = 0, dS = 0, ep = 0, eds = 0;
};

ASSAY_HD inline AttnBwdPair attn_bwd_pair(double s, double smag, double L, double dP, double dPmag, double Di,
                                          double Dmag, const AttnBwdConsts& k, bool with_tol) {
  AttnBwdPair r;
  r.P = ::exp(s - L);
  const double x = dP - Di;
  r.dS = r.P * x;
  if (!with_tol) return r;
  const double E = k.gS * smag;
  const double ax = ::fabs(s - L);
  // expf: 2 ulp; __expf: 2 + floor(1.173 |x|) ulp, |x| at most 104 before the result is 0.
  const double capped = 104.0 < ax ? 104.0 : ax;  // std::min(|x|, 104): a NaN stays NaN
  const double ulps = k.fast_math ? 2 + ::floor(1.173 * capped) : 2;
  const double cexp = 2 * ulps + 1;
  const double u2 = (1 + kAttnU) * (1 + kAttnU);
  r.ep = r.P * (::exp(E + kAttnU * (ax + E)) * (1 + cexp * kAttnU) - 1) + kAttnMinNormal;
  const double a = k.gD * (dPmag + Dmag);
  r.eds = r.P * ::fabs(x) * (u2 - 1) + (r.P * a + r.ep * (::fabs(x) + a)) * u2 + kAttnMinNormal;
  return r;
}

/// One output element's sums over its terms w x: the value sum w x, the error sum
/// sum err |x| and the magnitude sum sum (|w| + err)|x| (wmag = |w|, given: P for dV, |dS|
/// for dK and dQ).
struct AttnBwdSums {
  double v = 0, e = 0, m = 0;
  ASSAY_HD void add_value(double w, double x) { v += w * x; }
  ASSAY_HD void add(double w, double wmag, double err, double x) {
    v += w * x;
    const double ax = ::fabs(x);
    e += err * ax;
    m += (wmag + err) * ax;
  }
};

/// The finish of one output (dQ and dK: scaled, N + 2 roundings; dV: N + 1), n its terms per
/// element (Sk for dQ, G Sq for dK and dV).
struct AttnBwdFinish {
  double scl = 1, g = 0, fl = 0;
  bool scaled = false;
};

ASSAY_HD inline AttnBwdFinish attn_bwd_finish(double scl, int64_t n, bool scaled) {
  AttnBwdFinish f;
  f.scl = scl;
  f.scaled = scaled;
  f.g = gamma_n(n + (scaled ? 2 : 1), kAttnU);
  f.fl = static_cast<double>(n + 2) * kAttnMinNormal;
  return f;
}

ASSAY_HD inline double attn_bwd_ref(const AttnBwdFinish& f, const AttnBwdSums& a) {
  return f.scl * a.v;
}

/// The element's tolerance at reference `ref`: the fp32 error plus the store's rounding into
/// the output's dtype (`store`: harness/ulp_core.h StoreRounding).
template <typename Store>
ASSAY_HD double attn_bwd_tol(const AttnBwdFinish& f, double ref, const AttnBwdSums& a, const Store& store) {
  const double e32 = (f.scl * ((f.scaled ? 1 + kAttnU : 1.0) * a.e + f.g * a.m) + f.fl) * kAttnRefSlack;
  return e32 + store(::fabs(ref) * (1 + 0x1p-9) + e32);
}

}  // namespace assay::ref
