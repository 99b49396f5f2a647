// The softmax and normalisation generators (CPU): cases validate, reach the
// value classes and layouts the specs name (masked rows, constant rows,
// mean-spread rows, short rows, odd lengths, padding, offsets, every dtype,
// relations), shrink to valid smaller cases, survive a JSON round trip with
// the same id, and malformed cases are refused with a one-line error.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "harness/executor.h"
#include "harness/spec.h"
#include "harness/values.h"

namespace assay {
namespace {

class RowwiseGen : public ::testing::TestWithParam<std::string> {};

TEST_P(RowwiseGen, CasesValidateShrinkAndRoundTrip) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr);
  const GenPlan plan{7, GenConfig{4096}};
  std::set<std::string> dtypes;
  std::set<ValueClass> classes;
  bool short_row = false, odd_len = false, padded = false, offset = false, relation = false, special = false,
       edited_rows = false;
  for (int64_t i = 0; i < 400; ++i) {
    const Case c = generate_case(*spec, plan, i);
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary() << ": " << spec->validate(c).message();
    dtypes.insert(c.params["dtype"].get<std::string>());
    classes.insert(c.tensors[0].values.cls);
    const int64_t n = c.params["n"].get<int64_t>();
    short_row |= n > 0 && n < 32;
    odd_len |= n % 4 != 0;
    padded |= c.tensors[0].desc.strides[0] > std::max<int64_t>(n, 1);
    offset |= c.tensors[0].desc.offset % 4 != 0;
    relation |= c.params.contains("relation");
    special |= c.tensors[0].values.inject.active();
    edited_rows |= c.params.value("masked_every", 0) > 0 || c.params.value("constant_every", 0) > 0;
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->id(), c.id());
    if (i < 40) {
      for (const Case& s : spec->shrink(c)) {
        EXPECT_TRUE(spec->validate(s).ok()) << s.summary();
      }
    }
  }
  EXPECT_EQ(dtypes.size(), 3u);
  EXPECT_TRUE(classes.count(ValueClass::kMeanSpread));
  EXPECT_TRUE(short_row && odd_len && padded && offset);
  if (GetParam() != "softmax_bwd") {
    EXPECT_TRUE(edited_rows);
  }
  if (GetParam() == "softmax" || GetParam() == "layernorm" || GetParam() == "softmax_bwd" ||
      GetParam() == "layernorm_bwd") {
    EXPECT_TRUE(relation);
  }
  if (GetParam() == "softmax" || GetParam() == "layernorm" || GetParam() == "rmsnorm") {
    EXPECT_TRUE(special);
  }
}

TEST_P(RowwiseGen, MalformedCasesGetOneLineErrors) {
  const OpSpec* spec = find_spec(GetParam());
  const Case good = generate_case(*spec, GenPlan{3, GenConfig{64}}, 0);
  auto expect_error = [&](Case c, const std::string& needle) {
    const Status s = spec->validate(c);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
  };
  Case c = good;
  c.params["dtype"] = "int8";
  expect_error(c, "params.dtype");
  c = good;
  c.params["rows"] = -1;
  expect_error(c, "params.rows");
  c = good;
  c.tensors.pop_back();
  expect_error(c, "expected");
  c = good;
  c.tensors[0].desc.shape[0] += 1;
  expect_error(c, "tensor " + good.tensors[0].name);
}

TEST_P(RowwiseGen, ShrinkReachesTheSmallestShape) {
  const OpSpec* spec = find_spec(GetParam());
  Case c = generate_case(*spec, GenPlan{11, GenConfig{512}}, 5);
  // Always take the first (most aggressive) simpler case: a chain ends at rows = n = 1.
  for (int step = 0; step < 200; ++step) {
    auto s = spec->shrink(c);
    if (s.empty()) break;
    c = s.front();
  }
  EXPECT_EQ(c.params["rows"].get<int64_t>(), 1) << c.summary();
  EXPECT_EQ(c.params["n"].get<int64_t>(), 1) << c.summary();
}

INSTANTIATE_TEST_SUITE_P(Ops, RowwiseGen,
                         ::testing::Values("softmax", "softmax_bwd", "layernorm", "layernorm_bwd", "rmsnorm",
                                           "rmsnorm_bwd"));

}  // namespace
}  // namespace assay
