// gemm_bias_act / gemm_bias_act_bwd: GEMM with a fused bias + activation epilogue (act none,
// relu, gelu), and its backward (dA written, dB and dbias accumulated), fp32 / fp16 / bf16
// storage with fp32 accumulation and epilogue.
//
// Sections: references and bound, properties, backward, declaration, vendor, binding.
// Vendor column (forward): cuBLASLt with the epilogue of the case's act (BIAS, RELU_BIAS,
// GELU_BIAS), fp32 pedantic or fp16/bf16 with fp32 compute, on the same row-major views; it
// computes Y only (no pre-activation aux), so Z has no vendor column. The backward has none.
// Binding: kernels/gemm/gemm_epilogue.cu, variants "tiled" (forward: 32x32 shared-memory tiles,
// the epilogue fused into the store, Z written as the auxiliary output) and "tiled" (backward:
// dA = dZ op(B)^T and dB += op(A)^T dZ as tiled products with dZ = dY act'(Z) formed in fp32 while
// loading, never stored; dbias += column sums by one thread per column, rows in order:
// deterministic; contract: accumulates dB and dbias). The planted bugs of
// tests/mutants/gemm/epilogue_mutants.cu bind through epilogue_fwd_launch / epilogue_bwd_launch
// (properties/gemm_epilogue.h).
// GELU form: the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). cuBLASLt's header and
// documentation (cublasLtEpilogue_t, CUBLASLT_EPILOGUE_GELU_BIAS: "apply Bias and then GELU
// transform") do not name the form; PyTorch's _addmm_activation falls back to
// gelu(approximate="tanh") where it cannot use the cuBLASLt epilogue, and llm.c treats the
// cuBLASLt GELU epilogue as interchangeable with its tanh-form kernel. The cuBLASLt comparison in
// tests/properties/gemm_epilogue_gpu_test.cpp checks it: the erf form differs from the tanh form
// by up to 1e-3 absolute, far outside the fp32 ceiling.
// Tensors (row-major, each with its own row pad and leading offset):
//   forward:  A (trans_a ? k x m : m x k), B (trans_b ? n x k : k x n), bias [n] in; Y, Z [m, n] out.
//   backward: A, B, Z [m, n], dY [m, n] in; dA (A's layout) out; dB (B's layout), dbias [n] out,
//             accumulated: the variant declares Contract::accumulates("dB"), ("dbias"), the engine
//             prefills them and expects prefill + gradient.
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
//      ez) |B|, plus the propagated sum ez |B|; dB's gradient op(A)^T dz: k = m, likewise; dbias's
//      sum_i dz: k = m. dA is then stored: + 0.5 ulp_dt. dB and dbias are accumulated (the op's +=,
//      declared by every variant): the kernel adds the prefill once to the fp32 sum and stores (dB +=
//      s at the store), which the engine accounts for (harness/engine.cpp: one fp32 rounding and one
//      rounding into dt of prefill + gradient), so their own bound is the fp32 sum's alone. A kernel
//      that seeds its accumulator with the prefill instead would need the prefill counted as a term
//      of the sum.
// Exact tier: act none / relu, every input a small integer (no injection) and gemm_exact_tier_holds(in =
//   dt, acc = fp32, out = dt, k + 1 (forward) or n (backward, dA)): bit-identical. dB and dbias are
//   held to their ceilings, not bit for bit: prefill + an exact integer sum is in general not
//   representable (the engine's prefill is N(0, 1)).
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
// References: fp64 on the host; the forward's cases above 2^22 multiply-adds (gemm's kDeviceRefWork)
// draw their inputs on the device and take the fp64 reference there (cuBLAS fp64 on the widened
// inputs, then Z, Y and both tolerances per element through gemm_f64_tol.h f64_epi_element_tol,
// the function forward_bound runs on the host; references/device/gemm_f64.h).
// Generator: forward m, n, k up to --max-dim (edges around 32; under 2^31 multiply-adds; a
// hand-made case up to 2^16 per extent and 2^36 in all); backward m, n 1..80, k 0..160, at most
// 2^20 multiply-adds (2^14 with "gradcheck"); k = 0 in 1/12 of the cases (Y = act(bias)), both
// transposes, three dtypes, three acts, value classes normal / uniform / same-sign / small-int /
// log-uniform (exponents clamped to [-12, 12]); all inputs small-int in a quarter of the cases (the
// exact tier; Z then holds exact zeros, where relu' = 0); no NaN/Inf injection (the spec declares
// finite inputs). The declared ranges are the valid ones.
#include "properties/gemm_epilogue.h"
#include "properties/vendor_columns.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <fmt/format.h>

