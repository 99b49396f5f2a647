// gemm_bias_act / gemm_bias_act_bwd: GEMM with a fused bias + activation epilogue (act none,
// relu, gelu), and its backward (dA written, dB and dbias accumulated), fp32 / fp16 / bf16
// storage with fp32 accumulation and epilogue.
//
// Sections: binding, generators, references and bound, properties, backward.
// Binding: kernels/gemm/gemm_epilogue.cu, variants "tiled" (forward: 32x32 shared-memory tiles,
// the epilogue fused into the store, Z written as the auxiliary output) and "tiled" (backward:
// dA = dZ op(B)^T and dB += op(A)^T dZ as tiled products with dZ = dY act'(Z) formed in fp32 while
// loading, never stored; dbias += column sums by one thread per column, rows in order:
// deterministic). The planted bugs of tests/mutants/gemm/epilogue_mutants.cu register beside them
// (properties/gemm_epilogue_registry.h).
// GELU form: the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). cuBLASLt's header and
// documentation (cublasLtEpilogue_t, CUBLASLT_EPILOGUE_GELU_BIAS: "apply Bias and then GELU
// transform") do not name the form; PyTorch's _addmm_activation falls back to
// gelu(approximate="tanh") where it cannot use the cuBLASLt epilogue, and llm.c treats the
// cuBLASLt GELU epilogue as interchangeable with its tanh-form kernel. The cuBLASLt comparison in
// tests/properties/gemm_epilogue_gpu_test.cpp checks it: the erf form differs from the tanh form
// by up to 1e-3 absolute, far outside the fp32 ceiling.
// Tensors (row-major, every 2-D tensor of a case with the same row pad and leading offset):
//   forward:  A (trans_a ? k x m : m x k), B (trans_b ? n x k : k x n), bias [n] in; Y, Z [m, n] out.
//   backward: A, B, Z [m, n], dY [m, n] in; dA (A's layout) out; dB (B's layout), dbias [n] in-out.
//
// Bound (per element; u = 2^-24; [H] = Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.):
//   Z: a dot product of k products and the bias (k + 1 terms) accumulated in fp32 in any order, FMA or
//      not: e32 = gemm_ceiling(in = dt, acc = out = fp32, k + 1) with mag = |op(A)||op(B)| + |bias|
//      ([H] (3.5); products of fp16 / bf16 values are exact in fp32), stored: + 0.5 ulp_dt(|z| + e32).
//   Y = act(z^) with |z^ - z| <= e32:
//      none, relu: 1-Lipschitz and exact in fp32 (the kink needs no care: |relu(a) - relu(b)| <= |a - b|).
//      gelu: |GELU'| <= 1.13 on the reals (max 1.1289 at x = 1.5), so L e32 with L = 1.13, plus the
//      evaluation error at the fp32 argument x = z^ (|x| <= |z| + e32), from the CUDA guide's ulp
//      table (tanhf 2 ulps, harness/bounds.h find_math_fn):
//        t = tanhf(w^): |t^ - tanh(w)| <= dt = (N + 1/2) u + 0.45 gamma_7   (|t| < 1: ulp <= u; w^ carries
//          7 roundings incl. the two fp32 constants, and |w| sech^2(w) <= 0.4487)
//        y = 0.5 x (1 + t): |y^ - y| <= 0.5 |x| (dt + u) + u |y|      (1 + t: one rounding <= u absolute)
//      plus an underflow floor of 4 fp32 subnormal spacings; the whole evaluation term x (1 + 2^-20)
//      for the double arithmetic of the bound itself. Stored: + 0.5 ulp_dt(|y| + E).
//   Overflow: where |ref| + tol reaches max_finite(dt), the element is unchecked (tol = +Inf).
// Backward (Z is an input: act' is evaluated at an exact argument):
//   dz = dY act'(Z) in fp32, never stored. none / relu: exact (a product by 1 or 0). gelu:
//      act'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) w', w' = k (1 + 3c x^2): an error in t moves it by at most
//      (0.5 + |x| |w'|) |dt|, the ~12 other roundings by 12 u M, M = 0.5 (1 + |t|) + 0.5 |x| (1 - t^2) |w'|;
//      where t^ = +-1 the kernel drops the second term, whose true value is then <= |x| |w'| dt (covered).
//      ez = |dY| E_d + u (|dz| + |dY| E_d) + 2^-149 (the product's rounding and underflow).
//   dA = dz op(B)^T: gemm_ceiling(in = fp32 (dz is fp32: its products round), k = n) on mag = sum (|dz| +
//      ez) |B|, plus the propagated sum ez |B|; dB = prefill + op(A)^T dz: k = m + 1 (the prefill is a
//      term), likewise; dbias = prefill + sum_i dz: k = m + 1. Each then stored: + 0.5 ulp_dt.
// Exact tier: act none / relu, every input a small integer (no injection) and gemm_exact_tier_holds(in =
//   dt, acc = fp32, out = dt, k + 1 (forward) or max(n, m + 1) (backward)): bit-identical.
// Properties (case param "relation", a quarter of the cases):
//   forward "permute_rows": the rows of op(A) reversed; rows of Y and Z must follow (relate hook).
//   forward "scale2" (act none / relu only: positively homogeneous): A and bias doubled, Y and Z must
//      double (exact in binary floating point; compared within 2 tol1 + tol2).
//   forward, every relation case, act none / relu: the kernel's Y equals act(its own Z) bit for bit
//      (rn(relu(z)) = relu(rn(z))): a bias added after the activation, or a Y from another z, breaks it.
//   backward "gradcheck": <dY, J u> by central differences of the fp64 forward
//      F(A', B', beta) = act(Z + op(A')op(B') - op(A)op(B) + beta) at (A, B, 0) (the case's Z is the
//      pre-activation there; the difference op(A')op(B') - op(A)op(B) is formed bilinearly from the
//      perturbations, so it is exactly 0 at the point) against sum u . (dA, dB - prefill, dbias -
//      prefill) of the kernel (properties/gradcheck_relation.h). ReLU: F uses the linear piece at Z
//      (1[Z > 0] (Z + ...)): differences across the kink say nothing.
// Generator: m, n 1..80 (edges around 32), k 0..160 (k = 0 in 1/12 of the cases: Y = act(bias)), both
// transposes, three dtypes, three acts, value classes normal / uniform / same-sign / small-int /
// log-uniform (exponents clamped to [-12, 12]); all inputs small-int in a quarter of the cases (the
// exact tier; Z then holds exact zeros, where relu' = 0); no NaN/Inf injection (the spec declares
// finite inputs). Declared invalid (validate): m, n < 1, dims above 4096, more than 2^24 multiply-adds.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <vector>

