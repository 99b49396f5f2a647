// The convolution device references' element function (references/device/conv_f64_element.h,
// which the GPU kernel loops over) run on the CPU over the engine's own images (fp32, fp16 and
// bf16; offsets and padded rows included) for generated cases the device path takes, for each
// pass: reference and tolerance bit for bit equal to the host reference and bound
// (properties/conv.cpp). Same terms in the same order with exact products, the same
// dot_element_tol and the same store rounding of a narrow output: nothing may differ. The GPU
// test (conv_device_ref_gpu_test.cpp) checks the kernel itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/ulp_core.h"
#include "properties/conv.h"
#include "references/device/conv_f64_element.h"
#include "tests/properties/model_host.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

using conv::ConvPass;

device_ref::ConvF64Pass device_pass(ConvPass p) {
  return p == ConvPass::kFwd       ? device_ref::ConvF64Pass::kFwd
         : p == ConvPass::kBwdData ? device_ref::ConvF64Pass::kBwdData
                                   : device_ref::ConvF64Pass::kBwdFilter;
}

class ConvDeviceRef : public ::testing::TestWithParam<ConvPass> {};

TEST_P(ConvDeviceRef, ElementFunctionIsTheHostReferenceAndBoundBitForBit) {
  const std::string name = conv::conv_op_name(GetParam());
  const OpSpec* spec = find_spec(name);
  const OpDef& op = test_util::model_op(name);
  ASSERT_NE(spec, nullptr);
  ASSERT_TRUE(op.device_reference.when && op.device_reference.compute);
  int64_t cases = 0, elements = 0, nonfinite = 0, exact = 0, nhwc = 0, padded = 0, relation = 0;
  int64_t per_dtype[3] = {0, 0, 0};  // fp32, fp16, bf16
  for (int64_t idx = 0; cases < 150 && idx < 6000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{5, GenConfig{48}}, idx);
    const Params p(c.params);
    if (!op.device_reference.when(p)) continue;
    relation += p.s("relation").empty() ? 0 : 1;
    ++cases;
    const test_util::ModelHostRun h = test_util::model_host_run(op, c);
    const ref::Conv2dGeometry g = conv::conv_geometry(p);
    const DType dt = p.dt("dtype");
    ++per_dtype[dt == DType::kF16 ? 1 : dt == DType::kBF16 ? 2 : 0];
    nhwc += g.layout == ref::ConvLayout::kNHWC ? 1 : 0;
    auto rows = [&](size_t t) {
      const auto& d = c.tensors[t].desc;
      const View2D v = view_of(d);
      padded += v.ld > v.cols ? 1 : 0;
      return device_ref::input_rows(h.images[t].data() + d.offset * static_cast<int64_t>(dtype_size(d.dtype)), v.cols,
                                    v.ld, d.dtype);
    };
    const device_ref::InputRows in0 = rows(0), in1 = rows(1);
    const ElementBound b = conv::conv_accumulation_ceiling(GetParam(), g, dt);
    const StoreRounding store = store_rounding_for(dt);
    exact += h.refs[0].exact ? 1 : 0;
    const int64_t n = device_ref::conv2d_f64_elements(device_pass(GetParam()), g);
    ASSERT_EQ(static_cast<size_t>(n), h.refs[0].ref.size()) << c.summary();
    for (int64_t e = 0; e < n; ++e) {
      double r = 0, t = 0;
      device_ref::conv2d_f64_element(device_pass(GetParam()), g, b, max_finite(dt), store, in0, in1, e, r, t);
      const size_t l = static_cast<size_t>(e);
      ++elements;
      nonfinite += std::isfinite(h.refs[0].ref[l]) ? 0 : 1;
      ASSERT_TRUE(same_bits_or_nan(r, h.refs[0].ref[l]) && same_bits_or_nan(t, h.refs[0].tol[l]))
          << c.summary() << " element " << e << ": host " << h.refs[0].ref[l] << " tol " << h.refs[0].tol[l]
          << ", device function " << r << " tol " << t;
    }
  }
  EXPECT_GE(cases, 120);
  EXPECT_GT(per_dtype[0], 0);
  EXPECT_GT(per_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(per_dtype[2], 0) << "no bf16 case";
  EXPECT_GT(nonfinite, 0) << "no NaN / Inf reference among the cases";
  EXPECT_GT(exact, 0) << "no exact-tier case";
  EXPECT_GT(nhwc, 0);
  EXPECT_GT(padded, 0);
  if (GetParam() != ConvPass::kFwd) {
    EXPECT_GT(relation, 0) << "no gradcheck case on the device path";
  }
  std::printf(
      "[ measured ] %s device element function: %lld cases (fp32 %lld, fp16 %lld, bf16 %lld), %lld elements "
      "bit for bit (%lld non-finite, %lld exact-tier cases)\n",
      name.c_str(), static_cast<long long>(cases), static_cast<long long>(per_dtype[0]),
      static_cast<long long>(per_dtype[1]), static_cast<long long>(per_dtype[2]), static_cast<long long>(elements),
      static_cast<long long>(nonfinite), static_cast<long long>(exact));
}

INSTANTIATE_TEST_SUITE_P(Passes, ConvDeviceRef,
                         ::testing::Values(ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdFilter),
                         [](const auto& i) { return std::string(conv::conv_op_name(i.param)); });

TEST(ConvDeviceRefWhen, EveryDtypeFromAFewThousandMultiplyAddsTheRelationIncluded) {
  const OpDef& op = test_util::model_op("conv2d");
  nlohmann::json p = {{"dtype", "fp32"}, {"layout", "nchw"}, {"n", 1}, {"groups", 1}, {"cg", 8},
                      {"kg", 8},         {"h", 8},           {"w", 8}, {"r", 3},      {"s", 3}};
  EXPECT_TRUE(op.device_reference.when(Params(p)));  // 8 * 6 * 6 * 72 = 20736 multiply-adds
  p["dtype"] = "fp16";
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "fp16 tensors are drawn on the device too";
  p["dtype"] = "bf16";
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "bf16 tensors are drawn on the device too";
  p["dtype"] = "fp32";
  const OpDef& bwd = test_util::model_op("conv2d_bwd_data");
  EXPECT_TRUE(bwd.device_reference.when(Params(p)));
  p["relation"] = "gradcheck";
  EXPECT_TRUE(bwd.device_reference.when(Params(p))) << "the gradcheck relation runs on the device too";
  p.erase("relation");
  p["cg"] = 1, p["kg"] = 1, p["r"] = 1, p["s"] = 1;
  EXPECT_FALSE(op.device_reference.when(Params(p))) << "64 multiply-adds stay on the host";
  // Backward-filter: one thread per filter tap runs N P Q terms; 4 * 128 * 128 of them stay on the host.
  nlohmann::json f = {{"dtype", "fp32"}, {"layout", "nchw"}, {"n", 4}, {"groups", 1}, {"cg", 1},
                      {"kg", 1},         {"h", 128},         {"w", 128}, {"r", 1},    {"s", 1}};
  EXPECT_FALSE(test_util::model_op("conv2d_bwd_filter").device_reference.when(Params(f)));
  EXPECT_TRUE(test_util::model_op("conv2d").device_reference.when(Params(f)));
}

}  // namespace
}  // namespace assay
