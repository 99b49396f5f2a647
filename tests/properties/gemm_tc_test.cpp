// The tensor-core GEMM spec on the CPU (properties/gemm_tc.cpp): generated cases validate and
// cover dtypes, transposes, edges, relations, k == 0 and beta == 0 (NaN C unless the variant
// declares reads_c_when_beta0); malformed cases get one-line errors; the metamorphic transforms and `relate` agree on the host reference; the
// ceiling accepts simulated tensor-core accumulations (alignment and truncation per [FHMP], block
// sizes 1 to 16) and fp32 FMA loops in several orders across value classes, is bit-exact in the
// exact tier, and rejects simulated fp16 / bf16 accumulators.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/bounds.h"
#include "harness/dtype.h"
#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "properties/gemm.h"
#include "properties/gemm_common.h"
#include "properties/gemm_tc.h"
#include "tests/properties/model_host.h"

namespace assay {
namespace {

using gemm_tc::TcProblem;
using test_util::model_host_run;
using test_util::model_op;

const OpSpec& spec() {
  const OpSpec* s = find_spec("gemm_tc");
  EXPECT_NE(s, nullptr);
  return *s;
}

// ---- generator, validation, shrinking ------------------------------------------------------------------

TEST(GemmTcGen, CasesValidateAndCoverShapesDtypesRelations) {
  const GenPlan plan{5, GenConfig{512}};
  std::set<std::string> ins, outs, relations, transposes;
  bool k0 = false, nan_c = false, exact = false, padded = false, offset = false, m_tail = false, multi_tile = false,
       k_tail = false, one = false, beta_nonzero = false, large = false;
  for (int64_t i = 0; i < 600; ++i) {
    const Case c = generate_case(spec(), plan, i);
    ASSERT_TRUE(spec().validate(c).ok()) << c.summary() << ": " << spec().validate(c).message();
    const int64_t m = c.params["m"], n = c.params["n"], k = c.params["k"];
    ins.insert(c.params["dtype"].get<std::string>());
    outs.insert(c.params["out_dtype"].get<std::string>());
    relations.insert(c.params.value("relation", std::string("none")));
    transposes.insert(std::to_string(c.params.value("trans_a", false)) + std::to_string(c.params.value("trans_b", false)));
    k0 |= k == 0;
    nan_c |= c.params["beta"].get<double>() == 0;  // C poisoned as an output (the BLAS convention)
    exact |= gemm_tc::exact_tier_case(c) && k > 0;
    for (const auto& t : c.tensors) {
      if (t.desc.rank() == 2) padded |= t.desc.strides[0] > std::max<int64_t>(t.desc.shape[1], 1);
      offset |= t.desc.offset != 0;
    }
    m_tail |= m % 16 != 0 && m > 64;
    multi_tile |= m > 64 && n > 64 && k > 64;
    k_tail |= k % 32 != 0 && k > 32;
    one |= m == 1 && n == 1;
    beta_nonzero |= c.params["beta"].get<double>() != 0;
    if (c.params.value("relation", std::string()) == "transpose") {
      EXPECT_TRUE(m == n && n == k) << c.summary();
    }
    EXPECT_LE(m * n * std::max<int64_t>(k, 1), int64_t{1} << 31);
    large |= m * n * std::max<int64_t>(k, 1) > kDeviceRefWork;
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->id(), c.id());
    if (i < 40) {
      for (const Case& s : spec().shrink(c)) {
        EXPECT_TRUE(spec().validate(s).ok()) << s.summary();
      }
    }
  }
  EXPECT_EQ(ins, (std::set<std::string>{"fp16", "bf16"}));
  EXPECT_EQ(outs.size(), 3u);
  EXPECT_EQ(relations, (std::set<std::string>{"none", "permute_rows", "alpha2", "transpose"}));
  EXPECT_EQ(transposes.size(), 4u);
  EXPECT_TRUE(k0 && nan_c && exact && padded && offset && beta_nonzero);
  EXPECT_TRUE(m_tail && multi_tile && k_tail && one);
  EXPECT_TRUE(large) << "no case for the device reference";
}

TEST(GemmTcGen, ShrinkReachesTheSmallestShape) {
  for (int64_t start : {3, 21, 57}) {
    Case c = generate_case(spec(), GenPlan{9, GenConfig{512}}, start);
    for (int step = 0; step < 400; ++step) {
      auto s = spec().shrink(c);
      if (s.empty()) break;
      c = s.front();
    }
    EXPECT_EQ(c.params["m"].get<int64_t>() * c.params["n"].get<int64_t>(), 1) << c.summary();
    EXPECT_EQ(c.params["k"].get<int64_t>(), 0) << c.summary();
    EXPECT_FALSE(c.params.contains("relation")) << c.summary();
  }
}

TEST(GemmTcGen, MalformedCasesGetOneLineErrors) {
  const Case good = generate_case(spec(), GenPlan{3, GenConfig{64}}, 0);
  ASSERT_TRUE(spec().validate(good).ok());
  auto expect_error = [&](Case c, const std::string& needle) {
    const Status s = spec().validate(c);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
  };
  Case c = good;
  c.params["dtype"] = "fp32";
  expect_error(c, "params.dtype");
  c = good;
  c.params["out_dtype"] = "int8";
  expect_error(c, "params.out_dtype");
  c = good;
  c.params["m"] = -1;
  expect_error(c, "params.m");
  c = good;
  c.params["alpha"] = "two";
  expect_error(c, "params.alpha");
  c = good;
  c.params["relation"] = "transpose";
  c.params.erase("shift");
  c.params["m"] = 3, c.params["n"] = 4, c.params["k"] = 3;
  expect_error(c, "m == n == k");
  c = good;
  c.params["trans_a"] = 1;
  expect_error(c, "params.trans_a");
  c = good;
  c.params["relation"] = "shift";
  expect_error(c, "params.relation");
  c = good;
  c.tensors.pop_back();
  expect_error(c, "tensors, expected 4");
  c = good;
  c.tensors[3].desc.shape[0] += 1;
  expect_error(c, "tensor D");
}

// ---- relations on the host: transform + reference + relate ----------------------------------------------

/// The engine's host side for one case: materialise, prepare, optionally transform, reference.
test_util::ModelHostRun host_run(const Case& c, bool transformed, const Contract& k = Contract()) {
  return model_host_run(model_op("gemm_tc"), c, k, transformed);
}

/// A case from params with the same recipe for every input and the same pad and offset for
/// every tensor.
Case make_case(const nlohmann::json& p, const ValueRecipe& r, int64_t pad, int64_t off) {
  auto c = build_case(model_op("gemm_tc"), p, {r, r, r, r}, std::vector<Layout>(4, Layout{pad, off}));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

Case relation_case(const std::string& rel, int64_t m, int64_t n, int64_t k, bool ta, bool tb, DType out) {
  nlohmann::json p = {{"m", m},         {"n", n},   {"k", k},       {"trans_a", ta},
                      {"trans_b", tb},  {"dtype", "bf16"}, {"out_dtype", std::string(dtype_name(out))},
                      {"alpha", 1.5},   {"beta", -0.5},    {"relation", rel}, {"shift", 3}};
  if (rel != "permute_rows") p.erase("shift");
  ValueRecipe r;
  r.cls = ValueClass::kNormal;
  r.seed = 42;
  return make_case(p, r, 3, 1);
}

TEST(GemmTcRelations, TransformsMoveTheReferenceAsRelateSays) {
  const OpDef& def = model_op("gemm_tc");
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const std::string rel : {"permute_rows", "alpha2", "transpose"}) {
        const int64_t m = rel == "transpose" ? 13 : 13, n = rel == "transpose" ? 13 : 7, k = rel == "transpose" ? 13 : 19;
        const Case c = relation_case(rel, m, n, k, ta, tb, DType::kF32);
        ASSERT_TRUE(spec().validate(c).ok()) << spec().validate(c).message();
        const auto a = host_run(c, false), b = host_run(c, true);
        int64_t bad = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            RelatedElement e{i, j, 1};
            ASSERT_TRUE(def.relate(c)(0, i, j, e));
            const double want = e.scale * a.refs[0].ref[static_cast<size_t>(e.from_i * n + e.from_j)];
            bad += b.refs[0].ref[static_cast<size_t>(i * n + j)] != want;
          }
        EXPECT_EQ(bad, 0) << rel << " trans " << ta << tb;
        // The relation is not the identity (it would prove nothing).
        int64_t moved = 0;
        for (size_t l = 0; l < a.refs[0].ref.size(); ++l) moved += a.refs[0].ref[l] != b.refs[0].ref[l];
        EXPECT_GT(moved, 0) << rel;
      }
}

