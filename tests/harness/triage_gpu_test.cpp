// assay triage on planted bugs: the error locator names where the errors sit,
// the sweep shows which neighbouring shapes fail, and the HTML/SVG report is
// written. The pure parts (error_matrix) run on the CPU.
#include "harness/triage.h"

#include <gtest/gtest.h>

#include "tests/gpu_test_env.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "harness/gpu/lane.h"
#include "properties/gemm.h"
#include "harness/worker.h"

namespace assay {
namespace {
namespace fs = std::filesystem;

TEST(Triage, ErrorMatrixFollowsTheNaNInfRules) {
  Inspection in;
  in.rows = 1;
  in.cols = 5;
  in.out = {1.0, NAN, INFINITY, 2.0, NAN};
  in.ref = {1.0, NAN, INFINITY, 1.0, 3.0};
  in.tol = {0.1, 0.1, 0.1, 0.5, 0.1};
  const ErrorMatrix m = error_matrix(in);
  EXPECT_EQ(m.at(0, 0), 0.0);
  EXPECT_EQ(m.at(0, 1), 0.0);  // NaN where the reference is NaN
  EXPECT_EQ(m.at(0, 2), 0.0);  // the same Inf
  EXPECT_EQ(m.at(0, 3), 2.0);
  EXPECT_TRUE(std::isnan(m.at(0, 4)));  // NaN where the reference is finite
}

TEST(TriageGpu, LocatesUnwrittenTailRowsAndSweepsTheShape) {
  auto n = gpu::device_count();
  if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
  ProcessOptions po;
  po.binary = assay_binary();
  po.lanes = 1;
  auto exec = make_process_executor("gemm", GenPlan{}, po);
  ASSERT_TRUE(exec.ok()) << exec.status().to_string();
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok());
  // 13 rows, the mutant covers floor(13/8)*8 = 8: rows 8..12 never written.
  Case c = make_gemm_case(13, 6, 7, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kNormal, 3);
  c.variant = "mutant_skips_last_row";
  const fs::path dir = fs::temp_directory_path() / ("assay_triage_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  TriageOptions o;
  o.sweep = {"m"};
  o.html_path = (dir / "case.triage.html").string();
  o.svg_path = (dir / "case.triage.svg").string();
  auto r = triage(*find_spec("gemm"), c, **exec, **lane, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->failing);
  EXPECT_NE(r->text.find("last 5 rows"), std::string::npos) << r->text;
  EXPECT_NE(r->text.find("sweep m: 11=unwritten 12=unwritten 13=unwritten* 14=unwritten 15=unwritten"),
            std::string::npos)
      << r->text;
  EXPECT_TRUE(fs::exists(o.html_path));
  EXPECT_TRUE(fs::exists(o.svg_path));
  RecordProperty("report", r->text);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace assay
