// The quantised GEMM specs on the CPU (properties/gemm_quant.cpp): generated cases validate and
// reach the dtypes, value classes, k edges (k == 0, k % 4 leftovers, the deep int8 branch whose
// accumulators pass 2^24), relations and layouts the spec names; the k precondition is enforced
// with a one-line error and never generated past; the host references are right on hand cases;
// the bounds accept float simulations of correct kernels (both dequantisation orders, reversed
// summation) and reject the planted bugs; the metamorphic transforms move the references exactly
// as relate() says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "harness/bounds.h"
#include "harness/dtype.h"
#include "harness/executor.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "harness/op_model.h"
#include "properties/gemm_quant.h"
#include "tests/properties/model_host.h"

namespace assay {
namespace {

enum class QuantOp { kInt8, kFp8 };

const char* op_name(QuantOp op) {
  return op == QuantOp::kFp8 ? "gemm_fp8" : "gemm_int8";
}

const OpDef& op_def(QuantOp op) {
  return test_util::model_op(op_name(op));
}

/// The op's reference and bound on decoded tensors.
Status refs_of(QuantOp op, const Case& c, const std::vector<HostTensor>& views, std::vector<OutputRef>& refs) {
  const OpDef& d = op_def(op);
  ASSAY_RETURN_IF_ERROR(d.reference(c, views, refs));
  return d.bound(c, Arithmetic{}, views, refs);
}

/// A case from params with default recipes, no padding or offset (int8: bias false unless given).
Case make_quant(QuantOp op, nlohmann::json p) {
  if (op == QuantOp::kInt8 && !p.contains("bias")) p["bias"] = false;
  const size_t inputs = op == QuantOp::kInt8 ? 5 : 4;
  auto c = build_case(op_def(op), p, std::vector<ValueRecipe>(inputs), std::vector<Layout>(inputs + 2));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : Case{};
}

Status validate_quant(QuantOp op, const Case& c) {
  return find_spec(op_name(op))->validate(c);
}

/// Host images of a case's tensors (inputs materialised, outputs zero) and their decoded views.
struct HostCase {
  std::vector<std::vector<unsigned char>> images;
  std::vector<std::vector<double>> decoded;
  std::vector<HostTensor> views;