TEST(GemmTcRelations, GeneratedCasesGiveFiniteReferencesAndConsistentRelations) {
  // The testbed's host side on generated cases (every layout, k == 0, NaN prefill, relations):
  // one reference value and tolerance per element of D, no NaN tolerance, and for relation cases
  // the transformed reference equal to the related original one (the transforms are exact).
  const OpDef& def = model_op("gemm_tc");
  int related = 0;
  for (int64_t i = 0; i < 150; ++i) {
    const Case c = generate_case(spec(), GenPlan{17, GenConfig{96}}, i);
    const int64_t m = c.params["m"], n = c.params["n"];
    const auto a = host_run(c, false);
    ASSERT_EQ(a.refs.size(), 1u);
    ASSERT_EQ(a.refs[0].ref.size(), static_cast<size_t>(m * n)) << c.summary();
    for (size_t l = 0; l < a.refs[0].tol.size(); ++l) {
      ASSERT_FALSE(std::isnan(a.refs[0].tol[l])) << c.summary();
      ASSERT_GE(a.refs[0].tol[l], 0.0) << c.summary();
      if (std::isfinite(a.refs[0].tol[l])) {
        ASSERT_TRUE(std::isfinite(a.refs[0].ref[l])) << c.summary();
      }
    }
    if (!c.params.contains("relation")) continue;
    const auto b = host_run(c, true);
    ++related;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        RelatedElement e{r, j, 1};
        ASSERT_TRUE(def.relate(c)(0, r, j, e));
        const double want = e.scale * a.refs[0].ref[static_cast<size_t>(e.from_i * n + e.from_j)];
        const double got = b.refs[0].ref[static_cast<size_t>(r * n + j)];
        if (std::isfinite(want)) {
          ASSERT_EQ(got, want) << c.summary() << " element " << r << "," << j;
        }
      }
  }
  EXPECT_GT(related, 10);
}

