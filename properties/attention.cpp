// attention / attention_bwd: scaled dot-product attention, FlashAttention style,
// forward (Q, K, V, [mask] -> O, LSE) and backward (Q, K, V, O, dO, LSE, [mask]
// -> dQ, dK, dV).
//
// Sections: binding, generators, references, bounds.
// Binding: kernels/attention/flash_fwd.cu and flash_bwd.cu (variant "flash");
// mutants in tests/mutants/attention/ register beside them through the same
// function-pointer binding (properties/attention_registry.h).
// Declared behaviour (kernels/attention/attention.h): S = scale q.k + mask,
// scale the fp32 value of params.scale (default 1/sqrt(D)); causal is top-left
// aligned (key j visible to query i iff j <= i, PyTorch is_causal); GQA head h
// reads kv head h / (H/Hkv); a fully masked row gives O = 0, LSE = -inf and zero
// gradients.
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
//     e^x <= 1 + |x| e^|x| above), |e^x - 1| <= |x| e^|x|. First order: the
//     issue's P_ij (|dS_ij| + sum_l P_il |dS_il|).
//  3. Online softmax on the computed scores: softmax_bounds (harness/bounds.h)
//     with rescales = ceil(Sk/64) key tiles (one rescale per tile, no merges:
//     one warp owns a row), n = Sk, magnitudes P'|t'| <= (P + tol_2)(|t| + 2E).
//     Its division term covers O's final o * (1/l).
//  4. O_i = sum_j P_ij v_j: o accumulates e^_j v_j by FMA, one tile after
//     another, rescaled once per tile: every term meets at most Sk + T + 1
//     roundings, so |O^ - O| <= sum_j tolP_ij |v_j| + gamma_{Sk+T+1} sum_j
//     (P_ij + tolP_ij)|v_j| + underflow floor, tolP = tol_2 + tol_3; then half an
//     ulp of O's dtype at |O| + that (fp16/bf16 stores).
//  5. LSE = m + logf(l): log_softmax_bounds' log-sum-exp part (l_Z, the logf
//     error, u|LSE| for the addition) plus the score error e^E sum_l P_l E_l.
// Backward (the running-error analysis of the kernel's own expression tree):
//     p^ = expf(s^ - LSE): |p^ - P| <= e_p = P [exp(E + u(|S - LSE| + E)) (1 + 5u) - 1]
//       + min_normal (expf 2 ulp + rounding = 5u, [CUDA]);
//     dP and D_i serial dot products: |err| <= a = gamma_D (|dO_i||v_j| + |dO_i||O_i|);
//     dS^ = fl(p^ fl(dP^ - D^)): |dS^ - dS| <= e_dS = P|x|((1+u)^2 - 1) + (P a + e_p (|x| + a))(1+u)^2
//       + min_normal, x = dP - D;
//     dV_j = sum_i p^ dO_i (N = G Sq terms, FMA): sum_i e_p |dO_i| + gamma_{N+1} sum_i (P + e_p)|dO_i|;
//     dK_j = scale sum_i dS^ q_i: scale [(1+u) sum_i e_dS |q_i| + gamma_{N+2} sum_i (|dS| + e_dS)|q_i|];
//     dQ_i = scale sum_j dS^ k_j: the same with N = Sk;
//     each + (N + 2) min_normal and half an ulp of the dtype.
// The reference's own fp64 error is below 2^-40 of each magnitude and is covered by a
// (1 + 2^-30) factor on every tolerance.
// Value classes: fully masked rows (mask rows of -inf, params.masked_every), random -inf
// mask entries, very large logits (Q scaled by 16..48), Sq = 1, same-sign V, mean-spread V,
// upstream gradients scaled per row (params.do_row_scale, 2^-4 .. 2^4).
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "harness/bounds.h"
#include "harness/generators.h"
#include "harness/shrink.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "harness/values.h"
#include "properties/attention_registry.h"
#include "properties/gradcheck_relation.h"
#include "properties/rowwise_common.h"

