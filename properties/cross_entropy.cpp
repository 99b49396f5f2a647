// cross_entropy: fused softmax + cross-entropy with class-index targets (int32),
// label smoothing and ignore_index, reduction 'none': per row the loss (fp32)
// and dlogits = softmax - q (the gradient of sum_r loss_r, in the logits' dtype).
//
// Sections: binding, generators, references, bound, properties.
// Binding: kernels/rowwise/cross_entropy.cu (online max and sum as softmax_fwd,
// then dlogits and the smoothing sum, one warp or block per row); mutants in
// tests/mutants/rowwise/ register through register_cross_entropy.
// References: references/host/softmax.h cross_entropy_reference (nll = L - t_c,
// t = x - max, L = log sum exp t; ignored rows 0, out-of-range targets NaN, as
// declared) and softmax_row, in double; with smoothing eps (the fp32 value the
// kernel receives), q_j = (1 - eps)[j == c] + eps/n and
//   loss = -sum_j q_j z_j = (1 - eps)(L - t_c) + eps (L - mean_j t_j)
// (z = log-softmax); eps = 0 is the nll alone (as the kernel: no 0 * Inf).
// Bounds (u = 2^-24; SoftmaxModel with fp32 accumulation and the online
// kernel's rescale count, as softmax.cpp: ceil(n/32) + 10):
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
#include <cmath>
#include <vector>

#include "properties/rowwise_common.h"
#include "properties/rowwise_registry.h"
#include "references/host/softmax.h"

namespace assay::rowwise {
namespace {

// ---- binding ---------------------------------------------------------------------
std::vector<TensorOpVariant>& registry() {
  static std::vector<TensorOpVariant> v;
  return v;
}

}  // namespace

// Tensors: logits [rows, n], target [rows] (int32), loss [rows] (fp32), dlogits [rows, n].
bool register_cross_entropy(VariantInfo info, CrossEntropyFn fn) {
  registry().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                          return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].as<const int32_t>(), t[0].v.rows,
                                    t[0].v.cols, int_or(c, "ignore_index", -100),
                                    static_cast<float>(num_or(c, "smoothing", 0)), t[2].as<float>(), t[3].ptr,
                                    t[3].v.ld, s);
                        }});
  return true;
}

namespace {

[[maybe_unused]] const bool kRegistered = register_cross_entropy(
    {"fused", "one warp (n <= 1024) or block per row: online max and sum, then dlogits and the smoothing sum", false,
     true, "kernels/rowwise/cross_entropy.cu"},
    kernels::rowwise::cross_entropy_fwd_bwd);

constexpr int64_t kMaxRows = 4096, kMaxN = 16384, kMaxElems = 1 << 20;
constexpr double u32 = 0x1p-24, u64 = 0x1p-53;

// ---- generators -----------------------------------------------------------------
Case build(const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
  Case c;
  c.op = "cross_entropy";
  c.params = p;
  const DType dt = *parse_dtype(p["dtype"].get<std::string>());
  const int64_t rows = p["rows"].get<int64_t>(), n = p["n"].get<int64_t>();
  ValueRecipe rt = r[1];
  if (rt.cls == ValueClass::kSameSign) rt.scale = static_cast<double>(n);  // targets follow n: [0, n]
  c.tensors = {make_tensor("logits", Role::kIn, dt, rows, n, pad, off, r[0]),
               make_tensor("target", Role::kIn, DType::kI32, -1, rows, 0, off, rt),
               make_tensor("loss", Role::kOut, DType::kF32, -1, rows, 0, off, {}),
               make_tensor("dlogits", Role::kOut, dt, rows, n, pad, off, {})};
  return c;
}

rc::Gen<Case> gen(const GenConfig& cfg) {
  const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(cfg.max_dim, kMaxN));
  return rc::gen::exec([cap] {
    const int64_t n = *gen_row_length(cap);
    const int64_t rows = *gen_extent(
        std::max<int64_t>(1, std::min<int64_t>(std::min<int64_t>(kMaxRows, 16 * cap), kMaxElems / n)), {4, 8, 32}, 1);
    const DType dt = *gen_element(activation_dtypes());
    nlohmann::json p = {{"dtype", std::string(dtype_name(dt))}, {"rows", rows}, {"n", n}};
    p["ignore_index"] = *gen_element<int64_t>({-100, -100, -1, 0});
    p["smoothing"] = *gen_element<double>({0, 0.1});
    p["ignore_every"] = *gen_element<int64_t>({0, 1, 2, 3, 4, 7});
    if (*gen_weighted_index({7, 1}) == 1) p["oob_targets"] = true;
    if (*gen_weighted_index({3, 1}) == 1) p["inf_every"] = *gen_element<int64_t>({1, 2, 3, 5});
    if (*gen_weighted_index({7, 1}) == 1)
      p["relation"] = "shift", p["shift"] = *gen_element<double>({64, -3.5, 1024, 0.25});
    RecipeOptions to;
    to.classes = {ValueClass::kSameSign};
    to.dtype = DType::kI32;
    to.specials = kSpecialPosInf | kSpecialNegInf;  // INT32_MAX / INT32_MIN: out of range (with oob_targets)
    to.inject_percent = 20;
    const ValueRecipe rx = *gen_row_recipe(dt, kSpecialAll), rt = *gen_value_recipe(to);
    const int64_t pad = *gen_element<int64_t>({0, 0, 0, 1, 3, 8});
    const int64_t off = *gen_element<int64_t>({0, 0, 0, 1, 2});
    return build(p, {rx, rt}, pad, off);
  });
}

