// gemm_bwd: the backward of C = alpha * A * B (fp32, row-major):
//   dA = alpha dC B^T (overwrite), dB += alpha A^T dC (accumulate: Contract::accumulates("dB")).
//
// Sections: declaration, references, bound, properties, binding.
// Variants: tiled (two tiled GEMMs), atomic (dB by atomicAdd over row chunks;
// declared non-deterministic, so judged by the bound alone). Both accumulate into
// dB. Mutants (tests/mutants/gemm/gemm_bwd_mutants.cu) bind through gemm_bwd_launch.
//
// References: the fp64 host GEMM reference for both outputs (dA = alpha dC B^T;
// dB's part alpha A^T dC, to which the engine adds the prefill). Bound:
// gemm_ceiling with k = n for dA, and k = m with the beta term for dB: the
// prefill enters dB's sum through at most m + 2 roundings (tiled: beta*C in the
// epilogue; atomic: one atomic addition per row chunk, at most m), so dB's
// magnitude includes |prefill| (the bound sees the prefill in dB's input view).
// The engine adds one more rounding of prefill + result on top.
// Properties (every case, relation "projection"): both bounds, NaN/Inf pattern,
// guards, poison of dA, gaps, inputs untouched, determinism where declared,
// accumulate semantics (the prefill is random, never zero), and <dC, J u>
// against central differences of the fp64 forward, which catches transposed
// and mis-indexed gradients by one number. Upstream gradients dC come from the
// value classes, so their rows differ. Extents stay <= 96: the finite
// differences run on the host.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/gradcheck.h"
#include "harness/op_model.h"
#include "harness/values.h"
#include "properties/gemm.h"
#include "references/host/gemm.h"

namespace assay {
namespace {

constexpr int kA = 0, kB = 1, kDC = 2;
constexpr int64_t kMaxExtent = 96;

// ---- declaration ------------------------------------------------------------------
std::vector<ParamDef> params() {
  return {ParamDef::extent("m", 1, kMaxExtent).aim({32}), ParamDef::extent("n", 1, kMaxExtent).aim({32}),
          ParamDef::extent("k", 1, kMaxExtent).aim({32}), ParamDef::real("alpha", {1, -1, 0.5, 1.5, 2}),
          ParamDef::choice("relation", {"projection"})
              .describe("<dC, J u> of the kernel's dA, dB against central differences of the fp64 forward")};
}

// ---- references and bound ------------------------------------------------------------
/// dA and dB's product part; aux[0]: the magnitudes |alpha| |dC||B^T| and |alpha| |A^T||dC|.
Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t m = p.i("m"), n = p.i("n"), k = p.i("k");
  const double alpha = p.r("alpha", 1);
  OutputRef da, db;
  da.ref.resize(static_cast<size_t>(m * k));
  da.aux.assign(1, std::vector<double>(da.ref.size()));
  db.ref.resize(static_cast<size_t>(k * n));
  db.aux.assign(1, std::vector<double>(db.ref.size()));
  ref::gemm_reference(ref::GemmProblem<double>{m, k, n, false, true, alpha, 0, t[kDC].data, t[kDC].v.ld, t[kB].data,
                                               t[kB].v.ld, nullptr, 0},
                      da.ref.data(), da.aux[0].data(), 1);
  ref::gemm_reference(ref::GemmProblem<double>{k, n, m, true, false, alpha, 0, t[kA].data, t[kA].v.ld, t[kDC].data,
                                               t[kDC].v.ld, nullptr, 0},
                      db.ref.data(), db.aux[0].data(), 1);
  out = {std::move(da), std::move(db)};
  return ok_status();
}

ElementBound ceiling(int64_t k, double alpha, bool beta) {
  GemmBoundModel mb;
  mb.k = k, mb.alpha_abs = std::fabs(alpha), mb.has_beta = beta;
  ElementBound b = gemm_ceiling(mb);
  b.rel_mag /= 1.0 - gamma_n(k + 2, 0x1p-53);  // mag itself is an fp64 sum of k + 2 terms
  return b;
}

Status bound(const Case& c, const Arithmetic&, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const int64_t n = p.i("n"), k = p.i("k");
  const ElementBound ba = ceiling(n, p.r("alpha", 1), false), bb = ceiling(p.i("m"), p.r("alpha", 1), true);
  OutputRef &da = out[0], &db = out[1];
  da.tol.resize(da.ref.size());
  for (size_t l = 0; l < da.ref.size(); ++l) da.tol[l] = ba.tol(std::fabs(da.ref[l]), da.aux[0][l]);
  db.tol.resize(db.ref.size());
  const HostTensor& prefill = t[4];
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = 0; j < n; ++j) {
      const size_t l = static_cast<size_t>(q * n + j);
      db.tol[l] = bb.tol(std::fabs(db.ref[l] + prefill.at(q, j)), db.aux[0][l] + std::fabs(prefill.at(q, j)));
    }
  return ok_status();
}

