// The two campaign checks the GPU tests of every op family share: the correct
// variants pass a campaign with every check on, and a planted mutant is caught
// by one of the checks that claim it, shrunk and stored. Each skips (visibly)
// where no GPU is present.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <set>
#include <string>

#include <unistd.h>

#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "harness/spec.h"
#include "tests/gpu_test_env.h"

namespace assay {

/// Short names of the failure kinds, for the planted-bug tables (`using namespace failure_kinds;`).
namespace failure_kinds {
inline constexpr FailureKind kB = FailureKind::kBound, kE = FailureKind::kExact, kN = FailureKind::kNanInf,
                             kC = FailureKind::kCrash, kG = FailureKind::kGuard, kU = FailureKind::kUnwritten,
                             kP = FailureKind::kProperty, kD = FailureKind::kNondeterministic,
                             kL = FailureKind::kLaunchError, kJ = FailureKind::kProjection,
                             kGap = FailureKind::kGapWritten;
}  // namespace failure_kinds

/// A planted bug and the checks that claim to catch it.
struct PlantedMutant {
  const char* op;
  const char* variant;
  std::set<FailureKind> any_of;
  /// The bug may read outside its allocations: its campaign runs in worker processes, where a
  /// fault is a recorded crash of one case rather than a GPU context lost to the test process.
  bool isolate = false;
};
inline void PrintTo(const PlantedMutant& m, std::ostream* os) {
  *os << m.variant;
}

/// Parameterised GPU test: skipped with the reason where no GPU is usable;
/// `dir_` is a scratch corpus folder, removed afterwards.
template <typename Param>
class GpuCampaignTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    dir_ = std::filesystem::temp_directory_path() / ("assay_campaign_" + std::to_string(::getpid()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

/// `op`'s default variants through `cases` generated cases: no failure; max ratios recorded.
inline void expect_campaign_passes(const std::string& op, int64_t cases, int64_t max_dim) {
  const OpSpec* spec = find_spec(op);
  ASSERT_NE(spec, nullptr) << op;
  CampaignOptions o;
  o.max_cases = cases;
  o.gen.max_dim = max_dim;
  o.corpus_dir = "";
  auto r = run_campaign(*spec, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cases, cases);
  EXPECT_TRUE(r->failures.empty()) << r->failures.front().variant << ": " << r->failures.front().shrunk.summary()
                                   << " -> " << r->failures.front().verdict.summary();
  for (const auto& [v, s] : r->per_variant) {
    ::testing::Test::RecordProperty("max_ratio_" + v, std::to_string(s.max_ratio));
    std::printf("[ measured ] %s/%s: max error / ceiling %.3g\n", op.c_str(), v.c_str(), s.max_ratio);
  }
}

/// The mutant within `max_cases`: exactly one failure, of a claimed kind, shrunk and stored in `dir`.
inline void expect_mutant_caught(const PlantedMutant& m, int64_t max_cases, int64_t max_dim, double shrink_seconds,
                                 const std::string& dir) {
  const OpSpec* spec = find_spec(m.op);
  ASSERT_NE(spec, nullptr) << m.op;
  ASSERT_TRUE(spec->has_variant(m.variant)) << m.variant << " is not registered";
  CampaignOptions o;
  o.variants = {m.variant};
  o.max_cases = max_cases;
  o.gen.max_dim = max_dim;
  o.corpus_dir = dir;
  o.max_shrink_seconds = shrink_seconds;
  if (m.isolate) o.worker_binary = assay_binary();
  auto r = run_campaign(*spec, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->failures.size(), 1u) << m.variant << " not caught in " << r->cases << " cases";
  const FoundFailure& f = r->failures.front();
  bool matched = false;
  for (const auto& x : f.verdict.failures) matched |= m.any_of.count(x.kind) > 0;
  EXPECT_TRUE(matched) << f.verdict.summary();
  EXPECT_TRUE(read_entry(f.path).ok());
  std::printf("[ measured ] %s caught at case %lld, shrunk to %s\n", m.variant, static_cast<long long>(f.case_index),
              f.shrunk.summary().c_str());
  ::testing::Test::RecordProperty("case_index", std::to_string(f.case_index));
  ::testing::Test::RecordProperty("shrunk", f.shrunk.summary());
  ::testing::Test::RecordProperty("verdict", f.verdict.summary());
}

}  // namespace assay
