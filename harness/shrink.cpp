#include "harness/shrink.h"

#include <algorithm>
#include <chrono>

namespace assay {

std::vector<int64_t> smaller_values(int64_t x, int64_t lo) {
  std::vector<int64_t> out;
  for (int64_t v : {lo, lo + 1, x / 2, x - 1})
    if (v >= lo && v < x && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

ShrinkOutcome shrink_case(const OpSpec& spec, const Case& failing, const BatchJudge& judge, const ShrinkLimits& limits,
                          const std::function<void(const Case&, size_t)>& on_step) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto out_of_budget = [&](const ShrinkOutcome& o) {
    return o.evals >= limits.max_evals ||
           std::chrono::duration<double>(Clock::now() - t0).count() >= limits.max_seconds;
  };
  ShrinkOutcome o;
  o.minimal = failing;
  const size_t batch = std::max<size_t>(limits.batch, 1);
  bool progressed = true;
  while (progressed) {
    progressed = false;
    const std::vector<Case> candidates = spec.shrink(o.minimal);
    for (size_t b0 = 0; b0 < candidates.size(); b0 += batch) {
      if (out_of_budget(o)) {
        o.stopped_by_limit = true;
        return o;
      }
      const size_t b1 = std::min(candidates.size(), b0 + batch);
      const std::vector<Case> part(candidates.begin() + static_cast<std::ptrdiff_t>(b0),
                                   candidates.begin() + static_cast<std::ptrdiff_t>(b1));
      o.evals += static_cast<int>(part.size());
      if (auto hit = judge(part)) {
        o.minimal = part[*hit];
        o.last_hit = *hit;
        ++o.steps;
        if (on_step) on_step(o.minimal, *hit);
        progressed = true;
        break;
      }
    }
  }
  return o;
}

}  // namespace assay
