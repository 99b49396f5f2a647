// activation / activation_bwd: GELU (erf and tanh forms) and SiLU, elementwise, forward and backward.
//
// Sections: binding, generators, references, bound, exhaustive sweep.
// Binding: kernels/rowwise/activations.cu ("elementwise": grid-stride, 16-byte packs when every
// pointer is aligned, scalar otherwise); mutants in tests/mutants/rowwise/ register beside it
// through register_activation_fwd / register_activation_bwd (properties/rowwise_registry.h).
// References: references/host/backward.h in double, in the forms without cancellation
// (GELU = x Phi(x) with Phi from erfc, tanh form x sigmoid(2w), SiLU x sigmoid(x)), and
// activation_grad with `mag` = |first term| + |second term| of act'.
//
// Bound (ceiling; no expected level: nothing accumulates). Sources: [CUDA] Programming Guide,
// "Mathematical Functions", single-precision ulp table (harness/bounds.h find_math_fn: erff 2,
// erfcf 4, tanhf 2, expf 2 ulps vs the correctly rounded result, so an N-ulp function errs by
// at most (N + 1/2) ulp = (2N+1)u relative vs the exact value, u = 2^-24); [H] Higham 2nd ed.
// sec. 2.2 (fl(a op b) = (a op b)(1 + d), |d| <= u), Lemma 3.1 (gamma_n) and 3.3, and the mean
// value theorem for errors propagated through a rounded argument. The kernel computes in fp32
// and rounds once to fp16/bf16. The bound must accept BOTH common correct fp32 forms:
//   accurate  (the kernel's): x 0.5 erfcf(-x/sqrt2),  x sigmoid(2w) via expf(-|2w|),  x / (1 + e);
//   textbook  (PyTorch's):    0.5 x (1 + erff(x/sqrt2)),  0.5 x (1 + tanhf(w)),  x / (1 + expf(-x)),
// so per element it is the larger of the two forms' bounds. Let e_f = (2N_f + 1)u, s = sigmoid.
// - Argument errors. t = x/sqrt2 is rounded twice (constant, product): |t^ - t| <= gamma_2 |t|,
//   and |erf(t^) - erf(t)| = |erfc(t^) - erfc(t)| <= (2/sqrt(pi)) exp(-t_lo^2) gamma_2 |t|,
//   t_lo = |t|(1 - gamma_2). w = k(x + a x^3) has same-sign terms and at most 8 roundings on any
//   path (two constants, three products, the sum, the scaling, one spare): v = 2w errs by
//   dv = gamma_8 |v|, and since (ln s)'(v) = s(-v), s(v^) / s(v) - 1 <= expm1(dv s(-(v - dv)))
//   (likewise 1 - s with s(v + dv)). -x^2/2 is rounded once: exp's argument errs by u x^2/2.
// - Cancellation of the textbook forms. 1 + erf(t) and 1 + tanh(w) cancel for x << 0: erff /
//   tanhf near -1 err by (N + 1/2) ulp(1^-) = (N + 1/2)u ABSOLUTE, which 0.5|x| multiplies. Where
//   the function saturates (exact |f| within u/2 of 1, so the correctly rounded value is +-1) we
//   require it to return +-1 (glibc's erff / tanhf do, tests/properties/activation_test.cpp; the
//   table alone would allow -1 + 2u there, i.e. an error 0.5|x| 2u that grows without end, and
//   1 - tanh^2 errs by |x|^3 u in the backward): its error is then 1 - |f|.
// Forward, E32 (absolute error of the fp32 value):
//   gelu_erf   max( |y|((1+e_erfc)(1+u)^3 - 1) + A (1+e_erfc)(1+u)^3,
//                   |y|((1+u)^4 - 1) + (A + 0.5|x| e1_erf)(1+u)^4 ),  A = 0.5|x| (2/sqrt(pi)) exp(-t_lo^2) gamma_2 |t|
//   gelu_tanh  max( |y|((1+rho)(1+e_sig)(1+u) - 1),  |y|((1+rho)(1+u)^3 - 1) + 0.5|x| e1_tanh (1+u)^3 ),
//              rho = expm1(dv s(-(v - dv))),  e_sig = (1+e_exp)^2(1+u)^3 - 1 (sigmoid from expf: one
//              exp, the sum, the division, the product; [H] Lemma 3.3)
//   silu       |y| ((1+e_sig)(1+u) - 1)   (no cancellation in either form)
// Backward, dx = dy g(x), g = act' = first + second (backward.h); E_g bounds |g^ - g|:
//   silu'      g = s (1 + x (1 - s)). Accurate: s and 1 - s each from expf without cancellation
//              (relative e_sig): mag ((1+e_sig)^2(1+u)^3 - 1). Textbook s (1 + x (1 - s)) with
//              s^ = 1/(1+expf(-x)) (relative e_s = (1+e_exp)(1+u)^2 - 1): 1 - s^ is exact for s >= 1/2
//              (Sterbenz) and otherwise rounded, so err(1 - s) <= e_s s + u (1 - s) ABSOLUTE, which
//              |x| s multiplies; where 1 + expf(-x) rounds to 1 (exp(-x)(1+e_exp) < u) s^ = 1 and
//              err(1 - s) = 1 - s exactly: mag ((1+e_s)(1+u)^4 - 1) + |x| s err(1-s) (1+e_s)(1+u)^4.
//   gelu_erf'  g = Phi + x phi. Both forms: mag ((1 + max(e_erfc, e_exp))(1+u)^4 - 1) + (A' + 0.5 e1_erf
//              + P)(1 + that), A' = A/|x| (the cdf's argument), P = |x| (exp(-(1-u)x^2/2) - exp(-x^2/2))
//              / sqrt(2 pi) (exp's rounded argument), 0.5 e1_erf the textbook cdf 0.5 (1 + erff).
//   gelu_tanh' g = s + 2 x s (1-s) w', w' = k(1 + 3a x^2) (positive terms; 7 roundings in PyTorch's
//              order, one spare: gamma_8). Accurate (s, 1-s from expf): s((1+rho_s)(1+e_sig)(1+u)^2 - 1)
//              + |second|((1+rho_s)(1+rho_sc)(1+e_sig)^2(1+gamma_8)(1+u)^4 - 1). Textbook 0.5(1+t) +
//              0.5 x (1 - t^2) w', t = tanhf(w): the same with (1+u) for e_sig, plus 0.5 e1_tanh (1+u)^3
//              for 1 + t and 0.5|x| w' dT (1+gamma_8)(1+u)^4 for 1 - t^2, dT = 2 e1 + e1^2 + 2u (t^2 and
//              the difference rounded), or, saturated (t^ = +-1, 1 - t^2 = 0), dT = 1 - tanh^2(w_lo):
//              the whole second term. (rho factors are evaluated in logs: s may underflow in double
//              where exp(dv) overflows.)
//   Then |dx^ - dx| <= |dy| E_g (1+u) + u |dx| (the product dy g^).
// Underflow floor F = (ln(max) + 1)/max + 2 min_normal ~ 24.3 min_normal (fp32): for x < -ln(max)
//   = -88.72 the textbook silu's expf(-x) overflows and x/(1+inf) = -0 where |y| = |x| e^x <=
//   ln(max)/max (22.1 min_normal), silu' likewise (|1+x| e^x); every other underflow (subnormal
//   exp/erfc results, their products) loses a few subnormal spacings. Backward: F (|dy| + 1).
// Output: + 0.5 ulp of the output dtype at |ref| + E (the binade the fp32 value may reach; fp16 /
// bf16 only). The fp64 reference errs by the same derivation with u = 2^-53 (2^-29 of each term,
// a few ulps of double for erfc / exp): the whole tolerance is multiplied by (1 + 2^-20).
// Special values (reference's IEEE behaviour, which PyTorch's CUDA forms share): NaN -> NaN;
// act(+inf) = +inf; act(-inf) = NaN (-inf * 0 in every form: x Phi(x), 0.5 x (1 + erf), x / (1 +
// exp(-x))); act'(+-inf) = NaN (inf * 0 in x phi(x) and in x s (1-s)), as PyTorch. These are
// well-defined, so X gets NaN, +-inf and -0 injections. dY gets NaN and -0 only: dy = +-inf times
// a g that is tiny but nonzero exactly yet 0 in fp32 (x << 0) is +-inf exactly and NaN in fp32.
// Not accepted: PyTorch's textbook tanh backward returns NaN for |x| > 1.8e19 (x^2 overflows,
// inf * 0); the gradient there is 0 or 1.
// Tightness (tests/properties/activation_test.cpp, host fp32 forms): both forms of every function
// stay within 0.25 (accurate) and 1.0 (textbook, at saturation) of it; the planted wrong constant
// 0.0447 of gelu_tanh_wrong_const leaves it on 89% of fp32 inputs in +-[0.5, 4] (up to 36x), on
// 698 fp16 and 15 bf16 inputs there (bf16 x in [-3, -1.27]: where its change crosses a rounding
// boundary); silu_bwd_missing_term (silu' = s) on every input there.
// Properties: none (params.relation is rejected); elementwise outputs are checked per element.
// Value classes: normal / uniform with scales up to 120 (the cancellation region x << 0 and exp's
// saturation at |x| ~ 88), same-sign, small integers, log-uniform across up to 120 binades,
// Pareto tails, near-overflow, subnormals, signed zeros; NaN / +-inf / -0 injected at the first,
// last and pack-edge (8) elements or at random. Lengths: edges of 4, 8 and 256 (packs and blocks)
// up to min(max_dim, 2^20); element offsets 0..7 for the inputs and, separately, the output
// (params.out_off), so 16-byte packs are misaligned on one tensor only.
// Exhaustive sweep (assay exhaustive): every fp16 / bf16 bit pattern through one launch, compared
// in ulps against the same reference and tolerance (harness/exhaustive.h).
#include <cmath>
#include <string>
#include <vector>

