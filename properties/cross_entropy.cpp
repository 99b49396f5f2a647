// cross_entropy: fused softmax + cross-entropy with class-index targets (int32),
// label smoothing and ignore_index, reduction 'none': per row the loss (fp32)
// and dlogits = softmax - q (the gradient of sum_r loss_r, in the logits' dtype).
//
// Sections: declaration (params, tensors), prepare, reference, bound, device
// reference, self-check, binding.
// Binding: kernels/rowwise/cross_entropy.cu (online max and sum as softmax_fwd,
// then dlogits and the smoothing sum, one warp or block per row; loss and
// dlogits overwritten); the planted bugs of tests/mutants/rowwise/ bind
// through cross_entropy_launch (properties/cross_entropy.h).
// References: references/host/softmax.h cross_entropy_reference (nll = L - t_c,
// t = x - max, L = log sum exp t; ignored rows 0, out-of-range targets NaN, as
// declared) and softmax_row, in double (on the device from 1024 logits:
// references/device/softmax_f64.cu, the same steps, prepare and bound); with smoothing eps (the fp32 value the
// kernel receives), q_j = (1 - eps)[j == c] + eps/n and
//   loss = -sum_j q_j z_j = (1 - eps)(L - t_c) + eps (L - mean_j t_j)
// (z = log-softmax); eps = 0 is the nll alone (as the kernel: no 0 * Inf).
// Bounds (u = 2^-24; SoftmaxModel with fp32 accumulation, the variant's
// declared arithmetic (fast-math: __expf's error) and the online kernel's
// rescale count, as softmax.cpp: ceil(n/32) + 10):
// - loss: ce_loss_tol below, from log_softmax_bounds' per-element z tolerance
//   tol_z(j) = u'|z_j| + u'|t_j| + floor_row:
//     |loss^ - loss| <= (1 + gamma_3)[(1 - eps) tol_z(c) + eps (mean_j tol_z(j)
//                       + gamma_{n+1} mean|t| / (1 - u))] + gamma_3 loss,
//   the gamma_{n+1} for the fp32 sum of the t_j (any order, [H] (4.4)) and the
//   division by n, gamma_3 for fl(1 - eps), the two products and their sum
//   (non-negative terms: no cancellation). Where sum_j |t_j| reaches the fp32
//   maximum (eps > 0) the kernel's smoothing sum may overflow: tol +Inf.
// - dlogits: p_j by softmax_bounds (tol_p), q_j rounded in fp32 (eps/n, and
//   fl(1 - eps) + eps/n on the target: gamma_3 q_j), the subtraction u|d_j|:
//     |d^_j - d_j| <= (1 + u)(tol_p(j) + gamma_3 q_j) + u |d_j|,
//   + half an ulp of the output dtype (fp16/bf16 stores, store_rounding).
// - ignored rows: loss and dlogits exactly 0 (tol 0); out-of-range targets
//   (not ignore_index): NaN (the NaN/Inf pattern).
// Properties (case param "relation"):
// - "shift": every row of logits shifted by a constant (rounded into the
//   dtype): loss and dlogits must not move beyond both tolerances and the
//   change of the exact result (zero for exact shifts of small-int rows).
// Value classes: every activation class (very large logits near overflow,
// where the max subtraction is required; mean-spread rows), NaN/Inf
// injection; prepared rows ("inf_every"): all -inf except the target (loss 0,
// or +Inf with smoothing), and a -inf target logit (loss +Inf); ignore_index
// -100, -1 or 0 placed on rows r % ignore_every == 0; out-of-range targets
// only when "oob_targets" (else the targets are folded into [0, n)).
#include "properties/cross_entropy.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "properties/rowwise_values.h"
#include "references/device/softmax_f64.h"
#include "references/host/softmax.h"

