// layernorm / layernorm_bwd / rmsnorm / rmsnorm_bwd over rows; fp32, fp16 or
// bf16 activations with fp32 statistics (saved mean and rstd, fp32 dgamma and
// dbeta).
//
// Sections: declaration (params, tensors), prepare, references, bounds, device
// reference, self-checks, binding.
// Binding: kernels/rowwise/norms.cu (Welford forward, column-parallel
// deterministic dgamma/dbeta, which the kernels overwrite: no accumulation);
// the planted bugs of tests/mutants/rowwise/ bind through the launchers of
// properties/norms.h. Saved statistics (mean, rstd) are fp32 outputs of the
// forward and fp32 inputs of the backward; beta and dbeta are [bias, n].
// References: references/host/norms.h (two-pass statistics in double) and
// backward.h (from the kernel's saved fp32 mean and rstd, as the kernel uses); on the device
// from 1024 elements (references/device/norms_f64.cu, norms_bwd_f64.cu: the same steps and
// sums, each element's ceiling beside it, constant rows and the backward's saved statistics
// written on the device).
// Bounds (u = 2^-24):
// - The forward's per-row and per-element formulas are harness/bound_core.h's
//   layernorm_row_bound / rmsnorm_row_bound (derivations at bound_ln), shared with the
//   device reference.
// - Y: layernorm_bounds / rmsnorm_bounds (harness/bounds.h), Welford or
//   two-pass statistics; the conditioning term of a large mean over a small
//   spread is what a one-pass E[x^2] - E[x]^2 kernel breaks.
// - saved mean: the Welford running-mean error e_mu = max(gamma_{n+1} A,
//   u X~ (n+14)/2) (bounds.h's variance_bounds derivation) + u|mean| for the store.
// - saved rstd, relative: r = (e_V + u eps)/(V + eps) with e_V the variance
//   ceiling; r' = (1+r)(1+u) - 1 (the + eps); rho = 1/sqrt(1-r') - 1; rsqrtf
//   2 ulp (5u with the store): (1+rho)(1+5u) - 1; 7u under a variant's
//   declared fast math (approximate sqrt and reciprocal, as bounds.cpp's
//   rstd_rel). RMSNorm: r = gamma_{n+2} (mean of squares, positive terms,
//   [H] (4.4)) + flushed squares.
// - The backward bounds assume IEEE division and no flush-to-zero (assay's
//   kernels declare neither fast math nor FTZ).
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
#include "properties/norms.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/gradcheck.h"
#include "harness/scratch.h"
#include "properties/rowwise_values.h"
#include "references/device/norms_bwd_f64.h"
#include "references/device/norms_f64.h"
#include "references/host/backward.h"
#include "references/host/norms.h"