#include "properties/gemm_epilogue_registry.h"
#include "properties/gradcheck_relation.h"
#include "properties/rowwise_common.h"

namespace assay::epilogue {

using kernels::epi::Act;
using kernels::epi::Dt;
using rowwise::param_dtype;
using rowwise::param_int;
using rowwise::str_or;

namespace {

// ---- binding ---------------------------------------------------------------------------------------
std::vector<TensorOpVariant>& reg(EpiPass p) {
  static std::vector<TensorOpVariant> v[2];
  return v[static_cast<int>(p)];
}

Dt to_dt(DType t) {
  return t == DType::kF16 ? Dt::kF16 : t == DType::kBF16 ? Dt::kBF16 : Dt::kF32;
}

Act act_of(const nlohmann::json& p) {
  const std::string a = p.value("act", std::string("none"));
  return a == "relu" ? Act::kRelu : a == "gelu" ? Act::kGelu : Act::kNone;
}

}  // namespace

const char* epi_op_name(EpiPass pass) {
  return pass == EpiPass::kBwd ? "gemm_bias_act_bwd" : "gemm_bias_act";
}

ref::EpilogueProblem epilogue_problem(const nlohmann::json& p) {
  ref::EpilogueProblem e;
  e.m = p.value("m", int64_t{0});
  e.n = p.value("n", int64_t{0});
  e.k = p.value("k", int64_t{0});
  e.trans_a = p.value("trans_a", false);
  e.trans_b = p.value("trans_b", false);
  const Act a = act_of(p);
  e.act = a == Act::kRelu   ? ref::Activation::kRelu
          : a == Act::kGelu ? ref::Activation::kGeluTanh
                            : ref::Activation::kIdentity;
  return e;
}

bool register_epilogue_fwd(VariantInfo info, kernels::epi::FwdFn fn) {
  reg(EpiPass::kFwd).push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                                  const ref::EpilogueProblem p = epilogue_problem(c.params);
                                  kernels::epi::FwdArgs a;
                                  a.m = p.m, a.n = p.n, a.k = p.k, a.trans_a = p.trans_a, a.trans_b = p.trans_b;
                                  a.dt = to_dt(t[0].dtype);
                                  a.act = act_of(c.params);
                                  a.a = t[0].ptr, a.lda = t[0].v.ld, a.b = t[1].ptr, a.ldb = t[1].v.ld;
                                  a.bias = t[2].ptr;
                                  a.y = t[3].ptr, a.ldy = t[3].v.ld, a.z = t[4].ptr, a.ldz = t[4].v.ld;
                                  return fn(a, s);
                                }});
  return true;
}