#include "properties/rowwise_common.h"
#include "properties/rowwise_registry.h"
#include "references/host/backward.h"

namespace assay::rowwise {
namespace {

// ---- binding ---------------------------------------------------------------------
struct FwdEntry {
  VariantInfo info;
  ActivationFwdFn fn;
};
struct BwdEntry {
  VariantInfo info;
  ActivationBwdFn fn;
};
std::vector<TensorOpVariant>& fwd_registry() {
  static std::vector<TensorOpVariant> v;
  return v;
}
std::vector<TensorOpVariant>& bwd_registry() {
  static std::vector<TensorOpVariant> v;
  return v;
}
std::vector<FwdEntry>& fwd_launchers() {
  static std::vector<FwdEntry> v;
  return v;
}
std::vector<BwdEntry>& bwd_launchers() {
  static std::vector<BwdEntry> v;
  return v;
}

Act act_of(const Case& c) {
  return parse_act(str_or(c, "act", "")).value_or(Act::kGeluErf);
}

}  // namespace

std::optional<Act> parse_act(std::string_view name) {
  if (name == "gelu_erf") return Act::kGeluErf;
  if (name == "gelu_tanh") return Act::kGeluTanh;
  if (name == "silu") return Act::kSilu;
  return std::nullopt;
}

std::string_view act_name(Act a) {
  switch (a) {
    case Act::kGeluErf:
      return "gelu_erf";
    case Act::kGeluTanh:
      return "gelu_tanh";
    case Act::kSilu:
      return "silu";
  }
  return "?";
}

bool register_activation_fwd(VariantInfo info, ActivationFwdFn fn) {
  fwd_launchers().push_back({info, fn});
  fwd_registry().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                              return fn(to_dt(t[0].dtype), act_of(c), t[0].ptr, t[1].ptr, t[0].v.cols, s);
                            }});
  return true;
}
bool register_activation_bwd(VariantInfo info, ActivationBwdFn fn) {
  bwd_launchers().push_back({info, fn});
  bwd_registry().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                              return fn(to_dt(t[0].dtype), act_of(c), t[0].ptr, t[1].ptr, t[2].ptr, t[0].v.cols, s);
                            }});
  return true;
}