  explicit HostCase(const Case& c) {
    for (const auto& t : c.tensors) {
      images.emplace_back(static_cast<size_t>(t.desc.extent()) * dtype_size(t.desc.dtype), 0);
      if (t.role != Role::kOut)
        materialize(t.desc, t.values, fnv1a64(t.name.data(), t.name.size()), images.back().data());
    }
    decode(c);
  }
  void decode(const Case& c) {
    decoded.clear();
    views.clear();
    for (size_t t = 0; t < c.tensors.size(); ++t) {
      const auto& d = c.tensors[t].desc;
      std::vector<double> v(static_cast<size_t>(d.extent()));
      for (size_t e = 0; e < v.size(); ++e) v[e] = load_as_double(d.dtype, images[t].data() + e * dtype_size(d.dtype));
      decoded.push_back(std::move(v));
    }
    for (size_t t = 0; t < c.tensors.size(); ++t)
      views.push_back({decoded[t].data() + c.tensors[t].desc.offset, view_of(c.tensors[t].desc)});
  }
  std::vector<unsigned char*> ptrs() {
    std::vector<unsigned char*> p;
    for (auto& i : images) p.push_back(i.data());
    return p;
  }
  std::vector<double> dense(size_t t) const {
    const HostTensor& h = views[t];
    std::vector<double> v;
    for (int64_t i = 0; i < h.v.rows; ++i)
      for (int64_t j = 0; j < h.v.cols; ++j) v.push_back(h.at(i, j));
    return v;
  }
};

// ---- generators ----------------------------------------------------------------------------------------

TEST(GemmQuantGen, Int8CasesValidateAndCoverTheClassesEdgesAndRelations) {
  const OpSpec* spec = find_spec("gemm_int8");
  ASSERT_NE(spec, nullptr);
  const GenPlan plan{11, GenConfig{4096}};
  std::set<std::string> outs, rels, classes;
  bool k0 = false, k_tail = false, deep = false, bias = false, no_bias = false, padded = false, offset = false;
  int64_t deep_acc_max = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const Case c = generate_case(*spec, plan, i);
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary() << ": " << spec->validate(c).message();
    const int64_t k = c.params["k"].get<int64_t>();
    EXPECT_LE(k, quant::kQuantMaxK);
    outs.insert(c.params["out"].get<std::string>());
    if (c.params.contains("relation")) rels.insert(c.params["relation"].get<std::string>());
    for (int t : {0, 1}) classes.insert(std::string(value_class_name(c.tensors[t].values.cls)));
    // Per-channel and per-row scales are never uniform: log-uniform magnitudes.
    EXPECT_EQ(c.tensors[2].values.cls, ValueClass::kLogUniform);
    EXPECT_EQ(c.tensors[3].values.cls, ValueClass::kLogUniform);
    k0 |= k == 0;
    k_tail |= k % 4 != 0 && k > 4;
    (c.params["bias"].get<bool>() ? bias : no_bias) = true;
    padded |= c.tensors[0].desc.strides[0] > std::max<int64_t>(k, 1);
    offset |= c.tensors[0].desc.offset % 4 != 0;
    if (k >= 8192 && !deep) {
      deep = true;
      HostCase h(c);
      const auto refs = quant::int8_expected(c.params["m"], c.params["n"], k, h.dense(0), h.dense(1), h.dense(2),
                                             h.dense(3), {}, DType::kF32);
      for (double a : refs[0].ref) deep_acc_max = std::max<int64_t>(deep_acc_max, static_cast<int64_t>(std::fabs(a)));
    }
    if (c.params.value("relation", std::string()) == "transpose") {
      EXPECT_EQ(c.params["m"], c.params["n"]);
    }
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->id(), c.id());
    if (i < 20) {
      for (const Case& s : spec->shrink(c)) EXPECT_TRUE(spec->validate(s).ok()) << s.summary();
    }
  }
  EXPECT_EQ(outs, (std::set<std::string>{"fp32", "fp16", "bf16"}));
  EXPECT_EQ(rels, (std::set<std::string>{"permute_rows", "scale2", "transpose"}));
  for (const char* cls : {"small_int", "uniform", "same_sign", "one_hot"}) EXPECT_TRUE(classes.count(cls)) << cls;
  EXPECT_TRUE(k0 && k_tail && bias && no_bias && padded && offset);
  ASSERT_TRUE(deep) << "no deep-k case in 400";
  EXPECT_GT(deep_acc_max, int64_t{1} << 24) << "the deep branch must push |acc| past 2^24 (fp32 accumulation inexact)";
}

TEST(GemmQuantGen, Fp8CasesValidateAndCoverTheClasses) {
  const OpSpec* spec = find_spec("gemm_fp8");
  ASSERT_NE(spec, nullptr);
  const GenPlan plan{12, GenConfig{4096}};
  std::set<std::string> outs, rels, classes;
  bool k0 = false, nan = false, exact = false;
  for (int64_t i = 0; i < 400; ++i) {
    const Case c = generate_case(*spec, plan, i);
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary() << ": " << spec->validate(c).message();
    outs.insert(c.params["out"].get<std::string>());
    if (c.params.contains("relation")) rels.insert(c.params["relation"].get<std::string>());
    for (int t : {0, 1}) {
      classes.insert(std::string(value_class_name(c.tensors[t].values.cls)));
      nan |= c.tensors[t].values.inject.active();
    }
    k0 |= c.params["k"] == 0;
    if (!exact && c.tensors[0].values.cls == ValueClass::kSmallInt &&
        c.tensors[1].values.cls == ValueClass::kSmallInt && !c.tensors[0].values.inject.active() &&
        !c.tensors[1].values.inject.active()) {
      HostCase h(c);
      std::vector<OutputRef> refs;
      ASSERT_TRUE(refs_of(QuantOp::kFp8, c, h.views, refs).ok());
      exact = refs[0].exact;
    }
  }
  EXPECT_EQ(outs, (std::set<std::string>{"fp32", "bf16"}));
  EXPECT_EQ(rels, (std::set<std::string>{"permute_rows", "scale2", "transpose"}));
  for (const char* cls : {"normal", "same_sign", "small_int", "subnormal", "near_overflow"})
    EXPECT_TRUE(classes.count(cls)) << cls;
  EXPECT_TRUE(k0) << "no k == 0 case";
  EXPECT_TRUE(nan) << "no NaN injection";
  EXPECT_TRUE(exact) << "no exact-tier case";
}