bool register_epilogue_bwd(VariantInfo info, kernels::epi::BwdFn fn) {
  reg(EpiPass::kBwd).push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                                  const ref::EpilogueProblem p = epilogue_problem(c.params);
                                  kernels::epi::BwdArgs a;
                                  a.m = p.m, a.n = p.n, a.k = p.k, a.trans_a = p.trans_a, a.trans_b = p.trans_b;
                                  a.dt = to_dt(t[0].dtype);
                                  a.act = act_of(c.params);
                                  a.a = t[0].ptr, a.lda = t[0].v.ld, a.b = t[1].ptr, a.ldb = t[1].v.ld;
                                  a.z = t[2].ptr, a.ldz = t[2].v.ld, a.dy = t[3].ptr, a.lddy = t[3].v.ld;
                                  a.da = t[4].ptr, a.ldda = t[4].v.ld, a.db = t[5].ptr, a.lddb = t[5].v.ld;
                                  a.dbias = t[6].ptr;
                                  return fn(a, s);
                                }});
  return true;
}

const std::vector<TensorOpVariant>& epilogue_variants(EpiPass pass) {
  return reg(pass);
}

namespace {

const char* const kSrc = "kernels/gemm/gemm_epilogue.cu";
[[maybe_unused]] const bool kKernels =
    register_epilogue_fwd(
        {"tiled", "32x32 shared-memory tiles, fp32 FMA, bias + act fused into the store, Z aux", false, true, kSrc},
        kernels::epi::gemm_bias_act_tiled) &&
    register_epilogue_bwd({"tiled",
                           "dA, dB by 32x32 tiled products with dZ = dY act'(Z) formed in fp32 on load; dbias by "
                           "column, rows in order",
                           false, true, kSrc},
                          kernels::epi::gemm_bias_act_bwd);

constexpr int64_t kGenMaxMacs = int64_t{1} << 20, kMaxMacs = int64_t{1} << 24;
// relation "gradcheck": generated at most 2^14 multiply-adds, accepted up to 2^18 (the finite
// differences run two fp64 GEMMs per forward evaluation, several evaluations per check).
constexpr int64_t kGenMaxMacsGrad = int64_t{1} << 14, kMaxMacsGrad = int64_t{1} << 18;
constexpr double kU = 0x1p-24;

int64_t macs(const ref::EpilogueProblem& p) {
  return p.m * p.n * std::max<int64_t>(p.k, 1);
}

}  // namespace

Case build_epilogue_case(EpiPass pass, const nlohmann::json& params, const std::vector<ValueRecipe>& r, int64_t pad,
                         int64_t off) {
  Case c;
  c.op = epi_op_name(pass);
  c.params = params;
  const DType dt = parse_dtype(params.value("dtype", std::string("fp32"))).value_or(DType::kF32);
  const ref::EpilogueProblem p = epilogue_problem(params);
  auto rec = [&](size_t i) { return i < r.size() ? r[i] : ValueRecipe{}; };
  const int64_t ar = p.trans_a ? p.k : p.m, ac = p.trans_a ? p.m : p.k;
  const int64_t br = p.trans_b ? p.n : p.k, bc = p.trans_b ? p.k : p.n;
  c.tensors = {make_tensor("A", Role::kIn, dt, ar, ac, pad, off, rec(0)),
               make_tensor("B", Role::kIn, dt, br, bc, pad, off, rec(1))};
  if (pass == EpiPass::kFwd) {
    c.tensors.push_back(make_tensor("bias", Role::kIn, dt, -1, p.n, 0, 0, rec(2)));
    c.tensors.push_back(make_tensor("Y", Role::kOut, dt, p.m, p.n, pad, off, {}));
    c.tensors.push_back(make_tensor("Z", Role::kOut, dt, p.m, p.n, pad, off, {}));
  } else {
    c.tensors.push_back(make_tensor("Z", Role::kIn, dt, p.m, p.n, pad, off, rec(2)));
    c.tensors.push_back(make_tensor("dY", Role::kIn, dt, p.m, p.n, pad, off, rec(3)));
    c.tensors.push_back(make_tensor("dA", Role::kOut, dt, ar, ac, pad, off, {}));
    c.tensors.push_back(make_tensor("dB", Role::kInOut, dt, br, bc, pad, off, rec(4)));
    c.tensors.push_back(make_tensor("dbias", Role::kInOut, dt, -1, p.n, 0, 0, rec(5)));
  }
  return c;
}