ActivationFwdFn find_activation_fwd(const std::string& variant) {
  for (const auto& e : fwd_launchers())
    if (e.info.name == variant) return e.fn;
  return nullptr;
}
ActivationBwdFn find_activation_bwd(const std::string& variant) {
  for (const auto& e : bwd_launchers())
    if (e.info.name == variant) return e.fn;
  return nullptr;
}

namespace {

[[maybe_unused]] const bool kFwd = register_activation_fwd(
    {"elementwise", "grid-stride, 16-byte packs when x and y are aligned, fp32 math with erfcf / expf", false, true,
     "kernels/rowwise/activations.cu"},
    kernels::rowwise::activation_fwd);
[[maybe_unused]] const bool kBwd = register_activation_bwd(
    {"elementwise", "grid-stride, 16-byte packs when x, dy and dx are aligned; dx = dy act'(x) in fp32", false, true,
     "kernels/rowwise/activations.cu"},
    kernels::rowwise::activation_bwd);

constexpr int64_t kMaxCount = int64_t{1} << 20;
constexpr int64_t kMaxOffset = 7;
const std::vector<std::string> kActs = {"gelu_erf", "gelu_tanh", "silu"};

// ---- generators -----------------------------------------------------------------
int64_t out_off_of(const nlohmann::json& p, int64_t off) {
  auto it = p.find("out_off");
  return it != p.end() && it->is_number_integer() ? it->get<int64_t>() : off;
}

Case build_fwd(const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t /*pad*/, int64_t off) {
  Case c;
  c.op = "activation";
  c.params = p;
  const DType dt = *parse_dtype(p["dtype"].get<std::string>());
  const int64_t n = p["count"].get<int64_t>();
  c.tensors = {make_tensor("X", Role::kIn, dt, -1, n, 0, off, r[0]),
               make_tensor("Y", Role::kOut, dt, -1, n, 0, out_off_of(p, off), {})};
  return c;
}
Case build_bwd(const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t /*pad*/, int64_t off) {
  Case c;
  c.op = "activation_bwd";
  c.params = p;
  const DType dt = *parse_dtype(p["dtype"].get<std::string>());
  const int64_t n = p["count"].get<int64_t>();
  c.tensors = {make_tensor("X", Role::kIn, dt, -1, n, 0, off, r[0]),
               make_tensor("dY", Role::kIn, dt, -1, n, 0, off, r[1]),
               make_tensor("dX", Role::kOut, dt, -1, n, 0, out_off_of(p, off), {})};
  return c;
}

/// Offsets in elements: aligned (0) most often, so that the 16-byte path runs, else 1..7.
rc::Gen<int64_t> gen_offset() {
  return gen_element<int64_t>({0, 0, 0, 1, 2, 3, 4, 5, 6, 7});
}

rc::Gen<nlohmann::json> gen_params(const GenConfig& cfg, int64_t off) {
  const int64_t cap = std::clamp<int64_t>(cfg.max_dim, 1, kMaxCount);
  return rc::gen::exec([cap, off] {
    nlohmann::json p;
    p["dtype"] = std::string(dtype_name(*gen_element(activation_dtypes())));
    p["act"] = *gen_element(kActs);
    p["count"] = *gen_extent(cap, {4, 8, 256}, 0);
    // The output shares the inputs' offset three times in four, else has its own.
    p["out_off"] = *gen_weighted_index({3, 1}) == 0 ? off : *gen_offset();
    return p;
  });
}

/// X: every class that reaches a distinct regime of the three functions.
rc::Gen<ValueRecipe> gen_x_recipe(DType dt) {
  return rc::gen::exec([dt] {
    RecipeOptions o;
    o.classes = {ValueClass::kNormal,       ValueClass::kUniform,    ValueClass::kSameSign,
                 ValueClass::kSmallInt,     ValueClass::kLogUniform, ValueClass::kPareto,
                 ValueClass::kNearOverflow, ValueClass::kSubnormal,  ValueClass::kSignedZero};
    o.dtype = dt;
    o.specials = kSpecialAll;
    o.tile = 8;  // pack edges (8 fp16/bf16, two fp32 packs)
    o.inject_percent = 15;
    ValueRecipe r = *gen_value_recipe(o);
    // Wider scales than the generic ones: x << 0 (1 + erf / 1 + tanh cancel, exp saturates at ~88).
    if ((r.cls == ValueClass::kNormal || r.cls == ValueClass::kUniform) && *gen_weighted_index({1, 1}) == 1)
      r.scale = *gen_element<double>({4, 12, 40, 120});
    return r;
  });
}
/// dY: finite upstream gradients; NaN and -0 only (see the header on +-inf).
rc::Gen<ValueRecipe> gen_dy_recipe(DType dt) {
  RecipeOptions o;
  o.classes = {ValueClass::kNormal,   ValueClass::kUniform,    ValueClass::kSameSign,
               ValueClass::kSmallInt, ValueClass::kLogUniform, ValueClass::kSignedZero};
  o.dtype = dt;
  o.specials = kSpecialNaN | kSpecialNegZero;
  o.tile = 8;
  o.inject_percent = 10;
  return gen_value_recipe(o);
}

rc::Gen<Case> gen_fwd(const GenConfig& cfg) {
  return rc::gen::exec([cfg] {
    const int64_t off = *gen_offset();
    const nlohmann::json p = *gen_params(cfg, off);
    const DType dt = *parse_dtype(p["dtype"].get<std::string>());
    return build_fwd(p, {*gen_x_recipe(dt)}, 0, off);
  });
}
rc::Gen<Case> gen_bwd(const GenConfig& cfg) {
  return rc::gen::exec([cfg] {
    const int64_t off = *gen_offset();
    const nlohmann::json p = *gen_params(cfg, off);
    const DType dt = *parse_dtype(p["dtype"].get<std::string>());
    return build_bwd(p, {*gen_x_recipe(dt), *gen_dy_recipe(dt)}, 0, off);
  });
}

Status validate_common(const Case& c, const std::vector<std::pair<std::string, Role>>& layout) {
  ASSAY_ASSIGN_OR_RETURN(DType dt, param_dtype(c));
  if (!parse_act(str_or(c, "act", "")))
    return invalid_argument(c.op + " case: params.act must be \"gelu_erf\", \"gelu_tanh\" or \"silu\"");
  ASSAY_ASSIGN_OR_RETURN(int64_t n, param_int(c, "count", 0, kMaxCount));
  if (c.params.contains("out_off")) ASSAY_RETURN_IF_ERROR(param_int(c, "out_off", 0, kMaxOffset).status());
  if (c.params.contains("relation"))
    return invalid_argument(c.op +
                            " case: params.relation is not supported (elementwise outputs are checked per element)");
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, layout));
  for (const auto& t : c.tensors)
    if (t.desc.dtype != dt || t.desc.rank() != 1 || t.desc.shape != std::vector<int64_t>{n})
      return invalid_argument(
          fmt::format("{} case: tensor {} must be {} [{}] (rank 1)", c.op, t.name, dtype_name(dt), n));
  return ok_status();
}

