// conv2d / conv2d_bwd_data / conv2d_bwd_filter: 2-D convolution (cross-correlation) with
// stride, zero padding, dilation and groups (depthwise included), NCHW or NHWC, fp32 / fp16 /
// bf16 storage with fp32 accumulation.
//
// Sections: declaration (params, tensors), references, bound, properties, self-check, vendor, binding.
// Vendor column: cuDNN's convolution of the same pass (references/library/cudnn.h: FMA math, the
// deterministic dot-product algorithms, so its outputs fall under the same dot-product bound),
// tensors with padded rows packed into staging buffers first and the output copied back into
// its view; a geometry no such algorithm takes says "not run" with cuDNN's reason.
// Binding: kernels/conv/conv.cu, variants "direct" (one thread per output) and "implicit_gemm"
// (32 x 32 shared-memory tiles, im2col on the fly) per op, both with an empty contract (any
// valid geometry, any row strides); the planted bugs of tests/mutants/conv bind through the
// same conv_launch (properties/conv.h).
// Tensors, rank 4 in the layout's order (their rows x cols views are the kernels' 2-D views,
// kernels/conv/conv.h):
//   NCHW: X [n, c, h, w], W (KCRS) [k, cg, r, s], Y [n, k, p, q];
//   NHWC: X [n, h, w, c], W (KRSC) [k, r, s, cg], Y [n, p, q, k];
//   c = groups cg, k = groups kg, p and q the output extents (computed from the params);
//   conv2d: X, W in, Y out; conv2d_bwd_data: dY, W in, dX out; conv2d_bwd_filter: X, dY in, dW out.
// Every tensor draws its own padded row stride and offset; the kernels honour each stride and
// must leave the gaps alone (the engine's gap check).
// Reference: references/host/conv.h in double on the kernel's own (rounded) inputs, with
// mag = sum |a||b| over the terms of each output (aux[0]).
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
//   The bound reads nothing from the variant's declared arithmetic: fmaf is exact-rounded under
//   fast-math too, and the floor already covers flushed subnormals.
// Exact tier: both inputs small integers in [-r, r] and gemm_exact_tier_holds (in = dt, acc = fp32,
// out = dt, k) (every partial sum below 2^p, p = 24 or the output's 11 / 8 bits): the output must
// be bit-identical to the reference (OutputRef.exact).
// Generation (derived from the declarations below): n 1..4; groups 1 (half the draws), 2, or up to
// 32; channels per group cg and kg edge-biased in 1..64 (edges around 4 and 8, odd ones; cg = 1,
// depthwise when groups > 1, in about a third of the draws); h, w edge-biased in 1..40; pad 0..3,
// dilation 1..3 (1 in 3 of 5 draws), r, s 1..7 (capped so that the output is at least 1 x 1: a small
// input with padding gives the filter-larger-than-the-input cases), stride 1..3; both layouts,
// three dtypes; value classes normal / uniform / same-sign / small-int (both inputs small-int: the
// exact tier) / log-uniform, every class's parameters keeping |x| below 2^24 (log-uniform
// exponents in [-24, 24]) so that no fp32 sum overflows. NaN, +Inf, -Inf and -0 are injected (15%
// of the recipes: random positions, the first/last element, tile edges) into the operand that
// padding, stride holes and tile tails fill with zeros: X (forward and backward-filter) and dY
// (backward-data). The other operand (W, or dY for backward-filter) stays finite: by the definition
// an out-of-range tap is no term at all, while an implicit GEMM multiplies its zero fill by the
// other operand, so 0 * Inf = NaN would appear where the reference has none. The spec declares
// that operand finite (cuDNN's implicit GEMMs behave the same way) rather than pretend the zero
// fill is exact for it. Non-finite references: IEEE propagation over the real taps in any order
// (Inf + -Inf = NaN, NaN absorbs); since no finite partial sum can overflow fp32 here (|terms| <
// 2^48, k < 2^26) the output must match exactly: NaN where the reference is NaN, the same-signed
// Inf where it is Inf (tol 0 there, so the engine's "may overflow" excuse does not apply).
// Device reference (every pass): cases of every dtype from 2048 multiply-adds up, with at most
// 2^14 terms per output element, are drawn on the device (fp16 / bf16 rounded as the host rounds
// them) and checked against references/device/conv_f64.cu, which runs the host reference's
// element function (references/host/conv.h) on the inputs widened exactly and this bound's
// element tolerance (harness/bound_core.h dot_element_tol, the store rounding of an fp16 / bf16
// output from harness/ulp_core.h) per output element: the same values as the host path. A gradcheck case
// of a backward pass also gets the forward along the relation's sign direction there, beside
// the reference, so that its properties run no host forward.
// Work is capped at 2^22 multiply-adds per case (the fp64 host reference), 2^18 with the
// gradcheck relation: the params are drawn channels first, and the later ones (h, w, pad, r, s)
// are capped so that the multiply-adds with the rest at their smallest stay inside the budget.
// The caps are also the validation limits; groups divide c and k by construction (cg, kg).
#include "properties/conv.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/generators.h"
#include "harness/scratch.h"
#include "properties/gradcheck_relation.h"
#include "properties/rowwise_values.h"
#include "properties/vendor_columns.h"
#include "references/device/conv_f64.h"

