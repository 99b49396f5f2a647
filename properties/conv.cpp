// conv2d / conv2d_bwd_data / conv2d_bwd_filter: 2-D convolution (cross-correlation) with
// stride, zero padding, dilation and groups (depthwise included), NCHW or NHWC, fp32 / fp16 /
// bf16 storage with fp32 accumulation.
//
// Sections: binding, generators, references and bound.
// Binding: kernels/conv/conv.cu, variants "direct" (one thread per output) and "implicit_gemm"
// (32 x 32 shared-memory tiles, im2col on the fly) per op; the planted bugs of
// tests/mutants/conv register beside them through register_conv (properties/conv_registry.h).
// Tensors, flattened to the testbed's 2-D views (kernels/conv/conv.h):
//   NCHW: X [N*C*H, W], W (KCRS) [K*Cg*R, S], Y [N*K*P, Q];
//   NHWC: X [N*H*W, C], W (KRSC) [K*R*S, Cg], Y [N*P*Q, K];
//   conv2d: X, W in, Y out; conv2d_bwd_data: dY, W in, dX out; conv2d_bwd_filter: X, dY in, dW out.
// Every view may have a padded row stride (the generator pads all three tensors of a case by the
// same 0, 1, 3 or 8 elements, sometimes with a leading offset); the kernels honour each stride
// and must leave the gaps alone (the testbed's gap check).
// Reference: references/host/conv.h in double on the kernel's own (rounded) inputs, with
// mag = sum |a||b| over the terms of each output.
// Bound (per element; [H] = Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.):
//   every output is a dot product of at most k terms, k = Cg*R*S (forward), Kg*R*S (backward-data:
//   an upper bound, a stride skips taps) or N*P*Q (backward-filter), accumulated in fp32 by fmaf in
//   some order: |y^ - y| <= gamma_{k+2}(2^-24) mag + floor = gemm_ceiling(in = dt, acc = out = fp32,
//   k) ([H] (3.5), any order; the 2 spare roundings and the flush-to-zero floor are the GEMM
//   model's, plus the fp64 reference's own gamma_{k+2}(2^-53) mag). The implicit GEMM also adds the
//   zero products of padding taps, stride holes and tile tails: fmaf(0, b, acc) = acc exactly, so
//   they add no rounding. Products of fp16 or bf16 values are exact in fp32 (22 and 16 bits).
//   fp16 / bf16 outputs: one more rounding of the fp32 value y^ at the store, half an ulp of the out
//   dtype at |y^| <= |ref| + e32, i.e. 0.5 ulp_out(|ref| + e32) (the larger neighbouring binade
//   when y^ crosses a power of two):   tol = e32 + 0.5 ulp_out(|ref| + e32).
//   Overflow: where |ref| + tol reaches max_finite of the out dtype (fp16: sums of products of
//   large values), the stored value may be Inf: the element is unchecked (tol = +Inf).
// Exact tier: both inputs small integers in [-r, r] and gemm_exact_tier_holds (in = dt, acc = fp32,
// out = dt, k) (every partial sum below 2^p, p = 24 or the output's 11 / 8 bits): the output must
// be bit-identical to the reference (OutputRef.exact).
// Generator: N 1..4, C and K 1..64 (edges around 4 and 8, odd), H, W 1..40, R, S 1..7 (a branch
// with the filter larger than the input and padding), stride 1..3, pad 0..3, dilation 1..3,
// groups 1, 2 or C (depthwise, K = C or 2C), both layouts, three dtypes, value classes normal /
// uniform / same-sign / small-int (both inputs small-int in a quarter of the cases, the exact
// tier) / log-uniform (exponents clamped to [-24, 24] so no fp32 sum overflows). NaN, +Inf, -Inf
// and -0 are injected (15% of the cases: random positions, the first/last element, tile edges)
// into the operand that padding, stride holes and tile tails fill with zeros: X (forward and
// backward-filter) and dY (backward-data). The other operand (W, or dY for backward-filter) stays
// finite: by the definition an out-of-range tap is no term at all, while an implicit GEMM
// multiplies its zero fill by the other operand, so 0 * Inf = NaN would appear where the
// reference has none. The spec declares that operand finite (cuDNN's implicit GEMMs behave the
// same way) rather than pretend the zero fill is exact for it. Non-finite references: IEEE
// propagation over the real taps in any order (Inf + -Inf = NaN, NaN absorbs); since no finite
// partial sum can overflow fp32 here (|terms| < 2^48, k < 2^26) the output must match exactly:
// NaN where the reference is NaN, the same-signed Inf where it is Inf (tol 0 there, so the
// testbed's "may overflow" excuse does not apply). Work is capped at 2^22 multiply-adds per case
// (the fp64 host reference) by halving H, W, then N, C, K. Declared invalid (validate): an empty
// output (P or Q < 1), groups not dividing C and K, more than 2^26 multiply-adds.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "properties/conv_registry.h"
#include "properties/gradcheck_relation.h"
#include "properties/rowwise_common.h"