TEST(GemmQuantGen, KAboveTheInt32LimitIsRejectedWithOneLine) {
  for (QuantOp op : {QuantOp::kInt8, QuantOp::kFp8}) {
    nlohmann::json p = {{"m", 1}, {"n", 1}, {"k", quant::kQuantMaxK}, {"out", "fp32"}};
    EXPECT_TRUE(validate_quant(op, make_quant(op, p)).ok()) << "k = 2^17 - 1";
    p["k"] = quant::kQuantMaxK + 1;
    const Status s = validate_quant(op, make_quant(op, p));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("131071"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("params.k"), std::string::npos) << s.message();
  }
  // 128^2 (2^17 - 1) still fits int32; 128^2 2^17 does not.
  EXPECT_LT(16384.0 * static_cast<double>(quant::kQuantMaxK), 2147483648.0);
  EXPECT_GE(16384.0 * static_cast<double>(quant::kQuantMaxK + 1), 2147483648.0);
}

TEST(GemmQuantGen, MalformedCasesGetOneLineErrors) {
  const nlohmann::json good = {{"m", 4}, {"n", 3}, {"k", 8}, {"out", "fp32"}};
  auto err = [](QuantOp op, const nlohmann::json& p) {
    return validate_quant(op, make_quant(op, p));
  };
  EXPECT_TRUE(err(QuantOp::kInt8, good).ok());
  EXPECT_TRUE(err(QuantOp::kFp8, good).ok());
  nlohmann::json p = good;
  p["out"] = "fp16";
  EXPECT_FALSE(err(QuantOp::kFp8, p).ok()) << "fp8 has no fp16 output";
  EXPECT_TRUE(err(QuantOp::kInt8, p).ok());
  p = good;
  p["relation"] = "transpose";
  const Status t = err(QuantOp::kInt8, p);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("m == n"), std::string::npos) << t.message();
  p["relation"] = "shift";
  EXPECT_FALSE(err(QuantOp::kFp8, p).ok());
  p = good;
  p["m"] = 0;
  EXPECT_FALSE(err(QuantOp::kInt8, p).ok());
  // A tensor of the wrong dtype.
  Case c = make_quant(QuantOp::kInt8, good);
  c.tensors[0].desc.dtype = DType::kE4M3;
  const Status d = validate_quant(QuantOp::kInt8, c);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.message().find('\n'), std::string::npos);
}

/// Materialised values of a recipe for a [rows, cols] tensor of `dt`.
std::vector<double> materialised(DType dt, const ValueRecipe& r, int64_t rows, int64_t cols) {
  TensorDesc d;
  d.dtype = dt;
  d.shape = {rows, cols};
  d.strides = {cols, 1};
  std::vector<unsigned char> img(static_cast<size_t>(d.extent()) * dtype_size(dt));
  materialize(d, r, 1, img.data());
  std::vector<double> v;
  for (size_t e = 0; e < img.size() / dtype_size(dt); ++e)
    v.push_back(load_as_double(dt, img.data() + e * dtype_size(dt)));
  return v;
}

TEST(GemmQuantGen, Int8AndE4m3RecipesMaterialiseAsTheSpecSays) {
  ValueRecipe full;
  full.cls = ValueClass::kUniform, full.scale = 128, full.seed = 3;
  const auto f = materialised(DType::kI8, full, 64, 64);
  EXPECT_EQ(*std::min_element(f.begin(), f.end()), -128);
  EXPECT_EQ(*std::max_element(f.begin(), f.end()), 127);
  ValueRecipe same;
  same.cls = ValueClass::kSameSign, same.scale = 127, same.seed = 4;
  const auto s = materialised(DType::kI8, same, 64, 64);
  EXPECT_GE(*std::min_element(s.begin(), s.end()), 0);
  EXPECT_EQ(*std::max_element(s.begin(), s.end()), 127);
  ValueRecipe hot;
  hot.cls = ValueClass::kOneHot, hot.seed = 5;
  const auto h = materialised(DType::kI8, hot, 16, 9);
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(std::count(h.begin() + i * 9, h.begin() + (i + 1) * 9, 1.0), 1) << "row " << i;
  ValueRecipe near;
  near.cls = ValueClass::kNearOverflow, near.seed = 6;
  for (double x : materialised(DType::kE4M3, near, 32, 32)) {
    EXPECT_LE(std::fabs(x), 448);
    EXPECT_GE(std::fabs(x), 448 / near.overflow_factor - 16);  // one e4m3 spacing below 112
  }
  ValueRecipe sub;
  sub.cls = ValueClass::kSubnormal, sub.seed = 7;
  for (double x : materialised(DType::kE4M3, sub, 32, 32)) {
    EXPECT_GT(std::fabs(x), 0);
    EXPECT_LT(std::fabs(x), min_normal(DType::kE4M3));
  }
  ValueRecipe inj;
  inj.seed = 8;
  inj.inject.kinds = kSpecialPosInf, inj.inject.rate = 0.1;
  const auto n = materialised(DType::kE4M3, inj, 32, 32);
  EXPECT_GT(std::count_if(n.begin(), n.end(), [](double x) { return std::isnan(x); }), 0) << "+Inf is NaN in e4m3";
  EXPECT_EQ(std::count_if(n.begin(), n.end(), [](double x) { return std::isinf(x); }), 0);
}

