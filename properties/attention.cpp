// attention / attention_bwd: scaled dot-product attention, FlashAttention style,
// forward (Q, K, V, [mask] -> O, LSE) and backward (Q, K, V, O, dO, LSE, [mask]
// -> dQ, dK, dV).
//
// Sections: declaration (params, tensors), references, bounds, properties, self-checks, vendor, binding.
// Vendor column (forward): cuDNN's fused SDPA forward (references/library/cudnn.h, backend graph)
// with O and the LSE (its stats), for the cases its graph can express: fp16 / bf16, no additive
// mask, one query head per kv head (G = 1), D a multiple of 8, 16-byte aligned tensors and rows.
// Other cases, and a cuDNN with no engine for the graph (9.14 on the GPU hosts), say "not run"
// with the reason.
// Binding: kernels/attention/flash_fwd.cu and flash_bwd.cu (variant "flash"); the forward
// declares its key tile (Contract().tile("kv_tile", 64)), which the bound reads; mutants in
// tests/mutants/attention/ bind through the same attention_fwd_launch / attention_bwd_launch
// (properties/attention.h).
// Declared behaviour (kernels/attention/attention.h): S = scale q.k + mask,
// scale the fp32 value of params.scale (default 1/sqrt(D)); causal is top-left
// aligned (key j visible to query i iff j <= i, PyTorch is_causal); GQA head h
// reads kv head h / G (G = H/Hkv); a fully masked row gives O = 0, LSE = -inf and zero
// gradients. Statistics: the forward saves LSE (m + log l), the backward reads it.
//
// Reference: fp64 on the host from the decoded inputs: S, its max, P, LSE =
// max + log sum exp(S - max), O = P V; backward from the given (saved, rounded)
// O and LSE: P = exp(S - LSE), D_i = dO_i . O_i, dS = P (dP - D), dV = P^T dO,
// dK = scale dS^T Q, dQ = scale dS K (every sum over the query heads of a kv
// group). prepare of attention_bwd computes O and LSE in fp64 and rounds them
// into O's dtype and fp32, as a training step saves them.
//
// Bound, forward (u = 2^-24, fp32 arithmetic; [H] = Higham 2002):
//  1. Scores: s^ = fl(fl(fl(q.k) scale) + mask): |s^ - S| <= E_ij = gamma_{D+2}
//     (scale sum_c |q_c||k_c| + |mask_ij|)  ([H] (3.5) and Lemma 3.3).
//  2. Score error through the softmax: with E = max_j E_ij and r_ij = E_ij +
//     sum_l P_il E_il, the softmax P' of the computed scores satisfies
//     |P'_ij - P_ij| <= P_ij r_ij e^E exp(e^E r_ij): P'/P = e^{a}/w, w =
//     sum_l P_l e^{dS_l}, |ln w| <= e^E sum_l P_l |dS_l| (Jensen below,
//     e^x <= 1 + |x| e^|x| above), |e^x - 1| <= |x| e^|x|. First order:
//     P_ij (|dS_ij| + sum_l P_il |dS_il|).
//  3. Online softmax on the computed scores: softmax_bounds (harness/bounds.h)
//     with rescales = ceil(Sk/T) key tiles, T the variant's declared "kv_tile"
//     (one rescale per tile, no merges: one warp owns a row), n = Sk, magnitudes
//     P'|t'| <= (P + tol_2)(|t| + 2E), the exp error of the declared arithmetic
//     (expf, or __expf under fast-math). Its division term covers O's final o * (1/l).
//  4. O_i = sum_j P_ij v_j: o accumulates e^_j v_j by FMA, one tile after
//     another, rescaled once per tile: every term meets at most Sk + T + 1
//     roundings (T the tile count), so |O^ - O| <= sum_j tolP_ij |v_j| +
//     gamma_{Sk+T+1} sum_j (P_ij + tolP_ij)|v_j| + underflow floor, tolP = tol_2 +
//     tol_3; then half an ulp of O's dtype at |O| + that (fp16/bf16 stores).
//     tol_3 is linear in (P + tol_2, its magnitude, 1), so the reference returns
//     the four sums over j that tol_3 multiplies (aux) and the bound combines them
//     with the coefficients of the declared arithmetic.
//  5. LSE = m + logf(l): log_softmax_bounds' log-sum-exp part (l_Z, the logf
//     (or __logf) error, u|LSE| for the addition) plus the score error e^E sum_l P_l E_l.
// Backward (the running-error analysis of the kernel's own expression tree):
//     p^ = expf(s^ - LSE): |p^ - P| <= e_p = P [exp(E + u(|S - LSE| + E)) (1 + c u) - 1]
//       + min_normal, c = 5 for expf (2 ulp + rounding, [CUDA]) and 2 (2 + floor(1.173 |x|)) + 1
//       for __expf under fast-math (x = S - LSE, |x| capped where the result underflows);
//     dP and D_i serial dot products: |err| <= a = gamma_D (|dO_i||v_j| + |dO_i||O_i|);
//     dS^ = fl(p^ fl(dP^ - D^)): |dS^ - dS| <= e_dS = P|x|((1+u)^2 - 1) + (P a + e_p (|x| + a))(1+u)^2
//       + min_normal, x = dP - D;
//     dV_j = sum_i p^ dO_i (N = G Sq terms, FMA): sum_i e_p |dO_i| + gamma_{N+1} sum_i (P + e_p)|dO_i|;
//     dK_j = scale sum_i dS^ q_i: scale [(1+u) sum_i e_dS |q_i| + gamma_{N+2} sum_i (|dS| + e_dS)|q_i|];
//     dQ_i = scale sum_j dS^ k_j: the same with N = Sk;
//     each + (N + 2) min_normal and half an ulp of the dtype. The backward's sums do not
//     depend on a tile size (each output is one serial FMA chain in a fixed order).
// The reference's own fp64 error is below 2^-40 of each magnitude and is covered by a
// (1 + 2^-30) factor on every tolerance.
// Device reference: cases of every dtype from B H Sq Sk D = 4096 up are drawn on the device
// (fp16 / bf16 rounded as the host rounds them; masked_every's rows set to -inf there, as
// prepare sets them on the host). Forward: checked against
// references/device/attention_f64.cu: one block per query row runs steps 1 to 5 through
// references/host/attention.h, the functions fwd_ref and fwd_tol call here, in the same order
// (only exp and log are CUDA's), O's store rounding included. Backward (up to 2^20 (row, key)
// pairs): its device prepare does prepare_bwd's work on the device (the masked rows, that
// forward reference's O and LSE, rounded into O's dtype and fp32 as store_as rounds them, dO's
// row scaling), writing the snapshot every launch restores from; then compute:
// references/device/attention_bwd_f64.cu runs bwd_pass's per-pair step and finish
// (references/host/attention.h) with each output element's sum in the host's order. A gradcheck
// case's relation stays on the device too: the differences of the forward
// (references/device/attention_fd_f64.cu) and the backward from the exact O and LSE beside the
// reference, the six sums after the launch (device_gradcheck_sums_bwd); nothing is copied back.
// Generation (derived from the declarations below): dtype fp16 / bf16 / fp32 at 40 / 40 / 20%;
// D 64 or 128 in 70% of the cases, else one of 1, 8, 16, 40, 80, 96, 100, 127; Hkv 1..4, G (query
// heads per kv head, GQA when > 1) 1, 2 or 4, B 1..3; Sq and Sk edge-biased (tile edges around
// 32, 64, 96, 128) up to 4096 and --max-dim, capped so that B H Sq Sk D stays below 2^24
// (forward), 3 2^22 (backward), 2^16 (the gradcheck relation, a quarter of the backward cases);
// causal in 40%, mask in 30% (of those, a third with fully masked rows every 1..5 rows, and
// -inf entries injected into 40% of the masks), an explicit scale in 1/8, per-row dO scaling
// in 40% of the backward cases. Value classes: Q and K normal / uniform / same-sign / small-int
// / log-uniform with |x| <= 8 (small-int up to 8: very large logits), V and dO also mean-spread,
// |x| <= 16 (same-sign and mean-spread V).
#include "properties/attention.h"
#include "properties/vendor_columns.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/scratch.h"
#include "harness/values.h"
#include "properties/gradcheck_relation.h"
#include "properties/rowwise_values.h"
#include "references/device/attention_bwd_f64.h"
#include "references/device/attention_f64.h"
#include "references/device/attention_fd_f64.h"
#include "references/device/gradcheck_f64.h"
#include "references/host/attention.h"