namespace {

// ---- generators ------------------------------------------------------------------------------------
rc::Gen<ValueRecipe> gen_recipe(DType dt, bool small_int) {
  RecipeOptions o;
  o.classes = small_int ? std::vector<ValueClass>{ValueClass::kSmallInt}
                        : std::vector<ValueClass>{ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                                  ValueClass::kSmallInt, ValueClass::kLogUniform};
  o.dtype = dt;
  o.specials = 0;
  o.inject_percent = 0;
  return rc::gen::map(gen_value_recipe(o), [](ValueRecipe r) {
    r.exp_min = std::max<int64_t>(r.exp_min, -12);
    r.exp_max = std::min<int64_t>(r.exp_max, 12);
    if (r.exp_max < r.exp_min) r.exp_max = r.exp_min;
    return r;
  });
}

/// Halves the largest of m, n, k until the work fits `cap`.
void fit(int64_t& m, int64_t& n, int64_t& k, int64_t cap) {
  while (m * n * std::max<int64_t>(k, 1) > cap) {
    int64_t& x = (k >= m && k >= n) ? k : (m >= n ? m : n);
    x = (x + 1) / 2;
  }
}

rc::Gen<Case> gen_case(EpiPass pass) {
  return rc::gen::exec([pass] {
    const int64_t tile = kernels::epi::kEpilogueTile;
    int64_t m = *gen_extent(80, {tile}, 1), n = *gen_extent(80, {tile}, 1), k = *gen_extent(160, {tile}, 1);
    if (*gen_weighted_index({11, 1}) == 1) k = 0;
    const bool grad = pass == EpiPass::kBwd && *gen_weighted_index({3, 1}) == 1;
    fit(m, n, k, grad ? kGenMaxMacsGrad : kGenMaxMacs);
    const DType dt = *gen_element(rowwise::activation_dtypes());
    const std::string act = *gen_element<std::string>({"none", "relu", "gelu"});
    nlohmann::json p = {{"m", m},
                        {"n", n},
                        {"k", k},
                        {"trans_a", *rc::gen::arbitrary<bool>()},
                        {"trans_b", *rc::gen::arbitrary<bool>()},
                        {"dtype", std::string(dtype_name(dt))},
                        {"act", act}};
    const bool exact = *gen_weighted_index({3, 1}) == 1;
    std::vector<ValueRecipe> r;
    const size_t inputs = pass == EpiPass::kFwd ? 3 : 6;
    for (size_t i = 0; i < inputs; ++i) r.push_back(*gen_recipe(dt, exact));
    if (grad) {
      p["relation"] = kGradcheckRelation;
    } else if (pass == EpiPass::kFwd && *gen_weighted_index({3, 1}) == 1) {
      p["relation"] = act != "gelu" && *gen_weighted_index({1, 1}) == 1 ? "scale2" : "permute_rows";
    }
    const int64_t pad = *gen_element<int64_t>({0, 0, 0, 1, 3, 8});
    const int64_t off = *gen_element<int64_t>({0, 0, 0, 1, 2});
    return build_epilogue_case(pass, p, r, pad, off);
  });
}

Status validate(EpiPass pass, const Case& c) {
  ASSAY_RETURN_IF_ERROR(param_dtype(c).status());
  const std::string act = str_or(c, "act", "");
  if (act != "none" && act != "relu" && act != "gelu")
    return invalid_argument(c.op + " case: params.act must be \"none\", \"relu\" or \"gelu\"");
  for (const char* k : {"m", "n"}) ASSAY_RETURN_IF_ERROR(param_int(c, k, 1, 4096).status());
  ASSAY_RETURN_IF_ERROR(param_int(c, "k", 0, 4096).status());
  for (const char* k : {"trans_a", "trans_b"})
    if (!c.params.contains(k) || !c.params[k].is_boolean())
      return invalid_argument(fmt::format("{} case: params.{} must be true or false", c.op, k));
  const ref::EpilogueProblem p = epilogue_problem(c.params);
  if (macs(p) > kMaxMacs)
    return invalid_argument(fmt::format("{} case: {} multiply-adds, above the limit of {}", c.op, macs(p), kMaxMacs));
  if (c.params.contains("relation")) {
    const std::string rel = str_or(c, "relation", "");
    if (pass == EpiPass::kBwd) {
      if (!wants_gradcheck(c)) return invalid_argument(c.op + " case: params.relation: only \"gradcheck\"");
      if (macs(p) > kMaxMacsGrad)
        return invalid_argument(
            fmt::format("{} case: params.relation \"gradcheck\" needs at most {} multiply-adds, "
                        "not {}",
                        c.op, kMaxMacsGrad, macs(p)));
    } else if (rel != "permute_rows" && !(rel == "scale2" && act != "gelu")) {
      return invalid_argument(c.op +
                              " case: params.relation must be \"permute_rows\" or, for act none / relu, \"scale2\"");
    }
  }
  const std::vector<std::pair<std::string, Role>>
      fwd = {{"A", Role::kIn}, {"B", Role::kIn}, {"bias", Role::kIn}, {"Y", Role::kOut}, {"Z", Role::kOut}},
      bwd = {{"A", Role::kIn},   {"B", Role::kIn},     {"Z", Role::kIn},       {"dY", Role::kIn},
             {"dA", Role::kOut}, {"dB", Role::kInOut}, {"dbias", Role::kInOut}};
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, pass == EpiPass::kFwd ? fwd : bwd));
  const Case want = build_epilogue_case(pass, c.params, {}, 0, 0);
  const DType dt = *param_dtype(c);
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const auto& d = c.tensors[i].desc;
    const auto& e = want.tensors[i].desc;
    if (d.dtype != dt || d.shape != e.shape)
      return invalid_argument(fmt::format("{} case: tensor {} must be {} of shape [{}]", c.op, c.tensors[i].name,
                                          dtype_name(dt), fmt::join(e.shape, ", ")));
  }
  return ok_status();
}