// ---- references and bounds --------------------------------------------------------
constexpr double kU = 0x1p-24;  // fp32 unit roundoff

double pw(double b, int e) {
  double r = 1;
  for (int i = 0; i < e; ++i) r *= b;
  return r;
}
double sig(double v) {
  return 1.0 / (1.0 + std::exp(-v));
}
/// ln sigmoid(v), without overflow for any finite v.
double log_sig(double v) {
  return v >= 0 ? -std::log1p(std::exp(-v)) : v - std::log1p(std::exp(v));
}

/// The library functions' accuracy, from the [CUDA] table (harness/bounds.h).
struct LibAccuracy {
  double n_erf = 2, n_erfc = 4, n_tanh = 2, n_exp = 2;  // ulps vs the correctly rounded result
  double e_erfc = 0, e_exp = 0;                         // relative vs exact: (2N + 1)u
  double e_sig = 0;                                     // sigmoid / x sigmoid from one expf
};
const LibAccuracy& lib() {
  static const LibAccuracy a = [] {
    LibAccuracy l;
    auto ulps = [](const char* name, double dflt) {
      const MathFnAccuracy* f = find_math_fn(name);
      return f != nullptr ? f->ulp_f32 : dflt;
    };
    l.n_erf = ulps("erff", 2);
    l.n_erfc = ulps("erfcf", 4);
    l.n_tanh = ulps("tanhf", 2);
    l.n_exp = ulps("expf", 2);
    l.e_erfc = (2 * l.n_erfc + 1) * kU;
    l.e_exp = (2 * l.n_exp + 1) * kU;
    l.e_sig = pw(1 + l.e_exp, 2) * pw(1 + kU, 3) - 1;
    return l;
  }();
  return a;
}