namespace assay::attention {

using rowwise::peek;
using rowwise::poke;

AttnShape AttnDims::shape() const {
  AttnShape s;
  s.batch = B, s.heads = H, s.kv_heads = Hkv, s.sq = Sq, s.sk = Sk, s.d = D;
  s.causal = causal;
  s.scale = static_cast<float>(scale);
  return s;
}

AttnDims dims_of(const Params& p) {
  AttnDims d;
  d.dt = p.dt("dtype");
  d.B = p.i("B", 1);
  d.Hkv = p.i("Hkv", 1);
  d.H = d.Hkv * p.i("G", 1);
  d.Sq = p.i("Sq", 1);
  d.Sk = p.i("Sk", 1);
  d.D = p.i("D", 64);
  d.causal = p.b("causal");
  d.has_mask = p.b("mask");
  // The kernel receives an fp32 scale; the reference uses exactly that value.
  d.scale = static_cast<double>(static_cast<float>(p.r("scale", 1.0 / std::sqrt(static_cast<double>(d.D)))));
  return d;
}

namespace {

constexpr int64_t kMaxBH = 256, kMaxS = 4096;
constexpr int64_t kWorkFwd = int64_t{1} << 24, kWorkBwd = int64_t{3} << 22;  // B*H*Sq*Sk*D on the host
// relation "gradcheck" (attention_bwd): each of the finite-difference forwards is a host fp64 attention.
constexpr int64_t kWorkGrad = int64_t{1} << 16;

// ---- declaration ------------------------------------------------------------------------------
int64_t work_budget(bool fwd, const Params& p) {
  return fwd ? kWorkFwd : p.s("relation") == kGradcheckRelation ? kWorkGrad : kWorkBwd;
}

std::vector<ParamDef> params(bool fwd) {
  std::vector<ParamDef> p;
  p.push_back(ParamDef::dtype("dtype", {DType::kF32, DType::kF16, DType::kBF16}).weigh({2, 4, 4}));
  if (!fwd)
    p.push_back(ParamDef::choice("relation", {kGradcheckRelation})
                    .optional(3)
                    .describe("the finite-difference projection check (a quarter of the cases)"));
  p.push_back(ParamDef::integer("D", 1, 128)
                  .among({64, 128, 1, 8, 16, 40, 80, 96, 100, 127})
                  .weigh({28, 28, 3, 3, 3, 3, 3, 3, 3, 3})
                  .describe("head dimension"));
  p.push_back(ParamDef::integer("Hkv", 1, kMaxBH).among({1, 2, 3, 4}).weigh({4, 2, 1, 1}).describe("kv heads"));
  p.push_back(ParamDef::integer("G", 1, kMaxBH)
                  .among({1, 2, 4})
                  .weigh({3, 1, 1})
                  .cap([](const Params& q) { return kMaxBH / q.i("Hkv", 1); })
                  .describe("query heads per kv head: H = Hkv G"));
  p.push_back(ParamDef::integer("B", 1, kMaxBH).among({1, 2, 3}).weigh({2, 1, 1}).cap([](const Params& q) {
    return kMaxBH / (q.i("Hkv", 1) * q.i("G", 1));
  }));
  p.push_back(ParamDef::extent("Sq", 1, kMaxS).aim({32, 64, 96, 128}).cap([fwd](const Params& q) {
    return work_budget(fwd, q) / (q.i("B", 1) * q.i("Hkv", 1) * q.i("G", 1) * q.i("D", 1));
  }));
  // Square problems (self-attention, the causal diagonal ending on the last key) in about a third
  // of the cases where the work budget allows Sk = Sq; cross-attention shapes otherwise.
  p.push_back(ParamDef::extent("Sk", 1, kMaxS)
                  .aim({32, 64, 96, 128})
                  .cap([fwd](const Params& q) {
                    return work_budget(fwd, q) / (q.i("B", 1) * q.i("Hkv", 1) * q.i("G", 1) * q.i("D", 1) * q.i("Sq", 1));
                  })
                  .often_equal("Sq", 1, 2));
  p.push_back(ParamDef::flag("causal").weigh({3, 2}).describe("top-left aligned causal visibility"));
  p.push_back(ParamDef::flag("mask").weigh({7, 3}).describe("an additive fp32 [Sq, Sk] mask M"));
  p.push_back(ParamDef::integer("masked_every", 1, kMaxS)
                  .among({1, 2, 3, 4, 5})
                  .only_when([](const Params& q) { return q.b("mask"); })
                  .optional(2)
                  .describe("mask rows r % k == 0 all -inf (fully masked query rows)"));
  p.push_back(ParamDef::real("scale", {1.0, 0.05, 0.3}).optional(7).describe("absent: 1/sqrt(D)"));
  if (!fwd)
    p.push_back(ParamDef::flag("do_row_scale").weigh({3, 2}).describe("dO row r scaled by 2^((r mod 9) - 4)"));
  return p;
}

Status check(const std::string& op, const Params& p) {
  if (p.has("scale")) {
    const double s = p.r("scale");
    if (!(s > 0) || s > 1e4) return invalid_argument(op + " case: params.scale must be a number in (0, 1e4]");
  }
  return ok_status();
}

ValueSpec values(std::vector<ValueClass> classes, double max_abs) {
  ValueSpec v;
  v.classes = std::move(classes);
  v.max_abs = max_abs;
  return v;
}

const std::vector<ValueClass> kQkClasses = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSmallInt,
                                            ValueClass::kLogUniform, ValueClass::kSameSign};
const std::vector<ValueClass> kVClasses = {ValueClass::kNormal,   ValueClass::kUniform,    ValueClass::kSameSign,
                                           ValueClass::kSmallInt, ValueClass::kMeanSpread, ValueClass::kLogUniform};

std::vector<int64_t> mask_shape(const Params& p) {
  return p.b("mask") ? std::vector<int64_t>{p.i("Sq", 1), p.i("Sk", 1)} : std::vector<int64_t>{1, 1};
}
std::vector<int64_t> lse_shape(const Params& p) {
  return {p.i("B", 1) * p.i("Hkv", 1) * p.i("G", 1) * p.i("Sq", 1)};
}

std::vector<TensorDef> tensors(bool fwd) {
  const std::vector<std::string> qd = {"B", "Hkv", "G", "Sq", "D"}, kd = {"B", "Hkv", "Sk", "D"};
  TensorDef q{.name = "Q", .dims = qd, .values = values(kQkClasses, 8)},
      k{.name = "K", .dims = kd, .values = values(kQkClasses, 8)},
      v{.name = "V", .dims = kd, .values = values(kVClasses, 16)};
  TensorDef m{.name = "M", .dtype = "fp32", .values = values({ValueClass::kNormal, ValueClass::kUniform,
                                                                ValueClass::kSmallInt},
                                                               16)};
  m.shape = mask_shape;
  m.values.specials = kSpecialNegInf;
  m.values.inject_percent = 40;
  TensorDef lse{.name = "LSE", .role = fwd ? Role::kOut : Role::kIn, .dtype = "fp32"};
  lse.shape = lse_shape;
  if (fwd) return {q, k, v, m, {.name = "O", .role = Role::kOut, .dims = qd}, lse};
  // O and LSE: drawn plain, then replaced by prepare with the forward's saved outputs.
  TensorDef o{.name = "O", .dims = qd, .values = values({ValueClass::kNormal}, 0)};
  TensorDef dout{.name = "dO",
                 .dims = qd,
                 .values = values({ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                   ValueClass::kLogUniform, ValueClass::kSmallInt},
                                  16)};
  lse.values = values({ValueClass::kNormal}, 0);
  return {q,
          k,
          v,
          o,
          dout,
          lse,
          m,
          {.name = "dQ", .role = Role::kOut, .dims = qd},
          {.name = "dK", .role = Role::kOut, .dims = kd},
          {.name = "dV", .role = Role::kOut, .dims = kd}};
}

// ---- references and bounds --------------------------------------------------------
constexpr double kU = ref::kAttnU;  // fp32 unit roundoff

/// Mask rows r with r % masked_every == 0 become all -inf (fully masked query rows).
void mask_rows(const Case& c, std::vector<unsigned char*>& img, size_t mask_index) {
  const Params p(c.params);
  const int64_t every = p.i("masked_every", 0);
  if (every <= 0 || !p.b("mask")) return;
  const auto& d = c.tensors[mask_index].desc;
  const View2D v = view_of(d);
  for (int64_t r = 0; r < v.rows; r += every)
    for (int64_t j = 0; j < v.cols; ++j) poke(d.dtype, img[mask_index], d.offset + r * v.ld + j, -INFINITY);
}

/// Scores of query row i (global row qrow of Q) against every key of kv row base kbase:
/// S (-inf when invisible) and the magnitude scale sum|q||k| + |mask|.
void scores(const AttnDims& d, const HostTensor& q, const HostTensor& k, const HostTensor* mask, int64_t qrow,
            int64_t i, int64_t kbase, std::vector<double>& s, std::vector<double>& mag) {
  s.assign(static_cast<size_t>(d.Sk), -INFINITY);
  mag.assign(static_cast<size_t>(d.Sk), 0.0);
  const double* qi = q.data + qrow * q.v.ld;
  for (int64_t j = 0; j < d.Sk; ++j) {
    const double* kj = k.data + (kbase + j) * k.v.ld;
    ref::attn_score(qi, kj, d.D, d.scale, !(d.causal && j > i), mask != nullptr, mask != nullptr ? mask->at(i, j) : 0.0,
                    s[static_cast<size_t>(j)], mag[static_cast<size_t>(j)]);
  }
}

// Forward aux: per element of O, the sums over the visible keys j of tolP2_j |v_j| (kA0),
// (P_j + tolP2_j)|v_j| (kA1), (P_j + tolP2_j)(mx - s_j + 2E)|v_j| (kA2), |v_j| (kA3), P_j |v_j| (kPv);
// per row (LSE's aux): Dw, L, E, sum_l P_l E_l, the visible key count, max |v|, fully masked.
enum OAux { kA0, kA1, kA2, kA3, kPv, kOAux };
enum LAux { kDw, kL, kE, kPE, kKend, kVmax, kMasked, kLAux };

/// O and LSE in ref, the arithmetic-free parts of their bound in aux (step 1, 2 and the sums of 4).
/// The per-key and per-element steps are references/host/attention.h's, which the device
/// reference runs too.
void fwd_ref(const AttnDims& d, const HostTensor& q, const HostTensor& k, const HostTensor& v,
             const HostTensor* mask, OutputRef& o, OutputRef& lse) {
  const int64_t rows = d.B * d.H * d.Sq, G = d.H / d.Hkv;
  o = OutputRef{};
  lse = OutputRef{};
  o.ref.assign(static_cast<size_t>(rows * d.D), 0.0);
  o.aux.assign(kOAux, std::vector<double>(o.ref.size(), 0.0));
  lse.ref.assign(static_cast<size_t>(rows), -INFINITY);
  lse.aux.assign(kLAux, std::vector<double>(lse.ref.size(), 0.0));
  const double gD = gamma_n(d.D + 2, kU);
  std::vector<double> s, mag, P(static_cast<size_t>(d.Sk)), E(static_cast<size_t>(d.Sk)),
      tolP(static_cast<size_t>(d.Sk));
  std::vector<ref::AttnOSums> acc(static_cast<size_t>(d.D));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t kbase = (b * d.Hkv + h / G) * d.Sk;
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + h) * d.Sq + i;
        const size_t rl = static_cast<size_t>(row);
        scores(d, q, k, mask, row, i, kbase, s, mag);
        double mx = -INFINITY;
        for (double x : s) mx = std::max(mx, x);
        if (mx == -INFINITY) {  // fully masked: O = 0 (tol 0), LSE = -inf
          lse.aux[kMasked][rl] = 1;
          continue;
        }
        double Z = 0;
        for (size_t j = 0; j < s.size(); ++j) Z += std::exp(s[j] - mx);
        const double L = std::log(Z);
        double Emax = 0, PE = 0;
        for (size_t j = 0; j < s.size(); ++j) {
          P[j] = std::exp(s[j] - mx) / Z;
          E[j] = gD * mag[j];
          if (P[j] > 0 || std::isfinite(s[j])) Emax = std::max(Emax, E[j]);
          PE += P[j] * E[j];
        }
        const double eE = std::exp(Emax);
        // 2. the score error through the softmax.
        double Dw = 0;
        for (size_t j = 0; j < s.size(); ++j) {
          tolP[j] = ref::attn_tol_p(P[j], E[j], PE, eE);
          if (std::isfinite(s[j])) Dw += (P[j] + tolP[j]) * (mx - s[j] + 2 * Emax);
        }
        // 4. O = P V, and the sums the bound combines with step 3's coefficients.
        std::fill(acc.begin(), acc.end(), ref::AttnOSums{});
        double vmax = 0;
        for (size_t j = 0; j < s.size(); ++j) {
          if (!std::isfinite(s[j])) continue;
          const double dev = mx - s[j] + 2 * Emax;
          const double* vj = v.data + (kbase + static_cast<int64_t>(j)) * v.v.ld;
          for (int64_t c = 0; c < d.D; ++c) {
            acc[static_cast<size_t>(c)].add(P[j], tolP[j], dev, vj[c]);
            vmax = std::max(vmax, std::fabs(vj[c]));
          }
        }
        for (int64_t c = 0; c < d.D; ++c) {
          const size_t l = static_cast<size_t>(row * d.D + c);
          const ref::AttnOSums& a = acc[static_cast<size_t>(c)];
          o.ref[l] = a.o;
          o.aux[kA0][l] = a.a0;
          o.aux[kA1][l] = a.a1;
          o.aux[kA2][l] = a.a2;
          o.aux[kA3][l] = a.a3;
          o.aux[kPv][l] = a.pv;
        }
        lse.ref[rl] = mx + L;
        lse.aux[kDw][rl] = Dw;
        lse.aux[kL][rl] = L;
        lse.aux[kE][rl] = Emax;
        lse.aux[kPE][rl] = PE;
        lse.aux[kKend][rl] = static_cast<double>(d.causal ? std::min(d.Sk, i + 1) : d.Sk);
        lse.aux[kVmax][rl] = vmax;
      }
    }
}

