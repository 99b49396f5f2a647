// The GEMM + bias + activation specs on the CPU (properties/gemm_epilogue.cpp): generated cases
// validate and cover acts, dtypes, transposes, tile edges, k = 0, pads, the exact tier and the
// relations; shrinking stays valid; the fp64 host references match independent formulas on hand
// cases and finite differences; the ceilings accept a float emulation of the kernels (fmaf
// accumulation, host tanhf, one rounding at each store) on generated cases, bit for bit in the
// exact tier (dA; dB and dbias are accumulated into the engine's prefill), and reject emulations of
// the planted bugs (dbias overwritten with a nonzero prefill,
// bias after the activation, GELU' missing its 0.5, relu'(0) = 1); the properties hooks pass the
// emulation and catch the bugs they claim (Y = act(Z), gradcheck).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/bounds.h"
#include "harness/dtype.h"
#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "properties/gemm_epilogue.h"
#include "properties/gradcheck_relation.h"
#include "references/host/gemm_epilogue.h"
#include "tests/properties/model_host.h"

namespace assay {
namespace {

enum class EpiPass { kFwd, kBwd };

const char* epi_op_name(EpiPass pass) {
  return pass == EpiPass::kBwd ? "gemm_bias_act_bwd" : "gemm_bias_act";
}

/// A case from params, the input recipes (fwd: A, B, bias; bwd: A, B, Z, dY; extra ones are
/// ignored) and one pad and offset for every tensor.
Case make_epi(EpiPass pass, const nlohmann::json& p, std::vector<ValueRecipe> r, int64_t pad, int64_t off) {
  const size_t inputs = pass == EpiPass::kFwd ? 3 : 4, tensors = pass == EpiPass::kFwd ? 5 : 7;
  r.resize(inputs);
  auto c = build_case(test_util::model_op(epi_op_name(pass)), p, r, std::vector<Layout>(tensors, Layout{pad, off}));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : Case{};
}
using ref::Activation;
using ref::EpilogueProblem;

// ---- generators ------------------------------------------------------------------------------------
class EpiGen : public ::testing::TestWithParam<EpiPass> {};

TEST_P(EpiGen, CasesValidateCoverTheSpaceAndRoundTrip) {
  const EpiPass pass = GetParam();
  const OpSpec* spec = find_spec(epi_op_name(pass));
  ASSERT_NE(spec, nullptr);
  const GenPlan plan{11, GenConfig{4096}};
  std::set<std::string> dtypes, acts, relations;
  std::set<std::pair<bool, bool>> trans;
  bool k0 = false, edge = false, padded = false, offset = false, exact = false;
  int64_t max_m = 0, max_n = 0, max_k = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const Case c = generate_case(*spec, plan, i);
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary() << ": " << spec->validate(c).message();
    const EpilogueProblem p = epilogue::epilogue_problem(c.params);
    dtypes.insert(c.params["dtype"].get<std::string>());
    acts.insert(c.params["act"].get<std::string>());
    if (c.params.contains("relation")) relations.insert(c.params["relation"].get<std::string>());
    trans.insert({p.trans_a, p.trans_b});
    k0 |= p.k == 0;
    max_m = std::max(max_m, p.m), max_n = std::max(max_n, p.n), max_k = std::max(max_k, p.k);
    edge |= p.m == 33 || p.n == 33 || p.k == 33 || p.m == 31 || p.n == 31 || p.k == 31;
    padded |= c.tensors[0].desc.rank() == 2 &&
              c.tensors[0].desc.strides[0] > std::max<int64_t>(c.tensors[0].desc.shape[1], 1);
    offset |= c.tensors[0].desc.offset != 0;
    bool all_int = true;
    for (const auto& t : c.tensors)
      if (t.role != Role::kOut) all_int &= t.values.cls == ValueClass::kSmallInt;
    exact |= all_int;
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->id(), c.id());
    if (i < 30) {
      for (const Case& s : spec->shrink(c)) EXPECT_TRUE(spec->validate(s).ok()) << s.summary();
    }
  }
  // Beyond one 32-wide tile in every dimension (the gradcheck cases are smaller: 2^14 multiply-adds).
  EXPECT_GT(max_m, 40);
  EXPECT_GT(max_n, 40);
  EXPECT_GT(max_k, 64);
  std::printf("[ measured ] %s: largest m %lld, n %lld, k %lld over 400 cases\n", spec->name().c_str(),
              static_cast<long long>(max_m), static_cast<long long>(max_n), static_cast<long long>(max_k));
  EXPECT_EQ(dtypes.size(), 3u);
  EXPECT_EQ(acts, (std::set<std::string>{"none", "relu", "gelu"}));
  EXPECT_EQ(trans.size(), 4u);
  EXPECT_TRUE(k0 && edge && padded && offset && exact)
      << "k0 " << k0 << " edge " << edge << " padded " << padded << " offset " << offset << " exact " << exact;
  if (pass == EpiPass::kFwd)
    EXPECT_EQ(relations, (std::set<std::string>{"permute_rows", "scale2"}));
  else
    EXPECT_EQ(relations, (std::set<std::string>{"gradcheck"}));
}

