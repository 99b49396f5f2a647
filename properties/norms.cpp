// layernorm / layernorm_bwd / rmsnorm / rmsnorm_bwd over rows; fp32, fp16 or
// bf16 activations with fp32 statistics (saved mean and rstd, fp32 dgamma and
// dbeta).
//
// Sections: binding, generators, references, bounds, properties.
// Binding: kernels/rowwise/norms.cu (Welford forward, column-parallel
// deterministic dgamma/dbeta); mutants in tests/mutants/rowwise/.
// References: references/host/norms.h (two-pass statistics in double) and
// backward.h (from the kernel's saved fp32 mean and rstd, as the kernel uses).
// Bounds (u = 2^-24):
// - Y: layernorm_bounds / rmsnorm_bounds (harness/bounds.h), Welford or
//   two-pass statistics; the conditioning term of a large mean over a small
//   spread is what a one-pass E[x^2] - E[x]^2 kernel breaks.
// - saved mean: the Welford running-mean error e_mu = max(gamma_{n+1} A,
//   u X~ (n+14)/2) (bounds.h's variance_bounds derivation) + u|mean| for the store.
// - saved rstd, relative: r = (e_V + u eps)/(V + eps) with e_V the variance
//   ceiling; r' = (1+r)(1+u) - 1 (the + eps); rho = 1/sqrt(1-r') - 1; rsqrtf
//   2 ulp (5u with the store): (1+rho)(1+5u) - 1. RMSNorm: r = gamma_{n+2}
//   (mean of squares, positive terms, [H] (4.4)) + flushed squares.
// - dX: xhat_i = (x_i - mean) rstd errs by 2u (|x_i| + |mean|) rstd = 2u xabs_i;
//   dxhat = dy gamma by u; the two row means by gamma_{n+1} of their absolute
//   sums; the products, the two subtractions and the final * rstd by u each:
//   in all |dx^ - dx| <= gamma_{n+12} dx_mag (backward.h's magnitude, which
//   carries xabs), + half an ulp of the output dtype, + an underflow floor.
// - dgamma: per term dy xhat errs by 3u |dy| xabs, the sum over rows by
//   gamma_{rows-1}: gamma_{rows+4} dgamma_mag. dbeta: gamma_{rows} dbeta_mag
//   ([H] (3.5), any order).
// - Declared limits: underflow (an fp32 result in the subnormal range errs by up to
//   2^-150 absolute) adds floors carried through each formula; where an fp32
//   intermediate may overflow (n (2 max|x|)^2 for LayerNorm's squares, n mean(x^2)
//   for RMSNorm's, |x| + |mean| or the row and column sums in the backward) the
//   element has no bound (+Inf): every fp32 kernel of this shape overflows there.
// Properties (case param "relation"): "shift" (LayerNorm forward and
// backward: y, dx, dgamma and dbeta do not move when x shifts by a constant;
// the saved mean moves by it, which the compare takes from the references).
// Value classes: mean-spread rows (large mean, tiny spread), constant rows
// ("constant_every": zero variance, and zero rows for RMSNorm), near-overflow,
// subnormal, NaN/Inf injection; lengths below a warp, around 32, 128, 1024,
// not multiples of 4; rows not multiples of the rows per block.
#include <cmath>
#include <vector>

#include "properties/rowwise_common.h"
#include "properties/rowwise_registry.h"
#include "references/host/backward.h"
#include "references/host/norms.h"