namespace assay::conv {

using rowwise::param_dtype;
using rowwise::param_int;
using rowwise::str_or;

namespace {

// ---- binding ---------------------------------------------------------------------------------------
std::vector<TensorOpVariant>& reg(ConvPass p) {
  static std::vector<TensorOpVariant> v[3];
  return v[static_cast<int>(p)];
}
std::vector<std::pair<std::string, ConvFn>>& fns(ConvPass p) {
  static std::vector<std::pair<std::string, ConvFn>> v[3];
  return v[static_cast<int>(p)];
}

kernels::conv::Dt to_dt(DType t) {
  return t == DType::kF16    ? kernels::conv::Dt::kF16
         : t == DType::kBF16 ? kernels::conv::Dt::kBF16
                             : kernels::conv::Dt::kF32;
}

}  // namespace

const char* conv_op_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::kBwdData:
      return "conv2d_bwd_data";
    case ConvPass::kBwdFilter:
      return "conv2d_bwd_filter";
    default:
      return "conv2d";
  }
}

ref::Conv2dGeometry conv_geometry(const nlohmann::json& p) {
  ref::Conv2dGeometry g;
  auto i = [&](const char* k) { return p.value(k, int64_t{0}); };
  g.n = i("n"), g.c = i("c"), g.h = i("h"), g.w = i("w"), g.k = i("k"), g.r = i("r"), g.s = i("s");
  g.pad_h = i("pad_h"), g.pad_w = i("pad_w"), g.stride_h = i("stride_h"), g.stride_w = i("stride_w");
  g.dil_h = i("dil_h"), g.dil_w = i("dil_w"), g.groups = i("groups");
  g.layout = p.value("layout", std::string("nchw")) == "nhwc" ? ref::ConvLayout::kNHWC : ref::ConvLayout::kNCHW;
  return g;
}

bool register_conv(ConvPass pass, VariantInfo info, ConvFn fn) {
  fns(pass).emplace_back(info.name, fn);
  reg(pass).push_back({std::move(info), [fn, pass](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                         const ref::Conv2dGeometry g = conv_geometry(c.params);
                         kernels::conv::ConvArgs a;
                         a.g = {g.n,     g.c,     g.h,        g.w,        g.k,     g.r,     g.s,
                                g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w, g.groups};
                         a.layout = g.layout == ref::ConvLayout::kNHWC ? kernels::conv::Layout::kNHWC
                                                                       : kernels::conv::Layout::kNCHW;
                         a.dt = to_dt(t[0].dtype);
                         // Tensor order per pass: fwd X, W, Y; bwd-data dY, W, dX; bwd-filter X, dY, dW.
                         const DevTensor &x = pass == ConvPass::kBwdData ? t[2] : t[0],
                                         &w = pass == ConvPass::kBwdFilter ? t[2] : t[1],
                                         &y = pass == ConvPass::kFwd       ? t[2]
                                              : pass == ConvPass::kBwdData ? t[0]
                                                                           : t[1];
                         a.x = x.ptr, a.ldx = x.v.ld, a.w = w.ptr, a.ldw = w.v.ld, a.y = y.ptr, a.ldy = y.v.ld;
                         return fn(a, s);
                       }});
  return true;
}

const std::vector<TensorOpVariant>& conv_variants(ConvPass pass) {
  return reg(pass);
}

ConvFn find_conv(ConvPass pass, const std::string& name) {
  for (const auto& [n, f] : fns(pass))
    if (n == name) return f;
  return nullptr;
}