// ---- references and bound --------------------------------------------------------------------------
struct TanhErr {
  double n_tanh = 2;  ///< tanhf ulps (CUDA guide table)
  double dt = 0;      ///< |t^ - tanh(w)| (absolute)
};
const TanhErr& tanh_err() {
  static const TanhErr e = [] {
    TanhErr x;
    if (const MathFnAccuracy* f = find_math_fn("tanhf")) x.n_tanh = f->ulp_f32;
    x.dt = (x.n_tanh + 0.5) * kU + 0.45 * gamma_n(7, kU);
    return x;
  }();
  return e;
}

constexpr double kSlop = 1 + 0x1p-20;       // the bound's own double arithmetic
constexpr double kF32Floor = 4 * 0x1p-149;  // a few fp32 subnormal spacings

/// Stored value's tolerance: e (fp32 result's error) + half an ulp of dt at |ref| + e; +Inf at overflow.
double stored(double ref_abs, double e, DType dt) {
  const double tol = e + rowwise::store_rounding(ref_abs + e, dt);
  return ref_abs + tol >= max_finite(dt) ? INFINITY : tol;
}

GemmBoundModel model(DType in, int64_t k) {
  GemmBoundModel m;
  m.in = in;
  m.acc = DType::kF32;
  m.out = DType::kF32;  // the store's rounding is added by `stored`
  m.k = k;
  return m;
}

bool exact_tier(DType dt, int64_t k, int64_t int_range) {
  GemmBoundModel e = model(dt, k);
  e.out = dt;
  return int_range >= 0 && gemm_exact_tier_holds(e, int_range, 0, 0);
}

}  // namespace

double gelu_eval_error(double x, double y) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  return (0.5 * ax * (tanh_err().dt + kU) + kU * ay) * kSlop + kF32Floor;
}

double gelu_grad_eval_error(double x) {
  const double ax = std::fabs(x);
  const double k = std::sqrt(2 / M_PI), c = 0.044715;
  const double wp = k * (1 + 3 * c * ax * ax), t = std::tanh(k * (ax + c * ax * ax * ax));
  const double M = 0.5 * (1 + std::fabs(t)) + 0.5 * ax * (1 - t * t) * wp;
  return ((0.5 + ax * wp) * (tanh_err().dt + kU) + 12 * kU * M) * kSlop + kF32Floor;
}

std::vector<OutputRef> forward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                    const double* bias, int64_t int_range) {
  std::vector<double> z, y, mag;
  ref::epilogue_forward(p, a, b, bias, z, y, mag);
  const ElementBound ceil = gemm_ceiling(model(dt, p.k + 1));
  std::vector<OutputRef> out(2);
  out[0].ref = y;
  out[1].ref = z;
  out[0].tol.resize(y.size());
  out[1].tol.resize(z.size());
  const bool gelu = p.act == ref::Activation::kGeluTanh;
  for (size_t e = 0; e < z.size(); ++e) {
    const double az = std::fabs(z[e]), ay = std::fabs(y[e]);
    const double e32 = ceil.tol(az, mag[e]);
    out[1].tol[e] = stored(az, e32, dt);
    const double ey = gelu ? kGeluLipschitz * e32 + gelu_eval_error(az + e32, ay + kGeluLipschitz * e32)
                           : e32;  // none, relu: 1-Lipschitz
    out[0].tol[e] = stored(ay, ey, dt);
  }
  const bool exact = !gelu && exact_tier(dt, p.k + 1, int_range);
  out[0].exact = out[1].exact = exact;
  return out;
}