namespace assay::rowwise {
namespace {

enum Which { kLn = 0, kLnBwd = 1, kRms = 2, kRmsBwd = 3 };
constexpr int64_t kMaxRows = 4096, kMaxN = 16384, kMaxElems = 1 << 20;
constexpr double u32 = 0x1p-24;

bool is_ln(Which w) {
  return w == kLn || w == kLnBwd;
}
bool is_bwd(Which w) {
  return w == kLnBwd || w == kRmsBwd;
}

// ---- declaration ------------------------------------------------------------------
std::vector<ParamDef> params(Which w) {
  std::vector<ParamDef> p = {
      ParamDef::dtype("dtype", activation_dtypes()),
      ParamDef::extent("n", 1, kMaxN).aim({4, 32, 128, 1024}),
      ParamDef::extent("rows", 1, kMaxRows).aim({4, 8, 32}).cap([](const Params& q) {
        return kMaxElems / std::max<int64_t>(q.i("n"), 1);
      }),
      // fp32 values: the kernel takes eps as float.
      ParamDef::real("eps", {double(1e-5f), double(1e-6f), double(1e-12f), 0.0009765625})};
  if (is_ln(w))
    p.push_back(ParamDef::integer("bias", 0, 1).describe(
        "1: with a bias (beta, dbeta [1, n]); 0: none (beta, dbeta [0, n], passed as null)"));
  p.push_back(ParamDef::integer("constant_every", 0, 4)
                  .optional(5)
                  .describe("rows r % k == 0 constant (RMSNorm, even k: zero rows)"));
  if (is_ln(w)) {
    p.push_back(ParamDef::choice("relation", {"shift"}).optional(5));
    p.push_back(ParamDef::real("shift", {64, -1024, 0.5, 4096}).only_when([](const Params& q) {
      return q.s("relation") == "shift";
    }));
  }
  return p;
}

Status check(const Params& p) {
  const double eps = p.r("eps", NAN);
  if (!(eps >= 0 && eps < 1) || static_cast<double>(static_cast<float>(eps)) != eps)
    return invalid_argument("norm case: params.eps must be an fp32 value in [0, 1)");
  if (p.s("relation") == "shift" && !p.has("shift"))
    return invalid_argument("norm case: params.relation \"shift\" needs a finite params.shift");
  return ok_status();
}

std::vector<TensorDef> tensors(Which w) {
  const ValueSpec weights = {.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                         ValueClass::kSmallInt, ValueClass::kLogUniform}};
  const TensorDef x_fwd{.name = "X", .dims = {"rows", "n"}, .values = {.specials = kSpecialAll}};
  const TensorDef x_bwd{.name = "X", .dims = {"rows", "n"}};
  const TensorDef dy{.name = "dY", .dims = {"rows", "n"}, .values = weights};
  const TensorDef gamma{.name = "gamma", .dims = {"n"}, .values = weights};
  // The backward's saved statistics are drawn, then replaced by prepare (saved_stats).
  auto stat = [](const char* name, Role role) { return TensorDef{.name = name, .role = role, .dims = {"rows"}, .dtype = "fp32"}; };
  switch (w) {
    case kLn:
      return {x_fwd,
              gamma,
              {.name = "beta", .dims = {"bias", "n"}, .values = weights},
              {.name = "Y", .role = Role::kOut, .dims = {"rows", "n"}},
              stat("mean", Role::kOut),
              stat("rstd", Role::kOut)};
    case kLnBwd:
      return {x_bwd,
              dy,
              gamma,
              stat("mean", Role::kIn),
              stat("rstd", Role::kIn),
              {.name = "dX", .role = Role::kOut, .dims = {"rows", "n"}},
              {.name = "dgamma", .role = Role::kOut, .dims = {"n"}, .dtype = "fp32"},
              {.name = "dbeta", .role = Role::kOut, .dims = {"bias", "n"}, .dtype = "fp32"}};
    case kRms:
      return {x_fwd, gamma, {.name = "Y", .role = Role::kOut, .dims = {"rows", "n"}}, stat("rstd", Role::kOut)};
    default:
      return {x_bwd,
              dy,
              gamma,
              stat("rstd", Role::kIn),
              {.name = "dX", .role = Role::kOut, .dims = {"rows", "n"}},
              {.name = "dgamma", .role = Role::kOut, .dims = {"n"}, .dtype = "fp32"}};
  }
}

// ---- prepare: constant rows, saved statistics --------------------------------------------
void constant_rows(const Case& c, std::vector<unsigned char*>& img, bool zero) {
  const int64_t every = Params(c.params).i("constant_every", 0);
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
void saved_stats(Which w, const Case& c, std::vector<unsigned char*>& img) {
  const Params p(c.params);
  constant_rows(c, img, w == kRmsBwd && p.i("constant_every", 0) % 2 == 0);
  const double eps = static_cast<float>(p.r("eps", 1e-5));
  const View2D v = view_of(c.tensors[0].desc);
  const int64_t off3 = c.tensors[3].desc.offset;
  for (int64_t r = 0; r < v.rows; ++r) {
    const std::vector<double> x = row_values(c, img, r);
    std::vector<double> y(x.size());
    if (w == kLnBwd) {
      ref::LayerNormRowStats<double> st;
      ref::layernorm_reference<double, double, double>(x.data(), 1, v.cols, v.cols, nullptr, nullptr, eps, y.data(),
                                                       nullptr, &st);
      poke(DType::kF32, img[3], off3 + r, st.mean);
      poke(DType::kF32, img[4], c.tensors[4].desc.offset + r, st.rstd);
    } else {
      ref::RmsNormRowStats<double> st;
      ref::rmsnorm_reference<double, double, double>(x.data(), 1, v.cols, v.cols, nullptr, eps, y.data(), &st);
      poke(DType::kF32, img[3], off3 + r, st.rstd);
    }
  }
}

// ---- references and bounds --------------------------------------------------------
NormModel norm_model(const Params& p, int64_t n, const Arithmetic& a) {
  NormModel m;
  m.in = p.dt("dtype");
  m.acc = DType::kF32;
  m.out = m.in;
  m.n = n;
  m.eps = static_cast<float>(p.r("eps", 1e-5));
  m.fast_math = a.fast_math;
  return m;
}

/// y in ref, aux[0]: |gamma_i xhat_i|; mean and rstd in ref; the mean's aux carries the row's
/// statistics for the bounds: [0] mean_abs A, [1] max_abs X, [2] range W, [3] var, [4] max |gamma|.
Status reference_ln(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const double eps = static_cast<float>(p.r("eps", 1e-5));
  OutputRef y, mean, rstd;
  y.ref.resize(static_cast<size_t>(rows * n));
  y.aux.assign(1, std::vector<double>(y.ref.size()));
  mean.ref.resize(static_cast<size_t>(rows));
  mean.aux.assign(5, std::vector<double>(mean.ref.size()));
  rstd.ref.resize(static_cast<size_t>(rows));
  std::vector<ref::LayerNormRowStats<double>> st(static_cast<size_t>(rows));
  ref::layernorm_reference<double, double, double>(t[0].data, rows, n, t[0].v.ld, t[1].data,
                                                   p.i("bias") != 0 ? t[2].data : nullptr, eps, y.ref.data(),
                                                   y.aux[0].data(), st.data());
  for (int64_t r = 0; r < rows; ++r) {
    const size_t lr = static_cast<size_t>(r);
    const auto& q = st[lr];
    mean.ref[lr] = q.mean;
    rstd.ref[lr] = q.rstd;
    mean.aux[0][lr] = q.mean_abs, mean.aux[1][lr] = q.max_abs, mean.aux[2][lr] = q.range;
    mean.aux[3][lr] = q.var, mean.aux[4][lr] = q.max_abs_gamma;
  }
  out = {std::move(y), std::move(mean), std::move(rstd)};
  return ok_status();
}

// The formulas of bound_ln and bound_rms, row by row, are harness/bound_core.h's
// layernorm_row_bound / layernorm_y_tol and rmsnorm_row_bound / rmsnorm_y_tol (the device
// reference runs the same ones). Their derivations:
// - y (LayerNorm): layernorm_bounds' ceiling + underflow: (x - mean) rstd may land in the
//   subnormal range (2^-150 absolute), then scaled by gamma; each later product or sum adds its
//   own 2^-150. And the mean itself: in any order of Welford updates and Chan merges (n - 1 of
//   them), each rounds the running mean by at most 3 * 2^-150 absolute when it is subnormal (the
//   quotient or product, the sum, and the weight's own relative error), an error then scaled by
//   rstd and gamma (measured: a correct kernel 1.06x over the ceiling without it at
//   mean ~ 1e-41, rstd = 1e6, gamma = 881).
// - saved mean: max(mean_bounds' ceiling, gamma_{n+1} A + u X~ (n+14)/2) + u|mean| for the
//   store + the underflow share above.
// - Overflow zone (declared): Welford's (x - mean)^2 terms and their fp32 sums may pass
//   FLT_MAX once n (2X)^2 does; there y and rstd have no bound, and the mean none once 2X does
//   (x - mean itself).
// - saved rstd: rstd_rel_of(r) rstd + 2 min_normal, r = (e_V + u eps)/(V + eps), e_V
//   variance_bounds' ceiling (LayerNorm) or gamma_{n+2} mean_sq + (2n+1) min_normal / n (RMSNorm).
// - y (RMSNorm): rmsnorm_bounds' ceiling + underflow of x rstd (or x gamma) in the subnormal
//   range, then scaled by the other factor; overflow zone: n mean(x^2) near FLT_MAX.
Status bound_ln(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const NormScalars s = norm_scalars(norm_model(p, n, a));
  OutputRef &y = out[0], &mean = out[1], &rstd = out[2];
  y.tol.resize(y.ref.size());
  mean.tol.resize(mean.ref.size());
  rstd.tol.resize(rstd.ref.size());
  for (int64_t r = 0; r < rows; ++r) {
    const size_t lr = static_cast<size_t>(r);
    LayerNormRowMags lm;
    lm.var = mean.aux[3][lr];
    lm.stats = {mean.aux[0][lr], mean.aux[1][lr], mean.aux[2][lr]};
    lm.max_abs_gamma = mean.aux[4][lr];
    const LayerNormRowBound b = layernorm_row_bound(s, mean.ref[lr], rstd.ref[lr], lm);
    for (int64_t i = 0; i < n; ++i) {
      const size_t l = static_cast<size_t>(r * n + i);
      y.tol[l] = layernorm_y_tol(b, std::fabs(y.ref[l]), y.aux[0][l], std::fabs(t[1].at(0, i)));
    }
    mean.tol[lr] = b.mean_tol;
    rstd.tol[lr] = b.rstd_tol;
  }
  return ok_status();
}

/// y and rstd in ref; rstd's aux[0]: the row's mean of squares.
Status reference_rms(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const double eps = static_cast<float>(Params(c.params).r("eps", 1e-5));
  OutputRef y, rstd;
  y.ref.resize(static_cast<size_t>(rows * n));
  rstd.ref.resize(static_cast<size_t>(rows));
  rstd.aux.assign(1, std::vector<double>(rstd.ref.size()));
  std::vector<ref::RmsNormRowStats<double>> st(static_cast<size_t>(rows));
  ref::rmsnorm_reference<double, double, double>(t[0].data, rows, n, t[0].v.ld, t[1].data, eps, y.ref.data(),
                                                 st.data());
  for (int64_t r = 0; r < rows; ++r) {
    rstd.ref[static_cast<size_t>(r)] = st[static_cast<size_t>(r)].rstd;
    rstd.aux[0][static_cast<size_t>(r)] = st[static_cast<size_t>(r)].mean_sq;
  }
  out = {std::move(y), std::move(rstd)};
  return ok_status();
}

Status bound_rms(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const NormScalars s = norm_scalars(norm_model(p, n, a));
  OutputRef &y = out[0], &rstd = out[1];
  y.tol.resize(y.ref.size());
  rstd.tol.resize(rstd.ref.size());
  for (int64_t r = 0; r < rows; ++r) {
    const size_t lr = static_cast<size_t>(r);
    const RmsNormRowBound b = rmsnorm_row_bound(s, rstd.aux[0][lr], rstd.ref[lr]);
    for (int64_t i = 0; i < n; ++i) {
      const size_t l = static_cast<size_t>(r * n + i);
      y.tol[l] = rmsnorm_y_tol(b, std::fabs(y.ref[l]), std::fabs(t[1].at(0, i)));
    }
    rstd.tol[lr] = b.rstd_tol;
  }
  return ok_status();
}

/// rows x n of a host view, dense (the host backward reads x and dy with one row stride).
std::vector<double> dense(const HostTensor& h) {
  std::vector<double> d(static_cast<size_t>(h.v.rows * h.v.cols));
  for (int64_t r = 0; r < h.v.rows; ++r)
    for (int64_t j = 0; j < h.v.cols; ++j) d[static_cast<size_t>(r * h.v.cols + j)] = h.at(r, j);
  return d;
}

/// dx, dgamma (and dbeta) in ref; aux[0] of each: backward.h's magnitude (dx_mag, dgamma_mag, dbeta_mag).
Status reference_bwd(Which w, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const size_t N = static_cast<size_t>(rows * n), nn = static_cast<size_t>(n);
  const double eps = static_cast<float>(p.r("eps", 1e-5));
  OutputRef dx, dg, db;
  dx.ref.resize(N), dx.aux.assign(1, std::vector<double>(N));
  dg.ref.resize(nn), dg.aux.assign(1, std::vector<double>(nn));
  std::vector<double> db_ref(nn), db_mag(nn);
  ref::NormGrads<double> g;
  g.dx = dx.ref.data(), g.dx_mag = dx.aux[0].data(), g.dgamma = dg.ref.data(), g.dgamma_mag = dg.aux[0].data();
  const std::vector<double> x = dense(t[0]), dy = dense(t[1]);
  if (w == kLnBwd) {
    g.dbeta = db_ref.data(), g.dbeta_mag = db_mag.data();
    ref::layernorm_backward<double, double, double, double>(x.data(), dy.data(), rows, n, n, t[2].data, t[3].data,
                                                            t[4].data, eps, g);
    if (p.i("bias") != 0) {
      db.ref = std::move(db_ref);
      db.aux = {std::move(db_mag)};
    } else {
      db.aux.assign(1, {});
    }
    out = {std::move(dx), std::move(dg), std::move(db)};
  } else {
    ref::rmsnorm_backward<double, double, double, double>(x.data(), dy.data(), rows, n, n, t[2].data, t[3].data, eps,
                                                          g);
    out = {std::move(dx), std::move(dg)};
  }
  return ok_status();
}

/// bound_bwd's constants (derivations there), which the device reference takes as they are.
device_ref::NormBwdF64Problem bwd_constants(Which w, const Case& c, int64_t rows, int64_t n, const Arithmetic& a) {
  const Params p(c.params);
  device_ref::NormBwdF64Problem q;
  q.rows = rows, q.n = n;
  q.rms = w == kRmsBwd;
  q.dbeta = w == kLnBwd && p.i("bias") != 0;
  q.ftz = a.ftz;
  q.U = a.ftz ? min_normal(DType::kF32) : 0x1p-149;
  q.big = max_finite(DType::kF32) / 4;
  const double ref_slack = 1 + gamma_n(n + rows + 8, 0x1p-53);  // the reference's own magnitudes
  q.gdx = gamma_n(n + 12 + (a.fast_math ? 6 : 0), u32) * ref_slack;
  q.gdg = gamma_n(rows + 4, u32) * ref_slack;
  q.gdb = gamma_n(rows, u32) * ref_slack;
  q.flushes = a.ftz ? static_cast<double>(2 * rows + 1) : static_cast<double>(rows);
  q.store = store_rounding_for(p.dt("dtype"));
  return q;
}

Status bound_bwd(Which w, const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t,
                 std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const size_t nn = static_cast<size_t>(n);
  const DType dt = p.dt("dtype");
  OutputRef &dx = out[0], &dg = out[1];
  dx.tol.resize(dx.ref.size());
  dg.tol.resize(dg.ref.size());
  // Underflow: an fp32 operation whose result is subnormal errs by up to U/2 absolute
  // (U = 2^-149, the subnormal spacing), however small its operands' relative errors.
  // Followed through dx = rstd (dxh - m1 - xhat m2) with dxh = dy gamma, m1 = mean(dxh),
  // m2 = mean(dxh xhat): rstd U (3 + |m2| + |xhat_i| (1 + mean|xhat| + mean|dxh|)) + U;
  // through dgamma = sum_r dy xhat: U (sum_r |dy| + rows); dbeta: U rows.
  // Overflow: where an fp32 intermediate may pass FLT_MAX (|x| + |mean|, the row sums
  // n * dx_mag, the column sums) the kernel may give Inf/NaN: no bound there (+Inf),
  // declared (every fp32 kernel of this shape overflows the same way).
  // Declared arithmetic: with flush-to-zero (fast math) a subnormal operand or result becomes
  // 0, an absolute error below the smallest normal instead of half the subnormal spacing, at
  // the same places: U is then min_normal. Fast math also makes the two divisions by n
  // (m1, m2) approximate, 2 ulp = 4 roundings' worth each instead of one: 6 more in gdx.
  const device_ref::NormBwdF64Problem q = bwd_constants(w, c, rows, n, a);
  const double U = q.U, big = q.big, gdx = q.gdx;
  const HostTensor &X = t[0], &DY = t[1], &G = t[2];
  std::vector<double> col_dy(nn, 0.0), col_x(nn, 0.0), col_lost(nn, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double mean = w == kLnBwd ? t[3].at(0, r) : 0.0, rs = w == kLnBwd ? t[4].at(0, r) : t[3].at(0, r);
    // Flush-to-zero of a subnormal saved rstd (rows of |x| near the fp32 maximum) zeroes the
    // whole row's xhat: its dgamma terms and its dX may be lost outright.
    const bool rs_flushed = a.ftz && rs != 0 && std::fabs(rs) < min_normal(DType::kF32);
    double m_xh = 0, m_dxh = 0, m2 = 0, xmax = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double xh = (X.at(r, i) - mean) * rs, dxh = DY.at(r, i) * G.at(0, i);
      m_xh += std::fabs(xh), m_dxh += std::fabs(dxh), m2 += dxh * xh;
      xmax = std::max(xmax, std::fabs(X.at(r, i)) + std::fabs(mean));
      // A flushed operand of dy * xhat errs by min_normal times the other factor: x flushed
      // (|x - mean| < U) by |dy| |rstd|, dy flushed by |xhat|.
      col_dy[static_cast<size_t>(i)] +=
          a.ftz ? std::fabs(DY.at(r, i)) * std::max(1.0, std::fabs(rs)) + std::fabs(xh) : std::fabs(DY.at(r, i));
      if (rs_flushed) col_lost[static_cast<size_t>(i)] += std::fabs(DY.at(r, i) * xh);
      col_x[static_cast<size_t>(i)] = std::max(col_x[static_cast<size_t>(i)], std::fabs(X.at(r, i)) + std::fabs(mean));
    }
    const double nd = std::max<double>(1, static_cast<double>(n));
    m_xh /= nd, m_dxh /= nd, m2 = std::fabs(m2) / nd;
    for (int64_t i = 0; i < n; ++i) {
      const size_t l = static_cast<size_t>(r * n + i);
      const double xh = std::fabs((X.at(r, i) - mean) * rs);
      const double under = std::fabs(rs) * U * (3 + m2 + xh * (1 + m_xh + m_dxh)) + U;
      const double e = gdx * dx.aux[0][l] + under;
      dx.tol[l] = e + store_rounding(std::fabs(dx.ref[l]) * (1 + 0x1p-9) + e, dt);
      if (rs_flushed) dx.tol[l] += std::fabs(dx.ref[l]);
      if (!(xmax < big && static_cast<double>(n) * dx.aux[0][l] < big)) dx.tol[l] = INFINITY;
    }
  }
  const double gdg = q.gdg, gdb = q.gdb;
  // A variant that accumulates dgamma (dbeta) in place, a row at a time (atomics), rounds the
  // running sum, prefill included, once per row: the engine adds gamma_rows (|prefill| + the
  // terms' magnitudes) from acc_terms / acc_mag. fp32 atomics also flush subnormal operands and
  // results (PTX red/atom.add.f32): 2 rows + 1 more flushes under FTZ.
  const double flushes = q.flushes;
  dg.acc_terms.assign(nn, rows);
  dg.acc_mag = dg.aux[0];
  for (size_t j = 0; j < nn; ++j) {
    dg.tol[j] = gdg * dg.aux[0][j] + U * (col_dy[j] + flushes) + col_lost[j] * (1 + gdg);
    if (!(dg.aux[0][j] < big && col_x[j] < big)) dg.tol[j] = INFINITY;  // x - mean itself may overflow
  }
  if (w == kLnBwd) {
    OutputRef& db = out[2];
    db.tol.resize(db.ref.size());
    db.acc_terms.assign(db.ref.size(), rows);
    db.acc_mag = db.aux[0];
    for (size_t j = 0; j < db.ref.size(); ++j) {
      db.tol[j] = gdb * db.aux[0][j] + U * flushes;
      if (!(db.aux[0][j] < big)) db.tol[j] = INFINITY;
    }
  }
  return ok_status();
}

// ---- device reference (forwards) ---------------------------------------------------------------
// The device path is every row-wise op's (rowwise_device_when; the threshold softmax's
// measurements chose for the same shape of work), and every case feature is supported: constant
// rows (the device prepare writes them into the snapshot), bias on or off, fast math, and
// LayerNorm's shift relation (the engine runs compute again on a shifted copy of the prepared
// snapshot).

/// prepare on the device: the constant rows of X (zero rows for RMSNorm's even constant_every),
/// forward and backward alike.
Status device_constant_rows(Which w, const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  const Params p(c.params);
  const DType dt = p.dt("dtype");
  if (t.empty() || !device_ref::input_rows_support(dt) || t[0].dtype != dt)
    return invalid_argument(fmt::format("{}: no device reference for this case (fp32, fp16 or bf16 X)", c.op));
  const View2D& v = t[0].v;
  const int64_t every = p.i("constant_every", 0);
  const bool rms = w == kRms || w == kRmsBwd;
  return device_ref::norm_constant_rows(t[0].ptr, dt, v.rows, v.cols, v.ld, every, rms && every % 2 == 0, ctx.stream);
}

/// y and the saved statistics with their ceilings on the prepared X: the tolerance itself in mag
/// (DeviceOutput's defaults: a bound computed outright, as the host path uploads it).
Status device_compute(Which w, const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                      std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  const Params p(c.params);
  const DType dt = p.dt("dtype");
  const bool ln = w == kLn;
  const size_t inputs = ln ? 3 : 2, outputs = ln ? 3 : 2;
  bool ok =
      device_ref::input_rows_support(dt) && t.size() == inputs + outputs && out.size() == outputs && t[0].dtype == dt;
  for (size_t i = 1; ok && i < inputs; ++i) ok = device_ref::input_rows_support(t[i].dtype);
  if (!ok)
    return invalid_argument(fmt::format("{}: no device reference for this case (fp32, fp16 or bf16 X, gamma{})",
                                        ln ? "layernorm" : "rmsnorm", ln ? ", beta" : ""));
  const View2D& v = t[0].v;
  device_ref::NormF64Problem q;
  q.rows = v.rows;
  q.rms = !ln;
  q.bias = ln && p.i("bias") != 0;
  q.eps = static_cast<float>(p.r("eps", 1e-5));
  q.s = norm_scalars(norm_model(p, v.cols, a));
  const auto rows_of = [](const DevTensor& d) { return device_ref::input_rows(d.ptr, d.v.cols, d.v.ld, d.dtype); };
  const device_ref::InputRows gamma = rows_of(t[1]);
  const device_ref::NormF64Out y{out[0].ref, out[0].mag}, rstd{out[outputs - 1].ref, out[outputs - 1].mag};
  const device_ref::NormF64Out mean = ln ? device_ref::NormF64Out{out[1].ref, out[1].mag} : device_ref::NormF64Out{};
  return device_ref::norm_f64_reference(q, rows_of(t[0]), gamma, ln ? rows_of(t[2]) : gamma, y, mean, rstd, ctx.stream);
}

// ---- device reference (backwards) --------------------------------------------------------------
// The same threshold as the forwards', relations included: LayerNorm's shift transforms a copy
// of the prepared snapshot (x and the saved mean), as on the host path. Variants that accumulate
// dgamma or dbeta take the host path (the engine's rule).

/// The scratch device_prepare_bwd carves: the forward's y, mean and rstd with their tolerances.
struct StatsScratch {
  double *y_ref, *y_tol, *mean_ref, *mean_tol, *rstd_ref, *rstd_tol;
  StatsScratch(ScratchCarver& s, int64_t rows, int64_t n)
      : y_ref(s.take<double>(rows * n)), y_tol(s.take<double>(rows * n)), mean_ref(s.take<double>(rows)),
        mean_tol(s.take<double>(rows)), rstd_ref(s.take<double>(rows)), rstd_tol(s.take<double>(rows)) {}
};

int64_t device_scratch_bwd(const Case& c) {
  const View2D v = view_of(c.tensors[0].desc);
  ScratchCarver count;
  const StatsScratch layout(count, v.rows, v.cols);
  return count.bytes();
}

/// The device path's inputs of a norm backward, or a clear error.
Status device_bwd_fits(Which w, const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  const DType dt = Params(c.params).dt("dtype");
  const bool ln = w == kLnBwd;
  const size_t inputs = ln ? 5 : 4, outputs = ln ? 3 : 2;
  const bool ok = device_ref::input_rows_support(dt) && t.size() == inputs + outputs && t[0].dtype == dt &&
                  t[1].dtype == dt && device_ref::input_rows_support(t[2].dtype) && t[3].dtype == DType::kF32 &&
                  t[inputs - 1].dtype == DType::kF32;
  if (!ok)
    return invalid_argument(fmt::format("{}: no device reference for this case (fp32, fp16 or bf16 X, dY and gamma, "
                                        "fp32 statistics)",
                                        ln ? "layernorm_bwd" : "rmsnorm_bwd"));
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch_bwd(c))
    return invalid_argument("norm backward device reference: scratch missing or too small");
  return ok_status();
}