namespace {

const char* const kSrc = "kernels/conv/conv.cu";
[[maybe_unused]] const bool kKernels =
    register_conv(ConvPass::kFwd, {"direct", "one thread per output, loops c, r, s", false, true, kSrc},
                  kernels::conv::conv2d_fwd_direct) &&
    register_conv(ConvPass::kFwd,
                  {"implicit_gemm", "32x32 tiles over (N*P*Q) x Kg per group, im2col gathered into shared memory",
                   false, true, kSrc},
                  kernels::conv::conv2d_fwd_igemm) &&
    register_conv(
        ConvPass::kBwdData,
        {"direct", "one thread per dx element, loops Kg, r, s over the taps that meet an output", false, true, kSrc},
        kernels::conv::conv2d_bwd_data_direct) &&
    register_conv(ConvPass::kBwdData,
                  {"implicit_gemm", "32x32 tiles over (N*H*W) x Cg per group, dy gathered per tap", false, true, kSrc},
                  kernels::conv::conv2d_bwd_data_igemm) &&
    register_conv(ConvPass::kBwdFilter,
                  {"direct", "one thread per dw element, loops n, p, q (fixed order)", false, true, kSrc},
                  kernels::conv::conv2d_bwd_filter_direct) &&
    register_conv(ConvPass::kBwdFilter,
                  {"implicit_gemm", "32x32 tiles over Kg x (R*S*Cg) per group, whole N*P*Q reduction per block", false,
                   true, kSrc},
                  kernels::conv::conv2d_bwd_filter_igemm);

constexpr int64_t kGenMaxMacs = int64_t{1} << 22, kMaxMacs = int64_t{1} << 26;
// relation "gradcheck" (the backward passes): generated at most 2^18 multiply-adds, accepted up
// to 2^22 (the finite differences run the fp64 host forward four times, plus its magnitudes).
constexpr int64_t kGenMaxMacsGrad = int64_t{1} << 18, kMaxMacsGrad = int64_t{1} << 22;

int64_t macs(const ref::Conv2dGeometry& g) {
  return g.n * g.k * g.out_h() * g.out_w() * g.fwd_reduction();
}

struct Views {
  int64_t xr, xc, wr, wc, yr, yc;
};
Views views_of(const ref::Conv2dGeometry& g) {
  const bool nchw = g.layout == ref::ConvLayout::kNCHW;
  const int64_t P = g.out_h(), Q = g.out_w();
  return nchw ? Views{g.n * g.c * g.h, g.w, g.k * g.cg() * g.r, g.s, g.n * g.k * P, Q}
              : Views{g.n * g.h * g.w, g.c, g.k * g.r * g.s, g.cg(), g.n * P * Q, g.k};
}

}  // namespace

Case build_conv_case(ConvPass pass, const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad,
                     int64_t off) {
  Case c;
  c.op = conv_op_name(pass);
  c.params = p;
  const DType dt = parse_dtype(p.value("dtype", std::string("fp32"))).value_or(DType::kF32);
  const Views v = views_of(conv_geometry(p));
  const ValueRecipe r0 = r.size() > 0 ? r[0] : ValueRecipe{}, r1 = r.size() > 1 ? r[1] : ValueRecipe{};
  switch (pass) {
    case ConvPass::kFwd:
      c.tensors = {make_tensor("X", Role::kIn, dt, v.xr, v.xc, pad, off, r0),
                   make_tensor("W", Role::kIn, dt, v.wr, v.wc, pad, off, r1),
                   make_tensor("Y", Role::kOut, dt, v.yr, v.yc, pad, off, {})};
      break;
    case ConvPass::kBwdData:
      c.tensors = {make_tensor("dY", Role::kIn, dt, v.yr, v.yc, pad, off, r0),
                   make_tensor("W", Role::kIn, dt, v.wr, v.wc, pad, off, r1),
                   make_tensor("dX", Role::kOut, dt, v.xr, v.xc, pad, off, {})};
      break;
    case ConvPass::kBwdFilter:
      c.tensors = {make_tensor("X", Role::kIn, dt, v.xr, v.xc, pad, off, r0),
                   make_tensor("dY", Role::kIn, dt, v.yr, v.yc, pad, off, r1),
                   make_tensor("dW", Role::kOut, dt, v.wr, v.wc, pad, off, {})};
      break;
  }
  return c;
}