TEST_P(EpiGen, ShrinkReachesSmallShapes) {
  const OpSpec* spec = find_spec(epi_op_name(GetParam()));
  Case c = generate_case(*spec, GenPlan{5, GenConfig{4096}}, 3);
  for (int step = 0; step < 200; ++step) {
    const auto s = spec->shrink(c);
    if (s.empty()) break;
    c = s.front();
  }
  const EpilogueProblem p = epilogue::epilogue_problem(c.params);
  EXPECT_EQ(p.m, 1);
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.k, 0);
}

INSTANTIATE_TEST_SUITE_P(Ops, EpiGen, ::testing::Values(EpiPass::kFwd, EpiPass::kBwd),
                         [](const ::testing::TestParamInfo<EpiPass>& i) {
                           return std::string(epi_op_name(i.param));
                         });

TEST(EpiValidate, MalformedCasesGetOneLineErrors) {
  const OpSpec* fwd = find_spec("gemm_bias_act");
  const OpSpec* bwd = find_spec("gemm_bias_act_bwd");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(bwd, nullptr);
  nlohmann::json p = {{"m", 4},          {"n", 5},          {"k", 3},       {"trans_a", false},
                      {"trans_b", true}, {"dtype", "fp32"}, {"act", "relu"}};
  ASSERT_TRUE(fwd->validate(make_epi(EpiPass::kFwd, p, {}, 0, 0)).ok());
  auto expect_error = [](const OpSpec* s, const Case& c, const std::string& needle) {
    const Status st = s->validate(c);
    ASSERT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  };
  nlohmann::json q = p;
  q["act"] = "silu";
  expect_error(fwd, make_epi(EpiPass::kFwd, q, {}, 0, 0), "params.act");
  q = p;
  q["act"] = "gelu";
  q["relation"] = "scale2";
  expect_error(fwd, make_epi(EpiPass::kFwd, q, {}, 0, 0), "params.relation");
  q = p;
  q["relation"] = "gradcheck";
  expect_error(fwd, make_epi(EpiPass::kFwd, q, {}, 0, 0), "params.relation");
  q = p;
  q["relation"] = "permute_rows";
  expect_error(bwd, make_epi(EpiPass::kBwd, q, {}, 0, 0), "params.relation");
  q = p;
  q["m"] = 0;
  expect_error(fwd, make_epi(EpiPass::kFwd, q, {}, 0, 0), "params.m");
  Case c = make_epi(EpiPass::kBwd, p, {}, 0, 0);
  c.tensors[5].role = Role::kInOut;
  expect_error(bwd, c, "dB must have role");
  c = make_epi(EpiPass::kFwd, p, {}, 0, 0);
  c.tensors[1].desc.shape = {3, 4};
  c.tensors[1].desc.strides = {4, 1};
  expect_error(fwd, c, "tensor B must be fp32 [5, 3]");
}

TEST(EpiValidate, BackwardVariantsDeclareTheAccumulatedGradients) {
  // dB and dbias are += outputs: every backward variant (kernel and mutant) says so in its contract,
  // so the engine prefills them and expects prefill + gradient.
  const OpSpec* bwd = find_spec("gemm_bias_act_bwd");
  ASSERT_NE(bwd, nullptr);
  int variants = 0;
  for (const auto& v : bwd->variants()) {
    const Contract* k = bwd->contract(v.name);
    ASSERT_NE(k, nullptr) << v.name;
    EXPECT_EQ(k->accumulated(), (std::vector<std::string>{"dB", "dbias"})) << v.name;
    ++variants;
  }
  EXPECT_EQ(variants, 4);
}