// ---- references ----------------------------------------------------------------------------------------

TEST(GemmQuantRef, Int8HandCase) {
  // A = [[1, -2, 3], [127, -128, 0]], B = [[4, 5, 6], [-1, -1, -1]]  (n x k)
  const std::vector<double> a = {1, -2, 3, 127, -128, 0}, b = {4, 5, 6, -1, -1, -1};
  const std::vector<double> sa = {0.5, 2}, sw = {0.25, -1}, bias = {1, 10};
  const auto r = quant::int8_expected(2, 2, 3, a, b, sa, sw, bias, DType::kF32);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].exact);
  EXPECT_EQ(r[0].ref, (std::vector<double>{12, -2, -132, 1}));
  EXPECT_EQ(r[0].tol, (std::vector<double>(4, 0.0)));
  EXPECT_EQ(r[1].ref,
            (std::vector<double>{0.5 * 0.25 * 12 + 1, 0.5 * -1 * -2 + 10, 2 * 0.25 * -132 + 1, 2 * -1 * 1 + 10}));
  // k == 0: Acc = 0 and D = bias exactly (fp32: tolerance 0).
  const auto z = quant::int8_expected(2, 2, 0, {}, {}, sa, sw, bias, DType::kF32);
  EXPECT_EQ(z[0].ref, (std::vector<double>(4, 0.0)));
  EXPECT_EQ(z[1].ref, (std::vector<double>{1, 10, 1, 10}));
  EXPECT_EQ(z[1].tol, (std::vector<double>(4, 0.0)));
  // fp16 output of k == 0: only the store's rounding of the bias.
  const auto h = quant::int8_expected(1, 1, 0, {}, {}, {1}, {1}, {1000.3}, DType::kF16);
  EXPECT_EQ(h[1].tol[0], 0.5 * ulp_of(1000.3, DType::kF16));
}

TEST(GemmQuantRef, Fp8HandCase) {
  // e4m3 values: 448 (max), 1.5, 0.0625, -2^-9 (the smallest subnormal).
  const double tiny = std::ldexp(1.0, -9);
  for (double v : {448.0, 1.5, 0.0625, -tiny}) EXPECT_EQ(round_to(DType::kE4M3, static_cast<float>(v)), v);
  const std::vector<double> a = {448, 1.5, -tiny, 0.0625}, b = {448, -2, 1, 16};  // 1 x 4 and 1 x 4
  const OutputRef r = quant::fp8_expected(1, 1, 4, a, b, 0.5, 3, DType::kF32, -1);
  EXPECT_EQ(r.ref[0], 1.5 * (448.0 * 448 - 3 - tiny + 1));
  EXPECT_FALSE(r.exact);
  EXPECT_GT(r.tol[0], 0);
  // NaN propagates (the kernel must give NaN there; the testbed makes its tolerance unbounded).
  const OutputRef n = quant::fp8_expected(1, 1, 1, {std::nan("")}, {1}, 1, 1, DType::kF32, -1);
  EXPECT_TRUE(std::isnan(n.ref[0]));
  // Small integers and power-of-two scales: exact tier.
  const OutputRef e = quant::fp8_expected(1, 1, 4, {1, 2, 3, 4}, {4, 3, 2, 1}, 0.5, 4, DType::kF32, 4);
  EXPECT_TRUE(e.exact);
  EXPECT_EQ(e.ref[0], 40);
  EXPECT_FALSE(quant::fp8_expected(1, 1, 4, {1, 2, 3, 4}, {4, 3, 2, 1}, 0.3, 4, DType::kF32, 4).exact);
}