/// The case's softmax model (step 3) as bound_core.h's scalars: n = Sk keys, fp32 arithmetic,
/// the declared fast-math; the rescales are set per row (attn_row_bound).
SoftmaxScalars fwd_softmax(const AttnDims& d, bool fast_math) {
  SoftmaxModel m;
  m.in = d.dt;
  m.acc = DType::kF32;
  m.out = DType::kF32;
  m.n = d.Sk;
  m.fast_math = fast_math;
  return softmax_scalars(m);
}

/// Steps 3 to 5: O's and LSE's tolerances for `key_tile` keys per tile under `fast_math`
/// (references/host/attention.h, the device reference's arithmetic too).
/// P rounded to the data's dtype before P V (Arithmetic::narrow_intermediates; fp32: no term).
ref::AttnNarrowP narrow_p(const AttnDims& d, bool declared) {
  ref::AttnNarrowP n;
  if (!declared || d.dt == DType::kF32) return n;
  n.u = unit_roundoff(d.dt);
  n.half_sub = 0.5 * min_subnormal(d.dt);
  n.keys = d.Sk;
  return n;
}

void fwd_tol(const AttnDims& d, int64_t key_tile, bool fast_math, const ref::AttnNarrowP& narrow, OutputRef& o,
             OutputRef& lse) {
  const int64_t rows = d.B * d.H * d.Sq;
  const SoftmaxScalars soft = fwd_softmax(d, fast_math);
  const StoreRounding store = store_rounding_for(d.dt);  // O's dtype; the device reference's too
  o.tol.assign(o.ref.size(), 0.0);
  lse.tol.assign(lse.ref.size(), 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const size_t rl = static_cast<size_t>(row);
    if (lse.aux[kMasked][rl] != 0) continue;
    ref::AttnRowStats st;
    st.Dw = lse.aux[kDw][rl];
    st.L = lse.aux[kL][rl];
    st.E = lse.aux[kE][rl];
    st.PE = lse.aux[kPE][rl];
    st.kend = static_cast<int64_t>(lse.aux[kKend][rl]);
    st.vmax = lse.aux[kVmax][rl];
    const ref::AttnRowBound rb = ref::attn_row_bound(st, soft, d.Sk, key_tile, lse.ref[rl]);
    for (int64_t c = 0; c < d.D; ++c) {
      const size_t l = static_cast<size_t>(row * d.D + c);
      ref::AttnOSums a;
      a.o = o.ref[l];
      a.a0 = o.aux[kA0][l], a.a1 = o.aux[kA1][l], a.a2 = o.aux[kA2][l], a.a3 = o.aux[kA3][l], a.pv = o.aux[kPv][l];
      o.tol[l] = ref::attn_o_tol(rb, a, store, narrow);
    }
    lse.tol[rl] = rb.lse_tol;
  }
}