namespace assay::rowwise {
namespace {

std::vector<TensorOpVariant>& reg(int which) {
  static std::vector<TensorOpVariant> v[4];
  return v[which];
}
constexpr int kLn = 0, kLnBwd = 1, kRms = 2, kRmsBwd = 3;

}  // namespace

// ---- binding ---------------------------------------------------------------------
bool register_layernorm_fwd(VariantInfo info, LayerNormFwdFn fn) {
  reg(kLn).push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                        return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr,
                                  bool_or(c, "bias", true) ? t[2].ptr : nullptr, t[3].ptr, t[3].v.ld,
                                  t[4].as<float>(), t[5].as<float>(), t[0].v.rows, t[0].v.cols,
                                  static_cast<float>(num_or(c, "eps", 1e-5)), s);
                      }});
  return true;
}
bool register_layernorm_bwd(VariantInfo info, LayerNormBwdFn fn) {
  reg(kLnBwd).push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                           return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr,
                                     t[3].as<const float>(), t[4].as<const float>(), t[5].ptr, t[5].v.ld,
                                     t[6].as<float>(), bool_or(c, "bias", true) ? t[7].as<float>() : nullptr,
                                     t[0].v.rows, t[0].v.cols, s);
                         }});
  return true;
}
bool register_rmsnorm_fwd(VariantInfo info, RmsNormFwdFn fn) {
  reg(kRms).push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                         return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[2].ptr, t[2].v.ld,
                                   t[3].as<float>(), t[0].v.rows, t[0].v.cols,
                                   static_cast<float>(num_or(c, "eps", 1e-5)), s);
                       }});
  return true;
}
bool register_rmsnorm_bwd(VariantInfo info, RmsNormBwdFn fn) {
  reg(kRmsBwd).push_back({std::move(info), [fn](const Case&, const std::vector<DevTensor>& t, cudaStream_t s) {
                            return fn(to_dt(t[0].dtype), t[0].ptr, t[0].v.ld, t[1].ptr, t[1].v.ld, t[2].ptr,
                                      t[3].as<const float>(), t[4].ptr, t[4].v.ld, t[5].as<float>(), t[0].v.rows,
                                      t[0].v.cols, s);
                          }});
  return true;
}