namespace assay::rowwise {
namespace {

constexpr int64_t kMaxRows = 4096, kMaxN = 16384, kMaxElems = 1 << 20;
constexpr double u32 = 0x1p-24;

// ---- declaration ------------------------------------------------------------------
std::vector<ParamDef> params() {
  return {
      ParamDef::dtype("dtype", activation_dtypes()),
      ParamDef::extent("n", 1, kMaxN).aim({4, 32, 128, 1024}),
      ParamDef::extent("rows", 1, kMaxRows).aim({4, 8, 32}).cap([](const Params& q) {
        return kMaxElems / std::max<int64_t>(q.i("n"), 1);
      }),
      // Absent: -100 (PyTorch's default); present: near -100, -1 and 0 (a valid class) or
      // anywhere in int32.
      ParamDef::integer("ignore_index", INT32_MIN, INT32_MAX).aim({-100, -1, 0}).optional(1),
      ParamDef::real("smoothing", {0, 0.1}),
      ParamDef::integer("ignore_every", 0, 7).describe("rows r % k == 0 get ignore_index"),
      ParamDef::flag("oob_targets").weigh({7, 1}).describe("targets outside [0, n) kept (else folded into it)"),
      ParamDef::integer("inf_every", 0, 5).optional(3).describe("rows r % k == k - 1: -inf logits (see prepare)"),
      ParamDef::choice("relation", {"shift"}).optional(7),
      ParamDef::real("shift", {64, -3.5, 1024, 0.25}).only_when([](const Params& q) {
        return q.s("relation") == "shift";
      }),
  };
}

Status check(const Params& p) {
  const double eps = p.r("smoothing", 0);
  if (!(eps >= 0 && eps <= 1)) return invalid_argument("cross_entropy case: params.smoothing must be a number in [0, 1]");
  if (p.s("relation") == "shift" && !p.has("shift"))
    return invalid_argument("cross_entropy case: params.relation \"shift\" needs a finite params.shift");
  return ok_status();
}

std::vector<TensorDef> tensors() {
  return {{.name = "logits", .dims = {"rows", "n"}, .values = {.specials = kSpecialAll}},
          // INT32_MAX / INT32_MIN injected: out of range (kept with oob_targets); else in [0, n].
          {.name = "target",
           .dims = {"rows"},
           .dtype = "int32",
           .values = {.classes = {ValueClass::kSameSign},
                      .specials = kSpecialPosInf | kSpecialNegInf,
                      .inject_percent = 20,
                      .int_hi_param = "n"}},
          {.name = "loss", .role = Role::kOut, .dims = {"rows"}, .dtype = "fp32"},
          {.name = "dlogits", .role = Role::kOut, .dims = {"rows", "n"}}};
}

// ---- references and bounds --------------------------------------------------------
SoftmaxModel model_of(DType dt, int64_t n, const Arithmetic& a) {
  SoftmaxModel m;
  m.in = dt;
  m.acc = DType::kF32;
  m.out = DType::kF32;  // the loss is fp32; dlogits add their own store rounding
  m.n = n;
  m.fast_math = a.fast_math;
  m.rescales = std::min<int64_t>(std::max<int64_t>(n - 1, 0), (n + 31) / 32 + 10);
  return m;
}

/// The smoothing the kernel receives (an fp32 value): the reference uses exactly it.
double eps_of(const Params& p) {
  return static_cast<double>(static_cast<float>(p.r("smoothing", 0)));
}

double finite_or_zero(double x) {
  return std::isfinite(x) ? x : 0.0;
}

/// Ceiling of |loss^ - loss| for one row of the kernel's smoothed loss
///   loss = (1 - eps) nll + eps A,  nll = L - t_c = -z_c,  A = L - mean_j t_j = mean_j |z_j|
/// (t_j = x_j - max <= 0, L >= 0, z = t - L), computed by the kernel as
/// fl(fl(1 - eps) nll^ + eps fl(L^ - fl(sum_j t_j^ / n))) in fp32. With tol_z(j) =
/// z.tol(|z_j|, |t_j|) the log-softmax ceiling (linear in both, so mean_j tol_z(j) =
/// z.tol(A, mean|t|)):
///   |nll^ - nll| <= tol_z(c)   (log_softmax_bounds' derivation, [MG], [H] (4.4)),
///   |A^ - A|   <= mean_j tol_z(j) + gamma_{n+1} mean|t| / (1 - u)   (the t_j^ summed in any
///                 order, [H] (4.4), and / n; tol_z carries each t_j's own rounding and L^),
///   the roundings of 1 - eps, the two products and the sum of non-negative terms: gamma_3,
///   |loss^ - loss| <= (1 + gamma_3) [(1 - eps) tol_z(c) + eps |A^ - A|] + gamma_3 loss.
/// eps == 0: the kernel returns nll^ alone: tol_z(c). The double reference's own mean adds
/// gamma_{n+1}(2^-53) mean|t|. +Inf where eps > 0 and n mean|t| reaches the fp32 maximum (the
/// kernel's sum of t_j, or a t_j itself, may overflow).
/// (The arithmetic is harness/bound_core.h's cross_entropy_loss_tol, which the device reference
/// runs too.)
double ce_loss_tol(const ElementBound& z, int64_t n, double eps, double nll, double target_dev, double lse,
                   double mean_abs_t, double loss) {
  return cross_entropy_loss_tol(z, n, eps, nll, target_dev, lse, mean_abs_t, loss, max_finite(DType::kF32));
}

/// Rows r % ignore_every == 0 get ignore_index; other targets fold into [0, n) unless oob_targets.
/// Rows r % inf_every == inf_every - 1 (with a target in [0, n)) get every logit but the target's
/// set to -inf (even r / inf_every) or the target's logit set to -inf (odd).
void prepare(const Case& c, std::vector<unsigned char*>& img) {
  const Params p(c.params);
  const auto& dx = c.tensors[0].desc;
  const auto& dtg = c.tensors[1].desc;
  const View2D v = view_of(dx);
  const int64_t n = v.cols, ig = p.i("ignore_index", -100), every = p.i("ignore_every", 0),
                inf_every = p.i("inf_every", 0);
  const bool oob = p.b("oob_targets");
  for (int64_t r = 0; r < v.rows; ++r) {
    int64_t t = static_cast<int64_t>(peek(DType::kI32, img[1], dtg.offset + r));
    if (!oob && n > 0) t = ((t % n) + n) % n;
    if (every > 0 && r % every == 0) t = ig;
    poke(DType::kI32, img[1], dtg.offset + r, static_cast<double>(t));
    if (inf_every <= 0 || r % inf_every != inf_every - 1 || t == ig || t < 0 || t >= n) continue;
    const int64_t row = dx.offset + r * v.ld;
    if ((r / inf_every) % 2 == 0) {
      for (int64_t j = 0; j < n; ++j)
        if (j != t) poke(dx.dtype, img[0], row + j, -INFINITY);
    } else {
      poke(dx.dtype, img[0], row + t, -INFINITY);
    }
  }
}

// Aux of the loss (per row): [0] 1 where the row is computed (not ignored, target in range),
// [1] nll, [2] |x_c - max|, [3] L (log-sum-exp), [4] mean_j |t_j|, [5] the row's weighted
// deviation D. Aux of dlogits (per element): [0] p_j, [1] softmax's magnitude, [2] q_j.
Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t rows = t[0].v.rows, n = t[0].v.cols, ld = t[0].v.ld;
  const int64_t ig = p.i("ignore_index", -100);
  const double eps = eps_of(p);
  std::vector<int64_t> tg(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) tg[static_cast<size_t>(r)] = static_cast<int64_t>(t[1].at(0, r));
  std::vector<ref::CrossEntropyRow<double>> ce(static_cast<size_t>(rows));
  ref::cross_entropy_reference<double>(t[0].data, rows, n, ld, tg.data(), ce.data(), 1, ig);
  OutputRef loss, dl;
  loss.ref.assign(static_cast<size_t>(rows), 0.0);
  loss.aux.assign(6, std::vector<double>(loss.ref.size(), 0.0));
  dl.ref.assign(static_cast<size_t>(rows * n), 0.0);
  dl.aux.assign(3, std::vector<double>(dl.ref.size(), 0.0));
  std::vector<double> prob(static_cast<size_t>(n)), mag(prob.size());
  for (int64_t r = 0; r < rows; ++r) {
    const auto& row = ce[static_cast<size_t>(r)];
    const size_t lr = static_cast<size_t>(r);
    if (row.ignored) continue;  // loss 0, dlogits 0, exactly
    const int64_t tc = tg[lr];
    if (tc < 0 || tc >= n) {  // declared: NaN row
      loss.ref[lr] = NAN;
      for (int64_t j = 0; j < n; ++j) dl.ref[static_cast<size_t>(r * n + j)] = NAN;
      continue;
    }
    const double* x = t[0].data + r * ld;
    ref::softmax_row<double>(x, n, prob.data(), mag.data());
    double mean_abs_t = 0;
    for (int64_t j = 0; j < n; ++j) mean_abs_t += std::fabs(x[j] - row.stats.max);
    mean_abs_t /= static_cast<double>(n);
    const double lse = row.stats.log_sum_exp;
    loss.ref[lr] = eps == 0 ? row.loss : (1 - eps) * row.loss + eps * (lse + mean_abs_t);
    loss.aux[0][lr] = 1;
    loss.aux[1][lr] = row.loss;
    loss.aux[2][lr] = finite_or_zero(row.target_dev);
    loss.aux[3][lr] = lse;
    loss.aux[4][lr] = mean_abs_t;
    loss.aux[5][lr] = finite_or_zero(row.stats.weighted_dev);
    for (int64_t j = 0; j < n; ++j) {  // dlogits = p - q
      const size_t l = static_cast<size_t>(r * n + j);
      const double q = (j == tc ? 1 - eps : 0.0) + eps / static_cast<double>(n);
      dl.ref[l] = prob[static_cast<size_t>(j)] - q;
      dl.aux[0][l] = prob[static_cast<size_t>(j)];
      dl.aux[1][l] = finite_or_zero(mag[static_cast<size_t>(j)]);
      dl.aux[2][l] = q;
    }
  }
  out = {std::move(loss), std::move(dl)};
  return ok_status();
}

Status bound(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const DType dt = p.dt("dtype");
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const double eps = eps_of(p), g3 = gamma_n(3, u32);
  const SoftmaxModel m = model_of(dt, n, a);
  OutputRef &loss = out[0], &dl = out[1];
  loss.tol.assign(loss.ref.size(), 0.0);  // ignored rows: exactly 0; NaN rows: the pattern alone
  dl.tol.assign(dl.ref.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t lr = static_cast<size_t>(r);
    if (loss.aux[0][lr] == 0) continue;
    const double lse = loss.aux[3][lr];
    const SoftmaxRowMags rm{loss.aux[5][lr], finite_or_zero(lse)};
    if (std::isfinite(loss.ref[lr])) {
      const ElementBound z = log_softmax_bounds(m, rm).ceiling;
      loss.tol[lr] = ce_loss_tol(z, n, eps, loss.aux[1][lr], loss.aux[2][lr], lse, loss.aux[4][lr], loss.ref[lr]);
    }
    const ElementBound sb = softmax_bounds(m, rm).ceiling;
    for (int64_t j = 0; j < n; ++j) {
      const size_t l = static_cast<size_t>(r * n + j);
      const double d = dl.ref[l];
      if (!std::isfinite(d)) continue;
      const double e32 = (1 + u32) * (sb.tol(dl.aux[0][l], dl.aux[1][l]) + g3 * dl.aux[2][l]) + u32 * std::fabs(d);
      dl.tol[l] = e32 + store_rounding(std::fabs(d) + e32, dt);
    }
  }
  return ok_status();
}

// ---- device reference ------------------------------------------------------------------------------
// The device path is every row-wise op's (rowwise_device_when), the relation included: shift
// transforms a copy of the prepared snapshot, as on the host path.

Status device_fits(const Case& c, const std::vector<DevTensor>& t) {
  const DType dt = Params(c.params).dt("dtype");
  if (!device_ref::input_rows_support(dt) || t.size() != 4 || t[0].dtype != dt || t[1].dtype != DType::kI32)
    return invalid_argument("cross_entropy: no device reference for this case (fp32, fp16 or bf16 logits, int32 targets)");
  return ok_status();
}

device_ref::CrossEntropyF64Problem device_problem(const Params& p, const View2D& v, const Arithmetic& a) {
  const DType dt = p.dt("dtype");
  device_ref::CrossEntropyF64Problem q;
  q.rows = v.rows, q.n = v.cols;
  q.ignore_index = p.i("ignore_index", -100), q.ignore_every = p.i("ignore_every", 0);
  q.inf_every = p.i("inf_every", 0), q.oob_targets = p.b("oob_targets");
  q.eps = eps_of(p);
  q.soft = softmax_scalars(model_of(dt, v.cols, a));
  q.store = store_rounding_for(dt);
  q.f32_max = max_finite(DType::kF32);
  return q;
}

/// prepare on the device: the targets and -inf logits in the snapshot.
Status device_prepare(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_fits(c, t));
  const Params p(c.params);
  const View2D& v = t[0].v;
  return device_ref::cross_entropy_prepare(device_problem(p, v, Arithmetic{}), t[0].ptr, p.dt("dtype"), v.ld,
                                           t[1].as<int32_t>(), ctx.stream);
}