// ---- host references on hand cases ------------------------------------------------------------------
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(EpiReference, ForwardMatchesHandValuesForEveryActAndTranspose) {
  // op(A) = [[1, 2], [-3, 0.5]], op(B) = [[2, -1, 0], [1, 4, -2]], bias = [0.25, -10, 1].
  const double A[2][2] = {{1, 2}, {-3, 0.5}}, B[2][3] = {{2, -1, 0}, {1, 4, -2}}, bias[3] = {0.25, -10, 1};
  const double Z[2][3] = {{4.25, -3, -3}, {-5.25, -5, 0}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Activation act : {Activation::kIdentity, Activation::kRelu, Activation::kGeluTanh}) {
        EpilogueProblem p{2, 3, 2, ta, tb, act};
        std::vector<double> a(4), b(6);
        for (int i = 0; i < 2; ++i)
          for (int q = 0; q < 2; ++q) a[static_cast<size_t>(ta ? q * 2 + i : i * 2 + q)] = A[i][q];
        for (int q = 0; q < 2; ++q)
          for (int j = 0; j < 3; ++j) b[static_cast<size_t>(tb ? j * 2 + q : q * 3 + j)] = B[q][j];
        std::vector<double> z, y, mag;
        ref::epilogue_forward(p, a.data(), b.data(), bias, z, y, mag);
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 3; ++j) {
            const double zz = Z[i][j];
            const double want = act == Activation::kIdentity ? zz
                                : act == Activation::kRelu   ? std::max(zz, 0.0)
                                                             : gelu_tanh(zz);
            EXPECT_DOUBLE_EQ(z[static_cast<size_t>(i * 3 + j)], zz);
            EXPECT_NEAR(y[static_cast<size_t>(i * 3 + j)], want, 1e-15 * (1 + std::fabs(want)));
            EXPECT_DOUBLE_EQ(mag[static_cast<size_t>(i * 3 + j)],
                             std::fabs(A[i][0] * B[0][j]) + std::fabs(A[i][1] * B[1][j]) + std::fabs(bias[j]));
          }
      }
}

TEST(EpiReference, BackwardMatchesCentralDifferencesOfTheForward) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Activation act : {Activation::kIdentity, Activation::kRelu, Activation::kGeluTanh}) {
        const EpilogueProblem p{3, 4, 5, ta, tb, act};
        std::vector<double> a(15), b(20), bias(4), dy(12);
        for (auto* v : {&a, &b, &bias, &dy})
          for (double& x : *v) x = nd(rng);
        std::vector<double> z, y, mag;
        ref::epilogue_forward(p, a.data(), b.data(), bias.data(), z, y, mag);
        const ref::EpilogueGrads g = ref::epilogue_backward(p, a.data(), b.data(), z.data(), dy.data());
        // L(a, b, bias) = <dY, act(op(A) op(B) + bias)>; central differences per element.
        auto loss = [&](const std::vector<double>& aa, const std::vector<double>& bb, const std::vector<double>& cc) {
          std::vector<double> zz, yy, mm;
          ref::epilogue_forward(p, aa.data(), bb.data(), cc.data(), zz, yy, mm);
          double s = 0;
          for (size_t e = 0; e < yy.size(); ++e) s += dy[e] * yy[e];
          return s;
        };
        auto check = [&](std::vector<double>& x, const std::vector<double>& grad, int which) {
          for (size_t e = 0; e < x.size(); ++e) {
            const double h = 1e-6, x0 = x[e];
            x[e] = x0 + h;
            const double lp = which == 0 ? loss(x, b, bias) : which == 1 ? loss(a, x, bias) : loss(a, b, x);
            x[e] = x0 - h;
            const double lm = which == 0 ? loss(x, b, bias) : which == 1 ? loss(a, x, bias) : loss(a, b, x);
            x[e] = x0;
            EXPECT_NEAR(grad[e], (lp - lm) / (2 * h), 1e-6) << "operand " << which << " element " << e;
          }
        };
        std::vector<double> ac = a, bc = b, cc = bias;
        check(ac, g.da, 0);
        check(bc, g.db, 1);
        check(cc, g.dbias, 2);
      }
}

TEST(EpiBound, GeluPiecesAreSmallAndGrowAsDerived) {
  // At x = 1: 0.5 (dt + u) + u |y| with dt ~ 5.7u: about 4u.
  EXPECT_LT(epilogue::gelu_eval_error(1, gelu_tanh(1)), 8 * 0x1p-24);
  EXPECT_GT(epilogue::gelu_eval_error(1, gelu_tanh(1)), 2 * 0x1p-24);
  EXPECT_GT(epilogue::gelu_eval_error(100, 100), epilogue::gelu_eval_error(1, 1));
  EXPECT_LT(epilogue::gelu_grad_eval_error(0), 16 * 0x1p-24);
  // The Lipschitz constant: |GELU'| below 1.13 on a fine grid.
  for (double x = -10; x <= 10; x += 1e-3) {
    const double d = ref::activation_grad(Activation::kGeluTanh, x);
    ASSERT_LE(std::fabs(d), epilogue::kGeluLipschitz) << x;
  }
}

// ---- float emulation of the kernels, and of the planted bugs ---------------------------------------
/// kRoundSum and kFastTanh are no bugs: the orders narrow_intermediates (the sum rounded to dt
/// before the bias) and fast_math (a tanh off by __tanhf's documented 2^-11 relative) declare.
enum class Bug { kNone, kBiasAfterAct, kDbiasOverwrite, kGeluHalf, kReluAtZero, kRoundSum, kFastTanh };