// ---- properties ------------------------------------------------------------------------
/// <dC, J (uA, uB)> = <uA, dA> + <uB, dB - prefill> against central differences of the fp64
/// forward; u drawn from A's seed. Tolerance: the FD error (the engine's safety factor), the
/// kernel's bound summed against |u|, and the rounding of the two contractions.
void projection(const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                const std::vector<OutputRef>& refs, std::vector<Failure>& failures) {
  if (Params(c.params).s("relation") != "projection") return;
  const Params p(c.params);
  const int64_t m = p.i("m"), n = p.i("n"), k = p.i("k");
  const double alpha = p.r("alpha", 1);
  const int64_t mk = m * k, kn = k * n, nx = mk + kn;
  std::vector<double> x(static_cast<size_t>(nx));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q) x[static_cast<size_t>(i * k + q)] = in[kA].at(i, q);
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(mk + q * n + j)] = in[kB].at(q, j);
  for (double v : x)
    if (!std::isfinite(v)) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (!std::isfinite(in[kDC].at(i, j))) return;
  Differentiable f;
  f.n = nx;
  f.m = m * n;
  f.forward = [=](const double* xx, double* y) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += xx[i * k + q] * xx[mk + q * n + j];
        y[i * n + j] = alpha * acc;
      }
  };
  f.magnitude = [=](const double* xx, double* y) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += std::fabs(xx[i * k + q] * xx[mk + q * n + j]);
        y[i * n + j] = std::fabs(alpha) * acc;
      }
  };
  const std::vector<double> u = draw_values(ValueClass::kNormal, c.tensors[kA].values.seed ^ 0x5eed, 7, nx);
  auto fd = fd_directional(f, x.data(), u.data());
  if (!fd.ok()) return;
  double fd_val = 0, fd_err = 0, kern = 0, tol = 0, sum_abs = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double w = in[kDC].at(i, j);
      fd_val += w * fd->jvp[static_cast<size_t>(i * n + j)];
      fd_err += std::fabs(w) * fd->err[static_cast<size_t>(i * n + j)];
    }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q) {
      const size_t l = static_cast<size_t>(i * k + q);
      const double ue = fd->u_eff[l], g = out[0].at(i, q);
      kern += ue * g;
      sum_abs += std::fabs(ue * g);
      tol += std::fabs(ue) * refs[0].tol[l];
    }
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = 0; j < n; ++j) {
      const size_t l = static_cast<size_t>(q * n + j);
      const double ue = fd->u_eff[static_cast<size_t>(mk) + l];
      const double g = out[1].at(q, j) - in[4].at(q, j);
      kern += ue * g;
      sum_abs += std::fabs(ue * g);
      tol += std::fabs(ue) * refs[1].tol[l];
    }
  tol += 4 * fd_err + gamma_n(nx + m * n, 0x1p-53) * (sum_abs + std::fabs(fd_val)) + 1e-300;
  if (std::isfinite(kern) && std::isfinite(fd_val) && !(std::fabs(kern - fd_val) <= tol))
    failures.push_back({FailureKind::kProjection, "", 1, -1,
                        fmt::format("<dC, J u> = {:.10g} by central differences of the fp64 forward, {:.10g} from the "
                                    "kernel's dA and dB - prefill; |diff| {:.3g} > tolerance {:.3g}",
                                    fd_val, kern, std::fabs(kern - fd_val), tol)});
}