namespace {

const char* const kSrc = "kernels/rowwise/norms.cu";
[[maybe_unused]] const bool kRegistered =
    register_layernorm_fwd({"welford", "warp or block per row, Welford + Chan merge in fp32", false, true, kSrc},
                           kernels::rowwise::layernorm_fwd) &&
    register_layernorm_bwd(
        {"rowwise", "dx per row; dgamma, dbeta by a column kernel in fixed row order", false, true, kSrc},
        kernels::rowwise::layernorm_bwd) &&
    register_rmsnorm_fwd({"rowwise", "warp or block per row, mean of squares in fp32", false, true, kSrc},
                         kernels::rowwise::rmsnorm_fwd) &&
    register_rmsnorm_bwd({"rowwise", "dx per row; dgamma by a column kernel in fixed row order", false, true, kSrc},
                         kernels::rowwise::rmsnorm_bwd);

constexpr int64_t kMaxRows = 4096, kMaxN = 16384, kMaxElems = 1 << 20;
constexpr double u32 = 0x1p-24;

// ---- generators -----------------------------------------------------------------
struct Shape {
  DType dt;
  int64_t rows, n;
};
Shape shape_of(const nlohmann::json& p) {
  return {*parse_dtype(p["dtype"].get<std::string>()), p["rows"].get<int64_t>(), p["n"].get<int64_t>()};
}

Case build(int which, const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
  static const char* const ops[] = {"layernorm", "layernorm_bwd", "rmsnorm", "rmsnorm_bwd"};
  Case c;
  c.op = ops[which];
  c.params = p;
  const Shape s = shape_of(p);
  const auto f32 = DType::kF32;
  auto mat = [&](const char* name, Role role, size_t ri) {
    return make_tensor(name, role, s.dt, s.rows, s.n, pad, off, ri < r.size() ? r[ri] : ValueRecipe{});
  };
  auto vec = [&](const char* name, Role role, DType dt, int64_t len, size_t ri) {
    return make_tensor(name, role, dt, -1, len, 0, 0, ri < r.size() ? r[ri] : ValueRecipe{});
  };
  switch (which) {
    case kLn:
      c.tensors = {mat("X", Role::kIn, 0),          vec("gamma", Role::kIn, s.dt, s.n, 1),
                   vec("beta", Role::kIn, s.dt, s.n, 2), mat("Y", Role::kOut, 9),
                   vec("mean", Role::kOut, f32, s.rows, 9), vec("rstd", Role::kOut, f32, s.rows, 9)};
      break;
    case kLnBwd:
      c.tensors = {mat("X", Role::kIn, 0),
                   mat("dY", Role::kIn, 1),
                   vec("gamma", Role::kIn, s.dt, s.n, 2),
                   vec("mean", Role::kIn, f32, s.rows, 3),
                   vec("rstd", Role::kIn, f32, s.rows, 4),
                   mat("dX", Role::kOut, 9),
                   vec("dgamma", Role::kOut, f32, s.n, 9),
                   vec("dbeta", Role::kOut, f32, bool_or(c, "bias", true) ? s.n : 0, 9)};  // none without a bias
      break;
    case kRms:
      c.tensors = {mat("X", Role::kIn, 0), vec("gamma", Role::kIn, s.dt, s.n, 1), mat("Y", Role::kOut, 9),
                   vec("rstd", Role::kOut, f32, s.rows, 9)};
      break;
    default:
      c.tensors = {mat("X", Role::kIn, 0),
                   mat("dY", Role::kIn, 1),
                   vec("gamma", Role::kIn, s.dt, s.n, 2),
                   vec("rstd", Role::kIn, f32, s.rows, 3),
                   mat("dX", Role::kOut, 9),
                   vec("dgamma", Role::kOut, f32, s.n, 9)};
  }
  return c;
}

rc::Gen<Case> gen(int which, const GenConfig& cfg) {
  const int64_t cap = std::min<int64_t>(cfg.max_dim, kMaxN);
  return rc::gen::exec([cap, which] {
    const int64_t n = *gen_row_length(cap);
    const int64_t rows = *gen_extent(
        std::max<int64_t>(1, std::min<int64_t>(std::min<int64_t>(kMaxRows, 16 * cap), kMaxElems / std::max<int64_t>(n, 1))), {4, 8, 32}, 1);
    const DType dt = *rc::gen::elementOf(activation_dtypes());
    nlohmann::json p = {{"rows", rows}, {"n", n}, {"dtype", std::string(dtype_name(dt))}};
    p["eps"] = *rc::gen::elementOf(  // fp32 values: the kernel takes eps as float
        std::vector<double>{double(1e-5f), double(1e-6f), double(1e-12f), 0.0009765625});
    if (which == kLn || which == kLnBwd) p["bias"] = *rc::gen::elementOf(std::vector<bool>{true, true, false});
    if (*rc::gen::inRange(0, 6) == 0) p["constant_every"] = *rc::gen::inRange<int64_t>(1, 4);
    if ((which == kLn || which == kLnBwd) && *rc::gen::inRange(0, 6) == 0)
      p["relation"] = "shift", p["shift"] = *rc::gen::elementOf(std::vector<double>{64, -1024, 0.5, 4096});
    const bool bwd = which == kLnBwd || which == kRmsBwd;
    std::vector<ValueRecipe> r = {*gen_row_recipe(dt, bwd ? 0 : kSpecialAll)};
    const std::vector<ValueClass> weights = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                             ValueClass::kSmallInt, ValueClass::kLogUniform};
    if (bwd) r.push_back(*gen_row_recipe(dt, 0, weights));  // dY
    r.push_back(*gen_row_recipe(dt, 0, weights));            // gamma
    if (which == kLn) r.push_back(*gen_row_recipe(dt, 0, weights));  // beta
    const int64_t pad = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 3, 8});
    const int64_t off = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 2});
    return build(which, p, r, pad, off);
  });
}

