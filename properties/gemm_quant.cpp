// gemm_int8 / gemm_fp8: quantised GEMMs in the "TN" layout (A m x k, B n x k, k contiguous).
//
// Sections: binding, generators, references and bound, properties.
// Binding: kernels/gemm/gemm_quant.cu (device code kernels/gemm/gemm_quant_impl.cuh):
//   gemm_int8 "dp4a": one thread per output, __dp4a over 4-byte words where both rows are 4-byte
//     aligned plus a scalar k % 4 tail, a scalar loop otherwise; int32 accumulation; then, fused,
//     D = rn_out(fmaf(float(acc), sa[i] * sw[j], bias[j])).
//   gemm_fp8 "simt": one thread per output, e4m3 -> fp32 (exact) and fmaf in k order (the
//     products of two e4m3 values are exact in fp32), D = rn_out((scale_a * scale_b) * acc).
//   The planted bugs of tests/mutants/gemm/quant_mutants.cu register beside them through
//   register_int8 / register_fp8 (properties/gemm_quant_registry.h).
// Tensors (every matrix with the same padded row stride cols + pad, every tensor the same
// leading offset): gemm_int8: A int8 [m, k], B int8 [n, k], sa fp32 [m], sw fp32 [n],
// bias fp32 [n] (read only when params.bias), Acc int32 [m, n], D fp32/fp16/bf16 [m, n];
// gemm_fp8: A, B e4m3, scale_a, scale_b fp32 [1], D fp32/bf16 [m, n].
// Precondition: k <= 2^17 - 1 (both ops): int8 products reach (-128)^2 = 2^14, so |acc| <= 2^14 k
// < 2^31 keeps every int32 partial sum exact; for fp8 it keeps the double reference exact
// (references/host/gemm_quant.h). validate() rejects more with a one-line error; the generator
// stays below.
// References: references/host/gemm_quant.h, on the kernel's own (rounded) inputs.
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
// Generators: m, n 1..96 (edges around 4, 16), k 0..256 with edges (k % 4 leftovers, k == 0 in
//   its own branch), a medium branch (k to 2048), and for int8 a "deep" branch: k 8192..32767,
//   m, n <= 8, A and B same-sign full range (0..127), so |acc| passes 2^24 and an fp32
//   accumulation cannot be exact. int8 values: small integers (range 1, 2, 3, 7, 15, 127, 128),
//   full range U(-128, 128), same-sign 0..127, one-hot. Scales sa, sw: log-uniform magnitudes
//   (never all equal, so a wrong scale index shows), random sign; bias N(0, 1). fp8 values:
//   normal, uniform, same-sign, small-int, log-uniform, e4m3 subnormals, near 448, NaN injection
//   (e4m3 has no Inf: an injected Inf rounds to NaN); scales log-uniform 2^[-4, 4) or powers of two.
// Properties (params.relation, a quarter of the cases; TensorOpDef::transform + relate):
//   "permute_rows": the rows of A (and of sa) reversed -> the rows of Acc and D reversed (Acc bit
//     for bit: its tolerance is 0); "scale2": sa and bias (int8) or scale_a (fp8) doubled -> D
//     doubled, Acc unchanged (linearity in the scale, the analogue of alpha); "transpose" (m == n):
//     A and B swapped (and sa, sw) -> Acc^T exactly, D^T (int8: without bias only).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/ranges.h>

#include "harness/bounds.h"
#include "properties/gemm_quant_registry.h"
#include "properties/rowwise_common.h"
#include "references/host/gemm_quant.h"