namespace assay::attention {

using rowwise::bool_or;
using rowwise::int_or;
using rowwise::num_or;
using rowwise::param_dtype;
using rowwise::param_int;
using rowwise::peek;
using rowwise::poke;
using rowwise::RowOpConfig;
using rowwise::RowOpSpec;
using rowwise::store_rounding;

AttnShape AttnDims::shape() const {
  AttnShape s;
  s.batch = B, s.heads = H, s.kv_heads = Hkv, s.sq = Sq, s.sk = Sk, s.d = D;
  s.causal = causal;
  s.scale = static_cast<float>(scale);
  return s;
}

namespace {

Dt to_dt(DType t) {
  return t == DType::kF16 ? Dt::kF16 : t == DType::kBF16 ? Dt::kBF16 : Dt::kF32;
}

/// The problem of a validated case.
AttnDims dims_of(const Case& c) {
  AttnDims d;
  d.dt = *parse_dtype(c.params["dtype"].get<std::string>());
  d.B = c.params["B"].get<int64_t>();
  d.H = c.params["H"].get<int64_t>();
  d.Hkv = c.params["Hkv"].get<int64_t>();
  d.Sq = c.params["Sq"].get<int64_t>();
  d.Sk = c.params["Sk"].get<int64_t>();
  d.D = c.params["D"].get<int64_t>();
  d.causal = bool_or(c, "causal", false);
  d.has_mask = bool_or(c, "mask", false);
  // The kernel receives an fp32 scale; the reference uses exactly that value.
  d.scale = static_cast<double>(static_cast<float>(num_or(c, "scale", 1.0 / std::sqrt(static_cast<double>(d.D)))));
  return d;
}

// ---- binding ---------------------------------------------------------------------
std::vector<TensorOpVariant>& fwd_registry() {
  static std::vector<TensorOpVariant> v;
  return v;
}
std::vector<TensorOpVariant>& bwd_registry() {
  static std::vector<TensorOpVariant> v;
  return v;
}

}  // namespace

// Forward tensors: Q, K, V, [M], O, LSE. Backward: Q, K, V, O, dO, LSE, [M], dQ, dK, dV.
bool register_attention_fwd(VariantInfo info, AttnFwdFn fn) {
  fwd_registry().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                              const AttnDims d = dims_of(c);
                              const DevTensor* m = d.has_mask ? &t[3] : nullptr;
                              const size_t o = d.has_mask ? 4 : 3;
                              return fn(to_dt(d.dt), d.shape(), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr,
                                        t[2].v.ld, m != nullptr ? m->as<float>() : nullptr, m != nullptr ? m->v.ld : 0,
                                        t[o].ptr, t[o].v.ld, t[o + 1].as<float>(), s);
                            }});
  return true;
}
bool register_attention_bwd(VariantInfo info, AttnBwdFn fn) {
  bwd_registry().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                              const AttnDims d = dims_of(c);
                              const DevTensor* m = d.has_mask ? &t[6] : nullptr;
                              const size_t g = d.has_mask ? 7 : 6;
                              return fn(to_dt(d.dt), d.shape(), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr,
                                        t[2].v.ld, t[3].ptr, t[3].v.ld, t[4].ptr, t[4].v.ld, t[5].as<float>(),
                                        m != nullptr ? m->as<float>() : nullptr, m != nullptr ? m->v.ld : 0, t[g].ptr,
                                        t[g].v.ld, t[g + 1].ptr, t[g + 1].v.ld, t[g + 2].ptr, t[g + 2].v.ld, s);
                            }});
  return true;
}