/// fast_tanh: tanh moved by 2^-11 of itself, up or down (`up`), as far as __tanhf may.
float act_f(Activation a, float x, bool fast_tanh = false, bool up = true) {
  if (a == Activation::kRelu) return x > 0 ? x : 0.0f;
  if (a == Activation::kGeluTanh) {
    float t = std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x));
    if (fast_tanh) t = std::clamp(t * (up ? 1.0f + 0x1p-11f : 1.0f - 0x1p-11f), -1.0f, 1.0f);
    return 0.5f * x * (1.0f + t);
  }
  return x;
}

/// kFastTanh: tanh moved by 2^-11 of itself, up or down (`up`), as __tanhf may.
float grad_f(Activation a, float x, Bug bug, bool up = true) {
  if (a == Activation::kRelu) return (bug == Bug::kReluAtZero ? x >= 0 : x > 0) ? 1.0f : 0.0f;
  if (a == Activation::kGeluTanh) {
    const float k = 0.7978845608028654f, c = 0.044715f;
    float t = std::tanh(k * (x + c * x * x * x));
    if (bug == Bug::kFastTanh) t = std::clamp(t * (up ? 1.0f + 0x1p-11f : 1.0f - 0x1p-11f), -1.0f, 1.0f);
    const float s = 1.0f - t * t;
    const float second = s == 0.0f ? 0.0f : 0.5f * x * s * (k * (1.0f + 3.0f * c * x * x));
    return (bug == Bug::kGeluHalf ? 1.0f : 0.5f) * (1.0f + t) + second;
  }
  return 1.0f;
}

/// A case's tensors as the engine lays them out for the op's built-in variant ("tiled"; the
/// backward's dB and dbias prefilled), with the references and ceilings.
test_util::ModelHostRun materialise(const Case& c, const Contract& k) {
  return test_util::model_host_run(test_util::model_op(c.op), c, k);
}
test_util::ModelHostRun materialise(const Case& c) {
  return materialise(c, test_util::variant_contract(c.op, "tiled"));
}

/// The kernels' arithmetic in float on the host: outputs dense, in case order ({Y, Z} or {dA, dB, dbias}).
std::vector<std::vector<double>> emulate(const Case& c, const std::vector<HostTensor>& hv, Bug bug) {
  const EpilogueProblem p = epilogue::epilogue_problem(c.params);
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const int64_t la = ref::lda_of(p), lb = ref::ldb_of(p);
  std::vector<std::vector<double>> d;
  for (const auto& h : hv) d.push_back(pack_dense(h));
  auto A = [&](int64_t i, int64_t q) {
    return static_cast<float>(d[0][static_cast<size_t>(p.trans_a ? q * la + i : i * la + q)]);
  };
  auto B = [&](int64_t q, int64_t j) {
    return static_cast<float>(d[1][static_cast<size_t>(p.trans_b ? j * lb + q : q * lb + j)]);
  };
  auto rnd = [&](float x) { return static_cast<double>(round_to(dt, x)); };
  const size_t mn = static_cast<size_t>(p.m * p.n);
  if (c.op == "gemm_bias_act") {
    std::vector<double> y(mn), z(mn);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        float acc = 0;
        for (int64_t q = 0; q < p.k; ++q) acc = std::fma(A(i, q), B(q, j), acc);
        if (bug == Bug::kRoundSum) acc = static_cast<float>(rnd(acc));
        const float b = static_cast<float>(d[2][static_cast<size_t>(j)]), zv = acc + b;
        z[static_cast<size_t>(i * p.n + j)] = rnd(zv);
        y[static_cast<size_t>(i * p.n + j)] =
            rnd(bug == Bug::kBiasAfterAct ? act_f(p.act, acc) + b
                                          : act_f(p.act, zv, bug == Bug::kFastTanh, (i + j) % 2 == 0));
      }
    return {y, z};
  }
  std::vector<float> dz(mn);
  for (size_t e = 0; e < mn; ++e)
    dz[e] = static_cast<float>(d[3][e]) * grad_f(p.act, static_cast<float>(d[2][e]), bug, e % 2 == 0);
  std::vector<double> da(static_cast<size_t>(p.m * p.k)), db = d[5], dbias = d[6];
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t q = 0; q < p.k; ++q) {
      float acc = 0;
      for (int64_t j = 0; j < p.n; ++j) acc = std::fma(dz[static_cast<size_t>(i * p.n + j)], B(q, j), acc);
      da[static_cast<size_t>(p.trans_a ? q * la + i : i * la + q)] = rnd(acc);
    }
  for (int64_t q = 0; q < p.k; ++q)
    for (int64_t j = 0; j < p.n; ++j) {
      float acc = 0;
      for (int64_t i = 0; i < p.m; ++i) acc = std::fma(A(i, q), dz[static_cast<size_t>(i * p.n + j)], acc);
      const size_t e = static_cast<size_t>(p.trans_b ? j * lb + q : q * lb + j);
      db[e] = rnd(static_cast<float>(db[e]) + acc);
    }
  for (int64_t j = 0; j < p.n; ++j) {
    float s = 0;
    for (int64_t i = 0; i < p.m; ++i) s += dz[static_cast<size_t>(i * p.n + j)];
    dbias[static_cast<size_t>(j)] =
        rnd(bug == Bug::kDbiasOverwrite ? s : static_cast<float>(dbias[static_cast<size_t>(j)]) + s);
  }
  return {da, db, dbias};
}

