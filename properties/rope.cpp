// rope: rotary position embedding over tokens * heads rows of head_dim, forward
// and backward (params.inverse = true rotates by -theta: the backward dx from dy
// is the same kernel, so one op covers both directions).
//
// Sections: declaration (params, tensors), references, bound, properties, binding.
// Binding: kernels/rowwise/rope.cu (one thread per rotated pair, the angle
// computed per pair in fp32, IEEE: an empty contract); the planted bugs of
// tests/mutants/rowwise/ bind through rope_launch (rope.h).
// Reference: references/host/backward.h rotary_tables / rotary_forward /
// rotary_backward in double, theta_{t,i} = t base^(-2i/d) exactly (d =
// head_dim, row t*heads + h at position t), mag = |a cos| + |b sin|.
// Bound (u = 2^-24; a, b the input pair, exact in their dtype; N = |(a, b)|_2,
// S = |a| + |b|, M the reference's mag of the output element):
// - the kernel's angle: e^ = fl(-2i/d) (exact on the host: same IEEE division),
//   P^ = powf(base, e^), 4 ulp [CUDA] (+0.5 against the exact value; exactly 1
//   for i = 0, pow(x, -0) = 1), theta^ = fl(t P^) (0.5 ulp):
//     |P^ - P| <= |base^e^ - base^e| + 4.5 ulp(P),
//     dtheta = |theta^ - theta| <= t |P^ - P| + 0.5 ulp(theta) (+ the double
//   reference's own errors: its two pows within 2 fp64 ulps each on the device
//   (CUDA's pow; glibc's within 1), 8 * 2^-53 P in |base^e^ - base^e|, and its
//   theta = t P within 2.5 ulps, 6 * 2^-53 theta). It grows linearly with the position t:
//   at t = 4095 it is ~1e-3 rad, far above an fp32 ulp of the output.
// - sensitivity: R(theta^) v - R(theta) v has each component <= dtheta N (a
//   rotation by dtheta moves v by 2 |sin(dtheta/2)| N).
// - sincosf 2 ulp [CUDA] (+0.5: 5u relative to |cos|, |sin| of theta^), the
//   two products and the sum (a dot of length 2, FMA or not: gamma_2, [H]
//   (3.5)), on magnitudes Ms = |a cos theta^| + |b sin theta^| <= M + dtheta S:
//     |y^ - y| <= (5u + gamma_2 (1 + 5u)) Ms + dtheta N + 4 min_normal(fp32)
//   (the floor covers underflowing products), + half an ulp of the output dtype
//   at |y| (fp16/bf16 stores, store_rounding).
// - declared arithmetic: flush-to-zero changes a subnormal input or product by
//   less than min_normal each, within the 4 min_normal floor; fast-math
//   intrinsics (__powf, __sinf / __cosf, unbounded outside [-pi, pi]) have no
//   bound here: a variant declaring them gets an error, not a silent pass.
// - inputs with an infinity: the reference's Inf/NaN pattern is exact unless a
//   coefficient (cos or sin) of an infinite input is within dtheta + 5u of 0,
//   where the kernel's sign may differ: those elements are unchecked (tol +Inf).
// Properties (case param "relation"), host-side on the kernel's outputs:
// - "norm": each output pair keeps its input norm: |y^|_2 differs from |v|_2 by
//   at most |(e_a, e_b)|_2, e = the bound above without the angle term (a
//   rotation by any angle, theta^ included, keeps the norm exactly), + the
//   host's rounding;
// - "inverse": the host rotates the kernel's output back by its own fp32 angle
//   theta_h (glibc powf, <= 1 ulp, then fl(t P_h); cos/sin in double) and must
//   get the input back within |(e_a, e_b)|_2 + |theta^ - theta_h| N,
//   |theta^ - theta_h| <= t (4.5 + 1.5) ulp(P) + ulp(theta). (Chaining the
//   kernel forward then inverse is not available to a testbed transform, which
//   rewrites inputs; this checks the same identity on one launch.)
// Value classes: every activation class (near-overflow rows overflow fp16 on
// rotation, subnormals, NaN/Inf injection); head_dim even up to 256 (pairs
// below and around a warp), heads 1..16, tokens up to 4096 (large positions),
// both layouts, both directions, bases 10000 and 500000, padded rows, offsets.
#include "properties/rope.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "properties/rowwise_values.h"
#include "references/device/rope_f64.h"
#include "references/host/backward.h"