namespace {

[[maybe_unused]] const bool kFwd = register_attention_fwd(
    {"flash",
     "32 query rows per CTA (warp per 8 rows), key tiles of 64 in shared memory, online softmax, fp32 CUDA-core FMA",
     false, true, "kernels/attention/flash_fwd.cu"},
    kernels::attention::flash_fwd);
[[maybe_unused]] const bool kBwd = register_attention_bwd(
    {"flash",
     "dK/dV: CTA per 32 keys over every query head of the group and query tile in order; dQ: CTA per 32 query rows; "
     "recomputes P from LSE, no atomics",
     false, true, "kernels/attention/flash_bwd.cu"},
    kernels::attention::flash_bwd);

constexpr int64_t kMaxBH = 256, kMaxS = 4096, kMaxWork = int64_t{1} << 27;  // B*H*Sq*Sk*D on the host
constexpr int64_t kGenWorkFwd = int64_t{1} << 24, kGenWorkBwd = int64_t{3} << 22;
// relation "gradcheck" (attention_bwd): generated at most 2^16, accepted up to 2^20 (each of the
// finite-difference forwards is a host fp64 attention).
constexpr int64_t kGenWorkGrad = int64_t{1} << 16, kMaxWorkGrad = int64_t{1} << 20;

// ---- generators -----------------------------------------------------------------
/// Sizes of tensor t in case order; the same pad and offset for every tensor but LSE (rank 1).
Case build(bool fwd, const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
  Case c;
  c.op = fwd ? "attention" : "attention_bwd";
  c.params = p;
  const DType dt = *parse_dtype(p["dtype"].get<std::string>());
  const int64_t B = p["B"].get<int64_t>(), H = p["H"].get<int64_t>(), Hkv = p["Hkv"].get<int64_t>();
  const int64_t Sq = p["Sq"].get<int64_t>(), Sk = p["Sk"].get<int64_t>(), D = p["D"].get<int64_t>();
  const bool mask = p.value("mask", false);
  const int64_t qr = B * H * Sq, kr = B * Hkv * Sk;
  auto rec = [&](size_t i) { return i < r.size() ? r[i] : ValueRecipe{}; };
  if (fwd) {
    c.tensors = {make_tensor("Q", Role::kIn, dt, qr, D, pad, off, rec(0)),
                 make_tensor("K", Role::kIn, dt, kr, D, pad, off, rec(1)),
                 make_tensor("V", Role::kIn, dt, kr, D, pad, off, rec(2))};
    if (mask) c.tensors.push_back(make_tensor("M", Role::kIn, DType::kF32, Sq, Sk, pad, off, rec(3)));
    c.tensors.push_back(make_tensor("O", Role::kOut, dt, qr, D, pad, off, {}));
    c.tensors.push_back(make_tensor("LSE", Role::kOut, DType::kF32, -1, qr, 0, off, {}));
  } else {
    c.tensors = {make_tensor("Q", Role::kIn, dt, qr, D, pad, off, rec(0)),
                 make_tensor("K", Role::kIn, dt, kr, D, pad, off, rec(1)),
                 make_tensor("V", Role::kIn, dt, kr, D, pad, off, rec(2)),
                 make_tensor("O", Role::kIn, dt, qr, D, pad, off, rec(3)),
                 make_tensor("dO", Role::kIn, dt, qr, D, pad, off, rec(4)),
                 make_tensor("LSE", Role::kIn, DType::kF32, -1, qr, 0, off, rec(5))};
    if (mask) c.tensors.push_back(make_tensor("M", Role::kIn, DType::kF32, Sq, Sk, pad, off, rec(6)));
    c.tensors.push_back(make_tensor("dQ", Role::kOut, dt, qr, D, pad, off, {}));
    c.tensors.push_back(make_tensor("dK", Role::kOut, dt, kr, D, pad, off, {}));
    c.tensors.push_back(make_tensor("dV", Role::kOut, dt, kr, D, pad, off, {}));
  }
  return c;
}

/// A recipe of one of `classes` with parameters that keep attention's logits in a range
/// the bound can say something about; `big` scales normal values (very large logits).
rc::Gen<ValueRecipe> gen_recipe(std::vector<ValueClass> classes, double big = 0) {
  return rc::gen::exec([classes, big] {
    ValueRecipe r;
    r.cls = *rc::gen::elementOf(classes);
    r.seed = *rc::gen::inRange<uint64_t>(0, uint64_t{1} << 40);
    switch (r.cls) {
      case ValueClass::kNormal:
        r.scale = big > 0 ? big : *rc::gen::elementOf(std::vector<double>{1, 1, 0.5, 2});
        break;
      case ValueClass::kUniform:
        r.scale = 2;
        break;
      case ValueClass::kSmallInt:
        r.int_range = 2;
        break;
      case ValueClass::kLogUniform:
        r.exp_min = -6;
        r.exp_max = 2;
        break;
      case ValueClass::kMeanSpread:
        r.mean = 8;
        r.spread = 1;
        break;
      default:
        break;
    }
    return r;
  });
}

const std::vector<int64_t>& edge_lengths() {
  static const std::vector<int64_t> v = {1,  1,  2,   3,   17,  31,  32,  33,  63,  64,
                                         65, 96, 113, 127, 128, 129, 239, 256, 1023};
  return v;
}

rc::Gen<nlohmann::json> gen_params(const GenConfig& cfg, bool fwd) {
  const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(cfg.max_dim, kMaxS));
  return rc::gen::exec([cap, fwd] {
    nlohmann::json p;
    const int dsel = *rc::gen::inRange(0, 10);
    p["dtype"] = std::string(dtype_name(dsel < 4 ? DType::kF16 : dsel < 8 ? DType::kBF16 : DType::kF32));
    const int64_t D = *rc::gen::inRange(0, 10) < 7
                          ? *rc::gen::elementOf(std::vector<int64_t>{64, 128})
                          : *rc::gen::elementOf(std::vector<int64_t>{1, 8, 16, 40, 80, 96, 100, 127});
    auto len = [cap] {
      const int64_t x =
          *rc::gen::inRange(0, 3) < 2 ? *rc::gen::elementOf(edge_lengths()) : *rc::gen::inRange<int64_t>(1, 700);
      return std::min(x, cap);
    };
    int64_t Sq = len(), Sk = len();
    int64_t H = *rc::gen::elementOf(std::vector<int64_t>{1, 1, 2, 3, 4, 8});
    std::vector<int64_t> divs;
    for (int64_t x = 1; x <= H; ++x)
      if (H % x == 0) divs.push_back(x);
    int64_t Hkv = *rc::gen::elementOf(divs);
    int64_t B = *rc::gen::elementOf(std::vector<int64_t>{1, 1, 2, 3});
    auto fit = [&](int64_t budget) {
      while (B * H * Sq * Sk * D > budget) {
        if (B > 1) {
          B = 1;
        } else if (H > 1) {
          H = Hkv = 1;
        } else if (Sq >= Sk) {
          Sq = std::max<int64_t>(1, Sq / 2);
        } else {
          Sk = std::max<int64_t>(1, Sk / 2);
        }
      }
    };
    fit(fwd ? kGenWorkFwd : kGenWorkBwd);
    p["B"] = B, p["H"] = H, p["Hkv"] = Hkv, p["Sq"] = Sq, p["Sk"] = Sk, p["D"] = D;
    p["causal"] = *rc::gen::inRange(0, 5) < 2;
    const bool mask = *rc::gen::inRange(0, 10) < 3;
    p["mask"] = mask;
    if (mask && *rc::gen::inRange(0, 3) == 0) p["masked_every"] = *rc::gen::inRange<int64_t>(1, 6);
    if (*rc::gen::inRange(0, 8) == 0) p["scale"] = *rc::gen::elementOf(std::vector<double>{1.0, 0.05, 0.3});
    if (!fwd && *rc::gen::inRange(0, 5) < 2) p["do_row_scale"] = true;
    // A quarter of the backward cases: the finite-difference projection check, on small problems.
    if (!fwd && *gen_weighted_index({3, 1}) == 1) {
      p["relation"] = kGradcheckRelation;
      fit(kGenWorkGrad);
      p["B"] = B, p["H"] = H, p["Hkv"] = Hkv, p["Sq"] = Sq, p["Sk"] = Sk;
    }
    return p;
  });
}

