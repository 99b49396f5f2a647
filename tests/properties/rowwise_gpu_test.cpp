// GPU tests of the softmax and normalisation specs: the correct kernels pass
// a fuzz campaign with every check on, and each planted bug of
// tests/mutants/rowwise is caught (and shrunk and stored) by the check that
// claims to catch it.
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

class RowwiseGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    dir_ = fs::temp_directory_path() / ("assay_rowwise_" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(RowwiseGpu, CorrectVariantsPass) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr) << GetParam();
  CampaignOptions o;
  o.max_cases = 600;
  o.gen.max_dim = 4096;
  o.corpus_dir = "";
  auto r = run_campaign(*spec, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cases, 600);
  EXPECT_TRUE(r->failures.empty()) << r->failures.front().variant << ": " << r->failures.front().shrunk.summary()
                                   << " -> " << r->failures.front().verdict.summary();
  for (const auto& [v, s] : r->per_variant) RecordProperty("max_ratio_" + v, std::to_string(s.max_ratio));
}

INSTANTIATE_TEST_SUITE_P(Ops, RowwiseGpu,
                         ::testing::Values("softmax", "softmax_bwd", "layernorm", "layernorm_bwd", "rmsnorm",
                                           "rmsnorm_bwd"));

struct RowMutant {
  const char* op;
  const char* variant;
  std::set<FailureKind> any_of;  ///< the checks that claim to catch it
};
void PrintTo(const RowMutant& m, std::ostream* os) {
  *os << m.variant;
}

class RowwiseGpuMutants : public ::testing::TestWithParam<RowMutant> {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    dir_ = fs::temp_directory_path() / ("assay_rowmut_" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(RowwiseGpuMutants, CaughtShrunkAndStored) {
  const OpSpec* spec = find_spec(GetParam().op);
  ASSERT_NE(spec, nullptr);
  ASSERT_TRUE(spec->has_variant(GetParam().variant)) << GetParam().variant << " is not registered";
  CampaignOptions o;
  o.variants = {GetParam().variant};
  o.max_cases = 2000;
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

const FailureKind kB = FailureKind::kBound, kN = FailureKind::kNanInf, kU = FailureKind::kUnwritten,
                  kD = FailureKind::kNondeterministic, kP = FailureKind::kProperty,
                  kE = FailureKind::kExact;

INSTANTIATE_TEST_SUITE_P(
    Planted, RowwiseGpuMutants,
    ::testing::Values(RowMutant{"softmax", "mutant_softmax_no_max", {kN, kB}},
                      RowMutant{"softmax", "mutant_softmax_vec_tail", {kB, kU, kP}},
                      RowMutant{"softmax_bwd", "mutant_softmax_bwd_no_sum", {kB}},
                      RowMutant{"layernorm", "mutant_layernorm_one_pass", {kB, kN}},
                      RowMutant{"layernorm_bwd", "mutant_layernorm_dbeta_skip_last_row", {kB}},
                      RowMutant{"layernorm_bwd", "mutant_layernorm_bwd_race", {kB, kD}},
                      RowMutant{"rmsnorm", "mutant_rmsnorm_no_eps", {kN, kB}},
                      RowMutant{"rmsnorm_bwd", "mutant_rmsnorm_bwd_no_projection", {kB}},
                      RowMutant{"embedding", "mutant_embedding_fwd_off_by_one", {kB, kN, kE}}),
    [](const ::testing::TestParamInfo<RowMutant>& i) { return std::string(i.param.variant); });

}  // namespace
}  // namespace assay