#include "harness/bounds.h"
#include "properties/gemm.h"
#include "properties/gemm_common.h"
#include "properties/gradcheck_relation.h"
#include "properties/rowwise_values.h"
#include "references/device/gemm_f64.h"

namespace assay::epilogue {

using kernels::epi::Act;

ref::EpilogueProblem epilogue_problem(const nlohmann::json& params) {
  const Params q(params);
  ref::EpilogueProblem e;
  e.m = q.i("m"), e.n = q.i("n"), e.k = q.i("k");
  e.trans_a = q.b("trans_a"), e.trans_b = q.b("trans_b");
  const Act a = epi_act(q);
  e.act = a == Act::kRelu   ? ref::Activation::kRelu
          : a == Act::kGelu ? ref::Activation::kGeluTanh
                            : ref::Activation::kIdentity;
  return e;
}

namespace {

constexpr double kU = 0x1p-24;

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

/// Under fast math (Arithmetic::fast_math) tanhf is __tanhf, documented to a relative error
/// (2^-11, [CUDA] Intrinsic Functions, cc >= 7.5): |t^ - t| <= rel |t| <= rel as |t| < 1, plus
/// the argument's 7 roundings as above. cuBLASLt's GELU epilogue documents no tanh and was
/// measured at 8.5x the tanhf ceiling in fp32: its contract declares fast math.
const TanhErr& fast_tanh_err() {
  static const TanhErr e = [] {
    TanhErr x;
    const MathFnAccuracy* f = find_math_fn("tanhf");
    const double rel = f != nullptr && f->fast.kind == FastKind::kRelative ? f->fast.rel : 0x1p-11;
    x.dt = rel + 0.45 * gamma_n(7, kU);
    return x;
  }();
  return e;
}

constexpr double kSlop = 1 + 0x1p-20;       // the bound's own double arithmetic
constexpr double kF32Floor = 4 * 0x1p-149;  // a few fp32 subnormal spacings

/// Stored value's tolerance: e (fp32 result's error) + half an ulp of dt at |ref| + e; +Inf at overflow.
double stored(double ref_abs, double e, DType dt) {
  return device_ref::f64_stored_tol(ref_abs, e, store_rounding_for(dt), max_finite(dt));
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

double gelu_eval_error(double x, double y, bool fast_math) {
  return device_ref::f64_gelu_eval_error(std::fabs(x), std::fabs(y), fast_math ? fast_tanh_err().dt : tanh_err().dt);
}

double gelu_grad_eval_error(double x, bool fast_math) {
  const double ax = std::fabs(x);
  const double k = std::sqrt(2 / M_PI), c = 0.044715;
  const double wp = k * (1 + 3 * c * ax * ax), t = std::tanh(k * (ax + c * ax * ax * ax));
  const double M = 0.5 * (1 + std::fabs(t)) + 0.5 * ax * (1 - t * t) * wp;
  // An error dt in t moves GELU' = 0.5 (1 + t) + 0.5 x (1 - t^2) w' by at most (0.5 + |x| w') dt.
  const double dt = fast_math ? fast_tanh_err().dt : tanh_err().dt;
  return ((0.5 + ax * wp) * (dt + kU) + 12 * kU * M) * kSlop + kF32Floor;
}

std::vector<OutputRef> forward_reference(const ref::EpilogueProblem& p, const double* a, const double* b,
                                         const double* bias) {
  std::vector<double> z, y, mag;
  ref::epilogue_forward(p, a, b, bias, z, y, mag);
  std::vector<OutputRef> out(2);
  out[0].ref = y;
  out[0].aux = {mag, z};
  out[1].ref = std::move(z);
  out[1].aux = {std::move(mag)};
  return out;
}

device_ref::F64EpiTol forward_tol(const ref::EpilogueProblem& p, DType dt, bool narrow, bool fast_math) {
  device_ref::F64EpiTol t;
  t.ceil = gemm_ceiling(model(dt, p.k + 1));
  // narrow_intermediates (fp16/bf16): the product sum rounded to dt before the bias is added,
  // as cuBLASLt's BIAS epilogue does with a bf16 output (12x the plain ceiling, measured): the
  // rounding moves the fp32 sum s^ (|s^| <= |s| + e32 <= mag + e32) by at most u_dt |s^| + half
  // dt's smallest subnormal, and Z = s~ + bias, Y = act(Z) carry it (act 1-Lipschitz, or 1.13).
  // Where the rounded sum may pass dt's largest finite value, Z = +-Inf + bias and Y = act(+-Inf),
  // which GELU's x Phi(x) makes NaN at -Inf (cuBLASLt's fp16 GELU epilogue, measured: NaN where
  // the exact Y is -0): both unchecked.
  t.round_sum = narrow && dt != DType::kF32;
  t.u_dt = unit_roundoff(dt), t.half_sub = 0.5 * min_subnormal(dt);
  t.top = max_finite(dt);
  t.store = store_rounding_for(dt);
  t.gelu = p.act == ref::Activation::kGeluTanh;  // none, relu: 1-Lipschitz
  t.lipschitz = kGeluLipschitz;
  t.tanh_dt = fast_math ? fast_tanh_err().dt : tanh_err().dt;
  return t;
}

bool forward_exact(const ref::EpilogueProblem& p, DType dt, int64_t int_range, bool narrow) {
  return p.act != ref::Activation::kGeluTanh && !(narrow && dt != DType::kF32) && exact_tier(dt, p.k + 1, int_range);
}

void forward_bound(const ref::EpilogueProblem& p, DType dt, int64_t int_range, std::vector<OutputRef>& out, bool narrow,
                   bool fast_math) {
  const device_ref::F64EpiTol t = forward_tol(p, dt, narrow, fast_math);
  const std::vector<double>&y = out[0].ref, &z = out[1].ref, &mag = out[1].aux[0];
  out[0].tol.resize(y.size());
  out[1].tol.resize(z.size());
  for (size_t e = 0; e < z.size(); ++e)
    device_ref::f64_epi_element_tol(t, z[e], y[e], mag[e], &out[0].tol[e], &out[1].tol[e]);
  out[0].exact = out[1].exact = forward_exact(p, dt, int_range, narrow);
}

std::vector<OutputRef> forward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                    const double* bias, int64_t int_range) {
  std::vector<OutputRef> out = forward_reference(p, a, b, bias);
  forward_bound(p, dt, int_range, out, false, false);
  return out;
}

std::vector<OutputRef> backward_reference(const ref::EpilogueProblem& p, const double* a, const double* b,
                                          const double* z, const double* dy) {
  const ref::EpilogueGrads g = ref::epilogue_backward(p, a, b, z, dy);
  const int64_t m = p.m, n = p.n, k = p.k, la = ref::lda_of(p), lb = ref::ldb_of(p);
  const bool gelu = p.act == ref::Activation::kGeluTanh;
  // dz's error per element (0 for none / relu: a product by 1 or 0), propagated through the sums.
  // Per output: [0] with tanhf's error, [1] with __tanhf's (the bound picks by fast_math).
  std::vector<double> prop_a[2], prop_b[2], prop_bias[2];
  for (int f = 0; f < 2; ++f) {
    prop_a[f].assign(g.da.size(), 0.0), prop_b[f].assign(g.db.size(), 0.0);
    prop_bias[f].assign(g.dbias.size(), 0.0);
  }
  if (gelu) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t e = i * n + j;
        for (int f = 0; f < 2; ++f) {
          const double ed = std::fabs(dy[e]) * gelu_grad_eval_error(z[e], f == 1);
          const double d = ed + kU * (std::fabs(g.dz[static_cast<size_t>(e)]) + ed) + 0x1p-149;
          prop_bias[f][static_cast<size_t>(j)] += d;
          for (int64_t q = 0; q < k; ++q) {
            const size_t ia = static_cast<size_t>(p.trans_a ? q * la + i : i * la + q);
            const size_t ib = static_cast<size_t>(p.trans_b ? j * lb + q : q * lb + j);
            prop_a[f][ia] += d * std::fabs(b[ib]);
            prop_b[f][ib] += std::fabs(a[ia]) * d;
          }
        }
      }
  }
  std::vector<OutputRef> out(3);
  out[0].ref = g.da, out[0].aux = {g.mag_da, std::move(prop_a[0]), std::move(prop_a[1])};
  out[1].ref = g.db, out[1].aux = {g.mag_db, std::move(prop_b[0]), std::move(prop_b[1])};
  out[2].ref = g.dbias, out[2].aux = {g.mag_dbias, std::move(prop_bias[0]), std::move(prop_bias[1])};
  return out;
}