Status validate(int which, const Case& c) {
  ASSAY_ASSIGN_OR_RETURN(DType dt, param_dtype(c));
  ASSAY_ASSIGN_OR_RETURN(int64_t rows, param_int(c, "rows", 0, kMaxRows));
  ASSAY_ASSIGN_OR_RETURN(int64_t n, param_int(c, "n", 0, kMaxN));
  const double eps = num_or(c, "eps", NAN);
  if (!(eps >= 0 && eps < 1) || static_cast<double>(static_cast<float>(eps)) != eps)
    return invalid_argument(c.op + " case: params.eps must be an fp32 value in [0, 1)");
  if (c.params.contains("bias") && !c.params["bias"].is_boolean())
    return invalid_argument(c.op + " case: params.bias must be a boolean");
  const std::string rel = str_or(c, "relation", "");
  if (!rel.empty() && (rel != "shift" || which >= kRms || !std::isfinite(num_or(c, "shift", NAN))))
    return invalid_argument(c.op + " case: params.relation must be \"shift\" (LayerNorm) with a finite params.shift");
  if (int_or(c, "constant_every", 0) < 0) return invalid_argument(c.op + " case: params.constant_every must be >= 0");
  std::vector<std::pair<std::string, Role>> layout;
  switch (which) {
    case kLn:
      layout = {{"X", Role::kIn}, {"gamma", Role::kIn}, {"beta", Role::kIn},
                {"Y", Role::kOut}, {"mean", Role::kOut}, {"rstd", Role::kOut}};
      break;
    case kLnBwd:
      layout = {{"X", Role::kIn},    {"dY", Role::kIn},   {"gamma", Role::kIn},   {"mean", Role::kIn},
                {"rstd", Role::kIn}, {"dX", Role::kOut}, {"dgamma", Role::kOut}, {"dbeta", Role::kOut}};
      break;
    case kRms:
      layout = {{"X", Role::kIn}, {"gamma", Role::kIn}, {"Y", Role::kOut}, {"rstd", Role::kOut}};
      break;
    default:
      layout = {{"X", Role::kIn},   {"dY", Role::kIn},   {"gamma", Role::kIn},
                {"rstd", Role::kIn}, {"dX", Role::kOut}, {"dgamma", Role::kOut}};
  }
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, layout));
  for (const auto& t : c.tensors) {
    const bool stat = t.name == "mean" || t.name == "rstd" || t.name == "dgamma" || t.name == "dbeta";
    const bool mat = t.name == "X" || t.name == "Y" || t.name == "dY" || t.name == "dX";
    const DType want = stat ? DType::kF32 : dt;
    const int64_t len = t.name == "mean" || t.name == "rstd" ? rows
                        : t.name == "dbeta" && !bool_or(c, "bias", true) ? 0
                                                                         : n;
    const std::vector<int64_t> shape = mat ? std::vector<int64_t>{rows, n} : std::vector<int64_t>{len};
    if (t.desc.dtype != want || t.desc.shape != shape)
      return invalid_argument(fmt::format("{} case: tensor {} must be {} of shape [{}]", c.op, t.name, dtype_name(want),
                                          fmt::join(shape, ", ")));
  }
  return ok_status();
}

// ---- prepare: constant rows, saved statistics --------------------------------------------
void constant_rows(const Case& c, std::vector<unsigned char*>& img, bool zero) {
  const int64_t every = int_or(c, "constant_every", 0);
  if (every <= 0) return;
  const auto& d = c.tensors[0].desc;
  const View2D v = view_of(d);
  for (int64_t r = 0; r < v.rows; r += every) {
    const double x0 = zero ? 0.0 : peek(d.dtype, img[0], d.offset + r * v.ld);
    for (int64_t j = 0; j < v.cols; ++j) poke(d.dtype, img[0], d.offset + r * v.ld + j, x0);
  }
}

std::vector<double> row_values(const Case& c, const std::vector<unsigned char*>& img, int64_t r) {
  const auto& d = c.tensors[0].desc;
  const View2D v = view_of(d);
  std::vector<double> x(static_cast<size_t>(v.cols));
  for (int64_t j = 0; j < v.cols; ++j) x[static_cast<size_t>(j)] = peek(d.dtype, img[0], d.offset + r * v.ld + j);
  return x;
}

// The backward's saved statistics: what a correct forward stores (fp32 of the exact values).
void saved_stats(int which, const Case& c, std::vector<unsigned char*>& img) {
  constant_rows(c, img, which == kRmsBwd && int_or(c, "constant_every", 0) % 2 == 0);
  const double eps = static_cast<float>(num_or(c, "eps", 1e-5));
  const View2D v = view_of(c.tensors[0].desc);
  for (int64_t r = 0; r < v.rows; ++r) {
    const std::vector<double> x = row_values(c, img, r);
    if (which == kLnBwd) {
      ref::LayerNormRowStats<double> st;
      std::vector<double> y(x.size());
      ref::layernorm_reference<double, double, double>(x.data(), 1, v.cols, v.cols, nullptr, nullptr, eps, y.data(),
                                                       nullptr, &st);
      poke(DType::kF32, img[3], r, st.mean);
      poke(DType::kF32, img[4], r, st.rstd);
    } else {
      ref::RmsNormRowStats<double> st;
      std::vector<double> y(x.size());
      ref::rmsnorm_reference<double, double, double>(x.data(), 1, v.cols, v.cols, nullptr, eps, y.data(), &st);
      poke(DType::kF32, img[3], r, st.rstd);
    }
  }
}