namespace assay::quant {

using rowwise::bool_or;
using rowwise::int_or;
using rowwise::param_int;
using rowwise::str_or;
namespace kq = kernels::quant;

namespace {

// ---- binding ---------------------------------------------------------------------------------------
std::vector<TensorOpVariant>& reg(QuantOp op) {
  static std::vector<TensorOpVariant> v[2];
  return v[static_cast<int>(op)];
}
std::vector<std::pair<std::string, kq::GemmInt8Launcher>>& int8_fns() {
  static std::vector<std::pair<std::string, kq::GemmInt8Launcher>> v;
  return v;
}
std::vector<std::pair<std::string, kq::GemmFp8Launcher>>& fp8_fns() {
  static std::vector<std::pair<std::string, kq::GemmFp8Launcher>> v;
  return v;
}

kq::OutDt out_dt(DType t) {
  return t == DType::kF16 ? kq::OutDt::kF16 : t == DType::kBF16 ? kq::OutDt::kBF16 : kq::OutDt::kF32;
}

template <typename Fn>
Fn find_in(const std::vector<std::pair<std::string, Fn>>& fns, const std::string& name) {
  for (const auto& [n, f] : fns)
    if (n == name) return f;
  return nullptr;
}

}  // namespace

const char* quant_op_name(QuantOp op) {
  return op == QuantOp::kFp8 ? "gemm_fp8" : "gemm_int8";
}

bool register_int8(VariantInfo info, kq::GemmInt8Launcher fn) {
  int8_fns().emplace_back(info.name, fn);
  reg(QuantOp::kInt8).push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                                   // Tensor order: A, B, sa, sw, bias, Acc, D.
                                   kq::GemmInt8Args a;
                                   a.m = t[0].v.rows, a.k = t[0].v.cols, a.n = t[1].v.rows;
                                   a.a = t[0].as<const int8_t>(), a.lda = t[0].v.ld;
                                   a.b = t[1].as<const int8_t>(), a.ldb = t[1].v.ld;
                                   a.sa = t[2].as<const float>(), a.sw = t[3].as<const float>();
                                   a.bias = bool_or(c, "bias", false) ? t[4].as<const float>() : nullptr;
                                   a.acc = t[5].as<int32_t>(), a.ldacc = t[5].v.ld;
                                   a.d = t[6].ptr, a.ldd = t[6].v.ld, a.out = out_dt(t[6].dtype);
                                   return fn(a, s);
                                 }});
  return true;
}

bool register_fp8(VariantInfo info, kq::GemmFp8Launcher fn) {
  fp8_fns().emplace_back(info.name, fn);
  reg(QuantOp::kFp8).push_back({std::move(info), [fn](const Case&, const std::vector<DevTensor>& t, cudaStream_t s) {
                                  // Tensor order: A, B, scale_a, scale_b, D.
                                  kq::GemmFp8Args a;
                                  a.m = t[0].v.rows, a.k = t[0].v.cols, a.n = t[1].v.rows;
                                  a.a = t[0].as<const uint8_t>(), a.lda = t[0].v.ld;
                                  a.b = t[1].as<const uint8_t>(), a.ldb = t[1].v.ld;
                                  a.scale_a = t[2].as<const float>(), a.scale_b = t[3].as<const float>();
                                  a.d = t[4].ptr, a.ldd = t[4].v.ld, a.out = out_dt(t[4].dtype);
                                  return fn(a, s);
                                }});
  return true;
}

const std::vector<TensorOpVariant>& quant_variants(QuantOp op) {
  return reg(op);
}
kq::GemmInt8Launcher find_int8(const std::string& name) {
  return find_in(int8_fns(), name);
}
kq::GemmFp8Launcher find_fp8(const std::string& name) {
  return find_in(fp8_fns(), name);
}

namespace {

const char* const kSrc = "kernels/gemm/gemm_quant.cu";
[[maybe_unused]] const bool kKernels =
    register_int8({"dp4a", "one thread per output, __dp4a on aligned 4-byte words + scalar tail, fused dequant", false,
                   true, kSrc},
                  kq::gemm_int8_dp4a) &&
    register_fp8(
        {"simt", "one thread per output, e4m3 -> fp32 and fmaf in k order, per-tensor scales", false, true, kSrc},
        kq::gemm_fp8_simt);

constexpr int64_t kMaxWork = int64_t{1} << 26, kGenMaxWork = int64_t{1} << 22;

DType out_of(const nlohmann::json& p) {
  return parse_dtype(p.value("out", std::string("fp32"))).value_or(DType::kF32);
}

}  // namespace

