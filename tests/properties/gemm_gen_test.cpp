// The gemm generator's reach (CPU): every value class, special-value
// injection, each layout knob and the exact tier appear within a bounded
// number of draws; stored cases rebuild without any generator; launchers
// reject invalid shapes with an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "harness/executor.h"
#include "harness/spec.h"
#include "properties/gemm.h"
#include "harness/values.h"
#include "kernels/gemm/gemm.h"

namespace assay {
namespace {

TEST(GemmGenerator, ReachesEveryClassLayoutAndSpecial) {
  const OpSpec& spec = *find_spec("gemm");
  const GenPlan plan{99, GenConfig{256}};
  std::set<ValueClass> classes;
  bool injected = false, padded = false, offset = false, ta = false, tb = false, exact = false, beta0 = false,
       k0 = false;
  for (int64_t i = 0; i < 3000; ++i) {
    const Case c = generate_case(spec, plan, i);
    ASSERT_TRUE(spec.validate(c).ok()) << c.summary();
    const GemmParams g = *parse_gemm_case(c);
    for (const auto& t : c.tensors) {
      classes.insert(t.values.cls);
      injected |= t.values.inject.active();
      padded |= t.desc.strides[0] > std::max<int64_t>(t.desc.shape[1], 1);
      offset |= t.desc.offset % 4 != 0;  // misaligned for 16-byte vector loads
    }
    ta |= g.trans_a;
    tb |= g.trans_b;
    beta0 |= g.beta == 0;
    k0 |= g.k == 0;
    exact |= c.find("A")->values.cls == ValueClass::kSmallInt && c.find("B")->values.cls == ValueClass::kSmallInt &&
             !c.find("A")->values.inject.active();
  }
  for (ValueClass v : {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign, ValueClass::kSmallInt,
                       ValueClass::kLogUniform, ValueClass::kPareto, ValueClass::kMeanSpread, ValueClass::kNearOverflow,
                       ValueClass::kSubnormal, ValueClass::kSignedZero, ValueClass::kOneHot, ValueClass::kPermutation})
    EXPECT_TRUE(classes.count(v)) << value_class_name(v) << " never drawn";
  EXPECT_TRUE(injected && padded && offset && ta && tb && exact && beta0 && k0);
}

TEST(StoredCase, RebuildsBitIdenticallyWithoutTheGenerator) {
  // tests/fixtures/gemm_case_v1.json was written by an earlier assay; its
  // inputs are pinned by hash. Nothing here calls a generator.
  std::ifstream in(std::string(ASSAY_SOURCE_DIR) + "/tests/fixtures/gemm_case_v1.json");
  ASSERT_TRUE(in);
  auto c = Case::from_json(nlohmann::json::parse(in), "gemm_case_v1.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& t : c->tensors) {
    std::vector<unsigned char> buf(static_cast<size_t>(t.desc.extent()) * dtype_size(t.desc.dtype));
    materialize(t.desc, t.values, fnv1a64(t.name.data(), t.name.size()), buf.data());
    h = fnv1a64(buf.data(), buf.size(), h);
  }
  EXPECT_EQ(h, 0x99ff9b5d2b592b0full) << std::hex << "actual 0x" << h;
}

TEST(GemmLaunchers, RejectInvalidShapesWithAnError) {
  // Validation happens before any launch, so this needs no GPU.
  kernels::GemmF32Args a;
  a.m = 4, a.n = 4, a.k = 8, a.lda = 7, a.ldb = 4, a.ldc = 4;  // lda < k
  EXPECT_EQ(kernels::gemm_f32_naive(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::gemm_f32_tiled(a, nullptr), cudaErrorInvalidValue);
  a.lda = 8;
  a.ldc = 3;  // ldc < n
  EXPECT_EQ(kernels::gemm_f32_tiled(a, nullptr), cudaErrorInvalidValue);
  a.ldc = 4;
  a.m = -1;
  EXPECT_EQ(kernels::gemm_f32_naive(a, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace assay

namespace assay {
namespace {

TEST(GemmBwdGenerator, CasesValidateAndShrinkTowardSmallOnes) {
  const OpSpec& spec = *find_spec("gemm_bwd");
  const GenPlan plan{3, GenConfig{96}};
  for (int64_t i = 0; i < 500; ++i) {
    const Case c = generate_case(spec, plan, i);
    ASSERT_TRUE(spec.validate(c).ok()) << spec.validate(c).to_string();
    for (const Case& s : spec.shrink(c)) ASSERT_TRUE(spec.validate(s).ok()) << s.summary();
  }
}

}  // namespace
}  // namespace assay

namespace assay {
namespace {

// The ladder and the metamorphic relations (CPU side): the generator draws
// every relation and k == 0 exact-tier cases; the shrinker keeps a case's
// relation; the permutation is a seeded pure function; the split-K plan keeps
// every chunk nonempty, which the order-free bound relies on.
TEST(GemmGenerator, DrawsEveryRelationAndKZeroExactCases) {
  const OpSpec& spec = *find_spec("gemm");
  const GenPlan plan{5, GenConfig{256}};
  std::map<std::string, int> relations;
  int none = 0, k0_exact = 0, k0 = 0;
  constexpr int kDraws = 2000;
  for (int64_t i = 0; i < kDraws; ++i) {
    const Case c = generate_case(spec, plan, i);
    auto g = parse_gemm_case(c);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    if (g->relation.empty())
      ++none;
    else
      ++relations[g->relation];
    if (g->k == 0) {
      ++k0;
      k0_exact += c.find("A")->values.cls == ValueClass::kSmallInt && g->alpha == std::round(g->alpha) &&
                  g->beta == std::round(g->beta) && g->beta != 0;
    }
  }
  for (const char* r : kGemmRelations) EXPECT_GT(relations[r], kDraws / 24) << r << " drawn too rarely";
  const int with = kDraws - none;
  EXPECT_GT(with, kDraws / 6) << "about a quarter of the cases should carry a relation";
  EXPECT_LT(with, kDraws / 3);
  EXPECT_GT(k0, kDraws / 100) << "k == 0 (C = beta*C) must be drawn";
  EXPECT_GT(k0_exact, 0) << "k == 0 with integer data and beta != 0: compared bit for bit";
}

TEST(GemmShrinker, KeepsTheRelationAndOffersToDropIt) {
  Case c = make_gemm_case(37, 45, 70, true, false, 1.5, 0.5, 1, 3, 4, 1, 2, 5, ValueClass::kNormal, 9);
  c.params["relation"] = "permute_rows";
  const OpSpec& spec = *find_spec("gemm");
  ASSERT_TRUE(spec.validate(c).ok());
  const auto cands = spec.shrink(c);
  ASSERT_GT(cands.size(), 2u);
  int dropped = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    ASSERT_TRUE(spec.validate(cands[i]).ok()) << cands[i].summary();
    const std::string rel = parse_gemm_case(cands[i])->relation;
    if (rel.empty()) {
      ++dropped;
      EXPECT_EQ(cands[i].params["m"], 37) << "dropping the relation changes nothing else";
    } else {
      EXPECT_EQ(rel, "permute_rows") << "candidate " << i;
    }
  }
  EXPECT_EQ(dropped, 1);
  auto m = spec.with_param(c, "m", 5);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(parse_gemm_case(*m)->relation, "permute_rows");
}

TEST(GemmCase, RejectsAnUnknownRelation) {
  Case c = make_gemm_case(4, 4, 4, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kNormal, 1);
  c.params["relation"] = "transpose_twice";
  const auto g = parse_gemm_case(c);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("params.relation"), std::string::npos) << g.status().message();
  c.params["relation"] = 3;
  EXPECT_FALSE(parse_gemm_case(c).ok());
  c.params["relation"] = "transpose";
  EXPECT_TRUE(parse_gemm_case(c).ok());
}

TEST(GemmRelation, PermutationIsASeededPureFunction) {
  for (int64_t m : {0, 1, 2, 7, 64, 1000}) {
    const auto p = gemm_relation_permutation(m, 42);
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < m; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i) << "not a permutation of " << m;
    EXPECT_EQ(p, gemm_relation_permutation(m, 42));
  }
  EXPECT_NE(gemm_relation_permutation(64, 1), gemm_relation_permutation(64, 2));
  // Pinned: a stored case must replay the same permutation on any platform
  // (SplitMix64 + Fisher-Yates, no std::shuffle, whose algorithm is unspecified).
  EXPECT_EQ(gemm_relation_permutation(8, 7), (std::vector<int64_t>{1, 5, 7, 4, 2, 6, 3, 0}));
}

TEST(GemmSplitK, PlanKeepsEveryChunkNonemptySoTheCeilingCoversIt) {
  for (int64_t k = 0; k <= 5000; ++k) {
    int64_t s = -1, chunk = -1;
    kernels::gemm_f32_splitk_plan(k, s, chunk);
    if (k == 0) {
      EXPECT_EQ(s, 0);
      continue;
    }
    ASSERT_GE(s, 1);
    ASSERT_LE(s, 8);
    ASSERT_EQ(chunk % 8, 0);
    ASSERT_GE(s * chunk, k) << "k = " << k << ": a term is never summed";
    ASSERT_LT((s - 1) * chunk, k) << "k = " << k << ": an empty chunk";
    // A term's rounding path: its chunk (<= chunk terms, at most what the last
    // nonempty chunk leaves), alpha*partial, at most s atomics: <= k + 2, the
    // path gemm_ceiling bounds ([H] (3.5)); beta*C: 1 + s <= k + 2.
    const int64_t longest = std::min(chunk, k);
    EXPECT_LE(longest + 1 + s, k + 2) << "k = " << k;
    EXPECT_LE(1 + s, k + 2);
  }
}

TEST(GemmLaunchers, LadderRejectsInvalidShapesWithAnError) {
  using Launcher = cudaError_t (*)(const kernels::GemmF32Args&, cudaStream_t);
  for (Launcher f : {kernels::gemm_f32_coalesced, kernels::gemm_f32_regblock, kernels::gemm_f32_vec4,
                     kernels::gemm_f32_cpasync, kernels::gemm_f32_splitk}) {
    kernels::GemmF32Args a;
    a.m = 4, a.n = 4, a.k = 8, a.lda = 7, a.ldb = 4, a.ldc = 4;  // lda < k
    EXPECT_EQ(f(a, nullptr), cudaErrorInvalidValue);
    a.lda = 8, a.ldc = 3;  // ldc < n
    EXPECT_EQ(f(a, nullptr), cudaErrorInvalidValue);
    a.ldc = 4, a.k = -1;
    EXPECT_EQ(f(a, nullptr), cudaErrorInvalidValue);
    a.k = 8, a.m = 0;  // empty C: nothing to launch, no error
    EXPECT_EQ(f(a, nullptr), cudaSuccess);
  }
}

}  // namespace
}  // namespace assay