namespace {

// ---- generators ------------------------------------------------------------------------------------
// Group modes: 0 plain (groups 1), 1 two groups (C, K even), 2 depthwise (groups = C, K = C or 2C).
struct Shape {
  int64_t n, cb, kb, h, w, r, s, ph, pw, sh, sw, dh, dw;
  int mode, mult;
};

nlohmann::json params_of(const Shape& x) {
  const int64_t c = x.mode == 1 ? 2 * x.cb : x.cb;
  const int64_t k = x.mode == 1 ? 2 * x.kb : x.mode == 2 ? x.cb * x.mult : x.kb;
  const int64_t groups = x.mode == 0 ? 1 : x.mode == 1 ? 2 : x.cb;
  return {{"n", x.n},         {"c", c},        {"h", x.h},      {"w", x.w},        {"k", k},
          {"r", x.r},         {"s", x.s},      {"pad_h", x.ph}, {"pad_w", x.pw},   {"stride_h", x.sh},
          {"stride_w", x.sw}, {"dil_h", x.dh}, {"dil_w", x.dw}, {"groups", groups}};
}

// Makes the output at least 1 x 1 (less dilation, then more padding, then a smaller filter) and
// the work at most kGenMaxMacs (halving H and W, then N, then the channels).
void repair(Shape& x, int64_t cap = kGenMaxMacs) {
  auto fit = [](int64_t in, int64_t& f, int64_t& pad, int64_t& dil) {
    while (in + 2 * pad - dil * (f - 1) - 1 < 0) {
      if (dil > 1)
        --dil;
      else if (pad < 3)
        ++pad;
      else
        --f;
    }
  };
  for (;;) {
    fit(x.h, x.r, x.ph, x.dh);
    fit(x.w, x.s, x.pw, x.dw);
    nlohmann::json p = params_of(x);
    p["layout"] = "nchw";
    if (macs(conv_geometry(p)) <= cap) return;
    if (x.h > 1 || x.w > 1)
      x.h = (x.h + 1) / 2, x.w = (x.w + 1) / 2;
    else if (x.n > 1)
      --x.n;
    else if (x.cb > 1 || x.kb > 1)
      x.cb = (x.cb + 1) / 2, x.kb = (x.kb + 1) / 2;
    else
      return;
  }
}

/// `specials`: NaN/Inf/-0 injection allowed (the zero-filled operand only, see the header).
rc::Gen<ValueRecipe> gen_recipe(DType dt, bool small_int, bool specials) {
  RecipeOptions o;
  o.classes = small_int ? std::vector<ValueClass>{ValueClass::kSmallInt}
                        : std::vector<ValueClass>{ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                                  ValueClass::kSmallInt, ValueClass::kLogUniform};
  o.dtype = dt;
  o.specials = specials && !small_int ? kSpecialAll : 0;
  o.tile = o.specials != 0 ? 32 : 0;
  o.inject_percent = o.specials != 0 ? 15 : 0;
  return rc::gen::map(gen_value_recipe(o), [](ValueRecipe r) {
    r.exp_min = std::max<int64_t>(r.exp_min, -24);
    r.exp_max = std::min<int64_t>(r.exp_max, 24);
    if (r.exp_max < r.exp_min) r.exp_max = r.exp_min;
    return r;
  });
}

rc::Gen<Case> gen_case(ConvPass pass) {
  return rc::gen::exec([pass] {
    Shape x{};
    x.mode = static_cast<int>(*gen_weighted_index({3, 1, 2}));
    x.mult = *gen_weighted_index({3, 1}) == 0 ? 1 : 2;
    x.n = *rc::gen::inRange<int64_t>(1, 5);
    const int64_t chan_cap = x.mode == 1 ? 32 : x.mode == 2 && x.mult == 2 ? 32 : 64;
    x.cb = *gen_extent(chan_cap, {4, 8}, 1);
    x.kb = *gen_extent(chan_cap, {4, 8}, 1);
    x.h = *gen_extent(40, {}, 1);
    x.w = *gen_extent(40, {}, 1);
    x.r = *rc::gen::inRange<int64_t>(1, 8);
    x.s = *rc::gen::inRange<int64_t>(1, 8);
    x.ph = *rc::gen::inRange<int64_t>(0, 4);
    x.pw = *rc::gen::inRange<int64_t>(0, 4);
    x.sh = *rc::gen::inRange<int64_t>(1, 4);
    x.sw = *rc::gen::inRange<int64_t>(1, 4);
    x.dh = 1 + static_cast<int64_t>(*gen_weighted_index({3, 1, 1}));
    x.dw = 1 + static_cast<int64_t>(*gen_weighted_index({3, 1, 1}));
    if (*gen_weighted_index({5, 1}) == 1) {  // the filter larger than the input, padding making room
      x.h = *rc::gen::inRange<int64_t>(1, 4), x.w = *rc::gen::inRange<int64_t>(1, 4);
      x.r = *rc::gen::inRange<int64_t>(x.h + 1, 8), x.s = *rc::gen::inRange<int64_t>(x.w + 1, 8);
      x.ph = x.pw = 3, x.dh = x.dw = 1;
    }
    repair(x);
    nlohmann::json p = params_of(x);
    const DType dt = *gen_element(rowwise::activation_dtypes());
    p["dtype"] = std::string(dtype_name(dt));
    p["layout"] = *gen_element<std::string>({"nchw", "nhwc"});
    const bool exact = *gen_weighted_index({3, 1}) == 1;
    ValueRecipe r0 = *gen_recipe(dt, exact, true), r1 = *gen_recipe(dt, exact, false);
    const int64_t pad = *gen_element<int64_t>({0, 0, 0, 1, 3, 8});
    const int64_t off = *gen_element<int64_t>({0, 0, 0, 1, 2});
    // A quarter of the backward cases: the finite-difference projection check, on small problems.
    if (pass != ConvPass::kFwd && *gen_weighted_index({3, 1}) == 1) {
      repair(x, kGenMaxMacsGrad);
      nlohmann::json q = params_of(x);
      q["dtype"] = p["dtype"];
      q["layout"] = p["layout"];
      q["relation"] = kGradcheckRelation;
      p = q;
      r0.inject = SpecialInjection{};  // the projection skips non-finite inputs: keep its cases finite

    }
    return build_conv_case(pass, p, {r0, r1}, pad, off);
  });
}

Status validate(ConvPass pass, const Case& c) {
  ASSAY_ASSIGN_OR_RETURN(DType dt, param_dtype(c));
  const std::string layout = str_or(c, "layout", "");
  if (layout != "nchw" && layout != "nhwc")
    return invalid_argument(c.op + " case: params.layout must be \"nchw\" or \"nhwc\"");
  for (const char* k : {"n", "c", "h", "w", "k", "r", "s"}) ASSAY_RETURN_IF_ERROR(param_int(c, k, 1, 4096).status());
  for (const char* k : {"pad_h", "pad_w"}) ASSAY_RETURN_IF_ERROR(param_int(c, k, 0, 64).status());
  for (const char* k : {"stride_h", "stride_w", "dil_h", "dil_w"})
    ASSAY_RETURN_IF_ERROR(param_int(c, k, 1, 64).status());
  ASSAY_RETURN_IF_ERROR(param_int(c, "groups", 1, 4096).status());
  const ref::Conv2dGeometry g = conv_geometry(c.params);
  if (g.c % g.groups != 0 || g.k % g.groups != 0)
    return invalid_argument(
        fmt::format("{} case: params.groups = {} must divide c = {} and k = {}", c.op, g.groups, g.c, g.k));
  if (g.out_h() < 1 || g.out_w() < 1)
    return invalid_argument(
        fmt::format("{} case: the output is empty (P = {}, Q = {}): h + 2 pad_h must reach "
                    "dil_h (r - 1) + 1 and likewise in w",
                    c.op, g.out_h(), g.out_w()));
  if (macs(g) > kMaxMacs)
    return invalid_argument(fmt::format("{} case: {} multiply-adds, above the limit of {}", c.op, macs(g), kMaxMacs));
  if (c.params.contains("relation")) {
    if (pass == ConvPass::kFwd || !wants_gradcheck(c))
      return invalid_argument(c.op + " case: params.relation: " +
                              (pass == ConvPass::kFwd ? std::string("conv2d has none")
                                                      : std::string("only \"gradcheck\"")));
    if (macs(g) > kMaxMacsGrad)
      return invalid_argument(fmt::format("{} case: params.relation \"gradcheck\" needs at most {} multiply-adds, "
                                          "not {}",
                                          c.op, kMaxMacsGrad, macs(g)));
  }
  const std::vector<std::pair<std::string, Role>> layout_fwd = {{"X", Role::kIn}, {"W", Role::kIn}, {"Y", Role::kOut}},
                                                  layout_bd = {{"dY", Role::kIn}, {"W", Role::kIn}, {"dX", Role::kOut}},
                                                  layout_bf = {{"X", Role::kIn}, {"dY", Role::kIn}, {"dW", Role::kOut}};
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, pass == ConvPass::kFwd       ? layout_fwd
                                                  : pass == ConvPass::kBwdData ? layout_bd
                                                                               : layout_bf));
  const Case want = build_conv_case(pass, c.params, {}, 0, 0);
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const auto& d = c.tensors[i].desc;
    const auto& e = want.tensors[i].desc;
    if (d.dtype != dt || d.shape != e.shape)
      return invalid_argument(fmt::format("{} case: tensor {} must be {} [{}, {}]", c.op, c.tensors[i].name,
                                          dtype_name(dt), e.shape[0], e.shape[1]));
  }
  return ok_status();
}

}  // namespace