namespace assay::conv {

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

ref::Conv2dGeometry conv_geometry(const Params& p) {
  ref::Conv2dGeometry g;
  g.groups = p.i("groups", 1);
  g.n = p.i("n", 1), g.c = g.groups * p.i("cg", 1), g.k = g.groups * p.i("kg", 1);
  g.h = p.i("h", 1), g.w = p.i("w", 1), g.r = p.i("r", 1), g.s = p.i("s", 1);
  g.pad_h = p.i("pad_h", 0), g.pad_w = p.i("pad_w", 0), g.stride_h = p.i("stride_h", 1), g.stride_w = p.i("stride_w", 1);
  g.dil_h = p.i("dil_h", 1), g.dil_w = p.i("dil_w", 1);
  g.layout = p.s("layout", "nchw") == "nhwc" ? ref::ConvLayout::kNHWC : ref::ConvLayout::kNCHW;
  return g;
}

namespace {

constexpr int64_t kMaxExtent = 4096, kMaxPad = 64, kMaxStep = 64;
constexpr int64_t kMaxMacs = int64_t{1} << 22;
// relation "gradcheck" (the backward passes): the fp64 forward runs once more, with its
// magnitudes, beside the reference (on the host below the device threshold).
constexpr int64_t kMaxMacsGrad = int64_t{1} << 18;

int64_t budget(const Params& p) {
  return p.s("relation") == kGradcheckRelation ? kMaxMacsGrad : kMaxMacs;
}

int64_t macs(const ref::Conv2dGeometry& g) {
  return g.n * g.k * g.out_h() * g.out_w() * g.fwd_reduction();
}

// ---- declaration ---------------------------------------------------------------------------------
/// The values and weights with which harness/generators gen_extent(max, tiles, 1) draws: 60% the
/// edge extents, 30% uniform over the first 65, 10% uniform over [1, max].
ParamDef& like_extent(ParamDef& d, int64_t max, std::vector<int64_t> tiles, size_t boost_one = 0) {
  const std::vector<int64_t> edges = edge_extents(max, tiles, 1);
  const int64_t small_hi = std::min<int64_t>(max, 65);
  std::vector<int64_t> v;
  std::vector<size_t> w;
  for (int64_t x = 1; x <= max; ++x) {
    const bool edge = std::binary_search(edges.begin(), edges.end(), x);
    const double p = (edge ? 0.6 / static_cast<double>(edges.size()) : 0.0) +
                     (x <= small_hi ? 0.3 / static_cast<double>(small_hi) : 0.0) + 0.1 / static_cast<double>(max);
    v.push_back(x);
    w.push_back(static_cast<size_t>(std::llround(p * 1e6)) + (x == 1 ? boost_one : 0));
  }
  d.among(v).weigh(w);
  return d;
}

/// The product of the params drawn before `upto` (in declaration order) as the budget sees it:
/// n c kg (r Ph) (s Qw) with the undrawn ones at their smallest (h = w = r = s = 1, no padding,
/// stride 1: the output extents Ph = h + 2 pad_h - dil_h (r - 1) are their stride-1 values).
int64_t work_so_far(const Params& p, const std::string& upto) {
  static const std::vector<std::string> order = {"n",     "groups", "cg",    "kg",    "h", "w",
                                                 "pad_h", "pad_w",  "dil_h", "dil_w", "r", "s"};
  auto drawn = [&](const std::string& k) {
    for (const auto& o : order) {
      if (o == upto) return false;
      if (o == k) return true;
    }
    return false;
  };
  auto i = [&](const std::string& k, int64_t dflt) { return drawn(k) ? p.i(k, dflt) : dflt; };
  const int64_t ph = i("h", 1) + 2 * i("pad_h", 0) - i("dil_h", 1) * (i("r", 1) - 1);
  const int64_t qw = i("w", 1) + 2 * i("pad_w", 0) - i("dil_w", 1) * (i("s", 1) - 1);
  return i("n", 1) * i("groups", 1) * i("cg", 1) * i("kg", 1) * i("r", 1) * std::max<int64_t>(ph, 1) * i("s", 1) *
         std::max<int64_t>(qw, 1);
}

/// Cap of a param that multiplies the work: the largest value keeping it inside the budget.
std::function<int64_t(const Params&)> work_cap(std::string name, int64_t hi) {
  return [name, hi](const Params& p) {
    const int64_t rest = std::max<int64_t>(work_so_far(p, name), 1);
    return std::max<int64_t>(1, std::min(hi, budget(p) / rest));
  };
}

/// Cap of a filter extent: the output stays at least one element wide and the work inside the
/// budget for every smaller value too (the work is not monotone in the filter extent).
std::function<int64_t(const Params&)> filter_cap(bool rows) {
  return [rows](const Params& p) {
    const std::string name = rows ? "r" : "s";
    const int64_t rest = std::max<int64_t>(work_so_far(p, name), 1);  // includes the other extent at its value
    const int64_t in = rows ? p.i("h", 1) : p.i("w", 1), pad = rows ? p.i("pad_h", 0) : p.i("pad_w", 0),
                  dil = rows ? p.i("dil_h", 1) : p.i("dil_w", 1);
    const int64_t base = std::max<int64_t>(in + 2 * pad, 1);  // the stride-1 output extent at f = 1
    int64_t f = 1;
    while (f < kMaxExtent) {
      const int64_t out = in + 2 * pad - dil * f;  // the stride-1 output extent at f + 1
      if (out < 1) break;
      if (rest / base * (f + 1) * out > budget(p)) break;
      ++f;
    }
    return f;
  };
}

std::vector<ParamDef> params(ConvPass pass) {
  std::vector<ParamDef> p;
  p.push_back(ParamDef::dtype("dtype", rowwise::activation_dtypes()));
  p.push_back(ParamDef::choice("layout", {"nchw", "nhwc"}));
  if (pass != ConvPass::kFwd)
    p.push_back(ParamDef::choice("relation", {kGradcheckRelation})
                    .optional(3)
                    .describe("the finite-difference projection check (a quarter of the cases)"));
  p.push_back(ParamDef::integer("n", 1, kMaxExtent).among({1, 2, 3, 4}).cap(work_cap("n", kMaxExtent)));
  p.push_back(ParamDef::integer("groups", 1, kMaxExtent)
                  .among({1, 2, 3, 4, 8, 16, 32})
                  .weigh({8, 3, 1, 1, 1, 1, 1})
                  .cap(work_cap("groups", kMaxExtent))
                  .describe("c = groups cg, k = groups kg; cg = 1 is depthwise"));
  ParamDef cg = ParamDef::integer("cg", 1, kMaxExtent);
  like_extent(cg, 64, {4, 8}, 500000).cap([](const Params& q) {
    return std::min(work_cap("cg", kMaxExtent)(q), kMaxExtent / q.i("groups", 1));
  });
  p.push_back(cg.describe("input channels per group"));
  ParamDef kg = ParamDef::integer("kg", 1, kMaxExtent);
  like_extent(kg, 64, {4, 8}).cap([](const Params& q) {
    return std::min(work_cap("kg", kMaxExtent)(q), kMaxExtent / q.i("groups", 1));
  });
  p.push_back(kg.describe("output channels (filters) per group"));
  for (const char* e : {"h", "w"}) {
    ParamDef d = ParamDef::integer(e, 1, kMaxExtent);
    like_extent(d, 40, {}).cap(work_cap(e, kMaxExtent));
    p.push_back(d);
  }
  p.push_back(ParamDef::integer("pad_h", 0, kMaxPad).among({0, 1, 2, 3}).cap([](const Params& q) {
    const int64_t rest = std::max<int64_t>(work_so_far(q, "pad_h") / q.i("h", 1), 1);  // without the h factor
    return std::clamp<int64_t>((budget(q) / rest - q.i("h", 1)) / 2, 0, kMaxPad);
  }));
  p.push_back(ParamDef::integer("pad_w", 0, kMaxPad).among({0, 1, 2, 3}).cap([](const Params& q) {
    const int64_t rest = std::max<int64_t>(work_so_far(q, "pad_w") / q.i("w", 1), 1);  // without the w factor
    return std::clamp<int64_t>((budget(q) / rest - q.i("w", 1)) / 2, 0, kMaxPad);
  }));
  p.push_back(ParamDef::integer("dil_h", 1, kMaxStep).among({1, 2, 3}).weigh({3, 1, 1}));
  p.push_back(ParamDef::integer("dil_w", 1, kMaxStep).among({1, 2, 3}).weigh({3, 1, 1}));
  p.push_back(ParamDef::integer("r", 1, kMaxExtent).among({1, 2, 3, 4, 5, 6, 7}).cap(filter_cap(true)));
  p.push_back(ParamDef::integer("s", 1, kMaxExtent).among({1, 2, 3, 4, 5, 6, 7}).cap(filter_cap(false)));
  p.push_back(ParamDef::integer("stride_h", 1, kMaxStep).among({1, 2, 3}));
  p.push_back(ParamDef::integer("stride_w", 1, kMaxStep).among({1, 2, 3}));
  return p;
}

std::vector<int64_t> x_shape(const Params& p) {
  const ref::Conv2dGeometry g = conv_geometry(p);
  return g.layout == ref::ConvLayout::kNCHW ? std::vector<int64_t>{g.n, g.c, g.h, g.w}
                                             : std::vector<int64_t>{g.n, g.h, g.w, g.c};
}
std::vector<int64_t> w_shape(const Params& p) {
  const ref::Conv2dGeometry g = conv_geometry(p);
  return g.layout == ref::ConvLayout::kNCHW ? std::vector<int64_t>{g.k, g.cg(), g.r, g.s}
                                             : std::vector<int64_t>{g.k, g.r, g.s, g.cg()};
}
std::vector<int64_t> y_shape(const Params& p) {
  const ref::Conv2dGeometry g = conv_geometry(p);
  const int64_t P = std::max<int64_t>(g.out_h(), 0), Q = std::max<int64_t>(g.out_w(), 0);
  return g.layout == ref::ConvLayout::kNCHW ? std::vector<int64_t>{g.n, g.k, P, Q}
                                             : std::vector<int64_t>{g.n, P, Q, g.k};
}

/// The value classes of both operands, their parameters keeping |x| < 2^24 (see the header).
ValueSpec operand(bool specials) {
  ValueSpec v;
  v.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign, ValueClass::kSmallInt,
               ValueClass::kLogUniform};
  v.max_abs = 0x1p24;
  v.specials = specials ? kSpecialAll : 0;
  v.inject_percent = 15;
  return v;
}

std::vector<TensorDef> tensors(ConvPass pass) {
  TensorDef x{.name = "X", .values = operand(true)}, w{.name = "W", .values = operand(false)},
      y{.name = "Y", .role = Role::kOut};
  x.shape = x_shape, w.shape = w_shape, y.shape = y_shape;
  switch (pass) {
    case ConvPass::kFwd:
      return {x, w, y};
    case ConvPass::kBwdData: {
      TensorDef dy = y, dx = x;
      dy.name = "dY", dy.role = Role::kIn, dy.values = operand(true);
      dx.name = "dX", dx.role = Role::kOut, dx.values = {};
      return {dy, w, dx};
    }
    case ConvPass::kBwdFilter: {
      TensorDef dy = y, dw = w;
      dy.name = "dY", dy.role = Role::kIn, dy.values = operand(false);
      dw.name = "dW", dw.role = Role::kOut, dw.values = {};
      return {x, dy, dw};
    }
  }
  return {};
}

Status check(const std::string& op, const Params& p) {
  const ref::Conv2dGeometry g = conv_geometry(p);
  if (g.out_h() < 1 || g.out_w() < 1)
    return invalid_argument(fmt::format("{} case: the output is empty (P = {}, Q = {}): h + 2 pad_h must reach "
                                        "dil_h (r - 1) + 1 and likewise in w",
                                        op, g.out_h(), g.out_w()));
  if (macs(g) > budget(p))
    return invalid_argument(fmt::format("{} case: {} multiply-adds, above the limit of {}{}", op, macs(g), budget(p),
                                        budget(p) == kMaxMacsGrad ? " (relation \"gradcheck\")" : ""));
  return ok_status();
}

// ---- references and bound ---------------------------------------------------------------------------
int64_t reduction(ConvPass pass, const ref::Conv2dGeometry& g) {
  return pass == ConvPass::kFwd       ? g.fwd_reduction()
         : pass == ConvPass::kBwdData ? g.bwd_data_reduction()
                                      : g.bwd_filter_reduction();
}

/// ref and aux[0] = mag of every output element.
OutputRef conv_ref(ConvPass pass, const ref::Conv2dGeometry& g, const double* in0, const double* in1) {
  OutputRef out;
  const int64_t n = pass == ConvPass::kFwd ? g.y_elems() : pass == ConvPass::kBwdData ? g.x_elems() : g.w_elems();
  out.ref.resize(static_cast<size_t>(n));
  out.aux.assign(1, std::vector<double>(out.ref.size()));
  constexpr int kThreads = 2;
  if (pass == ConvPass::kFwd)
    ref::conv2d_forward<double>(g, in0, in1, out.ref.data(), out.aux[0].data(), kThreads);
  else if (pass == ConvPass::kBwdData)
    ref::conv2d_backward_data<double>(g, in0, in1, out.ref.data(), out.aux[0].data(), kThreads);
  else
    ref::conv2d_backward_filter<double>(g, in0, in1, out.ref.data(), out.aux[0].data(), kThreads);
  return out;
}

/// The ceiling of the fp32 accumulation, before the store's rounding (the header's bound).
ElementBound conv_ceiling(ConvPass pass, const ref::Conv2dGeometry& g, DType dt) {
  GemmBoundModel m;
  m.in = dt;
  m.acc = DType::kF32;
  m.out = DType::kF32;  // the store's rounding is added per element, at |ref| + e32
  m.k = reduction(pass, g);
  return gemm_ceiling(m);
}

/// The exact tier: integer inputs in [-int_range, int_range] (int_range < 0: not integers).
bool conv_exact(ConvPass pass, const ref::Conv2dGeometry& g, DType dt, int64_t int_range) {
  if (int_range < 0) return false;
  GemmBoundModel e;
  e.in = dt;
  e.acc = DType::kF32;
  e.out = dt;
  e.k = reduction(pass, g);
  return gemm_exact_tier_holds(e, int_range, 0, 0);
}

/// tol (and exact) from ref and aux[0] (the header's bound); the element tolerance is
/// dot_element_tol, which the device reference (references/device/conv_f64.cu) runs too.
void conv_tol(ConvPass pass, const ref::Conv2dGeometry& g, DType dt, int64_t int_range, OutputRef& out) {
  const ElementBound b = conv_ceiling(pass, g, dt);
  const double top = max_finite(dt);
  const StoreRounding store = store_rounding_for(dt);  // the device reference's too
  out.tol.resize(out.ref.size());
  for (size_t i = 0; i < out.ref.size(); ++i) out.tol[i] = dot_element_tol(b, out.ref[i], out.aux[0][i], top, store);
  out.exact = conv_exact(pass, g, dt, int_range);
}

Status reference(ConvPass pass, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const ref::Conv2dGeometry g = conv_geometry(Params(c.params));
  const std::vector<double> a = pack_dense(t[0]), b = pack_dense(t[1]);
  out = {conv_ref(pass, g, a.data(), b.data())};
  return ok_status();
}

/// The exact tier's integer range of a case: both inputs small integers, nothing injected; else -1.
int64_t int_range_of(const Case& c) {
  const auto &r0 = c.tensors[0].values, &r1 = c.tensors[1].values;
  if (r0.cls == ValueClass::kSmallInt && r1.cls == ValueClass::kSmallInt && !r0.inject.active() && !r1.inject.active())
    return std::max(r0.int_range, r1.int_range);
  return -1;
}

Status bound(ConvPass pass, const Case& c, const Arithmetic&, const std::vector<HostTensor>&,
             std::vector<OutputRef>& out) {
  const Params p(c.params);
  conv_tol(pass, conv_geometry(p), p.dt("dtype"), int_range_of(c), out[0]);
  return ok_status();
}

// ---- device reference ------------------------------------------------------------------------------
/// Cases from this many multiply-adds up take the device path, whatever their dtype. The
/// device path costs a fixed few launches per case (two per tensor to draw it, one for the
/// reference); the host path costs drawing every input element (the value classes' Philox and
/// series, then the fp16 / bf16 rounding), uploading it, and the reference and bound at about
/// 2 ns per multiply-add, all growing with the case. In the bench split of small cases
/// (docs/results.md, H100) those host phases took two thirds of conv2d's lane time and the
/// device reference 1%, while 80% of the cases (fp16 / bf16) could not take the device path:
/// the gain is in moving those, not in moving the threshold. A narrow dtype does not move the
/// crossover either (the host rounds each element once more, the device costs the same), so
/// the threshold stays where it was set for fp32: below it a case's host reference is a few
/// microseconds, and its inputs mostly few enough that the launches would save little.
/// The GPU test ConvDeviceRefGpu.EngineTimesBothPathsNearTheThreshold prints both paths' time
/// per case just above it, to check that choice on the machine at hand.
constexpr int64_t kDeviceRefMacs = 2048;
/// The device reference gives each output element one thread, which runs its whole reduction:
/// a longer one (backward-filter over a large N P Q with few filter taps) is quicker on the host.
constexpr int64_t kDeviceRefMaxReduction = int64_t{1} << 14;

/// Any of the op's dtypes (fp32, fp16, bf16: materialize_device draws them all) and enough work;
/// the gradcheck relation included (its properties read the snapshot, copied back, and the
/// device reference's values).
bool device_when(ConvPass pass, const Params& p) {
  if (!device_ref::input_rows_support(p.dt("dtype"))) return false;
  const ref::Conv2dGeometry g = conv_geometry(p);
  return macs(g) >= kDeviceRefMacs && reduction(pass, g) <= kDeviceRefMaxReduction;
}

device_ref::ConvF64Pass device_pass(ConvPass pass) {
  return pass == ConvPass::kFwd       ? device_ref::ConvF64Pass::kFwd
         : pass == ConvPass::kBwdData ? device_ref::ConvF64Pass::kBwdData
                                      : device_ref::ConvF64Pass::kBwdFilter;
}

/// A backward pass's gradcheck relation on the device: the sign direction u over the
/// differentiated operand (fp32, exact), J u = f(u) and its error bound per output, then the
/// relation's partial sums.
struct GradScratch {
  float* u = nullptr;
  double* jvp = nullptr;
  double* err = nullptr;
  unsigned char* sums = nullptr;
};

GradScratch grad_layout(ConvPass pass, const ref::Conv2dGeometry& g, ScratchCarver& s) {
  GradScratch r;
  r.u = s.take<float>(pass == ConvPass::kBwdData ? g.x_elems() : g.w_elems());
  r.jvp = s.take<double>(g.y_elems());
  r.err = s.take<double>(g.y_elems());
  r.sums = s.take<unsigned char>(device_ref::grad_sums_scratch());
  return r;
}

int64_t device_scratch(ConvPass pass, const Case& c) {
  if (pass == ConvPass::kFwd || !wants_gradcheck(c)) return 0;
  ScratchCarver s;
  grad_layout(pass, conv_geometry(Params(c.params)), s);
  return s.bytes();
}

/// The pass's reference and tolerance on the device: ref and the tolerance itself in mag
/// (DeviceOutput's defaults, rel_mag = 1: a bound computed outright, as the host path uploads it).
/// A gradcheck case of a backward pass adds the forward along the relation's direction, in the
/// scratch (device_gradcheck_sums reads it): the element function's tolerance under the ceiling
/// gamma_{2T}(2^-53) x magnitude, with no store rounding and no overflow limit, is the bound
/// check_grad_projection puts on a host forward's rounding.
Status device_compute(ConvPass pass, const Case& c, const std::vector<DevTensor>& t, std::vector<DeviceOutput>& out,
                      const DeviceContext& ctx) {
  const Params p(c.params);
  const ref::Conv2dGeometry g = conv_geometry(p);
  const DType dt = p.dt("dtype");
  if (!device_ref::input_rows_support(dt) || t.size() != 3 || out.size() != 1 || t[0].dtype != dt || t[1].dtype != dt)
    return invalid_argument(
        fmt::format("{}: no device reference for this case (fp32, fp16 or bf16 tensors)", conv_op_name(pass)));
  const auto rows = [](const DevTensor& x) { return device_ref::input_rows(x.ptr, x.v.cols, x.v.ld, x.dtype); };
  out[0].exact = conv_exact(pass, g, dt, int_range_of(c));
  ASSAY_RETURN_IF_ERROR(device_ref::conv2d_f64_reference(device_pass(pass), g, conv_ceiling(pass, g, dt),
                                                         max_finite(dt), store_rounding_for(dt), rows(t[0]),
                                                         rows(t[1]), out[0].ref, out[0].mag, ctx.stream));
  if (pass == ConvPass::kFwd || !wants_gradcheck(c)) return ok_status();
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch(pass, c))
    return invalid_argument(fmt::format("{}: device reference scratch missing or too small", conv_op_name(pass)));
  ScratchCarver s(ctx.scratch);
  const GradScratch gs = grad_layout(pass, g, s);
  const bool data = pass == ConvPass::kBwdData;
  const int64_t n = data ? g.x_elems() : g.w_elems();
  ASSAY_RETURN_IF_ERROR(device_ref::fill_gradcheck_signs(gs.u, n, gradcheck_seed(c), ctx.stream));
  const device_ref::InputRows u = device_ref::input_rows(gs.u, n, n, DType::kF32);
  const ElementBound rounding{0, gamma_n(2 * g.fwd_reduction(), 0x1p-53), 0};
  ASSAY_RETURN_IF_ERROR(device_ref::conv2d_f64_reference(device_ref::ConvF64Pass::kFwd, g, rounding, HUGE_VAL,
                                                         StoreRounding{}, data ? u : rows(t[0]),
                                                         data ? rows(t[1]) : u, gs.jvp, gs.err, ctx.stream));
  return ok_status();
}