Status validate(const Case& c) {
  ASSAY_ASSIGN_OR_RETURN(DType dt, param_dtype(c));
  ASSAY_ASSIGN_OR_RETURN(int64_t rows, param_int(c, "rows", 0, kMaxRows));
  ASSAY_ASSIGN_OR_RETURN(int64_t n, param_int(c, "n", 1, kMaxN));
  if (c.params.contains("ignore_index"))
    ASSAY_RETURN_IF_ERROR(param_int(c, "ignore_index", INT32_MIN, INT32_MAX).status());
  if (c.params.contains("smoothing") && !(num_or(c, "smoothing", NAN) >= 0 && num_or(c, "smoothing", NAN) <= 1))
    return invalid_argument("cross_entropy case: params.smoothing must be a number in [0, 1]");
  for (const char* k : {"ignore_every", "inf_every"})
    if (c.params.contains(k)) ASSAY_RETURN_IF_ERROR(param_int(c, k, 0, kMaxRows).status());
  if (c.params.contains("oob_targets") && !c.params["oob_targets"].is_boolean())
    return invalid_argument("cross_entropy case: params.oob_targets must be a boolean");
  const std::string rel = str_or(c, "relation", "");
  if (c.params.contains("relation") && (rel != "shift" || !std::isfinite(num_or(c, "shift", NAN))))
    return invalid_argument("cross_entropy case: params.relation must be \"shift\" with a finite params.shift");
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(
      c, {{"logits", Role::kIn}, {"target", Role::kIn}, {"loss", Role::kOut}, {"dlogits", Role::kOut}}));
  auto want = [&](const TensorSpec& t, DType d, std::vector<int64_t> shape, const char* what) -> Status {
    if (t.desc.dtype != d || t.desc.shape != shape)
      return invalid_argument(fmt::format("cross_entropy case: tensor {} must be {} {}", t.name, dtype_name(d), what));
    return ok_status();
  };
  ASSAY_RETURN_IF_ERROR(want(c.tensors[0], dt, {rows, n}, "[rows, n]"));
  ASSAY_RETURN_IF_ERROR(want(c.tensors[1], DType::kI32, {rows}, "[rows]"));
  ASSAY_RETURN_IF_ERROR(want(c.tensors[2], DType::kF32, {rows}, "[rows]"));
  ASSAY_RETURN_IF_ERROR(want(c.tensors[3], dt, {rows, n}, "[rows, n]"));
  return ok_status();
}

// ---- references and bounds --------------------------------------------------------
SoftmaxModel model_of(DType dt, int64_t n) {
  SoftmaxModel m;
  m.in = dt;
  m.acc = DType::kF32;
  m.out = DType::kF32;  // the loss is fp32; dlogits add their own store rounding
  m.n = n;
  m.rescales = std::min<int64_t>(std::max<int64_t>(n - 1, 0), (n + 31) / 32 + 10);
  return m;
}