std::vector<OutputRef> backward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                     const double* z, const double* dy, const double* db0, const double* dbias0,
                                     int64_t int_range) {
  const ref::EpilogueGrads g = ref::epilogue_backward(p, a, b, z, dy);
  const int64_t m = p.m, n = p.n, k = p.k, la = ref::lda_of(p), lb = ref::ldb_of(p);
  const bool gelu = p.act == ref::Activation::kGeluTanh;
  // dz's error per element (0 for none / relu: a product by 1 or 0).
  std::vector<double> ez(static_cast<size_t>(m * n), 0.0);
  std::vector<double> prop_a(g.da.size(), 0.0), prop_b(g.db.size(), 0.0), prop_bias(g.dbias.size(), 0.0);
  if (gelu) {
    for (int64_t e = 0; e < m * n; ++e) {
      const double ed = std::fabs(dy[e]) * gelu_grad_eval_error(z[e]);
      ez[static_cast<size_t>(e)] = ed + kU * (std::fabs(g.dz[static_cast<size_t>(e)]) + ed) + 0x1p-149;
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double d = ez[static_cast<size_t>(i * n + j)];
        prop_bias[static_cast<size_t>(j)] += d;
        for (int64_t q = 0; q < k; ++q) {
          const size_t ia = static_cast<size_t>(p.trans_a ? q * la + i : i * la + q);
          const size_t ib = static_cast<size_t>(p.trans_b ? j * lb + q : q * lb + j);
          prop_a[ia] += d * std::fabs(b[ib]);
          prop_b[ib] += std::fabs(a[ia]) * d;
        }
      }
  }
  std::vector<OutputRef> out(3);
  auto fill = [&](OutputRef& o, const std::vector<double>& r, const std::vector<double>& mag,
                  const std::vector<double>& prop, const double* prefill, int64_t terms) {
    const ElementBound ceil = gemm_ceiling(model(DType::kF32, terms));
    o.ref.resize(r.size());
    o.tol.resize(r.size());
    for (size_t e = 0; e < r.size(); ++e) {
      const double pre = prefill != nullptr ? prefill[e] : 0.0;
      o.ref[e] = r[e] + pre;
      const double ae = std::fabs(o.ref[e]);
      o.tol[e] = stored(ae, ceil.tol(ae, mag[e] + prop[e] + std::fabs(pre)) + prop[e], dt);
    }
  };
  fill(out[0], g.da, g.mag_da, prop_a, nullptr, n);
  fill(out[1], g.db, g.mag_db, prop_b, db0, m + 1);
  fill(out[2], g.dbias, g.mag_dbias, prop_bias, dbias0, m + 1);
  const bool exact = !gelu && exact_tier(dt, std::max(n, m + 1), int_range);
  for (auto& o : out) o.exact = exact;
  return out;
}