Case build_quant_case(QuantOp op, const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad,
                      int64_t off) {
  Case c;
  c.op = quant_op_name(op);
  c.params = p;
  const int64_t m = p.value("m", int64_t{1}), n = p.value("n", int64_t{1}), k = p.value("k", int64_t{0});
  const DType out = out_of(p);
  auto rec = [&](size_t i) { return i < r.size() ? r[i] : ValueRecipe{}; };
  if (op == QuantOp::kInt8) {
    c.tensors = {make_tensor("A", Role::kIn, DType::kI8, m, k, pad, off, rec(0)),
                 make_tensor("B", Role::kIn, DType::kI8, n, k, pad, off, rec(1)),
                 make_tensor("sa", Role::kIn, DType::kF32, -1, m, 0, off, rec(2)),
                 make_tensor("sw", Role::kIn, DType::kF32, -1, n, 0, off, rec(3)),
                 make_tensor("bias", Role::kIn, DType::kF32, -1, n, 0, off, rec(4)),
                 make_tensor("Acc", Role::kOut, DType::kI32, m, n, pad, off, {}),
                 make_tensor("D", Role::kOut, out, m, n, pad, off, {})};
  } else {
    c.tensors = {make_tensor("A", Role::kIn, DType::kE4M3, m, k, pad, off, rec(0)),
                 make_tensor("B", Role::kIn, DType::kE4M3, n, k, pad, off, rec(1)),
                 make_tensor("scale_a", Role::kIn, DType::kF32, -1, 1, 0, off, rec(2)),
                 make_tensor("scale_b", Role::kIn, DType::kF32, -1, 1, 0, off, rec(3)),
                 make_tensor("D", Role::kOut, out, m, n, pad, off, {})};
  }
  return c;
}

