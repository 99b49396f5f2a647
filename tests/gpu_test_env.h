// Shared by the GPU tests that start worker processes.
#pragma once

#include <cstdlib>
#include <string>

namespace assay {

/// $var when set and not empty, else the path this build made.
inline std::string from_env_or(const char* var, const char* built) {
  const char* env = std::getenv(var);
  return env != nullptr && *env != 0 ? env : built;
}

/// The assay executable that serves as the worker: $ASSAY_BINARY (set by
/// ci/gpu-checks.sh for a carried bundle) or the one this build made.
inline std::string assay_binary() { return from_env_or("ASSAY_BINARY", ASSAY_BINARY); }

#ifdef ASSAY_FAKE_WORKER
/// The scripted fake worker (tests/harness/fake_worker.cpp): $ASSAY_FAKE_WORKER (a carried
/// bundle) or the one this build made.
inline std::string fake_worker_binary() { return from_env_or("ASSAY_FAKE_WORKER", ASSAY_FAKE_WORKER); }
#endif

}  // namespace assay
