// Every op's vendor column (OpDef::vendor: cuDNN softmax, convolution, SiLU and SDPA; cuBLAS and
// cuBLASLt for the GEMM family) held to the op's hard ceiling on the campaign's own cases: a
// correct vendor library that breaks a ceiling is a false alarm of the bound model (the bound's
// derivation is then wrong, or the library's evaluation order is not modelled). Each op runs
// its first default variant on generated cases; the engine judges the vendor column on the same
// inputs (Metrics::vendor_violations, vendor_max_ratio). The cases where the vendor broke the
// bound are grouped by key (dtype and value class) and printed with an example case, so a
// failure says which evaluation order to model.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"

namespace assay {
namespace {

struct Group {
  int64_t cases = 0, broken = 0;
  double worst = 0;
  std::string example;
};

/// The elements of `c` where the vendor column is outside the bound or the NaN/Inf pattern,
/// with the inputs that feed them (at most 3).
void print_broken(const OpDef& op, const VariantDef& v, const Case& c, gpu::Lane& lane) {
  auto in = inspect_model(op, v, c, lane);
  if (!in.ok() || in->vendor.empty()) return;
  int shown = 0;
  for (size_t l = 0; l < in->ref.size() && shown < 3; ++l) {
    const double r = in->ref[l], x = in->vendor[l], t = in->tol[l];
    const bool pattern = std::isfinite(r) != std::isfinite(x) || (std::isnan(r) != std::isnan(x));
    if (!pattern && !(std::fabs(x - r) > t)) continue;
    ++shown;
    const int64_t i = static_cast<int64_t>(l) / in->cols, j = static_cast<int64_t>(l) % in->cols;
    std::printf("[ measured ]     %s[%lld][%lld]: vendor %.9g ref %.9g tol %.3g; inputs %s\n", in->tensor.c_str(),
                static_cast<long long>(i), static_cast<long long>(j), x, r, t,
                in->inputs ? in->inputs(i, j).substr(0, 300).c_str() : "");
  }
}

class VendorCeilingGpu : public ::testing::TestWithParam<const char*> {};

TEST_P(VendorCeilingGpu, TheVendorLibraryStaysWithinTheOpsCeiling) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = GetParam();
  const OpSpec* spec = find_spec(name);
  const OpDef* op = find_op(name);
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(op->vendor.defined()) << name << " has no vendor column";
  const std::vector<std::string> dv = spec->default_variants();
  ASSERT_FALSE(dv.empty());
  const VariantDef* variant = find_variant(name, dv.front());
  ASSERT_NE(variant, nullptr);
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  GenPlan plan;
  plan.seed = 29;
  plan.gen.max_dim = 256;
  plan.targets = {dv.front()};
  std::map<std::string, Group> groups;
  int64_t judged = 0, broken = 0;
  std::string not_run;
  const auto t0 = std::chrono::steady_clock::now();
  const bool trace = std::getenv("ASSAY_TRACE_CASES") != nullptr;  // which case a crash was on
  for (int64_t i = 0; i < 3000 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(8); ++i) {
    const Case c = generate_case(*spec, plan, i);
    if (trace) std::fprintf(stderr, "case %lld: %s\n", static_cast<long long>(i), c.summary().c_str());
    auto r = run_model(*op, {variant}, c, **lane, false);
    ASSERT_TRUE(r.ok()) << c.summary() << ": " << r.status().message();
    for (const Verdict& v : *r) {
      if (!v.not_applicable.empty()) continue;
      if (v.metrics.vendor_max_ratio < 0) {
        if (not_run.empty()) not_run = v.metrics.not_run;
        continue;
      }
      ++judged;
      Group& g = groups[v.metrics.key];
      ++g.cases;
      if (v.metrics.vendor_violations > 0) {
        ++g.broken, ++broken;
        if (g.broken <= 2) print_broken(*op, *variant, c, **lane);
        if (v.metrics.vendor_max_ratio > g.worst) {
          g.worst = v.metrics.vendor_max_ratio;
          g.example = c.summary();
        }
      }
    }
  }
  std::printf("[ measured ] %s: vendor column %s judged on %lld cases, outside the ceiling on %lld\n", name.c_str(),
              op->vendor.name.c_str(), static_cast<long long>(judged), static_cast<long long>(broken));
  for (const auto& [key, g] : groups)
    if (g.broken > 0)
      std::printf("[ measured ]   %s: %lld of %lld cases, worst vendor error/ceiling %.4g, e.g. %s\n", key.c_str(),
                  static_cast<long long>(g.broken), static_cast<long long>(g.cases), g.worst, g.example.c_str());
  if (judged == 0) GTEST_SKIP() << name << ": the vendor column was judged on no case: " << not_run;
  EXPECT_EQ(broken, 0) << name << ": the vendor library broke the op's ceiling (see the groups above)";
}

INSTANTIATE_TEST_SUITE_P(Ops, VendorCeilingGpu,
                         ::testing::Values("softmax", "softmax_bwd", "conv2d", "conv2d_bwd_data", "conv2d_bwd_filter",
                                           "activation", "attention", "gemm", "gemm_bias_act", "gemm_batched",
                                           "gemm_tc"),
                         [](const auto& i) { return std::string(i.param); });

}  // namespace
}  // namespace assay
