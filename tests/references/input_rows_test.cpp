// references/device/input_rows.h: a device reference reads each fp32, fp16 and bf16 input as
// the host reference does (load_as_double on the decoded image): every one of the 65536 fp16
// and bf16 bit patterns widens to the same double, NaNs to the same bits (a NaN input reaches
// the reference, whose host and device values are compared bit for bit on the CPU), and rows,
// padded rows and offsets index the same elements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "harness/dtype.h"
#include "references/device/input_rows.h"

namespace assay {
namespace {

bool same_value(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(InputRows, EveryHalfBitPatternWidensAsTheHostDecodesIt) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> all(65536);
    for (uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<uint16_t>(b);
    const device_ref::InputRows rows = device_ref::input_rows(all.data(), 65536, 65536, t);
    for (uint32_t b = 0; b < 65536; ++b)
      ASSERT_TRUE(same_value(rows.at(b), load_as_double(t, &all[b])))
          << dtype_name(t) << " bits " << b << ": " << rows.at(b) << " vs " << load_as_double(t, &all[b]);
  }
}

TEST(InputRows, Fp32AndTheSupportedDtypes) {
  const float x[3] = {1.5f, -0.0f, 3.0e-39f};
  const device_ref::InputRows rows = device_ref::input_rows(x, 3, 3, DType::kF32);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_value(rows.at(i), static_cast<double>(x[i])));
  EXPECT_TRUE(device_ref::input_rows_support(DType::kF32));
  EXPECT_TRUE(device_ref::input_rows_support(DType::kF16));
  EXPECT_TRUE(device_ref::input_rows_support(DType::kBF16));
  EXPECT_FALSE(device_ref::input_rows_support(DType::kE4M3));
  EXPECT_FALSE(device_ref::input_rows_support(DType::kF64));
  // InputAt: row 1 of a padded fp16 image, element c.
  uint16_t h[8] = {0, 0, 0, 0, 0x3C00, 0xC000, 0, 0};  // row 1 (ld 4): 1.0, -2.0
  const device_ref::InputAt r1{device_ref::input_rows(h, 2, 4, DType::kF16), 4};
  EXPECT_EQ(r1[0], 1.0);
  EXPECT_EQ(r1[1], -2.0);
}

}  // namespace
}  // namespace assay