const std::vector<ValueClass> kQkClasses = {ValueClass::kNormal,   ValueClass::kNormal,     ValueClass::kUniform,
                                            ValueClass::kSmallInt, ValueClass::kLogUniform, ValueClass::kSameSign};
const std::vector<ValueClass> kVClasses = {ValueClass::kNormal,   ValueClass::kUniform,    ValueClass::kSameSign,
                                           ValueClass::kSmallInt, ValueClass::kMeanSpread, ValueClass::kLogUniform};

rc::Gen<ValueRecipe> gen_mask_recipe() {
  return rc::gen::exec([] {
    ValueRecipe r = *gen_recipe({ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSmallInt});
    if (*rc::gen::inRange(0, 5) < 2) {
      r.inject.kinds = kSpecialNegInf;
      r.inject.rate = *rc::gen::elementOf(std::vector<double>{0.05, 0.3, 0.9});
    }
    return r;
  });
}

rc::Gen<Case> gen_case(const GenConfig& cfg, bool fwd) {
  return rc::gen::exec([cfg, fwd] {
    const nlohmann::json p = *gen_params(cfg, fwd);
    // Very large logits: Q's normal values scaled by 16..48 (logits of hundreds).
    const double big = *rc::gen::inRange(0, 7) == 0 ? *rc::gen::elementOf(std::vector<double>{16, 48}) : 0;
    std::vector<ValueRecipe> r = {*gen_recipe(big > 0 ? std::vector<ValueClass>{ValueClass::kNormal} : kQkClasses, big),
                                  *gen_recipe(kQkClasses), *gen_recipe(kVClasses)};
    if (!fwd) {
      r.push_back(ValueRecipe{});  // O: computed by prepare
      r.push_back(*gen_recipe({ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                               ValueClass::kLogUniform, ValueClass::kSmallInt}));
      r.push_back(ValueRecipe{});  // LSE: computed by prepare
    }
    if (p.value("mask", false)) r.push_back(*gen_mask_recipe());
    const int64_t pad = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 3, 8});
    const int64_t off = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 2});
    return build(fwd, p, r, pad, off);
  });
}

Status validate_case(const Case& c, bool fwd) {
  ASSAY_ASSIGN_OR_RETURN(DType dt, param_dtype(c));
  ASSAY_ASSIGN_OR_RETURN(int64_t B, param_int(c, "B", 1, kMaxBH));
  ASSAY_ASSIGN_OR_RETURN(int64_t H, param_int(c, "H", 1, kMaxBH));
  ASSAY_ASSIGN_OR_RETURN(int64_t Hkv, param_int(c, "Hkv", 1, kMaxBH));
  ASSAY_ASSIGN_OR_RETURN(int64_t Sq, param_int(c, "Sq", 1, kMaxS));
  ASSAY_ASSIGN_OR_RETURN(int64_t Sk, param_int(c, "Sk", 1, kMaxS));
  ASSAY_ASSIGN_OR_RETURN(int64_t D, param_int(c, "D", 1, 128));
  if (H % Hkv != 0) return invalid_argument(c.op + " case: params.Hkv must divide params.H");
  if (B * H > kMaxBH) return invalid_argument(fmt::format("{} case: params.B * params.H must be <= {}", c.op, kMaxBH));
  if (B * H * Sq * Sk * D > kMaxWork)
    return invalid_argument(fmt::format("{} case: B*H*Sq*Sk*D must be <= {} (host reference)", c.op, kMaxWork));
  for (const char* k : {"causal", "mask", "do_row_scale"})
    if (c.params.contains(k) && !c.params[k].is_boolean())
      return invalid_argument(fmt::format("{} case: params.{} must be a boolean", c.op, k));
  if (c.params.contains("do_row_scale") && fwd)
    return invalid_argument(c.op + " case: params.do_row_scale is for attention_bwd only");
  if (c.params.contains("scale")) {
    const auto& s = c.params["scale"];
    if (!s.is_number() || !(s.get<double>() > 0) || !std::isfinite(s.get<double>()) || s.get<double>() > 1e4)
      return invalid_argument(c.op + " case: params.scale must be a number in (0, 1e4]");
  }
  const bool mask = bool_or(c, "mask", false);
  if (c.params.contains("masked_every")) {
    const auto& m = c.params["masked_every"];
    if (!m.is_number_integer() || m.get<int64_t>() < 0)
      return invalid_argument(c.op + " case: params.masked_every must be an integer >= 0");
    if (m.get<int64_t>() > 0 && !mask)
      return invalid_argument(c.op + " case: params.masked_every needs params.mask = true");
  }
  if (c.params.contains("relation")) {
    if (fwd || !wants_gradcheck(c))
      return invalid_argument(c.op + " case: params.relation: " +
                              (fwd ? std::string("attention has none") : std::string("only \"gradcheck\"")));
    if (B * H * Sq * Sk * D > kMaxWorkGrad)
      return invalid_argument(
          fmt::format("{} case: params.relation \"gradcheck\" needs B*H*Sq*Sk*D <= {}", c.op, kMaxWorkGrad));
  }
  std::vector<std::pair<std::string, Role>> layout;
  if (fwd) {
    layout = {{"Q", Role::kIn}, {"K", Role::kIn}, {"V", Role::kIn}};
    if (mask) layout.push_back({"M", Role::kIn});
    layout.push_back({"O", Role::kOut});
    layout.push_back({"LSE", Role::kOut});
  } else {
    layout = {{"Q", Role::kIn}, {"K", Role::kIn},  {"V", Role::kIn},
              {"O", Role::kIn}, {"dO", Role::kIn}, {"LSE", Role::kIn}};
    if (mask) layout.push_back({"M", Role::kIn});
    layout.push_back({"dQ", Role::kOut});
    layout.push_back({"dK", Role::kOut});
    layout.push_back({"dV", Role::kOut});
  }
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, layout));
  for (const auto& t : c.tensors) {
    const bool kv = t.name == "K" || t.name == "V" || t.name == "dK" || t.name == "dV";
    std::vector<int64_t> shape;
    DType want = dt;
    if (t.name == "LSE") {
      shape = {B * H * Sq};
      want = DType::kF32;
    } else if (t.name == "M") {
      shape = {Sq, Sk};
      want = DType::kF32;
    } else {
      shape = {(kv ? B * Hkv * Sk : B * H * Sq), D};
    }
    if (t.desc.dtype != want || t.desc.shape != shape)
      return invalid_argument(
          fmt::format("{} case: tensor {} must be {} [{}]", c.op, t.name, dtype_name(want), fmt::join(shape, ", ")));
  }
  return ok_status();
}

