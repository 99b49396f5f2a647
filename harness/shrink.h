// Greedy shrinking over a spec's candidates: keep the first candidate (in the
// spec's order) that still fails, ask again, stop when none fails. Candidates
// are judged in batches so a GPU campaign can run a batch across its lanes;
// the result does not depend on the batch size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "harness/case.h"
#include "harness/spec.h"

namespace assay {

struct ShrinkLimits {
  int max_evals = 4000;
  double max_seconds = 120;
  size_t batch = 1;
};

struct ShrinkOutcome {
  Case minimal;
  int steps = 0;
  int evals = 0;
  size_t last_hit = 0;  ///< index within the batch that produced `minimal`'s last step
  bool stopped_by_limit = false;
};

/// Judges a batch; returns the index of the first failing case, if any. May
/// return std::nullopt and set its own error state to stop shrinking.
using BatchJudge = std::function<std::optional<size_t>(const std::vector<Case>&)>;

/// Candidates for shrinking an integer x toward `lo`, most aggressive first:
/// lo, lo + 1, x / 2, x - 1 (those below x and at least lo, no repeats).
std::vector<int64_t> smaller_values(int64_t x, int64_t lo);

ShrinkOutcome shrink_case(const OpSpec& spec, const Case& failing, const BatchJudge& judge, const ShrinkLimits& limits,
                          const std::function<void(const Case&, size_t)>& on_step = {});

}  // namespace assay
