// activation / activation_bwd: GELU (erf and tanh forms) and SiLU, elementwise, forward and backward.
//
// Sections: declaration (params, tensors), references, bound, vendor, binding, exhaustive sweep.
// Vendor column: cuDNN's legacy activation API for SiLU (CUDNN_ACTIVATION_SWISH, beta 1),
// forward and backward (the backward reads the forward's output, computed first into a
// staging buffer); it has no GELU mode, so GELU cases say "not run" with that reason.
// Binding: kernels/rowwise/activations.cu ("elementwise": grid-stride, 16-byte packs when every
// pointer is aligned, scalar otherwise; IEEE arithmetic, an empty contract); the planted bugs of
// tests/mutants/rowwise/ bind through activation_launch / activation_bwd_launch (activation.h).
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
// Declared arithmetic (the variant's Contract: fast_math, ftz). Under fast-math the kernel's
// expf is __expf, its divisions are __fdividef / -prec-div=false, its tanhf is __tanhf ([CUDA]
// "Intrinsic Functions", harness/bounds.h cuda_math_table; erff / erfcf have no intrinsic):
// - e_exp(a) = (2N + 1)u with N = 2 + floor(1.173 |a|) ulps at the argument a (|v| for the
//   sigmoids, x^2/2 for the pdf), taken at |a| (1 + gamma_8) for the kernel's rounded argument;
// - a division errs by 2 ulp: 5u relative instead of u (denominators 1 + e stay in [1, 2^126]
//   except where e > 2^126, where __fdividef returns 0: covered by the gate rule below);
// - __tanhf (tanh.approx.f32) errs by 2^-11 relative over the whole range ([PTX] tanh; the
//   2^-10.987 sometimes quoted is tanh.approx.f16's absolute error), + u: near +-1 that is
//   ABSOLUTE, with no saturation guarantee, so 1 + t and 1 - t^2 err by it everywhere (the
//   textbook tanh forms then allow 0.5 |x| 2^-11 however large x is: the declared arithmetic).
// Under flush-to-zero (fast-math implies it) subnormal inputs, intermediates and results become
// 0. A flushed gate (Phi, sigmoid, their exp; the pdf; s(1 - s)) or a flushed result zeroes the
// term it belongs to, so the error is that term's magnitude: forward, where the gate |y/x| or
// |y| is below 2 min_normal (the computed value below min_normal, the exact one within its
// relative error of it), tol >= |y|; backward, the same per term of act' (first: Phi or s;
// second: the pdf or s(1 - s)), + min_normal for a flushed x (|act'(x) - act'(0)| <= |x|
// max|act''| < min_normal) or a flushed partial product, and tol >= |dx| where |dx| < 2
// min_normal (a flushed dy or product). The IEEE underflow floor F below stays.
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
// Properties: none (no params.relation); elementwise outputs are checked per element.
// Value classes: normal / uniform with scales up to 120 (the cancellation region x << 0 and exp's
// saturation at |x| ~ 88), same-sign, small integers, log-uniform across up to 120 binades,
// Pareto tails, near-overflow, subnormals, signed zeros; NaN / +-inf / -0 injected at the first,
// last and tile-edge (32: pack edges too) elements or at random; params.x_scale (4, 12, 40, 120)
// widens normal and uniform X (prepare). Lengths: edges of 4, 8 and 256 (packs and blocks) up to
// min(max_dim, 2^20); every tensor draws its own element offset, so 16-byte packs are misaligned
// on one tensor only as often as on all.
// Exhaustive sweep (assay exhaustive): every fp16 / bf16 bit pattern through one launch, compared
// in ulps against the same reference and tolerance (harness/exhaustive.h).
#include "properties/activation.h"
#include "properties/vendor_columns.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/op_model.h"
#include "references/host/backward.h"