struct EpiCheck {
  int64_t beyond = 0, not_exact = 0, elements = 0;
  std::vector<Failure> props;
};

/// Emulates `bug` on case c, compares every output with the reference and ceiling, runs the properties hook.
EpiCheck run_case(const Case& c, Bug bug) {
  const EpiPass pass = c.op == "gemm_bias_act" ? EpiPass::kFwd : EpiPass::kBwd;
  const OpDef& def = test_util::model_op(c.op);
  const auto h = materialise(c);
  const std::vector<OutputRef>& refs = h.refs;
  const auto out = emulate(c, h.hv, bug);
  EpiCheck r;
  std::vector<HostTensor> ov;
  for (size_t o = 0; o < out.size(); ++o) {
    EXPECT_EQ(out[o].size(), refs[o].ref.size());
    for (size_t e = 0; e < out[o].size(); ++e) {
      ++r.elements;
      const double err = std::fabs(out[o][e] - refs[o].ref[e]);
      if (!(err <= refs[o].tol[e])) ++r.beyond;
      if (refs[o].exact && out[o][e] != refs[o].ref[e]) ++r.not_exact;
    }
  }
  // Outputs as the hook sees them (dense views in the outputs' shapes).
  const size_t first_out = pass == EpiPass::kFwd ? 3 : 4;
  for (size_t o = 0; o < out.size(); ++o) {
    const View2D v = h.hv[first_out + o].v;
    ov.push_back({out[o].data(), {v.rows, v.cols, v.cols}});
  }
  if (c.params.contains("relation") && def.properties) def.properties(c, h.hv, ov, refs, r.props);
  return r;
}

/// The largest extent of the cases the CPU emulates: the backward's own caps (80, 160), the
/// forward's host-path sizes (its generator reaches --max-dim, and cases above 2^22
/// multiply-adds take the device reference, which GemmEpiDeviceRefGpu checks).
int64_t emulated_max_dim(EpiPass pass) {
  return pass == EpiPass::kFwd ? 96 : 4096;
}

class EpiEmulation : public ::testing::TestWithParam<EpiPass> {};

TEST_P(EpiEmulation, CeilingAcceptsTheFloatKernelOnGeneratedCases) {
  const OpSpec* spec = find_spec(epi_op_name(GetParam()));
  int64_t exact_cases = 0, relation_cases = 0;
  for (int64_t i = 0; i < 120; ++i) {
    const Case c = generate_case(*spec, GenPlan{23, GenConfig{emulated_max_dim(GetParam())}}, i);
    const EpiCheck r = run_case(c, Bug::kNone);
    EXPECT_EQ(r.beyond, 0) << c.summary();
    EXPECT_EQ(r.not_exact, 0) << c.summary();
    EXPECT_TRUE(r.props.empty()) << c.summary() << ": " << (r.props.empty() ? "" : r.props.front().detail);
    exact_cases += materialise(c).refs.front().exact ? 1 : 0;
    relation_cases += c.params.contains("relation") ? 1 : 0;
  }
  EXPECT_GT(exact_cases, 5);
  EXPECT_GT(relation_cases, 10);
}

/// What an emulated evaluation order did against the ceiling of the contract that declares it.
struct ModelRun {
  int64_t cases = 0, elements = 0, beyond_plain = 0;
  double worst = 0;  ///< largest |err| / ceiling
};