// ---- bounds on simulated kernels -------------------------------------------------------------------------

/// A float simulation of the int8 dequantisation: order 0 fused as the kernel, order 1
/// ((acc * sa) * sw) + bias unfused; `row_scale` plants the wrong-scale bug.
float int8_d_sim(int64_t acc, float sa, float sw, float sw_row, float bias, int order, bool row_scale) {
  const float w = row_scale ? sw_row : sw;
  if (order == 0) return std::fmaf(static_cast<float>(acc), sa * w, bias);
  const volatile float x = static_cast<float>(acc) * sa;
  const volatile float y = x * w;
  return y + bias;
}

TEST(GemmQuantBound, Int8DequantisationAcceptsBothOrdersAndRejectsAWrongScale) {
  const Case c = [] {
    const OpSpec* spec = find_spec("gemm_int8");
    const GenPlan plan{5, GenConfig{4096}};
    for (int64_t i = 0;; ++i) {
      Case x = generate_case(*spec, plan, i);
      if (x.params["k"].get<int64_t>() >= 16 && x.params["m"].get<int64_t>() >= 4 &&
          x.params["n"].get<int64_t>() >= 4 && x.params["out"] == "fp32" && x.params["bias"].get<bool>() &&
          x.tensors[0].values.cls != ValueClass::kOneHot && x.tensors[1].values.cls != ValueClass::kOneHot)
        return x;
    }
  }();
  HostCase h(c);
  std::vector<OutputRef> refs;
  ASSERT_TRUE(refs_of(QuantOp::kInt8, c, h.views, refs).ok());
  const int64_t m = c.params["m"], n = c.params["n"];
  const auto sa = h.dense(2), sw = h.dense(3), bias = h.dense(4);
  int64_t wrong_caught = 0, eligible = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t e = static_cast<size_t>(i * n + j);
      const auto acc = static_cast<int64_t>(refs[0].ref[e]);
      const float fa = static_cast<float>(sa[i]), fw = static_cast<float>(sw[j]),
                  fr = static_cast<float>(sw[static_cast<size_t>(i % n)]), fb = static_cast<float>(bias[j]);
      for (int order : {0, 1}) {
        const double y = int8_d_sim(acc, fa, fw, fr, fb, order, false);
        EXPECT_LE(std::fabs(y - refs[1].ref[e]), refs[1].tol[e]) << "order " << order << " at " << i << "," << j;
      }
      // 8 roundings' worth of error on the product term is beyond the 4-rounding budget.
      const double x = sa[i] * sw[j] * static_cast<double>(acc);
      if (std::fabs(x) > 16 * std::fabs(bias[j])) {
        EXPECT_GT(8 * std::ldexp(std::fabs(x), -24), refs[1].tol[e]) << i << "," << j;
      }
      if (acc == 0 || i % n == j || fr == fw) continue;
      ++eligible;
      const double bad = int8_d_sim(acc, fa, fw, fr, fb, 0, true);
      wrong_caught += std::fabs(bad - refs[1].ref[e]) > refs[1].tol[e];
    }
  ASSERT_GT(eligible, 0) << c.summary();
  EXPECT_EQ(wrong_caught, eligible) << "a per-channel scale read by the row must leave the bound";
}

TEST(GemmQuantBound, Int8Fp32AccumulationIsCaughtOnlyByTheExactTierPastTwoTo24) {
  // Same-sign full-range rows of k = 8192: the exact sum is ~2^25; an fp32 running sum rounds.
  std::vector<double> a(8192), b(8192);
  for (size_t p = 0; p < a.size(); ++p)
    a[p] = static_cast<double>(64 + p % 63), b[p] = static_cast<double>(127 - p % 61);
  const auto r = quant::int8_expected(1, 1, 8192, a, b, {1}, {1}, {}, DType::kF32);
  float f = 0;
  for (size_t p = 0; p < a.size(); ++p) f += static_cast<float>(a[p] * b[p]);
  EXPECT_GT(r[0].ref[0], std::ldexp(1.0, 24));
  EXPECT_NE(static_cast<double>(static_cast<int32_t>(f)), r[0].ref[0]) << "exact tier (tol 0) sees it";
  EXPECT_TRUE(r[0].exact);
  // The error is of fp32-rounding size: a bound on D could not tell it from a correct kernel.
  EXPECT_LT(std::fabs(static_cast<double>(f) - r[0].ref[0]), 8192 * std::ldexp(r[0].ref[0], -24));
}