// ---- references and bounds --------------------------------------------------------
NormModel norm_model(const Case& c, DType dt, int64_t n) {
  NormModel m;
  m.in = dt;
  m.acc = DType::kF32;
  m.out = dt;
  m.n = n;
  m.eps = static_cast<float>(num_or(c, "eps", 1e-5));
  return m;
}

/// Relative error of a computed rsqrt(V + eps) whose V errs by e_V: see the header comment.
double rstd_rel(double e_v, double v, double eps) {
  const double r = (e_v + u32 * eps) / (v + eps);
  const double r2 = (1 + r) * (1 + u32) - 1;
  if (!(r2 < 1)) return INFINITY;
  const double rho = 1 / std::sqrt(1 - r2) - 1;
  return (1 + rho) * (1 + 5 * u32) - 1;
}

Status reference_ln(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Shape s = shape_of(c.params);
  const bool bias = bool_or(c, "bias", true);
  const NormModel m = norm_model(c, s.dt, s.n);
  OutputRef y, mean, rstd;
  const size_t N = static_cast<size_t>(s.rows * s.n);
  y.ref.resize(N), y.tol.resize(N);
  mean.ref.resize(static_cast<size_t>(s.rows)), mean.tol.resize(static_cast<size_t>(s.rows));
  rstd.ref.resize(static_cast<size_t>(s.rows)), rstd.tol.resize(static_cast<size_t>(s.rows));
  std::vector<double> mag(N);
  std::vector<ref::LayerNormRowStats<double>> st(static_cast<size_t>(s.rows));
  ref::layernorm_reference<double, double, double>(t[0].data, s.rows, s.n, t[0].v.ld, t[1].data,
                                                   bias ? t[2].data : nullptr, m.eps, y.ref.data(), mag.data(),
                                                   st.data());
  ReductionModel rm;
  rm.in = s.dt, rm.acc = DType::kF32, rm.out = DType::kF32, rm.n = s.n;
  const BoundPair mb = mean_bounds(rm);
  const double e_mu_under = 3.0 * static_cast<double>(s.n + 1) * 0x1p-150;  // see the y tolerance below
  for (int64_t r = 0; r < s.rows; ++r) {
    const auto& q = st[static_cast<size_t>(r)];
    LayerNormRowMags lm;
    lm.var = q.var;
    lm.stats = {q.mean_abs, q.max_abs, q.range};
    lm.max_abs_gamma = q.max_abs_gamma;
    const BoundPair yb = layernorm_bounds(m, lm);
    for (int64_t i = 0; i < s.n; ++i) {
      const size_t l = static_cast<size_t>(r * s.n + i);
      // + underflow: (x - mean) rstd may land in the subnormal range (2^-150 absolute), then
      // scaled by gamma; each later product or sum adds its own 2^-150. And the mean itself:
      // in any order of Welford updates and Chan merges (n - 1 of them), each rounds the running
      // mean by at most 3 * 2^-150 absolute when it is subnormal (the quotient or product, the
      // sum, and the weight's own relative error), an error then scaled by rstd and gamma
      // (measured: a correct kernel 1.06x over the ceiling without it at mean ~ 1e-41,
      // rstd = 1e6, gamma = 881).
      y.tol[l] = yb.ceiling.tol(std::fabs(y.ref[l]), std::isfinite(mag[l]) ? mag[l] : 0) +
                 0x1p-149 * (1 + q.rstd) * (2 + std::fabs(t[1].at(0, i))) +
                 e_mu_under * q.rstd * std::fabs(t[1].at(0, i)) * (1 + 0x1p-20);
    }
    const double xt = q.max_abs / (1 - u32 * static_cast<double>(s.n + 14) / 2);
    const double e_mu = std::max(mb.ceiling.tol(std::fabs(q.mean), q.mean_abs),
                                 gamma_n(s.n + 1, u32) * q.mean_abs + u32 * xt * static_cast<double>(s.n + 14) / 2) +
                        u32 * std::fabs(q.mean) + e_mu_under;
    mean.ref[static_cast<size_t>(r)] = q.mean;
    mean.tol[static_cast<size_t>(r)] = e_mu;
    // Overflow zone (declared): Welford's (x - mean)^2 terms and their fp32 sums may pass
    // FLT_MAX once n (2X)^2 does; there y and rstd have no bound, and the mean none once
    // 2X does (x - mean itself).
    const bool overflow = !(static_cast<double>(s.n) * 4 * q.max_abs * q.max_abs < max_finite(DType::kF32) / 2);
    if (overflow)
      for (int64_t i = 0; i < s.n; ++i) y.tol[static_cast<size_t>(r * s.n + i)] = INFINITY;
    if (!(2 * q.max_abs < max_finite(DType::kF32))) mean.tol[static_cast<size_t>(r)] = INFINITY;
    const VarianceMags vm{q.mean_abs, q.max_abs, q.range};
    const double e_v = variance_bounds(rm, 0, vm).ceiling.tol(q.var, variance_mag(vm));
    rstd.ref[static_cast<size_t>(r)] = q.rstd;
    rstd.tol[static_cast<size_t>(r)] =
        overflow ? INFINITY : rstd_rel(e_v, q.var, m.eps) * q.rstd + 2 * min_normal(DType::kF32);
  }
  out = {std::move(y), std::move(mean), std::move(rstd)};
  return ok_status();
}

