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

#ifdef ASSAY_FAKE_WORKER
/// The scripted fake worker (tests/harness/fake_worker.cpp): $ASSAY_FAKE_WORKER (a carried
/// bundle) or the one this build made.
inline std::string fake_worker_binary() {
  const char* env = std::getenv("ASSAY_FAKE_WORKER");
  return env != nullptr && *env != 0 ? env : ASSAY_FAKE_WORKER;
}
#endif

}  // namespace assay
