// softmax / softmax_bwd: softmax and log-softmax over rows, forward and backward.
//
// Sections: binding, generators, references, bound, properties.
// Binding: kernels/rowwise/softmax.cu (online single pass); mutants in
// tests/mutants/rowwise/ register beside them.
// References: references/host/softmax.h (max first, then exp, sum, divide) and
// backward.h, in double.
// Bounds: forward softmax_bounds / log_softmax_bounds (harness/bounds.h) with
// the kernel's declared rescale count: each thread scans at most ceil(n/32)
// elements (at least a warp per row), then at most 10 merges (1024 threads),
// so no term meets more than ceil(n/32) + 10 running-max rescalings.
// Backward, softmax: dx_i = y_i (dy_i - s), s = sum_j y_j dy_j in fp32; s errs
// by gamma_n sum_j y_j|dy_j| ([H] (3.5)), the products y_j dy_j by u each,
// dy_i - s by u, y_i (.) by u: |dx^ - dx| <= gamma_{n+3} y_i (|dy_i| + sum_j
// y_j |dy_j|) = gamma_{n+3} mag_i (backward.h's mag). Log-softmax: dx_i = dz_i -
// exp(z_i) S, S = sum dz_j (gamma_{n-1} sum |dz_j|), expf 2 ulp (+0.5: 5u),
// product and difference u each: gamma_{n+7} (|dz_i| + exp(z_i) sum |dz_j|).
// Both + half an ulp of the output dtype (fp16/bf16 stores) and, for
// underflow, (n + 2) min_normal(fp32). Inputs y and dy are exact (their dtype).
// Properties (case param "relation"):
// - "shift": every row shifted by a constant c (rounded into the dtype): the
//   output must not move beyond both tolerances and the change of the exact
//   result (zero when the shift is exact, as for small-integer rows);
// - "rowsum" (softmax forward): each finite row of y sums to 1 within the
//   sum of its element tolerances plus the rounding of the host's sum.
// Value classes: mean-spread rows, masked rows (all -inf, "masked_every"),
// single +inf / NaN injections, very large logits (near-overflow), constant
// rows (small-int with range 0), lengths below a warp, around 32, 128, 1024 and
// not multiples of 4, row counts not multiples of the rows per block.
#include <cmath>
#include <vector>

#include "properties/rowwise_common.h"
#include "properties/rowwise_registry.h"
#include "references/host/backward.h"
#include "references/host/softmax.h"

namespace assay::rowwise {
namespace {

using kernels::rowwise::softmax_bwd;
using kernels::rowwise::softmax_fwd;

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

bool register_softmax_fwd(VariantInfo info, SoftmaxFwdFn fn) {
  fwd_registry().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                              return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[0].v.rows,
                                        t[0].v.cols, bool_or(c, "log", false), s);
                            }});
  return true;
}
bool register_softmax_bwd(VariantInfo info, SoftmaxBwdFn fn) {
  bwd_registry().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                              return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr,
                                        t[2].v.ld, t[0].v.rows, t[0].v.cols, bool_or(c, "log", false), s);
                            }});
  return true;
}