namespace assay::rowwise {

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

namespace {

constexpr int64_t kMaxCount = int64_t{1} << 20;

// ---- declaration ------------------------------------------------------------------
std::vector<ParamDef> params() {
  return {ParamDef::dtype("dtype", activation_dtypes()),
          ParamDef::choice("act", {"gelu_erf", "gelu_tanh", "silu"}),
          ParamDef::extent("count", 0, kMaxCount).aim({4, 8, 256}),
          ParamDef::real("x_scale", {4, 12, 40, 120})
              .optional(1)
              .describe("normal / uniform X times this: x << 0 (1 + erf, 1 + tanh cancel; exp saturates at ~88)")};
}

/// X: every class that reaches a distinct regime of the three functions.
ValueSpec x_values() {
  return {.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign, ValueClass::kSmallInt,
                      ValueClass::kLogUniform, ValueClass::kPareto, ValueClass::kNearOverflow, ValueClass::kSubnormal,
                      ValueClass::kSignedZero},
          .specials = kSpecialAll};
}
/// dY: finite upstream gradients; NaN and -0 only (see the header on +-inf).
ValueSpec dy_values() {
  return {.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign, ValueClass::kSmallInt,
                      ValueClass::kLogUniform, ValueClass::kSignedZero},
          .specials = kSpecialNaN | kSpecialNegZero,
          .inject_percent = 10};
}

/// params.x_scale widens normal and uniform X (the other classes have their own ranges).
void scale_x(const Case& c, std::vector<unsigned char*>& img) {
  const double k = Params(c.params).r("x_scale", 1);
  const ValueClass cls = c.tensors[0].values.cls;
  if (k == 1 || (cls != ValueClass::kNormal && cls != ValueClass::kUniform)) return;
  const auto& d = c.tensors[0].desc;
  const View2D v = view_of(d);
  for (int64_t j = 0; j < v.cols; ++j) poke(d.dtype, img[0], d.offset + j, k * peek(d.dtype, img[0], d.offset + j));
}

Act act_of(const Case& c) {
  return parse_act(Params(c.params).s("act")).value_or(Act::kGeluErf);
}

// ---- bound ------------------------------------------------------------------------
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

double table_ulps(const char* name, double dflt) {
  const MathFnAccuracy* f = find_math_fn(name);
  return f != nullptr ? f->ulp_f32 : dflt;
}

/// The library functions' accuracy under the declared arithmetic, from the [CUDA] tables
/// (harness/bounds.h): precise functions, or the fast-math intrinsics.
constexpr const char* kSiluGradFromOutput = "silu_grad_from_output";

struct Lib {
  bool fast = false, ftz = false;
  double n_erf = 2, n_erfc = 4, n_tanh = 2, n_exp = 2;  // ulps vs the correctly rounded result
  double exp_ulp = 2, exp_slope = 0;                    // __expf: exp_ulp + floor(exp_slope |a|)
  double e_erfc = 0;                                    // relative vs exact: (2N + 1)u
  double e_div = kU;                                    // one division, relative
  double tanh_rel = 0;                                  // __tanhf: relative vs exact (fast only)