// ---- references and bound ------------------------------------------------------------------------------
OutputRef conv_reference(ConvPass pass, const ref::Conv2dGeometry& g, DType dt, const double* in0, const double* in1,
                         int64_t int_range) {
  OutputRef out;
  const int64_t n = pass == ConvPass::kFwd ? g.y_elems() : pass == ConvPass::kBwdData ? g.x_elems() : g.w_elems();
  const int64_t k = pass == ConvPass::kFwd       ? g.fwd_reduction()
                    : pass == ConvPass::kBwdData ? g.bwd_data_reduction()
                                                 : g.bwd_filter_reduction();
  out.ref.resize(static_cast<size_t>(n));
  out.tol.resize(out.ref.size());
  std::vector<double> mag(out.ref.size());
  constexpr int kThreads = 2;
  if (pass == ConvPass::kFwd)
    ref::conv2d_forward<double>(g, in0, in1, out.ref.data(), mag.data(), kThreads);
  else if (pass == ConvPass::kBwdData)
    ref::conv2d_backward_data<double>(g, in0, in1, out.ref.data(), mag.data(), kThreads);
  else
    ref::conv2d_backward_filter<double>(g, in0, in1, out.ref.data(), mag.data(), kThreads);
  GemmBoundModel m;
  m.in = dt;
  m.acc = DType::kF32;
  m.out = DType::kF32;  // the store's rounding is added below, at |ref| + e32
  m.k = k;
  const ElementBound b = gemm_ceiling(m);
  const double top = max_finite(dt);
  for (size_t i = 0; i < out.ref.size(); ++i) {
    const double a = std::fabs(out.ref[i]);
    const double e32 = b.tol(a, mag[i]);
    const double tol = e32 + rowwise::store_rounding(a + e32, dt);
    out.tol[i] = !std::isfinite(out.ref[i]) ? 0.0 : a + tol >= top ? INFINITY : tol;
  }
  if (int_range >= 0) {
    GemmBoundModel e = m;
    e.out = dt;
    out.exact = gemm_exact_tier_holds(e, int_range, 0, 0);
  }
  return out;
}