// ---- references and bounds --------------------------------------------------------
constexpr double kU = 0x1p-24;  // fp32 unit roundoff
const double kMinNormal = 0x1p-126;
constexpr double kRefSlack = 1 + 0x1p-30;  // the fp64 reference's own error

/// Mask rows r with r % masked_every == 0 become all -inf (fully masked query rows).
void mask_rows(const Case& c, std::vector<unsigned char*>& img, size_t mask_index) {
  const int64_t every = int_or(c, "masked_every", 0);
  if (every <= 0 || !bool_or(c, "mask", false)) return;
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
    if (d.causal && j > i) continue;
    const double* kj = k.data + (kbase + j) * k.v.ld;
    double dot = 0, m = 0;
    for (int64_t c = 0; c < d.D; ++c) {
      dot += qi[c] * kj[c];
      m += std::fabs(qi[c] * kj[c]);
    }
    double x = d.scale * dot, mg = d.scale * m;
    if (mask != nullptr) {
      const double mv = mask->at(i, j);
      x += mv;
      mg += std::isfinite(mv) ? std::fabs(mv) : 0;
    }
    s[static_cast<size_t>(j)] = x;
    mag[static_cast<size_t>(j)] = std::isfinite(x) ? mg : 0;
  }
}

}  // namespace