  explicit Lib(const Arithmetic& a) : fast(a.fast_math), ftz(a.ftz || a.fast_math) {
    n_erf = table_ulps("erff", 2);
    n_erfc = table_ulps("erfcf", 4);
    n_tanh = table_ulps("tanhf", 2);
    n_exp = table_ulps("expf", 2);
    e_erfc = (2 * n_erfc + 1) * kU;
    if (fast) {
      const MathFnAccuracy* e = find_math_fn("expf");
      exp_ulp = e->fast.ulp;
      exp_slope = e->fast.slope;
      e_div = (2 * find_math_fn("x/y")->fast.ulp + 1) * kU;
      tanh_rel = fast_tanh_rel();
    }
  }
  /// expf (or __expf) at argument a, relative vs exact. Past |a| = 104 exp(-|a|) is below the
  /// smallest subnormal and exp(|a|) past the largest finite value: 0 or Inf whatever the ulps
  /// (the gate rule and the underflow floor cover those), so __expf's count stops growing there.
  double e_exp(double a) const {
    const double aa = std::min(std::fabs(a) * (1 + gamma_n(8, kU)), 104.0);
    const double n = fast ? exp_ulp + std::floor(exp_slope * aa) : n_exp;
    return (2 * n + 1) * kU;
  }
  /// sigmoid / x sigmoid from one exp at argument a: the exp (numerator and denominator), the
  /// sum, the division, the product ([H] Lemma 3.3).
  double e_sig(double a) const { return pw(1 + e_exp(a), 2) * pw(1 + kU, 2) * (1 + e_div) - 1; }
  /// Error of tanh near +-1 (absolute), exact magnitude at least 1 - one_minus: (N + 1/2) ulp of
  /// [1/2, 1) = (N + 1/2)u; where it saturates (1 - |t| <= u/2: the correctly rounded value is
  /// +-1) the function must return +-1 and errs by 1 - |t|. __tanhf: its relative error, always.
  double tanh_near_one(double one_minus) const {
    if (fast) return tanh_rel + kU;
    return one_minus <= 0.5 * kU ? one_minus : (n_tanh + 0.5) * kU;
  }
  double erf_near_one(double one_minus) const { return one_minus <= 0.5 * kU ? one_minus : (n_erf + 0.5) * kU; }
};

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

double e32_forward(const Lib& L, Act act, double x, double y) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  switch (act) {
    case Act::kGeluErf: {
      const double a = ax * erf_arg(ax);  // 0.5|x| |erfc(t^) - erfc(t)|
      const double ra = (1 + L.e_erfc) * pw(1 + kU, 3);
      const double e_acc = ay * (ra - 1) + a * ra;
      const double e1 = L.erf_near_one(erf_one_minus(ax));
      const double rb = pw(1 + kU, 4);
      const double e_txt = ay * (rb - 1) + (a + 0.5 * ax * e1) * rb;
      return std::max(e_acc, e_txt);
    }
    case Act::kGeluTanh: {
      const double w = kK * (x + kGeluA * x * x * x), v = 2 * w, dv = gamma_n(8, kU) * std::fabs(v);
      // |x| s(v^) <= y_hi = |x| s(v) exp(dv s(-(v - dv))), in logs (s(v) may underflow where the factor overflows).
      const double y_hi = ax * std::exp(log_sig(v) + dv * sig(-(v - dv)));
      const double e_acc = y_hi * (1 + L.e_sig(v)) * (1 + kU) - ay;
      const double wlo = std::fabs(w) * (1 - gamma_n(8, kU));
      const double e1 = L.tanh_near_one(2 * sig(-2 * wlo));  // 1 - tanh(w_lo)
      const double rb = pw(1 + kU, 3);
      const double e_txt = y_hi * rb - ay + 0.5 * ax * e1 * rb;
      return std::max(e_acc, e_txt);
    }
    case Act::kSilu:
      return ay * ((1 + L.e_sig(x)) * (1 + kU) - 1);
  }
  return INFINITY;
}