namespace {

// ---- generators ------------------------------------------------------------------------------------
rc::Gen<uint64_t> gen_seed() {
  return rc::gen::arbitrary<uint64_t>();
}

/// int8 values: small integers, the full range, one-hot rows, same-sign (0..127).
rc::Gen<ValueRecipe> gen_int8_recipe() {
  return rc::gen::exec([] {
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
  });
}

ValueRecipe same_sign_int8(uint64_t seed) {
  ValueRecipe r;
  r.cls = ValueClass::kSameSign;
  r.scale = 127;
  r.seed = seed;
  return r;
}

/// Log-uniform scales |x| in [2^lo, 2^hi), random sign: never all equal.
rc::Gen<ValueRecipe> gen_scale_recipe(int64_t lo, int64_t hi) {
  return rc::gen::map(gen_seed(), [lo, hi](uint64_t seed) {
    ValueRecipe r;
    r.cls = ValueClass::kLogUniform;
    r.exp_min = lo, r.exp_max = hi, r.seed = seed;
    return r;
  });
}

/// fp8 per-tensor scale: log-uniform in 2^[-4, 4), or (pow2) exactly 2^e, e in [-3, 3].
rc::Gen<ValueRecipe> gen_fp8_scale(bool pow2) {
  return rc::gen::exec([pow2] {
    ValueRecipe r;
    r.cls = ValueClass::kLogUniform;
    r.seed = *gen_seed();
    if (pow2) {
      r.exp_min = r.exp_max = *rc::gen::inRange<int64_t>(-3, 4);
    } else {
      r.exp_min = -4, r.exp_max = 4;
    }
    return r;
  });
}

rc::Gen<ValueRecipe> gen_fp8_recipe(bool small_int) {
  if (small_int)
    return rc::gen::map(rc::gen::pair(gen_seed(), gen_element<int64_t>({1, 2, 4, 16})), [](auto sr) {
      ValueRecipe r;
      r.cls = ValueClass::kSmallInt;
      r.seed = sr.first, r.int_range = sr.second;
      return r;
    });
  RecipeOptions o;
  o.classes = {ValueClass::kNormal,     ValueClass::kUniform,   ValueClass::kSameSign,    ValueClass::kSmallInt,
               ValueClass::kLogUniform, ValueClass::kSubnormal, ValueClass::kNearOverflow};
  o.dtype = DType::kE4M3;
  o.specials = kSpecialNaN | kSpecialPosInf;  // e4m3 has no Inf: +Inf rounds to NaN
  o.tile = 16;
  o.inject_percent = 10;
  return rc::gen::map(gen_value_recipe(o), [](ValueRecipe r) {
    if (r.cls == ValueClass::kSmallInt) r.int_range = std::min<int64_t>(r.int_range, 16);
    r.exp_min = std::clamp<int64_t>(r.exp_min, -9, 8);
    r.exp_max = std::clamp<int64_t>(r.exp_max, r.exp_min, 9);
    return r;
  });
}

/// Halves m and n until m n k fits the host reference's budget.
void fit_work(int64_t& m, int64_t& n, int64_t k) {
  while (m * n * std::max<int64_t>(k, 1) > kGenMaxWork && (m > 1 || n > 1)) m = (m + 1) / 2, n = (n + 1) / 2;
}

const char* const kRelations[] = {"permute_rows", "scale2", "transpose"};

rc::Gen<Case> gen_case(QuantOp op, const GenConfig& cfg) {
  return rc::gen::exec([op, cfg] {
    const int64_t cap = std::clamp<int64_t>(cfg.max_dim, 1, 96);
    int64_t m = *gen_extent(cap, {4, 16}, 1), n = *gen_extent(cap, {4, 16}, 1), k = 0;
    const size_t branch = *gen_weighted_index({6, 1, 2, op == QuantOp::kInt8 ? 1u : 0u});
    switch (branch) {
      case 0:
        k = *gen_extent(256, {4, 16, 32}, 0);
        break;
      case 1:
        k = 0;
        break;
      case 2:
        k = *gen_extent(2048, {4, 64}, 1);
        break;
      default:  // int8 "deep": |acc| past 2^24
        k = *rc::gen::inRange<int64_t>(8192, 32768);
        m = std::min<int64_t>(m, 8), n = std::min<int64_t>(n, 8);
        break;
    }
    fit_work(m, n, k);
    nlohmann::json p = {{"m", m}, {"n", n}, {"k", k}};
    const DType out = op == QuantOp::kInt8 ? *gen_element<DType>({DType::kF32, DType::kF16, DType::kBF16})
                                           : *gen_element<DType>({DType::kF32, DType::kBF16});
    p["out"] = std::string(dtype_name(out));
    if (*gen_weighted_index({3, 1}) == 1) {
      const std::string rel = *gen_element<std::string>({kRelations[0], kRelations[1], kRelations[2]});
      p["relation"] = rel;
      if (rel == "transpose") p["n"] = m;
    }
    std::vector<ValueRecipe> r;
    if (op == QuantOp::kInt8) {
      p["bias"] = *gen_weighted_index({1, 2}) == 1;
      if (branch == 3) {
        r = {same_sign_int8(*gen_seed()), same_sign_int8(*gen_seed())};
      } else {
        r = {*gen_int8_recipe(), *gen_int8_recipe()};
      }
      // fp16 outputs: smaller scales keep most of D finite (65504).
      const int64_t lo = out == DType::kF16 ? -16 : -12, hi = out == DType::kF16 ? -6 : 1;
      r.push_back(*gen_scale_recipe(lo, hi));
      r.push_back(*gen_scale_recipe(lo, hi));
      ValueRecipe bias;
      bias.seed = *gen_seed();
      r.push_back(bias);
    } else {
      const bool exact = *gen_weighted_index({3, 1}) == 1;
      r = {*gen_fp8_recipe(exact), *gen_fp8_recipe(exact), *gen_fp8_scale(exact), *gen_fp8_scale(exact)};
    }
    const int64_t pad = *gen_element<int64_t>({0, 0, 0, 1, 3, 8});
    const int64_t off = *gen_element<int64_t>({0, 0, 0, 1, 2, 4});
    return build_quant_case(op, p, r, pad, off);
  });
}

}  // namespace

rc::Gen<Case> gen_quant_case(QuantOp op, const GenConfig& config) {
  return gen_case(op, config);
}