TEST(GemmTcRelations, PrepareWritesTheScalarsAndKZeroIsBetaC) {
  nlohmann::json p = {{"m", 5},          {"n", 4},       {"k", 0},       {"trans_a", false}, {"trans_b", true},
                      {"dtype", "fp16"}, {"out_dtype", "fp16"}, {"alpha", 2.0}, {"beta", -1.0}};
  ValueRecipe r;
  r.cls = ValueClass::kNormal;
  const Case c = make_case(p, r, 1, 2);
  ASSERT_TRUE(spec().validate(c).ok()) << spec().validate(c).message();
  EXPECT_TRUE(gemm_tc::exact_tier_case(c));
  const auto h = host_run(c, false);
  const auto& ds = c.tensors[2].desc;
  EXPECT_EQ(load_as_double(DType::kF32, h.images[2].data() + 4 * ds.offset), 2.0);
  EXPECT_EQ(load_as_double(DType::kF32, h.images[2].data() + 4 * (ds.offset + 1)), -1.0);
  const auto& dd = c.tensors[3].desc;
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      const double cv = load_as_double(DType::kF16, h.images[3].data() + 2 * (dd.offset + i * dd.strides[0] + j));
      EXPECT_EQ(h.refs[0].ref[static_cast<size_t>(i * 4 + j)], -cv);
    }
  EXPECT_TRUE(h.refs[0].exact);
}

TEST(GemmTcRelations, BetaZeroPoisonsCUnlessTheVariantReadsIt) {
  // The BLAS convention: with beta == 0, C must not be read. Without the convention declared, C
  // holds NaN (which must not reach D); a variant declaring reads_c_when_beta0 gets finite C.
  nlohmann::json p = {{"m", 6},          {"n", 5},              {"k", 7},       {"trans_a", true}, {"trans_b", false},
                      {"dtype", "bf16"}, {"out_dtype", "fp16"}, {"alpha", 1.0}, {"beta", 0.0}};
  ValueRecipe r;
  r.cls = ValueClass::kNormal;
  const Case c = make_case(p, r, 2, 1);
  ASSERT_TRUE(spec().validate(c).ok()) << spec().validate(c).message();
  EXPECT_TRUE(model_op("gemm_tc").conventions.count("reads_c_when_beta0"));
  const auto plain = host_run(c, false);
  const auto reads = host_run(c, false, Contract().reads_c_when_beta0());
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_TRUE(std::isnan(plain.hv[3].at(i, j))) << i << "," << j;
      EXPECT_TRUE(std::isfinite(reads.hv[3].at(i, j))) << i << "," << j;
      const size_t l = static_cast<size_t>(i * 5 + j);
      EXPECT_TRUE(std::isfinite(plain.refs[0].ref[l]));
      EXPECT_EQ(plain.refs[0].ref[l], reads.refs[0].ref[l]);  // D does not depend on C
    }
  // beta != 0: C is read, finite either way.
  p["beta"] = 0.5;
  const auto read = host_run(make_case(p, r, 2, 1), false);
  EXPECT_TRUE(std::isfinite(read.hv[3].at(0, 0)));
}