Status reference_fwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const AttnDims d = dims_of(Params(c.params));
  OutputRef o, l;
  fwd_ref(d, t[0], t[1], t[2], d.has_mask ? &t[3] : nullptr, o, l);
  out = {std::move(o), std::move(l)};
  return ok_status();
}

Status bound_fwd(const Case& c, const Arithmetic& a, const std::vector<HostTensor>&, std::vector<OutputRef>& out) {
  const AttnDims d = dims_of(Params(c.params));
  fwd_tol(d, a.tile("kv_tile", kernels::attention::kFwdKeyTile), a.fast_math, narrow_p(d, a.narrow_intermediates),
          out[0], out[1]);
  return ok_status();
}

void prepare_fwd(const Case& c, std::vector<unsigned char*>& img) {
  mask_rows(c, img, 3);
}

/// Decodes tensor t of the case from its image (the whole allocation, offset included).
HostTensor decode_image(const Case& c, const std::vector<unsigned char*>& img, size_t t, std::vector<double>& store) {
  const auto& desc = c.tensors[t].desc;
  store.resize(static_cast<size_t>(desc.extent()));
  for (int64_t e = 0; e < desc.extent(); ++e) store[static_cast<size_t>(e)] = peek(desc.dtype, img[t], e);
  return {store.data() + desc.offset, view_of(desc)};
}

void prepare_bwd(const Case& c, std::vector<unsigned char*>& img) {
  const Params p(c.params);
  const AttnDims d = dims_of(p);
  if (d.has_mask) mask_rows(c, img, 6);
  std::vector<double> sq, sk, sv, sm;
  const HostTensor q = decode_image(c, img, 0, sq), k = decode_image(c, img, 1, sk), v = decode_image(c, img, 2, sv);
  HostTensor m;
  if (d.has_mask) m = decode_image(c, img, 6, sm);
  OutputRef o, l;
  fwd_ref(d, q, k, v, d.has_mask ? &m : nullptr, o, l);
  // O and LSE as a training step saves them: O rounded into the dtype, LSE into fp32.
  const auto& od = c.tensors[3].desc;
  const auto& ld = c.tensors[5].desc;
  const View2D ov = view_of(od);
  for (int64_t r = 0; r < ov.rows; ++r) {
    for (int64_t j = 0; j < ov.cols; ++j)
      poke(od.dtype, img[3], od.offset + r * ov.ld + j, o.ref[static_cast<size_t>(r * ov.cols + j)]);
    poke(DType::kF32, img[5], ld.offset + r, l.ref[static_cast<size_t>(r)]);
  }
  // Upstream gradients that differ per row: row r scaled by 2^((r mod 9) - 4) (exact).
  if (p.b("do_row_scale")) {
    const auto& gd = c.tensors[4].desc;
    const View2D gv = view_of(gd);
    for (int64_t r = 0; r < gv.rows; ++r)
      for (int64_t j = 0; j < gv.cols; ++j) {
        const int64_t e = gd.offset + r * gv.ld + j;
        poke(gd.dtype, img[4], e, std::ldexp(peek(gd.dtype, img[4], e), static_cast<int>(r % 9) - 4));
      }
  }
}

/// dQ, dK, dV from Q, K, V, O, dO, LSE, [M] (t in attention_bwd's order); with_tol: also their
/// tolerances under the declared arithmetic (the header's backward analysis).
void bwd_pass(const AttnDims& d, const std::vector<HostTensor>& t, bool with_tol, bool fast_math,
              std::vector<OutputRef>& out) {
  const HostTensor &q = t[0], &k = t[1], &v = t[2], &o = t[3], &dout = t[4], &lse = t[5];
  const HostTensor* mask = d.has_mask ? &t[6] : nullptr;
  const int64_t G = d.H / d.Hkv, qrows = d.B * d.H * d.Sq, krows = d.B * d.Hkv * d.Sk, D = d.D;
  // Per element: value, error sum (sum e |x|) and magnitude sum (sum (|w| + e)|x|); the per-pair
  // step and the finish are references/host/attention.h's, which the device reference runs too.
  std::vector<ref::AttnBwdSums> dq(static_cast<size_t>(qrows * D)), dk(static_cast<size_t>(krows * D)),
      dv(static_cast<size_t>(krows * D));
  const ref::AttnBwdConsts kc = ref::attn_bwd_consts(D, fast_math);
  std::vector<double> s, smag;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t kbase = (b * d.Hkv + h / G) * d.Sk;
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + h) * d.Sq + i;
        const double L = lse.data[row];
        if (L == -INFINITY) continue;  // fully masked row: P = 0, zero gradients
        scores(d, q, k, mask, row, i, kbase, s, smag);
        const double* doi = dout.data + row * dout.v.ld;
        const double* oi = o.data + row * o.v.ld;
        const double* qi = q.data + row * q.v.ld;
        double Di = 0, Dmag = 0;
        ref::attn_dot_mag(doi, oi, D, Di, Dmag);
        for (int64_t j = 0; j < d.Sk; ++j) {
          const double sj = s[static_cast<size_t>(j)];
          if (!std::isfinite(sj)) continue;
          const int64_t kr = kbase + j;
          const double* kj = k.data + kr * k.v.ld;
          const double* vj = v.data + kr * v.v.ld;
          double dP = 0, dPmag = 0;
          ref::attn_dot_mag(doi, vj, D, dP, dPmag);
          const ref::AttnBwdPair pr =
              ref::attn_bwd_pair(sj, smag[static_cast<size_t>(j)], L, dP, dPmag, Di, Dmag, kc, with_tol);
          const double adS = std::fabs(pr.dS);
          for (int64_t c = 0; c < D; ++c) {
            const size_t lk = static_cast<size_t>(kr * D + c), lq = static_cast<size_t>(row * D + c);
            if (!with_tol) {
              dv[lk].add_value(pr.P, doi[c]);
              dk[lk].add_value(pr.dS, qi[c]);
              dq[lq].add_value(pr.dS, kj[c]);
              continue;
            }
            dv[lk].add(pr.P, pr.P, pr.ep, doi[c]);
            dk[lk].add(pr.dS, adS, pr.eds, qi[c]);
            dq[lq].add(pr.dS, adS, pr.eds, kj[c]);
          }
        }
      }
    }
  const int64_t Nk = G * d.Sq, Nq = d.Sk;
  const StoreRounding store = store_rounding_for(d.dt);  // the dtype's half ulp (none for fp32)
  auto finish = [&](const std::vector<ref::AttnBwdSums>& acc, const ref::AttnBwdFinish& f) {
    OutputRef r;
    r.ref.resize(acc.size());
    for (size_t l = 0; l < acc.size(); ++l) r.ref[l] = ref::attn_bwd_ref(f, acc[l]);
    if (!with_tol) return r;
    r.tol.resize(acc.size());
    for (size_t l = 0; l < acc.size(); ++l) r.tol[l] = ref::attn_bwd_tol(f, r.ref[l], acc[l], store);
    return r;
  };
  out.clear();
  out.push_back(finish(dq, ref::attn_bwd_finish(d.scale, Nq, true)));
  out.push_back(finish(dk, ref::attn_bwd_finish(d.scale, Nk, true)));
  out.push_back(finish(dv, ref::attn_bwd_finish(1.0, Nk, false)));
}

Status reference_bwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  bwd_pass(dims_of(Params(c.params)), t, false, false, out);
  return ok_status();
}

Status bound_bwd(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  std::vector<OutputRef> full;
  bwd_pass(dims_of(Params(c.params)), t, true, a.fast_math, full);
  for (size_t o = 0; o < out.size() && o < full.size(); ++o) out[o].tol = std::move(full[o].tol);
  return ok_status();
}

// ---- device reference ------------------------------------------------------------------
/// Forward cases from this much work (B H Sq Sk D) up take the device path, whatever their
/// dtype. The device path costs a fixed few launches per case (two per tensor to draw it, one
/// for the reference); the host path costs drawing every element of Q, K and V (the value
/// classes' Philox and series, then the fp16 / bf16 rounding), uploading them, and the
/// reference and bound at a few ns per unit of work plus exp and log per score, all growing
/// with the case. In the bench split of small cases (docs/results.md, H100) those host phases
/// took three quarters of attention's lane time and the device reference 1%, while 80% of the
/// cases (fp16 / bf16) could not take the device path: the gain is in moving those, not in
/// moving the threshold. A narrow dtype does not move the crossover either (the host rounds
/// each element once more, the device costs the same), so the threshold stays where it was set
/// for fp32: below it (Sq = Sk = 8 at D = 64 is 4096) a case is a handful of keys, a host cost
/// of the order of the launches it would save. The GPU test
/// AttentionDeviceRefGpu.EngineTimesBothPathsNearTheThreshold prints both paths' time per case
/// just above it, to check that choice on the machine at hand.
constexpr int64_t kDeviceRefWork = 4096;

