// The vendor-relative rule on a GPU: every op with a vendor column runs it on the campaign's
// cases, and a variant whose worst error/bound is more than OpDef::vendor.warn_ratio times the
// vendor library's worst (its errors counted as at least one ulp) carries an accuracy warning,
// never a failure. The planted mutant_softmax_fast_exp (__expf / __logf, declared fast-math, so inside
// its ceiling) must pass every bound and still be warned about; the correct built-in kernels of
// each op with a vendor column stay quiet where they measured so, and elsewhere the measured ratio
// is reported with the reason (VendorOp::may_warn). Each measured ratio is printed ("[ measured ]")
// and recorded as a test property. Where the vendor column cannot run (no GPU, a build without
// cuDNN, a cuDNN without an engine for the SDPA graph) the test skips with the reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include "harness/campaign.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"

namespace assay {
namespace {

struct VendorOp {
  const char* op;
  int64_t cases;
  int64_t max_dim;
  /// Empty: the correct kernels must raise no accuracy warning. Otherwise why a correct kernel
  /// legitimately may (measured on an H100, docs/results.md): the test then reports the ratio
  /// instead of asserting a number.
  const char* may_warn = "";
};
void PrintTo(const VendorOp& o, std::ostream* os) {
  *os << o.op;
}

/// Runs `variants` of `op` in-process; prints and records each variant's vendor-relative tally.
StatusOr<CampaignReport> campaign(const std::string& op, const std::vector<std::string>& variants, int64_t cases,
                                  int64_t max_dim) {
  const OpSpec* spec = find_spec(op);
  if (spec == nullptr) return invalid_argument("no op " + op);
  CampaignOptions o;
  o.variants = variants;
  o.max_cases = cases;
  o.gen.max_dim = max_dim;
  o.corpus_dir = "";
  o.keep_going = true;
  ASSAY_ASSIGN_OR_RETURN(CampaignReport r, run_campaign(*spec, o));
  for (const auto& [v, s] : r.per_variant) {
    std::printf(
        "[ measured ] %s/%s vs %s: worst error / vendor's worst %.3g (element-wise up to %.3g) over %lld cases, %lld "
        "accuracy warnings, %lld failures, max error / ceiling %.3g%s%s\n",
        op.c_str(), v.c_str(), r.vendor.c_str(), s.vendor_rel_max, s.vendor_rel_worst,
        static_cast<long long>(s.vendor_rel_cases), static_cast<long long>(s.accuracy_warnings),
        static_cast<long long>(s.failures), s.max_ratio, s.vendor_not_run.empty() ? "" : "; ",
        s.vendor_not_run.c_str());
    if (!s.first_warning.empty()) std::printf("[ measured ]   first warning: %s\n", s.first_warning.c_str());
    ::testing::Test::RecordProperty("vendor_rel_" + v, std::to_string(s.vendor_rel_max));
    ::testing::Test::RecordProperty("accuracy_warnings_" + v, std::to_string(s.accuracy_warnings));
  }
  return r;
}

class VendorRelativeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
  }
};

TEST_F(VendorRelativeGpu, FastExpSoftmaxPassesItsCeilingButIsWarnedAbout) {
  // 2,000 cases: on an H100 the mutant was warned about in 19 of 1,915 passing ones (rows whose
  // logits spread far below their max, where __expf errs by many ulps).
  auto r = campaign("softmax", {"online", "mutant_softmax_fast_exp"}, 2000, 4096);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const VariantStats& m = r->per_variant["mutant_softmax_fast_exp"];
  const VariantStats& k = r->per_variant["online"];
  if (m.vendor_rel_cases == 0) GTEST_SKIP() << "the cuDNN softmax column did not run: " << m.vendor_not_run;
  // Inside its declared (fast-math) ceiling: no failure, only the warning.
  EXPECT_EQ(m.failures, 0) << (r->failures.empty() ? "" : r->failures.front().verdict.summary());
  EXPECT_GT(m.accuracy_warnings, 0) << "worst ratio " << m.vendor_rel_max << " over " << m.vendor_rel_cases
                                    << " cases, warning above " << r->vendor_warn_ratio;
  EXPECT_GT(m.vendor_rel_max, r->vendor_warn_ratio);
  // The correct online kernel on the same cases: quiet.
  EXPECT_EQ(k.failures, 0);
  EXPECT_EQ(k.accuracy_warnings, 0) << k.first_warning;
  EXPECT_LT(k.vendor_rel_max, m.vendor_rel_max);
}