// ---- the ceiling against simulated accumulations --------------------------------------------------------

/// x truncated (toward zero) to a multiple of 2^e.
double trunc_to(double x, int e) {
  return std::trunc(std::ldexp(x, -e)) * std::ldexp(1.0, e);
}

/// One dot product as a tensor core of block size `b` computes it [FHMP]: per block, the exact
/// products and the accumulator aligned to the largest exponent and truncated to 24 bits below it,
/// summed exactly, the sum truncated to 24 significant bits. `acc_round` (kF16 / kBF16): the
/// accumulator is rounded to that type every `every` products (a planted narrow accumulator).
float tc_dot(const std::vector<double>& a, const std::vector<double>& b, int64_t b_size, DType acc_round = DType::kF32,
             int64_t every = 32) {
  double acc = 0;
  const int64_t k = static_cast<int64_t>(a.size());
  for (int64_t p0 = 0; p0 < k; p0 += b_size) {
    std::vector<double> terms = {acc};
    for (int64_t p = p0; p < std::min(k, p0 + b_size); ++p) terms.push_back(a[static_cast<size_t>(p)] * b[static_cast<size_t>(p)]);
    double big = 0;
    for (double t : terms) big = std::max(big, std::fabs(t));
    double s = 0;
    if (big > 0) {
      const int e = std::ilogb(big) - 23;
      for (double t : terms) s += trunc_to(t, e);  // exact: b+1 terms on one 2^e grid, < 2^53
      if (s != 0) s = trunc_to(s, std::ilogb(s) - 23);
    }
    acc = s;
    if (acc_round != DType::kF32 && (p0 + b_size) % every == 0) acc = round_to(acc_round, static_cast<float>(acc));
  }
  if (acc_round != DType::kF32) acc = round_to(acc_round, static_cast<float>(acc));
  return static_cast<float>(acc);
}

/// fp32 FMA loop in the given order of k.
float fma_dot(const std::vector<double>& a, const std::vector<double>& b, bool reversed) {
  float acc = 0;
  const size_t k = a.size();
  for (size_t q = 0; q < k; ++q) {
    const size_t p = reversed ? k - 1 - q : q;
    acc = std::fma(static_cast<float>(a[p]), static_cast<float>(b[p]), acc);
  }
  return acc;
}

enum class TcCls { kNormal, kSameSign, kNearOverflowF16, kSubnormalF16, kCancel, kSmallInt };

/// m x k row-major A and k x n row-major B, values of `dt` in class `cls`.
std::vector<double> draw(int64_t n, DType dt, TcCls cls, std::mt19937_64& rng) {
  std::normal_distribution<double> nd(0, 1);
  std::uniform_real_distribution<double> ud(0, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    double x = 0;
    switch (cls) {
      case TcCls::kNormal:
        x = nd(rng);
        break;
      case TcCls::kSameSign:
        x = ud(rng);
        break;
      case TcCls::kNearOverflowF16:
        x = (ud(rng) < 0.5 ? -1 : 1) * std::ldexp(1.0 + ud(rng), 11 + static_cast<int>(ud(rng) * 3.99));  // < 2^15
        break;
      case TcCls::kSubnormalF16:
        x = (ud(rng) < 0.5 ? -1 : 1) * std::ldexp(std::floor(1 + ud(rng) * 1022), -24);
        break;
      case TcCls::kCancel:  // 1 + small spread, signs alternating: sums cancel to a fraction of mag
        x = (i % 2 == 0 ? 1 : -1) * (1 + 0.01 * nd(rng));
        break;
      case TcCls::kSmallInt:
        x = std::floor(ud(rng) * 5) - 2;
        break;
    }
    v[i] = round_to(dt, static_cast<float>(x));
  }
  return v;
}

struct SimResult {
  int64_t bad = 0, checked = 0;
  double worst = 0;  // max |err| / tol
};

