// The hard ceiling one element of a device reference's output gets from its affine form
// (harness/op.h DeviceOutput): the engine's read-back and device-side properties use the same.
#pragma once

#include <cmath>

#include "harness/host_device.h"

namespace assay {

/// rel_out |ref| + rel_mag mag + floor; +Inf where that is NaN or where mag (1 + rel_mag) + floor
/// reaches `limit` (the output may overflow there, as the check kernel lets it).
ASSAY_HD inline double device_output_tol(double ref, double mag, double rel_out, double rel_mag, double floor,
                                         double limit) {
  const double t = rel_out * std::fabs(ref) + rel_mag * mag + floor;
  return std::isnan(t) || !(mag * (1.0 + rel_mag) + floor < limit) ? HUGE_VAL : t;
}

}  // namespace assay