Status validate_quant(QuantOp op, const Case& c) {
  // The k limit first, so that its error names it.
  if (c.params.contains("k") && c.params["k"].is_number_integer() && c.params["k"].get<int64_t>() > kQuantMaxK)
    return invalid_argument(fmt::format(
        "{} case: params.k = {} is above the limit of {} (2^17 - 1: {})", c.op, c.params["k"].get<int64_t>(),
        kQuantMaxK,
        op == QuantOp::kInt8 ? "|acc| <= 128^2 k must stay below 2^31" : "the double reference must stay exact"));
  ASSAY_ASSIGN_OR_RETURN(const int64_t m, param_int(c, "m", 1, 4096));
  ASSAY_ASSIGN_OR_RETURN(const int64_t n, param_int(c, "n", 1, 4096));
  ASSAY_ASSIGN_OR_RETURN(const int64_t k, param_int(c, "k", 0, kQuantMaxK));
  const std::string out = str_or(c, "out", "");
  const bool out_ok =
      op == QuantOp::kInt8 ? (out == "fp32" || out == "fp16" || out == "bf16") : (out == "fp32" || out == "bf16");
  if (!out_ok)
    return invalid_argument(c.op + (op == QuantOp::kInt8 ? " case: params.out must be \"fp32\", \"fp16\" or \"bf16\""
                                                         : " case: params.out must be \"fp32\" or \"bf16\""));
  if (op == QuantOp::kInt8 && c.params.contains("bias") && !c.params["bias"].is_boolean())
    return invalid_argument(c.op + " case: params.bias must be true or false");
  if (m * n * std::max<int64_t>(k, 1) > kMaxWork)
    return invalid_argument(
        fmt::format("{} case: m n k = {} multiply-adds, above the limit of {}", c.op, m * n * k, kMaxWork));
  if (c.params.contains("relation")) {
    const std::string rel = str_or(c, "relation", "");
    if (rel != "permute_rows" && rel != "scale2" && rel != "transpose")
      return invalid_argument(c.op + " case: params.relation must be \"permute_rows\", \"scale2\" or \"transpose\"");
    if (rel == "transpose" && m != n)
      return invalid_argument(
          fmt::format("{} case: params.relation \"transpose\" needs m == n, not {} and {}", c.op, m, n));
  }
  const std::vector<std::pair<std::string, Role>> int8_layout = {
      {"A", Role::kIn},    {"B", Role::kIn},    {"sa", Role::kIn}, {"sw", Role::kIn},
      {"bias", Role::kIn}, {"Acc", Role::kOut}, {"D", Role::kOut}};
  const std::vector<std::pair<std::string, Role>> fp8_layout = {
      {"A", Role::kIn}, {"B", Role::kIn}, {"scale_a", Role::kIn}, {"scale_b", Role::kIn}, {"D", Role::kOut}};
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, op == QuantOp::kInt8 ? int8_layout : fp8_layout));
  const Case want = build_quant_case(op, c.params, {}, 0, 0);
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const auto& d = c.tensors[i].desc;
    const auto& e = want.tensors[i].desc;
    if (d.dtype != e.dtype || d.shape != e.shape)
      return invalid_argument(fmt::format("{} case: tensor {} must be {} [{}]", c.op, c.tensors[i].name,
                                          dtype_name(e.dtype), fmt::join(e.shape, ", ")));
  }
  return ok_status();
}

// ---- references and bound ------------------------------------------------------------------------------
double int8_d_tol(double x, double bias_abs, double ref_abs, bool acc_zero, DType out) {
  const double u = unit_roundoff(DType::kF32);
  const double g3 = gamma_n(3, u);
  const double e32 = acc_zero ? 0.0 : g3 * x + u * (x * (1 + g3) + bias_abs) + 4 * min_normal(DType::kF32);
  const double e64 = acc_zero ? 0.0 : std::ldexp(x + bias_abs, -52);
  const double tol = e32 + e64 + rowwise::store_rounding(ref_abs + e32 + e64, out);
  return ref_abs + tol >= max_finite(out) ? INFINITY : tol;
}