/// Any of the op's dtypes (materialize_device draws fp32, fp16 and bf16).
bool device_when(const Params& p) {
  if (!device_ref::input_rows_support(p.dt("dtype"))) return false;
  const AttnDims d = dims_of(p);
  if (d.D > device_ref::kAttentionF64MaxD || d.Sk > device_ref::kAttentionF64MaxSk) return false;
  return d.B * d.H * d.Sq * d.Sk * d.D >= kDeviceRefWork;
}

/// A device tensor's rows as the device references read them.
device_ref::InputRows dev_rows(const DevTensor& x) {
  return device_ref::input_rows(x.ptr, x.v.cols, x.v.ld, x.dtype);
}

/// prepare_fwd on the device: the fully masked rows, in the snapshot every launch restores from.
Status device_prepare_fwd(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  const Params prm(c.params);
  if (!dims_of(prm).has_mask) return ok_status();
  if (t.size() != 6 || t[3].dtype != DType::kF32)
    return invalid_argument("attention: no device reference for this case (M must be fp32)");
  return device_ref::attention_mask_rows(t[3].as<float>(), t[3].v.rows, t[3].v.cols, t[3].v.ld,
                                         prm.i("masked_every", 0), ctx.stream);
}

/// O and LSE with their tolerances on the device (references/device/attention_f64.cu), the
/// tolerance itself in mag (DeviceOutput's defaults: a bound computed outright, as the host
/// path uploads it).
Status device_compute_fwd(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                          std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  const Params prm(c.params);
  const AttnDims d = dims_of(prm);
  if (!device_ref::input_rows_support(d.dt) || t.size() != 6 || out.size() != 2 || t[0].dtype != d.dt ||
      t[1].dtype != d.dt || t[2].dtype != d.dt || t[3].dtype != DType::kF32)
    return invalid_argument("attention: no device reference for this case (Q, K, V in fp32, fp16 or bf16, M fp32)");
  const device_ref::AttentionF64Problem p = attention_fwd_problem(d, a);
  device_ref::AttentionF64Io io;
  io.q = dev_rows(t[0]), io.k = dev_rows(t[1]), io.v = dev_rows(t[2]), io.mask = dev_rows(t[3]);
  io.o_ref = out[0].ref, io.o_tol = out[0].mag, io.lse_ref = out[1].ref, io.lse_tol = out[1].mag;
  return device_ref::attention_fwd_f64_reference(p, io, ctx.stream);
}

/// Backward cases take the device path where the forward's would (its prepare runs the forward's
/// device reference) and their (row, key) pairs fit the scratch (four doubles and a flag each:
/// 33 MiB at this cap). The gradcheck relation's cases too (device_properties_bwd).
constexpr int64_t kDeviceBwdPairs = int64_t{1} << 20;

bool device_when_bwd(const Params& p) {
  if (!device_when(p)) return false;
  const AttnDims d = dims_of(p);
  return d.B * d.H * d.Sq * d.Sk <= kDeviceBwdPairs;
}

/// The backward's scratch, then the forward's O and LSE with their (unused) tolerances: one
/// layout for the bytes device_scratch_bwd reports and the carving device_compute_bwd does.
void bwd_scratch_layout(const device_ref::AttentionBwdF64Problem& p, int64_t D, ScratchCarver& s,
                        device_ref::AttentionBwdF64Io& io, device_ref::AttentionF64Io& fio) {
  device_ref::attention_bwd_f64_scratch(p, s, io);
  fio.o_ref = s.take<double>(p.rows() * D), fio.o_tol = s.take<double>(p.rows() * D);
  fio.lse_ref = s.take<double>(p.rows()), fio.lse_tol = s.take<double>(p.rows());
}

/// A gradcheck case's arrays on the device path, after the backward's: the differences of the
/// forward (references/device/attention_fd_f64.h), the backward from the exact O and LSE (dQ, dK,
/// dV, and tolerances nothing reads) whose distance from the reference is the declared deviation,
/// and the relation's partial sums.
struct GradScratch {
  device_ref::AttentionFdIo fd;
  double* exact[3] = {nullptr, nullptr, nullptr};
  double* exact_tol[3] = {nullptr, nullptr, nullptr};
  unsigned char* sums = nullptr;
};

GradScratch grad_layout(const AttnDims& d, ScratchCarver& s) {
  GradScratch g;
  device_ref::attention_fd_f64_scratch(attention_fwd_problem(d, Arithmetic{}), s, g.fd);
  const int64_t n[3] = {d.B * d.H * d.Sq * d.D, d.B * d.Hkv * d.Sk * d.D, d.B * d.Hkv * d.Sk * d.D};
  for (int t = 0; t < 3; ++t) g.exact[t] = s.take<double>(n[t]), g.exact_tol[t] = s.take<double>(n[t]);
  g.sums = s.take<unsigned char>(device_ref::grad_sums_scratch());
  return g;
}

/// The backward's scratch, then a gradcheck case's (grad_layout) into *g where it is one.
void bwd_case_layout(const Case& c, const AttnDims& d, ScratchCarver& s, device_ref::AttentionBwdF64Io& io,
                     device_ref::AttentionF64Io& fio, GradScratch* g) {
  bwd_scratch_layout(attention_bwd_problem(d, false), d.D, s, io, fio);
  if (wants_gradcheck(c)) *g = grad_layout(d, s);
}

int64_t device_scratch_bwd(const Case& c) {
  const AttnDims d = dims_of(Params(c.params));
  ScratchCarver s;
  device_ref::AttentionBwdF64Io io;
  device_ref::AttentionF64Io fio;
  GradScratch g;
  bwd_case_layout(c, d, s, io, fio, &g);
  return s.bytes();
}

/// The device path's inputs of attention_bwd, or a clear error.
Status device_bwd_fits(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  const AttnDims d = dims_of(Params(c.params));
  bool fits =
      device_ref::input_rows_support(d.dt) && t.size() == 10 && t[5].dtype == DType::kF32 && t[6].dtype == DType::kF32;
  for (size_t i = 0; fits && i < 5; ++i) fits = t[i].dtype == d.dt;
  if (!fits)
    return invalid_argument(
        "attention_bwd: no device reference for this case (Q, K, V, O, dO in fp32, fp16 or bf16, LSE and M fp32)");
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch_bwd(c))
    return invalid_argument("attention_bwd: device reference scratch missing or too small");
  return ok_status();
}

/// What device_prepare_bwd and device_compute_bwd share: the case's dimensions and the scratch
/// carved as device_scratch_bwd counted it.
struct BwdDevice {
  AttnDims d;
  device_ref::AttentionBwdF64Io io;
  device_ref::AttentionF64Io fio;
  GradScratch g;
};

StatusOr<BwdDevice> bwd_device(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_bwd_fits(c, t, ctx));
  BwdDevice b;
  b.d = dims_of(Params(c.params));
  ScratchCarver scratch(ctx.scratch);
  bwd_case_layout(c, b.d, scratch, b.io, b.fio, &b.g);
  return b;
}

