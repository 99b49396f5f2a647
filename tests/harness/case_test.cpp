// Case materialisation and serialisation: determinism, golden hashes, JSON
// round trips and one-line errors for hostile files.
#include "harness/case.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "properties/gemm.h"
#include "harness/values.h"

namespace assay {
namespace {

std::vector<unsigned char> build(const TensorSpec& t) {
  std::vector<unsigned char> buf(static_cast<size_t>(t.desc.extent()) * dtype_size(t.desc.dtype));
  materialize(t.desc, t.values, fnv1a64(t.name.data(), t.name.size()), buf.data());
  return buf;
}

Case sample() {
  return make_gemm_case(7, 5, 33, true, false, 1.5, 0.5, 3, 0, 1, 2, 0, 1, ValueClass::kNormal, 0x0123456789abcdefull);
}

TEST(Philox, KnownAnswer) {
  // Random123's published known-answer test for philox4x32-10 with a zero
  // counter and key: {6627e8d5, e169c58d, bc57ac4c, 9b00dbd8}.
  uint32_t ctr[4] = {0, 0, 0, 0};
  const uint32_t key[2] = {0, 0};
  Philox4x32::block(ctr, key);
  EXPECT_EQ(ctr[0], 0x6627e8d5u);
  EXPECT_EQ(ctr[1], 0xe169c58du);
  EXPECT_EQ(ctr[2], 0xbc57ac4cu);
  EXPECT_EQ(ctr[3], 0x9b00dbd8u);
}

TEST(Materialize, DeterministicAcrossCalls) {
  const Case c = sample();
  for (const auto& t : c.tensors) EXPECT_EQ(build(t), build(t)) << t.name;
}

TEST(Materialize, GoldenHash) {
  // Pinned: a change here means stored corpora no longer rebuild the same
  // inputs. Update only with a case-format version bump.
  const Case c = sample();
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& t : c.tensors) {
    const auto buf = build(t);
    h = fnv1a64(buf.data(), buf.size(), h);
  }
  EXPECT_EQ(h, 0x267b5af430adefe7ull) << std::hex << "actual golden hash 0x" << h;
}

TEST(Materialize, ValuesDependOnLogicalIndexNotLayout) {
  // The same logical matrix in a padded layout holds the same values.
  Case a = make_gemm_case(4, 6, 5, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kNormal, 42);
  Case b = make_gemm_case(4, 6, 5, false, false, 1, 0, 7, 0, 0, 3, 0, 0, ValueClass::kNormal, 42);
  const auto ba = build(*a.find("A")), bb = build(*b.find("A"));
  const float* fa = reinterpret_cast<const float*>(ba.data());
  const float* fb = reinterpret_cast<const float*>(bb.data());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(fa[i * 5 + j], fb[3 + i * 12 + j]);
  // Gaps hold the NaN canary.
  EXPECT_TRUE(std::isnan(fb[3 + 5]));
  EXPECT_TRUE(std::isnan(fb[0]));
}

TEST(Materialize, ValueClassesHaveTheirShape) {
  TensorDesc d = TensorDesc::contiguous(DType::kF32, {4096});
  std::vector<float> v(4096);
  auto run = [&](ValueClass cls) {
    ValueRecipe r;
    r.cls = cls;
    r.seed = 7;
    materialize(d, r, 1, v.data());
  };
  run(ValueClass::kSameSign);
  for (float x : v) EXPECT_GT(x, 0.0f);
  run(ValueClass::kSmallInt);
  bool seen_neg = false, seen_pos = false;
  for (float x : v) {
    EXPECT_EQ(x, std::round(x));
    EXPECT_LE(std::fabs(x), 2.0f);
    seen_neg |= x < 0;
    seen_pos |= x > 0;
  }
  EXPECT_TRUE(seen_neg && seen_pos);
  run(ValueClass::kNormal);
  double mean = 0, var = 0;
  for (float x : v) mean += x;
  mean /= v.size();
  for (float x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.1);
}

TEST(CaseJson, RoundTripKeepsIdAndFields) {
  Case c = sample();
  c.variant = "tiled";
  auto back = Case::from_json(nlohmann::json::parse(c.to_json().dump()));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->id(), c.id());
  EXPECT_EQ(back->to_json(), c.to_json());
  EXPECT_EQ(back->find("A")->values.seed, 0x0123456789abcdefull);
}

TEST(CaseJson, IdDependsOnContent) {
  Case a = sample(), b = sample();
  b.find("B")->values.seed ^= 1;
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(a.id().size(), 16u);
}

// Each hostile edit must give a one-line invalid-argument naming the field.
struct Hostile {
  const char* what;
  std::function<void(nlohmann::json&)> edit;
  const char* expect;
};

