// The vendor-relative rule on the CPU side: which ops declare a vendor column, the verdict's new
// metrics through JSON and through both forms of the worker wire (a passing verdict travels
// compact: a field left out there was lost before), the campaign's tally per variant, the
// printed summary and the JSON report, including "no vendor counterpart" for ops without one,
// and a cuDNN-less build's reason. The GPU side (the ratio itself, the planted fast-exp
// softmax) is tests/properties/vendor_relative_gpu_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/campaign.h"
#include "harness/check_report.h"
#include "harness/cli/reports.h"
#include "harness/op_model.h"
#include "harness/worker.h"
#include "harness/executor.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "tests/properties/model_host.h"
#include "references/library/cudnn.h"

namespace assay {
namespace {

Verdict passing(const std::string& variant, double ratio, const std::string& warning = "") {
  Verdict v;
  v.variant = variant;
  v.metrics.max_ratio = 0.25;
  v.metrics.key = "fp32/normal";
  v.metrics.reference = "host-f64";
  v.metrics.vendor_max_ratio = 0.5;
  v.metrics.vendor_rel_ratio = ratio;
  v.metrics.vendor_rel_worst = ratio * 3;
  v.metrics.vendor_rel_elements = ratio > 4 ? 17 : 0;
  v.metrics.accuracy_warning = warning;
  return v;
}

TEST(VendorColumns, EveryOpWithAVendorCounterpartDeclaresOne) {
  for (const char* op : {"gemm", "softmax", "softmax_bwd", "activation", "activation_bwd", "conv2d", "conv2d_bwd_data",
                         "conv2d_bwd_filter", "attention", "gemm_bias_act", "gemm_batched", "gemm_tc"}) {
    const OpDef* d = find_op(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_TRUE(d->vendor.defined()) << op;
    EXPECT_FALSE(d->vendor.name.empty()) << op;
    EXPECT_GE(d->vendor.warn_ratio, 1) << op;
  }
  // cuBLASLt's epilogue has no pre-activation aux here: the column covers Y alone.
  EXPECT_EQ(find_op("gemm_bias_act")->vendor.outputs, std::vector<std::string>{"Y"});
  for (const char* op : {"rmsnorm", "layernorm", "rope", "embedding", "cross_entropy", "attention_bwd"}) {
    const OpDef* d = find_op(op);
    if (d == nullptr) continue;  // an op of another build configuration
    EXPECT_FALSE(d->vendor.defined()) << op << " has no vendor library here";
  }
}

// Each vendor library is also a variant of its op (register_op binds it): named after the
// column, marked vendor, under the vendor's declared contract, and left out of the variants a
// campaign runs by default, as mutants are.
TEST(VendorColumns, EveryVendorIsAVariantFuzzedOnlyWhenNamed) {
  for (const char* name : {"gemm", "softmax", "softmax_bwd", "activation", "conv2d", "attention", "gemm_bias_act",
                           "gemm_batched", "gemm_tc"}) {
    const OpDef* d = find_op(name);
    const OpSpec* spec = find_spec(name);
    ASSERT_NE(d, nullptr) << name;
    ASSERT_NE(spec, nullptr) << name;
    const VariantDef* v = find_variant(name, d->vendor.name);
    ASSERT_NE(v, nullptr) << name << ": no variant " << d->vendor.name;
    EXPECT_TRUE(v->vendor) << name;
    EXPECT_FALSE(v->mutant) << name;
    EXPECT_EQ(v->contract.arithmetic(), d->vendor.contract.arithmetic()) << name;
    EXPECT_EQ(v->contract.conventions(), d->vendor.contract.conventions()) << name;
    const auto defaults = spec->default_variants();
    EXPECT_EQ(std::count(defaults.begin(), defaults.end(), d->vendor.name), 0) << name;
    EXPECT_FALSE(defaults.empty()) << name;
  }
  EXPECT_TRUE(find_op("softmax")->vendor.contract.arithmetic().narrow_intermediates);
  EXPECT_TRUE(find_op("gemm")->vendor.contract.has_convention("skips_product_when_alpha0"));
}

// gemm's BLAS rule (skips_product_when_alpha0, cuBLAS's declared convention): with alpha = 0
// the reference is beta*C, so NaN in A or B does not reach it; without the convention
// 0 * NaN is NaN, the IEEE result a kernel that computes the product must give.
TEST(VendorColumns, GemmAlphaZeroUnderTheBlasRuleIgnoresAAndB) {
  const OpDef* op = find_op("gemm");
  const OpSpec* spec = find_spec("gemm");
  ASSERT_NE(op, nullptr);
  ASSERT_NE(spec, nullptr);
  int64_t checked = 0;
  for (int64_t i = 0; i < 4000 && checked < 20; ++i) {
    Case c = generate_case(*spec, GenPlan{41, GenConfig{24}}, i);
    if (Params(c.params).r("alpha", 1) != 0 || Params(c.params).r("beta", 0) == 0) continue;
    c.tensors[0].values.inject.kinds = kSpecialNaN;  // a NaN in A's first element
    c.tensors[0].values.inject.at = kAtFirst;
    c.tensors[2].values = ValueRecipe{};  // C finite
    const auto blas = test_util::model_host_run(*op, c, Contract().convention("skips_product_when_alpha0"));
    const auto ieee = test_util::model_host_run(*op, c);
    const Params p(c.params);
    const double beta = p.r("beta", 0);
    const std::vector<double> cc = blas.dense(2);
    bool ieee_nan = false;
    for (size_t l = 0; l < blas.refs[0].ref.size(); ++l) {
      EXPECT_EQ(blas.refs[0].ref[l], beta * cc[l]) << c.summary() << " element " << l;
      ieee_nan = ieee_nan || std::isnan(ieee.refs[0].ref[l]);
    }
    EXPECT_TRUE(ieee_nan || p.i("k") == 0) << c.summary() << ": 0 * NaN without the convention";
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(VendorColumns, RegisterOpRejectsAVendorNamingNoOutputOrAWarnRatioBelowOne) {
  OpDef op = *find_op("softmax");
  op.name = "softmax_vendor_copy_a";
  op.vendor.outputs = {"X"};  // an input
  EXPECT_FALSE(register_op(op).ok());
  op.name = "softmax_vendor_copy_b";
  op.vendor.outputs = {};
  op.vendor.warn_ratio = 0.5;
  EXPECT_FALSE(register_op(op).ok());
}

TEST(VendorColumns, WithoutCudnnTheColumnSaysWhyItDidNotRun) {
  // On a CPU-only machine the launcher fails before any kernel: no cuDNN in the build, or no
  // device for its handle. Either way an error with a reason, never a crash or a silent pass.
  const OpDef* d = find_op("softmax");
  ASSERT_NE(d, nullptr);
  DevTensor x, y;  // no rows: nothing to read or write even where a GPU and cuDNN are present
  x.v = y.v = {0, 3, 3};
  x.shape = y.shape = {0, 3};
  x.strides = y.strides = {3, 1};
  const Status s = d->vendor.run(Params(nlohmann::json::object()), {x, y}, nullptr);
  if (!vendor::cudnn_built()) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("built without cuDNN"), std::string::npos) << s.message();
  } else if (!s.ok()) {
    EXPECT_FALSE(s.message().empty());
  }
  // GELU has no cuDNN activation mode: that reason comes before any library call.
  const Status g = find_op("activation")->vendor.run(Params(nlohmann::json{{"act", "gelu_erf"}}), {x, y}, nullptr);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("no gelu_erf"), std::string::npos) << g.message();
}

TEST(VendorColumns, PlantedFastExpSoftmaxIsAMutantThatDeclaresFastMath) {
  const VariantDef* v = find_variant("softmax", "mutant_softmax_fast_exp");
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->mutant);
  EXPECT_TRUE(v->contract.arithmetic().fast_math);
}

TEST(VendorRelativeVerdict, JsonRoundTripKeepsEveryVendorField) {
  const Verdict v = passing("online", 9.5, "worst error 12 ulp is 9.5x cudnn-softmax's worst");
  const Verdict back = Verdict::from_json(v.to_json());
  EXPECT_DOUBLE_EQ(back.metrics.vendor_rel_ratio, 9.5);
  EXPECT_DOUBLE_EQ(back.metrics.vendor_rel_worst, 28.5);
  EXPECT_EQ(back.metrics.vendor_rel_elements, 17);
  EXPECT_EQ(back.metrics.accuracy_warning, v.metrics.accuracy_warning);
  // An old verdict without the fields reads as "not measured".
  nlohmann::json old = v.to_json();
  old["metrics"].erase("vendor_rel_ratio");
  old["metrics"].erase("vendor_rel_worst");
  EXPECT_DOUBLE_EQ(Verdict::from_json(old).metrics.vendor_rel_ratio, -1);
  EXPECT_DOUBLE_EQ(Verdict::from_json(old).metrics.vendor_rel_worst, -1);
}

TEST(VendorRelativeVerdict, CompactWireOfAPassingVerdictKeepsTheRatioAndTheWarning) {
  const Verdict v = passing("mutant_softmax_fast_exp", 11.25, "worst error 45 ulp is 11.2x cudnn-softmax's worst");
  const nlohmann::json w = wire_verdict(v);
  ASSERT_TRUE(w.contains("v")) << "a passing verdict travels compact: " << w.dump();
  const Verdict back = unwire_verdict(nlohmann::json::parse(w.dump()));
  EXPECT_TRUE(back.passed());
  EXPECT_EQ(back.variant, v.variant);
  EXPECT_DOUBLE_EQ(back.metrics.vendor_rel_ratio, 11.25);
  EXPECT_DOUBLE_EQ(back.metrics.vendor_rel_worst, 33.75);
  EXPECT_EQ(back.metrics.vendor_rel_elements, 17);
  EXPECT_EQ(back.metrics.accuracy_warning, v.metrics.accuracy_warning);
  EXPECT_DOUBLE_EQ(back.metrics.vendor_max_ratio, 0.5);
  EXPECT_DOUBLE_EQ(back.metrics.max_ratio, 0.25);
  EXPECT_EQ(back.metrics.key, "fp32/normal");
  // Not measured stays not measured (-1), not 0.
  const Verdict none = unwire_verdict(wire_verdict(passing("online", -1)));
  EXPECT_DOUBLE_EQ(none.metrics.vendor_rel_ratio, -1);
  EXPECT_TRUE(none.metrics.accuracy_warning.empty());
}

TEST(VendorRelativeVerdict, FailingVerdictTravelsWholeWithItsVendorFields) {
  Verdict v = passing("mutant", 6, "worst error 6 ulp");
  v.failures.push_back({FailureKind::kBound, "Y", 3, 5, "beyond the ceiling"});
  const nlohmann::json w = wire_verdict(v);
  EXPECT_FALSE(w.contains("v"));
  const Verdict back = unwire_verdict(w);
  EXPECT_FALSE(back.passed());
  EXPECT_DOUBLE_EQ(back.metrics.vendor_rel_ratio, 6);
  EXPECT_EQ(back.metrics.accuracy_warning, "worst error 6 ulp");
}

TEST(VendorRelativeCampaign, TallyCountsWarningsOfPassingCasesAndKeepsTheWorst) {
  VariantStats st;
  tally_vendor(st, passing("k", 1.5));
  tally_vendor(st, passing("k", 7, "first warning"));
  tally_vendor(st, passing("k", 9, "second warning"));
  tally_vendor(st, passing("k", -1));  // sampled out: not measured
  Verdict failed = passing("k", 50, "a failing case's warning");
  failed.failures.push_back({FailureKind::kBound, "Y", 1, 0, "x"});
  tally_vendor(st, failed);
  EXPECT_EQ(st.vendor_rel_cases, 3);
  EXPECT_DOUBLE_EQ(st.vendor_rel_max, 9);
  EXPECT_DOUBLE_EQ(st.vendor_rel_worst, 27);
  EXPECT_EQ(st.accuracy_warnings, 2);
  EXPECT_EQ(st.first_warning, "first warning");
  EXPECT_TRUE(st.vendor_not_run.empty());
}

TEST(VendorRelativeCampaign, TallyKeepsWhyTheColumnDidNotRun) {
  VariantStats st;
  Verdict v = passing("k", -1);
  v.metrics.not_run =
      "determinism not rerun; vendor column (cudnn-sdpa) not run: no engine for the SDPA graph; relation x";
  tally_vendor(st, v);
  EXPECT_EQ(st.vendor_not_run, "vendor column (cudnn-sdpa) not run: no engine for the SDPA graph");
  EXPECT_EQ(st.vendor_rel_cases, 0);
}

CampaignReport report_with(const std::string& op, const std::string& vendor) {
  CampaignReport r;
  r.op = op;
  r.device = "test device";
  r.lanes = 2;
  r.cases = 10;
  r.seconds = 1;
  r.vendor = vendor;
  r.vendor_warn_ratio = vendor.empty() ? 0 : 4;
  return r;
}

TEST(VendorRelativeCampaign, SummaryShowsTheRatioTheWarningsAndNoVendorCounterpart) {
  CampaignReport r = report_with("softmax", "cudnn-softmax");
  VariantStats good, bad, never;
  good.cases = bad.cases = never.cases = 5;
  for (int i = 0; i < 5; ++i) tally_vendor(good, passing("online", 1.25));
  tally_vendor(bad, passing("mutant_softmax_fast_exp", 2));
  tally_vendor(bad, passing("mutant_softmax_fast_exp", 12.5, "worst error 50 ulp is 12.5x"));
  Verdict nr = passing("x", -1);
  nr.metrics.not_run = "vendor column (cudnn-softmax) not run: built without cuDNN (ASSAY_WITH_CUDNN=OFF)";
  tally_vendor(never, nr);
  r.per_variant = {{"online", good}, {"mutant_softmax_fast_exp", bad}, {"never", never}};
  const std::string s = cli::campaign_summary(r, 1);
  EXPECT_NE(s.find("vendor cudnn-softmax"), std::string::npos) << s;
  EXPECT_NE(s.find("accuracy warning above 4x"), std::string::npos) << s;
  EXPECT_NE(s.find("max err/vendor err"), std::string::npos) << s;
  EXPECT_NE(s.find("1.25"), std::string::npos) << s;
  EXPECT_NE(s.find("WARN mutant_softmax_fast_exp: 1 of 2 passing cases"), std::string::npos) << s;
  EXPECT_NE(s.find("worst error 50 ulp is 12.5x"), std::string::npos) << s;
  EXPECT_EQ(s.find("WARN online"), std::string::npos) << s;
  EXPECT_NE(s.find("note never: vendor column (cudnn-softmax) not run: built without cuDNN"), std::string::npos) << s;
  EXPECT_NE(s.find("not run"), std::string::npos) << s;

  CampaignReport n = report_with("rmsnorm", "");
  n.per_variant = {{"warp", good}};
  const std::string t = cli::campaign_summary(n, 1);
  EXPECT_NE(t.find("no vendor counterpart"), std::string::npos) << t;
  // The variant's cell says so too: never silently absent.
  EXPECT_NE(t.substr(t.find("warp")).find("no vendor counterpart"), std::string::npos) << t;
}

TEST(VendorRelativeCampaign, JsonReportCarriesTheVendorRelativeFieldsPerVariant) {
  const OpSpec* spec = find_spec("softmax");
  ASSERT_NE(spec, nullptr);
  CampaignOptions o;
  CampaignReport r = report_with("softmax", "cudnn-softmax");
  VariantStats bad;
  bad.cases = 2;
  tally_vendor(bad, passing("m", 3));
  tally_vendor(bad, passing("m", 12.5, "worst error 50 ulp is 12.5x"));
  r.per_variant = {{"m", bad}};
  const nlohmann::json j = report_json(cli::campaign_report("fuzz", r, *spec, o));
  EXPECT_EQ(j["vendor"], "cudnn-softmax");
  const auto& vr = j["variants"]["m"]["vendor_relative"];
  EXPECT_EQ(vr["vendor"], "cudnn-softmax");
  EXPECT_DOUBLE_EQ(vr["max_ratio"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(vr["max_elementwise"].get<double>(), 37.5);
  EXPECT_EQ(vr["cases"], 2);
  EXPECT_EQ(vr["accuracy_warnings"], 1);
  EXPECT_DOUBLE_EQ(vr["warn_ratio"].get<double>(), 4);
  EXPECT_EQ(vr["first_warning"], "worst error 50 ulp is 12.5x");
  EXPECT_EQ(j["variants"]["m"]["accuracy_warnings"], 1);
  ASSERT_EQ(j["tests"].size(), 1u);
  EXPECT_EQ(j["tests"][0]["vendor_relative"]["accuracy_warnings"], 1);
  const std::string junit = report_junit(cli::campaign_report("fuzz", r, *spec, o));
  EXPECT_NE(junit.find("1 accuracy warnings"), std::string::npos) << junit;
  EXPECT_NE(junit.find("first: worst error 50 ulp is 12.5x"), std::string::npos) << junit;

  CampaignReport n = report_with("rmsnorm", "");
  n.per_variant = {{"warp", VariantStats{}}};
  const nlohmann::json k = report_json(cli::campaign_report("fuzz", n, *spec, o));
  EXPECT_EQ(k["vendor"], "no vendor counterpart");
  EXPECT_EQ(k["variants"]["warp"]["vendor_relative"], "no vendor counterpart");
}

}  // namespace
}  // namespace assay