/// Up to 150 generated cases of `op` (seed, max dim 256) that `take` accepts, emulated with `order`
/// (an order `declared` allows): every element with a finite reference and ceiling inside the
/// declared ceiling, which is never below the plain one (the tiled kernel's contract); counts
/// those beyond the plain one. `only` limits the comparison to one output.
ModelRun emulate_under(const char* op, uint64_t seed, const std::function<bool(const Case&)>& take,
                       const Contract& declared, Bug order, std::optional<size_t> only = std::nullopt) {
  const OpSpec* spec = find_spec(op);
  ModelRun r;
  if (spec == nullptr) {
    ADD_FAILURE() << "no op " << op;
    return r;
  }
  for (int64_t i = 0; i < 2000 && r.cases < 150; ++i) {
    const Case c = generate_case(*spec, GenPlan{seed, GenConfig{256}}, i);
    if (!take(c)) continue;
    ++r.cases;
    const auto model = materialise(c, declared);
    const auto plain = materialise(c);
    const auto out = emulate(c, model.hv, order);
    for (size_t o = 0; o < out.size(); ++o) {
      if (only && o != *only) continue;
      for (size_t e = 0; e < out[o].size(); ++e) {
        const double ref = model.refs[o].ref[e], tol = model.refs[o].tol[e];
        if (!std::isfinite(ref) || !std::isfinite(tol)) continue;
        const double err = std::fabs(out[o][e] - ref);
        ++r.elements;
        if (!(err <= tol) || !(tol >= plain.refs[o].tol[e])) {
          ADD_FAILURE() << c.summary() << " output " << o << " element " << e << ": |err| " << err << ", ceiling "
                        << tol << ", plain ceiling " << plain.refs[o].tol[e];
          return r;
        }
        if (tol > 0) r.worst = std::max(r.worst, err / tol);
        r.beyond_plain += err > plain.refs[o].tol[e] ? 1 : 0;
      }
    }
  }
  return r;
}

void expect_model_needed(const ModelRun& r, const char* what) {
  std::printf("[ measured ] %s: %lld cases, %lld elements, worst err / ceiling %.3g, %lld beyond the plain ceiling\n",
              what, static_cast<long long>(r.cases), static_cast<long long>(r.elements), r.worst,
              static_cast<long long>(r.beyond_plain));
  EXPECT_GE(r.cases, 100) << what;
  EXPECT_GT(r.beyond_plain, 0) << what << ": the emulation never leaves the plain ceiling: it does not exercise the model";
}

// The product sum rounded to fp16/bf16 before the bias (narrow_intermediates, cuBLASLt's BIAS
// epilogue order): the emulated kernel with that order stays inside the ceiling it declares, and
// outside the plain one on some elements, which is why the model is needed.
TEST(EpiNarrow, RoundedSumBeforeTheBiasHoldsItsCeiling) {
  const auto r = emulate_under(
      "gemm_bias_act", 31, [](const Case& c) { return Params(c.params).dt("dtype") != DType::kF32; },
      Contract().narrow_intermediates(), Bug::kRoundSum);
  expect_model_needed(r, "epilogue with the sum rounded before the bias");
}

// The same order where the product sum leaves fp16's range (uniform inputs of +-400, k = 5:
// |s| up to 8e5): the rounded sum is +-Inf where the exact one is finite, and GELU(-Inf) is NaN in
// the emulated kernel (x Phi(x) = -Inf * 0), as cuBLASLt's fp16 GELU epilogue gave. The narrow
// ceiling leaves every such element unchecked; without the overflow rule it checks some of them
// (Y = -0 there, a tolerance of a few hundred), which is the false alarm it raised.
TEST(EpiNarrow, AnOverflowedRoundedSumIsLeftUnchecked) {
  int64_t nonfinite = 0, plain_checked = 0;
  for (uint64_t seed = 100; seed < 140; ++seed) {
    nlohmann::json p = {{"m", 9}, {"n", 7}, {"k", 5}, {"trans_a", true}, {"trans_b", false}, {"dtype", "fp16"},
                        {"act", "gelu"}};
    std::vector<ValueRecipe> r(3);
    for (size_t t = 0; t < r.size(); ++t) {
      r[t].cls = t < 2 ? ValueClass::kUniform : ValueClass::kNormal;
      r[t].scale = t < 2 ? 400 : 1;
      r[t].seed = seed * 8 + t;
    }
    const Case c = make_epi(EpiPass::kFwd, p, r, 1, 2);
    ASSERT_TRUE(find_spec("gemm_bias_act")->validate(c).ok());
    const auto narrow = materialise(c, Contract().narrow_intermediates());
    const auto out = emulate(c, narrow.hv, Bug::kRoundSum);
    for (size_t o = 0; o < out.size(); ++o)
      for (size_t e = 0; e < out[o].size(); ++e) {
        if (std::isfinite(out[o][e])) continue;
        ++nonfinite;
        EXPECT_TRUE(std::isinf(narrow.refs[o].tol[e])) << c.summary() << " output " << o << " element " << e
                                                       << " (reference " << narrow.refs[o].ref[e] << ", tolerance "
                                                       << narrow.refs[o].tol[e] << ")";
        plain_checked += o == 0 && std::fabs(narrow.refs[o].ref[e]) < 1 ? 1 : 0;
      }
  }
  std::printf("[ measured ] rounded sum past fp16's range: %lld non-finite outputs, %lld of them Y of a GELU whose "
              "exact value is within 1 of 0\n",
              static_cast<long long>(nonfinite), static_cast<long long>(plain_checked));
  EXPECT_GT(nonfinite, 0);
  EXPECT_GT(plain_checked, 0) << "no NaN where Y is near 0: the test does not exercise the rule";
}