/// Error of an N-ulp function whose exact magnitude is at least 1 - one_minus near +-1: (N + 1/2) ulp
/// of [1/2, 1) = (N + 1/2)u; where it saturates (1 - |f| <= u/2: the correctly rounded value is +-1)
/// the function must return +-1 and errs by 1 - |f|.
double near_one(double one_minus, double n_ulps) {
  return one_minus <= 0.5 * kU ? one_minus : (n_ulps + 0.5) * kU;
}

/// Underflow floor (see the header): silu's textbook form at x < -ln(max), plus subnormal losses.
double underflow_floor() {
  const double mx = max_finite(DType::kF32);
  return (std::log(mx) + 1) / mx + 2 * min_normal(DType::kF32);
}

constexpr double kGeluA = 0.044715;
const double kSqrt2 = std::sqrt(2.0), kSqrtPi = std::sqrt(M_PI), kSqrt2Pi = std::sqrt(2 * M_PI),
             kK = std::sqrt(2 / M_PI);

/// 0.5 |erfc(t^) - erfc(t)| = 0.5 |erf(t^) - erf(t)| for t = |x|/sqrt2 rounded with gamma_2 (mean value
/// theorem: erfc' = -(2/sqrt(pi)) exp(-t^2), largest at t_lo = |t|(1 - gamma_2)); the cdf's argument error.
double erf_arg(double ax) {
  const double g2 = gamma_n(2, kU), t = ax / kSqrt2, tlo = t * (1 - g2);
  return 0.5 * (2 / kSqrtPi) * std::exp(-tlo * tlo) * t * g2;
}
double erf_one_minus(double ax) {  // 1 - |erf(t_lo)|
  const double g2 = gamma_n(2, kU);
  return std::erfc(ax / kSqrt2 * (1 - g2));
}