Status reference_rms(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Shape s = shape_of(c.params);
  const NormModel m = norm_model(c, s.dt, s.n);
  OutputRef y, rstd;
  const size_t N = static_cast<size_t>(s.rows * s.n);
  y.ref.resize(N), y.tol.resize(N);
  rstd.ref.resize(static_cast<size_t>(s.rows)), rstd.tol.resize(static_cast<size_t>(s.rows));
  std::vector<ref::RmsNormRowStats<double>> st(static_cast<size_t>(s.rows));
  ref::rmsnorm_reference<double, double, double>(t[0].data, s.rows, s.n, t[0].v.ld, t[1].data, m.eps, y.ref.data(),
                                                 st.data());
  for (int64_t r = 0; r < s.rows; ++r) {
    const auto& q = st[static_cast<size_t>(r)];
    const BoundPair yb = rmsnorm_bounds(m, q.mean_sq);
    for (int64_t i = 0; i < s.n; ++i) {
      const size_t l = static_cast<size_t>(r * s.n + i);
      // + underflow of x rstd (or x gamma) in the subnormal range, then scaled by the other factor.
      y.tol[l] = yb.ceiling.tol(std::fabs(y.ref[l]), 0) + 0x1p-149 * (2 + q.rstd) * (2 + std::fabs(t[1].at(0, i)));
    }
    const double e_ms = gamma_n(s.n + 2, u32) * q.mean_sq +
                        static_cast<double>(2 * s.n + 1) * min_normal(DType::kF32) / std::max<double>(1, static_cast<double>(s.n));
    rstd.ref[static_cast<size_t>(r)] = q.rstd;
    rstd.tol[static_cast<size_t>(r)] = rstd_rel(e_ms, q.mean_sq, m.eps) * q.rstd + 2 * min_normal(DType::kF32);
    // Overflow zone (declared): the fp32 sum of squares may pass FLT_MAX (n mean_sq does).
    if (!(static_cast<double>(s.n) * q.mean_sq * 2 < max_finite(DType::kF32))) {
      rstd.tol[static_cast<size_t>(r)] = INFINITY;
      for (int64_t i = 0; i < s.n; ++i) y.tol[static_cast<size_t>(r * s.n + i)] = INFINITY;
    }
  }
  out = {std::move(y), std::move(rstd)};
  return ok_status();
}