// GELU's tanh as __tanhf (fast_math, cuBLASLt's declared arithmetic): the emulated kernel with
// tanh moved by its documented 2^-11 relative stays inside the fast-math ceiling, and outside the
// tanhf one on some elements.
TEST(EpiNarrow, FastTanhGeluHoldsTheFastMathCeiling) {
  const auto r = emulate_under(
      "gemm_bias_act", 37, [](const Case& c) { return Params(c.params).s("act") == "gelu"; }, Contract().fast_math(),
      Bug::kFastTanh, /*only=*/0);  // Y: Z has no activation
  expect_model_needed(r, "GELU with a __tanhf-accurate tanh (Y)");
}

// The backward's GELU' with tanh as __tanhf: the emulated kernel stays inside the fast-math
// ceiling of dA, dB and dbias, and outside the tanhf one on some elements.
TEST(EpiNarrow, FastTanhGeluGradHoldsTheFastMathCeiling) {
  Contract k = test_util::variant_contract("gemm_bias_act_bwd", "tiled");  // dB and dbias accumulated
  k.fast_math();
  const auto r = emulate_under(
      "gemm_bias_act_bwd", 41, [](const Case& c) { return Params(c.params).s("act") == "gelu"; }, k,
      Bug::kFastTanh);
  expect_model_needed(r, "GELU' with a __tanhf-accurate tanh (dA, dB, dbias)");
}

INSTANTIATE_TEST_SUITE_P(Ops, EpiEmulation, ::testing::Values(EpiPass::kFwd, EpiPass::kBwd),
                         [](const ::testing::TestParamInfo<EpiPass>& i) {
                           return std::string(epi_op_name(i.param));
                         });

Case hand_case(EpiPass pass, const std::string& act, const std::string& dtype, ValueClass cls, bool gradcheck,
               uint64_t seed = 100) {
  nlohmann::json p = {{"m", 9},           {"n", 7},         {"k", 5},    {"trans_a", true},
                      {"trans_b", false}, {"dtype", dtype}, {"act", act}};
  if (gradcheck) p["relation"] = "gradcheck";
  std::vector<ValueRecipe> r;
  for (uint64_t s = 0; s < 4; ++s) {
    ValueRecipe x;
    x.cls = cls;
    x.seed = seed + s;
    r.push_back(x);
  }
  return make_epi(pass, p, r, 1, 2);
}

TEST(EpiEmulation, SimulatedDbiasOverwriteIsOutsideTheBoundAndFailsTheGradcheck) {
  // The overwrite moves the projection by sum_j u_j prefill_j over the n = 7 entries of dbias (the
  // engine's prefill, N(0, 1): typically ~2.6), against a tolerance that sums the ceilings of all
  // 87 gradient elements: in bf16 (u = 2^-8) that sum is ~0.6, so some directions u land inside it.
  // Each setting takes five cases (five directions): fp32 and fp16 must fail the gradcheck in all,
  // bf16 in at least two; the bound catches every one.
  for (const char* dt : {"fp32", "fp16", "bf16"})
    for (const char* act : {"none", "relu", "gelu"}) {
      int projections = 0;
      for (uint64_t seed : {100, 200, 300, 400, 500}) {
        const Case c = hand_case(EpiPass::kBwd, act, dt, ValueClass::kNormal, true, seed);
        ASSERT_TRUE(find_spec("gemm_bias_act_bwd")->validate(c).ok());
        const EpiCheck good = run_case(c, Bug::kNone);
        EXPECT_EQ(good.beyond, 0) << dt << " " << act;
        EXPECT_TRUE(good.props.empty()) << dt << " " << act << ": "
                                        << (good.props.empty() ? "" : good.props[0].detail);
        const EpiCheck bad = run_case(c, Bug::kDbiasOverwrite);
        EXPECT_GT(bad.beyond, 0) << dt << " " << act;
        ASSERT_LE(bad.props.size(), 1u) << dt << " " << act;
        if (!bad.props.empty()) {
          EXPECT_EQ(bad.props[0].kind, FailureKind::kProjection);
          ++projections;
        }
      }
      std::printf("[ measured ] dbias overwrite, %s %s: gradcheck fails in %d of 5 directions\n", dt, act,
                  projections);
      EXPECT_GE(projections, std::string(dt) == "bf16" ? 2 : 5) << dt << " " << act;
    }
}

