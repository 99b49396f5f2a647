// assay detection-table: which check catches which planted bug, so that each check earns its place.
// Every fp32 GEMM mutant (tests/mutants/gemm, the synthetic errors "one
// dropped k-term" and "tf32 where fp32 was promised" among them) and the
// correct kernels as controls run on fixed probe cases; per probe the
// element-wise checks are counted from an inspection (hard ceiling, expected
// level, exact tier, vendor-relative against cuBLAS pedantic with alpha = 4
// and vendor_floor) and the structural checks from the verdict (guards,
// poison, gaps, inputs, NaN/Inf pattern, determinism). The one-pass variance
// comes from the layernorm spec (its mutant and the Welford kernel) on
// mean-spread rows, judged by that spec's ceiling. A measurement written as
// Markdown and JSON, not a pass/fail test.
#pragma once

#include <string>

#include "harness/status.h"

namespace assay {

/// Runs the probes on `device`; writes detection.md and detection.json under
/// `out_dir` (if not empty) and returns the Markdown.
StatusOr<std::string> detection_table(int device, const std::string& out_dir);

}  // namespace assay