namespace {

[[maybe_unused]] const bool kFwd = register_softmax_fwd(
    {"online", "one warp (n <= 1024) or block per row, online max and sum in one pass, then one pass writing y", false,
     true, "kernels/rowwise/softmax.cu"},
    softmax_fwd);
[[maybe_unused]] const bool kBwd = register_softmax_bwd(
    {"rowwise", "one warp or block per row: the row's dot (or sum), then dx", false, true, "kernels/rowwise/softmax.cu"},
    softmax_bwd);

constexpr int64_t kMaxRows = 4096, kMaxN = 16384, kMaxElems = 1 << 20;

// ---- generators -----------------------------------------------------------------
Case build_fwd(const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
  Case c;
  c.op = "softmax";
  c.params = p;
  const DType dt = *parse_dtype(p["dtype"].get<std::string>());
  const int64_t rows = p["rows"].get<int64_t>(), n = p["n"].get<int64_t>();
  c.tensors = {make_tensor("X", Role::kIn, dt, rows, n, pad, off, r[0]),
               make_tensor("Y", Role::kOut, dt, rows, n, pad, off, {})};
  return c;
}
Case build_bwd(const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
  Case c;
  c.op = "softmax_bwd";
  c.params = p;
  const DType dt = *parse_dtype(p["dtype"].get<std::string>());
  const int64_t rows = p["rows"].get<int64_t>(), n = p["n"].get<int64_t>();
  c.tensors = {make_tensor("Y", Role::kIn, dt, rows, n, pad, off, r[0]),
               make_tensor("dY", Role::kIn, dt, rows, n, pad, off, r[1]),
               make_tensor("dX", Role::kOut, dt, rows, n, pad, off, {})};
  return c;
}

rc::Gen<nlohmann::json> gen_params(const GenConfig& cfg, bool fwd) {
  const int64_t cap = std::min<int64_t>(cfg.max_dim, kMaxN);
  return rc::gen::exec([cap, fwd] {
    const int64_t n = *gen_row_length(cap);
    const int64_t rows = *gen_extent(std::max<int64_t>(1, std::min<int64_t>(std::min<int64_t>(kMaxRows, 16 * cap), kMaxElems / std::max<int64_t>(n, 1))), {4, 8, 32}, 1);
    nlohmann::json p = {{"rows", rows}, {"n", n}, {"log", *rc::gen::arbitrary<bool>()}};
    p["dtype"] = std::string(dtype_name(*rc::gen::elementOf(activation_dtypes())));
    if (fwd && *rc::gen::inRange(0, 8) == 0) p["masked_every"] = *rc::gen::inRange<int64_t>(1, 5);
    const int rel = *rc::gen::inRange(0, 8);
    if (rel == 0) p["relation"] = "shift", p["shift"] = *rc::gen::elementOf(std::vector<double>{64, -3.5, 1024, 0.25});
    if (rel == 1 && fwd) p["relation"] = "rowsum";
    return p;
  });
}

rc::Gen<Case> gen_fwd(const GenConfig& cfg) {
  return rc::gen::exec([cfg] {
    nlohmann::json p = *gen_params(cfg, true);
    const DType dt = *parse_dtype(p["dtype"].get<std::string>());
    const ValueRecipe r = *gen_row_recipe(dt, kSpecialAll);
    const int64_t pad = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 3, 8});
    const int64_t off = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 2});
    return build_fwd(p, {r}, pad, off);
  });
}
rc::Gen<Case> gen_bwd(const GenConfig& cfg) {
  return rc::gen::exec([cfg] {
    nlohmann::json p = *gen_params(cfg, false);
    const DType dt = *parse_dtype(p["dtype"].get<std::string>());
    // Y's recipe gives logits; prepare turns them into a (log-)softmax output in the dtype.
    const ValueRecipe ry = *gen_row_recipe(dt, 0), rdy = *gen_row_recipe(dt, 0, {ValueClass::kNormal, ValueClass::kUniform,
                                                                              ValueClass::kSameSign, ValueClass::kSmallInt,
                                                                              ValueClass::kLogUniform, ValueClass::kMeanSpread});
    const int64_t pad = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 3, 8});
    const int64_t off = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 2});
    return build_bwd(p, {ry, rdy}, pad, off);
  });
}

Status validate_common(const Case& c, const std::vector<std::pair<std::string, Role>>& layout) {
  ASSAY_ASSIGN_OR_RETURN(DType dt, param_dtype(c));
  ASSAY_ASSIGN_OR_RETURN(int64_t rows, param_int(c, "rows", 0, kMaxRows));
  ASSAY_ASSIGN_OR_RETURN(int64_t n, param_int(c, "n", 0, kMaxN));
  if (c.params.contains("log") && !c.params["log"].is_boolean())
    return invalid_argument(c.op + " case: params.log must be a boolean");
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, layout));
  for (const auto& t : c.tensors)
    if (t.desc.dtype != dt || t.desc.rank() != 2 || t.desc.shape != std::vector<int64_t>{rows, n})
      return invalid_argument(fmt::format("{} case: tensor {} must be {} [{}, {}]", c.op, t.name, dtype_name(dt), rows, n));
  const std::string rel = str_or(c, "relation", "");
  if (!rel.empty() && rel != "shift" && rel != "rowsum")
    return invalid_argument(c.op + " case: params.relation must be \"shift\" or \"rowsum\"");
  if (rel == "shift" && !(std::isfinite(num_or(c, "shift", NAN))))
    return invalid_argument(c.op + " case: params.shift must be a finite number");
  if (int_or(c, "masked_every", 0) < 0) return invalid_argument(c.op + " case: params.masked_every must be >= 0");
  return ok_status();
}