/// relation "gradcheck" on the device path: the six sums come back, judged as the host judges
/// its own (judge_grad_projection).
Status device_properties(ConvPass pass, const Case& c, const DevicePropertiesIn& in, const DeviceContext& ctx,
                         std::vector<Failure>& failures) {
  GradSums s;
  ASSAY_RETURN_IF_ERROR(device_gradcheck_sums(pass, c, in, ctx, s));
  judge_grad_projection(s, 1, kJvpOnDevice, "<dY, J u>", pass == ConvPass::kBwdData ? "dX" : "dW", failures);
  return ok_status();
}

// ---- properties --------------------------------------------------------------------------------------
/// relation "gradcheck" of the backward passes: <dY, J u> by central differences of the fp64
/// forward y = conv(x, w) in the differentiated operand (bwd-data: x, with w the case's W;
/// bwd-filter: w, with x the case's X) against sum u . (dX or dW) of the kernel
/// (properties/gradcheck_relation.h). The forward is linear in that operand, so J u is the
/// forward at u, evaluated once with its magnitude (GradProblem::linear_terms): the adjoint identity
/// <dY, conv(u)> = <conv^T(dY), u>, within the fp64 forward's rounding bound. On the device path
/// the forward at u was evaluated beside the device reference (device_compute).
void properties_bwd(ConvPass pass, const Case& c, const std::vector<HostTensor>& in,
                    const std::vector<HostTensor>& out, const std::vector<OutputRef>& refs,
                    std::vector<Failure>& failures) {
  if (!wants_gradcheck(c) || pass == ConvPass::kFwd || in.size() < 2 || out.size() != 1 || refs.size() != 1) return;
  const ref::Conv2dGeometry g = conv_geometry(Params(c.params));
  const bool data = pass == ConvPass::kBwdData;
  const View2D gv = out[0].v;
  auto zero = std::make_shared<std::vector<double>>(static_cast<size_t>(gv.rows * gv.cols), 0.0);
  GradProblem p;
  GradOperand op;
  op.name = data ? "dX" : "dW";
  op.x = {zero->data(), {gv.rows, gv.cols, gv.cols}};
  op.grad = out[0];
  op.ref = &refs[0];
  p.operands.push_back(std::move(op));
  p.upstream = pack_dense(data ? in[0] : in[1]);
  p.linear_terms = g.fwd_reduction();
  auto fixed = std::make_shared<std::vector<double>>(pack_dense(data ? in[1] : in[0]));  // w or x
  // linear: f(u) and its magnitude, evaluated once (no differences)
  p.forward_mag = [g, data, fixed](const double* v, double* y, double* mag) {
    if (data)
      ref::conv2d_forward<double>(g, v, fixed->data(), y, mag);
    else
      ref::conv2d_forward<double>(g, fixed->data(), v, y, mag);
  };
  p.seed = gradcheck_seed(c);
  p.label = "<dY, J u>";
  check_grad_projection(p, failures);
}