/// The smoothing the kernel receives (an fp32 value): the reference uses exactly it.
double eps_of(const Case& c) {
  return static_cast<double>(static_cast<float>(num_or(c, "smoothing", 0)));
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
double ce_loss_tol(const ElementBound& z, int64_t n, double eps, double nll, double target_dev, double lse,
                   double mean_abs_t, double loss) {
  const double tol_c = z.tol(nll, target_dev);
  if (eps == 0) return tol_c;
  if (!(static_cast<double>(n) * mean_abs_t < max_finite(DType::kF32))) return INFINITY;
  const double a = lse + mean_abs_t;
  const double tol_a = z.tol(a, mean_abs_t) + (gamma_n(n + 1, u32) / (1 - u32) + gamma_n(n + 1, u64)) * mean_abs_t;
  const double g3 = gamma_n(3, u32);
  return (1 + g3) * ((1 - eps) * tol_c + eps * tol_a) + g3 * loss;
}

/// Rows r % ignore_every == 0 get ignore_index; other targets fold into [0, n) unless oob_targets.
/// Rows r % inf_every == inf_every - 1 (with a target in [0, n)) get every logit but the target's
/// set to -inf (even r / inf_every) or the target's logit set to -inf (odd).
void prepare(const Case& c, std::vector<unsigned char*>& img) {
  const auto& dx = c.tensors[0].desc;
  const auto& dtg = c.tensors[1].desc;
  const View2D v = view_of(dx);
  const int64_t n = v.cols, ig = int_or(c, "ignore_index", -100), every = int_or(c, "ignore_every", 0),
                inf_every = int_or(c, "inf_every", 0);
  const bool oob = bool_or(c, "oob_targets", false);
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

Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const int64_t rows = t[0].v.rows, n = t[0].v.cols, ld = t[0].v.ld;
  const int64_t ig = int_or(c, "ignore_index", -100);
  const double eps = eps_of(c);
  std::vector<int64_t> tg(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) tg[static_cast<size_t>(r)] = static_cast<int64_t>(t[1].at(0, r));
  std::vector<ref::CrossEntropyRow<double>> ce(static_cast<size_t>(rows));
  ref::cross_entropy_reference<double>(t[0].data, rows, n, ld, tg.data(), ce.data(), 1, ig);
  OutputRef loss, dl;
  loss.ref.assign(static_cast<size_t>(rows), 0.0);
  loss.tol.assign(loss.ref.size(), 0.0);
  dl.ref.assign(static_cast<size_t>(rows * n), 0.0);
  dl.tol.assign(dl.ref.size(), 0.0);
  const SoftmaxModel m = model_of(dt, n);
  const double g3 = gamma_n(3, u32);
  std::vector<double> p(static_cast<size_t>(n)), mag(p.size());
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
    ref::softmax_row<double>(x, n, p.data(), mag.data());
    SoftmaxRowMags rm;
    rm.weighted_dev = finite_or_zero(row.stats.weighted_dev);
    rm.log_sum_exp = finite_or_zero(row.stats.log_sum_exp);
    // loss
    double mean_abs_t = 0;
    for (int64_t j = 0; j < n; ++j) mean_abs_t += std::fabs(x[j] - row.stats.max);
    mean_abs_t /= static_cast<double>(n);
    const double lse = row.stats.log_sum_exp;
    const double l = eps == 0 ? row.loss : (1 - eps) * row.loss + eps * (lse + mean_abs_t);
    loss.ref[lr] = l;
    if (std::isfinite(l)) {
      const ElementBound z = log_softmax_bounds(m, rm).ceiling;
      loss.tol[lr] = ce_loss_tol(z, n, eps, row.loss, finite_or_zero(row.target_dev), lse, mean_abs_t, l);
    }
    // dlogits = p - q
    const ElementBound sb = softmax_bounds(m, rm).ceiling;
    for (int64_t j = 0; j < n; ++j) {
      const size_t l2 = static_cast<size_t>(r * n + j);
      const double q = (j == tc ? 1 - eps : 0.0) + eps / static_cast<double>(n);
      const double d = p[static_cast<size_t>(j)] - q;
      dl.ref[l2] = d;
      if (!std::isfinite(d)) continue;
      const double e32 =
          (1 + u32) * (sb.tol(p[static_cast<size_t>(j)], finite_or_zero(mag[static_cast<size_t>(j)])) + g3 * q) +
          u32 * std::fabs(d);
      dl.tol[l2] = e32 + store_rounding(std::fabs(d) + e32, dt);
    }
  }
  out = {std::move(loss), std::move(dl)};
  return ok_status();
}

// ---- properties ---------------------------------------------------------------------
bool shift_logits(const Case& c, std::vector<unsigned char*>& img) {
  if (str_or(c, "relation", "") != "shift") return false;
  shift_tensor(c, img, 0);
  return true;
}

RowOpConfig config() {
  RowOpConfig cfg;
  cfg.name = "cross_entropy";
  cfg.description =
      "fused softmax + cross-entropy, int32 class targets, label smoothing and ignore_index, reduction 'none': fp32 "
      "loss per row and dlogits = softmax - q in the logits' dtype";
  cfg.def.op = "cross_entropy";
  cfg.def.bound_name = "cross-entropy ceiling";
  cfg.def.prepare = prepare;
  cfg.def.reference = reference;
  cfg.def.transform = shift_logits;
  cfg.registry = &registry();
  cfg.gen = gen;
  cfg.build = build;
  cfg.validate = validate;
  cfg.shrink_keys = {{"rows", 1}, {"n", 1}, {"ignore_every", 0}, {"inf_every", 0}};
  cfg.self_check_note = "host cross-entropy checked against multiprecision in tests/references/rowwise_ref_test.cpp";
  return cfg;
}

const RowOpConfig& the_config() {
  static const RowOpConfig cfg = config();
  return cfg;
}

[[maybe_unused]] const bool kSpec = register_spec(std::make_unique<RowOpSpec>(the_config()));

}  // namespace

const TensorOpDef& cross_entropy_def() {
  return the_config().def;
}

}  // namespace assay::rowwise
