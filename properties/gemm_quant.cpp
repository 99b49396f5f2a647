// gemm_int8 / gemm_fp8: quantised GEMMs in the "TN" layout (A m x k, B n x k, k contiguous).
//
// Sections: references and bound, properties, declaration, binding.
// Binding: kernels/gemm/gemm_quant.cu (device code kernels/gemm/gemm_quant_impl.cuh):
//   gemm_int8 "dp4a": one warp per output, lanes strided over k: __dp4a over 4-byte words where
//     both rows are 4-byte aligned plus a scalar k % 4 tail, a scalar loop otherwise; int32
//     accumulation and a shuffle sum; then, fused, D = rn_out(fmaf(float(acc), sa[i] * sw[j], bias[j])).
//   gemm_fp8 "simt": one warp per output, lanes strided over k, e4m3 -> fp32 (exact) and fmaf in
//     each lane's order (the products of two e4m3 values are exact in fp32), then an fp32 shuffle
//     sum, D = rn_out((scale_a * scale_b) * acc).
//   The planted bugs of tests/mutants/gemm/quant_mutants.cu bind through int8_launch / fp8_launch
//   (properties/gemm_quant.h). The kernels' contracts are empty (every size and layout).
// Tensors (each with its own row pad and leading offset, so the dp4a path's 4-byte alignment
// varies per operand): gemm_int8: A int8 [m, k], B int8 [n, k], sa fp32 [m], sw fp32 [n],
// bias fp32 [n] (read only when params.bias), Acc int32 [m, n], D fp32/fp16/bf16 [m, n];
// gemm_fp8: A, B e4m3, scale_a, scale_b fp32 [1], D fp32/bf16 [m, n].
// Precondition: k <= 2^17 - 1 (both ops): int8 products reach (-128)^2 = 2^14, so |acc| <= 2^14 k
// < 2^31 keeps every int32 partial sum exact; for fp8 it keeps the double reference exact
// (references/host/gemm_quant.h). The param's range says so: a larger k is a one-line error.
// Sizes: m, n in [1, 96], m n max(k, 1) <= 2^22 (the host reference's budget).
// References: references/host/gemm_quant.h, on the kernel's own (rounded) inputs. Cases with
//   k > 0 from 2,048 multiply-adds (relations included) take the device path: the batched fp64
//   GEMM's element function on the stored int8 / e4m3 bytes (exact sums, so split across a warp
//   or a block per output with the host's bits) and the same tolerance functions
//   (references/device/gemm_f64_tol.h) as the bounds below.
// Bound ([H] = Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.; u = 2^-24):
//   int8 Acc: exact (tol 0, exact tier, every case): integer arithmetic has no rounding.
//   int8 D: x = |sa sw acc|, b = |bias|. Admitted: the int32 -> fp32 conversion (exact below
//     2^24, one rounding above), the two scalings in any order and the bias added fused (fmaf) or
//     not: at most 3 roundings on x before the add, and the add's rounding of |x^ + bias| <=
//     x(1 + gamma_3) + b ([H] Lemma 3.1, 3.3):
//       e32 = gamma_3(u) x + u (x (1 + gamma_3(u)) + b) + 4 * 2^-126   (4 roundings that may
//       flush to zero or land in the subnormal range),
//     and e32 = 0 where acc == 0 (every product is then +-0 and D = bias exactly, K == 0 included);
//     plus the double reference's own 2 roundings, 2^-52 (x + b); then the output rounding,
//     half an ulp of the out dtype at |ref| + e32 (rowwise::store_rounding). Elements whose
//     |ref| + tol reaches the out dtype's largest finite value (fp16) are unchecked (tol = +Inf).
//   fp8 D: mag = |scale_a scale_b| sum |a||b|; gemm_ceiling (harness/bounds.h) with in = e4m3,
//     acc = fp32, k, the two scales: gamma_{k+2+s}(u) mag + floor, any summation order, FMA or
//     not ([H] (3.5)), s = one more rounding per scale that is not a power of two (forming
//     scale_a * scale_b, then one for applying it: the "+2"); covers scaling the operands before
//     the products as well. bf16 output: one more rounding, half an ulp at |ref| + e32.
//     Tensor cores are not used, so no truncating-accumulation model is needed; cuBLASLt's fp8
//     (fast accumulation on and off) is measured against this ceiling in the GPU test, not held
//     to it.
//   fp8 exact tier: A and B small integers (|x| <= 16, exact in e4m3), both scales powers of two
//     and gemm_exact_tier_holds (every partial sum below 2^p of fp32 / bf16): D bit for bit.
// Generators: m, n 1..96 (edges around 4, 16), k edge-biased (k % 4 leftovers, around 16, 32,
//   64) up to the work budget, k == 0 in a tenth of the cases (OpDef::couple), and for int8 a
//   "deep" tenth: k 8192..32767, m, n <= 8, A and B same-sign full range (0..127), so |acc|
//   passes 2^24 and an fp32 accumulation cannot be exact. int8 values: small integers (range 1, 2, 3, 7, 15, 127, 128),
//   full range U(-128, 128), same-sign 0..127, one-hot. Scales sa, sw: log-uniform magnitudes
//   (never all equal, so a wrong scale index shows), random sign; bias N(0, 1). fp8 values:
//   normal, uniform, same-sign, small-int, log-uniform, e4m3 subnormals, near 448, NaN injection
//   (e4m3 has no Inf: an injected Inf rounds to NaN); scales log-uniform 2^[-4, 4) or powers of two.
// Properties (params.relation, a quarter of the cases; OpDef::transform + relate):
//   "permute_rows": the rows of A (and of sa) reversed -> the rows of Acc and D reversed (Acc bit
//     for bit: its tolerance is 0); "scale2": sa and bias (int8) or scale_a (fp8) doubled -> D
//     doubled, Acc unchanged (linearity in the scale, the analogue of alpha); "transpose" (m == n):
//     A and B swapped (and sa, sw) -> Acc^T exactly, D^T (int8: without bias only).
#include "properties/gemm_quant.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/generators.h"
#include "properties/gemm_common.h"
#include "properties/rowwise_values.h"
#include "references/device/gemm_f64_batch.h"
#include "references/host/gemm_quant.h"