/// The loss and dlogits with their ceilings, each tolerance outright in mag (DeviceOutput's
/// defaults).
Status device_compute(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                      std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_fits(c, t));
  if (out.size() != 2) return invalid_argument("cross_entropy: the device reference has two outputs");
  const Params p(c.params);
  const DType dt = p.dt("dtype");
  const View2D& v = t[0].v;
  const device_ref::CrossEntropyF64Problem q = device_problem(p, v, a);
  return device_ref::cross_entropy_f64_reference(q, device_ref::input_rows(t[0].ptr, v.cols, v.ld, dt),
                                                 t[1].as<int32_t>(), out[0].ref, out[0].mag, out[1].ref, out[1].mag,
                                                 ctx.stream);
}

// ---- self-check ----------------------------------------------------------------------
/// The host reference's loss (with smoothing) and dlogits against a long-double evaluation of
/// -sum_j q_j log softmax_j and softmax - q on one row.
Status self_check(std::string& report) {
  const int64_t n = 29, tc = 11;
  const double eps = 0.1;
  std::vector<double> x(static_cast<size_t>(n)), prob(x.size());
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = 6 * std::sin(1.3 * static_cast<double>(j)) + 2;
  const int64_t target = tc;
  ref::CrossEntropyRow<double> row;
  ref::cross_entropy_reference<double>(x.data(), 1, n, n, &target, &row);
  ref::softmax_row<double>(x.data(), n, prob.data(), nullptr);
  long double mx = -INFINITY, z = 0, sum_t = 0;
  for (double v : x) mx = std::max<long double>(mx, v);
  for (double v : x) z += std::exp(static_cast<long double>(v) - mx), sum_t += v - mx;
  const long double L = std::log(z);
  long double want = 0;
  double worst_d = 0;
  for (int64_t j = 0; j < n; ++j) {
    const long double q = (j == tc ? 1 - eps : 0.0) + eps / n, zj = x[static_cast<size_t>(j)] - mx - L;
    want -= q * zj;
    const long double d = std::exp(zj) - q;
    worst_d = std::max(worst_d, static_cast<double>(std::fabs(prob[static_cast<size_t>(j)] - q - d) / std::fabs(d)));
  }
  const double got = (1 - eps) * row.loss + eps * (row.stats.log_sum_exp - static_cast<double>(sum_t) / n);
  const double worst_l = static_cast<double>(std::fabs((got - want) / want));
  if (!(worst_l < 1e-13 && worst_d < 1e-12))
    return internal_error(
        fmt::format("cross_entropy: host reference off by {:.3g} (loss) / {:.3g} (dlogits), relative", worst_l, worst_d));
  report += fmt::format("cross_entropy: host loss (smoothing 0.1) within {:.2g} and dlogits within {:.2g} of a "
                        "long-double evaluation (29 classes)\n",
                        worst_l, worst_d);
  return ok_status();
}

