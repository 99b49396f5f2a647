// Shrinking reaches the known minimum of planted bugs, on the CPU: the
// predicate stands in for a kernel whose failure condition we know exactly.
#include "harness/shrink.h"

#include <gtest/gtest.h>

#include "properties/gemm.h"

namespace assay {
namespace {

const OpSpec& gemm() {
  return *find_spec("gemm");
}

GemmParams params(const Case& c) {
  return *parse_gemm_case(c);
}

Case big_case() {
  return make_gemm_case(1021, 257, 2039, true, true, -0.75, 2.25, 16, 33, 4, 5, 2, 1, ValueClass::kNormal,
                        0xfeedfacecafebeefull);
}

// Judge a batch with a CPU predicate; the first failing index in order.
BatchJudge judge_with(std::function<bool(const Case&)> fails) {
  return [fails](const std::vector<Case>& batch) -> std::optional<size_t> {
    for (size_t i = 0; i < batch.size(); ++i)
      if (fails(batch[i])) return i;
    return std::nullopt;
  };
}

TEST(Shrink, AlwaysFailingReachesTheSimplestCase) {
  auto o = shrink_case(gemm(), big_case(), judge_with([](const Case&) { return true; }), {});
  const GemmParams g = params(o.minimal);
  EXPECT_EQ(g.m, 1);
  EXPECT_EQ(g.n, 1);
  EXPECT_EQ(g.k, 0);
  EXPECT_FALSE(g.trans_a);
  EXPECT_FALSE(g.trans_b);
  EXPECT_EQ(g.alpha, 1);
  EXPECT_EQ(g.beta, 0);
  for (const auto& t : o.minimal.tensors) {
    EXPECT_EQ(t.desc.offset, 0) << t.name;
    EXPECT_EQ(t.desc.strides[0], std::max<int64_t>(t.desc.shape[1], 1)) << t.name;
    EXPECT_FALSE(t.values.inject.active()) << t.name;
  }
}

TEST(Shrink, KTailBugShrinksToTheSmallestDroppedTail) {
  // A "k % 32 != 0 and m > 2" bug: the known minimum is m = 3, n = 1, k = 1.
  auto fails = [](const Case& c) {
    const GemmParams g = params(c);
    return g.k % 32 != 0 && g.m > 2;
  };
  auto o = shrink_case(gemm(), big_case(), judge_with(fails), {});
  const GemmParams g = params(o.minimal);
  EXPECT_EQ(g.m, 3);
  EXPECT_EQ(g.n, 1);
  EXPECT_EQ(g.k, 1);
  EXPECT_FALSE(o.stopped_by_limit);
}

TEST(Shrink, PaddingBugKeepsOnlyThePaddingItNeeds) {
  // A wrong-leading-dimension bug needs a padded C and two rows.
  auto fails = [](const Case& c) {
    const GemmParams g = params(c);
    return g.ldc > g.n && g.m >= 2;
  };
  auto o = shrink_case(gemm(), big_case(), judge_with(fails), {});
  const GemmParams g = params(o.minimal);
  EXPECT_EQ(g.m, 2);
  EXPECT_EQ(g.n, 1);
  EXPECT_EQ(g.k, 0);
  EXPECT_GT(g.ldc, g.n);
  EXPECT_EQ(o.minimal.find("A")->desc.offset, 0);
}

TEST(Shrink, ResultDoesNotDependOnBatchSize) {
  auto fails = [](const Case& c) {
    const GemmParams g = params(c);
    return g.n > 5 && g.k > 40;
  };
  const Case one = shrink_case(gemm(), big_case(), judge_with(fails), {4000, 60, 1}).minimal;
  const Case eight = shrink_case(gemm(), big_case(), judge_with(fails), {4000, 60, 8}).minimal;
  EXPECT_EQ(one.to_json(), eight.to_json());
}

TEST(Shrink, StopsAtTheEvaluationLimit) {
  auto o = shrink_case(gemm(), big_case(), judge_with([](const Case&) { return false; }), {3, 60, 1});
  EXPECT_TRUE(o.stopped_by_limit);
  EXPECT_EQ(o.steps, 0);
  EXPECT_EQ(o.minimal.to_json(), big_case().to_json());
}

}  // namespace
}  // namespace assay