/// m x n x k problem of class `cls`: every element of `kernel(row, col)` (an fp32 value before
/// the output rounding) against gemm_tc_reference.
template <class Kernel>
SimResult simulate(DType in, DType out, TcCls cls, int64_t m, int64_t n, int64_t k, double alpha, double beta,
                   Kernel kernel, bool exact = false) {
  std::mt19937_64 rng(static_cast<uint64_t>(cls) * 1000 + static_cast<uint64_t>(k));
  const auto a = draw(m * k, in, cls, rng), b = draw(k * n, in, cls, rng);
  const auto c = draw(m * n, out, cls == TcCls::kNearOverflowF16 ? TcCls::kNormal : cls, rng);
  TcProblem p;
  p.m = m, p.n = n, p.k = k, p.in = in, p.out = out, p.alpha = alpha, p.beta = beta;
  p.a = a.data(), p.lda = k, p.b = b.data(), p.ldb = n, p.c = c.data(), p.ldc = n;
  const OutputRef r = gemm_tc::gemm_tc_expected(p, exact);
  SimResult s;
  std::vector<double> row(static_cast<size_t>(k)), col(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t q = 0; q < k; ++q) {
        row[static_cast<size_t>(q)] = a[static_cast<size_t>(i * k + q)];
        col[static_cast<size_t>(q)] = b[static_cast<size_t>(q * n + j)];
      }
      const float acc = kernel(row, col);
      float d = static_cast<float>(alpha) * acc;
      if (beta != 0) d = std::fma(static_cast<float>(beta), static_cast<float>(c[static_cast<size_t>(i * n + j)]), d);
      const double got = round_to(out, d);
      const size_t l = static_cast<size_t>(i * n + j);
      if (std::isinf(r.tol[l])) continue;
      ++s.checked;
      const double err = std::fabs(got - r.ref[l]);
      if (exact ? got != r.ref[l] : !(err <= r.tol[l])) ++s.bad;
      if (r.tol[l] > 0) s.worst = std::max(s.worst, err / r.tol[l]);
    }
  return s;
}

const TcCls kAllClasses[] = {TcCls::kNormal, TcCls::kSameSign, TcCls::kNearOverflowF16, TcCls::kSubnormalF16, TcCls::kCancel};

TEST(GemmTcBound, HoldsForTruncatingBlocksAndFmaLoopsAcrossValueClasses) {
  for (DType in : {DType::kF16, DType::kBF16})
    for (DType out : {DType::kF32, DType::kF16, DType::kBF16})
      for (TcCls cls : kAllClasses)
        for (int64_t k : {1, 7, 64, 255, 1024}) {
          for (int64_t blk : {1, 4, 8, 16}) {
            const SimResult s = simulate(in, out, cls, 3, 4, k, 1.5, cls == TcCls::kCancel ? 0.0 : -0.75,
                                         [blk](const auto& x, const auto& y) { return tc_dot(x, y, blk); });
            EXPECT_EQ(s.bad, 0) << "block " << blk << " " << dtype_name(in) << "->" << dtype_name(out) << " class "
                                << static_cast<int>(cls) << " k " << k << " worst " << s.worst;
          }
          for (bool rev : {false, true}) {
            const SimResult s = simulate(in, out, cls, 3, 4, k, 1.0, 0.5,
                                         [rev](const auto& x, const auto& y) { return fma_dot(x, y, rev); });
            EXPECT_EQ(s.bad, 0) << "fma " << dtype_name(in) << " class " << static_cast<int>(cls) << " k " << k;
          }
        }
}

TEST(GemmTcBound, SameSignTruncationUsesAMeasurableShareOfTheCeiling) {
  // Truncation is biased: same-sign data at large k lose on every block. The ceiling must not be
  // so loose that the simulated hardware stays below a thousandth of it (it would then hide an
  // accumulator bug of the same size).
  const SimResult s = simulate(DType::kBF16, DType::kF32, TcCls::kSameSign, 2, 2, 4096, 1.0, 0.0,
                               [](const auto& x, const auto& y) { return tc_dot(x, y, 8); });
  EXPECT_EQ(s.bad, 0);
  EXPECT_GT(s.worst, 1e-3);
  EXPECT_LT(s.worst, 1.0);
  std::printf("[ measured ] bf16 same-sign k=4096, block 8: max error / ceiling %.3g\n", s.worst);
}