namespace assay::quant {

namespace kq = kernels::quant;

// ---- references and bound ------------------------------------------------------------------------------
double int8_d_tol(double x, double bias_abs, double ref_abs, bool acc_zero, DType out) {
  return int8_dequant_tol(x, bias_abs, ref_abs, acc_zero, store_rounding_for(out), max_finite(out));
}

std::vector<OutputRef> int8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a,
                                      const std::vector<double>& b, const std::vector<double>& sa,
                                      const std::vector<double>& sw, const std::vector<double>& bias) {
  std::vector<int64_t> acc;
  ref::gemm_tn_int_exact(m, n, k, a.data(), k, b.data(), k, acc);
  std::vector<OutputRef> r(2);
  r[0].ref.resize(acc.size());
  r[1].ref.resize(acc.size());
  r[1].aux.assign(3, std::vector<double>(acc.size(), 0.0));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t e = static_cast<size_t>(i * n + j);
      const double ac = static_cast<double>(acc[e]);
      const double bj = bias.empty() ? 0.0 : bias[static_cast<size_t>(j)];
      const double x = sa[static_cast<size_t>(i)] * sw[static_cast<size_t>(j)] * ac;
      r[0].ref[e] = ac;
      r[1].ref[e] = x + bj;
      r[1].aux[0][e] = std::fabs(x);
      r[1].aux[1][e] = std::fabs(bj);
      r[1].aux[2][e] = acc[e] == 0 ? 1.0 : 0.0;
    }
  return r;
}

void int8_bound(DType out, std::vector<OutputRef>& r) {
  r[0].tol.assign(r[0].ref.size(), 0.0);  // integer arithmetic: exact
  r[0].exact = true;
  r[1].tol.resize(r[1].ref.size());
  for (size_t e = 0; e < r[1].ref.size(); ++e)
    r[1].tol[e] = int8_d_tol(r[1].aux[0][e], r[1].aux[1][e], std::fabs(r[1].ref[e]), r[1].aux[2][e] != 0, out);
}

