// Where a checked case's time goes, phase by phase, for `assay bench --split`: each phase's
// wall time summed over every lane thread of this process (a lane waits on its GPU inside
// "launch + check"). Timing costs two clock reads per phase and case.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace assay {

enum class Phase : int {
  kGenerate,         ///< drawing the case's params and recipes (generate_case), by one thread ahead of the lanes
  kInputs,           ///< host inputs: materialise, prepare, decode to fp64
  kReference,        ///< the op's host fp64 reference
  kBound,            ///< the op's host bound and the engine's accumulate/partial terms
  kDeviceReference,  ///< inputs drawn and the fp64 reference computed on the device (launches)
  kUpload,           ///< host images and references copied to the lane's device memory
  kVendor,           ///< the vendor column's host work: plans, graphs and its launches (its GPU time is in kWait)
  kLaunchCheck,      ///< the variant's launches (a relation's too), restores and device checks, enqueued
  kWait,             ///< waiting for the case's GPU work: the kernel, the vendor and the checks
  kProperties,       ///< the op's properties, host or device, and a failed relation's detail (read-backs included)
  kQueue,            ///< a lane waiting for its next case
  kCount
};

std::string_view phase_name(Phase p);

/// Seconds per phase since the last reset, summed over threads.
std::array<double, static_cast<size_t>(Phase::kCount)> phase_seconds();
void reset_phase_times();

/// Adds its lifetime to phase `p`.
class PhaseTimer {
 public:
  explicit PhaseTimer(Phase p) : p_(p), t0_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  Phase p_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace assay