TEST(GemmTcBound, RejectsFp16AndBf16Accumulators) {
  // Normal data at k = 64 and same-sign data: partial sums of the size of mag, rounded to 8 (bf16)
  // or 11 (fp16) bits. (Cancelling data keep the partial sums small: a narrow accumulator may
  // hide there, which is why the generator mixes classes.)
  struct Setup {
    TcCls cls;
    int64_t k;
  };
  for (DType in : {DType::kF16, DType::kBF16})
    for (Setup su : {Setup{TcCls::kNormal, 64}, Setup{TcCls::kSameSign, 64}, Setup{TcCls::kSameSign, 256}}) {
      const SimResult bf = simulate(in, DType::kF32, su.cls, 4, 4, su.k, 1.0, 0.0, [](const auto& x, const auto& y) {
        return tc_dot(x, y, 8, DType::kBF16, 32);
      });
      EXPECT_GT(bf.bad, 0) << "bf16 accumulator undetected: " << dtype_name(in) << " class "
                           << static_cast<int>(su.cls) << " k " << su.k << " worst " << bf.worst;
      const SimResult h = simulate(in, DType::kF32, su.cls, 4, 4, su.k, 1.0, 0.0, [](const auto& x, const auto& y) {
        return tc_dot(x, y, 8, DType::kF16, 8);
      });
      EXPECT_GT(h.bad, 0) << "fp16 accumulator undetected: " << dtype_name(in) << " class "
                          << static_cast<int>(su.cls) << " k " << su.k << " worst " << h.worst;
    }
}

TEST(GemmTcBound, ExactTierIsBitIdenticalUnderTruncation) {
  for (DType in : {DType::kF16, DType::kBF16})
    for (DType out : {DType::kF32, DType::kF16})
      for (int64_t blk : {1, 8, 16}) {
        const SimResult s = simulate(in, out, TcCls::kSmallInt, 5, 6, 100, 2.0, -1.0,
                                     [blk](const auto& x, const auto& y) { return tc_dot(x, y, blk); }, true);
        EXPECT_EQ(s.bad, 0) << dtype_name(in) << "->" << dtype_name(out) << " block " << blk;
        EXPECT_EQ(s.checked, 30);
      }
  // Small-integer cases are exact only while every partial sum fits the output's significand.
  nlohmann::json p = {{"m", 4},          {"n", 4},       {"k", 64},      {"trans_a", false}, {"trans_b", false},
                      {"dtype", "fp16"}, {"out_dtype", "fp32"}, {"alpha", 1.0}, {"beta", 1.0}};
  ValueRecipe r;
  r.cls = ValueClass::kSmallInt;
  r.int_range = 2;
  EXPECT_TRUE(gemm_tc::exact_tier_case(make_case(p, r, 0, 0)));
  p["out_dtype"] = "bf16";  // 64 * 4 = 256 > 2^8
  EXPECT_FALSE(gemm_tc::exact_tier_case(make_case(p, r, 0, 0)));
  p["out_dtype"] = "fp32";
  p["alpha"] = 0.5;
  EXPECT_FALSE(gemm_tc::exact_tier_case(make_case(p, r, 0, 0)));
}

TEST(GemmTcBound, OverflowingElementsAreUnchecked) {
  // bf16 near its top: products overflow fp32; the reference is finite in double, the kernel's
  // Inf / NaN is not a failure there (tol = +Inf), while ordinary elements stay checked.
  const double big = round_to(DType::kBF16, 1e38f);
  std::vector<double> a = {big, 1}, b = {big, 1};
  TcProblem p;
  p.m = 1, p.n = 1, p.k = 2, p.in = DType::kBF16, p.out = DType::kF32;
  p.a = a.data(), p.lda = 2, p.b = b.data(), p.ldb = 1;
  EXPECT_TRUE(std::isinf(gemm_tc::gemm_tc_expected(p, false).tol[0]));
  a = {1, 1}, b = {1, 1};
  EXPECT_TRUE(std::isfinite(gemm_tc::gemm_tc_expected(p, false).tol[0]));
  p.out = DType::kF16;
  a = {256, 256}, b = {256, 1};  // 65792 > fp16 max
  EXPECT_TRUE(std::isinf(gemm_tc::gemm_tc_expected(p, false).tol[0]));
}

