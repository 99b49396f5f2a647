// The campaign runner against kernels that fault, hang, race or degrade:
// each ends as a stored failure of the right kind while the campaign
// completes its other cases. Worker processes are the real `assay` binary.
#include "harness/campaign.h"

#include <gtest/gtest.h>

#include "tests/gpu_test_env.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "properties/gemm.h"
#include "harness/worker.h"

namespace assay {
namespace {
namespace fs = std::filesystem;

class CampaignGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    dir_ = fs::temp_directory_path() / ("assay_campaign_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  CampaignOptions options(std::vector<std::string> variants) {
    CampaignOptions o;
    o.variants = std::move(variants);
    o.max_cases = 60;
    o.gen.max_dim = 48;
    o.lanes = 2;
    o.worker_binary = assay_binary();
    o.corpus_dir = dir_.string();
    o.case_timeout_s = 5;
    o.max_shrink_seconds = 30;
    return o;
  }
  fs::path dir_;
};

struct FaultCase {
  const char* variant;
  FailureKind kind;
};

class CampaignGpuFaults : public CampaignGpu, public ::testing::WithParamInterface<FaultCase> {};

void PrintTo(const FaultCase& f, std::ostream* os) {
  *os << f.variant;
}

TEST_P(CampaignGpuFaults, StoredAsFailureAndTheCampaignCompletes) {
  const FaultCase& fc = GetParam();
  CampaignOptions o = options({"naive", fc.variant});
  // The spin must be caught by the watchdog, so its case gets the short limit. A crash must be
  // reported as a crash: with two other test processes on the GPU, a trap's case has ended
  // more than 5 s after it started, and the watchdog called it a hang.
  if (fc.kind != FailureKind::kHang) o.case_timeout_s = 30;
  auto r = run_campaign(*find_spec("gemm"), o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cases, 60) << "the campaign did not complete its cases";
  EXPECT_EQ(r->per_variant["naive"].failures, 0);
  ASSERT_EQ(r->failures.size(), 1u);
  const FoundFailure& f = r->failures.front();
  EXPECT_EQ(f.variant, fc.variant);
  ASSERT_FALSE(f.verdict.failures.empty());
  EXPECT_EQ(f.verdict.failures.front().kind, fc.kind) << f.verdict.summary();
  EXPECT_FALSE(f.verdict.failures.front().detail.empty());
  ASSERT_FALSE(f.path.empty());
  auto entry = read_entry(f.path);
  ASSERT_TRUE(entry.ok()) << entry.status().to_string();
  auto g = parse_gemm_case(entry->c);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->k % 7, fc.kind == FailureKind::kHang ? 5
                                                    : (std::string(fc.variant) == "fault_trap"        ? 3
                                                       : std::string(fc.variant) == "fault_far_write" ? 4
                                                                                                      : 6));
  RecordProperty("stored", f.shrunk.summary());
}

INSTANTIATE_TEST_SUITE_P(Planted, CampaignGpuFaults,
                         ::testing::Values(FaultCase{"fault_trap", FailureKind::kCrash},
                                           FaultCase{"fault_far_write", FailureKind::kCrash},
                                           FaultCase{"fault_spin", FailureKind::kHang},
                                           FaultCase{"fault_misaligned", FailureKind::kCrash}),
                         [](const ::testing::TestParamInfo<FaultCase>& i) { return std::string(i.param.variant); });

// A GPU that a kernel leaves unusable for new processes (one that needs a
// reset) cannot be made on purpose without touching the device's settings, so
// a wrapper around the real worker stands in for it: the first worker starts,
// no later one does. The first worker dies on the real fault_trap kernel (its
// context is poisoned), so the GPU is gone from then on. The trap's case must
// end as a stored failure of kind context, with the campaign's report. (The
// wrapper marks at start, not at the worker's exit: the parent kills a dying
// worker's process group, the wrapper shell included, before it could mark.)
TEST_F(CampaignGpu, GpuUnusableAfterAKernelIsThatKernelsContextFailure) {
  fs::create_directories(dir_);
  const std::string wrapper = (dir_ / "worker.sh").string();
  const std::string marker = (dir_ / "gpu_lost").string();
  {
    std::ofstream w(wrapper);
    w << "#!/bin/sh\n"
      << "if [ -e '" << marker << "' ]; then echo 'FATAL 0 device unusable (simulated)'; exit 3; fi\n"
      << "touch '" << marker << "'\nexec '" << assay_binary() << "' \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  CampaignOptions o = options({"fault_trap"});
  o.worker_binary = wrapper;
  o.lanes = 1;  // one case on the lane when it dies: the blame is exact
  o.max_cases = 200;
  auto r = run_campaign(*find_spec("gemm"), o);
  ASSERT_TRUE(r.ok()) << "the found failure was discarded: " << r.status().to_string();
  EXPECT_FALSE(r->infra.ok()) << "the GPU was gone: the campaign cannot have completed";
  ASSERT_EQ(r->failures.size(), 1u);
  const FoundFailure& f = r->failures.front();
  ASSERT_FALSE(f.verdict.failures.empty());
  EXPECT_EQ(f.verdict.failures.front().kind, FailureKind::kContext) << f.verdict.summary();
  ASSERT_FALSE(f.path.empty());
  auto entry = read_entry(f.path);
  ASSERT_TRUE(entry.ok()) << entry.status().to_string();
  auto g = parse_gemm_case(entry->c);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->k % 7, 3) << "blamed a case that does not trigger the trap";
}