/// prepare (saved_stats) on the device: the constant rows, then what a correct forward saves
/// (the forward's device reference into the scratch, stored to fp32 in the snapshot).
Status device_prepare_bwd(Which w, const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_bwd_fits(w, c, t, ctx));
  ASSAY_RETURN_IF_ERROR(device_constant_rows(w, c, t, ctx));
  const Params p(c.params);
  const bool ln = w == kLnBwd;
  const size_t inputs = ln ? 5 : 4;
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const auto rows_of = [](const DevTensor& d) { return device_ref::input_rows(d.ptr, d.v.cols, d.v.ld, d.dtype); };
  ScratchCarver carve(ctx.scratch);
  const StatsScratch st(carve, rows, n);
  device_ref::NormF64Problem f;
  f.rows = rows;
  f.rms = !ln;
  f.eps = static_cast<float>(p.r("eps", 1e-5));
  f.s = norm_scalars(norm_model(p, n, Arithmetic{}));
  const device_ref::InputRows gamma = rows_of(t[2]);
  ASSAY_RETURN_IF_ERROR(device_ref::norm_f64_reference(f, rows_of(t[0]), gamma, gamma, {st.y_ref, st.y_tol},
                                                       {st.mean_ref, st.mean_tol}, {st.rstd_ref, st.rstd_tol},
                                                       ctx.stream));
  return device_ref::norm_saved_stats(ln ? st.mean_ref : nullptr, st.rstd_ref, rows, ln ? t[3].as<float>() : nullptr,
                                      t[inputs - 1].as<float>(), ctx.stream);
}

