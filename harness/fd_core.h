// The arithmetic of a central-difference directional derivative that the host engine
// (harness/gradcheck.cpp fd_directional) and the device gradchecks (references/device/)
// both run: the step from the direction's largest relative move, and per output the
// estimate and its error from the differences at h and h/2. The model behind both is spelt
// out at fd_directional (harness/gradcheck.h).
#pragma once

#include <cfloat>
#include <cmath>

#include "harness/host_device.h"

namespace assay::fd {

/// Unit roundoff of fp64.
inline constexpr double kU = 0x1p-53;

/// The step for a direction whose largest relative move is `move` = max_i |u_i| / max(|x_i|, 1):
/// the largest power of two <= cbrt(eps) * step_factor / move; 0 where there is none (move
/// zero, infinite or NaN).
ASSAY_HD inline double step(double move, double step_factor) {
  if (!(move > 0)) return 0;
  const double h_raw = ::cbrt(DBL_EPSILON) * step_factor / move;
  if (!(h_raw > 0) || !(h_raw < HUGE_VAL)) return 0;
  int e = 0;
  ::frexp(h_raw, &e);
  return ::ldexp(1.0, e - 1);
}

/// One output's estimate from D1 = D(h) and D2 = D(h/2), with s its scale (magnitude or |f|
/// over the points): Richardson R = (4 D2 - D1) / 3 or D1, and the error estimate beside it.
ASSAY_HD inline void estimate(double d1, double d2, double s, double h, double forward_ulps, bool richardson,
                              double& jvp, double& err) {
  const double r1 = forward_ulps * kU * s / h + 2 * kU * ::fabs(d1);
  const double r2 = forward_ulps * kU * s / (h / 2) + 2 * kU * ::fabs(d2);
  const double diff = ::fabs(d1 - d2);
  if (richardson) {
    jvp = (4 * d2 - d1) / 3;
    err = diff + (r1 + 4 * r2) / 3;
  } else {
    jvp = d1;
    err = 4 * diff / 3 + 7 * r1 / 3 + 4 * r2 / 3;
  }
}

/// The direction actually differenced at one coordinate, from x +- h u and x +- (h/2) u as
/// rounded: ((x + h u) - (x - h u)) / 2h (exact subtraction), Richardson-combined like J u.
ASSAY_HD inline double u_eff(double x, double u, double h, bool richardson) {
  const double e1 = ((x + h * u) - (x - h * u)) / (2 * h);
  if (!richardson) return e1;
  const double h2 = h / 2;
  const double e2 = ((x + h2 * u) - (x - h2 * u)) / (2 * h2);
  return (4 * e2 - e1) / 3;
}

}  // namespace assay::fd