// alpha applied to an operand before the products (cuBLAS and cuBLASLt, measured: NaN = (1.5 a) * 0
// with a near FLT_MAX and B all zeros, where the exact result is 0): where |alpha| times an
// operand element an output reads reaches FLT_MAX the element is unchecked, in gemm and gemm_tc;
// with |alpha| <= 1, or operands far from overflow, it stays checked.
TEST(GemmBound, AnOperandThatAlphaScalesPastFltMaxLeavesItsElementsUnchecked) {
  ValueRecipe big, zero, normal;
  big.cls = ValueClass::kNearOverflow;
  big.overflow_factor = 1.2;  // every |a| >= max / 1.2: 1.5 |a| > FLT_MAX (bf16's max is 3.39e38)
  zero.cls = ValueClass::kSignedZero;
  normal.cls = ValueClass::kNormal;
  big.seed = 7, zero.seed = 8, normal.seed = 9;
  auto run = [&](const std::string& op, double alpha, const ValueRecipe& a, const ValueRecipe& b) {
    nlohmann::json p = {{"m", 3}, {"n", 4}, {"k", 5}, {"trans_a", true}, {"trans_b", false}, {"alpha", alpha},
                        {"beta", 0.0}};
    std::vector<ValueRecipe> r = {a, b, normal};
    if (op == "gemm_tc") p["dtype"] = "bf16", p["out_dtype"] = "fp32", r.push_back(normal);
    auto c = build_case(model_op(op), p, r, std::vector<Layout>(r.size(), Layout{1, 2}));  // one per tensor
    EXPECT_TRUE(c.ok()) << c.status().message();
    const auto h = model_host_run(model_op(op), *c);
    int64_t unchecked = 0;
    for (double t : h.refs[0].tol) unchecked += std::isinf(t) ? 1 : 0;
    return std::pair<int64_t, size_t>{unchecked, h.refs[0].tol.size()};
  };
  for (const char* op : {"gemm", "gemm_tc"}) {
    const auto a_big = run(op, 1.5, big, zero), b_big = run(op, -2.0, zero, big);
    EXPECT_EQ(a_big.first, static_cast<int64_t>(a_big.second)) << op << ": alpha 1.5, A near overflow, B zero";
    EXPECT_EQ(b_big.first, static_cast<int64_t>(b_big.second)) << op << ": alpha -2, B near overflow, A zero";
    EXPECT_EQ(run(op, 1.0, big, zero).first, 0) << op << ": alpha 1 scales nothing past FLT_MAX";
    EXPECT_EQ(run(op, 1.5, normal, normal).first, 0) << op << ": operands far from overflow";
  }
}

// The same order on a subnormal A and a near-overflow B (measured on cuBLAS: alpha = 1.5, its
// result 2e-7 off where the ceiling without the subnormal grid was 2e-11): gemm's C emulated as
// sum_q fl(fl(alpha a) b) in fp32 stays inside the ceiling.
TEST(GemmBound, AlphaScaledSubnormalOperandStaysInsideTheCeiling) {
  ValueRecipe sub, big, normal;
  sub.cls = ValueClass::kSubnormal, sub.seed = 11;
  big.cls = ValueClass::kNearOverflow, big.seed = 12, big.overflow_factor = 16;
  normal.cls = ValueClass::kNormal, normal.seed = 13;
  int64_t elements = 0;
  for (double alpha : {1.5, 0.5, -0.75}) {
    const nlohmann::json p = {{"m", 4}, {"n", 5}, {"k", 3}, {"trans_a", false}, {"trans_b", true}, {"alpha", alpha},
                              {"beta", 0.0}};
    auto c = build_case(model_op("gemm"), p, {sub, big, normal}, std::vector<Layout>(3, Layout{1, 2}));
    ASSERT_TRUE(c.ok()) << c.status().message();
    const auto h = model_host_run(model_op("gemm"), *c);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        float acc = 0;
        for (int64_t q = 0; q < 3; ++q) {
          const float sa = static_cast<float>(alpha) * static_cast<float>(gemm_common::op_at(h.hv[0], false, i, q));
          acc = std::fma(sa, static_cast<float>(gemm_common::op_at(h.hv[1], true, q, j)), acc);
        }
        const size_t l = static_cast<size_t>(i * 5 + j);
        const double ref = h.refs[0].ref[l], tol = h.refs[0].tol[l];
        if (std::isinf(tol)) continue;
        ++elements;
        EXPECT_LE(std::fabs(acc - ref), tol) << "alpha " << alpha << " C[" << i << "][" << j << "]";
      }
  }
  EXPECT_GT(elements, 30);
}

