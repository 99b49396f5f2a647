// The spacing of a binary floating-point format at |x| (bounds.h ulp_of) and the
// rounding of a value stored into a narrower output (half that spacing), as ASSAY_HD
// arithmetic on the format's numbers: ulp_of and rowwise::store_rounding on the host
// and the device references' tolerances (references/device/) evaluate this one
// formula, so a device tolerance of an fp16 / bf16 output has the host's bits.
// The dtype lookups are made on the host (store_rounding_for, bounds.h). Plain
// doubles, no harness header but host_device.h, no CUDA header.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/host_device.h"

namespace assay {

enum class DType : uint8_t;  // harness/dtype.h

/// The numbers of a float format that its spacing needs.
struct FloatFormat {
  int p = 0;                 ///< precision: -log2(unit roundoff) (fp16 11, bf16 8)
  double max_finite = 0;     ///< largest finite value
  double min_normal = 0;     ///< smallest positive normal
  double min_subnormal = 0;  ///< smallest positive subnormal
};

/// 2^(floor(log2|x|) - p + 1), at least min_subnormal, at most the spacing at max_finite;
/// NaN for NaN. ilogb and ldexp are exact on host and device alike.
ASSAY_HD inline double ulp_in(double x, const FloatFormat& f) {
  double ax = ::fabs(x);
  if (ax != ax) return ax;
  if (ax >= f.max_finite) ax = f.max_finite;
  if (ax < f.min_normal) return f.min_subnormal;
  return ::ldexp(1.0, ::ilogb(ax) - f.p + 1);
}

/// The store's rounding of a value computed in fp32 at |y| <= y_abs into the output format:
/// half its spacing there; 0 for an fp32 output (`none`), whose rounding the computation's
/// own budget already holds.
struct StoreRounding {
  bool none = true;
  FloatFormat out;
  ASSAY_HD double operator()(double y_abs) const { return none ? 0.0 : 0.5 * ulp_in(y_abs, out); }
};

/// The numbers of float dtype `t` (host only; harness/bounds.cpp).
FloatFormat float_format(DType t);
/// The store's rounding into float dtype `out`: none for fp32 (as rowwise::store_rounding);
/// host only (harness/bounds.cpp), the result is plain data for a kernel.
StoreRounding store_rounding_for(DType out);

}  // namespace assay