double e32_forward(Act act, double x, double y) {
  const LibAccuracy& L = lib();
  const double ax = std::fabs(x), ay = std::fabs(y);
  switch (act) {
    case Act::kGeluErf: {
      const double a = ax * erf_arg(ax);  // 0.5|x| |erfc(t^) - erfc(t)|
      const double ra = (1 + L.e_erfc) * pw(1 + kU, 3);
      const double e_acc = ay * (ra - 1) + a * ra;
      const double e1 = near_one(erf_one_minus(ax), L.n_erf);
      const double rb = pw(1 + kU, 4);
      const double e_txt = ay * (rb - 1) + (a + 0.5 * ax * e1) * rb;
      return std::max(e_acc, e_txt);
    }
    case Act::kGeluTanh: {
      const double w = kK * (x + kGeluA * x * x * x), v = 2 * w, dv = gamma_n(8, kU) * std::fabs(v);
      // |x| s(v^) <= y_hi = |x| s(v) exp(dv s(-(v - dv))), in logs (s(v) may underflow where the factor overflows).
      const double y_hi = ax * std::exp(log_sig(v) + dv * sig(-(v - dv)));
      const double e_acc = y_hi * (1 + L.e_sig) * (1 + kU) - ay;
      const double wlo = std::fabs(w) * (1 - gamma_n(8, kU));
      const double e1 = near_one(2 * sig(-2 * wlo), L.n_tanh);  // 1 - tanh(w_lo)
      const double rb = pw(1 + kU, 3);
      const double e_txt = y_hi * rb - ay + 0.5 * ax * e1 * rb;
      return std::max(e_acc, e_txt);
    }
    case Act::kSilu:
      return ay * ((1 + L.e_sig) * (1 + kU) - 1);
  }
  return INFINITY;
}

/// E_g: |g^ - g| for the fp32 derivative g^ at x (first, second: backward.h's terms).
double e32_grad(Act act, double x, double mag) {
  const LibAccuracy& L = lib();
  const double ax = std::fabs(x);
  switch (act) {
    case Act::kSilu: {
      const double s = sig(x), sc = sig(-x);
      const double e_acc = mag * (pw(1 + L.e_sig, 2) * pw(1 + kU, 3) - 1);
      const double es = (1 + L.e_exp) * pw(1 + kU, 2) - 1;
      const bool one = std::exp(-x) * (1 + L.e_exp) < kU;  // 1 + expf(-x) rounds to 1: s^ = 1
      const double err_sc = one ? sc : es * s + kU * sc;
      const double rb = (1 + es) * pw(1 + kU, 4);
      const double e_txt = mag * (rb - 1) + ax * s * err_sc * rb;
      return std::max(e_acc, e_txt);
    }
    case Act::kGeluErf: {
      const double r = (1 + std::max(L.e_erfc, L.e_exp)) * pw(1 + kU, 4) - 1;
      const double cdf_arg = erf_arg(ax);
      const double e1 = near_one(erf_one_minus(ax), L.n_erf);
      const double p = ax * (std::exp(-(1 - kU) * x * x / 2) - std::exp(-x * x / 2)) / kSqrt2Pi;
      return mag * r + (cdf_arg + 0.5 * e1 + p) * (1 + r);
    }
    case Act::kGeluTanh: {
      const double w = kK * (x + kGeluA * x * x * x), v = 2 * w;
      const double g8 = gamma_n(8, kU), dv = g8 * std::fabs(v);  // gamma_8: w and w' alike
      const double s = sig(v), sc = sig(-v), wp = kK * (1 + 3 * kGeluA * x * x);
      const double second = 2 * ax * s * sc * wp;
      // s(v^) <= s_hi, 1 - s(v^) <= sc_hi (mean value theorem on ln s), in logs as in the forward.
      const double ls = log_sig(v) + dv * sig(-(v - dv)), lsc = log_sig(-v) + dv * sig(v + dv);
      const double s_hi = std::exp(ls);
      const double second_hi = ax == 0 ? 0 : std::exp(std::log(2 * ax * wp) + ls + lsc);
      const double e_acc = (s_hi * (1 + L.e_sig) * pw(1 + kU, 2) - s) +
                           (second_hi * pw(1 + L.e_sig, 2) * (1 + g8) * pw(1 + kU, 4) - second);
      const double wlo = std::fabs(w) * (1 - g8);
      const double om = 2 * sig(-2 * wlo);  // 1 - tanh(w_lo)
      const double e1 = near_one(om, L.n_tanh);
      const double dt = om <= 0.5 * kU ? 4 * sig(2 * wlo) * sig(-2 * wlo) : 2 * e1 + e1 * e1 + 2 * kU;
      const double e_txt = (s_hi * pw(1 + kU, 3) - s) + 0.5 * e1 * pw(1 + kU, 3) +
                           (second_hi * (1 + g8) * pw(1 + kU, 4) - second) +
                           0.5 * ax * wp * dt * (1 + g8) * pw(1 + kU, 4);
      (void)mag;
      return std::max(e_acc, e_txt);
    }
  }
  return INFINITY;
}