void attention_fwd_reference(const AttnDims& d, const HostTensor& q, const HostTensor& k, const HostTensor& v,
                             const HostTensor* mask, OutputRef& o, OutputRef& lse, int64_t key_tile) {
  const int64_t rows = d.B * d.H * d.Sq, G = d.H / d.Hkv;
  o = OutputRef{};
  lse = OutputRef{};
  o.ref.assign(static_cast<size_t>(rows * d.D), 0.0);
  o.tol.assign(o.ref.size(), 0.0);
  lse.ref.assign(static_cast<size_t>(rows), -INFINITY);
  lse.tol.assign(lse.ref.size(), 0.0);
  const double gD = gamma_n(d.D + 2, kU);
  std::vector<double> s, mag, P(static_cast<size_t>(d.Sk)), E(static_cast<size_t>(d.Sk)),
      tolP(static_cast<size_t>(d.Sk));
  std::vector<double> acc(static_cast<size_t>(d.D)), err(static_cast<size_t>(d.D)), amag(static_cast<size_t>(d.D));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t kbase = (b * d.Hkv + h / G) * d.Sk;
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + h) * d.Sq + i;
        scores(d, q, k, mask, row, i, kbase, s, mag);
        double mx = -INFINITY;
        for (double x : s) mx = std::max(mx, x);
        if (mx == -INFINITY) continue;  // fully masked: O = 0 (tol 0), LSE = -inf
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
        // 2. the score error through the softmax; 3. the online softmax on the computed scores.
        double Dw = 0;
        for (size_t j = 0; j < s.size(); ++j) {
          const double r = E[j] + PE;
          tolP[j] = P[j] * r * eE * std::exp(eE * r);
          if (std::isfinite(s[j])) Dw += (P[j] + tolP[j]) * (mx - s[j] + 2 * Emax);
        }
        const int64_t kend = d.causal ? std::min(d.Sk, i + 1) : d.Sk;
        SoftmaxModel m;
        m.in = d.dt;
        m.acc = DType::kF32;
        m.out = DType::kF32;
        m.n = d.Sk;
        m.rescales = (kend + key_tile - 1) / key_tile;
        const SoftmaxRowMags rm{Dw * kRefSlack, L};
        const ElementBound sb = softmax_bounds(m, rm).ceiling;
        for (size_t j = 0; j < s.size(); ++j) {
          if (!std::isfinite(s[j])) continue;
          const double pp = P[j] + tolP[j];
          tolP[j] += sb.tol(pp, pp * (mx - s[j] + 2 * Emax));
        }
        // 4. O = P V with the accumulation's roundings.
        const double gO = gamma_n(d.Sk + m.rescales + 1, kU);
        std::fill(acc.begin(), acc.end(), 0.0);
        std::fill(err.begin(), err.end(), 0.0);
        std::fill(amag.begin(), amag.end(), 0.0);
        double vmax = 0;
        for (size_t j = 0; j < s.size(); ++j) {
          if (!std::isfinite(s[j])) continue;
          const double* vj = v.data + (kbase + static_cast<int64_t>(j)) * v.v.ld;
          for (int64_t c = 0; c < d.D; ++c) {
            const double av = std::fabs(vj[c]);
            acc[static_cast<size_t>(c)] += P[j] * vj[c];
            err[static_cast<size_t>(c)] += tolP[j] * av;
            amag[static_cast<size_t>(c)] += (P[j] + tolP[j]) * av;
            vmax = std::max(vmax, av);
          }
        }
        const double floor = static_cast<double>(d.Sk + m.rescales + 4) * kMinNormal * (1 + vmax);
        for (int64_t c = 0; c < d.D; ++c) {
          const size_t l = static_cast<size_t>(row * d.D + c);
          const double e32 = (err[static_cast<size_t>(c)] + gO * amag[static_cast<size_t>(c)] + floor) * kRefSlack;
          o.ref[l] = acc[static_cast<size_t>(c)];
          o.tol[l] = e32 + store_rounding(std::fabs(o.ref[l]) * (1 + 0x1p-9) + e32, d.dt);
        }
        // 5. LSE.
        const double lse_ref = mx + L;
        // The computed scores' log-sum-exp L' is within 2E of L: the logf error is taken at L + 2E.
        const ElementBound lb = log_softmax_bounds(m, SoftmaxRowMags{rm.weighted_dev, L + 2 * Emax}).ceiling;
        const double es = eE * PE;
        lse.ref[static_cast<size_t>(row)] = lse_ref;
        lse.tol[static_cast<size_t>(row)] = (lb.tol(std::fabs(lse_ref) + es, 0) + es) * kRefSlack;
      }
    }
}

namespace {

Status reference_fwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const AttnDims d = dims_of(c);
  OutputRef o, l;
  attention_fwd_reference(d, t[0], t[1], t[2], d.has_mask ? &t[3] : nullptr, o, l);
  out = {std::move(o), std::move(l)};
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
  const AttnDims d = dims_of(c);
  if (d.has_mask) mask_rows(c, img, 6);
  std::vector<double> sq, sk, sv, sm;
  const HostTensor q = decode_image(c, img, 0, sq), k = decode_image(c, img, 1, sk), v = decode_image(c, img, 2, sv);
  HostTensor m;
  if (d.has_mask) m = decode_image(c, img, 6, sm);
  OutputRef o, l;
  attention_fwd_reference(d, q, k, v, d.has_mask ? &m : nullptr, o, l);
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
  if (bool_or(c, "do_row_scale", false)) {
    const auto& gd = c.tensors[4].desc;
    const View2D gv = view_of(gd);
    for (int64_t r = 0; r < gv.rows; ++r)
      for (int64_t j = 0; j < gv.cols; ++j) {
        const int64_t e = gd.offset + r * gv.ld + j;
        poke(gd.dtype, img[4], e, std::ldexp(peek(gd.dtype, img[4], e), static_cast<int>(r % 9) - 4));
      }
  }
}