// --vendor-share: the column is held to its share of a lane's time. At 0 it never runs; at 1
// every case measures the library. One lane, so the count is exact.
TEST_F(VendorRelativeGpu, VendorShareHoldsTheColumnToItsShareOfTheLanesTime) {
  const OpSpec* spec = find_spec("softmax");
  ASSERT_NE(spec, nullptr);
  auto run = [&](double share) {
    CampaignOptions o;
    o.variants = {"online"};
    o.max_cases = 40;
    o.lanes = 1;
    o.gen.max_dim = 256;
    o.corpus_dir = "";
    o.keep_going = true;
    o.run.vendor_share = share;
    return run_campaign(*spec, o);
  };
  auto none = run(0), every = run(1);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  ASSERT_TRUE(every.ok()) << every.status().to_string();
  const int64_t measured_none = none->per_variant["online"].vendor_rel_cases;
  const int64_t measured_every = every->per_variant["online"].vendor_rel_cases;
  std::printf("[ measured ] softmax/online, 40 cases, one lane: vendor-relative ratio measured on %lld cases at "
              "--vendor-share 0, %lld at 1\n",
              static_cast<long long>(measured_none), static_cast<long long>(measured_every));
  if (measured_every == 0) GTEST_SKIP() << "the cuDNN softmax column did not run: " << every->per_variant["online"].vendor_not_run;
  EXPECT_EQ(measured_none, 0);
  EXPECT_GE(measured_every, 30);  // cases whose output has a finite element the ratio can use
}

/// Every op with a vendor column: its default (correct) variants stay quiet.
class VendorRelativeGpuOps : public ::testing::TestWithParam<VendorOp> {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
  }
};

TEST_P(VendorRelativeGpuOps, CorrectKernelsRaiseNoAccuracyWarning) {
  const VendorOp p = GetParam();
  const OpSpec* spec = find_spec(p.op);
  ASSERT_NE(spec, nullptr) << p.op;
  auto r = campaign(p.op, spec->default_variants(), p.cases, p.max_dim);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_FALSE(r->vendor.empty()) << p.op << " declares no vendor column";
  int64_t measured = 0;
  std::string why;
  for (const auto& [v, s] : r->per_variant) {
    measured += s.vendor_rel_cases;
    if (why.empty()) why = s.vendor_not_run;
    // A vendor column that wrote outside an output's view is discarded, and that is a bug of the
    // launcher (packing), not of the variant.
    EXPECT_EQ(s.vendor_not_run.find("discarded"), std::string::npos) << v << ": " << s.vendor_not_run;
  }
  if (measured == 0) GTEST_SKIP() << p.op << ": the vendor column did not run on any case: " << why;
  for (const auto& [v, s] : r->per_variant) {
    EXPECT_EQ(s.failures, 0) << v;
    if (*p.may_warn != 0) {
      std::printf("[ measured ] %s/%s: %lld accuracy warnings, not asserted: %s\n", p.op, v.c_str(),
                  static_cast<long long>(s.accuracy_warnings), p.may_warn);
      continue;
    }
    EXPECT_EQ(s.accuracy_warnings, 0) << v << ": worst ratio " << s.vendor_rel_max << "; " << s.first_warning;
  }
}

// Measured on an H100 (cuDNN 9.14, cuBLAS 13.1; `assay fuzz <op> --time 8 --seed 1`): worst
// vendor-relative ratio of the correct kernels softmax 1.4, activation 1.9, attention 0.28 (these
// are asserted quiet); the others below reached the warning ratio on some cases.
const char* const kLongSums =
    "a long fp32 reduction in a fixed order against the library's blocked one (up to 14x on conv2d_bwd_filter, "
    "whose kernels sum N*P*Q terms one after another): a real accuracy difference, inside the ceiling";
const char* const kGemms =
    "GEMMs near underflow (|C| ~ 1e-37: errors of a millionth of the bound, 5-9x cuBLAS's) and splitk's "
    "flush-to-zero atomics (C = 0 where cuBLAS keeps the smallest normal)";

INSTANTIATE_TEST_SUITE_P(
    Ops, VendorRelativeGpuOps,
    ::testing::Values(VendorOp{"softmax", 400, 4096}, VendorOp{"activation", 400, 4096},
                      VendorOp{"attention", 200, 256},
                      VendorOp{"softmax_bwd", 400, 4096, "dx = y (dy - s) cancelling: 9.9x on one case in 1,376"},
                      VendorOp{"activation_bwd", 400, 4096, "up to 3.6x, near the warning ratio"},
                      VendorOp{"conv2d", 200, 64, kLongSums}, VendorOp{"conv2d_bwd_data", 200, 64, kLongSums},
                      VendorOp{"conv2d_bwd_filter", 200, 64, kLongSums},
                      VendorOp{"gemm_bias_act", 300, 256, kLongSums}, VendorOp{"gemm", 300, 1024, kGemms},
                      VendorOp{"gemm_batched", 300, 256, kGemms}, VendorOp{"gemm_tc", 300, 512, kLongSums}),
    [](const ::testing::TestParamInfo<VendorOp>& i) { return std::string(i.param.op); });

}  // namespace
}  // namespace assay