/// dX, dgamma (and dbeta) with their ceilings on the inputs device_prepare_bwd prepared, the
/// tolerance itself in mag.
Status device_compute_bwd(Which w, const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                          std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_bwd_fits(w, c, t, ctx));
  const bool ln = w == kLnBwd;
  const size_t inputs = ln ? 5 : 4, outputs = ln ? 3 : 2;
  if (out.size() != outputs) return invalid_argument(fmt::format("{}: {} outputs expected", c.op, outputs));
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  const auto rows_of = [](const DevTensor& d) { return device_ref::input_rows(d.ptr, d.v.cols, d.v.ld, d.dtype); };
  const device_ref::InputRows gamma = rows_of(t[2]);
  const device_ref::NormBwdF64Problem q = bwd_constants(w, c, rows, n, a);
  device_ref::NormBwdF64Io io;
  io.x = rows_of(t[0]), io.dy = rows_of(t[1]), io.gamma = gamma;
  if (ln) io.mean = rows_of(t[3]);
  io.rstd = rows_of(t[inputs - 1]);
  io.dx_ref = out[0].ref, io.dx_tol = out[0].mag;
  io.dgamma_ref = out[1].ref, io.dgamma_tol = out[1].mag;
  if (ln) io.dbeta_ref = out[2].ref, io.dbeta_tol = out[2].mag;
  return device_ref::norm_bwd_f64_reference(q, io, ctx.stream);
}

