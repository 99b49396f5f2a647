// The op model's derivations on the CPU: generation inside a contract by
// construction (and still at its edges), validation from the declarations,
// shrinking that stays inside, probes that step outside exactly one rule, and
// the one-line errors of broken declarations.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "harness/executor.h"
#include "harness/op_model.h"

namespace assay {
namespace {

Status zero_ref(const Case&, const std::vector<HostTensor>& in, std::vector<OutputRef>& out) {
  (void)in;
  out.clear();
  return ok_status();
}

OpDef toy() {
  OpDef op;
  op.name = "toy_model_op";
  op.params = {ParamDef::dtype("dtype", {DType::kF32, DType::kF16}),
               ParamDef::extent("m", 1, 512).aim({32}),
               ParamDef::extent("n", 1, 512),
               ParamDef::integer("k", 0, 64),
               ParamDef::flag("beta0"),
               ParamDef::choice("mode", {"a", "b"}).optional(1)};
  op.tensors = {{.name = "A", .dims = {"m", "k"}},
                {.name = "B", .dims = {"k", "n"}, .dtype = "fp32"},
                {.name = "C", .role = Role::kOut, .dims = {"m", "n"}}};
  op.reference = zero_ref;
  return op;
}

Contract toy_contract() {
  return Contract()
      .multiple_of("m", 16)
      .min("k", 8)
      .max("n", 200)
      .equal("n", "m")
      .only("mode", {"b"})
      .aligned(16)
      .switches_at("m", {128});
}

std::vector<Case> draw(const OpDef& op, const Contract* k, int count, int64_t max_dim = 2048) {
  auto gen = model_generator(op, k, GenConfig{max_dim, ""});
  std::vector<Case> out;
  for (int i = 0; i < count; ++i) out.push_back(gen(rc::Random(1000 + static_cast<uint64_t>(i)), i % 100).value());
  return out;
}

TEST(OpModel, GeneratesInsideTheContractByConstructionAndAtItsEdges) {
  const OpDef op = toy();
  const Contract k = toy_contract();
  std::set<int64_t> ms;
  int padded = 0, differing_pads = 0;
  for (const Case& c : draw(op, &k, 3000)) {
    ASSERT_TRUE(validate_case(op, c).ok()) << validate_case(op, c).message() << "\n" << c.to_json().dump();
    const auto broken = outside_contract(k, c);
    ASSERT_FALSE(broken) << *broken << "\n" << c.to_json().dump();
    ms.insert(c.params["m"].get<int64_t>());
    const auto l = layouts_of(c);
    padded += l[0].pad > 0 || l[0].offset > 0;
    differing_pads += l[0].pad != l[2].pad;
  }
  // The configuration switch at 128 is met on both sides, and the smallest multiple too.
  EXPECT_TRUE(ms.count(112) && ms.count(128) && ms.count(144)) << "switch neighbours not drawn";
  EXPECT_TRUE(ms.count(16));
  // Aligned layouts are still drawn (padded rows keep 16-byte row strides), per tensor.
  EXPECT_GT(padded, 100);
  EXPECT_GT(differing_pads, 100);
}

TEST(OpModel, WithoutAContractTheWholeDomainIsDrawn) {
  const OpDef op = toy();
  const Contract k = toy_contract();
  int outside = 0;
  for (const Case& c : draw(op, nullptr, 1000)) {
    ASSERT_TRUE(validate_case(op, c).ok()) << validate_case(op, c).message();
    outside += outside_contract(k, c).has_value();
  }
  EXPECT_GT(outside, 900);  // the contract is narrow: almost every case of the op breaks it
}

TEST(OpModel, MaxDimCapsExtentsButNotBelowTheContractMinimum) {
  const OpDef op = toy();
  const Contract k = toy_contract();
  for (const Case& c : draw(op, &k, 300, 20)) {
    EXPECT_LE(c.params["m"].get<int64_t>(), 16 * 17);
    EXPECT_FALSE(outside_contract(k, c));
  }
}

TEST(OpModel, ShrinkingStaysInsideTheContractAndReachesTheSmallestCase) {
  const OpDef op = toy();
  const Contract k = toy_contract();
  Case c = draw(op, &k, 50).back();
  for (int step = 0; step < 200; ++step) {
    auto next = model_shrink(op, &k, c);
    for (const Case& x : next) {
      ASSERT_TRUE(validate_case(op, x).ok());
      ASSERT_FALSE(outside_contract(k, x)) << *outside_contract(k, x);
    }
    if (next.empty()) break;
    c = next.front();  // "still fails" for every candidate: the most aggressive path
  }
  EXPECT_EQ(c.params["m"], 16);
  EXPECT_EQ(c.params["n"], 16);  // tied to m by the equality
  EXPECT_EQ(c.params["k"], 8);
  for (const auto& l : layouts_of(c)) EXPECT_EQ(l.pad + l.offset, 0);
}

TEST(OpModel, ProbesBreakTheirRuleAndSayHow) {
  const OpDef op = toy();
  const Contract k = toy_contract();
  std::map<std::string, int> per_rule;
  for (const Case& inside : draw(op, &k, 20)) {
    for (const Probe& p : contract_probes(op, k, inside)) {
      ASSERT_TRUE(validate_case(op, p.c).ok()) << p.how;
      const auto broken = outside_contract(k, p.c);
      ASSERT_TRUE(broken) << p.how;
      ++per_rule[p.rule];
      if (p.rule == "m % 16 == 0") {
        EXPECT_NE(p.c.params["m"].get<int64_t>() % 16, 0) << p.how;
      }
      if (p.rule == "k >= 8") EXPECT_EQ(p.c.params["k"], 7);
      if (p.rule == "n <= 200") EXPECT_EQ(p.c.params["n"], 201);
    }
  }
  for (const auto& r : k.rules()) EXPECT_GT(per_rule[r.text()], 0) << "no probe for " << r.text();
}

TEST(OpModel, ValidationNamesTheField) {
  const OpDef op = toy();
  Case c = draw(op, nullptr, 1).front();
  Case bad = c;
  bad.params["m"] = "12";
  EXPECT_NE(validate_case(op, bad).message().find("params.m must be an integer"), std::string::npos);
  bad = c;
  bad.params["surprise"] = 1;
  EXPECT_NE(validate_case(op, bad).message().find("unknown param 'surprise'"), std::string::npos);
  bad = c;
  bad.params["dtype"] = "fp64";
  EXPECT_NE(validate_case(op, bad).message().find("params.dtype must be one of"), std::string::npos);
  bad = c;
  bad.tensors[2].desc.shape[0] += 1;
  EXPECT_NE(validate_case(op, bad).message().find("tensor C must be"), std::string::npos);
  bad = c;
  bad.params["beta0"] = 1;
  EXPECT_NE(validate_case(op, bad).message().find("params.beta0 must be true or false"), std::string::npos);
}

TEST(OpModel, BrokenDeclarationsAreOneLineErrors) {
  OpDef op = toy();
  op.name = "toy_model_bad_dim";
  op.tensors[0].dims = {"m", "nope"};
  const Status s = register_op(op);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("names 'nope'"), std::string::npos) << s.message();