namespace assay::rowwise {
namespace {

constexpr int64_t kMaxTokens = 4096, kMaxHeads = 16, kMaxHeadDim = 256, kMaxElems = 1 << 21;
constexpr double u32 = 0x1p-24, u64 = 0x1p-53;
// Both paths refuse a variant that declares fast math, with this line.
constexpr const char* kNoFastMathBound =
    "rope: no bound under fast-math intrinsics (__sinf / __cosf are unbounded outside [-pi, pi])";

// ---- declaration ------------------------------------------------------------------
std::vector<ParamDef> params() {
  return {ParamDef::dtype("dtype", activation_dtypes()),
          // Pair counts below, at and around a warp, then up to 128 pairs.
          ParamDef::extent("head_dim", 2, kMaxHeadDim).multiple_of(2).aim({32, 64, 128}),
          ParamDef::integer("heads", 1, kMaxHeads).aim({4, 8}),
          ParamDef::extent("tokens", 1, kMaxTokens).aim({32, 1024}).cap([](const Params& q) {
            return std::max<int64_t>(1, kMaxElems / std::max<int64_t>(q.i("heads") * q.i("head_dim"), 1));
          }),
          ParamDef::real("base", {10000, 500000}),
          ParamDef::flag("interleaved"),
          ParamDef::flag("inverse"),
          ParamDef::choice("relation", {"norm", "inverse"}).optional(3)};
}

Status check(const Params& p) {
  const double base = p.r("base", NAN);
  if (!(base >= 2 && base <= 1e7) || static_cast<double>(static_cast<float>(base)) != base)
    return invalid_argument("rope case: params.base must be an fp32 value in [2, 1e7] (10000, 500000)");
  return ok_status();
}

// ---- references and bound --------------------------------------------------------

/// The accuracy table's entries the bound uses (powf in ulps against the correctly rounded
/// result; sincosf: (2 + 0.5) ulps of |cos|, |sin|, at most 2u|x| each for normal results), with
/// the fp32 format the angle's ulps are taken in.
const device_ref::RopeConsts& rope_consts() {
  static const device_ref::RopeConsts k = [] {
    device_ref::RopeConsts c;
    c.pow_ulps = find_math_fn("powf")->ulp_f32;  // 4
    c.trig_rel =
        (std::max(find_math_fn("sinf")->ulp_f32, find_math_fn("cosf")->ulp_f32) + 0.5) * 2 * u32 * (1 + 0x1p-20);
    c.f32 = float_format(DType::kF32);
    return c;
  }();
  return k;
}
constexpr double kHostPowUlps = 1;  // glibc powf (>= 2.28): < 1 ulp

double ulp32(double x) {
  return device_ref::rope_ulp32(x, rope_consts().f32);
}
/// Error of one output element without the angle term (device_ref::rope_rotation_err).
double rotation_err(double mag, double dtheta, double s_abs) {
  return device_ref::rope_rotation_err(mag, dtheta, s_abs, rope_consts());
}

/// Pair i's frequency (device_ref::rope_freq: the powers, the costly part, are the same at every
/// position, so a case computes them once per pair) and the host's fp32 power for the inverse
/// relation: glibc powf with the kernel's rounded exponent.
struct RopeFreq : device_ref::RopeFreq {
  float ph = 0;
};

RopeFreq rope_freq(int64_t i, int64_t d, double base) {
  RopeFreq f;
  static_cast<device_ref::RopeFreq&>(f) = device_ref::rope_freq(i, d, base, rope_consts());
  if (!f.zero) f.ph = std::pow(static_cast<float>(base), -static_cast<float>(2 * i) / static_cast<float>(d));
  return f;
}

std::vector<RopeFreq> rope_freqs(int64_t half, int64_t d, double base) {
  std::vector<RopeFreq> v;
  for (int64_t i = 0; i < half; ++i) v.push_back(rope_freq(i, d, base));
  return v;
}

/// The angle of pair i at position t (device_ref::rope_angle), and the host's fp32 angle with
/// its distance bound for the inverse relation.
struct RopeAngle : device_ref::RopeAngle {
  double host = 0;      ///< theta_h: glibc powf and an fp32 product, as the kernel's formula on the host
  double host_err = 0;  ///< bound on |theta^ - theta_h|
};

RopeAngle rope_angle(int64_t t, const RopeFreq& f) {
  RopeAngle a;
  static_cast<device_ref::RopeAngle&>(a) = device_ref::rope_angle(t, f, rope_consts().f32);
  if (f.zero) {
    a.host = static_cast<double>(t);
    return a;
  }
  const double tt = static_cast<double>(t);
  a.host = static_cast<double>(static_cast<float>(t) * f.ph);
  a.host_err = tt * (rope_consts().pow_ulps + 0.5 + kHostPowUlps + 0.5) * f.ulp_p + ulp32(tt * (f.p + f.dp));
  return a;
}

struct RopeShape {
  DType dt = DType::kF32;
  int64_t tokens = 0, heads = 0, d = 0;
  double base = 10000;
  bool interleaved = false, inverse = false;
};
RopeShape shape_of(const Case& c) {
  const Params p(c.params);
  return {p.dt("dtype"),        p.i("tokens"),        p.i("heads"),    p.i("head_dim"),
          p.r("base", 10000), p.b("interleaved"), p.b("inverse")};
}
std::pair<int64_t, int64_t> pair_cols(const RopeShape& s, int64_t i) {
  return s.interleaved ? std::pair<int64_t, int64_t>{2 * i, 2 * i + 1} : std::pair<int64_t, int64_t>{i, i + s.d / 2};
}

/// y in ref; aux[0]: the reference's mag (|a cos| + |b sin| of the exact angle).
Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const RopeShape s = shape_of(c);
  const int64_t rows = s.tokens * s.heads, d = s.d, half = d / 2;
  OutputRef y;
  y.ref.assign(static_cast<size_t>(rows * d), 0.0);
  y.aux.assign(1, std::vector<double>(y.ref.size(), 0.0));
  if (rows > 0 && d > 0) {
    std::vector<double> cs(static_cast<size_t>(s.tokens * half)), sn(cs.size());
    ref::rotary_tables<double>(s.tokens, d, s.base, cs.data(), sn.data());
    std::vector<int64_t> pos(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = r / s.heads;
    const auto layout = s.interleaved ? ref::RotaryLayout::kInterleaved : ref::RotaryLayout::kHalfSplit;
    if (s.inverse)
      ref::rotary_backward<double>(t[0].data, rows, d, t[0].v.ld, d, cs.data(), sn.data(), pos.data(), layout,
                                   y.ref.data(), y.aux[0].data());
    else
      ref::rotary_forward<double>(t[0].data, rows, d, t[0].v.ld, d, cs.data(), sn.data(), pos.data(), layout,
                                  y.ref.data(), y.aux[0].data());
  }
  out = {std::move(y)};
  return ok_status();
}

Status bound(const Case& c, const Arithmetic& arith, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  if (arith.fast_math)
    return unavailable(kNoFastMathBound);
  const RopeShape s = shape_of(c);
  const int64_t rows = s.tokens * s.heads, d = s.d, half = d / 2;
  OutputRef& y = out[0];
  y.tol.assign(y.ref.size(), 0.0);
  if (rows == 0 || d == 0) return ok_status();
  std::vector<RopeAngle> ang(static_cast<size_t>(half));
  const std::vector<RopeFreq> freq = rope_freqs(half, d, s.base);
  for (int64_t tok = 0; tok < s.tokens; ++tok) {
    for (int64_t i = 0; i < half; ++i) ang[static_cast<size_t>(i)] = rope_angle(tok, freq[static_cast<size_t>(i)]);
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t r = tok * s.heads + h;
      for (int64_t i = 0; i < half; ++i) {
        const auto [ca, cb] = pair_cols(s, i);
        const double a = t[0].at(r, ca), b = t[0].at(r, cb);
        const RopeAngle& g = ang[static_cast<size_t>(i)];
        const size_t la = static_cast<size_t>(r * d + ca), lb = static_cast<size_t>(r * d + cb);
        if (!std::isfinite(a) || !std::isfinite(b)) {
          // y_a = a cos - b sin', y_b = a sin' + b cos (sin' = -sin for the inverse): a coefficient of an
          // infinite input within the angle and sincosf error of 0 leaves the kernel's sign open (ref 0,
          // tol +Inf: unchecked). At t = 0 the kernel's angle is exactly 0 (sin 0 = 0, cos 0 = 1
          // exactly): nothing is open.
          const double slack = tok == 0 ? -1.0 : g.err + rope_consts().trig_rel + 1e-30;
          const double co = std::fabs(std::cos(g.theta)), si = std::fabs(std::sin(g.theta));
          const bool ia = std::isinf(a), ib = std::isinf(b);
          const bool open_a = (ia && co <= slack) || (ib && si <= slack);
          const bool open_b = (ia && si <= slack) || (ib && co <= slack);
          if (open_a) y.ref[la] = 0, y.tol[la] = INFINITY;
          if (open_b) y.ref[lb] = 0, y.tol[lb] = INFINITY;
          continue;
        }
        const double norm = std::hypot(a, b), sabs = std::fabs(a) + std::fabs(b);
        for (size_t l : {la, lb}) {
          const double e32 = rotation_err(y.aux[0][l], g.err, sabs) + g.err * norm;
          y.tol[l] = e32 + store_rounding(std::fabs(y.ref[l]) + e32, s.dt);
        }
      }
    }
  }
  return ok_status();
}

// ---- device reference ---------------------------------------------------------------------
// From the row-wise ops' threshold up, relations included (their properties read the inputs the
// engine copies back): the reference and bound above, a thread per pair
// (references/device/rope_f64.cu).
bool device_when(const Params& p) {
  return device_ref::input_rows_support(p.dt("dtype")) &&
         p.i("tokens") * p.i("heads") * p.i("head_dim") >= kRowwiseDeviceRefElems;
}

Status device_compute(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                      std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  if (a.fast_math)
    return unavailable(kNoFastMathBound);
  const RopeShape s = shape_of(c);
  if (t.size() != 2 || out.size() != 1 || !device_ref::input_rows_support(t[0].dtype))
    return invalid_argument("rope: no device reference for this case (fp32, fp16 or bf16 X)");
  device_ref::RopeF64Problem q;
  q.tokens = s.tokens, q.heads = s.heads, q.d = s.d, q.base = s.base;
  q.interleaved = s.interleaved, q.inverse = s.inverse;
  q.k = rope_consts();
  q.store = store_rounding_for(s.dt);
  return device_ref::rope_f64_reference(q, device_ref::input_rows(t[0].ptr, t[0].v.cols, t[0].v.ld, t[0].dtype),
                                        out[0].ref, out[0].mag, ctx.stream);
}

// ---- properties ---------------------------------------------------------------------
void properties(const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                const std::vector<OutputRef>& refs, std::vector<Failure>& f) {
  const std::string rel = Params(c.params).s("relation");
  if (rel != "norm" && rel != "inverse") return;
  const RopeShape s = shape_of(c);
  const int64_t rows = s.tokens * s.heads, d = s.d, half = d / 2;
  const HostTensor& x = in[0];
  const HostTensor& y = out[0];
  int64_t bad = 0;
  std::string first;
  std::vector<RopeAngle> ang(static_cast<size_t>(half));
  const std::vector<RopeFreq> freq = rope_freqs(half, d, s.base);
  for (int64_t tok = 0; tok < s.tokens; ++tok) {
    for (int64_t i = 0; i < half; ++i) ang[static_cast<size_t>(i)] = rope_angle(tok, freq[static_cast<size_t>(i)]);
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t r = tok * s.heads + h;
      for (int64_t i = 0; i < half; ++i) {
        const auto [ca, cb] = pair_cols(s, i);
        const double a = x.at(r, ca), b = x.at(r, cb), ya = y.at(r, ca), yb = y.at(r, cb);
        // Non-finite inputs or outputs are the main check's business (NaN/Inf pattern, overflow).
        if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(ya) || !std::isfinite(yb)) continue;
        const RopeAngle& g = ang[static_cast<size_t>(i)];
        const size_t la = static_cast<size_t>(r * d + ca), lb = static_cast<size_t>(r * d + cb);
        const double norm = std::hypot(a, b), sabs = std::fabs(a) + std::fabs(b);
        // Per component: the bound without the angle term (the reference's mag from the exact angle), plus
        // the store rounding of the output at the larger of its bound and its value (a correct kernel's
        // |y^| is within the bound; taking |y^| too keeps the relation about norms alone).
        const double co0 = std::fabs(std::cos(g.theta)), si0 = std::fabs(std::sin(g.theta));
        const double mag_a = std::fabs(a) * co0 + std::fabs(b) * si0, mag_b = std::fabs(a) * si0 + std::fabs(b) * co0;
        double e[2];
        for (int k = 0; k < 2; ++k) {
          const double er = rotation_err(k == 0 ? mag_a : mag_b, g.err, sabs);
          const double y_abs =
              std::max(std::fabs(refs[0].ref[k == 0 ? la : lb]) + er + g.err * norm, std::fabs(k == 0 ? ya : yb));
          e[k] = er + store_rounding(y_abs, s.dt);
        }
        const double e2 = std::hypot(e[0], e[1]);
        if (rel == "norm") {
          const double ny = std::hypot(ya, yb);
          const double tol = e2 + 4 * u64 * (norm + ny);
          if (!(std::fabs(ny - norm) <= tol) && bad++ == 0)
            first = fmt::format("pair ({}, {}) of row {}: |y| = {:.9g}, |x| = {:.9g}, |diff| {:.3g} > {:.3g}", ca, cb,
                                r, ny, norm, std::fabs(ny - norm), tol);
        } else {
          // Back by the host's fp32 angle: R(-theta_h) for the forward, R(+theta_h) for the inverse.
          const double sg = s.inverse ? 1.0 : -1.0;
          const double co = std::cos(g.host), si = sg * std::sin(g.host);
          const double xa = ya * co - yb * si, xb = ya * si + yb * co;
          const double tol = e2 + g.host_err * norm + 8 * u64 * (std::fabs(ya) + std::fabs(yb));
          const double da = std::fabs(xa - a), db = std::fabs(xb - b);
          if (!(da <= tol && db <= tol) && bad++ == 0)
            first = fmt::format(
                "pair ({}, {}) of row {} rotated back is ({:.9g}, {:.9g}), the input ({:.9g}, {:.9g}); |diff| {:.3g} "
                "> {:.3g}",
                ca, cb, r, xa, xb, a, b, std::max(da, db), tol);
        }
      }
    }
  }
  if (bad > 0)
    f.push_back({FailureKind::kProperty, "Y", bad, -1,
                 fmt::format("{} of {} pairs break the '{}' relation; first: {}", bad, rows * half, rel, first)});
}