TEST(GemmQuantBound, Fp8CeilingAcceptsAReversedFloatSumAndRejectsAnIgnoredScale) {
  const OpSpec* spec = find_spec("gemm_fp8");
  const GenPlan plan{6, GenConfig{4096}};
  int64_t checked = 0, caught = 0;
  for (int64_t ci = 0; ci < 60; ++ci) {
    const Case c = generate_case(*spec, plan, ci);
    HostCase h(c);
    std::vector<OutputRef> refs;
    ASSERT_TRUE(refs_of(QuantOp::kFp8, c, h.views, refs).ok());
    const int64_t m = c.params["m"], n = c.params["n"], k = c.params["k"];
    const DType out = *parse_dtype(c.params["out"].get<std::string>());
    const auto a = h.dense(0), b = h.dense(1);
    const float sa = static_cast<float>(h.views[2].at(0, 0)), sb = static_cast<float>(h.views[3].at(0, 0));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const size_t e = static_cast<size_t>(i * n + j);
        if (!std::isfinite(refs[0].ref[e]) || std::isinf(refs[0].tol[e])) continue;
        float acc = 0;
        for (int64_t p = k - 1; p >= 0; --p)  // reversed order, unfused
          acc += static_cast<float>(a[static_cast<size_t>(i * k + p)]) *
                 static_cast<float>(b[static_cast<size_t>(j * k + p)]);
        const double y = round_to(out, sa * (sb * acc));  // the scales applied the other way round
        EXPECT_LE(std::fabs(y - refs[0].ref[e]), refs[0].tol[e]) << c.summary() << " at " << i << "," << j;
        ++checked;
        const double bad = round_to(out, sa * acc);
        caught += std::fabs(bad - refs[0].ref[e]) > refs[0].tol[e];
      }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(caught, checked / 4) << "scale_b ignored must leave the ceiling in most elements";
}

// ---- relations -----------------------------------------------------------------------------------------

class GemmQuantRelations : public ::testing::TestWithParam<QuantOp> {};

/// The transform and relate of each relation, on the host references: exact results move as relate says.
TEST_P(GemmQuantRelations, TransformsMoveTheReferencesAsRelateSays) {
  const QuantOp op = GetParam();
  const OpDef& def = op_def(op);
  const OpSpec* spec = find_spec(op_name(op));
  const GenPlan plan{9, GenConfig{4096}};
  std::set<std::string> seen;
  for (int64_t ci = 0; ci < 300 && seen.size() < 3; ++ci) {
    const Case c = generate_case(*spec, plan, ci);
    if (!c.params.contains("relation") || c.params["k"].get<int64_t>() > 2048) continue;
    const std::string rel = c.params["relation"];
    seen.insert(rel);
    HostCase h(c), t(c);
    std::vector<OutputRef> r1, r2;
    ASSERT_TRUE(def.reference(c, h.views, r1).ok());
    auto p = t.ptrs();
    ASSERT_TRUE(def.transform(c, p));
    t.decode(c);
    ASSERT_TRUE(def.reference(c, t.views, r2).ok());
    const int64_t m = c.params["m"], n = c.params["n"];
    const RelateElement related = def.relate(c);
    for (size_t o = 0; o < r1.size(); ++o)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          RelatedElement from{i, j, 1};
          if (!related(o, i, j, from)) continue;
          const double x1 = from.scale * r1[o].ref[static_cast<size_t>(from.from_i * n + from.from_j)];
          const double x2 = r2[o].ref[static_cast<size_t>(i * n + j)];
          if (std::isnan(x1) && std::isnan(x2)) continue;
          // int8 D rounds sa*sw*acc in double: a permutation keeps it, doubling is exact.
          EXPECT_EQ(x1, x2) << rel << " output " << o << " at " << i << "," << j << ": " << c.summary();
        }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"permute_rows", "scale2", "transpose"}));
}

INSTANTIATE_TEST_SUITE_P(Ops, GemmQuantRelations, ::testing::Values(QuantOp::kInt8, QuantOp::kFp8),
                         [](const ::testing::TestParamInfo<QuantOp>& i) {
                           return std::string(op_name(i.param));
                         });

}  // namespace
}  // namespace assay
