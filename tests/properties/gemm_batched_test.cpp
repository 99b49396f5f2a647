// CPU tests of the batched GEMM spec (properties/gemm_batched.cpp): the generator covers its
// edges and round-trips, malformed cases get one-line errors, the reference is per entry (with A
// broadcast), the BLAS beta = 0 convention poisons C, and the relations move whole entries (or
// transpose them) and map them back exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "harness/campaign.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "properties/gemm_batched.h"
#include "tests/properties/model_host.h"

namespace assay {
namespace {

using test_util::model_host_run;
using test_util::model_op;

TEST(GemmBatchedGen, CasesValidateCoverTheEdgesAndRoundTrip) {
  const OpSpec* spec = find_spec("gemm_batched");
  ASSERT_NE(spec, nullptr);
  const GenPlan plan{11, GenConfig{2048}};
  bool k0 = false, broadcast = false, exact = false, specials = false, odd_batch = false, tail = false,
       padded = false, offset = false, ta = false, tb = false, beta0 = false;
  std::set<std::string> relations;
  for (int64_t i = 0; i < 400; ++i) {
    const Case c = generate_case(*spec, plan, i);
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary() << ": " << spec->validate(c).message();
    const auto& p = c.params;
    k0 |= p["k"].get<int64_t>() == 0;
    broadcast |= p["broadcast_a"].get<bool>() && p["batch"].get<int64_t>() > 1;
    if (p.contains("relation")) relations.insert(p["relation"].get<std::string>());
    exact |= c.tensors[0].values.cls == ValueClass::kSmallInt && c.tensors[1].values.cls == ValueClass::kSmallInt &&
             c.tensors[2].values.cls == ValueClass::kSmallInt;
    for (const auto& t : c.tensors) {
      specials |= t.values.inject.active();
      padded |= t.desc.strides[1] > std::max<int64_t>(t.desc.shape[2], 1);
      offset |= t.desc.offset != 0;
    }
    odd_batch |= p["batch"].get<int64_t>() % 2 == 1 && p["batch"].get<int64_t>() > 1;
    tail |= p["m"].get<int64_t>() % 32 != 0 && p["m"].get<int64_t>() > 32;
    ta |= p["trans_a"].get<bool>(), tb |= p["trans_b"].get<bool>();
    beta0 |= p["beta"].get<double>() == 0;
    EXPECT_NE(p["alpha"].get<double>(), 0.0);
    EXPECT_LE(p["batch"].get<int64_t>() * p["m"].get<int64_t>() * p["n"].get<int64_t>() *
                  std::max<int64_t>(p["k"].get<int64_t>(), 1),
              int64_t{1} << 22);
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->id(), c.id());
    if (i < 20) {
      for (const Case& s : spec->shrink(c)) EXPECT_TRUE(spec->validate(s).ok()) << s.summary();
    }
  }
  EXPECT_EQ(relations, (std::set<std::string>{"permute_batches", "scale2", "transpose"}));
  EXPECT_TRUE(k0 && broadcast && exact && specials && odd_batch && tail && padded && offset && ta && tb && beta0);
}

/// A 2x3x4 case (B transposed) of `batch` small-integer entries, every tensor padded by 2 and
/// offset by 1.
Case small_case(bool broadcast, int64_t batch, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json p;
  p["m"] = 2, p["n"] = 3, p["k"] = 4, p["batch"] = batch, p["trans_a"] = false, p["trans_b"] = true;
  p["broadcast_a"] = broadcast, p["alpha"] = 2.0, p["beta"] = 1.0;
  p.update(extra);
  ValueRecipe r;
  r.cls = ValueClass::kSmallInt;
  auto c = build_case(model_op("gemm_batched"), p, {r, r, r}, std::vector<Layout>(3, Layout{2, 1}));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

TEST(GemmBatchedGen, MalformedCasesGetOneLineErrors) {
  const OpSpec* spec = find_spec("gemm_batched");
  ASSERT_NE(spec, nullptr);
  Case c = small_case(false, 3);
  ASSERT_TRUE(spec->validate(c).ok()) << spec->validate(c).message();
  auto expect_error = [&](const Case& x, const std::string& needle) {
    const Status s = spec->validate(x);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  };
  Case bad = c;
  bad.params["alpha"] = 0.0;
  expect_error(bad, "params.alpha");
  bad = c;
  bad.params["batch"] = 4;  // tensors still for 3
  expect_error(bad, "tensor A");
  bad = c;
  bad.params["relation"] = "bogus";
  expect_error(bad, "params.relation");
  bad = c;
  bad.params["trans_a"] = 1;  // a number, not a flag
  expect_error(bad, "params.trans_a must be true or false");
  bad = c;
  bad.params["relation"] = "transpose";
  expect_error(bad, "m == n == k");
  bad = c;
  bad.params["pad_in"] = 1;  // the inner padding is each tensor's own row stride now
  expect_error(bad, "unknown param 'pad_in'");
}

TEST(GemmBatchedRef, EachEntryIsItsOwnGemmAndBroadcastSharesA) {
  for (bool broadcast : {false, true}) {
    const Case c = small_case(broadcast, 3);
    const auto h = model_host_run(model_op("gemm_batched"), c);
    ASSERT_EQ(h.refs.size(), 1u);
    EXPECT_TRUE(h.refs[0].exact);
    for (int64_t z = 0; z < 3; ++z)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < 4; ++q)  // A [batch, 2, 4]; B stored [batch, 3, 4] (transposed)
            acc += h.hv[0].at((broadcast ? 0 : z) * 2 + i, q) * h.hv[1].at(z * 3 + j, q);
          const double want = 2 * acc + h.hv[2].at(z * 2 + i, j);
          EXPECT_EQ(h.refs[0].ref[static_cast<size_t>(z * 6 + i * 3 + j)], want);
        }
  }
}

