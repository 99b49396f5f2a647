// Shared by the GPU tests that start worker processes.
#pragma once

#include <cstdlib>
#include <string>

namespace assay {

/// The assay executable that serves as the worker: $ASSAY_BINARY (set by
/// ci/gpu-checks.sh for a carried bundle) or the one this build made.
inline std::string assay_binary() {
  const char* env = std::getenv("ASSAY_BINARY");
  return env != nullptr && *env != 0 ? env : ASSAY_BINARY;
}

}  // namespace assay