void backward_bound(const ref::EpilogueProblem& p, DType dt, int64_t int_range, std::vector<OutputRef>& out,
                    bool fast_math) {
  const int64_t terms[3] = {p.n, p.m, p.m};  // dA sums over n, dB and dbias over m
  for (size_t o = 0; o < 3; ++o) {
    OutputRef& r = out[o];
    const ElementBound ceil = gemm_ceiling(model(DType::kF32, terms[o]));
    const std::vector<double>& props = r.aux[fast_math ? 2 : 1];
    r.tol.resize(r.ref.size());
    for (size_t e = 0; e < r.ref.size(); ++e) {
      const double ae = std::fabs(r.ref[e]), prop = props[e];
      const double e32 = ceil.tol(ae, r.aux[0][e] + prop) + prop;
      // dA is stored as computed; dB and dbias are accumulated (every variant, the op's +=): their
      // store rounds prefill + sum, which the engine's accumulation accounts for.
      r.tol[e] = o == 0 ? stored(ae, e32, dt) : (ae + e32 >= max_finite(dt) ? INFINITY : e32);
    }
    r.exact = false;
  }
  out[0].exact = p.act != ref::Activation::kGeluTanh && exact_tier(dt, p.n, int_range);
}

std::vector<OutputRef> backward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                     const double* z, const double* dy, int64_t int_range) {
  std::vector<OutputRef> out = backward_reference(p, a, b, z, dy);
  backward_bound(p, dt, int_range, out);
  return out;
}