// alpha applied to an operand before the products (cuBLAS's order, see gemm's GemmBound tests):
// fl(alpha a) rounds on the subnormal grid, half a spacing per product. gemm widens its ceiling
// for it; gemm_batched's value classes (|x| <= 2^10) keep that error under the flush-to-zero
// floor, so each entry, emulated as sum_q fl(fl(alpha a) b) in fp32 with subnormal A, the
// widest B and the smallest |alpha| of the op's params, stays inside the plain ceiling.
TEST(GemmBatchedBound, AlphaScaledSubnormalOperandStaysInsideTheCeiling) {
  ValueRecipe sub, wide, normal;
  sub.cls = ValueClass::kSubnormal, sub.seed = 21;
  wide.cls = ValueClass::kLogUniform, wide.seed = 22, wide.exp_min = 7, wide.exp_max = 8;
  normal.cls = ValueClass::kNormal, normal.seed = 23;
  const int64_t m = 4, n = 5, k = 96, batch = 3;
  int64_t elements = 0;
  double worst = 0;
  for (bool broadcast : {false, true})
    for (double alpha : {0.5, 1.5, -0.75}) {
      nlohmann::json p;
      p["m"] = m, p["n"] = n, p["k"] = k, p["batch"] = batch, p["trans_a"] = true, p["trans_b"] = false;
      p["broadcast_a"] = broadcast, p["alpha"] = alpha, p["beta"] = 0.0;
      auto c = build_case(model_op("gemm_batched"), p, {sub, wide, normal}, std::vector<Layout>(3, Layout{1, 2}));
      ASSERT_TRUE(c.ok()) << c.status().message();
      const auto h = model_host_run(model_op("gemm_batched"), *c);
      for (int64_t z = 0; z < batch; ++z)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            float acc = 0;
            for (int64_t q = 0; q < k; ++q) {  // A stored [batch, k, m] (transposed), B [batch, k, n]
              const float a = static_cast<float>(h.hv[0].at((broadcast ? 0 : z) * k + q, i));
              acc = std::fma(static_cast<float>(alpha) * a, static_cast<float>(h.hv[1].at(z * k + q, j)), acc);
            }
            const size_t l = static_cast<size_t>(z * m * n + i * n + j);
            const double ref = h.refs[0].ref[l], tol = h.refs[0].tol[l], err = std::fabs(acc - ref);
            ++elements;
            worst = std::max(worst, err / tol);
            EXPECT_LE(err, tol) << "alpha " << alpha << (broadcast ? " broadcast" : "") << " C[" << z << "][" << i
                                << "][" << j << "]";
          }
    }
  EXPECT_EQ(elements, 2 * 3 * batch * m * n);
  EXPECT_GT(worst, 0) << "the emulated order never erred: the test shows nothing";
}

TEST(GemmBatchedRef, BetaZeroPoisonsCUnlessTheVariantReadsIt) {
  const Case c = small_case(false, 2, {{"beta", 0.0}});
  const auto plain = model_host_run(model_op("gemm_batched"), c);
  const auto reads = model_host_run(model_op("gemm_batched"), c, Contract().reads_c_when_beta0());
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_TRUE(std::isnan(plain.hv[2].at(i, j)));
      EXPECT_TRUE(std::isfinite(reads.hv[2].at(i, j)));
      const size_t l = static_cast<size_t>(i * 3 + j);
      EXPECT_TRUE(std::isfinite(plain.refs[0].ref[l]));
      EXPECT_EQ(plain.refs[0].ref[l], reads.refs[0].ref[l]);
    }
}

/// The relation's transform on the case's images, then the reference of the transformed inputs
/// against relate's mapping of the original reference: equal, element for element (the
/// transforms are exact: moves, transposes and doublings of small integers).
void expect_relation_consistent(Case c, const std::string& relation) {
  c.params["relation"] = relation;
  const OpDef& def = model_op("gemm_batched");
  ASSERT_TRUE(find_spec("gemm_batched")->validate(c).ok()) << find_spec("gemm_batched")->validate(c).message();
  const auto a = model_host_run(def, c), b = model_host_run(def, c, Contract(), true);
  const int64_t rows = c.params["batch"].get<int64_t>() * c.params["m"].get<int64_t>(),
                cols = c.params["n"].get<int64_t>();
  std::set<std::pair<int64_t, int64_t>> sources;
  const RelateElement related = def.relate(c);
  int64_t moved = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      RelatedElement e;
      ASSERT_TRUE(related(0, i, j, e));
      sources.insert({e.from_i, e.from_j});
      moved += e.from_i != i || e.from_j != j || e.scale != 1;
      EXPECT_EQ(b.refs[0].ref[static_cast<size_t>(i * cols + j)],
                e.scale * a.refs[0].ref[static_cast<size_t>(e.from_i * cols + e.from_j)])
          << relation << " at " << i << "," << j;
    }
  EXPECT_EQ(static_cast<int64_t>(sources.size()), rows * cols) << relation << ": relate is a bijection";
  EXPECT_GT(moved, 0) << relation << " relates nothing but identities";
}

TEST(GemmBatchedRelation, TransformsAndRelateAgreeOnTheReference) {
  expect_relation_consistent(small_case(false, 5), "permute_batches");
  expect_relation_consistent(small_case(true, 3), "scale2");
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      expect_relation_consistent(small_case(false, 3, {{"n", 2}, {"k", 2}, {"trans_a", ta}, {"trans_b", tb}}),
                                 "transpose");
}

}  // namespace
}  // namespace assay
