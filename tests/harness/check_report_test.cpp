// The checking commands' reports (harness/check_report.h): JUnit counts and per-testcase times,
// failure and skip elements, escaping, the skipped suite of a run without a GPU, and the JSON
// report's status and common fields.
#include "harness/check_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "harness/build_info.h"

namespace assay {
namespace {

CheckReport three_variants() {
  CheckReport r;
  r.command = "fuzz";
  r.target = "gemm";
  r.device = "NVIDIA H200 (sm_90)";
  r.seed = 7;
  r.seconds = 10;
  r.cases.resize(3);
  r.cases[0].name = "naive";
  r.cases[0].seconds = 2.5;
  r.cases[0].cases = 100;
  r.cases[0].output = "100 cases";
  r.cases[1].name = "mutant_<k>";
  r.cases[1].seconds = 7.25;
  r.cases[1].cases = 5;
  r.cases[1].failure = "bound in C & \"D\"";
  r.cases[1].detail = "shrunk: m=1\nreplay: assay replay x.json";
  r.cases[2].name = "tiled";
  r.cases[2].skipped = "not applicable";
  return r;
}

TEST(CheckReport, JunitCountsAndPerTestcaseTimes) {
  const std::string x = report_junit(three_variants());
  EXPECT_NE(x.find("<testsuite name=\"assay.fuzz.gemm\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("name=\"naive\" time=\"2.500\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"mutant_&lt;k&gt;\" time=\"7.250\""), std::string::npos) << x;
  EXPECT_NE(x.find("<failure message=\"bound in C &amp; &quot;D&quot;\">shrunk: m=1\nreplay: assay replay x.json"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<skipped message=\"not applicable\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<property name=\"seed\" value=\"7\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<property name=\"device\" value=\"NVIDIA H200 (sm_90)\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<property name=\"git_revision\" value=\"" + std::string(git_revision()) + "\"/>"),
            std::string::npos)
      << x;
  EXPECT_EQ(x.find("time=\"10.000\">", x.find("<testcase")), std::string::npos) << "a testcase has the suite's time";
}

TEST(CheckReport, NoGpuGivesASkippedSuiteWithTheReason) {
  CheckReport r;
  r.command = "baseline check";
  r.target = "gemm";
  r.skipped = "no CUDA GPU present";
  const std::string x = report_junit(r);
  EXPECT_NE(x.find("<testsuite name=\"assay.baseline_check.gemm\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<skipped message=\"no CUDA GPU present\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<property name=\"device\" value=\"none\"/>"), std::string::npos) << x;
  const nlohmann::json j = report_json(r);
  EXPECT_EQ(j["status"], "skipped");
  EXPECT_EQ(j["skip_reason"], "no CUDA GPU present");
  EXPECT_TRUE(j["tests"].empty());
  EXPECT_TRUE(j["seed"].is_null());
}

TEST(CheckReport, JsonStatusAndFields) {
  CheckReport r = three_variants();
  r.fields = {{"op", "gemm"}, {"status", "overridden"}};
  nlohmann::json j = report_json(r);
  EXPECT_EQ(j["status"], "failed");  // common keys win over the command's own
  EXPECT_EQ(j["op"], "gemm");
  EXPECT_EQ(j["seed"], 7);
  EXPECT_EQ(j["assay_version"], std::string(version()));
  ASSERT_EQ(j["tests"].size(), 3u);
  EXPECT_EQ(j["tests"][1]["status"], "failed");
  EXPECT_DOUBLE_EQ(j["tests"][1]["seconds"].get<double>(), 7.25);
  EXPECT_EQ(j["tests"][2]["status"], "skipped");
  r.cases.erase(r.cases.begin() + 1);
  r.interrupted = true;
  EXPECT_EQ(report_json(r)["status"], "interrupted");
}

TEST(CheckReport, WritesBothFilesOrNeither) {
  const auto dir = std::filesystem::temp_directory_path() / ("assay_check_report_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const CheckReport r = three_variants();
  ASSERT_TRUE(write_reports(r, "", "").ok());
  ASSERT_TRUE(write_reports(r, (dir / "r.json").string(), (dir / "sub/r.xml").string()).ok());
  std::ifstream xml(dir / "sub/r.xml");
  std::stringstream ss;
  ss << xml.rdbuf();
  EXPECT_EQ(ss.str(), report_junit(r));
  std::ifstream js(dir / "r.json");
  EXPECT_EQ(nlohmann::json::parse(js), report_json(r));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace assay
