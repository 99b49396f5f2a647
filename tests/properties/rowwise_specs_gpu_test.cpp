// GPU tests of the rope, embedding and cross-entropy specs: the correct
// kernels pass a fuzz campaign of a few hundred cases with every check on
// (embedding_bwd by its bound alone: atomics, declared non-deterministic),
// and each planted bug of tests/mutants/rowwise for these ops is caught,
// shrunk and stored by a check that claims to catch it. A mutant that is not
// registered (yet) is skipped with a message, not passed.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>

#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "harness/spec.h"

namespace assay {
namespace {
namespace fs = std::filesystem;

class RowwiseSpecsGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
  }
};

TEST_P(RowwiseSpecsGpu, CorrectVariantsPass) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr) << GetParam();
  CampaignOptions o;
  o.max_cases = 300;
  o.gen.max_dim = 4096;
  o.corpus_dir = "";
  auto r = run_campaign(*spec, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cases, 300);
  EXPECT_TRUE(r->failures.empty()) << r->failures.front().variant << ": " << r->failures.front().shrunk.summary()
                                   << " -> " << r->failures.front().verdict.summary();
  for (const auto& [v, s] : r->per_variant) RecordProperty("max_ratio_" + v, std::to_string(s.max_ratio));
}

INSTANTIATE_TEST_SUITE_P(Ops, RowwiseSpecsGpu,
                         ::testing::Values("rope", "embedding", "embedding_bwd", "cross_entropy"));

struct SpecMutant {
  const char* op;
  const char* variant;
  std::set<FailureKind> any_of;  ///< the checks that claim to catch it
};
void PrintTo(const SpecMutant& m, std::ostream* os) {
  *os << m.variant;
}

class RowwiseSpecsGpuMutants : public ::testing::TestWithParam<SpecMutant> {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    dir_ = fs::temp_directory_path() / ("assay_rowspec_" + std::to_string(::getpid()));
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_P(RowwiseSpecsGpuMutants, CaughtShrunkAndStored) {
  const OpSpec* spec = find_spec(GetParam().op);
  ASSERT_NE(spec, nullptr) << GetParam().op;
  if (!spec->has_variant(GetParam().variant))
    GTEST_SKIP() << GetParam().variant << " is not registered for " << GetParam().op
                 << " (tests/mutants/rowwise/register.cpp)";
  CampaignOptions o;
  o.variants = {GetParam().variant};
  o.max_cases = 1000;
  o.gen.max_dim = 4096;
  o.corpus_dir = dir_.string();
  o.max_shrink_seconds = 30;
  auto r = run_campaign(*spec, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->failures.size(), 1u) << GetParam().variant << " not caught in " << r->cases << " cases";
  const FoundFailure& f = r->failures.front();
  bool matched = false;
  for (const auto& x : f.verdict.failures) matched |= GetParam().any_of.count(x.kind) > 0;
  EXPECT_TRUE(matched) << f.verdict.summary();
  EXPECT_TRUE(read_entry(f.path).ok());
  RecordProperty("case_index", std::to_string(f.case_index));
  RecordProperty("shrunk", f.shrunk.summary());
  RecordProperty("verdict", f.verdict.summary());
}

const FailureKind kB = FailureKind::kBound, kN = FailureKind::kNanInf, kE = FailureKind::kExact,
                  kP = FailureKind::kProperty;

INSTANTIATE_TEST_SUITE_P(Planted, RowwiseSpecsGpuMutants,
                         ::testing::Values(SpecMutant{"rope", "mutant_rope_wrong_pairing", {kB, kP}},
                                           SpecMutant{"embedding_bwd", "mutant_embedding_bwd_overwrite", {kB, kE, kP}},
                                           SpecMutant{"cross_entropy", "mutant_ce_ignore_index_ignored", {kB, kN, kE}},
                                           SpecMutant{"cross_entropy", "mutant_ce_smoothing_wrong", {kB, kP}}),
                         [](const ::testing::TestParamInfo<SpecMutant>& i) { return std::string(i.param.variant); });

}  // namespace
}  // namespace assay