/// prepare_bwd on the device: the fully masked rows, then O and LSE by the forward's device
/// reference (the host's fwd_ref, step for step) into the scratch, and the prepared O, LSE and dO
/// written into the snapshot, as prepare_bwd writes the host images. Once per draw: a second call
/// would scale dO's rows again.
Status device_prepare_bwd(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  ASSAY_ASSIGN_OR_RETURN(BwdDevice b, bwd_device(c, t, ctx));
  const Params prm(c.params);
  const AttnDims& d = b.d;
  device_ref::AttentionF64Io& fio = b.fio;
  if (d.has_mask)
    ASSAY_RETURN_IF_ERROR(device_ref::attention_mask_rows(t[6].as<float>(), t[6].v.rows, t[6].v.cols, t[6].v.ld,
                                                          prm.i("masked_every", 0), ctx.stream));
  // O and LSE only: no tolerance is read.
  const device_ref::AttentionF64Problem f = attention_fwd_problem(d, Arithmetic{});
  fio.q = dev_rows(t[0]), fio.k = dev_rows(t[1]), fio.v = dev_rows(t[2]), fio.mask = dev_rows(t[6]);
  ASSAY_RETURN_IF_ERROR(device_ref::attention_fwd_f64_reference(f, fio, ctx.stream));
  device_ref::AttentionBwdPrepareIo pio;
  pio.o_ref = fio.o_ref, pio.lse_ref = fio.lse_ref;
  pio.o = t[3].ptr, pio.o_ld = t[3].v.ld, pio.o_type = dev_rows(t[3]).type;
  pio.lse = t[5].as<float>();
  pio.dout = t[4].ptr, pio.do_ld = t[4].v.ld, pio.do_type = dev_rows(t[4]).type;
  pio.do_row_scale = prm.b("do_row_scale");
  pio.rows = attention_bwd_problem(d, false).rows(), pio.D = d.D;
  return device_ref::attention_bwd_f64_prepare(pio, ctx.stream);
}

/// dQ, dK, dV with their tolerances (references/device/attention_bwd_f64.cu) on the inputs
/// device_prepare_bwd prepared, each tolerance outright in mag as the forward's. A gradcheck
/// case then leaves the relation's J u and exact-O gradients in the scratch (GradScratch).
Status device_compute_bwd(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                          std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  if (out.size() != 3) return invalid_argument("attention_bwd: the device reference has three outputs");
  ASSAY_ASSIGN_OR_RETURN(BwdDevice b, bwd_device(c, t, ctx));
  const AttnDims& d = b.d;
  device_ref::AttentionBwdF64Io& io = b.io;
  const device_ref::AttentionF64Io& fio = b.fio;
  GradScratch& g = b.g;
  const device_ref::AttentionBwdF64Problem p = attention_bwd_problem(d, a.fast_math);
  const device_ref::AttentionF64Problem f = attention_fwd_problem(d, Arithmetic{});
  // The backward on the prepared inputs.
  io.q = dev_rows(t[0]), io.k = dev_rows(t[1]), io.v = dev_rows(t[2]), io.o = dev_rows(t[3]);
  io.dout = dev_rows(t[4]);
  io.lse = dev_rows(t[5]), io.mask = dev_rows(t[6]);
  io.dq_ref = out[0].ref, io.dq_tol = out[0].mag;
  io.dk_ref = out[1].ref, io.dk_tol = out[1].mag;
  io.dv_ref = out[2].ref, io.dv_tol = out[2].mag;
  ASSAY_RETURN_IF_ERROR(device_ref::attention_bwd_f64_reference(p, io, ctx.stream));
  if (!wants_gradcheck(c)) return ok_status();
  // The relation's J u by differences of the fp64 forward at the prepared mask (properties_bwd's
  // forward), then the backward again from the exact O and LSE (properties_bwd's gx): both into
  // the scratch, for device_properties_bwd.
  g.fd.q = io.q, g.fd.k = io.k, g.fd.v = io.v, g.fd.mask = io.mask;
  g.fd.seed = gradcheck_seed(c);
  g.fd.forward_ulps = FdOptions{}.forward_ulps;
  ASSAY_RETURN_IF_ERROR(device_ref::attention_fd_f64(f, g.fd, ctx.stream));
  device_ref::AttentionBwdF64Io exact = io;
  exact.o = device_ref::f64_rows(fio.o_ref, d.D, d.D);
  exact.lse = device_ref::f64_rows(fio.lse_ref, p.rows(), p.rows());
  exact.dq_ref = g.exact[0], exact.dq_tol = g.exact_tol[0];
  exact.dk_ref = g.exact[1], exact.dk_tol = g.exact_tol[1];
  exact.dv_ref = g.exact[2], exact.dv_tol = g.exact_tol[2];
  return device_ref::attention_bwd_f64_reference(attention_bwd_problem(d, false), exact, ctx.stream);
}

/// The words the failure uses for J u differenced on the device.
constexpr const char* kFdOnDevice = "by central differences of the fp64 forward (on the device)";
/// How the relation's failure names the contraction and the gradients, on either path.
constexpr const char* kGradLabel = "<dO, J u>";
constexpr const char* kGradNames[3] = {"dQ", "dK", "dV"};

// ---- properties ---------------------------------------------------------------------
/// fp64 forward O = softmax(S) V on Q, K, V packed dense one after another in x (the gradcheck's
/// function) into y (may be null); mag (may be null): per output a bound on its rounding error in
/// units of 16 u (Differentiable::magnitude): sum_j P_j |v_j| (1 + ((D + 2)(smag_j + sum_l P_l smag_l) + 2 Sk + 8) / 16),
/// smag the scores' magnitude scale sum |q||k| + |mask|.
void attention_forward_packed(const AttnDims& d, const HostTensor* mask, const double* x, double* y, double* mag) {
  const int64_t G = d.H / d.Hkv, qr = d.B * d.H * d.Sq, kr = d.B * d.Hkv * d.Sk, D = d.D;
  const HostTensor q{x, {qr, D, D}}, k{x + qr * D, {kr, D, D}}, v{x + (qr + kr) * D, {kr, D, D}};
  std::vector<double> s, smag, P(static_cast<size_t>(d.Sk));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t kbase = (b * d.Hkv + h / G) * d.Sk;
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + h) * d.Sq + i;
        double* yo = y != nullptr ? y + row * D : nullptr;
        double* mo = mag != nullptr ? mag + row * D : nullptr;
        if (yo != nullptr) std::fill(yo, yo + D, 0.0);
        if (mo != nullptr) std::fill(mo, mo + D, 0.0);
        scores(d, q, k, mask, row, i, kbase, s, smag);
        double mx = -INFINITY;
        for (double e : s) mx = std::max(mx, e);
        if (mx == -INFINITY) continue;  // fully masked: O = 0
        double Z = 0, PE = 0;
        for (int64_t j = 0; j < d.Sk; ++j) Z += P[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - mx);
        for (int64_t j = 0; j < d.Sk; ++j) {
          P[static_cast<size_t>(j)] /= Z;
          PE += P[static_cast<size_t>(j)] * smag[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < d.Sk; ++j) {
          const double pj = P[static_cast<size_t>(j)];
          if (pj == 0) continue;
          const double* vj = v.data + (kbase + j) * D;
          if (yo != nullptr)
            for (int64_t c = 0; c < D; ++c) yo[c] += pj * vj[c];
          if (mo == nullptr) continue;
          const double w = ref::attn_fd_mag_weight(pj, smag[static_cast<size_t>(j)], PE, D, d.Sk);
          for (int64_t c = 0; c < D; ++c) mo[c] += w * std::fabs(vj[c]);
        }
      }
    }
}

}  // namespace

Status device_gradcheck_sums_bwd(const Case& c, const DevicePropertiesIn& in, const DeviceContext& ctx,
                                 GradSums& sums) {
  sums = GradSums{};
  if (!wants_gradcheck(c)) return ok_status();
  if (in.inputs.size() != 10 || in.outputs.size() != 3 || in.refs.size() != 3)
    return invalid_argument("attention_bwd: gradcheck on the device needs 10 inputs, 3 outputs, 3 references");
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch_bwd(c))
    return invalid_argument("attention_bwd: device reference scratch missing or too small");
  const AttnDims d = dims_of(Params(c.params));
  ScratchCarver scratch(ctx.scratch);
  device_ref::AttentionBwdF64Io io;
  device_ref::AttentionF64Io fio;
  GradScratch g;
  bwd_case_layout(c, d, scratch, io, fio, &g);
  device_ref::GradSumsIn gi;
  gi.n_terms = 3;
  int64_t offset = 0;
  for (int t = 0; t < 3; ++t) {
    const DevTensor& grad = in.outputs[static_cast<size_t>(t)];
    const DeviceOutput& r = in.refs[static_cast<size_t>(t)];
    const int64_t n = grad.v.rows * grad.v.cols;
    if (!device_ref::input_rows_support(grad.dtype) || r.rows * r.cols != n || grad.v.cols != d.D)
      return invalid_argument("attention_bwd: gradcheck on the device: a gradient's size or dtype does not match");
    device_ref::GradTermIn& term = gi.terms[t];
    term.grad = device_ref::input_rows(grad.ptr, grad.v.cols, grad.v.ld, grad.dtype);
    term.rows = grad.v.rows, term.cols = grad.v.cols;
    term.u = device_ref::f64_rows(g.fd.u_eff + offset, n, n);
    term.ref = r.ref, term.mag = r.mag;
    term.rel_out = r.rel_out, term.rel_mag = r.rel_mag, term.floor = r.floor, term.limit = r.overflow_mag;
    term.exact = g.exact[t];
    offset += n;
  }
  const DevTensor& up = in.inputs[4];  // dO, prepared
  gi.upstream = device_ref::input_rows(up.ptr, up.v.cols, up.v.ld, up.dtype);
  gi.up_rows = up.v.rows, gi.up_cols = up.v.cols;
  gi.jvp = g.fd.jvp, gi.err = g.fd.err;
  return device_ref::grad_sums(gi, g.sums, &sums, ctx.stream);
}