// ---- references and bounds --------------------------------------------------------
SoftmaxModel model_of(const Case& c, DType dt, int64_t n) {
  SoftmaxModel m;
  m.in = dt;
  m.acc = DType::kF32;
  m.out = dt;
  m.n = n;
  m.rescales = std::min<int64_t>(std::max<int64_t>(n - 1, 0), (n + 31) / 32 + 10);
  (void)c;
  return m;
}

// Rows r with r % masked_every == 0 become all -inf (attention-style masking).
void mask_rows(const Case& c, std::vector<unsigned char*>& img) {
  const int64_t every = int_or(c, "masked_every", 0);
  if (every <= 0) return;
  const auto& d = c.tensors[0].desc;
  const View2D v = view_of(d);
  for (int64_t r = 0; r < v.rows; r += every)
    for (int64_t j = 0; j < v.cols; ++j) poke(d.dtype, img[0], d.offset + r * v.ld + j, -INFINITY);
}

Status reference_fwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const bool log = bool_or(c, "log", false);
  OutputRef y;
  y.ref.resize(static_cast<size_t>(rows * n));
  y.tol.resize(y.ref.size());
  std::vector<double> mag(y.ref.size());
  std::vector<ref::SoftmaxRowStats<double>> st(static_cast<size_t>(rows));
  if (log)
    ref::log_softmax_reference<double>(t[0].data, rows, n, t[0].v.ld, y.ref.data(), mag.data(), st.data());
  else
    ref::softmax_reference<double>(t[0].data, rows, n, t[0].v.ld, y.ref.data(), mag.data(), st.data());
  const SoftmaxModel m = model_of(c, dt, n);
  for (int64_t r = 0; r < rows; ++r) {
    SoftmaxRowMags rm;
    rm.weighted_dev = std::isfinite(st[static_cast<size_t>(r)].weighted_dev) ? st[static_cast<size_t>(r)].weighted_dev : 0;
    rm.log_sum_exp = std::isfinite(st[static_cast<size_t>(r)].log_sum_exp) ? st[static_cast<size_t>(r)].log_sum_exp : 0;
    const BoundPair b = log ? log_softmax_bounds(m, rm) : softmax_bounds(m, rm);
    for (int64_t i = 0; i < n; ++i) {
      const size_t l = static_cast<size_t>(r * n + i);
      y.tol[l] = b.ceiling.tol(std::fabs(y.ref[l]), std::isfinite(mag[l]) ? mag[l] : 0);
    }
  }
  out = {std::move(y)};
  return ok_status();
}

void prepare_bwd(const Case& c, std::vector<unsigned char*>& img) {
  // Y = softmax(logits) (or log-softmax), rounded into the dtype: a realistic saved output.
  const auto& d = c.tensors[0].desc;
  const View2D v = view_of(d);
  std::vector<double> x(static_cast<size_t>(v.cols)), y(static_cast<size_t>(v.cols));
  for (int64_t r = 0; r < v.rows; ++r) {
    for (int64_t j = 0; j < v.cols; ++j) x[static_cast<size_t>(j)] = peek(d.dtype, img[0], d.offset + r * v.ld + j);
    if (bool_or(c, "log", false))
      ref::log_softmax_row<double>(x.data(), v.cols, y.data(), nullptr);
    else
      ref::softmax_row<double>(x.data(), v.cols, y.data(), nullptr);
    for (int64_t j = 0; j < v.cols; ++j) poke(d.dtype, img[0], d.offset + r * v.ld + j, y[static_cast<size_t>(j)]);
  }
}

Status reference_bwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const int64_t rows = t[0].v.rows, n = t[0].v.cols, ld = t[0].v.ld;
  const bool log = bool_or(c, "log", false);
  OutputRef dx;
  dx.ref.resize(static_cast<size_t>(rows * n));
  dx.tol.resize(dx.ref.size());
  std::vector<double> mag(dx.ref.size());
  if (log)
    ref::log_softmax_backward<double>(t[0].data, t[1].data, rows, n, ld, dx.ref.data(), mag.data());
  else
    ref::softmax_backward<double>(t[0].data, t[1].data, rows, n, ld, dx.ref.data(), mag.data());
  const double u = unit_roundoff(DType::kF32);
  const double g = gamma_n(n + (log ? 7 : 3), u) * (1 + gamma_n(n + 4, 0x1p-53));  // + the reference's own mag rounding
  const double fl = static_cast<double>(n + 2) * min_normal(DType::kF32);
  for (size_t l = 0; l < dx.ref.size(); ++l) {
    const double e32 = g * mag[l] + fl;
    dx.tol[l] = e32 + store_rounding(std::fabs(dx.ref[l]) * (1 + 0x1p-9) + e32, dt);
  }
  out = {std::move(dx)};
  return ok_status();
}

