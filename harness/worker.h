// Worker processes: the parent owns the campaign and the corpus; each worker
// owns one GPU and runs jobs on its lanes. Parent and worker speak one line
// per message over pipes:
//   parent -> worker   RUN <id> <index> <v1,v2>        generate case <index> from the plan
//                      CASE <id> <v1,v2> <case-json>   run this case
//                      QUIT
//   worker -> parent   READY <device description>
//                      DONE <id> <verdicts-json>
//                      FATAL <id> <message>             infrastructure failure; the worker exits
// A worker that dies (fault, trap, abort, a context-poisoning error) or
// reports nothing for longer than the watchdog allows is killed and replaced;
// each (case, variant) it had in flight is then re-run alone in a fresh worker,
// and the one that kills it again comes back as a failing verdict of kind
// crash or hang. Nothing is lost, and the campaign goes on.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/executor.h"
#include "harness/spec.h"
#include "harness/status.h"

namespace assay {

struct WorkerConfig {
  std::string op;
  GenPlan plan;
  int lanes = 4;
  int device = 0;
  RunOptions run;
  int in_fd = 0, out_fd = 1;  ///< the protocol's pipes (a forked worker keeps its own stdout)
};

/// The worker's main loop on in_fd/out_fd (stdin/stdout by default); returns the process exit code
/// (0 after QUIT or end of input, 3 after a FATAL).
int run_worker(const WorkerConfig& config);

/// A verdict as a worker sends it: passing ones compact (short keys), the others whole
/// (Verdict::to_json). unwire_verdict reads both forms.
nlohmann::json wire_verdict(const Verdict& v);
Verdict unwire_verdict(const nlohmann::json& j);

struct ProcessOptions {
  std::string binary;              ///< the assay executable (it has the `worker` subcommand)
  std::vector<int> devices = {0};  ///< one worker per entry (a device may repeat)
  int lanes = 4;                   ///< lanes per worker
  double case_timeout_s = 60;      ///< watchdog: no result for this long with jobs in flight = hang
  double start_timeout_s = 120;    ///< a worker must say READY within this
  std::string sanitize;            ///< "", memcheck, racecheck, initcheck, synccheck
  std::string sanitizer = "compute-sanitizer";
  RunOptions run;
  /// Starts a worker without exec, for a host process whose kernels and callbacks live in
  /// itself (the Python package): forks, and in the child closes `parent_fds`, serves the
  /// protocol with run_worker on (in_fd, out_fd) and exits. Returns the child's pid, or -1.
  /// Empty: fork and exec `binary worker`.
  std::function<pid_t(int device, int in_fd, int out_fd, const std::vector<int>& parent_fds)> fork_worker;
};

/// Worker processes as an executor. Crashes and hangs come back as failing
/// verdicts (kCrash, kHang); sanitizer reports as kSanitizer.
StatusOr<std::unique_ptr<Executor>> make_process_executor(const std::string& op, const GenPlan& plan,
                                                          const ProcessOptions& opts);

}  // namespace assay
