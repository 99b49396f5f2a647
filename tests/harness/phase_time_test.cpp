// The bench's time split: timers add their lifetime to their phase, from any thread, and
// case generation is timed where every executor calls it.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "harness/executor.h"
#include "harness/phase_time.h"
#include "harness/spec.h"

namespace assay {
namespace {

constexpr size_t idx(Phase p) { return static_cast<size_t>(p); }

TEST(PhaseTime, TimersAddTheirLifetimeFromEveryThread) {
  reset_phase_times();
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([] {
      const PhaseTimer t(Phase::kReference);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    });
  for (auto& t : ts) t.join();
  const auto s = phase_seconds();
  EXPECT_GE(s[idx(Phase::kReference)], 4 * 0.020);
  EXPECT_LT(s[idx(Phase::kReference)], 4 * 0.020 + 1.0);
  EXPECT_EQ(s[idx(Phase::kBound)], 0.0);
  reset_phase_times();
  EXPECT_EQ(phase_seconds()[idx(Phase::kReference)], 0.0);
}

TEST(PhaseTime, GeneratingACaseIsTimed) {
  const OpSpec* spec = find_spec("softmax");
  ASSERT_NE(spec, nullptr);
  reset_phase_times();
  for (int i = 0; i < 20; ++i) (void)generate_case(*spec, GenPlan{1, GenConfig{}}, i);
  EXPECT_GT(phase_seconds()[idx(Phase::kGenerate)], 0.0);
  EXPECT_EQ(phase_seconds()[idx(Phase::kLaunchCheck)], 0.0);
  for (size_t i = 0; i < idx(Phase::kCount); ++i) EXPECT_NE(phase_name(static_cast<Phase>(i)), "?");
}

}  // namespace
}  // namespace assay
