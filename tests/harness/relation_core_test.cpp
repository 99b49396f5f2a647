// harness/relation_core.h: the rule a metamorphic relation's compare applies to one element,
// which the check kernel runs on every element and the engine again for the failure's line.
// Each branch of the rule, with the figures worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/relation_core.h"

namespace assay {
namespace {

constexpr double kTop = 3.4028234663852886e38;  // fp32's largest finite value

TEST(RelationCore, TheTwoLaunchesMayDifferByBothTolerancesAndTheChangeOfTheExactResult) {
  // ref 1.0 -> 1.5 (change 0.5), tolerances 0.25 and 0.125: the outputs may differ by 0.875.
  const RelationElement inside = relation_element(1, 1.0, 0.25, 1.0, 1.5, 0.125, 1.875, kTop);
  EXPECT_FALSE(inside.broken);
  EXPECT_EQ(inside.tol, 0.875);
  EXPECT_EQ(inside.diff, 0.875);
  const RelationElement past = relation_element(1, 1.0, 0.25, 1.0, 1.5, 0.125, 1.876, kTop);
  EXPECT_TRUE(past.broken);
  EXPECT_EQ(past.tol, 0.875);
  EXPECT_DOUBLE_EQ(past.diff, 0.876);
}

TEST(RelationCore, TheScaleMovesTheOriginalOutputItsReferenceAndItsTolerance) {
  // scale 2: ref 2 * 3 = 6 against 6, tolerance 2 * 0.5 + 0.5 = 1.5; the output 2 * 3.5 = 7.
  const RelationElement e = relation_element(2, 3.0, 0.5, 3.5, 6.0, 0.5, 5.6, kTop);
  EXPECT_EQ(e.y1, 7.0);
  EXPECT_EQ(e.y2, 5.6);
  EXPECT_EQ(e.tol, 1.5);
  EXPECT_FALSE(e.broken);  // |5.6 - 7| = 1.4
  EXPECT_TRUE(relation_element(2, 3.0, 0.5, 3.5, 6.0, 0.5, 5.4, kTop).broken);  // 1.6
  // A negative scale counts its size in the tolerance.
  EXPECT_EQ(relation_element(-2, 3.0, 0.5, 3.0, -6.0, 0.5, -6.0, kTop).tol, 1.5);
}

TEST(RelationCore, ANonFiniteReferenceOrAnUnboundedElementIsNotJudged) {
  EXPECT_FALSE(relation_element(1, NAN, 0.1, 1.0, 1.0, 0.1, 100.0, kTop).broken);
  EXPECT_FALSE(relation_element(1, 1.0, 0.1, 1.0, INFINITY, 0.1, 100.0, kTop).broken);
  EXPECT_FALSE(relation_element(1, 1.0, INFINITY, 1.0, 1.0, 0.1, 100.0, kTop).broken);
  EXPECT_FALSE(relation_element(1, 1.0, 0.1, 1.0, 1.0, HUGE_VAL, 100.0, kTop).broken);
}

TEST(RelationCore, ANonFiniteOutputBreaksTheRelationUnlessTheResultMayRoundPastTheTop) {
  // Far from overflow: an Inf or a NaN in either launch breaks it.
  EXPECT_TRUE(relation_element(1, 1.0, 0.1, 1.0, 1.0, 0.1, INFINITY, kTop).broken);
  EXPECT_TRUE(relation_element(1, 1.0, 0.1, NAN, 1.0, 0.1, 1.0, kTop).broken);
  // The same Inf in both is equal, hence kept.
  EXPECT_FALSE(relation_element(1, 1.0, 0.1, INFINITY, 1.0, 0.1, INFINITY, kTop).broken);
  // Where reference + tolerance passes the top, overflow is the bound check's business.
  EXPECT_FALSE(relation_element(1, kTop, 1e32, kTop, 1.0, 0.1, INFINITY, kTop).broken);
  EXPECT_FALSE(relation_element(1, 1.0, 0.1, 1.0, kTop, 1e32, INFINITY, kTop).broken);
  // ... but not just below it.
  EXPECT_TRUE(relation_element(1, 1e38, 1e32, 1e38, 1.0, 0.1, INFINITY, kTop).broken);
}

}  // namespace
}  // namespace assay