GradProblem grad_problem_bwd(const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                             const std::vector<OutputRef>& refs) {
  const AttnDims d = dims_of(Params(c.params));
  const HostTensor* mask = d.has_mask ? &in[6] : nullptr;
  const int64_t qr = d.B * d.H * d.Sq;
  OutputRef o, l;
  fwd_ref(d, in[0], in[1], in[2], mask, o, l);
  std::vector<HostTensor> exact = in;
  exact[3] = {o.ref.data(), {qr, d.D, d.D}};
  exact[5] = {l.ref.data(), {1, qr, qr}};
  std::vector<OutputRef> gx;
  bwd_pass(d, exact, false, false, gx);
  GradProblem p;
  for (size_t t = 0; t < 3; ++t) {
    GradOperand op;
    op.name = kGradNames[t];
    op.x = in[t];
    op.grad = out[t];
    op.ref = &refs[t];
    op.dev.resize(refs[t].ref.size());
    for (size_t e = 0; e < op.dev.size(); ++e) op.dev[e] = std::fabs(refs[t].ref[e] - gx[t].ref[e]);
    p.operands.push_back(std::move(op));
  }
  p.upstream = pack_dense(in[4]);
  p.forward = [d, mask](const double* x, double* y) { attention_forward_packed(d, mask, x, y, nullptr); };
  p.magnitude = [d, mask](const double* x, double* y) { attention_forward_packed(d, mask, x, nullptr, y); };
  p.forward_mag = [d, mask](const double* x, double* y, double* mag) { attention_forward_packed(d, mask, x, y, mag); };
  p.seed = gradcheck_seed(c);
  p.label = kGradLabel;
  return p;
}

namespace {

/// relation "gradcheck" on the device path: the six sums come back, judged as the host judges
/// its own (judge_grad_projection, the differences' safety factor 4).
Status device_properties_bwd(const Case& c, const DevicePropertiesIn& in, const DeviceContext& ctx,
                             std::vector<Failure>& failures) {
  GradSums s;
  ASSAY_RETURN_IF_ERROR(device_gradcheck_sums_bwd(c, in, ctx, s));
  judge_grad_projection(s, FdOptions{}.safety, kFdOnDevice, kGradLabel,
                        fmt::format("{}, {}, {}", kGradNames[0], kGradNames[1], kGradNames[2]), failures);
  return ok_status();
}

/// relation "gradcheck": <dO, J u> by central differences of the fp64 forward (Q, K, V) -> O
/// against sum u . (dQ, dK, dV) of the kernel (properties/gradcheck_relation.h).
void properties_bwd(const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                    const std::vector<OutputRef>& refs, std::vector<Failure>& failures) {
  if (!wants_gradcheck(c) || out.size() != 3 || refs.size() != 3) return;
  check_grad_projection(grad_problem_bwd(c, in, out, refs), failures);
}

// ---- self-checks ----------------------------------------------------------------------
/// A small GQA problem (B 1, H 2, Hkv 1, Sq 3, Sk 5, D 3) with a mask, causal, packed dense.
struct Tiny {
  AttnDims d;
  std::vector<double> q, k, v, m;
  Tiny() {
    d.B = 1, d.H = 2, d.Hkv = 1, d.Sq = 3, d.Sk = 5, d.D = 3, d.causal = true, d.has_mask = true, d.scale = 0.5;
    auto fill = [](int64_t n, double f) {
      std::vector<double> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(f * static_cast<double>(i + 1)) * 2;
      return x;
    };
    q = fill(d.B * d.H * d.Sq * d.D, 0.7), k = fill(d.B * d.Hkv * d.Sk * d.D, 1.3), v = fill(d.B * d.Hkv * d.Sk * d.D, 0.4);
    m = fill(d.Sq * d.Sk, 2.1);
  }
  HostTensor view(const std::vector<double>& x, int64_t cols) const {
    const int64_t rows = static_cast<int64_t>(x.size()) / cols;
    return {x.data(), {rows, cols, cols}};
  }
  /// O and LSE of (q, k, v) in long double, straight from the definition.
  void forward(const std::vector<long double>& ql, const std::vector<long double>& kl,
               const std::vector<long double>& vl, std::vector<long double>& o, std::vector<long double>& lse) const {
    const int64_t G = d.H / d.Hkv;
    o.assign(static_cast<size_t>(d.B * d.H * d.Sq * d.D), 0.0L);
    lse.assign(static_cast<size_t>(d.B * d.H * d.Sq), 0.0L);
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = h * d.Sq + i, kb = (h / G) * d.Sk;
        std::vector<long double> s(static_cast<size_t>(d.Sk), -INFINITY);
        long double mx = -INFINITY, z = 0;
        for (int64_t j = 0; j < d.Sk && (!d.causal || j <= i); ++j) {
          long double dot = 0;
          for (int64_t c = 0; c < d.D; ++c)
            dot += ql[static_cast<size_t>(row * d.D + c)] * kl[static_cast<size_t>((kb + j) * d.D + c)];
          s[static_cast<size_t>(j)] = static_cast<long double>(d.scale) * dot + m[static_cast<size_t>(i * d.Sk + j)];
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        for (long double x : s) z += std::exp(x - mx);
        lse[static_cast<size_t>(row)] = mx + std::log(z);
        for (int64_t j = 0; j < d.Sk; ++j)
          for (int64_t c = 0; c < d.D; ++c)
            o[static_cast<size_t>(row * d.D + c)] +=
                std::exp(s[static_cast<size_t>(j)] - mx) / z * vl[static_cast<size_t>((kb + j) * d.D + c)];
      }
  }
};

std::vector<long double> widen(const std::vector<double>& x) {
  return {x.begin(), x.end()};
}

Status self_check_fwd(std::string& report) {
  const Tiny t;
  OutputRef o, l;
  const HostTensor mask = t.view(t.m, t.d.Sk);
  fwd_ref(t.d, t.view(t.q, t.d.D), t.view(t.k, t.d.D), t.view(t.v, t.d.D), &mask, o, l);
  std::vector<long double> eo, el;
  t.forward(widen(t.q), widen(t.k), widen(t.v), eo, el);
  double worst = 0;
  for (size_t i = 0; i < eo.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(o.ref[i] - eo[i]) / (std::fabs(eo[i]) + 1e-3L)));
  for (size_t i = 0; i < el.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(l.ref[i] - el[i]) / (std::fabs(el[i]) + 1e-3L)));
  if (!(worst < 1e-13)) return internal_error(fmt::format("attention: host reference off by {:.3g}", worst));
  report += fmt::format(
      "attention: host O and LSE within {:.2g} of a long-double evaluation (GQA, causal, masked, 6 rows)\n", worst);
  return ok_status();
}