TEST(CaseJson, HostileInputsGiveOneLineErrors) {
  const std::vector<Hostile> cases = {
      {"newer format", [](auto& j) { j["format"] = 99; }, "newer"},
      {"missing op", [](auto& j) { j.erase("op"); }, "$.op: missing"},
      {"op with path", [](auto& j) { j["op"] = "../../etc"; }, "$.op"},
      {"tensor name with slash", [](auto& j) { j["tensors"][0]["name"] = "a/b"; }, "$.tensors[0].name"},
      {"negative extent", [](auto& j) { j["tensors"][1]["shape"][0] = -3; }, "$.tensors[1].shape[0]"},
      {"huge shape", [](auto& j) { j["tensors"][1]["shape"][0] = 1ll << 50; }, "$.tensors[1].shape[0]"},
      {"shape is a string", [](auto& j) { j["tensors"][0]["shape"] = "big"; }, "$.tensors[0].shape"},
      {"bad dtype", [](auto& j) { j["tensors"][2]["dtype"] = "fp128"; }, "unknown dtype 'fp128'"},
      {"seed not hex", [](auto& j) { j["tensors"][0]["values"]["seed"] = "0xZZ"; }, "values.seed"},
      {"seed as number", [](auto& j) { j["tensors"][0]["values"]["seed"] = 5; }, "values.seed"},
      {"unknown class", [](auto& j) { j["tensors"][0]["values"]["class"] = "chaos"; }, "unknown value class"},
      {"tensors not array", [](auto& j) { j["tensors"] = 3; }, "$.tensors"},
      {"duplicate name", [](auto& j) { j["tensors"][1]["name"] = "A"; }, "duplicate"},
  };
  for (const auto& h : cases) {
    nlohmann::json j = sample().to_json();
    h.edit(j);
    auto r = Case::from_json(j, "x.json");
    ASSERT_FALSE(r.ok()) << h.what;
    const std::string msg = r.status().message();
    EXPECT_NE(msg.find(h.expect), std::string::npos) << h.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << h.what;
    EXPECT_EQ(msg.rfind("x.json", 0), 0u) << h.what << ": " << msg;
  }
}

TEST(GemmCase, ParseChecksTensorsAgainstParams) {
  Case c = sample();
  ASSERT_TRUE(parse_gemm_case(c).ok());
  c.params["k"] = 34;  // A and B no longer match
  auto r = parse_gemm_case(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor A must be fp32"), std::string::npos) << r.status().message();
  c = sample();
  c.params["alpha"] = 0.1;  // not an fp32 value
  EXPECT_FALSE(parse_gemm_case(c).ok());
  c = sample();
  c.params.erase("beta");
  EXPECT_NE(parse_gemm_case(c).status().message().find("params.beta is missing"), std::string::npos);
}

}  // namespace
}  // namespace assay

namespace assay {
namespace {

TEST(Materialize, ParallelAndSerialAgreeBitForBit) {
  // 2^21 elements takes the threaded path; a 1-row view of the same logical
  // values (checked element by element) takes the serial one per row.
  TensorDesc big = TensorDesc::contiguous(DType::kF32, {2048, 1024});
  ValueRecipe r;
  r.cls = ValueClass::kNormal;
  r.seed = 77;
  std::vector<float> all(static_cast<size_t>(big.extent()));
  materialize(big, r, 5, all.data());
  for (int64_t row : {0, 1, 1023, 2047}) {
    for (int64_t col : {0, 1, 511, 1023}) {
      const int64_t logical = row * 1024 + col;
      const float want = static_cast<float>(recipe_value(r, 5, static_cast<uint64_t>(logical)));
      EXPECT_EQ(all[static_cast<size_t>(logical)], want) << row << "," << col;
    }
  }
}

}  // namespace
}  // namespace assay

namespace assay {
namespace {

TEST(MaterializeOutput, PoisonOnTheViewCanaryInTheGapsEmptyViewsToo) {
  TensorDesc d = TensorDesc::contiguous(DType::kF32, {3, 4});
  d.strides = {6, 1};  // two gap elements after each row
  d.offset = 1;
  std::vector<float> buf(static_cast<size_t>(d.extent()));
  materialize_output(d, buf.data());
  const auto mask = d.coverage_mask();
  for (size_t e = 0; e < buf.size(); ++e) {
    unsigned char gap[4];
    write_gap_canary(DType::kF32, gap);
    if (mask[e]) EXPECT_TRUE(is_output_poison(DType::kF32, &buf[e])) << e;
    else EXPECT_EQ(std::memcmp(&buf[e], gap, 4), 0) << e;
  }
  for (auto shape : {std::vector<int64_t>{0, 5}, std::vector<int64_t>{5, 0}}) {
    TensorDesc empty = TensorDesc::contiguous(DType::kF32, shape);
    empty.offset = 2;
    std::vector<float> b(static_cast<size_t>(std::max<int64_t>(empty.extent(), 1)));
    materialize_output(empty, b.data());  // must not divide by the zero extent
    ValueRecipe r;
    materialize(empty, r, 1, b.data());
  }
}

}  // namespace
}  // namespace assay