ref::Activation ref_act(Act a) {
  switch (a) {
    case Act::kGeluErf:
      return ref::Activation::kGeluErf;
    case Act::kGeluTanh:
      return ref::Activation::kGeluTanh;
    case Act::kSilu:
      return ref::Activation::kSilu;
  }
  return ref::Activation::kIdentity;
}

/// Output rounding and the reference's own error (see the header).
double finish(double ref_abs, double e, DType out) {
  return (e + store_rounding(ref_abs + e, out)) * (1 + 0x1p-20);
}

}  // namespace

ActivationPoint activation_fwd_point(Act act, DType out, double x) {
  ActivationPoint p;
  p.ref = ref::activation<double>(ref_act(act), x);
  if (!std::isfinite(p.ref) || !std::isfinite(x)) return p;  // NaN / Inf pattern only
  const double e = e32_forward(act, x, p.ref) + underflow_floor();
  p.tol = finish(std::fabs(p.ref), e, out);
  return p;
}

ActivationPoint activation_bwd_point(Act act, DType out, double x, double dy) {
  ActivationPoint p;
  double mag = 0;
  const double g = ref::activation_grad<double>(ref_act(act), x, &mag);
  p.ref = dy * g;
  if (!std::isfinite(p.ref) || !std::isfinite(x) || !std::isfinite(dy)) return p;
  const double ady = std::fabs(dy), f = underflow_floor();
  const double e = ady * (e32_grad(act, x, mag) + f) * (1 + kU) + kU * std::fabs(p.ref) + f;
  p.tol = finish(std::fabs(p.ref), e, out);
  return p;
}

namespace {

Status reference_fwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const Act act = act_of(c);
  const int64_t n = t[0].v.cols;
  OutputRef y;
  y.ref.resize(static_cast<size_t>(n));
  y.tol.resize(y.ref.size());
  for (int64_t i = 0; i < n; ++i) {
    const ActivationPoint p = activation_fwd_point(act, dt, t[0].at(0, i));
    y.ref[static_cast<size_t>(i)] = p.ref;
    y.tol[static_cast<size_t>(i)] = p.tol;
  }
  out = {std::move(y)};
  return ok_status();
}

Status reference_bwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const Act act = act_of(c);
  const int64_t n = t[0].v.cols;
  OutputRef dx;
  dx.ref.resize(static_cast<size_t>(n));
  dx.tol.resize(dx.ref.size());
  for (int64_t i = 0; i < n; ++i) {
    const ActivationPoint p = activation_bwd_point(act, dt, t[0].at(0, i), t[1].at(0, i));
    dx.ref[static_cast<size_t>(i)] = p.ref;
    dx.tol[static_cast<size_t>(i)] = p.tol;
  }
  out = {std::move(dx)};
  return ok_status();
}

