// GPU tests of the fp32 GEMM ladder (kernels/gemm/gemm_ladder_f32.cu) and the
// metamorphic relations of the gemm op: every rung passes a
// campaign and every relation on explicit cases (tails, transposes, padded and
// offset views, beta = 0 with NaN in C, exact tier); each rung's planted bug
// is caught and shrunk; a kernel whose error depends on the row pairing is
// flagged by the transpose and permute relations. Skipped, visibly, without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include <set>
#include <string>
#include <vector>

#include "harness/gpu/lane.h"
#include "harness/spec.h"
#include "properties/gemm.h"
#include "tests/properties/campaign_checks.h"

namespace assay {
namespace {

const std::vector<std::string> kAllFp32 = {"naive", "tiled", "coalesced", "regblock", "vec4", "cpasync", "splitk"};

class GemmLadderGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    spec_ = find_spec("gemm");
    ASSERT_NE(spec_, nullptr);
    auto lane = gpu::Lane::create(0);
    ASSERT_TRUE(lane.ok()) << lane.status().to_string();
    lane_ = std::move(lane).value();
  }
  std::vector<Verdict> run(const Case& c, const std::vector<std::string>& variants) {
    auto v = spec_->run(c, variants, *lane_);
    EXPECT_TRUE(v.ok()) << v.status().to_string();
    return v.ok() ? *v : std::vector<Verdict>{};
  }
  static std::set<FailureKind> kinds(const Verdict& v) {
    std::set<FailureKind> k;
    for (const auto& f : v.failures) k.insert(f.kind);
    return k;
  }
  static Case with_relation(Case c, const std::string& r) {
    c.params["relation"] = r;
    return c;
  }
  const OpSpec* spec_ = nullptr;
  std::unique_ptr<gpu::Lane> lane_;
};

// Explicit relation cases: (m, n, k, ta, tb, alpha, beta, pads, offsets, class).
std::vector<Case> relation_cases() {
  return {
      // tails in every dimension, transposed A, padded + misaligned views, float data
      make_gemm_case(67, 45, 37, true, false, 1.5, -0.75, 1, 3, 4, 1, 2, 5, ValueClass::kNormal, 21),
      // square (the transposed C' has C's shape), both transposed, beta == 0: C holds NaN poison
      make_gemm_case(40, 40, 19, true, true, -1, 0, 0, 16, 0, 4, 0, 0, ValueClass::kUniform, 22),
      // exact tier: small integers, integer scalars, beta != 0; k spans several splits and slices
      make_gemm_case(33, 70, 130, false, true, 2, -1, 0, 0, 33, 0, 0, 4, ValueClass::kSmallInt, 23),
      // k == 0: C = beta*C, compared bit for bit
      make_gemm_case(9, 13, 0, false, false, 1, 2, 0, 0, 1, 0, 0, 0, ValueClass::kSmallInt, 24),
      // same-sign data, long k (split-K with 8 chunks), m = 1
      make_gemm_case(1, 129, 1000, false, false, 1, 0.5, 0, 1, 0, 0, 0, 0, ValueClass::kSameSign, 25),
  };
}

TEST_F(GemmLadderGpu, EveryVariantSatisfiesEveryRelation) {
  for (const Case& base : relation_cases())
    for (const char* r : kGemmRelations) {
      const Case c = with_relation(base, r);
      ASSERT_TRUE(spec_->validate(c).ok()) << c.summary();
      for (const Verdict& v : run(c, kAllFp32))
        EXPECT_TRUE(v.passed()) << v.variant << " on " << c.summary() << " [" << r << "]: " << v.summary();
    }
}

TEST_F(GemmLadderGpu, RelationsFlagAKernelWhoseErrorDependsOnTheRowPairing) {
  // The swizzle mutant swaps the k-terms 8..15 of rows 2r and 2r+1: permuting
  // the rows or transposing the problem changes which outputs are paired, so
  // the related launch disagrees with the original beyond both ceilings.
  // Square: the transpose relation maps C onto C^T in C's own layout (properties/gemm.h).
  const Case base = make_gemm_case(40, 40, 24, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kSmallInt, 31);
  for (const char* r : {"transpose", "permute_rows"}) {
    const auto v = run(with_relation(base, r), {"mutant_regblock_swizzle"});
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(kinds(v[0]).count(FailureKind::kProperty)) << r << ": " << v[0].summary();
    bool named = false;
    for (const auto& f : v[0].failures) {
      if (f.kind != FailureKind::kProperty) continue;
      named |= f.detail.find(std::string("metamorphic '") + r) != std::string::npos;
      // The line's figures are the first breaking element's, read back and judged again on the
      // host: they must show it broken (|diff| past the tolerance) with two different outputs.
      double diff = 0, tol = 0, y2 = 0, y1 = 0;
      const size_t at = f.detail.find("|diff| "), is = f.detail.find(" is "), gives = f.detail.find("gives ");
      ASSERT_NE(at, std::string::npos) << f.detail;
      ASSERT_EQ(std::sscanf(f.detail.c_str() + at, "|diff| %lg > %lg", &diff, &tol), 2) << f.detail;
      ASSERT_EQ(std::sscanf(f.detail.c_str() + is, " is %lg", &y2), 1) << f.detail;
      ASSERT_EQ(std::sscanf(f.detail.c_str() + gives, "gives %lg", &y1), 1) << f.detail;
      EXPECT_GE(diff, tol) << f.detail;  // printed to 3 digits: equal where they are close
      EXPECT_NE(y1, y2) << f.detail;
      EXPECT_GT(f.count, 0) << f.detail;
      std::printf("[ measured ] %lld elements: %s\n", static_cast<long long>(f.count), f.detail.c_str());
    }
    EXPECT_TRUE(named) << "the relation failure must name the relation: " << v[0].summary();
  }
}