namespace {

enum class EpiPass : uint8_t { kFwd, kBwd };

int64_t int_range_of(const Case& c) {
  std::vector<const ValueRecipe*> r;
  for (const auto& t : c.tensors)
    if (t.role != Role::kOut) r.push_back(&t.values);
  return gemm_common::int_range(r);
}

std::vector<std::vector<double>> dense_inputs(const std::vector<HostTensor>& t, size_t n) {
  std::vector<std::vector<double>> d;
  for (size_t i = 0; i < n; ++i) d.push_back(gemm_common::dense(t[i]));
  return d;
}

Status reference(EpiPass pass, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const ref::EpilogueProblem p = epilogue_problem(c.params);
  if (pass == EpiPass::kFwd) {
    const auto d = dense_inputs(t, 3);
    out = forward_reference(p, d[0].data(), d[1].data(), d[2].data());
  } else {
    const auto d = dense_inputs(t, 4);
    out = backward_reference(p, d[0].data(), d[1].data(), d[2].data(), d[3].data());
  }
  return ok_status();
}

Status bound(EpiPass pass, const Case& c, const Arithmetic& a, std::vector<OutputRef>& out) {
  const ref::EpilogueProblem p = epilogue_problem(c.params);
  const DType dt = Params(c.params).dt("dtype");
  if (pass == EpiPass::kFwd)
    forward_bound(p, dt, int_range_of(c), out, a.narrow_intermediates, a.fast_math);
  else
    backward_bound(p, dt, int_range_of(c), out, a.fast_math);
  return ok_status();
}

// ---- device reference (forward) ---------------------------------------------------------------------

bool device_when(const Params& p) {
  return gemm_common::gemm_work(p) > kDeviceRefWork;
}

int64_t device_scratch(const Case& c) {
  const Params p(c.params);
  return 8 * device_ref::gemm_f64_scratch_doubles(gemm_common::extent_from_view(c, 0),
                                                  gemm_common::extent_from_view(c, 1), p.i("m"), p.i("n"));
}

/// Y and Z with their tolerances outright in mag: the fp64 products on the device
/// (references/device/gemm_f64.h), then the host bound's element function.
Status device_compute(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                      std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  const DType dt = Params(c.params).dt("dtype");
  bool fits = t.size() == 5 && out.size() == 2;
  for (size_t i = 0; fits && i < 3; ++i) fits = t[i].dtype == dt;
  if (!fits) return invalid_argument("gemm_bias_act: no device reference for this case (A, B, bias, Y, Z in dtype)");
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch(c))
    return invalid_argument("gemm_bias_act: device reference scratch missing or too small");
  if (ctx.cublas == nullptr) return invalid_argument("gemm_bias_act: the device reference needs a cuBLAS handle");
  const ref::EpilogueProblem p = epilogue_problem(c.params);
  const vendor::RowMajorGemm g{p.m, p.n, p.k, p.trans_a, p.trans_b, t[0].v.ld, t[1].v.ld, p.n};
  const device_ref::F64Operands x{
      dt, t[0].ptr, gemm_common::extent_from_view(c, 0), t[1].ptr, gemm_common::extent_from_view(c, 1), 0};
  ASSAY_RETURN_IF_ERROR(device_ref::gemm_f64_products(static_cast<cublasHandle_t>(ctx.cublas), ctx.stream, g, x,
                                                      out[1].ref, out[1].mag, reinterpret_cast<double*>(ctx.scratch),
                                                      nullptr));
  device_ref::F64EpiFinish f;
  f.m = p.m, f.n = p.n;
  f.bias = t[2].ptr, f.bias_type = dt;
  f.act = p.act == ref::Activation::kRelu ? 1 : p.act == ref::Activation::kGeluTanh ? 2 : 0;
  f.gelu_k = std::sqrt(2.0 / (4.0 * std::atan(1.0)));  // references/host/backward.h's sqrt(2 / pi)
  f.tol = forward_tol(p, dt, a.narrow_intermediates, a.fast_math);
  ASSAY_RETURN_IF_ERROR(device_ref::gemm_epi_f64_finish(f, out[0].ref, out[0].mag, out[1].ref, out[1].mag, ctx.stream));
  out[0].exact = out[1].exact = forward_exact(p, dt, int_range_of(c), a.narrow_intermediates);
  return ok_status();
}