std::vector<OutputRef> int8_expected(int64_t m, int64_t n, int64_t k, const std::vector<double>& a,
                                     const std::vector<double>& b, const std::vector<double>& sa,
                                     const std::vector<double>& sw, const std::vector<double>& bias, DType out) {
  std::vector<OutputRef> r = int8_reference(m, n, k, a, b, sa, sw, bias);
  int8_bound(out, r);
  return r;
}

OutputRef fp8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a, const std::vector<double>& b,
                        double scale_a, double scale_b) {
  OutputRef r;
  std::vector<double> mag;
  ref::gemm_tn_f64(m, n, k, a.data(), k, b.data(), k, r.ref, mag);
  const double s = scale_a * scale_b;
  for (size_t e = 0; e < r.ref.size(); ++e) {
    r.ref[e] *= s;
    mag[e] *= std::fabs(s);
  }
  r.aux = {std::move(mag)};
  return r;
}

namespace {

/// fp8's model with output `out` (the ceiling takes fp32: the store's rounding is added at
/// |ref| + e32 by dot_element_tol).
GemmBoundModel fp8_model(int64_t k, double scale_a, double scale_b, DType out) {
  GemmBoundModel model;
  model.in = DType::kE4M3;
  model.acc = DType::kF32;
  model.out = out;
  model.k = k;
  model.scale_a = std::fabs(scale_a);
  model.scale_b = std::fabs(scale_b);
  return model;
}

}  // namespace

device_ref::F64DotTol fp8_tolerance(int64_t k, double scale_a, double scale_b, DType out, double scale) {
  return {.b = gemm_ceiling(fp8_model(k, scale_a, scale_b, DType::kF32)), .scale = scale, .top = max_finite(out),
          .store = store_rounding_for(out)};
}

void fp8_bound(int64_t k, double scale_a, double scale_b, DType out, int64_t exact_range, OutputRef& r) {
  r.tol = device_ref::f64_dot_tolerances(fp8_tolerance(k, scale_a, scale_b, out, 1), r.ref, r.aux[0]);
  if (exact_range >= 0) r.exact = gemm_exact_tier_holds(fp8_model(k, scale_a, scale_b, out), exact_range, 0, 0);
}

OutputRef fp8_expected(int64_t m, int64_t n, int64_t k, const std::vector<double>& a, const std::vector<double>& b,
                       double scale_a, double scale_b, DType out, int64_t exact_range) {
  OutputRef r = fp8_reference(m, n, k, a, b, scale_a, scale_b);
  fp8_bound(k, scale_a, scale_b, out, exact_range, r);
  return r;
}