// ---- self-check ----------------------------------------------------------------------------------------
/// The host reference of `pass` on a small grouped, strided, dilated, padded NHWC geometry:
/// the forward against a long-double evaluation of the definition, the backward passes
/// through the adjoint identities <dY, conv(X, W)> = <conv^T_x(dY, W), X> = <conv^T_w(X, dY), W>
/// in long double.
Status self_check(ConvPass pass, std::string& report) {
  ref::Conv2dGeometry g;
  g.n = 2, g.c = 4, g.h = 7, g.w = 6, g.k = 6, g.r = 3, g.s = 2, g.pad_h = 1, g.pad_w = 2, g.stride_h = 2,
  g.stride_w = 1, g.dil_h = 2, g.dil_w = 1, g.groups = 2, g.layout = ref::ConvLayout::kNHWC;
  auto fill = [](int64_t n, double f) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(f * static_cast<double>(i + 1)) * 3;
    return v;
  };
  const std::vector<double> x = fill(g.x_elems(), 0.37), w = fill(g.w_elems(), 0.61), dy = fill(g.y_elems(), 0.23);
  // y = conv(x, w) by the definition in long double.
  std::vector<long double> y(static_cast<size_t>(g.y_elems()), 0.0L);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t p = 0; p < g.out_h(); ++p)
        for (int64_t q = 0; q < g.out_w(); ++q) {
          long double acc = 0;
          for (int64_t c = 0; c < g.cg(); ++c)
            for (int64_t r = 0; r < g.r; ++r)
              for (int64_t s = 0; s < g.s; ++s) {
                const int64_t i = p * g.stride_h - g.pad_h + r * g.dil_h, j = q * g.stride_w - g.pad_w + s * g.dil_w;
                if (i < 0 || i >= g.h || j < 0 || j >= g.w) continue;
                acc += static_cast<long double>(x[static_cast<size_t>(g.x_at(n, k / g.kg() * g.cg() + c, i, j))]) *
                       w[static_cast<size_t>(g.w_at(k, c, r, s))];
              }
          y[static_cast<size_t>(g.y_at(n, k, p, q))] = acc;
        }
  double worst = 0;
  std::string what;
  if (pass == ConvPass::kFwd) {
    const OutputRef o = conv_ref(pass, g, x.data(), w.data());
    for (size_t i = 0; i < y.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(o.ref[i] - y[i]) / (o.aux[0][i] + 1e-300L)));
    what = "a long-double evaluation of the definition";
  } else {
    const bool data = pass == ConvPass::kBwdData;
    const OutputRef o = data ? conv_ref(pass, g, dy.data(), w.data()) : conv_ref(pass, g, x.data(), dy.data());
    const std::vector<double>& other = data ? x : w;
    long double lhs = 0, rhs = 0, mag = 0;
    for (size_t i = 0; i < y.size(); ++i) lhs += y[i] * dy[i], mag += std::fabs(y[i] * dy[i]);
    for (size_t i = 0; i < other.size(); ++i) rhs += static_cast<long double>(o.ref[i]) * other[i];
    worst = static_cast<double>(std::fabs(lhs - rhs) / mag);
    what = fmt::format("the adjoint identity <dY, conv(X, W)> = <{}, {}> in long double", data ? "dX" : "dW",
                       data ? "X" : "W");
  }
  if (!(worst < 1e-13))
    return internal_error(fmt::format("{}: host reference off by {:.3g} (relative to the magnitudes) against {}",
                                      conv_op_name(pass), worst, what));
  report += fmt::format("{}: host reference within {:.2g} of {} (NHWC, 2 groups, stride, padding, dilation)\n",
                        conv_op_name(pass), worst, what);
  return ok_status();
}