TEST_F(CampaignGpu, WorkerProcessesAgreeWithInProcessLanes) {
  CampaignOptions o = options({"naive", "tiled"});
  o.max_cases = 300;
  o.gen.max_dim = 200;
  o.corpus_dir = "";
  auto a = run_campaign(*find_spec("gemm"), o);
  o.worker_binary = "";
  auto b = run_campaign(*find_spec("gemm"), o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->cases, b->cases);
  EXPECT_EQ(a->exact_cases, b->exact_cases);
  EXPECT_EQ(a->per_variant["tiled"].max_ratio, b->per_variant["tiled"].max_ratio);
  EXPECT_TRUE(a->failures.empty() && b->failures.empty());
}

TEST_F(CampaignGpu, OneWorkerPerGpu) {
  auto n = gpu::device_count();
  if (!n.ok() || *n < 2) GTEST_SKIP() << "needs 2 GPUs";
  CampaignOptions o = options({"naive", "tiled"});
  o.devices = {0, 1};
  o.max_cases = 400;
  o.corpus_dir = "";
  auto r = run_campaign(*find_spec("gemm"), o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cases, 400);
  EXPECT_TRUE(r->failures.empty()) << r->failures.front().verdict.summary();
  EXPECT_NE(r->device.find("[1] "), std::string::npos) << r->device;
}

TEST_F(CampaignGpu, ShardsSplitTheCampaign) {
  CampaignOptions o = options({"naive"});
  o.corpus_dir = "";
  o.max_cases = 40;
  o.worker_binary = "";
  o.shard_count = 2;
  o.shard_index = 1;
  auto r = run_campaign(*find_spec("gemm"), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cases, 40);
}

TEST_F(CampaignGpu, RepeatCatchesAKernelThatDegradesAfterManyCalls) {
  CampaignOptions o = options({"mutant_degrades"});
  o.max_cases = 20;
  o.worker_binary = "";
  o.lanes = 1;
  auto plain = run_campaign(*find_spec("gemm"), o);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->failures.empty()) << "20 cases x 2 launches stay under the 200-call threshold";
  o.run.repeat = 250;
  auto repeated = run_campaign(*find_spec("gemm"), o);
  ASSERT_TRUE(repeated.ok());
  ASSERT_EQ(repeated->failures.size(), 1u);
}

TEST_F(CampaignGpu, RacecheckReportIsAttachedToTheCase) {
  if (std::system("command -v compute-sanitizer > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "compute-sanitizer is not on PATH";
  // Two k-tiles in one block: the missing barrier is a shared-memory hazard
  // racecheck sees on every launch, whatever the values come out as.
  ProcessOptions po;
  po.binary = assay_binary();
  po.sanitize = "racecheck";
  po.case_timeout_s = 30;
  auto e = make_process_executor("gemm", GenPlan{}, po);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const Case c = make_gemm_case(32, 32, 64, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kSmallInt, 1);
  (*e)->submit({1, std::nullopt, c, {"mutant_missing_sync", "tiled"}});
  JobResult r = (*e)->wait();
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.verdicts.size(), 2u);
  bool sanitizer = false;
  for (const auto& x : r.verdicts[0].failures) sanitizer |= x.kind == FailureKind::kSanitizer;
  EXPECT_TRUE(sanitizer) << r.verdicts[0].summary();
  EXPECT_TRUE(r.verdicts[1].passed()) << "the correct tiled kernel: " << r.verdicts[1].summary();
}

TEST(ProcessExecutor, WorkerThatCannotStartIsAnInfrastructureError) {
  ProcessOptions po;
  po.binary = "/nonexistent/assay";
  po.start_timeout_s = 10;
  auto e = make_process_executor("gemm", GenPlan{}, po);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("cannot start /nonexistent/assay"), std::string::npos) << e.status().message();
}

TEST(ProcessExecutor, WorkerWithoutAGpuSaysWhy) {
  if (gpu::device_count().ok()) GTEST_SKIP() << "this machine has a GPU";
  ProcessOptions po;
  po.binary = assay_binary();
  auto e = make_process_executor("gemm", GenPlan{}, po);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("failed to start: cudaSetDevice"), std::string::npos) << e.status().message();
}

TEST(GenerateCase, SameIndexSameCaseOnEveryCall) {
  const GenPlan plan{42, GenConfig{300}};
  for (int64_t i : {0, 1, 17, 99, 12345})
    EXPECT_EQ(generate_case(*find_spec("gemm"), plan, i).to_json(),
              generate_case(*find_spec("gemm"), plan, i).to_json());
  EXPECT_NE(generate_case(*find_spec("gemm"), plan, 5).id(), generate_case(*find_spec("gemm"), plan, 6).id());
}

}  // namespace
}  // namespace assay