// ---- properties ------------------------------------------------------------------------------------
/// Row i of op(A) in the transformed launch is row perm(i) of the original: a reversal.
int64_t perm(int64_t m, int64_t i) {
  return m - 1 - i;
}

bool transform_fwd(const Case& c, std::vector<unsigned char*>& img) {
  const std::string rel = Params(c.params).s("relation");
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
  if (rel == "scale2" && epi_act(Params(c.params)) != Act::kGelu) {
    for (size_t t : {size_t{0}, size_t{2}}) {
      const auto& d = c.tensors[t].desc;
      const View2D v = view_of(d);
      for (int64_t r = 0; r < v.rows; ++r)
        for (int64_t q = 0; q < v.cols; ++q) {
          const int64_t e = d.offset + r * v.ld + q;
          rowwise::poke(dt, img[t], e, 2 * rowwise::peek(dt, img[t], e));
        }
    }
    return true;
  }
  return false;
}

RelateElement relate_fwd(const Case& c) {
  const Params q(c.params);
  if (q.s("relation") == "permute_rows")
    return [m = q.i("m", 1)](size_t, int64_t i, int64_t j, RelatedElement& r) { return r = {perm(m, i), j, 1}, true; };
  return [](size_t, int64_t i, int64_t j, RelatedElement& r) { return r = {i, j, 2}, true; };
}