  OpDef good = toy();
  good.name = "toy_model_registered";
  ASSERT_TRUE(register_op(good).ok());
  EXPECT_FALSE(register_op(good).ok());  // the name is taken
  VariantDef v{.name = "v", .launch = [](const Params&, const std::vector<DevTensor>&, cudaStream_t) {
                 return cudaSuccess;
               }};
  v.contract.multiple_of("q", 4);
  const Status sv = add_variant("toy_model_registered", v);
  EXPECT_FALSE(sv.ok());
  EXPECT_NE(sv.message().find("names no param"), std::string::npos) << sv.message();
  v.contract = Contract().convention("reads_c_when_beta0");
  EXPECT_FALSE(add_variant("toy_model_registered", v).ok());  // the op declares no such convention
  v.contract = Contract().multiple_of("m", 4);
  EXPECT_TRUE(add_variant("toy_model_registered", v).ok());
  const OpSpec* spec = find_spec("toy_model_registered");
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(spec->contract("v"), nullptr);
  EXPECT_EQ(spec->contract("v")->describe().front(), "m % 4 == 0");
}

TEST(OpModel, CampaignCasesFollowTheirTargetsContract) {
  OpDef op = toy();
  op.name = "toy_model_targets";
  ASSERT_TRUE(register_op(op).ok());
  auto noop = [](const Params&, const std::vector<DevTensor>&, cudaStream_t) { return cudaSuccess; };
  ASSERT_TRUE(add_variant("toy_model_targets", {.name = "narrow", .launch = noop, .contract = toy_contract()}).ok());
  ASSERT_TRUE(add_variant("toy_model_targets", {.name = "any", .launch = noop}).ok());
  const OpSpec* spec = find_spec("toy_model_targets");
  ASSERT_NE(spec, nullptr);
  GenPlan plan{7, GenConfig{}, {"narrow", "any"}};
  int inside_narrow = 0;
  for (int64_t i = 0; i < 400; i += 2) {
    const Case c = generate_case(*spec, plan, i);  // even indices target "narrow"
    EXPECT_FALSE(spec->outside(c, "narrow")) << i;
    inside_narrow += !spec->outside(generate_case(*spec, plan, i + 1), "narrow");
  }
  EXPECT_LT(inside_narrow, 40);  // odd indices draw the whole domain
}

TEST(OpModel, SoftmaxIsDeclaredOnTheModel) {
  const OpDef* op = find_op("softmax");
  ASSERT_NE(op, nullptr);
  std::map<std::string, int> dtypes;
  int rel = 0;
  for (const Case& c : draw(*op, nullptr, 2000, 256)) {
    ASSERT_TRUE(validate_case(*op, c).ok()) << validate_case(*op, c).message();
    ++dtypes[c.params["dtype"].get<std::string>()];
    rel += c.params.contains("relation");
  }
  // Uniform dtypes whatever RapidCheck's size: each near a third.
  for (const auto& [d, n] : dtypes) EXPECT_NEAR(n / 2000.0, 1.0 / 3, 0.05) << d;
  EXPECT_NEAR(rel / 2000.0, 1.0 / 7, 0.04);
}

}  // namespace
}  // namespace assay
