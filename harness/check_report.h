// The JSON and JUnit reports of every checking command (fuzz, gradcheck, replay, baseline check,
// exhaustive, false-alarm): one model, two writers. A command fills a CheckReport as it goes and
// writes it when it ends, also when it cannot run (no GPU: an empty suite marked skipped, with the
// reason) or is interrupted (what ran so far, marked interrupted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"

namespace assay {

/// One checked unit: a variant of a campaign, a stored case of a replay, a sweep, a vendor
/// configuration. Exactly one of passed / failed (failure non-empty) / skipped (skipped non-empty).
struct CheckCase {
  std::string name;
  double seconds = 0;      ///< this unit's own time, >= 0
  int64_t cases = 0;       ///< cases it ran (0 where the command does not count cases)
  std::string failure;     ///< non-empty: failed; one line
  std::string detail;      ///< the failure's body: shrunk case, replay command; may be multi-line
  std::string skipped;     ///< non-empty: not run; the reason
  std::string output;      ///< one line of metrics (JUnit system-out)
  nlohmann::json fields;   ///< command-specific fields for the JSON report (an object, or null)
};

struct CheckReport {
  std::string command;             ///< "fuzz", "gradcheck", "replay", "baseline check", "exhaustive", "false-alarm"
  std::string target;              ///< what was checked: the op, the corpus paths, "vendor GEMMs"
  std::string device;              ///< the GPU that ran it; empty when none did
  std::optional<uint64_t> seed;    ///< the campaign's seed, where there is one
  double seconds = 0;              ///< wall time of the whole command
  std::string skipped;             ///< non-empty: the command ran nothing; the reason (e.g. no CUDA GPU)
  bool interrupted = false;        ///< stopped early (SIGINT): the cases hold what ran until then
  std::vector<CheckCase> cases;
  nlohmann::json fields;           ///< command-specific top-level JSON fields (object or null)

  int failures() const;
  int skips() const;
};

/// {"command", "target", "assay_version", "git_revision", "device", "seed", "seconds", "status"
/// ("passed" | "failed" | "skipped" | "interrupted"), "skip_reason", "tests": [{"name", "status",
/// "seconds", "cases", "message", ...fields}]} with `fields` merged in at the top (the common
/// keys win).
nlohmann::json report_json(const CheckReport& r);

/// JUnit XML: one <testsuite name="assay.<command>.<target>"> with a <testcase> per CheckCase (its
/// own time), <failure> / <skipped message> as they apply, and <properties> naming the device,
/// seed, version and revision. A skipped command is a suite with skipped="1" and one testcase
/// named after the command that carries the reason (JUnit consumers hide empty suites).
std::string report_junit(const CheckReport& r);

/// Writes report_json to `json_path` and report_junit to `junit_path`, each atomically; an empty
/// path writes nothing.
Status write_reports(const CheckReport& r, const std::string& json_path, const std::string& junit_path);

/// XML text/attribute escaping; control characters other than tab and newline become spaces.
std::string xml_escape(const std::string& s);

}  // namespace assay