Status reference_bwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const AttnDims d = dims_of(c);
  const HostTensor &q = t[0], &k = t[1], &v = t[2], &o = t[3], &dout = t[4], &lse = t[5];
  const HostTensor* mask = d.has_mask ? &t[6] : nullptr;
  const int64_t G = d.H / d.Hkv, qrows = d.B * d.H * d.Sq, krows = d.B * d.Hkv * d.Sk, D = d.D;
  // Accumulators: value, error sum (sum e |x|) and magnitude sum (sum (|w| + e)|x|) per element.
  std::vector<double> dq(static_cast<size_t>(qrows * D)), dk(static_cast<size_t>(krows * D)),
      dv(static_cast<size_t>(krows * D));
  std::vector<double> dq_e(dq.size()), dq_m(dq.size()), dk_e(dk.size()), dk_m(dk.size()), dv_e(dv.size()),
      dv_m(dv.size());
  const double gD = gamma_n(D, kU), gS = gamma_n(D + 2, kU);
  const double u2 = (1 + kU) * (1 + kU);
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
        for (int64_t c = 0; c < D; ++c) {
          Di += doi[c] * oi[c];
          Dmag += std::fabs(doi[c] * oi[c]);
        }
        for (int64_t j = 0; j < d.Sk; ++j) {
          const double sj = s[static_cast<size_t>(j)];
          if (!std::isfinite(sj)) continue;
          const int64_t kr = kbase + j;
          const double* kj = k.data + kr * k.v.ld;
          const double* vj = v.data + kr * v.v.ld;
          const double P = std::exp(sj - L);
          const double E = gS * smag[static_cast<size_t>(j)];
          const double ep = P * (std::exp(E + kU * (std::fabs(sj - L) + E)) * (1 + 5 * kU) - 1) + kMinNormal;
          double dP = 0, dPmag = 0;
          for (int64_t c = 0; c < D; ++c) {
            dP += doi[c] * vj[c];
            dPmag += std::fabs(doi[c] * vj[c]);
          }
          const double x = dP - Di, a = gD * (dPmag + Dmag);
          const double dS = P * x;
          const double eds = P * std::fabs(x) * (u2 - 1) + (P * a + ep * (std::fabs(x) + a)) * u2 + kMinNormal;
          for (int64_t c = 0; c < D; ++c) {
            const size_t lk = static_cast<size_t>(kr * D + c), lq = static_cast<size_t>(row * D + c);
            const double adO = std::fabs(doi[c]), aq = std::fabs(qi[c]), ak = std::fabs(kj[c]);
            dv[lk] += P * doi[c];
            dv_e[lk] += ep * adO;
            dv_m[lk] += (P + ep) * adO;
            dk[lk] += dS * qi[c];
            dk_e[lk] += eds * aq;
            dk_m[lk] += (std::fabs(dS) + eds) * aq;
            dq[lq] += dS * kj[c];
            dq_e[lq] += eds * ak;
            dq_m[lq] += (std::fabs(dS) + eds) * ak;
          }
        }
      }
    }
  const int64_t Nk = G * d.Sq, Nq = d.Sk;
  auto finish = [&](std::vector<double>& val, const std::vector<double>& e, const std::vector<double>& m, double scl,
                    int64_t n, bool scaled) {
    OutputRef r;
    r.ref.resize(val.size());
    r.tol.resize(val.size());
    const double g = gamma_n(n + (scaled ? 2 : 1), kU), fl = static_cast<double>(n + 2) * kMinNormal;
    for (size_t l = 0; l < val.size(); ++l) {
      r.ref[l] = scl * val[l];
      const double e32 = (scl * ((scaled ? 1 + kU : 1.0) * e[l] + g * m[l]) + fl) * kRefSlack;
      r.tol[l] = e32 + store_rounding(std::fabs(r.ref[l]) * (1 + 0x1p-9) + e32, d.dt);
    }
    return r;
  };
  out.clear();
  out.push_back(finish(dq, dq_e, dq_m, d.scale, Nq, true));
  out.push_back(finish(dk, dk_e, dk_m, d.scale, Nk, true));
  out.push_back(finish(dv, dv_e, dv_m, 1.0, Nk, false));
  return ok_status();
}

/// fp64 forward O = softmax(S) V on Q, K, V packed dense one after another in x (the gradcheck's
/// function); mag (may be null): per output a bound on its rounding error in units of 16 u
/// (Differentiable::magnitude): sum_j P_j |v_j| (1 + ((D + 2)(smag_j + sum_l P_l smag_l) + 2 Sk + 8) / 16),
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
        double* yo = (mag != nullptr ? mag : y) + row * D;
        std::fill(yo, yo + D, 0.0);
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
          const double w =
              mag != nullptr
                  ? pj * (1 + (static_cast<double>(D + 2) * (smag[static_cast<size_t>(j)] + PE) + 2.0 * d.Sk + 8) / 16)
                  : pj;
          for (int64_t c = 0; c < D; ++c) yo[c] += w * (mag != nullptr ? std::fabs(vj[c]) : vj[c]);
        }
      }
    }
}

