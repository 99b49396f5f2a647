// Constants and comparisons many test files use, defined once: CI compiles the test files in
// batches (ASSAY_UNITY_TESTS), where two files' file-local definitions of one name collide.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>

namespace assay::test_values {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kU32 = 0x1p-24;  ///< fp32 unit roundoff
inline constexpr double kU64 = 0x1p-53;  ///< fp64 unit roundoff

/// Truncates v toward zero to p significant bits.
inline double trunc_bits(double v, int p) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  std::frexp(v, &e);
  return std::ldexp(std::trunc(std::ldexp(v, p - e)), e - p);
}

/// The same 64 bits.
inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// The same bits, or both NaN. A NaN's payload (the sign of the NaN of Inf * 0) depends on the
/// operand order the compiler picks for a commutative add, which IEEE 754 leaves open and which
/// differs between two inlined copies of one element function; the engine compares NaN patterns
/// only.
inline bool same_bits_or_nan(double a, double b) { return (std::isnan(a) && std::isnan(b)) || same_bits(a, b); }

}  // namespace assay::test_values