OpDef make() {
  OpDef op;
  op.name = "cross_entropy";
  op.description =
      "fused softmax + cross-entropy, int32 class targets, label smoothing and ignore_index, reduction 'none': fp32 "
      "loss per row and dlogits = softmax - q in the logits' dtype";
  op.params = params();
  op.tensors = tensors();
  op.check = check;
  op.prepare = prepare;
  op.reference = reference;
  op.bound = bound;
  op.bound_name = "cross-entropy ceiling";
  op.device_reference = {.when = rowwise_device_when, .prepare = device_prepare, .compute = device_compute};
  op.transform = [](const Case& c, std::vector<unsigned char*>& img) {
    if (Params(c.params).s("relation") != "shift") return false;
    shift_tensor(c, img, 0);
    return true;
  };
  op.self_check = self_check;
  return op;
}

// ---- binding ------------------------------------------------------------------------
ASSAY_REGISTER(register_op(make()));
ASSAY_REGISTER(add_variant(
    "cross_entropy",
    {.name = "fused",
     .description = "one warp (n <= 1024) or block per row: online max and sum, then dlogits and the smoothing sum",
     .launch = cross_entropy_launch(kernels::rowwise::cross_entropy_fwd_bwd),
     .source = "kernels/rowwise/cross_entropy.cu"}));

}  // namespace
}  // namespace assay::rowwise