// ---- vendor ---------------------------------------------------------------------------------------

Status cudnn_conv(ConvPass pass, const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
  namespace vc = vendor_columns;
  ASSAY_ASSIGN_OR_RETURN(vendor::CudnnHandle * h, vc::cudnn_handle(s));
  vendor::CudnnConv cc;
  cc.geom = conv_geometry(p);
  cc.dtype = t[0].dtype;
  cc.math = vendor::ConvMath::kFma;
  cc.algos = vendor::ConvAlgoPolicy::kDotProduct;
  ASSAY_ASSIGN_OR_RETURN(const void* a, vc::packed_input(t[0], 0, s));
  ASSAY_ASSIGN_OR_RETURN(const void* b, vc::packed_input(t[1], 1, s));
  ASSAY_ASSIGN_OR_RETURN(void* o, vc::packed_output(t[2], 2, s));
  switch (pass) {
    case ConvPass::kFwd:
      ASSAY_RETURN_IF_ERROR(vendor::cudnn_conv_forward(*h, cc, 1.0f, a, b, 0.0f, o).status());
      break;
    case ConvPass::kBwdData:  // dY, W -> dX
      ASSAY_RETURN_IF_ERROR(vendor::cudnn_conv_backward_data(*h, cc, 1.0f, b, a, 0.0f, o).status());
      break;
    case ConvPass::kBwdFilter:  // X, dY -> dW
      ASSAY_RETURN_IF_ERROR(vendor::cudnn_conv_backward_filter(*h, cc, 1.0f, a, b, 0.0f, o).status());
      break;
  }
  return vc::finish_output(o, t[2], s);
}

