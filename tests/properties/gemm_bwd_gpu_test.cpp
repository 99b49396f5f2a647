// GPU tests of the gemm backward: the correct variants pass (the atomic one
// by bounds only: it is declared non-deterministic), and every planted
// backward bug is caught, shrunk and stored.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "harness/spec.h"
#include "properties/gemm.h"

namespace assay {
namespace {
namespace fs = std::filesystem;

class GemmBwdGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    spec_ = find_spec("gemm_bwd");
    ASSERT_NE(spec_, nullptr);
    dir_ = fs::temp_directory_path() / ("assay_bwd_" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove_all(dir_); }
  const OpSpec* spec_ = nullptr;
  fs::path dir_;
};

TEST_F(GemmBwdGpu, CorrectVariantsPass) {
  CampaignOptions o;
  o.max_cases = 400;
  o.gen.max_dim = 96;
  o.corpus_dir = "";
  auto r = run_campaign(*spec_, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cases, 400);
  EXPECT_TRUE(r->failures.empty()) << r->failures.front().variant << ": " << r->failures.front().verdict.summary();
  RecordProperty("max_ratio_tiled", std::to_string(r->per_variant["tiled"].max_ratio));
  RecordProperty("max_ratio_atomic", std::to_string(r->per_variant["atomic"].max_ratio));
}

struct BwdMutant {
  const char* variant;
  std::set<FailureKind> any_of;
};
void PrintTo(const BwdMutant& m, std::ostream* os) {
  *os << m.variant;
}

class GemmBwdGpuMutants : public GemmBwdGpu, public ::testing::WithParamInterface<BwdMutant> {};

TEST_P(GemmBwdGpuMutants, CaughtShrunkAndStored) {
  CampaignOptions o;
  o.variants = {GetParam().variant};
  o.max_cases = 500;
  o.gen.max_dim = 96;
  o.corpus_dir = dir_.string();
  auto r = run_campaign(*spec_, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->failures.size(), 1u) << GetParam().variant << " not caught in " << r->cases << " cases";
  const FoundFailure& f = r->failures.front();
  bool matched = false, projection = false;
  for (const auto& x : f.verdict.failures) {
    matched |= GetParam().any_of.count(x.kind) > 0;
    projection |= x.kind == FailureKind::kProjection;
  }
  EXPECT_TRUE(matched) << f.verdict.summary();
  EXPECT_TRUE(read_entry(f.path).ok());
  RecordProperty("shrunk", f.shrunk.summary());
  RecordProperty("verdict", f.verdict.summary());
  RecordProperty("projection_caught_too", projection ? 1 : 0);
}

INSTANTIATE_TEST_SUITE_P(
    Planted, GemmBwdGpuMutants,
    ::testing::Values(BwdMutant{"bwd_wrong_sign", {FailureKind::kBound, FailureKind::kProjection}},
                      BwdMutant{"bwd_missing_alpha", {FailureKind::kBound, FailureKind::kProjection}},
                      BwdMutant{"bwd_transposed",
                                {FailureKind::kBound, FailureKind::kNanInf, FailureKind::kProjection}},
                      BwdMutant{"bwd_overwrite", {FailureKind::kBound, FailureKind::kProjection}},
                      BwdMutant{"bwd_wrong_row", {FailureKind::kBound, FailureKind::kProjection}}),
    [](const ::testing::TestParamInfo<BwdMutant>& i) { return std::string(i.param.variant); });

}  // namespace
}  // namespace assay