/// The host angle and rotation against long double at a few positions.
Status self_check(std::string& report) {
  double worst = 0;
  const int64_t d = 64;
  std::vector<double> cs(static_cast<size_t>(3000 * d / 2)), sn(cs.size());
  ref::rotary_tables<double>(3000, d, 10000, cs.data(), sn.data());
  for (int64_t t : {1, 17, 2999})
    for (int64_t i : {0, 5, 31}) {
      const long double th = static_cast<long double>(t) * std::pow(10000.0L, -2.0L * i / d);
      const size_t l = static_cast<size_t>(t * d / 2 + i);
      worst = std::max({worst, static_cast<double>(std::fabs(cs[l] - std::cos(th))),
                        static_cast<double>(std::fabs(sn[l] - std::sin(th)))});
    }
  if (!(worst < 1e-12)) return internal_error(fmt::format("rope: host rotary tables off by {:.3g}", worst));
  report += fmt::format(
      "rope: host cos/sin tables within {:.2g} of long double (positions up to 2999); rotary reference "
      "gradient-checked in tests/references/backward_ref_test.cpp\n",
      worst);
  return ok_status();
}

OpDef make() {
  OpDef op;
  op.name = "rope";
  op.description =
      "rotary position embedding, half-split or interleaved pairs (params.interleaved); params.inverse rotates by "
      "-theta, which is the backward (dx from dy); angles computed by the kernel in fp32";
  op.params = params();
  op.check = check;
  op.tensors = {{.name = "X", .dims = {"tokens", "heads", "head_dim"}, .values = {.specials = kSpecialAll}},
                {.name = "Y", .role = Role::kOut, .dims = {"tokens", "heads", "head_dim"}}};
  op.reference = reference;
  op.bound = bound;
  op.bound_name = "rope ceiling";
  op.properties = properties;
  op.device_reference = {.when = device_when, .compute = device_compute};
  op.self_check = self_check;
  return op;
}

// ---- binding ------------------------------------------------------------------------
ASSAY_REGISTER(register_op(make()));
ASSAY_REGISTER(add_variant(
    "rope", {.name = "pairwise",
             .description = "one thread per rotated pair, angle from powf and sincosf in fp32 per pair (no table)",
             .launch = rope_launch(kernels::rowwise::rope),
             .source = "kernels/rowwise/rope.cu"}));

}  // namespace
}  // namespace assay::rowwise