namespace {

int64_t int_range_of(const Case& c) {
  int64_t r = 0;
  for (const auto& t : c.tensors) {
    if (t.role == Role::kOut) continue;
    if (t.values.cls != ValueClass::kSmallInt || t.values.inject.active()) return -1;
    r = std::max(r, t.values.int_range);
  }
  return r;
}

Status reference(EpiPass pass, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const ref::EpilogueProblem p = epilogue_problem(c.params);
  const DType dt = *param_dtype(c);
  std::vector<std::vector<double>> d;
  for (const auto& h : t) d.push_back(pack_dense(h));
  if (pass == EpiPass::kFwd)
    out = forward_refs(p, dt, d[0].data(), d[1].data(), d[2].data(), int_range_of(c));
  else
    out = backward_refs(p, dt, d[0].data(), d[1].data(), d[2].data(), d[3].data(), d[5].data(), d[6].data(),
                        int_range_of(c));
  return ok_status();
}

// ---- properties ------------------------------------------------------------------------------------
/// Row i of op(A) in the transformed launch is row perm(i) of the original: a reversal.
int64_t perm(int64_t m, int64_t i) {
  return m - 1 - i;
}

bool transform_fwd(const Case& c, std::vector<unsigned char*>& img) {
  const std::string rel = str_or(c, "relation", "");
  const ref::EpilogueProblem p = epilogue_problem(c.params);
  const auto& ad = c.tensors[0].desc;
  const View2D av = view_of(ad);
  const DType dt = ad.dtype;
  if (rel == "permute_rows") {
    if (p.m < 2 || p.k == 0) return false;
    std::vector<double> orig(static_cast<size_t>(av.rows * av.cols));
    for (int64_t r = 0; r < av.rows; ++r)
      for (int64_t q = 0; q < av.cols; ++q)
        orig[static_cast<size_t>(r * av.cols + q)] = rowwise::peek(dt, img[0], ad.offset + r * av.ld + q);
    // Row i of op(A): a row of A's storage, or (trans_a) a column.
    for (int64_t r = 0; r < av.rows; ++r)
      for (int64_t q = 0; q < av.cols; ++q) {
        const int64_t sr = p.trans_a ? r : perm(p.m, r), sq = p.trans_a ? perm(p.m, q) : q;
        rowwise::poke(dt, img[0], ad.offset + r * av.ld + q, orig[static_cast<size_t>(sr * av.cols + sq)]);
      }
    return true;
  }
  if (rel == "scale2" && act_of(c.params) != Act::kGelu) {
    for (int t : {0, 2}) {
      const auto& d = c.tensors[static_cast<size_t>(t)].desc;
      const View2D v = view_of(d);
      for (int64_t r = 0; r < v.rows; ++r)
        for (int64_t q = 0; q < v.cols; ++q) {
          const int64_t e = d.offset + r * v.ld + q;
          rowwise::poke(dt, img[static_cast<size_t>(t)], e, 2 * rowwise::peek(dt, img[static_cast<size_t>(t)], e));
        }
    }
    return true;
  }
  return false;
}

bool relate_fwd(const Case& c, size_t, int64_t i, int64_t j, RelatedElement& r) {
  const std::string rel = str_or(c, "relation", "");
  r.from_j = j;
  if (rel == "permute_rows") {
    r.from_i = perm(c.params.value("m", int64_t{1}), i);
    r.scale = 1;
  } else {
    r.from_i = i;
    r.scale = 2;
  }
  return true;
}

/// act none / relu: the kernel's Y is act of its own stored Z, bit for bit.
void properties_fwd(const Case& c, const std::vector<HostTensor>&, const std::vector<HostTensor>& out,
                    const std::vector<OutputRef>&, std::vector<Failure>& failures) {
  const Act act = act_of(c.params);
  if (act == Act::kGelu || out.size() != 2) return;
  int64_t bad = 0, first = -1;
  std::string detail;
  for (int64_t i = 0; i < out[0].v.rows; ++i)
    for (int64_t j = 0; j < out[0].v.cols; ++j) {
      const double z = out[1].at(i, j), y = out[0].at(i, j);
      if (std::isnan(z) && std::isnan(y)) continue;
      const double want = act == Act::kRelu ? (z > 0 ? z : 0.0) : z;
      if (!(y == want)) {
        if (bad++ == 0) {
          first = i * out[0].v.ld + j;
          detail = fmt::format("Y[{}][{}] = {:.9g} but act(Z[{}][{}] = {:.9g}) = {:.9g}", i, j, y, i, j, z, want);
        }
      }
    }
  if (bad > 0)
    failures.push_back(
        {FailureKind::kProperty, "Y", bad, first,
         fmt::format("Y must equal act(Z) of the kernel's own Z bit for bit ({} elements), {}", bad, detail)});
}

// ---- backward --------------------------------------------------------------------------------------
/// relation "gradcheck" (see the header).
void properties_bwd(const Case& c, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                    const std::vector<OutputRef>& refs, std::vector<Failure>& failures) {
  if (!wants_gradcheck(c) || in.size() != 7 || out.size() != 3 || refs.size() != 3) return;
  const ref::EpilogueProblem p = epilogue_problem(c.params);
  auto a0 = std::make_shared<std::vector<double>>(pack_dense(in[0]));
  auto b0 = std::make_shared<std::vector<double>>(pack_dense(in[1]));
  auto z0 = std::make_shared<std::vector<double>>(pack_dense(in[2]));
  // The kernel's gradients: dA, dB - prefill, dbias - prefill (dense), kept alive by `keep`.
  auto keep = std::make_shared<std::vector<std::vector<double>>>();
  auto diff = [&](const HostTensor& o, const HostTensor& pre) {
    std::vector<double> v = pack_dense(o), q = pack_dense(pre);
    for (size_t e = 0; e < v.size(); ++e) v[e] -= q[e];
    keep->push_back(std::move(v));
    return HostTensor{keep->back().data(), {o.v.rows, o.v.cols, o.v.cols}};
  };
  keep->reserve(2);
  auto zero_bias = std::make_shared<std::vector<double>>(static_cast<size_t>(p.n), 0.0);
  GradProblem g;
  GradOperand oa, ob, oc;
  oa.name = "dA", oa.x = in[0], oa.grad = out[0], oa.ref = &refs[0];
  ob.name = "dB", ob.x = in[1], ob.grad = diff(out[1], in[5]), ob.ref = &refs[1];
  oc.name = "dbias", oc.x = {zero_bias->data(), {1, p.n, p.n}}, oc.grad = diff(out[2], in[6]), oc.ref = &refs[2];
  g.operands = {oa, ob, oc};
  g.upstream = pack_dense(in[3]);
  const int64_t na = static_cast<int64_t>(a0->size()), nb = static_cast<int64_t>(b0->size());
  g.forward = [p, a0, b0, z0, na, nb](const double* x, double* y) {
    const int64_t la = ref::lda_of(p), lb = ref::ldb_of(p);
    std::vector<double> da(static_cast<size_t>(na)), db(static_cast<size_t>(nb));
    for (int64_t e = 0; e < na; ++e) da[static_cast<size_t>(e)] = x[e] - (*a0)[static_cast<size_t>(e)];
    for (int64_t e = 0; e < nb; ++e) db[static_cast<size_t>(e)] = x[na + e] - (*b0)[static_cast<size_t>(e)];
    const double* beta = x + na + nb;
    auto at = [](const double* v, bool tr, int64_t ld, int64_t r, int64_t q) {
      return tr ? v[q * ld + r] : v[r * ld + q];
    };
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        // op(A')op(B') - op(A)op(B) = op(dA) op(B') + op(A) op(dB), B' = B + dB.
        double d = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          const double bq = at(b0->data(), p.trans_b, lb, q, j) + at(db.data(), p.trans_b, lb, q, j);
          d += at(da.data(), p.trans_a, la, i, q) * bq +
               at(a0->data(), p.trans_a, la, i, q) * at(db.data(), p.trans_b, lb, q, j);
        }
        const double zv = (*z0)[static_cast<size_t>(i * p.n + j)];
        const double pre = zv + d + beta[j];
        y[i * p.n + j] = p.act == ref::Activation::kRelu ? (zv > 0 ? pre : 0.0) : ref::activation(p.act, pre);
      }
  };
  g.seed = gradcheck_seed(c);
  g.label = "<dY, J u>";
  check_grad_projection(g, failures);
}