Status reference_bwd(int which, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Shape s = shape_of(c.params);
  const size_t N = static_cast<size_t>(s.rows * s.n), n = static_cast<size_t>(s.n);
  const double eps = static_cast<float>(num_or(c, "eps", 1e-5));
  OutputRef dx, dg, db;
  dx.ref.resize(N), dx.tol.resize(N);
  dg.ref.resize(n), dg.tol.resize(n);
  db.ref.resize(n), db.tol.resize(n);
  std::vector<double> dx_mag(N), dg_mag(n), db_mag(n);
  ref::NormGrads<double> g;
  g.dx = dx.ref.data(), g.dx_mag = dx_mag.data(), g.dgamma = dg.ref.data(), g.dgamma_mag = dg_mag.data();
  // The host backward reads dy with x's row stride: both are [rows, n] with the same padding here.
  if (which == kLnBwd) {
    g.dbeta = db.ref.data(), g.dbeta_mag = db_mag.data();
    ref::layernorm_backward<double, double, double, double>(t[0].data, t[1].data, s.rows, s.n, t[0].v.ld, t[2].data,
                                                            t[3].data, t[4].data, eps, g);
  } else {
    ref::rmsnorm_backward<double, double, double, double>(t[0].data, t[1].data, s.rows, s.n, t[0].v.ld, t[2].data,
                                                          t[3].data, eps, g);
  }
  // Underflow: an fp32 operation whose result is subnormal errs by up to U/2 absolute
  // (U = 2^-149, the subnormal spacing), however small its operands' relative errors.
  // Followed through dx = rstd (dxh - m1 - xhat m2) with dxh = dy gamma, m1 = mean(dxh),
  // m2 = mean(dxh xhat): rstd U (3 + |m2| + |xhat_i| (1 + mean|xhat| + mean|dxh|)) + U;
  // through dgamma = sum_r dy xhat: U (sum_r |dy| + rows); dbeta: U rows.
  // Overflow: where an fp32 intermediate may pass FLT_MAX (|x| + |mean|, the row sums
  // n * dx_mag, the column sums) the kernel may give Inf/NaN: no bound there (+Inf),
  // declared (every fp32 kernel of this shape overflows the same way).
  const double U = 0x1p-149, big = max_finite(DType::kF32) / 4;
  const double ref_slack = 1 + gamma_n(s.n + s.rows + 8, 0x1p-53);  // the reference's own magnitudes
  const double gdx = gamma_n(s.n + 12, u32) * ref_slack;
  const HostTensor &X = t[0], &DY = t[1], &G = t[2];
  std::vector<double> col_dy(n, 0.0), col_x(n, 0.0);
  for (int64_t r = 0; r < s.rows; ++r) {
    const double mean = which == kLnBwd ? t[3].at(0, r) : 0.0, rs = which == kLnBwd ? t[4].at(0, r) : t[3].at(0, r);
    double m_xh = 0, m_dxh = 0, m2 = 0, xmax = 0;
    for (int64_t i = 0; i < s.n; ++i) {
      const double xh = (X.at(r, i) - mean) * rs, dxh = DY.at(r, i) * G.at(0, i);
      m_xh += std::fabs(xh), m_dxh += std::fabs(dxh), m2 += dxh * xh;
      xmax = std::max(xmax, std::fabs(X.at(r, i)) + std::fabs(mean));
      col_dy[static_cast<size_t>(i)] += std::fabs(DY.at(r, i));
      col_x[static_cast<size_t>(i)] = std::max(col_x[static_cast<size_t>(i)], std::fabs(X.at(r, i)) + std::fabs(mean));
    }
    const double nn = std::max<double>(1, static_cast<double>(s.n));
    m_xh /= nn, m_dxh /= nn, m2 = std::fabs(m2) / nn;
    for (int64_t i = 0; i < s.n; ++i) {
      const size_t l = static_cast<size_t>(r * s.n + i);
      const double xh = std::fabs((X.at(r, i) - mean) * rs);
      const double under = std::fabs(rs) * U * (3 + m2 + xh * (1 + m_xh + m_dxh)) + U;
      const double e = gdx * dx_mag[l] + under;
      dx.tol[l] = e + store_rounding(std::fabs(dx.ref[l]) * (1 + 0x1p-9) + e, s.dt);
      if (!(xmax < big && static_cast<double>(s.n) * dx_mag[l] < big)) dx.tol[l] = INFINITY;
    }
  }
  const double gdg = gamma_n(s.rows + 4, u32) * ref_slack, gdb = gamma_n(s.rows, u32) * ref_slack;
  for (size_t j = 0; j < n; ++j) {
    dg.tol[j] = gdg * dg_mag[j] + U * (col_dy[j] + static_cast<double>(s.rows));
    db.tol[j] = gdb * db_mag[j] + U * static_cast<double>(s.rows);
    if (!(dg_mag[j] < big && col_x[j] < big)) dg.tol[j] = INFINITY;  // x - mean itself may overflow
    if (!(db_mag[j] < big)) db.tol[j] = INFINITY;
  }
  if (which == kLnBwd && !bool_or(c, "bias", true)) {
    db.ref.clear(), db.tol.clear();
  }
  if (which == kLnBwd)
    out = {std::move(dx), std::move(dg), std::move(db)};
  else
    out = {std::move(dx), std::move(dg)};
  return ok_status();
}