/// The backward reference (from the exact O and LSE) against central differences of the
/// long-double forward of <dO, O(Q, K, V)> in every input element.
Status self_check_bwd(std::string& report) {
  const Tiny t;
  std::vector<long double> eo, el;
  t.forward(widen(t.q), widen(t.k), widen(t.v), eo, el);
  std::vector<double> o(eo.begin(), eo.end()), lse(el.begin(), el.end()), dout(o.size());
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = std::cos(0.9 * static_cast<double>(i));
  const std::vector<HostTensor> in = {t.view(t.q, t.d.D),  t.view(t.k, t.d.D), t.view(t.v, t.d.D),
                                      t.view(o, t.d.D),    t.view(dout, t.d.D),
                                      {lse.data(), {1, static_cast<int64_t>(lse.size()), static_cast<int64_t>(lse.size())}},
                                      t.view(t.m, t.d.Sk)};
  std::vector<OutputRef> g;
  bwd_pass(t.d, in, false, false, g);
  double worst = 0;
  const std::vector<double>* xs[3] = {&t.q, &t.k, &t.v};
  for (size_t w = 0; w < 3; ++w)
    for (size_t e = 0; e < xs[w]->size(); ++e) {
      auto loss = [&](long double delta) {
        std::vector<long double> ql = widen(t.q), kl = widen(t.k), vl = widen(t.v), o2, l2;
        std::vector<long double>* mine[3] = {&ql, &kl, &vl};
        (*mine[w])[e] += delta;
        t.forward(ql, kl, vl, o2, l2);
        long double s = 0;
        for (size_t i = 0; i < o2.size(); ++i) s += o2[i] * dout[i];
        return s;
      };
      const long double hstep = 1e-5L;
      const long double fd = (loss(hstep) - loss(-hstep)) / (2 * hstep);
      worst = std::max(worst, static_cast<double>(std::fabs(g[w].ref[e] - fd) / (std::fabs(fd) + 1e-2L)));
    }
  if (!(worst < 1e-6))
    return internal_error(fmt::format("attention_bwd: host gradients off by {:.3g} against finite differences", worst));
  report += fmt::format(
      "attention_bwd: host dQ, dK, dV within {:.2g} of long-double central differences (GQA, causal, masked)\n", worst);
  return ok_status();
}

// ---- vendor ------------------------------------------------------------------------------------------

Status cudnn_attention(const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
  const DevTensor &q = t[0], &k = t[1], &v = t[2], &o = t[4], &lse = t[5];
  if (q.dtype != DType::kF16 && q.dtype != DType::kBF16)
    return unavailable(fmt::format("cuDNN SDPA takes fp16 / bf16, not {}", dtype_name(q.dtype)));
  if (p.b("mask")) return unavailable("the additive mask M is not part of the SDPA graph assay builds");
  if (p.i("G", 1) != 1) return unavailable("grouped query heads (G > 1) are not part of the SDPA graph assay builds");
  if (p.i("D", 1) % 8 != 0) return unavailable(fmt::format("cuDNN SDPA needs D % 8 == 0 (D = {})", p.i("D", 1)));
  for (const DevTensor* x : {&q, &k, &v, &o, &lse}) {
    bool aligned = reinterpret_cast<uintptr_t>(x->ptr) % 16 == 0;
    for (size_t d = 0; d + 1 < x->strides.size(); ++d)
      aligned = aligned && (x->strides[d] * static_cast<int64_t>(dtype_size(x->dtype))) % 16 == 0;
    if (!aligned) return unavailable("cuDNN SDPA needs 16-byte aligned tensors and rows");
  }
  ASSAY_ASSIGN_OR_RETURN(vendor::CudnnHandle * h, vendor_columns::cudnn_handle(s));
  vendor::CudnnSdpa a;
  a.batch = p.i("B", 1);
  a.heads = p.i("Hkv", 1);
  a.sq = p.i("Sq", 1);
  a.sk = p.i("Sk", 1);
  a.d = p.i("D", 1);
  a.dtype = q.dtype;
  a.scale = static_cast<float>(p.has("scale") ? p.r("scale") : 1.0 / std::sqrt(static_cast<double>(a.d)));
  a.causal = p.b("causal");
  // Q, O: [B, Hkv, G = 1, Sq, D]; K, V: [B, Hkv, Sk, D].
  const int64_t qs[4] = {q.strides[0], q.strides[1], q.strides[3], 1}, os[4] = {o.strides[0], o.strides[1], o.strides[3], 1};
  const int64_t ks[4] = {k.strides[0], k.strides[1], k.strides[2], 1}, vs[4] = {v.strides[0], v.strides[1], v.strides[2], 1};
  std::copy(qs, qs + 4, a.q_stride);
  std::copy(ks, ks + 4, a.k_stride);
  std::copy(vs, vs + 4, a.v_stride);
  std::copy(os, os + 4, a.o_stride);
  return vendor::cudnn_sdpa_forward(*h, a, q.ptr, k.ptr, v.ptr, o.ptr, lse.as<float>()).status();
}

OpDef make(bool fwd) {
  OpDef op;
  op.name = fwd ? "attention" : "attention_bwd";
  op.description = fwd ? "scaled dot-product attention forward (O, LSE), causal top-left, GQA, additive fp32 mask, "
                         "fp32/fp16/bf16 storage with fp32 arithmetic"
                       : "attention backward (dQ, dK, dV) from Q, K, V, saved O and LSE, and dO; deterministic";
  op.params = params(fwd);
  op.tensors = tensors(fwd);
  op.check = [name = op.name](const Params& p) { return check(name, p); };
  op.prepare = fwd ? prepare_fwd : prepare_bwd;
  op.reference = fwd ? reference_fwd : reference_bwd;
  op.bound = fwd ? bound_fwd : bound_bwd;
  op.bound_name = fwd ? "attention ceiling" : "attention-backward ceiling";
  if (!fwd) op.properties = properties_bwd;
  op.self_check = fwd ? self_check_fwd : self_check_bwd;
  op.device_reference.when = fwd ? device_when : device_when_bwd;
  op.device_reference.prepare = fwd ? device_prepare_fwd : device_prepare_bwd;
  op.device_reference.compute = fwd ? device_compute_fwd : device_compute_bwd;
  if (!fwd) {
    op.device_reference.scratch = device_scratch_bwd;
    op.device_reference.properties = device_properties_bwd;
  }
  if (fwd) {
    op.backward = "attention_bwd";
    // What the SDPA graph cudnn_attention builds takes (its checks above say why).
    op.vendor = {.name = "cudnn-sdpa",
                 .run = cudnn_attention,
                 .contract = Contract()
                                 .dtypes({DType::kF16, DType::kBF16})
                                 .narrow_intermediates()
                                 .only("mask", {false})
                                 .only("G", {1})
                                 .multiple_of("D", 8)
                                 .aligned(16)};
  }
  return op;
}

// ---- binding ---------------------------------------------------------------------
ASSAY_REGISTER(register_op(make(true)));
ASSAY_REGISTER(register_op(make(false)));
ASSAY_REGISTER(add_variant(
    "attention",
    {.name = "flash",
     .description =
         "32 query rows per CTA (warp per 8 rows), key tiles of 64 in shared memory, online softmax, fp32 CUDA-core FMA",
     .launch = attention_fwd_launch(kernels::attention::flash_fwd),
     .contract = Contract().tile("kv_tile", kernels::attention::kFwdKeyTile),
     .source = "kernels/attention/flash_fwd.cu"}));
ASSAY_REGISTER(add_variant(
    "attention_bwd",
    {.name = "flash",
     .description = "dK/dV: CTA per 32 keys over every query head of the group and query tile in order; dQ: CTA per 32 "
                    "query rows; recomputes P from LSE, no atomics",
     .launch = attention_bwd_launch(kernels::attention::flash_bwd),
     .source = "kernels/attention/flash_bwd.cu"}));

}  // namespace

device_ref::AttentionF64Problem attention_fwd_problem(const AttnDims& d, const Arithmetic& a) {
  device_ref::AttentionF64Problem p;
  p.B = d.B, p.H = d.H, p.Hkv = d.Hkv, p.Sq = d.Sq, p.Sk = d.Sk, p.D = d.D;
  p.causal = d.causal, p.has_mask = d.has_mask, p.scale = d.scale;
  p.key_tile = a.tile("kv_tile", kernels::attention::kFwdKeyTile);
  p.soft = fwd_softmax(d, a.fast_math);
  p.store = store_rounding_for(d.dt);
  p.narrow = narrow_p(d, a.narrow_intermediates);
  return p;
}

device_ref::AttentionBwdF64Problem attention_bwd_problem(const AttnDims& d, bool fast_math) {
  device_ref::AttentionBwdF64Problem p;
  p.B = d.B, p.H = d.H, p.Hkv = d.Hkv, p.Sq = d.Sq, p.Sk = d.Sk, p.D = d.D;
  p.causal = d.causal, p.has_mask = d.has_mask, p.scale = d.scale;
  p.consts = ref::attn_bwd_consts(d.D, fast_math);
  p.store = store_rounding_for(d.dt);
  return p;
}

void attention_fwd_reference(const AttnDims& d, const HostTensor& q, const HostTensor& k, const HostTensor& v,
                             const HostTensor* mask, OutputRef& o, OutputRef& lse, int64_t key_tile, bool fast_math) {
  fwd_ref(d, q, k, v, mask, o, lse);
  fwd_tol(d, key_tile, fast_math, ref::AttnNarrowP{}, o, lse);
}

}  // namespace assay::attention