std::vector<OutputRef> int8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a,
                                      const std::vector<double>& b, const std::vector<double>& sa,
                                      const std::vector<double>& sw, const std::vector<double>& bias, DType out) {
  std::vector<int64_t> acc;
  ref::gemm_tn_int_exact(m, n, k, a.data(), k, b.data(), k, acc);
  std::vector<OutputRef> r(2);
  r[0].ref.resize(acc.size());
  r[0].tol.assign(acc.size(), 0.0);
  r[0].exact = true;
  r[1].ref.resize(acc.size());
  r[1].tol.resize(acc.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t e = static_cast<size_t>(i * n + j);
      const double ac = static_cast<double>(acc[e]);
      const double bj = bias.empty() ? 0.0 : bias[static_cast<size_t>(j)];
      const double x = sa[static_cast<size_t>(i)] * sw[static_cast<size_t>(j)] * ac;
      r[0].ref[e] = ac;
      r[1].ref[e] = x + bj;
      r[1].tol[e] = int8_d_tol(std::fabs(x), std::fabs(bj), std::fabs(x + bj), acc[e] == 0, out);
    }
  return r;
}

OutputRef fp8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a, const std::vector<double>& b,
                        double scale_a, double scale_b, DType out, int64_t exact_range) {
  OutputRef r;
  std::vector<double> mag;
  ref::gemm_tn_f64(m, n, k, a.data(), k, b.data(), k, r.ref, mag);
  GemmBoundModel model;
  model.in = DType::kE4M3;
  model.acc = DType::kF32;
  model.out = DType::kF32;  // the store's rounding is added below, at |ref| + e32
  model.k = k;
  model.scale_a = std::fabs(scale_a);
  model.scale_b = std::fabs(scale_b);
  const ElementBound bound = gemm_ceiling(model);
  const double s = scale_a * scale_b, top = max_finite(out);
  r.tol.resize(r.ref.size());
  for (size_t e = 0; e < r.ref.size(); ++e) {
    r.ref[e] *= s;
    const double ra = std::fabs(r.ref[e]);
    const double e32 = bound.tol(ra, std::fabs(s) * mag[e]);
    const double tol = e32 + rowwise::store_rounding(ra + e32, out);
    r.tol[e] = ra + tol >= top ? INFINITY : tol;
  }
  if (exact_range >= 0) {
    model.out = out;
    r.exact = gemm_exact_tier_holds(model, exact_range, 0, 0);
  }
  return r;
}