TEST(EpiEmulation, SimulatedGeluDerivativeBugIsOutsideTheBoundAndFailsTheGradcheck) {
  for (const char* dt : {"fp32", "fp16", "bf16"}) {
    const Case c = hand_case(EpiPass::kBwd, "gelu", dt, ValueClass::kNormal, true);
    const EpiCheck bad = run_case(c, Bug::kGeluHalf);
    EXPECT_GT(bad.beyond, 0) << dt;
    EXPECT_EQ(bad.props.size(), 1u) << dt;
  }
}

TEST(EpiEmulation, SimulatedReluGradAtZeroBreaksTheExactTier) {
  const Case c = hand_case(EpiPass::kBwd, "relu", "fp32", ValueClass::kSmallInt, false);
  const auto h = materialise(c);
  bool zero = false;
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t j = 0; j < 7; ++j) zero |= h.hv[2].at(i, j) == 0 && h.hv[3].at(i, j) != 0;
  ASSERT_TRUE(zero) << "the small-integer Z must hold an exact zero under a nonzero dY";
  EXPECT_EQ(run_case(c, Bug::kNone).not_exact, 0);
  const EpiCheck bad = run_case(c, Bug::kReluAtZero);
  EXPECT_GT(bad.not_exact, 0);
}

TEST(EpiEmulation, SimulatedBiasAfterActivationIsOutsideTheBoundAndBreaksYEqualsActZ) {
  for (const char* dt : {"fp32", "bf16"})
    for (const char* act : {"relu", "gelu"}) {
      Case c = hand_case(EpiPass::kFwd, act, dt, ValueClass::kNormal, false);
      c.params["relation"] = "permute_rows";
      const EpiCheck bad = run_case(c, Bug::kBiasAfterAct);
      EXPECT_GT(bad.beyond, 0) << dt << " " << act;
      if (std::string(act) == "relu") {
        ASSERT_EQ(bad.props.size(), 1u);
        EXPECT_EQ(bad.props[0].kind, FailureKind::kProperty);
      }
      EXPECT_EQ(run_case(c, Bug::kNone).beyond, 0);
    }
}

/// The planted value bugs, emulated, on generated cases: the fraction each check set catches predicts
/// how soon the GPU campaign (tests/properties/gemm_epilogue_gpu_test.cpp, 1000 cases) finds them.
TEST(EpiEmulation, EmulatedBugsAreCaughtOnGeneratedCases) {
  struct B {
    Bug bug;
    EpiPass pass;
    const char* name;
  };
  for (const B& b :
       {B{Bug::kBiasAfterAct, EpiPass::kFwd, "bias_after_act"},
        B{Bug::kDbiasOverwrite, EpiPass::kBwd, "dbias_overwrite"}, B{Bug::kGeluHalf, EpiPass::kBwd, "gelu_grad_half"},
        B{Bug::kReluAtZero, EpiPass::kBwd, "relu_grad_at_zero"}}) {
    const OpSpec* spec = find_spec(epi_op_name(b.pass));
    int caught = 0;
    const int n = 300;
    for (int64_t i = 0; i < n; ++i) {
      const Case c = generate_case(*spec, GenPlan{31, GenConfig{emulated_max_dim(b.pass)}}, i);
      const EpiCheck r = run_case(c, b.bug);
      caught += r.beyond > 0 || r.not_exact > 0 || !r.props.empty() ? 1 : 0;
    }
    std::printf("[ measured ] emulated %s caught in %d of %d generated cases\n", b.name, caught, n);
    EXPECT_GE(caught, 3) << b.name;
  }
}

TEST(EpiBound, ExactTierOnlyWhereEveryPartialSumIsExact) {
  const EpilogueProblem relu{4, 4, 8, false, false, Activation::kRelu},
      gelu{4, 4, 8, false, false, Activation::kGeluTanh};
  std::vector<double> a(32, 2), b(32, -2), bias(4, 1);
  EXPECT_TRUE(epilogue::forward_refs(relu, DType::kF32, a.data(), b.data(), bias.data(), 2)[0].exact);
  EXPECT_FALSE(epilogue::forward_refs(gelu, DType::kF32, a.data(), b.data(), bias.data(), 2)[0].exact);
  EXPECT_FALSE(epilogue::forward_refs(relu, DType::kF32, a.data(), b.data(), bias.data(), -1)[0].exact);
  // bf16 output: 8 significand bits; 9 terms of 4 reach 36: exact; k = 100 does not fit.
  EXPECT_TRUE(epilogue::forward_refs(relu, DType::kBF16, a.data(), b.data(), bias.data(), 2)[0].exact);
  const EpilogueProblem big{1, 1, 100, false, false, Activation::kRelu};
  std::vector<double> a2(100, 2), b2(100, 2), bias2(1, 0);
  EXPECT_FALSE(epilogue::forward_refs(big, DType::kBF16, a2.data(), b2.data(), bias2.data(), 2)[0].exact);
}

}  // namespace
}  // namespace assay
