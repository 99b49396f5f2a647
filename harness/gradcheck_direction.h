// The direction of the gradcheck relation: random signs, u_l = +-1, from the case's seed. Host
// and device draw the same signs, so for a forward linear in its operand (conv) the device
// path evaluates f(u) beside its reference while the host forms sum u . g from the same u. A
// sign direction is exact in every input dtype the device references read (fp32, fp16, bf16),
// costs a fraction of a nanosecond an element (64 signs per Philox block), and projects a
// gradient error e as a Gaussian direction does: E[(e . u)^2] = |e|^2.
#pragma once

#include <cstdint>

#include "harness/host_device.h"
#include "harness/value_core.h"

namespace assay {

/// Philox stream of the signs (apart from the value classes' streams).
inline constexpr uint64_t kGradcheckSignStream = 0x67726164ull;  // "grad"

/// u_l: bit (l mod 64) of the Philox block at counter l / 64.
ASSAY_HD inline double gradcheck_sign(uint64_t seed, int64_t l) {
  const uint64_t bits = value_core::philox(seed, static_cast<uint64_t>(l) >> 6, kGradcheckSignStream).u64(0);
  return ((bits >> (static_cast<uint64_t>(l) & 63)) & 1) != 0 ? -1.0 : 1.0;
}

}  // namespace assay
