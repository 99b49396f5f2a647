// Triage: re-run a stored case and explain it. Metrics against each
// reference, where the errors sit (error locator), how the verdict changes
// when one dimension moves around its value, the first bad elements with
// their inputs, and an SVG heatmap and HTML report written beside the case.
#pragma once

#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/executor.h"
#include "harness/report.h"
#include "harness/spec.h"
#include "harness/status.h"

namespace assay {

namespace gpu {
class Lane;
}

struct TriageOptions {
  std::string variant;                               ///< empty: the case's variant, else the spec's first default
  bool sweep_enabled = true;                         ///< false: no dimension sweep
  std::vector<std::string> sweep;                    ///< integer params to move; empty: sweep_params(case)
  int sweep_radius = 2;                              ///< values v-r .. v+r (>= 0)
  int max_elements = 5;                              ///< bad elements listed with their inputs
  std::string html_path;                             ///< empty: no files
  std::string svg_path;
};

/// The params a triage sweep moves by default: the op's extents (ParamDef::extent) that the case
/// sets, in declaration order (gemm: m, n, k; attention: Sq, Sk; softmax: rows, n); for an op
/// without extents, its integer params.
std::vector<std::string> sweep_params(const Case& c);
/// The sweep's step for `key`: the param's own (ParamDef::multiple_of: rope's even head_dim), else 1.
int64_t sweep_step(const Case& c, const std::string& key);

struct TriageResult {
  std::string text;  ///< the human report (several lines)
  bool failing = false;
};

/// Error matrix from an inspection: |out - ref| / tol per element, NaN where
/// the NaN/Inf pattern differs, Inf where the bound is zero and out != ref.
ErrorMatrix error_matrix(const Inspection& in);

/// `exec` runs verdicts (worker processes survive a crashing case); `lane`
/// (in this process) inspects elements when the case does not crash.
StatusOr<TriageResult> triage(const OpSpec& spec, const Case& c, Executor& exec, gpu::Lane& lane,
                              const TriageOptions& opts);

}  // namespace assay
