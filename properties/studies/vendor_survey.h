// assay vendor-survey: how far cuBLAS is from the fp64 reference, per input
// dtype, value class and reduction length, on the very same rounded inputs.
// A measurement that feeds the bound models of harness/bounds.h (which accumulation
// model each dtype's tensor-core path needs), not a pass/fail check.
#pragma once

#include <string>

#include "harness/status.h"

namespace assay {

/// Runs the survey on `device`, writes Markdown and JSON under `out_dir`,
/// returns the Markdown.
StatusOr<std::string> vendor_survey(int device, const std::string& out_dir, int64_t mn, int reps);

}  // namespace assay