RowOpConfig fwd_config() {
  RowOpConfig cfg;
  cfg.name = "activation";
  cfg.description = "GELU (erf, tanh) and SiLU elementwise (params.act), fp32/fp16/bf16 with fp32 math";
  cfg.def.op = "activation";
  cfg.def.bound_name = "activation ceiling";
  cfg.def.reference = reference_fwd;
  cfg.registry = &fwd_registry();
  cfg.gen = gen_fwd;
  cfg.build = build_fwd;
  cfg.validate = [](const Case& c) { return validate_common(c, {{"X", Role::kIn}, {"Y", Role::kOut}}); };
  cfg.shrink_keys = {{"count", 1}, {"out_off", 0}};
  cfg.self_check_note =
      "host activations gradient-checked in tests/references/backward_ref_test.cpp; tolerance swept over fp32 "
      "inputs against both fp32 forms in tests/properties/activation_test.cpp";
  return cfg;
}
RowOpConfig bwd_config() {
  RowOpConfig cfg;
  cfg.name = "activation_bwd";
  cfg.description = "backward of GELU (erf, tanh) and SiLU: dx = dy act'(x) (params.act)";
  cfg.def.op = "activation_bwd";
  cfg.def.bound_name = "activation-backward ceiling";
  cfg.def.reference = reference_bwd;
  cfg.registry = &bwd_registry();
  cfg.gen = gen_bwd;
  cfg.build = build_bwd;
  cfg.validate = [](const Case& c) {
    return validate_common(c, {{"X", Role::kIn}, {"dY", Role::kIn}, {"dX", Role::kOut}});
  };
  cfg.shrink_keys = {{"count", 1}, {"out_off", 0}};
  cfg.self_check_note = "host backward gradient-checked in tests/references/backward_ref_test.cpp";
  return cfg;
}

[[maybe_unused]] const bool kSpecs = register_spec(std::make_unique<RowOpSpec>(fwd_config())) &&
                                     register_spec(std::make_unique<RowOpSpec>(bwd_config()));

}  // namespace

// ---- exhaustive sweep ----------------------------------------------------------------
StatusOr<ExhaustiveReport> activation_exhaustive(const std::string& variant, Act act, DType dt, bool backward,
                                                 int device) {
  if (dt != DType::kF16 && dt != DType::kBF16)
    return invalid_argument("exhaustive sweeps take --dtype fp16 or bf16 (2^16 bit patterns)");
  ExhaustiveSweep s;
  s.name =
      fmt::format("{}[{}] {} {}", backward ? "activation_bwd" : "activation", variant, act_name(act), dtype_name(dt));
  s.dtype = dt;
  s.backward = backward;
  s.dy = 1;
  if (backward) {
    const ActivationBwdFn fn = find_activation_bwd(variant);
    if (fn == nullptr) return not_found(fmt::format("activation_bwd has no variant '{}'", variant));
    const kernels::rowwise::Dt kd = to_dt(dt);
    s.launch = [fn, kd, act](const void* x, const void* dy, void* out, int64_t n, cudaStream_t st) {
      return fn(kd, act, x, dy, out, n, st);
    };
    s.reference = [act, dt](double x, double dy) {
      const ActivationPoint p = activation_bwd_point(act, dt, x, dy);
      return ExhaustiveRef{p.ref, p.tol};
    };
  } else {
    const ActivationFwdFn fn = find_activation_fwd(variant);
    if (fn == nullptr) return not_found(fmt::format("activation has no variant '{}'", variant));
    const kernels::rowwise::Dt kd = to_dt(dt);
    s.launch = [fn, kd, act](const void* x, const void*, void* out, int64_t n, cudaStream_t st) {
      return fn(kd, act, x, out, n, st);
    };
    s.reference = [act, dt](double x, double) {
      const ActivationPoint p = activation_fwd_point(act, dt, x);
      return ExhaustiveRef{p.ref, p.tol};
    };
  }
  return run_exhaustive(s, device);
}

}  // namespace assay::rowwise

namespace assay::rowwise {
namespace {
ExhaustiveOp exhaustive_op(bool backward) {
  ExhaustiveOp e;
  e.functions = {"gelu_erf", "gelu_tanh", "silu"};
  e.has_variant = [backward](const std::string& v) {
    return backward ? find_activation_bwd(v) != nullptr : find_activation_fwd(v) != nullptr;
  };
  e.run = [backward](const std::string& v, const std::string& f, DType dt, int device) -> StatusOr<ExhaustiveReport> {
    const auto act = parse_act(f);
    if (!act) return invalid_argument(fmt::format("'{}': gelu_erf, gelu_tanh or silu", f));
    return activation_exhaustive(v, *act, dt, backward, device);
  };
  return e;
}
[[maybe_unused]] const bool kExhaustive = register_exhaustive_op("activation", exhaustive_op(false)) &&
                                          register_exhaustive_op("activation_bwd", exhaustive_op(true));
}  // namespace
}  // namespace assay::rowwise