OpDef make(ConvPass pass) {
  OpDef op;
  op.name = conv_op_name(pass);
  op.description = pass == ConvPass::kFwd       ? "2-D convolution forward y = conv(x, w), NCHW/NHWC, groups, fp32 acc"
                   : pass == ConvPass::kBwdData ? "2-D convolution backward-data dx = conv^T(dy, w)"
                                                : "2-D convolution backward-filter dw = sum_{n,p,q} dy x";
  op.params = params(pass);
  op.tensors = tensors(pass);
  op.check = [name = op.name](const Params& p) { return check(name, p); };
  op.reference = [pass](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return reference(pass, c, t, out);
  };
  op.bound = [pass](const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return bound(pass, c, a, t, out);
  };
  op.bound_name = "conv dot-product ceiling";
  if (pass != ConvPass::kFwd)
    op.properties = [pass](const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                           const std::vector<OutputRef>& refs, std::vector<Failure>& failures) {
      properties_bwd(pass, c, in, out, refs, failures);
    };
  op.self_check = [pass](std::string& report) { return self_check(pass, report); };
  op.device_reference.when = [pass](const Params& p) { return device_when(pass, p); };
  op.device_reference.scratch = [pass](const Case& c) { return device_scratch(pass, c); };
  op.device_reference.compute = [pass](const Case& c, const Arithmetic&, const std::vector<DevTensor>& t,
                                       std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
    return device_compute(pass, c, t, out, ctx);
  };
  if (pass != ConvPass::kFwd)
    op.device_reference.properties = [pass](const Case& c, const DevicePropertiesIn& in, const DeviceContext& ctx,
                                            std::vector<Failure>& failures) {
      return device_properties(pass, c, in, ctx, failures);
    };
  op.vendor = {.name = "cudnn-conv",
               .run = [pass](const Params& p, const std::vector<DevTensor>& t, cudaStream_t st) {
                 return cudnn_conv(pass, p, t, st);
               }};
  return op;
}

