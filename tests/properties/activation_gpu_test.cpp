// GPU tests of the activation specs: the kernels pass fuzzing (forward and backward) and the
// exhaustive sweep of every fp16 and bf16 input for each activation; each planted activation bug
// (tests/mutants/rowwise/, registered as mutant variants through properties/activation.h) is caught by the
// fuzzer, shrunk and stored, and caught by the exhaustive sweeps in fp16 and bf16. Skipped,
// visibly, without a GPU, and per mutant while it is not registered.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "harness/spec.h"
#include "properties/activation.h"

namespace assay::rowwise {
namespace {
namespace fs = std::filesystem;

class ActivationGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    fwd_ = find_spec("activation");
    bwd_ = find_spec("activation_bwd");
    ASSERT_NE(fwd_, nullptr);
    ASSERT_NE(bwd_, nullptr);
    dir_ = fs::temp_directory_path() / ("assay_act_" + std::to_string(::getpid()));
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  const OpSpec* fwd_ = nullptr;
  const OpSpec* bwd_ = nullptr;
  fs::path dir_;
};

TEST_F(ActivationGpu, FuzzedCasesPassForwardAndBackward) {
  for (const OpSpec* spec : {fwd_, bwd_}) {
    CampaignOptions o;
    o.max_cases = 300;
    o.gen.max_dim = int64_t{1} << 16;
    o.corpus_dir = "";
    o.seed = 8;
    auto r = run_campaign(*spec, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->cases, 300) << spec->name();
    EXPECT_TRUE(r->failures.empty()) << spec->name() << ": " << r->failures.front().verdict.summary() << " on "
                                     << r->failures.front().shrunk.summary();
    RecordProperty(spec->name() + "_max_ratio", std::to_string(r->per_variant["elementwise"].max_ratio));
  }
}

struct Sweep {
  DType dtype;
  Act act;
  bool backward;
};
void PrintTo(const Sweep& s, std::ostream* os) {
  *os << dtype_name(s.dtype) << "_" << act_name(s.act) << (s.backward ? "_bwd" : "_fwd");
}

class ActivationGpuExhaustive : public ActivationGpu, public ::testing::WithParamInterface<Sweep> {};

TEST_P(ActivationGpuExhaustive, EveryInputWithinItsBudget) {
  const Sweep& s = GetParam();
  auto r = activation_exhaustive("elementwise", s.act, s.dtype, s.backward, 0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->inputs, 65536);
  EXPECT_EQ(r->failures, 0) << r->text();
  EXPECT_EQ(r->spurious_naninf, 0) << r->text();
  RecordProperty("max_ulps", std::to_string(r->max_ulps));
  RecordProperty("histogram",
                 fmt::format("{} {} {} {}", r->histogram[0], r->histogram[1], r->histogram[2], r->histogram[3]));
}

std::vector<Sweep> all_sweeps() {
  std::vector<Sweep> v;
  for (DType dt : {DType::kBF16, DType::kF16})
    for (Act a : {Act::kGeluErf, Act::kGeluTanh, Act::kSilu})
      for (bool b : {false, true}) v.push_back({dt, a, b});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllInputs, ActivationGpuExhaustive, ::testing::ValuesIn(all_sweeps()),
                         [](const ::testing::TestParamInfo<Sweep>& i) {
                           return fmt::format("{}_{}_{}", dtype_name(i.param.dtype), act_name(i.param.act),
                                              i.param.backward ? "bwd" : "fwd");
                         });

struct ActMutant {
  const char* variant;
  bool backward;
  Act act;  ///< the activation the bug is in
};
void PrintTo(const ActMutant& m, std::ostream* os) {
  *os << m.variant;
}

class ActivationGpuMutants : public ActivationGpu, public ::testing::WithParamInterface<ActMutant> {};

TEST_P(ActivationGpuMutants, CaughtByFuzzingAndByTheExhaustiveSweeps) {
  const ActMutant& m = GetParam();
  const OpSpec* spec = m.backward ? bwd_ : fwd_;
  if (!spec->has_variant(m.variant))
    GTEST_SKIP() << m.variant << " is not registered with " << spec->name()
                 << " (tests/mutants/rowwise/register.cpp adds it with add_variant)";
  CampaignOptions o;
  o.variants = {m.variant};
  o.max_cases = 500;
  o.gen.max_dim = int64_t{1} << 14;
  o.corpus_dir = dir_.string();
  auto r = run_campaign(*spec, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->failures.size(), 1u) << m.variant << " not caught in " << r->cases << " cases";
  const FoundFailure& f = r->failures.front();
  std::set<FailureKind> kinds;
  for (const auto& x : f.verdict.failures) kinds.insert(x.kind);
  EXPECT_TRUE(kinds.count(FailureKind::kBound) || kinds.count(FailureKind::kNanInf)) << f.verdict.summary();
  EXPECT_TRUE(read_entry(f.path).ok()) << f.path;
  RecordProperty("shrunk", f.shrunk.summary());
  RecordProperty("verdict", f.verdict.summary());
  // Every fp16 and bf16 input of the buggy activation: some element beyond its budget in each.
  for (DType dt : {DType::kBF16, DType::kF16}) {
    auto x = activation_exhaustive(m.variant, m.act, dt, m.backward, 0);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    EXPECT_GT(x->failures, 0) << dtype_name(dt) << ": " << x->text();
    RecordProperty(std::string(dtype_name(dt)) + "_exhaustive_failures", std::to_string(x->failures));
  }
}

INSTANTIATE_TEST_SUITE_P(Planted, ActivationGpuMutants,
                         ::testing::Values(ActMutant{"mutant_gelu_tanh_wrong_const", false, Act::kGeluTanh},
                                           ActMutant{"mutant_silu_bwd_missing_term", true, Act::kSilu}),
                         [](const ::testing::TestParamInfo<ActMutant>& i) { return std::string(i.param.variant); });

}  // namespace
}  // namespace assay::rowwise