TEST_F(GemmLadderGpu, Vec4TakesBothPathsAndItsMutantOnlyFailsTheMisalignedLd) {
  // Aligned view (offset 0, ld = 64): vector path. ld = 65 (pad 1): scalar
  // fallback in vec4, shifted float4 reads in the mutant. Offset 1: scalar in both.
  const Case aligned = make_gemm_case(70, 64, 64, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kSmallInt, 41);
  const Case odd_ld = make_gemm_case(70, 64, 64, false, false, 1, 0, 1, 1, 0, 0, 0, 0, ValueClass::kSmallInt, 41);
  const Case offset = make_gemm_case(70, 64, 64, false, false, 1, 0, 1, 1, 0, 1, 1, 0, ValueClass::kSmallInt, 41);
  for (const Case* c : {&aligned, &odd_ld, &offset}) {
    const auto v = run(*c, {"vec4", "mutant_vec4_misaligned"});
    ASSERT_EQ(v.size(), 2u);
    EXPECT_TRUE(v[0].passed()) << c->summary() << ": " << v[0].summary();
    if (c == &odd_ld)
      EXPECT_FALSE(v[1].passed()) << "mutant not caught on ld % 4 != 0 with an aligned base";
    else
      EXPECT_TRUE(v[1].passed()) << c->summary() << ": " << v[1].summary();
  }
}

TEST_F(GemmLadderGpu, SplitKIsJudgedByTheBoundAndKeepsBlasBeta0) {
  // Several chunks; beta == 0 with NaN poison in C (must not leak through the
  // first pass); beta != 0 with large k and same-sign data.
  for (const Case& c :
       {make_gemm_case(130, 70, 700, true, false, 1, 0, 0, 0, 3, 0, 0, 0, ValueClass::kNormal, 51),
        make_gemm_case(64, 65, 513, false, true, -0.75, 2.25, 1, 0, 0, 0, 0, 0, ValueClass::kSameSign, 52)}) {
    const auto v = run(c, {"splitk"});
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(v[0].passed()) << c.summary() << ": " << v[0].summary();
    EXPECT_GT(v[0].metrics.max_ratio, 0.0);
    EXPECT_LE(v[0].metrics.max_ratio, 1.0);
  }
}

class GemmLadderCampaign : public GpuCampaignTest<std::string> {};

TEST_P(GemmLadderCampaign, EveryVariantPassesACampaign) {
  // Default variants: naive, tiled and the five rungs; a quarter of the cases
  // carry a relation.
  expect_campaign_passes(GetParam(), 1500, 300);
}

INSTANTIATE_TEST_SUITE_P(Ladder, GemmLadderCampaign, ::testing::Values(std::string("gemm")));

class GemmLadderMutants : public GpuCampaignTest<PlantedMutant> {};

TEST_P(GemmLadderMutants, CaughtAndShrunk) {
  expect_mutant_caught(GetParam(), 3000, 256, 60, dir_.string());
}

INSTANTIATE_TEST_SUITE_P(
    Ladder, GemmLadderMutants,
    ::testing::Values(
        PlantedMutant{"gemm", "mutant_coalesced_row_tail", {FailureKind::kGuard, FailureKind::kGapWritten}},
        PlantedMutant{
            "gemm", "mutant_regblock_swizzle", {FailureKind::kExact, FailureKind::kBound, FailureKind::kProperty}},
        PlantedMutant{"gemm",
                      "mutant_vec4_misaligned",
                      {FailureKind::kBound, FailureKind::kExact, FailureKind::kNanInf, FailureKind::kProperty}},
        PlantedMutant{"gemm",
                      "mutant_cpasync_no_wait",
                      {FailureKind::kExact, FailureKind::kBound, FailureKind::kNanInf, FailureKind::kNondeterministic,
                       FailureKind::kProperty}},
        PlantedMutant{
            "gemm", "mutant_splitk_drops_tail", {FailureKind::kExact, FailureKind::kBound, FailureKind::kProperty}}),
    [](const ::testing::TestParamInfo<PlantedMutant>& i) { return std::string(i.param.variant); });

}  // namespace
}  // namespace assay