/// E_g: |g^ - g| for the fp32 derivative g^ at x (mag: backward.h's |first| + |second|).
double e32_grad(const Lib& L, Act act, double x, double mag) {
  const double ax = std::fabs(x), mn = min_normal(DType::kF32);
  switch (act) {
    case Act::kSilu: {
      const double s = sig(x), sc = sig(-x);
      const double e_acc = mag * (pw(1 + L.e_sig(x), 2) * pw(1 + kU, 3) - 1);
      const double es = (1 + L.e_exp(x)) * (1 + kU) * (1 + L.e_div) - 1;
      // 1 + expf(-x) rounds to 1: s^ = 1 (IEEE division; __fdividef(1, 1) may err by 2 ulp).
      const bool one = !L.fast && std::exp(-x) * (1 + L.e_exp(x)) < kU;
      const double err_sc = one ? sc : es * s + kU * sc;
      const double rb = (1 + es) * pw(1 + kU, 4);
      const double e_txt = mag * (rb - 1) + ax * s * err_sc * rb;
      double e = std::max(e_acc, e_txt);
      if (L.ftz) e += (s < 2 * mn ? s : 0) + (s * sc < 2 * mn ? ax * s * sc : 0) + mn;
      return e;
    }
    case Act::kGeluErf: {
      const double r = (1 + std::max(L.e_erfc, L.e_exp(x * x / 2))) * pw(1 + kU, 4) - 1;
      const double cdf_arg = erf_arg(ax);
      const double e1 = L.erf_near_one(erf_one_minus(ax));
      const double p = ax * (std::exp(-(1 - kU) * x * x / 2) - std::exp(-x * x / 2)) / kSqrt2Pi;
      double e = mag * r + (cdf_arg + 0.5 * e1 + p) * (1 + r);
      if (L.ftz) {
        const double cdf = 0.5 * std::erfc(-x / kSqrt2), pdf = std::exp(-x * x / 2) / kSqrt2Pi;
        e += (cdf < 2 * mn ? cdf : 0) + (pdf < 2 * mn ? ax * pdf : 0) + mn;
      }
      return e;
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
      const double es = L.e_sig(v);
      const double e_acc = (s_hi * (1 + es) * pw(1 + kU, 2) - s) +
                           (second_hi * pw(1 + es, 2) * (1 + g8) * pw(1 + kU, 4) - second);
      const double wlo = std::fabs(w) * (1 - g8);
      const double om = 2 * sig(-2 * wlo);  // 1 - tanh(w_lo)
      const double e1 = L.tanh_near_one(om);
      const double dt = !L.fast && om <= 0.5 * kU ? 4 * sig(2 * wlo) * sig(-2 * wlo) : 2 * e1 + e1 * e1 + 2 * kU;
      const double e_txt = (s_hi * pw(1 + kU, 3) - s) + 0.5 * e1 * pw(1 + kU, 3) +
                           (second_hi * (1 + g8) * pw(1 + kU, 4) - second) +
                           0.5 * ax * wp * dt * (1 + g8) * pw(1 + kU, 4);
      (void)mag;
      double e = std::max(e_acc, e_txt);
      if (L.ftz) e += (s < 2 * mn ? s : 0) + (s * sc < 2 * mn ? second_hi : 0) + mn;
      return e;
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

/// Output rounding and the reference's own error (see the header). A ceiling past half the output
/// type's largest value (the textbook tanh forms under __tanhf at |x| ~ 1e14) admits any value,
/// an overflow included: +Inf, as the engine's check reads it.
double finish(double ref_abs, double e, DType out) {
  const double t = (e + store_rounding(ref_abs + e, out)) * (1 + 0x1p-20);
  return t > 0.5 * max_finite(out) ? INFINITY : t;
}

/// The Lib of an arithmetic: it depends on fast_math and ftz alone, and building one searches the
/// math table by name, which took half the time of a bound evaluated per element.
const Lib& lib_of(const Arithmetic& a) {
  const auto make = [](bool fast, bool ftz) {
    Arithmetic x;
    x.fast_math = fast;
    x.ftz = ftz;
    return Lib(x);
  };
  static const Lib libs[2][2] = {{make(false, false), make(false, true)}, {make(true, false), make(true, true)}};
  return libs[a.fast_math ? 1 : 0][a.ftz ? 1 : 0];
}

/// E32 of the forward at x whose exact value is y, under the arithmetic (before the output rounding).
double fwd_error(const Lib& L, Act act, double x, double y) {
  const double ay = std::fabs(y), mn = min_normal(DType::kF32);
  double e = e32_forward(L, act, x, y) + underflow_floor();
  // Flush-to-zero or __fdividef's 0 for denominators past 2^126: a flushed gate or result zeroes y.
  if (L.ftz || L.fast)
    if (ay < 2 * mn || (x != 0 && ay / std::fabs(x) < 2 * mn)) e += ay;
  return e;
}

/// The convention kSiluGradFromOutput: SiLU' evaluated from the saved output as
/// g = y^ + s^ (1 - y^), y^ = silu(x) as computed and stored in the data type (cuDNN's backward
/// takes y; algebraically s + x s (1 - s)). y^ errs by |y| E_y, E_y the forward's relative error
/// and the store's u_dt; 1 - y^ and the product round once each, s^ by e_sig; the sum rounds
/// once and may cancel (y ~ x and s (1 - y) ~ -x at large x: nothing is left of g = 1 but the
/// roundings of terms near |x|, an absolute error of order u |x|):
/// With d_y = |y| E_y + half dt's smallest subnormal (a y stored below dt's smallest normal
/// rounds to an absolute grid):
///   |g^ - g| <= d_y (1 + s) + ((1 + e_sig)(1 + u)^3 - 1)(s (1 + |y| + d_y) + |y| + d_y).
double e32_silu_grad_from_output(const Lib& L, double x, DType dt) {
  const double s = sig(x), ay = std::fabs(x) * s;
  const double e_y = (1 + L.e_sig(x)) * (1 + kU) * (1 + unit_roundoff(dt)) - 1;
  const double d_y = ay * e_y + 0.5 * min_subnormal(dt) + 0.5 * min_subnormal(DType::kF32);
  const double r = (1 + L.e_sig(x)) * pw(1 + kU, 3) - 1;
  return (d_y * (1 + s) + r * (s * (1 + ay + d_y) + ay + d_y)) * (1 + 0x1p-20);
}

double bwd_error(const Lib& L, Act act, double x, double dy, double mag, double dx) {
  const double ady = std::fabs(dy), f = underflow_floor(), mn = min_normal(DType::kF32);
  double e = ady * (e32_grad(L, act, x, mag) + f) * (1 + kU) + kU * std::fabs(dx) + f;
  if (L.ftz && std::fabs(dx) < 2 * mn) e += std::fabs(dx);  // a flushed dy or product
  return e;
}

}  // namespace

double fast_tanh_rel() {
  static const double r = find_math_fn("tanhf")->fast.rel;
  return r;
}

ActivationPoint activation_fwd_point(Act act, DType out, double x, const Arithmetic& a) {
  ActivationPoint p;
  p.ref = ref::activation<double>(ref_act(act), x);
  if (!std::isfinite(p.ref) || !std::isfinite(x)) return p;  // NaN / Inf pattern only
  p.tol = finish(std::fabs(p.ref), fwd_error(lib_of(a), act, x, p.ref), out);
  return p;
}

ActivationPoint activation_bwd_point(Act act, DType out, double x, double dy, const Arithmetic& a) {
  ActivationPoint p;
  double mag = 0;
  const double g = ref::activation_grad<double>(ref_act(act), x, &mag);
  p.ref = dy * g;
  if (!std::isfinite(p.ref) || !std::isfinite(x) || !std::isfinite(dy)) return p;
  p.tol = finish(std::fabs(p.ref), bwd_error(lib_of(a), act, x, dy, mag, p.ref), out);
  return p;
}

namespace {

// ---- references ---------------------------------------------------------------------
/// y in ref (tol 0 where the reference is not finite: pattern only, as the bound leaves it).
Status reference_fwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Act act = act_of(c);
  const int64_t n = t[0].v.cols;
  OutputRef y;
  y.ref.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y.ref[static_cast<size_t>(i)] = ref::activation<double>(ref_act(act), t[0].at(0, i));
  out = {std::move(y)};
  return ok_status();
}

/// dx in ref; aux[0]: |first| + |second| of act'(x) (backward.h's mag, without |dy|).
Status reference_bwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Act act = act_of(c);
  const int64_t n = t[0].v.cols;
  OutputRef dx;
  dx.ref.resize(static_cast<size_t>(n));
  dx.aux.assign(1, std::vector<double>(dx.ref.size()));
  for (int64_t i = 0; i < n; ++i) {
    double mag = 0;
    const double g = ref::activation_grad<double>(ref_act(act), t[0].at(0, i), &mag);
    dx.ref[static_cast<size_t>(i)] = t[1].at(0, i) * g;
    dx.aux[0][static_cast<size_t>(i)] = mag;
  }
  out = {std::move(dx)};
  return ok_status();
}

Status bound_fwd(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const Act act = act_of(c);
  const DType dt = p.dt("dtype");
  const Lib& L = lib_of(a);
  OutputRef& y = out[0];
  y.tol.assign(y.ref.size(), 0.0);
  for (size_t i = 0; i < y.ref.size(); ++i) {
    const double x = t[0].at(0, static_cast<int64_t>(i)), r = y.ref[i];
    if (!std::isfinite(r) || !std::isfinite(x)) continue;  // NaN / Inf pattern only
    y.tol[i] = finish(std::fabs(r), fwd_error(L, act, x, r), dt);
  }
  return ok_status();
}

Status bound_bwd(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const Act act = act_of(c);
  const DType dt = p.dt("dtype");
  const Lib& L = lib_of(a);
  const bool from_output = act == Act::kSilu && p.convention(kSiluGradFromOutput);
  OutputRef& dx = out[0];
  dx.tol.assign(dx.ref.size(), 0.0);
  for (size_t i = 0; i < dx.ref.size(); ++i) {
    const double x = t[0].at(0, static_cast<int64_t>(i)), dy = t[1].at(0, static_cast<int64_t>(i)), r = dx.ref[i];
    if (!std::isfinite(r) || !std::isfinite(x) || !std::isfinite(dy)) continue;
    double e = bwd_error(L, act, x, dy, dx.aux[0][i], r);
    if (from_output) e = std::max(e, std::fabs(dy) * e32_silu_grad_from_output(L, x, dt) * (1 + kU) + kU * std::fabs(r));
    dx.tol[i] = finish(std::fabs(r), e, dt);
  }
  return ok_status();
}

/// The host forms against long double at a few points, and the ceiling's own sanity: the
/// reference's value is within it and a fast-math ceiling is at least the IEEE one.
Status self_check(bool backward, std::string& report) {
  double worst = 0;
  Arithmetic fast;
  fast.fast_math = fast.ftz = true;
  for (double x : {-7.5, -2.0, -0.3, 0.4, 1.7, 6.0}) {
    const long double xl = x;
    const long double phi = 0.5L * std::erfc(-xl / std::sqrt(2.0L));
    const long double want =
        backward ? phi + xl * std::exp(-xl * xl / 2) / std::sqrt(2 * 3.14159265358979323846264338327950288L) : xl * phi;
    const ActivationPoint pt = backward ? activation_bwd_point(Act::kGeluErf, DType::kF32, x, 1.0)
                                        : activation_fwd_point(Act::kGeluErf, DType::kF32, x);
    worst = std::max(worst, static_cast<double>(std::fabs((pt.ref - want) / want)));
    for (Act a : {Act::kGeluErf, Act::kGeluTanh, Act::kSilu}) {
      const ActivationPoint i = backward ? activation_bwd_point(a, DType::kF32, x, 1.0)
                                         : activation_fwd_point(a, DType::kF32, x);
      const ActivationPoint f = backward ? activation_bwd_point(a, DType::kF32, x, 1.0, fast)
                                         : activation_fwd_point(a, DType::kF32, x, fast);
      if (!(i.tol > 0 && f.tol >= i.tol))
        return internal_error(fmt::format("{}: ceiling at x = {} is {:.3g} (IEEE) and {:.3g} (fast-math)",
                                          act_name(a), x, i.tol, f.tol));
    }
  }
  if (!(worst < 1e-13))
    return internal_error(fmt::format("activation: host gelu_erf reference off by {:.3g} (relative)", worst));
  report += fmt::format(
      "{}: host gelu_erf{} within {:.2g} of a long-double evaluation (6 points); fast-math ceilings >= IEEE "
      "ones; tolerance swept over fp32 inputs in tests/properties/activation_test.cpp\n",
      backward ? "activation_bwd" : "activation", backward ? "'" : "", worst);
  return ok_status();
}

// ---- vendor ---------------------------------------------------------------------------

/// cuDNN SiLU on the case's 1-D tensors: X -> Y, or X, dY -> dX (y = silu(x) staged first).
Status cudnn_activation(bool fwd, const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
  namespace vc = vendor_columns;
  if (p.s("act") != "silu")
    return unavailable(fmt::format("cuDNN's activation API has no {} (SiLU only here)", p.s("act")));
  ASSAY_ASSIGN_OR_RETURN(vendor::CudnnHandle * h, vc::cudnn_handle(s));
  vendor::CudnnActivation a;
  a.rows = 1;
  a.n = t[0].v.cols;
  a.dtype = t[0].dtype;
  a.mode = vendor::CudnnActivationMode::kSwish;
  if (a.n == 0) return ok_status();
  if (fwd) return vendor::cudnn_activation_forward(*h, a, 1.0f, t[0].ptr, 0.0f, t[1].ptr);
  ASSAY_ASSIGN_OR_RETURN(void* y, vc::staging(0, static_cast<size_t>(a.n) * dtype_size(a.dtype), s));
  ASSAY_RETURN_IF_ERROR(vendor::cudnn_activation_forward(*h, a, 1.0f, t[0].ptr, 0.0f, y));
  return vendor::cudnn_activation_backward(*h, a, 1.0f, y, t[1].ptr, t[0].ptr, 0.0f, t[2].ptr);
}

OpDef make(bool fwd) {
  OpDef op;
  op.name = fwd ? "activation" : "activation_bwd";
  op.description = fwd ? "GELU (erf, tanh) and SiLU elementwise (params.act), fp32/fp16/bf16 with fp32 math"
                       : "backward of GELU (erf, tanh) and SiLU: dx = dy act'(x) (params.act)";
  op.params = params();
  if (fwd) {
    op.tensors = {{.name = "X", .dims = {"count"}, .values = x_values()},
                  {.name = "Y", .role = Role::kOut, .dims = {"count"}}};
    op.reference = reference_fwd;
    op.bound = bound_fwd;
    op.bound_name = "activation ceiling";
    op.backward = "activation_bwd";
  } else {
    op.tensors = {{.name = "X", .dims = {"count"}, .values = x_values()},
                  {.name = "dY", .dims = {"count"}, .values = dy_values()},
                  {.name = "dX", .role = Role::kOut, .dims = {"count"}}};
    op.reference = reference_bwd;
    op.bound = bound_bwd;
    op.bound_name = "activation-backward ceiling";
  }
  // cuDNN's activation API has no GELU; its backward takes the saved output y.
  Contract vendor_contract = Contract().only("act", {"silu"});
  if (!fwd) {
    op.conventions[kSiluGradFromOutput] =
        "SiLU' from the saved output, y + sigmoid(x) (1 - y) with y = silu(x) stored in the data type";
    vendor_contract.convention(kSiluGradFromOutput);
  }
  op.vendor = {.name = "cudnn-activation",
               .run = [fwd](const Params& p, const std::vector<DevTensor>& t, cudaStream_t st) {
                 return cudnn_activation(fwd, p, t, st);
               },
               .contract = vendor_contract};
  op.prepare = scale_x;
  op.self_check = [fwd](std::string& r) { return self_check(!fwd, r); };
  return op;
}

// ---- binding ------------------------------------------------------------------------
ASSAY_REGISTER(register_op(make(true)));
ASSAY_REGISTER(register_op(make(false)));
ASSAY_REGISTER(add_variant("activation",
                           {.name = "elementwise",
                            .description = "grid-stride, 16-byte packs when x and y are aligned, fp32 math with erfcf / expf",
                            .launch = activation_launch(kernels::rowwise::activation_fwd),
                            .source = "kernels/rowwise/activations.cu"}));
ASSAY_REGISTER(add_variant(
    "activation_bwd",
    {.name = "elementwise",
     .description = "grid-stride, 16-byte packs when x, dy and dx are aligned; dx = dy act'(x) in fp32",
     .launch = activation_bwd_launch(kernels::rowwise::activation_bwd),
     .source = "kernels/rowwise/activations.cu"}));

}  // namespace