namespace {

enum class QuantOp : uint8_t { kInt8, kFp8 };

using gemm_common::dense;

Status reference(QuantOp op, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const int64_t m = t[0].v.rows, k = t[0].v.cols, n = t[1].v.rows;
  if (op == QuantOp::kInt8) {
    const std::vector<double> bias = Params(c.params).b("bias") ? dense(t[4]) : std::vector<double>{};
    out = int8_reference(m, n, k, dense(t[0]), dense(t[1]), dense(t[2]), dense(t[3]), bias);
  } else {
    out = {fp8_reference(m, n, k, dense(t[0]), dense(t[1]), t[2].at(0, 0), t[3].at(0, 0))};
  }
  return ok_status();
}

Status bound(QuantOp op, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const DType od = Params(c.params).dt("out");
  if (op == QuantOp::kInt8) {
    int8_bound(od, out);
  } else {
    const int64_t range = gemm_common::int_range({&c.tensors[0].values, &c.tensors[1].values});
    fp8_bound(t[0].v.cols, t[2].at(0, 0), t[3].at(0, 0), od, range, out[0]);
  }
  return ok_status();
}

/// The device path: cases with k > 0 from kDeviceRefMacs multiply-adds up (below it the host
/// reference takes a few microseconds), relations included (the engine transforms copies of the
/// drawn inputs and runs this reference on them too): the same per-element reference and
/// tolerance as the host path, bit for bit (references/device/gemm_f64_batch_core.h decodes int8
/// and e4m3 exactly; gemm_f64_tol.h).
constexpr int64_t kDeviceRefMacs = 2048;

bool device_when(const Params& p) {
  return p.i("k") > 0 && p.i("m") * p.i("n") * p.i("k") >= kDeviceRefMacs;
}

/// A one-element fp32 tensor as the host draws it: the device drew the same bits
/// (MaterializeDeviceGpu.HalfAndFp32ImagesAreTheHostsBytes). fp8's ceiling depends on the scales.
double drawn_scalar(const Case& c, size_t t) {
  const auto& T = c.tensors[t];
  std::vector<float> img(static_cast<size_t>(std::max<int64_t>(T.desc.extent(), 1)));
  materialize(T.desc, T.values, fnv1a64(T.name.data(), T.name.size()), img.data());
  return static_cast<double>(img[static_cast<size_t>(T.desc.offset)]);
}

Status device_reference(QuantOp op, const Case& c, const std::vector<DevTensor>& t, std::vector<DeviceOutput>& out,
                        const DeviceContext& ctx) {
  const Params p(c.params);
  const int64_t m = p.i("m"), n = p.i("n"), k = p.i("k");
  const DType od = p.dt("out");
  const auto* base = static_cast<const unsigned char*>(std::min(t[0].ptr, t[1].ptr));
  device_ref::F64GemmProblem g;
  g.a_type = g.b_type = op == QuantOp::kInt8 ? device_ref::kInI8 : device_ref::kInE4M3;
  g.trans_b = 1;  // B is n x k
  g.m = m, g.n = n, g.k = k, g.lda = t[0].v.ld, g.ldb = t[1].v.ld;
  g.a = static_cast<uint64_t>(static_cast<const unsigned char*>(t[0].ptr) - base);
  g.b = static_cast<uint64_t>(static_cast<const unsigned char*>(t[1].ptr) - base);
  ASSAY_RETURN_IF_ERROR(device_ref::gemm_f64_strided(g, base, out[0].ref, out[0].mag, ctx.stream));
  if (op == QuantOp::kInt8) {
    for (size_t v = 2; v <= 4; ++v)
      if (c.tensors[v].desc.strides.back() != 1)
        return internal_error(fmt::format("gemm_int8: {} is not dense", c.tensors[v].name));
    const device_ref::F64Int8Dequant q{.sa = t[2].as<const float>(), .sw = t[3].as<const float>(),
                                       .bias = p.b("bias") ? t[4].as<const float>() : nullptr,
                                       .store = store_rounding_for(od), .top = max_finite(od)};
    ASSAY_RETURN_IF_ERROR(
        device_ref::gemm_f64_int8_dequant(q, m, n, out[0].ref, out[0].mag, out[1].ref, out[1].mag, ctx.stream));
    out[0].exact = true;  // integer arithmetic
    return ok_status();
  }
  const double sa = drawn_scalar(c, 2), sb = drawn_scalar(c, 3);
  ASSAY_RETURN_IF_ERROR(
      device_ref::gemm_f64_dot_tol(fp8_tolerance(k, sa, sb, od, sa * sb), out[0].ref, out[0].mag, m * n, ctx.stream));
  const int64_t range = gemm_common::int_range({&c.tensors[0].values, &c.tensors[1].values});
  out[0].exact = range >= 0 && gemm_exact_tier_holds(fp8_model(k, sa, sb, od), range, 0, 0);
  return ok_status();
}

// ---- properties --------------------------------------------------------------------------------------
/// Element (i, j) of tensor t's host image.
unsigned char* elem(const Case& c, std::vector<unsigned char*>& img, size_t t, int64_t i, int64_t j) {
  const auto& d = c.tensors[t].desc;
  const View2D v = view_of(d);
  return img[t] + static_cast<size_t>(d.offset + i * v.ld + j) * dtype_size(d.dtype);
}

void reverse_rows(const Case& c, std::vector<unsigned char*>& img, size_t t) {
  const auto& d = c.tensors[t].desc;
  const View2D v = view_of(d);
  const size_t es = dtype_size(d.dtype), bytes = static_cast<size_t>(v.cols) * es;
  if (d.rank() == 1) {  // a vector: its elements reversed
    for (int64_t j = 0; j < v.cols / 2; ++j)
      std::swap_ranges(elem(c, img, t, 0, j), elem(c, img, t, 0, j) + es, elem(c, img, t, 0, v.cols - 1 - j));
    return;
  }
  for (int64_t i = 0; i < v.rows / 2; ++i)
    std::swap_ranges(elem(c, img, t, i, 0), elem(c, img, t, i, 0) + bytes, elem(c, img, t, v.rows - 1 - i, 0));
}

void double_all(const Case& c, std::vector<unsigned char*>& img, size_t t) {
  const auto& d = c.tensors[t].desc;
  const View2D v = view_of(d);
  for (int64_t j = 0; j < v.cols; ++j) {
    unsigned char* p = elem(c, img, t, 0, j);
    store_as(d.dtype, 2 * load_as_double(d.dtype, p), p);
  }
}

/// Swaps the views of two tensors of the same shape and dtype (their layouts may differ).
void swap_views(const Case& c, std::vector<unsigned char*>& img, size_t t1, size_t t2) {
  const View2D v = view_of(c.tensors[t1].desc);
  const size_t es = dtype_size(c.tensors[t1].desc.dtype);
  for (int64_t i = 0; i < v.rows; ++i)
    for (int64_t j = 0; j < v.cols; ++j)
      std::swap_ranges(elem(c, img, t1, i, j), elem(c, img, t1, i, j) + es, elem(c, img, t2, i, j));
}

bool transform(QuantOp op, const Case& c, std::vector<unsigned char*>& img) {
  const std::string rel = Params(c.params).s("relation");
  if (rel == "permute_rows") {
    reverse_rows(c, img, 0);
    if (op == QuantOp::kInt8) reverse_rows(c, img, 2);  // sa follows the rows of A
  } else if (rel == "scale2") {
    double_all(c, img, 2);                            // sa, or scale_a
    if (op == QuantOp::kInt8) double_all(c, img, 4);  // bias (unread without params.bias)
  } else if (rel == "transpose") {
    if (c.tensors[0].desc.shape != c.tensors[1].desc.shape) return false;
    swap_views(c, img, 0, 1);                            // A <-> B: same shape when m == n
    if (op == QuantOp::kInt8) swap_views(c, img, 2, 3);  // sa <-> sw
  } else {
    return false;
  }
  return true;
}

RelateElement relate(QuantOp op, const Case& c) {
  const Params p(c.params);
  const std::string rel = p.s("relation");
  // Output o is D for fp8 (its only output) and for int8's o == 1; int8's o == 0 is Acc.
  const bool fp8 = op == QuantOp::kFp8;
  if (rel == "permute_rows")
    return [m = p.i("m", 1)](size_t, int64_t i, int64_t j, RelatedElement& from) {
      return from = {m - 1 - i, j, 1}, true;
    };
  if (rel == "scale2")
    return [fp8](size_t o, int64_t i, int64_t j, RelatedElement& from) {
      return from = {i, j, fp8 || o == 1 ? 2.0 : 1.0}, true;
    };
  if (rel == "transpose")
    return [fp8, bias = p.b("bias")](size_t o, int64_t i, int64_t j, RelatedElement& from) {
      if (!fp8 && o == 1 && bias) return false;  // bias[j] does not move
      return from = {j, i, 1}, true;
    };
  return [](size_t, int64_t, int64_t, RelatedElement&) { return true; };
}

// ---- declaration: value recipes --------------------------------------------------------------------
rc::Gen<uint64_t> gen_seed() {
  return rc::gen::arbitrary<uint64_t>();
}

/// int8 values: small integers, the full range, one-hot rows, same-sign (0..127).
ValueRecipe draw_int8_recipe() {
  ValueRecipe r;
  r.seed = *gen_seed();
  switch (*gen_weighted_index({2, 3, 1, 2})) {
    case 0:
      r.cls = ValueClass::kSmallInt;
      r.int_range = *gen_element<int64_t>({1, 2, 3, 7, 15, 127, 128});  // 128 saturates to 127
      break;
    case 1:
      r.cls = ValueClass::kUniform;  // U(-128, 128) rounded and saturated: -128..127
      r.scale = 128;
      break;
    case 2:
      r.cls = ValueClass::kOneHot;
      break;
    default:
      r.cls = ValueClass::kSameSign;
      r.scale = 127;
      break;
  }
  return r;
}

ValueRecipe same_sign_int8() {
  ValueRecipe r;
  r.cls = ValueClass::kSameSign;
  r.scale = 127;
  r.seed = *gen_seed();
  return r;
}

/// Log-uniform magnitudes in [2^lo, 2^hi), random sign: never all equal.
ValueRecipe draw_log_uniform(int64_t lo, int64_t hi) {
  ValueRecipe r;
  r.cls = ValueClass::kLogUniform;
  r.exp_min = lo, r.exp_max = hi, r.seed = *gen_seed();
  return r;
}

/// fp8 per-tensor scale: log-uniform in 2^[-4, 4), or (pow2) exactly 2^e, e in [-3, 3].
ValueRecipe draw_fp8_scale(bool pow2) {
  if (!pow2) return draw_log_uniform(-4, 4);
  const int64_t e = *rc::gen::inRange<int64_t>(-3, 4);
  return draw_log_uniform(e, e);
}

ValueRecipe draw_fp8_recipe(bool small_int) {
  if (small_int) {
    ValueRecipe r;
    r.cls = ValueClass::kSmallInt;
    r.seed = *gen_seed(), r.int_range = *gen_element<int64_t>({1, 2, 4, 16});
    return r;
  }
  RecipeOptions o;
  o.classes = {ValueClass::kNormal,     ValueClass::kUniform,   ValueClass::kSameSign,    ValueClass::kSmallInt,
               ValueClass::kLogUniform, ValueClass::kSubnormal, ValueClass::kNearOverflow};
  o.dtype = DType::kE4M3;
  o.specials = kSpecialNaN | kSpecialPosInf;  // e4m3 has no Inf: +Inf rounds to NaN
  o.tile = 16;
  o.inject_percent = 10;
  ValueRecipe r = *gen_value_recipe(o);
  if (r.cls == ValueClass::kSmallInt) r.int_range = std::min<int64_t>(r.int_range, 16);
  r.exp_min = std::clamp<int64_t>(r.exp_min, -9, 8);
  r.exp_max = std::clamp<int64_t>(r.exp_max, r.exp_min, 9);
  return r;
}

constexpr int64_t kMaxMN = 96, kMaxWork = int64_t{1} << 22;

/// The value recipes (classes, scales, the exact tier), k == 0 cases, the int8 "deep" branch and
/// square "transpose" cases. Recipes: A, B, then the scales (and bias).
void couple(QuantOp op, nlohmann::json& p, std::vector<ValueRecipe>& r) {
  const DType out = Params(p).dt("out");
  const std::string rel = Params(p).s("relation");
  const size_t branch = *gen_weighted_index({8, 1, op == QuantOp::kInt8 ? 1u : 0u});
  if (branch == 1) {
    p["k"] = 0;
  } else if (branch == 2) {  // int8 "deep": |acc| past 2^24
    p["k"] = *rc::gen::inRange<int64_t>(8192, 32768);
    p["m"] = std::min<int64_t>(p["m"].get<int64_t>(), 8);
    p["n"] = std::min<int64_t>(p["n"].get<int64_t>(), 8);
  }
  if (rel == "transpose") p["n"] = p["m"];
  const int64_t mn = p["m"].get<int64_t>() * p["n"].get<int64_t>();
  if (mn * std::max<int64_t>(p["k"].get<int64_t>(), 1) > kMaxWork) p["k"] = kMaxWork / mn;
  if (op == QuantOp::kInt8) {
    r[0] = branch == 2 ? same_sign_int8() : draw_int8_recipe();
    r[1] = branch == 2 ? same_sign_int8() : draw_int8_recipe();
    // fp16 outputs: smaller scales keep most of D finite (65504).
    const int64_t lo = out == DType::kF16 ? -16 : -12, hi = out == DType::kF16 ? -6 : 1;
    r[2] = draw_log_uniform(lo, hi);
    r[3] = draw_log_uniform(lo, hi);
    r[4] = ValueRecipe{};  // bias N(0, 1)
    r[4].seed = *gen_seed();
  } else {
    const bool exact = *gen_weighted_index({3, 1}) == 1;
    r = {draw_fp8_recipe(exact), draw_fp8_recipe(exact), draw_fp8_scale(exact), draw_fp8_scale(exact)};
  }
}

// ---- declaration -------------------------------------------------------------------------------------
std::vector<ParamDef> params(QuantOp op) {
  std::vector<ParamDef> v = {
      ParamDef::extent("m", 1, kMaxMN).aim({4, 16}),
      ParamDef::extent("n", 1, kMaxMN).aim({4, 16}),
      ParamDef::integer("k", 0, kQuantMaxK)
          .aim({4, 16, 32, 64})
          .cap([](const Params& p) { return kMaxWork / std::max<int64_t>(p.i("m") * p.i("n"), 1); })
          .describe("at most 2^17 - 1: int32 partial sums of int8 products stay exact"),
      op == QuantOp::kInt8 ? ParamDef::dtype("out", {DType::kF32, DType::kF16, DType::kBF16})
                           : ParamDef::dtype("out", {DType::kF32, DType::kBF16}),
  };
  if (op == QuantOp::kInt8) v.push_back(ParamDef::flag("bias").weigh({1, 2}));
  v.push_back(ParamDef::choice("relation", {"permute_rows", "scale2", "transpose"}).optional(3));
  return v;
}

Status check(const std::string& name, const Params& p) {
  if (p.s("relation") == "transpose" && p.i("m") != p.i("n"))
    return invalid_argument(
        fmt::format("{} case: params.relation \"transpose\" needs m == n, not {} and {}", name, p.i("m"), p.i("n")));
  return ok_status();
}

/// The host references against long double (int8: exact integers; fp8: a few e4m3 values),
/// and the bounds against an fp32 evaluation of the same case.
Status self_check(QuantOp op, std::string& report) {
  const int64_t m = 3, n = 2, k = 9;
  std::vector<double> a(m * k), b(n * k);
  // fp8: magnitudes spread over 2^-5 .. 2^5 so that the fp32 sums round.
  auto e4m3 = [](double x, int64_t i) {
    return static_cast<double>(round_to(DType::kE4M3, static_cast<float>(std::ldexp(x, static_cast<int>(i % 11) - 5))));
  };
  for (int64_t i = 0; i < m * k; ++i) a[i] = op == QuantOp::kInt8 ? (i * 37 % 255) - 127 : e4m3(std::sin(0.9 * i) * 7, i);
  for (int64_t i = 0; i < n * k; ++i) b[i] = op == QuantOp::kInt8 ? (i * 53 % 255) - 127 : e4m3(std::cos(1.1 * i) * 5, i + 3);
  const std::vector<double> sa = {static_cast<double>(0.1f), -0.5, 3}, sw = {0.25, 1.5}, bias = {0.5, -2};
  double worst = 0, worst_ratio = 0;
  const std::vector<OutputRef> r = op == QuantOp::kInt8 ? int8_expected(m, n, k, a, b, sa, sw, bias, DType::kF32)
                                                        : std::vector<OutputRef>{fp8_expected(m, n, k, a, b, 0.75, 3, DType::kF32, -1)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double s = 0;
      float f = 0;
      for (int64_t q = 0; q < k; ++q) {
        s += static_cast<long double>(a[i * k + q]) * b[j * k + q];
        f = std::fma(static_cast<float>(a[i * k + q]), static_cast<float>(b[j * k + q]), f);
      }
      const size_t l = static_cast<size_t>(i * n + j);
      const OutputRef& d = r.back();
      long double want = 0;
      float got = 0;
      if (op == QuantOp::kInt8) {
        if (r[0].ref[l] != static_cast<double>(s)) return internal_error("gemm_int8: host Acc reference is not exact");
        want = static_cast<long double>(sa[i]) * sw[j] * s + bias[j];
        got = std::fma(static_cast<float>(s), static_cast<float>(sa[i]) * static_cast<float>(sw[j]), static_cast<float>(bias[j]));
      } else {
        want = 0.75L * 3 * s;
        got = 2.25f * f;
      }
      worst = std::max(worst, static_cast<double>(std::fabs(d.ref[l] - want)));
      worst_ratio = std::max(worst_ratio, std::fabs(got - d.ref[l]) / d.tol[l]);
    }
  const char* name = op == QuantOp::kInt8 ? "gemm_int8" : "gemm_fp8";
  if (!(worst < 1e-12) || !(worst_ratio <= 1))
    return internal_error(
        fmt::format("{}: host reference off by {:.3g} or an fp32 evaluation at {:.3g} of the bound", name, worst, worst_ratio));
  report += fmt::format("{}: host reference within {:.2g} of long double, an fp32 evaluation at {:.2g} of the bound (3x2x9)\n",
                        name, worst, worst_ratio);
  return ok_status();
}

OpDef make(QuantOp op) {
  const bool i8 = op == QuantOp::kInt8;
  OpDef o;
  o.name = i8 ? "gemm_int8" : "gemm_fp8";
  o.description = i8 ? "int8 TN GEMM, int32 accumulation (exact), fused per-row x per-channel dequantisation + bias"
                     : "fp8 e4m3 TN GEMM, fp32 accumulation, per-tensor scales, fp32/bf16 out";
  o.params = params(op);
  // The recipes below are redrawn by couple (classes, scales and the exact tier as the header says).
  const ValueSpec scale{.classes = {ValueClass::kLogUniform}};
  if (i8) {
    o.tensors = {{.name = "A", .dims = {"m", "k"}, .dtype = "int8", .values = {.int_hi = 128}},
                 {.name = "B", .dims = {"n", "k"}, .dtype = "int8", .values = {.int_hi = 128}},
                 {.name = "sa", .dims = {"m"}, .dtype = "fp32", .values = scale},
                 {.name = "sw", .dims = {"n"}, .dtype = "fp32", .values = scale},
                 {.name = "bias", .dims = {"n"}, .dtype = "fp32", .values = {.classes = {ValueClass::kNormal}}},
                 {.name = "Acc", .role = Role::kOut, .dims = {"m", "n"}, .dtype = "int32"},
                 {.name = "D", .role = Role::kOut, .dims = {"m", "n"}, .dtype = "out"}};
  } else {
    const ValueSpec e4m3{.specials = kSpecialNaN | kSpecialPosInf, .inject_percent = 10};
    o.tensors = {{.name = "A", .dims = {"m", "k"}, .dtype = "e4m3", .values = e4m3},
                 {.name = "B", .dims = {"n", "k"}, .dtype = "e4m3", .values = e4m3},
                 {.name = "scale_a", .dims = {"1"}, .dtype = "fp32", .values = scale},
                 {.name = "scale_b", .dims = {"1"}, .dtype = "fp32", .values = scale},
                 {.name = "D", .role = Role::kOut, .dims = {"m", "n"}, .dtype = "out"}};
  }
  const std::string name = o.name;
  o.check = [name](const Params& p) { return check(name, p); };
  o.couple = [op](nlohmann::json& p, std::vector<ValueRecipe>& r) { couple(op, p, r); };
  o.reference = [op](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return reference(op, c, t, out);
  };
  o.bound = [op](const Case& c, const Arithmetic&, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return bound(op, c, t, out);
  };
  o.bound_name = i8 ? "int8 dequantisation bound" : "fp8 fp32-accumulation ceiling";
  o.transform = [op](const Case& c, std::vector<unsigned char*>& img) { return transform(op, c, img); };
  o.relate = [op](const Case& c) { return relate(op, c); };
  o.self_check = [op](std::string& report) { return self_check(op, report); };
  o.device_reference = {.when = device_when,
                        .compute = [op](const Case& c, const Arithmetic&, const std::vector<DevTensor>& t,
                                        std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
                          return device_reference(op, c, t, out, ctx);
                        }};
  return o;
}

// ---- binding ------------------------------------------------------------------------------------------
const char* const kSrc = "kernels/gemm/gemm_quant.cu";
ASSAY_REGISTER(register_op(make(QuantOp::kInt8)));
ASSAY_REGISTER(register_op(make(QuantOp::kFp8)));
ASSAY_REGISTER(add_variant("gemm_int8",
                           {.name = "dp4a",
                            .description = "one warp per output, __dp4a on aligned 4-byte words + scalar tail, fused "
                                           "dequant",
                            .launch = int8_launch(kq::gemm_int8_dp4a),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("gemm_fp8",
                           {.name = "simt",
                            .description = "one warp per output, e4m3 -> fp32 and fmaf per lane, a shuffle sum, "
                                           "per-tensor scales",
                            .launch = fp8_launch(kq::gemm_fp8_simt),
                            .source = kSrc}));

}  // namespace
}  // namespace assay::quant