/// act none / relu: the kernel's Y is act of its own stored Z, bit for bit.
void properties_fwd(const Case& c, const std::vector<HostTensor>&, const std::vector<HostTensor>& out,
                    const std::vector<OutputRef>&, std::vector<Failure>& failures) {
  const Act act = epi_act(Params(c.params));
  if (act == Act::kGelu || out.size() != 2) return;
  int64_t bad = 0, first = -1;
  std::string detail;
  for (int64_t i = 0; i < out[0].v.rows; ++i)
    for (int64_t j = 0; j < out[0].v.cols; ++j) {
      const double z = out[1].at(i, j), y = out[0].at(i, j);
      // A NaN Z says nothing of Y here: a variant that computes Y only (the cuBLASLt epilogue)
      // leaves Z's poison, and a kernel's NaN Z fails Z's own check against its reference.
      if (std::isnan(z)) continue;
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
/// relation "gradcheck" (see the header). `in` holds every tensor as launched: the accumulated dB
/// and dbias hold their prefills, which the kernel's gradients are taken relative to.
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

// ---- declaration -------------------------------------------------------------------------------------
// The backward's sizes (its dB and dbias are accumulated, so every case takes the host path);
// the forward's reach the bench's 4096^3 (generated under 2^31 multiply-adds, as gemm's), with
// the device reference above 2^22.
constexpr int64_t kMaxMN = 80, kMaxK = 160;
constexpr int64_t kMaxMacs = int64_t{1} << 20;
constexpr int64_t kFwdMaxDim = int64_t{1} << 16;
constexpr int64_t kFwdMaxMacs = int64_t{1} << 36, kFwdGenMacs = int64_t{1} << 31;
// relation "gradcheck": at most 2^14 multiply-adds (the finite differences run two fp64 GEMMs per
// forward evaluation, several evaluations per check).
constexpr int64_t kMaxMacsGrad = int64_t{1} << 14;

std::vector<ParamDef> params(EpiPass pass) {
  const int64_t tile = kernels::epi::kEpilogueTile;
  const bool fwd = pass == EpiPass::kFwd;
  return {
      ParamDef::dtype("dtype", {DType::kF32, DType::kF16, DType::kBF16}),
      ParamDef::choice("act", {"none", "relu", "gelu"}),
      gemm_common::trans_param("trans_a"),
      gemm_common::trans_param("trans_b"),
      (fwd ? ParamDef::choice("relation", {"permute_rows", "scale2"})
           : ParamDef::choice("relation", {kGradcheckRelation}))
          .optional(3),
      ParamDef::extent("m", 1, fwd ? kFwdMaxDim : kMaxMN).aim({tile}),
      ParamDef::extent("n", 1, fwd ? kFwdMaxDim : kMaxMN).aim({tile}),
      ParamDef::extent("k", 0, fwd ? kFwdMaxDim : kMaxK).aim({tile}).cap([fwd](const Params& p) {
        const int64_t budget = fwd ? kFwdMaxMacs : p.s("relation") == kGradcheckRelation ? kMaxMacsGrad : kMaxMacs;
        return budget / std::max<int64_t>(p.i("m") * p.i("n"), 1);
      }),
  };
}

Status check(EpiPass pass, const Params& p) {
  if (pass == EpiPass::kFwd && p.s("relation") == "scale2" && p.s("act") == "gelu")
    return invalid_argument(
        "gemm_bias_act case: params.relation must be \"permute_rows\" or, for act none / relu, \"scale2\" (GELU is "
        "not positively homogeneous)");
  return ok_status();
}

/// Exponents kept away from overflow, the exact tier, k == 0 cases, no "scale2" under GELU, the
/// forward's generated size.
void couple(EpiPass pass, nlohmann::json& p, std::vector<ValueRecipe>& r) {
  const DType dt = Params(p).dt("dtype");
  std::vector<size_t> all;
  for (size_t i = 0; i < r.size(); ++i) all.push_back(i);
  gemm_common::couple_exact_tier(p, r, all, std::vector<DType>(r.size(), dt), 3, {}, {});
  for (auto& x : r) gemm_common::clamp_exponents(x, -12, 12);
  if (*gen_weighted_index({11, 1}) == 1) p["k"] = 0;
  if (pass == EpiPass::kFwd && p.value("relation", std::string()) == "scale2" && p["act"] == "gelu")
    p["relation"] = "permute_rows";
  if (pass == EpiPass::kFwd) gemm_common::halve_to_work(p, kFwdGenMacs);
}

/// The host references against long double on a small case (forward: Z and GELU(Z); backward,
/// act none: dA = dY op(B)^T, dB = op(A)^T dY, dbias = column sums of dY).
Status self_check(EpiPass pass, std::string& report) {
  ref::EpilogueProblem p;
  p.m = 3, p.n = 4, p.k = 5, p.trans_a = true, p.trans_b = false;
  p.act = pass == EpiPass::kFwd ? ref::Activation::kGeluTanh : ref::Activation::kIdentity;
  std::vector<double> a(15), b(20), bias(4), z(12), dy(12);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.9 * static_cast<double>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(1.7 * static_cast<double>(i));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25 * static_cast<double>(i) - 0.5;
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = std::sin(2.3 * static_cast<double>(i)), z[i] = dy[i] - 0.1;
  auto opa = [&](int64_t i, int64_t q) { return static_cast<long double>(a[static_cast<size_t>(q * p.m + i)]); };
  auto opb = [&](int64_t q, int64_t j) { return static_cast<long double>(b[static_cast<size_t>(q * p.n + j)]); };
  double worst = 0;
  if (pass == EpiPass::kFwd) {
    const auto r = forward_reference(p, a.data(), b.data(), bias.data());
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        long double s = bias[static_cast<size_t>(j)];
        for (int64_t q = 0; q < p.k; ++q) s += opa(i, q) * opb(q, j);
        const size_t l = static_cast<size_t>(i * p.n + j);
        const long double y = ref::activation<long double>(ref::Activation::kGeluTanh, s);
        worst = std::max({worst, static_cast<double>(std::fabs(r[1].ref[l] - s)),
                          static_cast<double>(std::fabs(r[0].ref[l] - y))});
      }
  } else {
    const auto r = backward_reference(p, a.data(), b.data(), z.data(), dy.data());
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t q = 0; q < p.k; ++q) {
        long double s = 0;
        for (int64_t j = 0; j < p.n; ++j) s += static_cast<long double>(dy[static_cast<size_t>(i * p.n + j)]) * opb(q, j);
        worst = std::max(worst, static_cast<double>(std::fabs(r[0].ref[static_cast<size_t>(q * p.m + i)] - s)));
      }
    for (int64_t q = 0; q < p.k; ++q)
      for (int64_t j = 0; j < p.n; ++j) {
        long double s = 0;
        for (int64_t i = 0; i < p.m; ++i) s += opa(i, q) * static_cast<long double>(dy[static_cast<size_t>(i * p.n + j)]);
        worst = std::max(worst, static_cast<double>(std::fabs(r[1].ref[static_cast<size_t>(q * p.n + j)] - s)));
      }
    for (int64_t j = 0; j < p.n; ++j) {
      long double s = 0;
      for (int64_t i = 0; i < p.m; ++i) s += dy[static_cast<size_t>(i * p.n + j)];
      worst = std::max(worst, static_cast<double>(std::fabs(r[2].ref[static_cast<size_t>(j)] - s)));
    }
  }
  const char* name = pass == EpiPass::kFwd ? "gemm_bias_act" : "gemm_bias_act_bwd";
  if (!(worst < 1e-13)) return internal_error(fmt::format("{}: host reference off by {:.3g}", name, worst));
  report += fmt::format("{}: host reference within {:.2g} of a long-double evaluation (3x4x5, A transposed{})\n", name,
                        worst, pass == EpiPass::kFwd ? ", GELU" : "");
  return ok_status();
}