/// The host reference's dA against a direct long-double evaluation on a small case.
Status self_check(std::string& report) {
  const int64_t m = 5, n = 7, k = 3;
  std::vector<double> dc(static_cast<size_t>(m * n)), b(static_cast<size_t>(k * n)), da(static_cast<size_t>(m * k)),
      mag(da.size());
  for (size_t i = 0; i < dc.size(); ++i) dc[i] = std::sin(0.3 * static_cast<double>(i)) * 3;
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.7 * static_cast<double>(i)) / 3;
  ref::gemm_reference(ref::GemmProblem<double>{m, k, n, false, true, 1.5, 0, dc.data(), n, b.data(), n, nullptr, 0},
                      da.data(), mag.data(), 1);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q) {
      long double s = 0;
      for (int64_t j = 0; j < n; ++j)
        s += static_cast<long double>(dc[static_cast<size_t>(i * n + j)]) * b[static_cast<size_t>(q * n + j)];
      const double e = static_cast<double>(std::fabs(1.5L * s - da[static_cast<size_t>(i * k + q)]));
      worst = std::max(worst, e / (mag[static_cast<size_t>(i * k + q)] + 1e-300));
    }
  if (!(worst < 1e-14)) return internal_error(fmt::format("gemm_bwd: host dA off by {:.3g} of its magnitude", worst));
  report += fmt::format("gemm_bwd: host dA = alpha dC B^T within {:.2g} (relative to |dC||B|) of long double\n", worst);
  return ok_status();
}

OpDef make() {
  OpDef op;
  op.name = "gemm_bwd";
  op.description = "fp32 backward of C = alpha*A*B: dA = alpha dC B^T, dB += alpha A^T dC";
  op.params = params();
  const ValueSpec values{.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                     ValueClass::kSmallInt, ValueClass::kLogUniform}};
  op.tensors = {{.name = "A", .dims = {"m", "k"}, .dtype = "fp32", .values = values},
                {.name = "B", .dims = {"k", "n"}, .dtype = "fp32", .values = values},
                {.name = "dC", .dims = {"m", "n"}, .dtype = "fp32", .values = values},
                {.name = "dA", .role = Role::kOut, .dims = {"m", "k"}, .dtype = "fp32"},
                {.name = "dB", .role = Role::kOut, .dims = {"k", "n"}, .dtype = "fp32"}};
  op.check = [](const Params& p) {
    const double a = p.r("alpha", 1);
    return static_cast<double>(static_cast<float>(a)) == a
               ? ok_status()
               : invalid_argument(fmt::format("gemm_bwd case: params.alpha = {} is not an fp32 value", a));
  };
  op.reference = reference;
  op.bound = bound;
  op.bound_name = "GEMM ceiling";
  op.properties = projection;
  op.self_check = self_check;
  return op;
}

// ---- binding ------------------------------------------------------------------------
ASSAY_REGISTER(register_op(make()));
ASSAY_REGISTER(add_variant("gemm_bwd", {.name = "tiled",
                                        .description = "dA and dB through the tiled GEMM (dB accumulates with beta = 1)",
                                        .launch = gemm_bwd_launch(kernels::gemm_bwd_f32_tiled),
                                        .contract = Contract().accumulates("dB"),
                                        .source = "kernels/gemm/gemm_backward.cu"}));
ASSAY_REGISTER(add_variant("gemm_bwd",
                           {.name = "atomic",
                            .description = "dB by atomicAdd over row chunks (non-deterministic order: judged by the bound)",
                            .launch = gemm_bwd_launch(kernels::gemm_bwd_f32_atomic),
                            .contract = Contract().accumulates("dB"),
                            .deterministic = false,
                            .source = "kernels/gemm/gemm_backward.cu"}));

}  // namespace

Case make_gemm_bwd_case(int64_t m, int64_t n, int64_t k, double alpha, int64_t pad, int64_t off, const ValueRecipe& ra,
                        const ValueRecipe& rb, const ValueRecipe& rdc) {
  const OpDef* op = find_op("gemm_bwd");
  if (op == nullptr) return Case{};
  const nlohmann::json p = {{"m", m}, {"n", n}, {"k", k}, {"alpha", alpha}, {"relation", "projection"}};
  auto c = build_case(*op, p, {ra, rb, rdc}, std::vector<Layout>(5, Layout{pad, off}));
  return c.ok() ? std::move(c).value() : Case{};
}

}  // namespace assay