RowOpConfig config(int which) {
  static const char* const names[] = {"layernorm", "layernorm_bwd", "rmsnorm", "rmsnorm_bwd"};
  static const char* const desc[] = {
      "LayerNorm forward: y, saved mean and rstd (fp32); fp32/fp16/bf16 activations",
      "LayerNorm backward: dx, dgamma, dbeta (fp32) from the saved mean and rstd",
      "RMSNorm forward: y and saved rstd (fp32)",
      "RMSNorm backward: dx and dgamma (fp32) from the saved rstd",
  };
  RowOpConfig cfg;
  cfg.name = names[which];
  cfg.description = desc[which];
  cfg.def.op = names[which];
  cfg.def.bound_name = which % 2 == 0 ? "normalisation ceiling" : "normalisation-backward ceiling";
  switch (which) {
    case kLn:
      cfg.def.prepare = [](const Case& c, std::vector<unsigned char*>& img) { constant_rows(c, img, false); };
      cfg.def.reference = reference_ln;
      break;
    case kRms:
      cfg.def.prepare = [](const Case& c, std::vector<unsigned char*>& img) {
        constant_rows(c, img, int_or(c, "constant_every", 0) % 2 == 0);  // even: zero rows (rstd = 1/sqrt(eps))
      };
      cfg.def.reference = reference_rms;
      break;
    default:
      cfg.def.prepare = [which](const Case& c, std::vector<unsigned char*>& img) { saved_stats(which, c, img); };
      cfg.def.reference = [which](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& o) {
        return reference_bwd(which, c, t, o);
      };
  }
  if (which == kLn || which == kLnBwd)
    cfg.def.transform = [which](const Case& c, std::vector<unsigned char*>& img) {
      if (str_or(c, "relation", "") != "shift") return false;
      shift_tensor(c, img, 0);
      if (which == kLnBwd) shift_tensor(c, img, 3);  // the saved mean moves with x; rstd stays
      return true;
    };
  cfg.registry = &reg(which);
  cfg.gen = [which](const GenConfig& g) { return gen(which, g); };
  cfg.build = [which](const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
    return build(which, p, r, pad, off);
  };
  cfg.validate = [which](const Case& c) { return validate(which, c); };
  cfg.shrink_keys = {{"rows", 1}, {"n", 1}};
  cfg.self_check_note = which % 2 == 0
                            ? "host reference: two-pass statistics in double (tests/references/rowwise_ref_test.cpp)"
                            : "host backward gradient-checked in tests/references/backward_ref_test.cpp";
  return cfg;
}

[[maybe_unused]] const bool kSpecs = register_spec(std::make_unique<RowOpSpec>(config(kLn))) &&
                                     register_spec(std::make_unique<RowOpSpec>(config(kLnBwd))) &&
                                     register_spec(std::make_unique<RowOpSpec>(config(kRms))) &&
                                     register_spec(std::make_unique<RowOpSpec>(config(kRmsBwd)));

}  // namespace
}  // namespace assay::rowwise
