// Every op's vendor library (OpDef::vendor: cuDNN softmax, convolution, SiLU and SDPA; cuBLAS and
// cuBLASLt for the GEMM family) fuzzed as a variant of the op under its declared contract
// (VendorDef::contract: what the library is documented or measured to do), on cases drawn inside
// that contract, with every check of the engine. A correct library outside the op's ceiling is a
// false alarm of the bound model: the derivation is wrong, or the library's evaluation order is
// not modelled. The failures are grouped by key (dtype and value class) and the first of each
// is printed whole, so that a failure says which order to model.
//
// Where a library's order is known and not yet modelled, the op's entry says so (`unmodelled`):
// the test then reports what it measured and skips with that reason instead of passing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"

namespace assay {
namespace {

struct CeilingOp {
  const char* op;
  /// Non-empty: the evaluation order the bound does not model yet (measured on an H100,
  /// docs/results.md), reported as a skip with the measurement.
  const char* unmodelled = "";
};
void PrintTo(const CeilingOp& o, std::ostream* os) {
  *os << o.op;
}

struct Group {
  int64_t cases = 0, failed = 0;
  std::string first;
};

class VendorCeilingGpu : public ::testing::TestWithParam<CeilingOp> {};

TEST_P(VendorCeilingGpu, TheLibraryPassesTheOpsCeilingUnderItsDeclaredContract) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = GetParam().op;
  const OpSpec* spec = find_spec(name);
  const OpDef* op = find_op(name);
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(op->vendor.defined()) << name << " has no vendor column";
  const VariantDef* vendor = find_variant(name, op->vendor.name);
  ASSERT_NE(vendor, nullptr) << "register_op binds the vendor as a variant";
  ASSERT_TRUE(vendor->vendor);
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  GenPlan plan;
  plan.seed = 29;
  plan.gen.max_dim = 256;
  plan.targets = {vendor->name};
  std::map<std::string, Group> groups;
  int64_t ran = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < 3000 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(8); ++i) {
    const Case c = generate_case(*spec, plan, i);
    auto r = run_model(*op, {vendor}, c, **lane, false);
    ASSERT_TRUE(r.ok()) << c.summary() << ": " << r.status().message();
    for (const Verdict& v : *r) {
      if (!v.not_applicable.empty()) continue;
      ++ran;
      Group& g = groups[v.metrics.key];
      ++g.cases;
      if (v.passed()) continue;
      ++failed;
      if (g.failed++ == 0) g.first = c.summary() + ": " + v.summary();
    }
  }
  std::printf("[ measured ] %s: %s under its contract (%s): %lld cases, %lld outside the ceiling\n", name.c_str(),
              vendor->name.c_str(), op->vendor.contract.arithmetic().describe().c_str(), static_cast<long long>(ran),
              static_cast<long long>(failed));
  for (const auto& [key, g] : groups)
    if (g.failed > 0)
      std::printf("[ measured ]   %s: %lld of %lld cases; first: %s\n", key.c_str(), static_cast<long long>(g.failed),
                  static_cast<long long>(g.cases), g.first.substr(0, 600).c_str());
  ASSERT_GT(ran, 0) << "no case inside the vendor's contract";
  if (failed > 0 && *GetParam().unmodelled != '\0')
    GTEST_SKIP() << name << ": " << failed << " of " << ran << " cases outside the ceiling; not yet modelled: "
                 << GetParam().unmodelled;
  EXPECT_EQ(failed, 0) << name << ": the vendor library is outside the op's ceiling (the groups above)";
}

INSTANTIATE_TEST_SUITE_P(
    Ops, VendorCeilingGpu,
    ::testing::Values(CeilingOp{"softmax",
                               "cuDNN's fully masked rows come out NaN in some cases and 0 in others (no one "
                               "convention), and a row of -FLT_MAX only came out 1/8 for n = 5 (a cuDNN defect)"},
                      CeilingOp{"softmax_bwd"}, CeilingOp{"conv2d"},
                      CeilingOp{"conv2d_bwd_data", "cuDNN's fp16 backward-data: 2 of 885 cases beyond the fp32-"
                                                  "accumulation ceiling (6x) or overflowed, an fp16 intermediate"},
                      CeilingOp{"conv2d_bwd_filter"}, CeilingOp{"activation"}, CeilingOp{"activation_bwd"},
                      CeilingOp{"attention"}, CeilingOp{"gemm"},
                      CeilingOp{"gemm_bias_act"},
                      CeilingOp{"gemm_batched"},
                      CeilingOp{"gemm_tc"}),
    [](const auto& i) { return std::string(i.param.op); });

}  // namespace
}  // namespace assay