// ---- self-checks (host references, CPU) --------------------------------------------------
std::vector<double> sample(int64_t n, double scale, double phase) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(j)] = scale * std::sin(phase + 0.7 * static_cast<double>(j)) + 0.3;
  return v;
}

/// The forward references against a long-double evaluation of one row.
Status self_check_fwd(Which w, std::string& report) {
  const int64_t n = 37;
  const double eps = 1e-5;
  const std::vector<double> x = sample(n, 3, 0.1), gamma = sample(n, 1.5, 0.4), beta = sample(n, 0.5, 0.9);
  std::vector<double> y(static_cast<size_t>(n));
  long double mu = 0, ss = 0;
  for (double v : x) mu += v;
  mu /= n;
  for (double v : x) ss += w == kLn ? (v - mu) * (v - mu) : static_cast<long double>(v) * v;
  const long double rs = 1 / std::sqrt(ss / n + eps);
  double stat_err = 0;
  if (w == kLn) {
    ref::LayerNormRowStats<double> st;
    ref::layernorm_reference<double, double, double>(x.data(), 1, n, n, gamma.data(), beta.data(), eps, y.data(),
                                                     nullptr, &st);
    stat_err = static_cast<double>(std::max(std::fabs((st.mean - mu) / mu), std::fabs((st.rstd - rs) / rs)));
  } else {
    ref::RmsNormRowStats<double> st;
    ref::rmsnorm_reference<double, double, double>(x.data(), 1, n, n, gamma.data(), eps, y.data(), &st);
    stat_err = static_cast<double>(std::fabs((st.rstd - rs) / rs));
  }
  double worst = 0;
  for (int64_t j = 0; j < n; ++j) {
    const size_t l = static_cast<size_t>(j);
    const long double scaled = (w == kLn ? x[l] - mu : static_cast<long double>(x[l])) * rs * gamma[l];
    const long double e = w == kLn ? scaled + beta[l] : scaled;
    // Relative to the terms' magnitude: y may cancel to near 0 (scaled ~ -beta).
    const long double mag = std::fabs(scaled) + (w == kLn ? std::fabs(beta[l]) : 0.0L);
    worst = std::max(worst, static_cast<double>(std::fabs(y[l] - e) / (mag + 1e-300L)));
  }
  const char* name = w == kLn ? "layernorm" : "rmsnorm";
  if (!(worst < 1e-12 && stat_err < 1e-13))
    return internal_error(fmt::format("{}: host reference off by {:.3g} (y) / {:.3g} (statistics), relative", name,
                                      worst, stat_err));
  report += fmt::format("{}: host reference within {:.2g} (y) and {:.2g} (statistics) of a long-double evaluation "
                        "(37 elements)\n",
                        name, worst, stat_err);
  return ok_status();
}

