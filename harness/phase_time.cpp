#include "harness/phase_time.h"

#include <atomic>

namespace assay {
namespace {

std::array<std::atomic<int64_t>, static_cast<size_t>(Phase::kCount)>& totals() {
  static std::array<std::atomic<int64_t>, static_cast<size_t>(Phase::kCount)> t{};
  return t;
}

}  // namespace

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::kGenerate:
      return "generate";
    case Phase::kInputs:
      return "host inputs";
    case Phase::kReference:
      return "host reference";
    case Phase::kBound:
      return "host bound";
    case Phase::kDeviceReference:
      return "device reference";
    case Phase::kUpload:
      return "upload";
    case Phase::kVendor:
      return "vendor column";
    case Phase::kLaunchCheck:
      return "launch + check";
    case Phase::kWait:
      return "wait";
    case Phase::kProperties:
      return "properties";
    case Phase::kQueue:
      return "waiting for a case";
    case Phase::kCount:
      break;
  }
  return "?";
}

std::array<double, static_cast<size_t>(Phase::kCount)> phase_seconds() {
  std::array<double, static_cast<size_t>(Phase::kCount)> s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<double>(totals()[i].load()) * 1e-9;
  return s;
}

void reset_phase_times() {
  for (auto& t : totals()) t.store(0);
}

PhaseTimer::~PhaseTimer() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
  totals()[static_cast<size_t>(p_)].fetch_add(static_cast<int64_t>(ns), std::memory_order_relaxed);
}

}  // namespace assay
