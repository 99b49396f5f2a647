// Crash safety of a campaign, on CPU: the real `assay fuzz` drives workers
// that are tests/harness/fake_worker.cpp (no GPU), and the test sends signals,
// kills workers and hangs lanes. No found failure may be lost.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/gpu_test_env.h"

#include <nlohmann/json.hpp>

#include "harness/corpus.h"

namespace assay {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Proc {
  pid_t pid = -1;
  int exit_code = -1;  // 128 + signal when killed
  double seconds = 0;
  std::string out, err;
};

class CampaignSignalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("assay_signal_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "pids");
  }
  void TearDown() override {
    if (run_.pid > 0) ::kill(run_.pid, SIGKILL), ::waitpid(run_.pid, nullptr, 0);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts `assay fuzz gemm` with the fake worker and `env` added.
  void start(const std::map<std::string, std::string>& env, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {assay_binary(),   "fuzz",       "gemm",
                                     "--worker-binary", fake_worker_binary(), "--corpus",
                                     corpus(),          "--json",     json_path(),
                                     "--junit",         junit_path(), "--max-dim",
                                     "8"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
    envs.push_back("FAKE_PID_DIR=" + (dir_ / "pids").string());
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    t0_ = Clock::now();
    run_.pid = ::fork();
    ASSERT_GE(run_.pid, 0);
    if (run_.pid == 0) {
      std::freopen((dir_ / "out.txt").c_str(), "w", stdout);
      std::freopen((dir_ / "err.txt").c_str(), "w", stderr);
      std::vector<char*> argv, envp;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      for (auto& e : envs) envp.push_back(e.data());
      envp.push_back(nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
  }

  // Waits for the campaign to end (at most `seconds`).
  void finish(double seconds) {
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      const pid_t r = ::waitpid(run_.pid, &status, WNOHANG);
      if (r == run_.pid) break;
      if (Clock::now() > deadline) {
        ::kill(run_.pid, SIGKILL);
        ::waitpid(run_.pid, &status, 0);
        ADD_FAILURE() << "assay fuzz did not end within " << seconds << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    run_.pid = -1;
    run_.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    run_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run_.out = slurp(dir_ / "out.txt");
    run_.err = slurp(dir_ / "err.txt");
  }

  // Waits until an entry is in the corpus (a failure was found and stored).
  bool wait_for_entry(double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
      if (!entries().empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::vector<CorpusEntry> entries() {
    std::vector<CorpusEntry> out;
    std::error_code ec;
    if (!fs::exists(corpus(), ec)) return out;
    auto files = list_entries({corpus()});
    if (!files.ok()) return out;
    for (const auto& f : *files) {
      auto e = read_entry(f);
      if (e.ok()) out.push_back(std::move(e).value());
    }
    return out;
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string corpus() const { return (dir_ / "corpus").string(); }
  std::string json_path() const { return (dir_ / "report.json").string(); }
  std::string junit_path() const { return (dir_ / "report.xml").string(); }
  std::string diag() const { return "\nstdout:\n" + run_.out + "\nstderr:\n" + run_.err; }

  // Every worker this campaign started has exited.
  void expect_workers_gone(double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    std::vector<pid_t> alive;
    do {
      alive.clear();
      for (const auto& f : fs::directory_iterator(dir_ / "pids")) {
        const pid_t pid = static_cast<pid_t>(std::stol(f.path().filename().string()));
        // A zombie (exited, not yet reaped by whoever inherited it) counts as gone.
        const std::string stat = slurp(fs::path("/proc") / std::to_string(pid) / "stat");
        const size_t close = stat.rfind(')');
        const bool zombie = close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
        if (!stat.empty() && !zombie) alive.push_back(pid);
      }
      if (alive.empty()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (Clock::now() < deadline);
    ADD_FAILURE() << alive.size() << " worker(s) outlived their campaign, e.g. pid " << alive.front();
  }

  void expect_stop(int sig) {
    // Shrinking is slow (1 s per candidate batch): the signal lands while the
    // failure is being shrunk.
    start({{"FAKE_FAIL_FROM", "6"}, {"FAKE_DELAY_MS", "50"}, {"FAKE_SHRINK_DELAY_MS", "1000"}},
          {"--lanes", "2", "--cases", "1000000", "--variant", "naive", "--variant", "tiled"});
    ASSERT_TRUE(wait_for_entry(60)) << "no failure was stored while the campaign ran";
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ASSERT_EQ(::kill(run_.pid, sig), 0);
    finish(30);
    EXPECT_EQ(run_.exit_code, 128 + sig) << diag();
    const auto es = entries();
    ASSERT_EQ(es.size(), 1u) << diag();
    EXPECT_TRUE(es[0].stored_failure);
    EXPECT_EQ(es[0].c.variant, "tiled");
    EXPECT_EQ(es[0].found["shrink"]["state"], "interrupted") << es[0].found.dump();
    // The partial reports are written and name the stored failure.
    std::ifstream jin(json_path());
    ASSERT_TRUE(jin.good()) << "no JSON report" << diag();
    const auto j = nlohmann::json::parse(jin);
    EXPECT_EQ(j["interrupted_by_signal"], sig);
    ASSERT_EQ(j["failures"].size(), 1u);
    EXPECT_EQ(j["failures"][0]["path"], es[0].path);
    const std::string xml = slurp(junit_path());
    EXPECT_NE(xml.find("<failure"), std::string::npos) << xml;
    EXPECT_NE(run_.out.find("stored: " + es[0].path), std::string::npos) << diag();
    expect_workers_gone(5);
  }

  /// A 30-case campaign on 2 lanes whose failing variant kills its worker at case 5 (`how`: the
  /// fake worker's FAKE_*_INDEX variable); its one stored failure must be that case, of kind crash,
  /// with `detail` in its detail.
  void expect_crash_at_case_5(const std::string& how, const std::string& detail) {
    start({{"FAKE_FAIL_FROM", "1000000"}, {how, "5"}, {"FAKE_CASE_FAILS", "0"}}, {"--lanes", "2", "--cases", "30"});
    finish(60);
    EXPECT_EQ(run_.exit_code, 1) << diag();
    const auto es = entries();
    ASSERT_EQ(es.size(), 1u) << diag();
    const auto& f = es[0].found["verdict"]["failures"][0];
    EXPECT_EQ(f["kind"], "crash") << es[0].found.dump();
    EXPECT_NE(f["detail"].get<std::string>().find(detail), std::string::npos) << f.dump();
    EXPECT_EQ(es[0].found["campaign"]["case_index"], 5);
  }

  fs::path dir_;
  Proc run_;
  Clock::time_point t0_;
};

TEST_F(CampaignSignalTest, SigintWhileShrinkingStoresTheFailureAndReports) {
  expect_stop(SIGINT);
}

TEST_F(CampaignSignalTest, SigtermWhileShrinkingStoresTheFailureAndReports) {
  expect_stop(SIGTERM);
}

TEST_F(CampaignSignalTest, FailureIsStoredUnshrunkBeforeShrinkingEnds) {
  start({{"FAKE_FAIL_FROM", "4"}, {"FAKE_DELAY_MS", "50"}, {"FAKE_SHRINK_DELAY_MS", "1000"}},
        {"--lanes", "2", "--cases", "1000000"});
  ASSERT_TRUE(wait_for_entry(60));
  const auto es = entries();
  ASSERT_EQ(es.size(), 1u);
  EXPECT_EQ(es[0].found["shrink"]["state"], "pending") << es[0].found.dump();
  // SIGKILL: no chance to clean up, and yet the entry stays, and the workers die with their parent.
  ::kill(run_.pid, SIGKILL);
  finish(10);
  EXPECT_EQ(entries().size(), 1u);
  expect_workers_gone(5);
}

TEST_F(CampaignSignalTest, WorkerDeathIsAStoredCrash) {
  expect_crash_at_case_5("FAKE_CRASH_INDEX", "signal 6");
  // The report says what the crash cost: the dead worker's replacement (and any started while
  // its cases were re-run alone), and the time that took.
  std::ifstream jin(json_path());
  ASSERT_TRUE(jin.good()) << "no JSON report" << diag();
  const auto j = nlohmann::json::parse(jin);
  EXPECT_GE(j["worker_restarts"].get<int64_t>(), 1) << j.dump();
  EXPECT_GT(j["crash_recovery_seconds"].get<double>(), 0.0) << j.dump();
  EXPECT_LE(j["worker_start_seconds"].get<double>(), j["crash_recovery_seconds"].get<double>()) << j.dump();
  EXPECT_NE(run_.out.find("crashes and hangs: "), std::string::npos) << diag();
}

TEST_F(CampaignSignalTest, WorkerThatSaysFatalIsReplacedAtOnce) {
  // A worker whose context a kernel poisoned says FATAL and then waits on its input; it never
  // exits by itself. The parent must kill it at once (it used to wait 2 s for an exit status
  // on every such death) and still report the FATAL message as the crash's detail.
  expect_crash_at_case_5("FAKE_FATAL_INDEX", "unspecified launch failure (fake)");
  EXPECT_LT(run_.seconds, 1.8) << diag();
}

TEST_F(CampaignSignalTest, ShrinkTimeBoundsShrinking) {
  start({{"FAKE_FAIL_FROM", "0"}, {"FAKE_DELAY_MS", "200"}, {"FAKE_SHRINK_DELAY_MS", "600"}},
        {"--lanes", "2", "--cases", "4", "--shrink-time", "1.5", "--variant", "tiled"});
  finish(60);
  EXPECT_EQ(run_.exit_code, 1) << diag();
  const auto es = entries();
  ASSERT_EQ(es.size(), 1u) << diag();
  EXPECT_EQ(es[0].found["shrink"]["state"], "limit") << es[0].found.dump();
  // 4 cases at 200 ms on 2 lanes, then at most 1.5 s of shrinking (plus one batch in flight).
  EXPECT_LT(run_.seconds, 8.0) << diag();
}

TEST_F(CampaignSignalTest, WatchdogCatchesOneHungLaneWhileOthersProgress) {
  // Lane hangs on case 3; the other lanes keep returning results for the
  // whole campaign. A watchdog per worker would see steady progress and never
  // fire until the end; one per job fires after its timeout.
  start({{"FAKE_FAIL_FROM", "1000000"}, {"FAKE_HANG_INDEX", "3"}, {"FAKE_DELAY_MS", "20"}, {"FAKE_CASE_FAILS", "0"}},
        {"--lanes", "4", "--time", "9", "--case-timeout", "1.5", "--variant", "tiled"});
  finish(60);
  EXPECT_EQ(run_.exit_code, 1) << diag();
  const auto es = entries();
  ASSERT_EQ(es.size(), 1u) << diag();
  EXPECT_EQ(es[0].found["verdict"]["failures"][0]["kind"], "hang") << es[0].found.dump();
  EXPECT_EQ(es[0].found["campaign"]["case_index"], 3);
  std::ifstream jin(json_path());
  ASSERT_TRUE(jin.good()) << diag();
  const auto j = nlohmann::json::parse(jin);
  ASSERT_EQ(j["failures"].size(), 1u);
  // Found within its timeout (1.5 s), the re-run alone that confirms it (1.5 s) and
  // slack, long before the campaign's 9 s end.
  EXPECT_LT(j["failures"][0]["seconds_to_find"].get<double>(), 6.0) << j.dump();
  EXPECT_GT(j["cases"].get<int64_t>(), 100) << "the other lanes should have gone on";
}

TEST_F(CampaignSignalTest, UnusableGpuAfterAKernelIsThatKernelsFailure) {
  // Case 4 "corrupts the GPU": its worker dies and no worker can start after it (one worker on
  // the device: the fake GPU stays usable for a second worker that had started before).
  const std::string marker = (dir_ / "gpu_lost").string();
  start({{"FAKE_FAIL_FROM", "1000000"}, {"FAKE_CONTEXT_INDEX", "4"}, {"FAKE_CONTEXT_FILE", marker}},
        {"--lanes", "1", "--workers-per-gpu", "1", "--cases", "30", "--variant", "tiled"});
  finish(60);
  EXPECT_EQ(run_.exit_code, 1) << "a lost GPU after a find is the kernel's failure, not exit 3" << diag();
  const auto es = entries();
  ASSERT_EQ(es.size(), 1u) << diag();
  const auto& f = es[0].found["verdict"]["failures"][0];
  EXPECT_EQ(f["kind"], "context") << es[0].found.dump();
  EXPECT_EQ(es[0].found["campaign"]["case_index"], 4);
  EXPECT_NE(run_.err.find("device is unusable"), std::string::npos) << diag();
}

}  // namespace
}  // namespace assay