/// The backward references against finite differences of the forward references
/// (harness/gradcheck.h): inputs x (rows x n), gamma (and beta), outputs y.
Status self_check_bwd(Which w, std::string& report) {
  const int64_t rows = 3, n = 5;
  const double eps = 1e-5;
  const bool ln = w == kLnBwd;
  const int64_t X = rows * n;
  Differentiable f;
  f.n = X + (ln ? 2 * n : n);
  f.m = X;
  f.forward = [=](const double* in, double* y) {
    if (ln)
      ref::layernorm_reference<double, double, double>(in, rows, n, n, in + X, in + X + n, eps, y, nullptr, nullptr);
    else
      ref::rmsnorm_reference<double, double, double>(in, rows, n, n, in + X, eps, y, nullptr);
  };
  f.vjp = [=](const double* in, const double* v, double* g) {
    ref::NormGrads<double> o;
    o.dx = g, o.dgamma = g + X;
    if (ln) {
      o.dbeta = g + X + n;
      ref::layernorm_backward<double, double, double, double>(in, v, rows, n, n, in + X, nullptr, nullptr, eps, o);
    } else {
      ref::rmsnorm_backward<double, double, double, double>(in, v, rows, n, n, in + X, nullptr, eps, o);
    }
  };
  std::vector<double> in = sample(f.n, 2, 0.2);
  GradCheckOptions opts;
  opts.projections = 14;
  ASSAY_ASSIGN_OR_RETURN(GradCheckResult r, gradcheck_projections(f, in.data(), opts));
  const char* name = ln ? "layernorm_bwd" : "rmsnorm_bwd";
  if (!r.pass) return internal_error(fmt::format("{}: host backward fails the gradient check: {}", name, r.summary));
  report += fmt::format("{}: host backward (dx, dgamma{}) agrees with finite differences of the forward, {} "
                        "projections, worst {:.2g} of the tolerance\n",
                        name, ln ? ", dbeta" : "", r.projections.size(), r.max_ratio);
  return ok_status();
}

