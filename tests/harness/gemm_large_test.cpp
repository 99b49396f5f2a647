// CPU tests of the large-case policies of the gemm op
// (properties/gemm.h): where inputs are drawn (host or device) and
// which large cases run the determinism rerun and the vendor column. Both
// must be pure functions of the case, so a stored case replays alike.
#include <gtest/gtest.h>

#include "properties/gemm.h"

namespace assay {
namespace {

Case square(int64_t m, int64_t n, int64_t k, uint64_t seed, ValueClass cls = ValueClass::kNormal) {
  return make_gemm_case(m, n, k, false, false, 1, 0, 0, 0, 0, 0, 0, 0, cls, seed);
}

GemmParams large_params(const Case& c) {
  auto g = parse_gemm_case(c);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : GemmParams{};
}

TEST(GemmLarge, DeviceInputsFollowTheThresholdOnly) {
  // kDeviceRefWork = 2^22: 256 * 128 * 128 is on it, one more row is above.
  static_assert(kDeviceRefWork == int64_t{1} << 22);
  EXPECT_FALSE(gemm_inputs_on_device(large_params(square(256, 128, 128, 1))));
  EXPECT_TRUE(gemm_inputs_on_device(large_params(square(257, 128, 128, 1))));
  EXPECT_FALSE(gemm_inputs_on_device(large_params(square(64, 64, 0, 1))));  // k = 0 counts as 1
  EXPECT_TRUE(gemm_inputs_on_device(large_params(square(4096, 4096, 4096, 1))));
  // Neither values, seed, scalars nor layout change the choice: only m*n*max(k,1).
  for (uint64_t seed : {0ull, 1ull, 77ull, ~0ull})
    for (ValueClass cls : {ValueClass::kNormal, ValueClass::kSmallInt, ValueClass::kPermutation}) {
      const Case big = make_gemm_case(300, 257, 129, true, true, 1.5, 0.5, 3, 1, 2, 4, 5, 1, cls, seed);
      EXPECT_TRUE(gemm_inputs_on_device(large_params(big)));
      const Case small = make_gemm_case(31, 17, 129, true, false, -1, 2, 3, 0, 2, 1, 0, 0, cls, seed);
      EXPECT_FALSE(gemm_inputs_on_device(large_params(small)));
    }
}

TEST(GemmLarge, SmallAndMediumCasesRunEveryCheck) {
  // Everything the generator can make (<= 2^31 multiply-adds) and the large
  // race case of gemm_gpu_test (2048^2 x 1024 = 2^32) get the rerun and cuBLAS.
  for (uint64_t seed = 0; seed < 200; ++seed) {
    EXPECT_TRUE(gemm_runs_every_check(square(5, 6, 7, seed)));
    EXPECT_TRUE(gemm_runs_every_check(square(300, 257, 129, seed)));
    EXPECT_TRUE(gemm_runs_every_check(square(2048, 2048, 512, seed)));
    EXPECT_TRUE(gemm_runs_every_check(square(2048, 2048, 1024, seed, ValueClass::kSmallInt)));
  }
}

TEST(GemmLarge, LargeCasesAreSampledAsAPureFunctionOfTheCase) {
  int full = 0;
  constexpr int kCases = 400;
  for (uint64_t seed = 0; seed < kCases; ++seed) {
    Case c = square(4096, 4096, 4096, seed);
    const bool every = gemm_runs_every_check(c);
    full += every ? 1 : 0;
    EXPECT_EQ(gemm_runs_every_check(c), every);  // same answer twice
    // The variant a case was stored for does not change it, nor a round trip
    // through the case file.
    Case stored = c;
    stored.variant = "tiled";
    EXPECT_EQ(gemm_runs_every_check(stored), every);
    auto back = Case::from_json(stored.to_json());
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(gemm_runs_every_check(*back), every);
  }
  // About a quarter run everything (binomial(400, 1/4): mean 100, sd 8.7).
  EXPECT_GT(full, 50);
  EXPECT_LT(full, 150);
}

}  // namespace
}  // namespace assay
