// harness/ulp_core.h: the store rounding the device references add to a narrow output's
// tolerance (StoreRounding, from store_rounding_for) is the host bounds' own
// (rowwise::store_rounding, i.e. half of bounds.h ulp_of), bit for bit, for fp32, fp16 and
// bf16, over every binade of each format and the values around its edges: zero, subnormals,
// min normal, powers of two and their neighbours, max finite, beyond it, Inf and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "harness/bounds.h"
#include "harness/dtype.h"
#include "harness/ulp_core.h"
#include "properties/rowwise_values.h"

namespace assay {
namespace {

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

std::vector<double> probes(DType t) {
  std::vector<double> v = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e300, -1e-300, 5e-324};
  for (double x : {min_subnormal(t), min_normal(t), max_finite(t)})
    for (double f : {0.25, 0.5, 0.999, 1.0, 1.001, 1.5, 2.0, 4.0}) v.push_back(x * f);
  for (int e = -160; e <= 140; ++e) {
    const double p = std::ldexp(1.0, e);
    for (double x : {p, std::nextafter(p, 0.0), std::nextafter(p, INFINITY), 1.3 * p, -p}) v.push_back(x);
  }
  return v;
}

TEST(UlpCore, StoreRoundingIsTheHostBoundsOwnBitForBit) {
  int64_t checked = 0;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    const StoreRounding s = store_rounding_for(t);
    EXPECT_EQ(s.none, t == DType::kF32);
    for (double x : probes(t)) {
      const double host = rowwise::store_rounding(x, t), shared = s(x);
      ++checked;
      ASSERT_TRUE(same_bits(host, shared))
          << dtype_name(t) << " at " << x << ": host " << host << ", shared " << shared;
    }
  }
  std::printf("[ measured ] store rounding: %lld values bit for bit\n", static_cast<long long>(checked));
}

TEST(UlpCore, UlpInIsUlpOfForEveryFloatDtype) {
  for (DType t : kAllDTypes) {
    if (!dtype_is_float(t)) continue;
    const FloatFormat f = float_format(t);
    for (double x : probes(t)) ASSERT_TRUE(same_bits(ulp_in(x, f), ulp_of(x, t))) << dtype_name(t) << " at " << x;
  }
  // The spacing at 1: 2^(1 - p).
  EXPECT_EQ(ulp_in(1.0, float_format(DType::kF16)), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_in(1.0, float_format(DType::kBF16)), std::ldexp(1.0, -7));
  EXPECT_EQ(store_rounding_for(DType::kF16)(1.0), std::ldexp(1.0, -11));
}

}  // namespace
}  // namespace assay