OpDef make(Which w) {
  static const char* const names[] = {"layernorm", "layernorm_bwd", "rmsnorm", "rmsnorm_bwd"};
  static const char* const desc[] = {
      "LayerNorm forward: y, saved mean and rstd (fp32); fp32/fp16/bf16 activations",
      "LayerNorm backward: dx, dgamma, dbeta (fp32) from the saved mean and rstd",
      "RMSNorm forward: y and saved rstd (fp32)",
      "RMSNorm backward: dx and dgamma (fp32) from the saved rstd",
  };
  OpDef op;
  op.name = names[w];
  op.description = desc[w];
  op.params = params(w);
  op.tensors = tensors(w);
  op.check = check;
  op.bound_name = is_bwd(w) ? "normalisation-backward ceiling" : "normalisation ceiling";
  switch (w) {
    case kLn:
      op.prepare = [](const Case& c, std::vector<unsigned char*>& img) { constant_rows(c, img, false); };
      op.reference = reference_ln;
      op.bound = bound_ln;
      op.device_reference = {.when = rowwise_device_when,
                             .prepare = [](const Case& c, const std::vector<DevTensor>& t,
                                           const DeviceContext& ctx) { return device_constant_rows(kLn, c, t, ctx); },
                             .compute = [](const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                                           std::vector<DeviceOutput>& o,
                                           const DeviceContext& ctx) { return device_compute(kLn, c, a, t, o, ctx); }};
      op.backward = "layernorm_bwd";
      break;
    case kRms:
      op.prepare = [](const Case& c, std::vector<unsigned char*>& img) {
        // even: zero rows (rstd = 1/sqrt(eps))
        constant_rows(c, img, Params(c.params).i("constant_every", 0) % 2 == 0);
      };
      op.reference = reference_rms;
      op.bound = bound_rms;
      op.device_reference = {.when = rowwise_device_when,
                             .prepare = [](const Case& c, const std::vector<DevTensor>& t,
                                           const DeviceContext& ctx) { return device_constant_rows(kRms, c, t, ctx); },
                             .compute = [](const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                                           std::vector<DeviceOutput>& o,
                                           const DeviceContext& ctx) { return device_compute(kRms, c, a, t, o, ctx); }};
      op.backward = "rmsnorm_bwd";
      break;
    default:
      op.prepare = [w](const Case& c, std::vector<unsigned char*>& img) { saved_stats(w, c, img); };
      op.reference = [w](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& o) {
        return reference_bwd(w, c, t, o);
      };
      op.bound = [w](const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& o) {
        return bound_bwd(w, c, a, t, o);
      };
      op.device_reference = {
          .when = rowwise_device_when,
          .scratch = device_scratch_bwd,
          .prepare = [w](const Case& c, const std::vector<DevTensor>& t,
                         const DeviceContext& ctx) { return device_prepare_bwd(w, c, t, ctx); },
          .compute = [w](const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                         std::vector<DeviceOutput>& o,
                         const DeviceContext& ctx) { return device_compute_bwd(w, c, a, t, o, ctx); }};
  }
  if (is_ln(w))
    op.transform = [w](const Case& c, std::vector<unsigned char*>& img) {
      if (Params(c.params).s("relation") != "shift") return false;
      shift_tensor(c, img, 0);
      if (w == kLnBwd) shift_tensor(c, img, 3);  // the saved mean moves with x; rstd stays
      return true;
    };
  op.self_check = [w](std::string& report) { return is_bwd(w) ? self_check_bwd(w, report) : self_check_fwd(w, report); };
  return op;
}