namespace {

Status reference(ConvPass pass, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const ref::Conv2dGeometry g = conv_geometry(c.params);
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  auto pack = [](const HostTensor& h) {
    std::vector<double> v(static_cast<size_t>(h.v.rows * h.v.cols));
    for (int64_t i = 0; i < h.v.rows; ++i)
      for (int64_t j = 0; j < h.v.cols; ++j) v[static_cast<size_t>(i * h.v.cols + j)] = h.at(i, j);
    return v;
  };
  const std::vector<double> a = pack(t[0]), b = pack(t[1]);
  int64_t int_range = -1;
  if (c.tensors[0].values.cls == ValueClass::kSmallInt && c.tensors[1].values.cls == ValueClass::kSmallInt &&
      !c.tensors[0].values.inject.active() && !c.tensors[1].values.inject.active())
    int_range = std::max(c.tensors[0].values.int_range, c.tensors[1].values.int_range);
  out = {conv_reference(pass, g, dt, a.data(), b.data(), int_range)};
  return ok_status();
}

/// relation "gradcheck" of the backward passes: <dY, J u> by central differences of the fp64
/// forward y = conv(x, w) in the differentiated operand (bwd-data: x, with w the case's W;
/// bwd-filter: w, with x the case's X) against sum u . (dX or dW) of the kernel
/// (properties/gradcheck_relation.h). The forward is linear in that operand, so J does not
/// depend on the point: the differences are taken at zero (exact steps, the forward's rounding
/// only), i.e. the adjoint identity <dY, conv(u)> = <conv^T(dY), u>.
void properties_bwd(ConvPass pass, const Case& c, const std::vector<HostTensor>& in,
                    const std::vector<HostTensor>& out, const std::vector<OutputRef>& refs,
                    std::vector<Failure>& failures) {
  if (!wants_gradcheck(c) || pass == ConvPass::kFwd || in.size() < 2 || out.size() != 1 || refs.size() != 1) return;
  const ref::Conv2dGeometry g = conv_geometry(c.params);
  const bool data = pass == ConvPass::kBwdData;
  const View2D gv = out[0].v;
  auto zero = std::make_shared<std::vector<double>>(static_cast<size_t>(gv.rows * gv.cols), 0.0);
  auto fixed = std::make_shared<std::vector<double>>(pack_dense(data ? in[1] : in[0]));  // w or x
  GradProblem p;
  GradOperand op;
  op.name = data ? "dX" : "dW";
  op.x = {zero->data(), {gv.rows, gv.cols, gv.cols}};
  op.grad = out[0];
  op.ref = &refs[0];
  p.operands.push_back(std::move(op));
  p.upstream = pack_dense(data ? in[0] : in[1]);
  auto run = [g, data, fixed](const double* v, double* y, double* mag) {
    if (data)
      ref::conv2d_forward<double>(g, v, fixed->data(), y, mag);
    else
      ref::conv2d_forward<double>(g, fixed->data(), v, y, mag);
  };
  const int64_t m = g.y_elems();
  p.forward = [run](const double* v, double* y) { run(v, y, nullptr); };
  p.magnitude = [run, m](const double* v, double* mag) {
    std::vector<double> y(static_cast<size_t>(m));
    run(v, y.data(), mag);
  };
  p.seed = gradcheck_seed(c);
  p.label = "<dY, J u>";
  check_grad_projection(p, failures);
}

rowwise::RowOpConfig config(ConvPass pass) {
  rowwise::RowOpConfig cfg;
  cfg.name = conv_op_name(pass);
  cfg.description = pass == ConvPass::kFwd       ? "2-D convolution forward y = conv(x, w), NCHW/NHWC, groups, fp32 acc"
                    : pass == ConvPass::kBwdData ? "2-D convolution backward-data dx = conv^T(dy, w)"
                                                 : "2-D convolution backward-filter dw = sum_{n,p,q} dy x";
  cfg.def.op = cfg.name;
  cfg.def.bound_name = "conv dot-product ceiling";
  cfg.def.reference = [pass](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return reference(pass, c, t, out);
  };
  if (pass != ConvPass::kFwd)
    cfg.def.properties = [pass](const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                                const std::vector<OutputRef>& refs, std::vector<Failure>& failures) {
      properties_bwd(pass, c, in, out, refs, failures);
    };
  cfg.registry = &reg(pass);
  cfg.gen = [pass](const GenConfig&) { return gen_case(pass); };
  cfg.build = [pass](const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
    return build_conv_case(pass, p, r, pad, off);
  };
  cfg.validate = [pass](const Case& c) { return validate(pass, c); };
  cfg.shrink_keys = {{"n", 1},        {"groups", 1},   {"c", 1},     {"k", 1},     {"h", 1},
                     {"w", 1},        {"r", 1},        {"s", 1},     {"pad_h", 0}, {"pad_w", 0},
                     {"stride_h", 1}, {"stride_w", 1}, {"dil_h", 1}, {"dil_w", 1}};
  cfg.self_check_note =
      "host reference checked in tests/references/conv_ref_test.cpp; bound vs a float host conv "
      "in tests/properties/conv_gen_test.cpp";
  return cfg;
}

[[maybe_unused]] const bool kSpecs = register_spec(std::make_unique<rowwise::RowOpSpec>(config(ConvPass::kFwd))) &&
                                     register_spec(std::make_unique<rowwise::RowOpSpec>(config(ConvPass::kBwdData))) &&
                                     register_spec(std::make_unique<rowwise::RowOpSpec>(config(ConvPass::kBwdFilter)));

}  // namespace

const TensorOpDef& conv_def(ConvPass pass) {
  static const rowwise::RowOpConfig cfgs[3] = {config(ConvPass::kFwd), config(ConvPass::kBwdData),
                                               config(ConvPass::kBwdFilter)};
  return cfgs[static_cast<int>(pass)].def;
}

}  // namespace assay::conv
