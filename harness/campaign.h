// Campaign: fuzz one op's variants on one GPU with several lanes (host
// threads, each with its own stream and buffers), shrink each failure with
// RapidCheck's shrink tree (children evaluated in parallel batches, first
// failing child in order taken, so the result equals sequential shrinking),
// and store the minimal case in the corpus.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/executor.h"
#include "harness/spec.h"
#include "harness/status.h"
#include "harness/verdict.h"

namespace assay {

struct CampaignProgress {
  int64_t cases = 0;
  int64_t failures = 0;
  double elapsed_s = 0;
  double time_left_s = -1;  ///< -1: bounded by cases, not time
  bool shrinking = false;
};

struct CampaignOptions {
  std::vector<std::string> variants;  ///< empty: the spec's default (non-mutant) variants
  int64_t max_cases = 0;              ///< 0: no case limit
  double max_seconds = 0;             ///< 0: no time limit (both 0: 1000 cases)
  uint64_t seed = 1;
  int lanes = 4;                   ///< lanes per GPU
  std::vector<int> devices = {0};  ///< one worker per entry; a GPU may repeat (in-process: the first only)
  GenConfig gen;
  int shard_index = 0;  ///< this shard runs case indices i with i % shard_count == shard_index
  int shard_count = 1;
  std::string worker_binary;           ///< assay executable for worker processes; empty: lanes in this process
  /// Worker processes forked by the host instead (ProcessOptions::fork_worker); then this
  /// process never initialises CUDA, so its children can, and `devices` is not checked here.
  std::function<pid_t(int device, int in_fd, int out_fd, const std::vector<int>& parent_fds)> fork_worker;
  double case_timeout_s = 60;          ///< watchdog per case (worker processes only)
  std::string sanitize;                ///< compute-sanitizer tool (worker processes only)
  RunOptions run;                      ///< --repeat
  std::string corpus_dir = "corpora";  ///< empty: do not store
  bool keep_going = false;             ///< keep fuzzing a variant after its first failure
  int max_shrink_evals = 4000;
  double max_shrink_seconds = 120;  ///< per failure (--shrink-time); shrinking also ends with --time

  std::function<void(const CampaignProgress&)> progress;  ///< called about once a second
};

struct FoundFailure {
  std::string variant;
  Case original;
  Case shrunk;
  Verdict verdict;         ///< of the shrunk case
  int64_t case_index = 0;  ///< which generated case first failed
  int shrink_steps = 0;
  int shrink_evals = 0;
  double seconds_to_find = 0;
  double seconds_to_shrink = 0;
  /// "done", "limit" (--shrink-time, --time or the evaluation cap), "interrupted"
  /// (a signal), "skipped" (nothing more can run: the GPU was lost, or a stop).
  std::string shrink_state = "done";
  std::string path;  ///< corpus entry, if stored
};

struct VariantStats {
  int64_t cases = 0;           ///< cases inside the variant's contract
  int64_t not_applicable = 0;  ///< cases outside it (drawn for another variant)
  int64_t failures = 0;
  double max_ratio = 0;  ///< worst error/bound over passing cases
  /// Worst vendor-relative ratio (Metrics::vendor_rel_ratio) over passing cases; -1: never measured.
  double vendor_rel_max = -1;
  double vendor_rel_worst = -1;    ///< worst element-wise form (Metrics::vendor_rel_worst) over the same cases
  int64_t vendor_rel_cases = 0;    ///< passing cases where the vendor-relative ratio was measured
  int64_t accuracy_warnings = 0;   ///< passing cases with an accuracy warning
  std::string first_warning;       ///< the first of them, one line
  std::string vendor_not_run;      ///< why the vendor column did not run (the first reason seen), if it did not
  /// This variant's share of the campaign's wall time: each fuzzing interval split among the
  /// variants that ran in it, plus the variant's own shrinking.
  double seconds = 0;
};

struct CampaignReport {
  std::string op;
  std::string device;
  int lanes = 0;
  int64_t cases = 0;
  double seconds = 0;
  int64_t exact_cases = 0;
  int64_t device_ref_cases = 0;
  int64_t vendor_disagreements = 0;  ///< cases where the vendor library itself broke the bound
  /// The op's vendor counterpart (OpDef::vendor.name); empty: the op has none.
  std::string vendor;
  double vendor_warn_ratio = 0;  ///< its accuracy-warning ratio (OpDef::vendor.warn_ratio)
  std::map<std::string, VariantStats> per_variant;
  /// Worst error/bound over passing cases, per variant and baseline key.
  std::map<std::string, std::map<std::string, double>> ratios;
  std::vector<FoundFailure> failures;
  /// Workers started to replace one a kernel killed or hung, and the wall time spent on that and
  /// on re-running its cases alone to find the culprit (included in `seconds`).
  Executor::Recovery recovery;
  int interrupted = 0;  ///< the signal that stopped the campaign early (SIGINT, SIGTERM), or 0
  /// An infrastructure error that ended the campaign after failures were found
  /// (with none found, run_campaign returns the error itself).
  Status infra;
  double cases_per_second() const { return seconds > 0 ? static_cast<double>(cases) / seconds : 0; }
};

/// Runs a campaign on `opts.device`. A non-ok Status is an infrastructure
/// error (no GPU, a lane could not start, a CUDA context was lost) when no
/// failure was found; failures found in kernels are in the report, and each is
/// in the corpus the moment it is found (unshrunk), then replaced by its shrunk
/// case. A stop request (SIGINT, SIGTERM; harness/interrupt.h) ends the
/// campaign early with the report of what was done and report.interrupted set.
StatusOr<CampaignReport> run_campaign(const OpSpec& spec, const CampaignOptions& opts);

/// Adds one verdict of a case inside `v`'s contract to the variant's vendor-relative tally
/// (the worst ratio and the accuracy warnings of passing cases, why the column did not run).
void tally_vendor(VariantStats& st, const Verdict& v);

/// The vendor-relative cell of a variant, one word or number: "no vendor counterpart" when the
/// op has none, "not run" when its column never ran, else the worst ratio.
std::string vendor_cell(const CampaignReport& r, const VariantStats& st);

/// Provenance stored with a corpus entry: verdict, kernel source hash, assay
/// version, device and library versions, and how the case was generated.
nlohmann::json found_json(const FoundFailure& f, const std::string& device, const OpSpec& spec,
                          const CampaignOptions& opts);

}  // namespace assay