// ---- binding ------------------------------------------------------------------------
const char* const kSrc = "kernels/rowwise/norms.cu";
ASSAY_REGISTER(register_op(make(kLn)));
ASSAY_REGISTER(register_op(make(kLnBwd)));
ASSAY_REGISTER(register_op(make(kRms)));
ASSAY_REGISTER(register_op(make(kRmsBwd)));
ASSAY_REGISTER(add_variant("layernorm", {.name = "welford",
                                         .description = "warp or block per row, Welford + Chan merge in fp32",
                                         .launch = layernorm_launch(kernels::rowwise::layernorm_fwd),
                                         .source = kSrc}));
ASSAY_REGISTER(add_variant("layernorm_bwd",
                           {.name = "rowwise",
                            .description = "dx per row; dgamma, dbeta by a column kernel in fixed row order (overwrites)",
                            .launch = layernorm_bwd_launch(kernels::rowwise::layernorm_bwd),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("rmsnorm", {.name = "rowwise",
                                       .description = "warp or block per row, mean of squares in fp32",
                                       .launch = rmsnorm_launch(kernels::rowwise::rmsnorm_fwd),
                                       .source = kSrc}));
ASSAY_REGISTER(add_variant("rmsnorm_bwd",
                           {.name = "rowwise",
                            .description = "dx per row; dgamma by a column kernel in fixed row order (overwrites)",
                            .launch = rmsnorm_bwd_launch(kernels::rowwise::rmsnorm_bwd),
                            .source = kSrc}));

}  // namespace
}  // namespace assay::rowwise
