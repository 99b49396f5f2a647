// adamw: a new op defined from scratch (params, tensors, fp64 reference, bound) and two
// kernels bound to it: one linked in (float4, with a contract), one loaded as PTX.
#include <algorithm>
#include <cmath>
#include "harness/bounds.h"
#include "harness/gpu/module.h"
#include "harness/op.h"
#include "kernels/adamw.h"

namespace {
using namespace assay;

my::AdamW hyper(const Params& p) {
  auto bc = [&](const char* b) { return static_cast<float>(1 - std::pow(static_cast<float>(p.r(b)), p.i("step"))); };
  return {float(p.r("lr")), float(p.r("beta1")), float(p.r("beta2")), float(p.r("eps")), float(p.r("wd")),
          bc("beta1"), bc("beta2")};
}
// Reference in double on the fp32 hyper-parameters the kernel receives. Bound: every fp32 op errs by u
// (gamma_k for k ops, [Higham] (3.4)), a product or quotient below the smallest normal by eta more; via
// bc and sqrt (|sqrt(x+d) - sqrt(x)| <= min(d / (2 sqrt x), sqrt d)) into p' = p(1 - lr wd) - lr r.
// Where an fp32 intermediate may overflow (g * g, m / bc1, v / bc2, r, p'), p and v are unchecked (+Inf).
Status reference_and_bound(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const my::AdamW h = hyper(Params(c.params));
  const double u = 0x1p-24, eta = 0x1p-149;
  const auto n = static_cast<size_t>(t[0].v.cols);
  out.assign(3, OutputRef{.ref = std::vector<double>(n), .tol = std::vector<double>(n)});
  for (size_t i = 0; i < n; ++i) {
    const auto j = static_cast<int64_t>(i);
    const double p = t[0].at(0, j), g = t[1].at(0, j), m0 = t[2].at(0, j), v0 = t[3].at(0, j);
    const double m = h.beta1 * m0 + (1.0 - h.beta1) * g, v = h.beta2 * v0 + (1.0 - h.beta2) * g * g;
    const double mh = m / h.bc1, vh = v / h.bc2, den = std::sqrt(vh) + h.eps, r = mh / den;
    const double pn = p * (1.0 - double(h.lr) * h.wd) - double(h.lr) * r;
    const double em = gamma_n(4, u) * (h.beta1 * std::fabs(m0) + (1 - h.beta1) * std::fabs(g)) + 2 * eta;
    const double ev = gamma_n(5, u) * (h.beta2 * v0 + (1 - h.beta2) * g * g) + 3 * eta;
    const double dmh = em / h.bc1 + gamma_n(1, u) * std::fabs(mh) + eta, dvh = ev / h.bc2 + gamma_n(1, u) * vh + eta;
    const double dden = std::min(dvh / (2 * std::sqrt(vh)), std::sqrt(dvh)) + gamma_n(2, u) * den;
    const double dr = den > dden ? (dmh + std::fabs(r) * dden) / (den - dden) + u * std::fabs(r) : INFINITY;
    out[0].ref[i] = pn, out[1].ref[i] = m, out[2].ref[i] = v;
    out[0].tol[i] = gamma_n(3, u) * std::fabs(p) * (1 + h.lr * h.wd) + h.lr * (dr + gamma_n(2, u) * std::fabs(r)) +
                    u * std::fabs(pn) + 3 * eta;
    out[1].tol[i] = em + u * std::fabs(m), out[2].tol[i] = ev + u * v;
    if (std::max({g * g, std::fabs(mh), vh, std::fabs(r), std::fabs(pn)}) > 0x1p127) out[0].tol[i] = out[2].tol[i] = INFINITY;
  }
  return ok_status();
}

OpDef adamw() {
  OpDef op{.name = "adamw", .description = "AdamW step in place on fp32 p, m, v (decoupled weight decay)"};
  op.params = {ParamDef::extent("n", 1, 1 << 20).aim({4, 256, 1024}), ParamDef::integer("step", 1, 10000),
               ParamDef::real("lr", {1e-3, 1e-2, 0.1}), ParamDef::real("beta1", {0.9, 0.8, 0.0}),
               ParamDef::real("beta2", {0.999, 0.99, 0.95}), ParamDef::real("eps", {1e-8, 1e-6}),
               ParamDef::real("wd", {0.01, 0.0, 0.1})};
  op.tensors = {{.name = "P", .role = Role::kInOut, .dims = {"n"}, .dtype = "fp32"},
                {.name = "G", .dims = {"n"}, .dtype = "fp32"},
                {.name = "M", .role = Role::kInOut, .dims = {"n"}, .dtype = "fp32"},
                {.name = "V", .role = Role::kInOut, .dims = {"n"}, .dtype = "fp32",
                 .values = {.classes = {ValueClass::kSameSign}}}};
  op.reference = reference_and_bound;  // an elementwise op: the bound is computed beside the reference
  return op;
}

const gpu::DriverKernel kPtx(ASSAY_IMAGE_ADAMW_PTX, "adamw_scalar",
                             "float* P, const float* G, float* M, float* V, int64_t n, float lr, float beta1, "
                             "float beta2, float eps, float wd, float bc1, float bc2",
                             [](const nlohmann::json& s) { return gpu::LaunchDims::cover_2d(s.at("n").get<int64_t>(), 1, 256, 1); });

ASSAY_REGISTER(register_op(adamw()));
ASSAY_REGISTER(add_variant("adamw", {.name = "float4", .description = "float4 loads, no tail loop",
  .launch = [](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    return my::adamw_step(t[0].as<float>(), t[1].as<float>(), t[2].as<float>(), t[3].as<float>(), p.i("n"), hyper(p), s);
  },
  .contract = Contract().multiple_of("n", 4).aligned(16), .source = "kernels/adamw.cu"}));
ASSAY_REGISTER(add_variant("adamw", {.name = "ptx", .description = "scalar kernel loaded as PTX",
  .launch = [](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    const my::AdamW h = hyper(p);
    return kPtx.launch_or_report({{{"P", t[0].ptr}, {"G", t[1].ptr}, {"M", t[2].ptr}, {"V", t[3].ptr}},
        {{"n", p.i("n")}, {"lr", h.lr}, {"beta1", h.beta1}, {"beta2", h.beta2}, {"eps", h.eps}, {"wd", h.wd},
         {"bc1", h.bc1}, {"bc2", h.bc2}}}, s);
  }, .source = "kernels/adamw_ptx.cu"}));
}  // namespace