// ---- vendor ----------------------------------------------------------------------------------------------

/// cuBLASLt's fused epilogue: Y = act(op(A) op(B) + bias) on the forward's tensors A, B, bias, Y, Z.
Status cublaslt_epilogue(const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
  ASSAY_ASSIGN_OR_RETURN(vendor::CublasLt * lt, vendor_columns::cublaslt());
  vendor::LtGemm g;
  g.g = vendor::RowMajorGemm{p.i("m"), p.i("n"), p.i("k"), p.b("trans_a"), p.b("trans_b"),
                             t[0].v.ld, t[1].v.ld, t[3].v.ld};
  g.a = g.b = g.out = t[0].dtype;
  const std::string act = p.s("act");
  g.epilogue = act == "relu" ? vendor::LtEpilogue::kReluBias
               : act == "gelu" ? vendor::LtEpilogue::kGeluBias
                               : vendor::LtEpilogue::kBias;
  g.bias = t[2].ptr;
  return lt->matmul(g, 1.0, t[0].ptr, t[1].ptr, 0.0, t[3].ptr, s);
}

OpDef make(EpiPass pass) {
  const bool fwd = pass == EpiPass::kFwd;
  OpDef op;
  op.name = fwd ? "gemm_bias_act" : "gemm_bias_act_bwd";
  op.description = fwd ? "Y = act(op(A) op(B) + bias), act none / relu / gelu (tanh form), Z aux; fp32 acc"
                       : "backward of gemm_bias_act: dA = dZ op(B)^T, dB += op(A)^T dZ, dbias += colsum dZ";
  op.params = params(pass);
  const ValueSpec v{.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                ValueClass::kSmallInt, ValueClass::kLogUniform}};
  using gemm_common::matrix;
  op.tensors = {matrix("A", Role::kIn, {}, "m", "k", "dtype", v, "trans_a"),
                matrix("B", Role::kIn, {}, "k", "n", "dtype", v, "trans_b")};
  if (fwd) {
    op.tensors.push_back({.name = "bias", .dims = {"n"}, .values = v});
    op.tensors.push_back(matrix("Y", Role::kOut, {}, "m", "n", "dtype"));
    op.tensors.push_back(matrix("Z", Role::kOut, {}, "m", "n", "dtype"));
  } else {
    op.tensors.push_back(matrix("Z", Role::kIn, {}, "m", "n", "dtype", v));
    op.tensors.push_back(matrix("dY", Role::kIn, {}, "m", "n", "dtype", v));
    op.tensors.push_back(matrix("dA", Role::kOut, {}, "m", "k", "dtype", {}, "trans_a"));
    op.tensors.push_back(matrix("dB", Role::kOut, {}, "k", "n", "dtype", {}, "trans_b"));
    op.tensors.push_back({.name = "dbias", .role = Role::kOut, .dims = {"n"}});
  }
  op.check = [pass](const Params& p) { return check(pass, p); };
  op.couple = [pass](nlohmann::json& p, std::vector<ValueRecipe>& r) { couple(pass, p, r); };
  op.reference = [pass](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return reference(pass, c, t, out);
  };
  op.bound = [pass](const Case& c, const Arithmetic& a, const std::vector<HostTensor>&, std::vector<OutputRef>& out) {
    return bound(pass, c, a, out);
  };
  op.bound_name = fwd ? "GEMM + epilogue ceiling" : "GEMM backward ceiling";
  if (fwd) {
    op.device_reference = {
        .when = device_when, .scratch = device_scratch, .compute = device_compute, .name = "device-f64"};
    op.large = {{"m", 4096},     {"n", 4096},        {"k", 4096},       {"dtype", "bf16"},
                {"act", "gelu"}, {"trans_a", false}, {"trans_b", false}};
    op.properties = properties_fwd;
    op.transform = transform_fwd;
    op.relate = relate_fwd;
    op.backward = "gemm_bias_act_bwd";
    op.vendor = {.name = "cublaslt-epilogue",
                 .run = cublaslt_epilogue,
                 .outputs = {"Y"},
                 .contract = Contract().narrow_intermediates().fast_math()};
  } else {
    op.properties = properties_bwd;
  }
  op.self_check = [pass](std::string& report) { return self_check(pass, report); };
  return op;
}

// ---- binding ------------------------------------------------------------------------------------------
const char* const kSrc = "kernels/gemm/gemm_epilogue.cu";
ASSAY_REGISTER(register_op(make(EpiPass::kFwd)));
ASSAY_REGISTER(register_op(make(EpiPass::kBwd)));
ASSAY_REGISTER(add_variant("gemm_bias_act",
                           {.name = "tiled",
                            .description = "32x32 shared-memory tiles, fp32 FMA, bias + act fused into the store, Z aux",
                            .launch = epilogue_fwd_launch(kernels::epi::gemm_bias_act_tiled),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("gemm_bias_act_bwd",
                           {.name = "tiled",
                            .description = "dA, dB by 32x32 tiled products with dZ = dY act'(Z) formed in fp32 on "
                                           "load; dbias by column, rows in order",
                            .launch = epilogue_bwd_launch(kernels::epi::gemm_bias_act_bwd),
                            .contract = Contract().accumulates("dB").accumulates("dbias"),
                            .source = kSrc}));

}  // namespace
}  // namespace assay::epilogue