/// relation "gradcheck": <dO, J u> by central differences of the fp64 forward (Q, K, V) -> O
/// against sum u . (dQ, dK, dV) of the kernel (properties/gradcheck_relation.h). The spec's
/// gradient is the one from the saved O (rounded to the dtype) and LSE (fp32), not from the
/// exact O and LSE: the difference of the two fp64 references is declared per element (dev).
void properties_bwd(const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                    const std::vector<OutputRef>& refs, std::vector<Failure>& failures) {
  if (!wants_gradcheck(c) || out.size() != 3 || refs.size() != 3) return;
  const AttnDims d = dims_of(c);
  const HostTensor* mask = d.has_mask ? &in[6] : nullptr;
  const int64_t qr = d.B * d.H * d.Sq;
  OutputRef o, l;
  attention_fwd_reference(d, in[0], in[1], in[2], mask, o, l);
  std::vector<HostTensor> exact = in;
  exact[3] = {o.ref.data(), {qr, d.D, d.D}};
  exact[5] = {l.ref.data(), {1, qr, qr}};
  std::vector<OutputRef> gx;
  if (!reference_bwd(c, exact, gx).ok() || gx.size() != 3) return;
  GradProblem p;
  const char* names[3] = {"dQ", "dK", "dV"};
  for (size_t t = 0; t < 3; ++t) {
    GradOperand op;
    op.name = names[t];
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
  p.seed = gradcheck_seed(c);
  p.label = "<dO, J u>";
  check_grad_projection(p, failures);
}

RowOpConfig make_config(bool fwd) {
  RowOpConfig cfg;
  cfg.name = fwd ? "attention" : "attention_bwd";
  cfg.description = fwd ? "scaled dot-product attention forward (O, LSE), causal top-left, GQA, additive fp32 mask, "
                          "fp32/fp16/bf16 storage with fp32 arithmetic"
                        : "attention backward (dQ, dK, dV) from Q, K, V, saved O and LSE, and dO; deterministic";
  cfg.def.op = cfg.name;
  cfg.def.bound_name = fwd ? "attention ceiling" : "attention-backward ceiling";
  cfg.def.prepare = fwd ? prepare_fwd : prepare_bwd;
  cfg.def.reference = fwd ? reference_fwd : reference_bwd;
  if (!fwd) cfg.def.properties = properties_bwd;
  cfg.registry = fwd ? &fwd_registry() : &bwd_registry();
  cfg.gen = [fwd](const GenConfig& g) { return gen_case(g, fwd); };
  cfg.build = [fwd](const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
    return build(fwd, p, r, pad, off);
  };
  cfg.validate = [fwd](const Case& c) { return validate_case(c, fwd); };
  cfg.shrink_keys = {{"Sq", 1}, {"Sk", 1}, {"B", 1}, {"Hkv", 1}, {"H", 1}, {"D", 1}};
  cfg.self_check_note =
      "reference and bound checked against a float flash-attention emulation in "
      "tests/properties/attention_gen_test.cpp";
  return cfg;
}

/// RowOpSpec plus attention's own simplifications: no causal mask, no mask tensor, no row scaling.
class AttentionSpec final : public OpSpec {
 public:
  explicit AttentionSpec(bool fwd) : fwd_(fwd), base_(make_config(fwd)) {}
  std::string name() const override { return base_.name(); }
  std::string description() const override { return base_.description(); }
  std::vector<VariantInfo> variants() const override { return base_.variants(); }
  rc::Gen<Case> generator(const GenConfig& config) const override { return base_.generator(config); }
  Status validate(const Case& c) const override { return base_.validate(c); }
  StatusOr<std::vector<Verdict>> run(const Case& c, const std::vector<std::string>& variants,
                                     gpu::Lane& lane) const override {
    return base_.run(c, variants, lane);
  }
  std::vector<Case> shrink(const Case& c) const override {
    std::vector<Case> out = base_.shrink(c);
    if (!validate(c).ok()) return out;
    const auto [pad, off] = rowwise::pad_off(c);
    std::vector<ValueRecipe> rec = rowwise::input_recipes(c);
    auto emit = [&](nlohmann::json p, std::vector<ValueRecipe> r) {
      Case x = build(fwd_, p, r, pad, off);
      x.variant = c.variant;
      if (validate(x).ok()) out.push_back(std::move(x));
    };
    if (bool_or(c, "causal", false)) {
      nlohmann::json p = c.params;
      p["causal"] = false;
      emit(p, rec);
    }
    if (bool_or(c, "mask", false)) {
      nlohmann::json p = c.params;
      p["mask"] = false;
      p.erase("masked_every");
      std::vector<ValueRecipe> r = rec;
      r.pop_back();  // the mask is the last input
      emit(p, r);
    }
    if (c.params.contains("scale")) {
      nlohmann::json p = c.params;
      p.erase("scale");
      emit(p, rec);
    }
    if (bool_or(c, "do_row_scale", false)) {
      nlohmann::json p = c.params;
      p.erase("do_row_scale");
      emit(p, rec);
    }
    return out;
  }
  Status self_check(std::string& report) const override { return base_.self_check(report); }
  StatusOr<Case> with_param(const Case& c, const std::string& key, int64_t value) const override {
    return base_.with_param(c, key, value);
  }

 private:
  bool fwd_;
  RowOpSpec base_;
};

[[maybe_unused]] const bool kSpecs =
    register_spec(std::make_unique<AttentionSpec>(true)) && register_spec(std::make_unique<AttentionSpec>(false));

}  // namespace

const TensorOpDef& attention_def() {
  static const RowOpConfig cfg = make_config(true);
  return cfg.def;
}
const TensorOpDef& attention_bwd_def() {
  static const RowOpConfig cfg = make_config(false);
  return cfg.def;
}

}  // namespace assay::attention