namespace {

std::vector<double> dense(const HostTensor& h) {
  std::vector<double> v(static_cast<size_t>(h.v.rows * h.v.cols));
  for (int64_t i = 0; i < h.v.rows; ++i)
    for (int64_t j = 0; j < h.v.cols; ++j) v[static_cast<size_t>(i * h.v.cols + j)] = h.at(i, j);
  return v;
}

Status reference(QuantOp op, const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const int64_t m = t[0].v.rows, k = t[0].v.cols, n = t[1].v.rows;
  const DType od = out_of(c.params);
  if (op == QuantOp::kInt8) {
    const std::vector<double> bias = bool_or(c, "bias", false) ? dense(t[4]) : std::vector<double>{};
    out = int8_reference(m, n, k, dense(t[0]), dense(t[1]), dense(t[2]), dense(t[3]), bias, od);
    return ok_status();
  }
  int64_t range = -1;
  const ValueRecipe &ra = c.tensors[0].values, &rb = c.tensors[1].values;
  if (ra.cls == ValueClass::kSmallInt && rb.cls == ValueClass::kSmallInt && !ra.inject.active() && !rb.inject.active())
    range = std::max(ra.int_range, rb.int_range);
  out = {fp8_reference(m, n, k, dense(t[0]), dense(t[1]), t[2].at(0, 0), t[3].at(0, 0), od, range)};
  return ok_status();
}

// ---- properties --------------------------------------------------------------------------------------
/// Element e of tensor t's host image.
unsigned char* elem(const Case& c, std::vector<unsigned char*>& img, size_t t, int64_t i, int64_t j) {
  const auto& d = c.tensors[t].desc;
  const View2D v = view_of(d);
  return img[t] + static_cast<size_t>(d.offset + i * v.ld + j) * dtype_size(d.dtype);
}

void reverse_rows(const Case& c, std::vector<unsigned char*>& img, size_t t) {
  const auto& d = c.tensors[t].desc;
  const View2D v = view_of(d);
  const size_t bytes = static_cast<size_t>(v.cols) * dtype_size(d.dtype);
  if (d.rank() == 1) {  // a vector: its elements reversed
    for (int64_t j = 0; j < v.cols / 2; ++j)
      std::swap_ranges(elem(c, img, t, 0, j), elem(c, img, t, 0, j) + dtype_size(d.dtype),
                       elem(c, img, t, 0, v.cols - 1 - j));
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

void swap_images(const Case& c, std::vector<unsigned char*>& img, size_t t1, size_t t2) {
  const size_t bytes = static_cast<size_t>(c.tensors[t1].desc.extent()) * dtype_size(c.tensors[t1].desc.dtype);
  std::swap_ranges(img[t1], img[t1] + bytes, img[t2]);
}

bool transform(QuantOp op, const Case& c, std::vector<unsigned char*>& img) {
  const std::string rel = str_or(c, "relation", "");
  if (rel == "permute_rows") {
    reverse_rows(c, img, 0);
    if (op == QuantOp::kInt8) reverse_rows(c, img, 2);  // sa follows the rows of A
  } else if (rel == "scale2") {
    double_all(c, img, 2);                            // sa, or scale_a
    if (op == QuantOp::kInt8) double_all(c, img, 4);  // bias (unread without params.bias)
  } else if (rel == "transpose") {
    swap_images(c, img, 0, 1);                            // A <-> B: same shape and layout when m == n
    if (op == QuantOp::kInt8) swap_images(c, img, 2, 3);  // sa <-> sw
  } else {
    return false;
  }
  return true;
}

bool relate(QuantOp op, const Case& c, size_t o, int64_t i, int64_t j, RelatedElement& from) {
  const std::string rel = str_or(c, "relation", "");
  const bool is_d = op == QuantOp::kFp8 || o == 1;
  if (rel == "permute_rows") {
    from = {int_or(c, "m", 1) - 1 - i, j, 1};
  } else if (rel == "scale2") {
    from = {i, j, is_d ? 2.0 : 1.0};
  } else if (rel == "transpose") {
    if (op == QuantOp::kInt8 && is_d && bool_or(c, "bias", false)) return false;  // bias[j] does not move
    from = {j, i, 1};
  }
  return true;
}

rowwise::RowOpConfig config(QuantOp op) {
  rowwise::RowOpConfig cfg;
  cfg.name = quant_op_name(op);
  cfg.description = op == QuantOp::kInt8
                        ? "int8 TN GEMM, int32 accumulation (exact), fused per-row x per-channel dequantisation + bias"
                        : "fp8 e4m3 TN GEMM, fp32 accumulation, per-tensor scales, fp32/bf16 out";
  cfg.def.op = cfg.name;
  cfg.def.bound_name = op == QuantOp::kInt8 ? "int8 dequantisation bound" : "fp8 fp32-accumulation ceiling";
  cfg.def.reference = [op](const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
    return reference(op, c, t, out);
  };
  cfg.def.transform = [op](const Case& c, std::vector<unsigned char*>& img) { return transform(op, c, img); };
  cfg.def.relate = [op](const Case& c, size_t o, int64_t i, int64_t j, RelatedElement& from) {
    return relate(op, c, o, i, j, from);
  };
  cfg.registry = &reg(op);
  cfg.gen = [op](const GenConfig& g) { return gen_case(op, g); };
  cfg.build = [op](const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
    return build_quant_case(op, p, r, pad, off);
  };
  cfg.validate = [op](const Case& c) { return validate_quant(op, c); };
  cfg.shrink_keys = {{"m", 1}, {"n", 1}, {"k", 0}};
  cfg.self_check_note = "host references and bounds checked in tests/properties/gemm_quant_test.cpp";
  return cfg;
}

[[maybe_unused]] const bool kSpecs = register_spec(std::make_unique<rowwise::RowOpSpec>(config(QuantOp::kInt8))) &&
                                     register_spec(std::make_unique<rowwise::RowOpSpec>(config(QuantOp::kFp8)));

}  // namespace

const TensorOpDef& quant_def(QuantOp op) {
  static const rowwise::RowOpConfig cfgs[2] = {config(QuantOp::kInt8), config(QuantOp::kFp8)};
  return cfgs[static_cast<int>(op)].def;
}

}  // namespace assay::quant
