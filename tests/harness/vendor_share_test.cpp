// The vendor column's share rules (harness/vendor_share.h), on the CPU.
#include "harness/vendor_share.h"

#include <gtest/gtest.h>

namespace assay {
namespace {

TEST(VendorShare, ALanesClockHoldsItsHostTimeToTheShare) {
  VendorClock c;
  EXPECT_TRUE(c.within(0.25, 100.0));  // the first case: nothing spent yet
  c.add(1.0);                          // one second in the library
  EXPECT_FALSE(c.within(0.25, 101.0));  // 1 s of 1 s
  EXPECT_FALSE(c.within(0.25, 103.9));  // 1 s of 3.9 s: over a quarter
  EXPECT_TRUE(c.within(0.25, 104.0));   // 1 s of 4 s
  EXPECT_FALSE(c.within(0.0, 104.0));
}

TEST(VendorShare, SlotsHoldTheProcessToItsShareOfTheLanesAtOnce) {
  VendorSlots s;
  for (int l = 0; l < 8; ++l) s.add_lane();
  EXPECT_TRUE(s.acquire(0.25));
  EXPECT_TRUE(s.acquire(0.25));
  EXPECT_FALSE(s.acquire(0.25));  // 2 of 8 lanes in the column
  EXPECT_TRUE(s.acquire(0.5));    // a larger share, a larger cap
  s.release();
  s.release();
  EXPECT_TRUE(s.acquire(0.25));
  EXPECT_EQ(s.inflight(), 2);
}

TEST(VendorShare, OneSlotAtLeast) {
  VendorSlots s;
  s.add_lane();
  EXPECT_TRUE(s.acquire(0.01));
  EXPECT_FALSE(s.acquire(0.01));
  s.release();
  EXPECT_EQ(s.inflight(), 0);
}

}  // namespace
}  // namespace assay