// ---- exhaustive sweep ----------------------------------------------------------------
StatusOr<ExhaustiveReport> activation_exhaustive(const std::string& variant, Act act, DType dt, bool backward,
                                                 int device) {
  if (dt != DType::kF16 && dt != DType::kBF16)
    return invalid_argument("exhaustive sweeps take --dtype fp16 or bf16 (2^16 bit patterns)");
  const std::string opname = backward ? "activation_bwd" : "activation";
  const OpDef* op = find_op(opname);
  const VariantDef* v = find_variant(opname, variant);
  if (op == nullptr || v == nullptr) return not_found(fmt::format("{} has no variant '{}'", opname, variant));
  const int64_t n = int64_t{1} << 16;
  const nlohmann::json params = {
      {"dtype", std::string(dtype_name(dt))}, {"act", std::string(act_name(act))}, {"count", n}};
  {
    // The sweep's buffers are contiguous and aligned: the case the variant's contract must admit.
    ASSAY_ASSIGN_OR_RETURN(Case c, build_case(*op, params, std::vector<ValueRecipe>(backward ? 2 : 1),
                                              std::vector<Layout>(op->tensors.size())));
    if (auto rule = outside_contract(v->contract, c))
      return invalid_argument(fmt::format("{}[{}]: the sweep's case is outside its contract: {}", opname, variant, *rule));
  }
  ExhaustiveSweep s;
  s.name = fmt::format("{}[{}] {} {}", opname, variant, act_name(act), dtype_name(dt));
  s.dtype = dt;
  s.backward = backward;
  s.dy = 1;
  const Launch launch = v->launch;
  const Arithmetic arith = v->contract.arithmetic();
  s.launch = [launch, params, dt, backward](const void* x, const void* dy, void* out, int64_t count, cudaStream_t st) {
    nlohmann::json p = params;
    p["count"] = count;
    const View2D w{1, count, std::max<int64_t>(count, 1)};
    auto dev = [&](const void* ptr) {
      return DevTensor{const_cast<void*>(ptr), dt, w, {count}, {1}};
    };
    std::vector<DevTensor> t = {dev(x)};
    if (backward) t.push_back(dev(dy));
    t.push_back(dev(out));
    return launch(Params(p), t, st);
  };
  s.reference = [act, dt, backward, arith](double x, double dy) {
    const ActivationPoint p =
        backward ? activation_bwd_point(act, dt, x, dy, arith) : activation_fwd_point(act, dt, x, arith);
    return ExhaustiveRef{p.ref, p.tol};
  };
  return run_exhaustive(s, device);
}

namespace {
ExhaustiveOp exhaustive_op(bool backward) {
  ExhaustiveOp e;
  e.functions = {"gelu_erf", "gelu_tanh", "silu"};
  e.has_variant = [backward](const std::string& v) {
    return find_variant(backward ? "activation_bwd" : "activation", v) != nullptr;
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