rowwise::RowOpConfig config(EpiPass pass) {
  rowwise::RowOpConfig cfg;
  cfg.name = epi_op_name(pass);
  cfg.description = pass == EpiPass::kFwd
                        ? "Y = act(op(A) op(B) + bias), act none / relu / gelu (tanh form), Z aux; fp32 acc"
                        : "backward of gemm_bias_act: dA = dZ op(B)^T, dB += op(A)^T dZ, dbias += colsum dZ";
  cfg.def.op = cfg.name;
  cfg.def.bound_name = pass == EpiPass::kFwd ? "GEMM + epilogue ceiling" : "GEMM backward ceiling";
  cfg.def.reference = [pass](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return reference(pass, c, t, out);
  };
  if (pass == EpiPass::kFwd) {
    cfg.def.properties = properties_fwd;
    cfg.def.transform = transform_fwd;
    cfg.def.relate = relate_fwd;
  } else {
    cfg.def.properties = properties_bwd;
  }
  cfg.registry = &reg(pass);
  cfg.gen = [pass](const GenConfig&) { return gen_case(pass); };
  cfg.build = [pass](const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
    return build_epilogue_case(pass, p, r, pad, off);
  };
  cfg.validate = [pass](const Case& c) { return validate(pass, c); };
  cfg.shrink_keys = {{"m", 1}, {"n", 1}, {"k", 0}};
  cfg.self_check_note =
      "host reference and bounds checked in tests/properties/gemm_epilogue_test.cpp; cuBLASLt epilogues in "
      "tests/properties/gemm_epilogue_gpu_test.cpp";
  return cfg;
}

[[maybe_unused]] const bool kSpecs = register_spec(std::make_unique<rowwise::RowOpSpec>(config(EpiPass::kFwd))) &&
                                     register_spec(std::make_unique<rowwise::RowOpSpec>(config(EpiPass::kBwd)));

}  // namespace

const TensorOpDef& epilogue_def(EpiPass pass) {
  static const rowwise::RowOpConfig cfgs[2] = {config(EpiPass::kFwd), config(EpiPass::kBwd)};
  return cfgs[static_cast<int>(pass)].def;
}

}  // namespace assay::epilogue
