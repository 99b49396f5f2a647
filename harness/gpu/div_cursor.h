// (x / d, x % d) along x = start, start + step, ...: one division up front, then an add and a
// compare per step. A 64-bit division is a software routine on the GPU, and a grid-stride loop
// over a large tensor that divided its index by a row length each element spent a fifth of its
// time there (the check and materialise kernels).
#pragma once

#include <cstdint>

#include "harness/host_device.h"

namespace assay::gpu {

/// d > 0, start >= 0, step > 0.
struct DivCursor {
  int64_t q, r, dq, dr, d;
  ASSAY_HD DivCursor(int64_t start, int64_t step, int64_t den)
      : q(start / den), r(start % den), dq(step / den), dr(step % den), d(den) {}
  ASSAY_HD void advance() {
    q += dq;
    r += dr;
    if (r >= d) r -= d, ++q;
  }
};

}  // namespace assay::gpu