// ---- binding ------------------------------------------------------------------------------------------
const char* const kSrc = "kernels/conv/conv.cu";
namespace kc = kernels::conv;

ASSAY_REGISTER(register_op(make(ConvPass::kFwd)));
ASSAY_REGISTER(register_op(make(ConvPass::kBwdData)));
ASSAY_REGISTER(register_op(make(ConvPass::kBwdFilter)));
ASSAY_REGISTER(add_variant("conv2d", {.name = "direct",
                                      .description = "one thread per output, loops c, r, s",
                                      .launch = conv_launch(ConvPass::kFwd, kc::conv2d_fwd_direct),
                                      .source = kSrc}));
ASSAY_REGISTER(add_variant("conv2d",
                           {.name = "implicit_gemm",
                            .description = "32x32 tiles over (N*P*Q) x Kg per group, im2col gathered into shared memory",
                            .launch = conv_launch(ConvPass::kFwd, kc::conv2d_fwd_igemm),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("conv2d_bwd_data",
                           {.name = "direct",
                            .description = "one thread per dx element, loops Kg, r, s over the taps that meet an output",
                            .launch = conv_launch(ConvPass::kBwdData, kc::conv2d_bwd_data_direct),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("conv2d_bwd_data",
                           {.name = "implicit_gemm",
                            .description = "32x32 tiles over (N*H*W) x Cg per group, dy gathered per tap",
                            .launch = conv_launch(ConvPass::kBwdData, kc::conv2d_bwd_data_igemm),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("conv2d_bwd_filter", {.name = "direct",
                                                 .description = "one thread per dw element, loops n, p, q (fixed order)",
                                                 .launch = conv_launch(ConvPass::kBwdFilter, kc::conv2d_bwd_filter_direct),
                                                 .source = kSrc}));
ASSAY_REGISTER(add_variant(
    "conv2d_bwd_filter",
    {.name = "implicit_gemm",
     .description = "32x32 tiles over Kg x (R*S*Cg) per group, whole N*P*Q reduction per block",
     .launch = conv_launch(ConvPass::kBwdFilter, kc::conv2d_bwd_filter_igemm),
     .source = kSrc}));

}  // namespace

ElementBound conv_accumulation_ceiling(ConvPass pass, const ref::Conv2dGeometry& g, DType dt) {
  return conv_ceiling(pass, g, dt);
}

OutputRef conv_reference(ConvPass pass, const ref::Conv2dGeometry& g, DType dt, const double* in0, const double* in1,
                         int64_t int_range) {
  OutputRef out = conv_ref(pass, g, in0, in1);
  conv_tol(pass, g, dt, int_range, out);
  return out;
}

Status device_gradcheck_sums(ConvPass pass, const Case& c, const DevicePropertiesIn& in, const DeviceContext& ctx,
                             GradSums& sums) {
  sums = GradSums{};
  if (pass == ConvPass::kFwd || !wants_gradcheck(c)) return ok_status();
  const char* name = conv_op_name(pass);
  if (in.inputs.size() != 3 || in.outputs.size() != 1 || in.refs.size() != 1)
    return invalid_argument(fmt::format("{}: gradcheck on the device needs 3 inputs, 1 output, 1 reference", name));
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch(pass, c))
    return invalid_argument(fmt::format("{}: device reference scratch missing or too small", name));
  const ref::Conv2dGeometry g = conv_geometry(Params(c.params));
  ScratchCarver s(ctx.scratch);
  const GradScratch gs = grad_layout(pass, g, s);
  const bool data = pass == ConvPass::kBwdData;
  const DevTensor& grad = in.outputs[0];
  const DevTensor& up = in.inputs[data ? 0 : 1];  // dY
  const DeviceOutput& r = in.refs[0];
  if (r.rows * r.cols != grad.v.rows * grad.v.cols || grad.v.rows * grad.v.cols != (data ? g.x_elems() : g.w_elems()) ||
      up.v.rows * up.v.cols != g.y_elems())
    return invalid_argument(fmt::format("{}: gradcheck on the device: tensor sizes do not match the geometry", name));
  device_ref::GradSumsIn li;
  device_ref::GradTermIn& t = li.terms[0];
  li.n_terms = 1;
  t.grad = device_ref::input_rows(grad.ptr, grad.v.cols, grad.v.ld, grad.dtype);
  t.rows = grad.v.rows, t.cols = grad.v.cols;
  t.u = device_ref::input_rows(gs.u, t.rows * t.cols, t.rows * t.cols, DType::kF32);
  t.ref = r.ref, t.mag = r.mag;
  t.rel_out = r.rel_out, t.rel_mag = r.rel_mag, t.floor = r.floor, t.limit = r.overflow_mag;
  li.upstream = device_ref::input_rows(up.ptr, up.v.cols, up.v.ld, up.dtype);
  li.up_rows = up.v.rows, li.up_cols = up.v.cols;
  li.jvp = gs.jvp, li.err = gs.err;
  return device_ref::grad_sums(li, gs.sums, &sums, ctx.stream);
}

}  // namespace assay::conv
