// Executors run jobs (a case through some variants) and hand back verdicts.
// InProcessExecutor: lanes as threads in this process (fast; a kernel fault
// ends the process). ProcessExecutor (harness/worker.h): worker processes,
// one per entry of the device list (a GPU may appear more than once), that
// survive faulty kernels. Both draw generated cases on one thread ahead of
// their lanes (generation is serialised within a process).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/spec.h"
#include "harness/status.h"
#include "harness/verdict.h"

namespace assay {

/// How a campaign's generated case `index` is drawn; identical in every
/// process, so a worker can rebuild a case from its index alone.
struct GenPlan {
  uint64_t seed = 1;
  GenConfig gen;
  /// The campaign's variants: case `index` is drawn inside the contract of
  /// targets[index % size] (empty: the op's whole domain).
  std::vector<std::string> targets;
};
/// The case a campaign draws at `index` (RapidCheck Random keyed by seed and
/// index, size ramping 0..99 as in RapidCheck), inside its target's contract.
Case generate_case(const OpSpec& spec, const GenPlan& plan, int64_t index);

struct Job {
  int64_t id = 0;
  std::optional<int64_t> gen_index;  ///< generate the case from the plan (fuzzing) ...
  Case c;                            ///< ... or run this case (shrinking, replay)
  std::vector<std::string> variants;
};

struct JobResult {
  int64_t id = 0;
  Status status;                  ///< infrastructure failure (not a kernel failure)
  std::vector<Verdict> verdicts;  ///< one per variant; crash/hang appear as failing verdicts
  /// No job finished: a stop was requested (harness/interrupt.h) or the deadline passed.
  bool interrupted = false;
};

class Executor {
 public:
  virtual ~Executor() = default;
  /// Queues a job; never blocks for long.
  virtual void submit(Job job) = 0;
  using Deadline = std::chrono::steady_clock::time_point;
  /// Blocks until some job finishes, a stop is requested (harness/interrupt.h)
  /// or `deadline` passes; in the last two cases the result has interrupted set
  /// and the jobs stay outstanding.
  virtual JobResult wait_until(Deadline deadline) = 0;
  JobResult wait() { return wait_until(Deadline::max()); }
  /// Jobs submitted and not yet returned by wait().
  virtual int64_t outstanding() const = 0;
  /// Good number of jobs in flight to keep every lane busy.
  virtual int64_t capacity() const = 0;
  virtual std::string device() const = 0;
  /// What kernel crashes and hangs cost the run so far (worker processes only).
  struct Recovery {
    int64_t worker_starts = 0;  ///< workers started after the first ones (replacements, isolation)
    double start_seconds = 0;   ///< of which waiting for those workers to start
    double seconds = 0;         ///< wall time spent replacing workers and isolating the culprit
  };
  virtual Recovery recovery() const { return {}; }
};

/// Lanes as threads on one GPU of this process.
StatusOr<std::unique_ptr<Executor>> make_in_process_executor(const OpSpec& spec, const GenPlan& plan, int lanes,
                                                             int device, const RunOptions& run);

}  // namespace assay