// ---- properties ---------------------------------------------------------------------
void rowsum(const Case& c, const std::vector<HostTensor>&, const std::vector<HostTensor>& out,
            const std::vector<OutputRef>& refs, std::vector<Failure>& f) {
  if (str_or(c, "relation", "") != "rowsum" || bool_or(c, "log", false)) return;
  const HostTensor& y = out[0];
  int64_t bad = 0, first = -1;
  double worst = 0, worst_tol = 0;
  for (int64_t r = 0; r < y.v.rows; ++r) {
    double s = 0, tol = 0, sa = 0;
    bool finite = true;
    for (int64_t j = 0; j < y.v.cols; ++j) {
      const size_t l = static_cast<size_t>(r * y.v.cols + j);
      finite = finite && std::isfinite(refs[0].ref[l]);
      s += y.at(r, j);
      sa += std::fabs(y.at(r, j));
      tol += refs[0].tol[l];
    }
    if (!finite || y.v.cols == 0) continue;
    tol += gamma_n(y.v.cols, 0x1p-53) * sa + 1e-300;
    if (!(std::fabs(s - 1) <= tol) && bad++ == 0) first = r, worst = s, worst_tol = tol;
  }
  if (bad > 0)
    f.push_back({FailureKind::kProperty, "Y", bad, -1,
                 fmt::format("row {} of the softmax sums to {:.9g}, not 1 within {:.3g} (the row's tolerances)", first,
                             worst, worst_tol)});
}

RowOpConfig fwd_config() {
  RowOpConfig cfg;
  cfg.name = "softmax";
  cfg.description = "softmax / log-softmax over rows (params.log), fp32/fp16/bf16 with fp32 statistics";
  cfg.def.op = "softmax";
  cfg.def.bound_name = "softmax ceiling";
  cfg.def.prepare = mask_rows;
  cfg.def.reference = reference_fwd;
  cfg.def.properties = rowsum;
  cfg.def.transform = [](const Case& c, std::vector<unsigned char*>& img) {
    if (str_or(c, "relation", "") != "shift") return false;
    shift_tensor(c, img, 0);
    return true;
  };
  cfg.registry = &fwd_registry();
  cfg.gen = gen_fwd;
  cfg.build = build_fwd;
  cfg.validate = [](const Case& c) { return validate_common(c, {{"X", Role::kIn}, {"Y", Role::kOut}}); };
  cfg.shrink_keys = {{"rows", 1}, {"n", 1}};
  cfg.self_check_note = "host reference checked against multiprecision in tests/references/rowwise_ref_test.cpp";
  return cfg;
}
RowOpConfig bwd_config() {
  RowOpConfig cfg;
  cfg.name = "softmax_bwd";
  cfg.description = "backward of softmax / log-softmax from the saved output (params.log)";
  cfg.def.op = "softmax_bwd";
  cfg.def.bound_name = "softmax-backward ceiling";
  cfg.def.prepare = prepare_bwd;
  cfg.def.reference = reference_bwd;
  cfg.def.transform = [](const Case& c, std::vector<unsigned char*>& img) {
    // dx is invariant to adding a constant to dy for softmax (sum y = 1), not for log-softmax.
    if (str_or(c, "relation", "") != "shift" || bool_or(c, "log", false)) return false;
    shift_tensor(c, img, 1);
    return true;
  };
  cfg.registry = &bwd_registry();
  cfg.gen = gen_bwd;
  cfg.build = build_bwd;
  cfg.validate = [](const Case& c) {
    return validate_common(c, {{"Y", Role::kIn}, {"dY", Role::kIn}, {"dX", Role::kOut}});
  };
  cfg.shrink_keys = {{"rows", 1}, {"n", 1}};
  cfg.self_check_note = "host backward gradient-checked in tests/references/backward_ref_test.cpp";
  return cfg;
}

[[maybe_unused]] const bool kSpecs = register_spec(std::make_unique<RowOpSpec>(fwd_config())) &&
                                     register_spec(std::make_unique<RowOpSpec>(bwd_config()));

}  // namespace
}  // namespace assay::rowwise