TEST(GemmTcBound, DeclaredProductToOutputOrderIsBounded) {
  // A kernel that rounds alpha*acc to its bf16/fp16 output before adding beta*C (the cuBLAS
  // order) declares Contract().narrow_intermediates(); emulated here on cancelling and random
  // cases, its outputs stay within the ceiling with that declaration and leave the plain one.
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd;
  for (DType out : {DType::kBF16, DType::kF16}) {
    int64_t plain_fail = 0, declared_fail = 0, n = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const int64_t m = 3, nn = 5, k = 1 + trial % 24;
      std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * nn)), c(static_cast<size_t>(m * nn));
      for (auto& x : a) x = round_to(DType::kF16, static_cast<float>(nd(rng)));
      for (auto& x : b) x = round_to(DType::kF16, static_cast<float>(nd(rng)));
      const double alpha = 1, beta = trial % 2 == 0 ? 1.0 : -0.5;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < nn; ++j) {
          double dot = 0;
          for (int64_t q = 0; q < k; ++q) dot += a[static_cast<size_t>(i * k + q)] * b[static_cast<size_t>(q * nn + j)];
          // Half the elements cancel: beta c close to -alpha dot.
          const double cx = (i + j) % 2 == 0 ? -alpha * dot / beta * (1 + 0.01 * nd(rng)) : nd(rng);
          c[static_cast<size_t>(i * nn + j)] = round_to(out, static_cast<float>(cx));
        }
      TcProblem p;
      p.m = m, p.n = nn, p.k = k, p.in = DType::kF16, p.out = out, p.alpha = alpha, p.beta = beta;
      p.a = a.data(), p.lda = k, p.b = b.data(), p.ldb = nn, p.c = c.data(), p.ldc = nn;
      const OutputRef plain = gemm_tc::gemm_tc_expected(p, false);
      p.product_to_out = true;
      const OutputRef declared = gemm_tc::gemm_tc_expected(p, false);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < nn; ++j) {
          float acc = 0;
          for (int64_t q = 0; q < k; ++q)
            acc = std::fma(static_cast<float>(a[static_cast<size_t>(i * k + q)]),
                           static_cast<float>(b[static_cast<size_t>(q * nn + j)]), acc);
          const float t = round_to(out, static_cast<float>(alpha) * acc);
          const double got = round_to(out, t + static_cast<float>(beta) * static_cast<float>(c[static_cast<size_t>(i * nn + j)]));
          const size_t l = static_cast<size_t>(i * nn + j);
          const double err = std::fabs(got - declared.ref[l]);
          plain_fail += err > plain.tol[l];
          declared_fail += err > declared.tol[l];
          ++n;
        }
    }
    std::printf("[ measured ] gemm_tc %s out, product rounded before beta*C: %lld of %lld elements beyond the "
                "plain ceiling, %lld beyond the declared one\n",
                std::string(dtype_name(out)).c_str(), static_cast<long long>(plain_fail), static_cast<long long>(n),
                static_cast<long long>(declared_fail));
    EXPECT_GT(plain_fail, 0);
    EXPECT_EQ(declared_fail, 0);
  }
}

TEST(GemmTcRegistry, KernelsAndMutantsAreRegistered) {
  std::set<std::string> names, mutants;
  for (const auto& v : spec().variants()) {
    names.insert(v.name);
    if (v.mutant) mutants.insert(v.name);
  }
  for (const char* n : {"wmma", "mma", "mutant_tc_mma_bf16_acc", "mutant_tc_wmma_f16_acc", "mutant_tc_mma_no_wait",
                        "mutant_tc_mma_ldmatrix_row", "mutant_tc_mma_k_tail", "mutant_tc_wmma_k_tail",
                        "mutant_tc_wmma_missing_sync", "mutant_tc_mma_beta0_reads_c"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(mutants.size(), 8u);
  EXPECT_EQ(mutants.count("mma"), 0u);
  ASSERT_NE(find_variant("gemm_tc", "mma"), nullptr);
  EXPECT_TRUE(find_variant("gemm_tc", "mma")->contract.empty());  // every case, every layout
  kernels::GemmTcArgs bad;
  bad.m = 4, bad.n = 4, bad.k = 4, bad.lda = 3;  // lda < k
  EXPECT_FALSE(kernels::gemm_tc_args_valid(bad));
  kernels::GemmTcArgs empty;  // m = n = k = 0 is a valid no-op
  empty.lda = empty.ldb = empty.ldd = 1;
  EXPECT_TRUE(kernels::gemm_tc_args_valid(empty));
}

}  // namespace
}  // namespace assay
