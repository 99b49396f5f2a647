// The conv2d device reference's element function (references/device/conv_f64_element.h, which
// the GPU kernel loops over) run on the CPU over the engine's own fp32 images (offsets and
// padded rows included) for generated cases the device path takes: reference and tolerance bit
// for bit equal to the host reference and bound (properties/conv.cpp), exact-tier flag
// included. Same terms in the same order with exact fp32 products, the same dot_element_tol:
// nothing may differ. The GPU test (conv_device_ref_gpu_test.cpp) checks the kernel itself.
#include <gtest/gtest.h>

#include <cstring>

#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "properties/conv.h"
#include "references/device/conv_f64_element.h"
#include "tests/properties/model_host.h"

namespace assay {
namespace {

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(ConvDeviceRef, ElementFunctionIsTheHostReferenceAndBoundBitForBit) {
  const OpSpec* spec = find_spec("conv2d");
  const OpDef& op = test_util::model_op("conv2d");
  ASSERT_NE(spec, nullptr);
  ASSERT_TRUE(op.device_reference.when && op.device_reference.compute);
  int64_t cases = 0, elements = 0, nonfinite = 0, exact = 0, nhwc = 0, padded = 0;
  for (int64_t idx = 0; cases < 150 && idx < 4000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{5, GenConfig{48}}, idx);
    const Params p(c.params);
    if (!op.device_reference.when(p)) continue;
    ++cases;
    const test_util::ModelHostRun h = test_util::model_host_run(op, c);
    const ref::Conv2dGeometry g = conv::conv_geometry(p);
    nhwc += g.layout == ref::ConvLayout::kNHWC ? 1 : 0;
    auto rows = [&](size_t t) {
      const auto& d = c.tensors[t].desc;
      const View2D v = view_of(d);
      padded += v.ld > v.cols ? 1 : 0;
      return device_ref::F32Rows{reinterpret_cast<const float*>(h.images[t].data()) + d.offset, v.cols, v.ld};
    };
    const device_ref::F32Rows x = rows(0), w = rows(1);
    GemmBoundModel m;
    m.in = DType::kF32;
    m.k = g.fwd_reduction();
    const ElementBound b = gemm_ceiling(m);
    exact += h.refs[0].exact ? 1 : 0;
    for (int64_t e = 0; e < g.y_elems(); ++e) {
      double r = 0, t = 0;
      device_ref::conv2d_fwd_f64_element(g, b, max_finite(DType::kF32), x, w, e, r, t);
      const size_t l = static_cast<size_t>(e);
      ++elements;
      nonfinite += std::isfinite(h.refs[0].ref[l]) ? 0 : 1;
      ASSERT_TRUE(same_bits(r, h.refs[0].ref[l]) && same_bits(t, h.refs[0].tol[l]))
          << c.summary() << " element " << e << ": host " << h.refs[0].ref[l] << " tol " << h.refs[0].tol[l]
          << ", device function " << r << " tol " << t;
    }
  }
  EXPECT_GE(cases, 100);
  EXPECT_GT(nonfinite, 0) << "no NaN / Inf reference among the cases";
  EXPECT_GT(exact, 0) << "no exact-tier case";
  EXPECT_GT(nhwc, 0);
  EXPECT_GT(padded, 0);
  std::printf("[ measured ] conv2d device element function: %lld cases, %lld elements bit for bit (%lld non-finite, "
              "%lld exact-tier cases)\n",
              static_cast<long long>(cases), static_cast<long long>(elements), static_cast<long long>(nonfinite),
              static_cast<long long>(exact));
}

TEST(ConvDeviceRef, TakesFp32CasesFromAFewThousandMultiplyAdds) {
  const OpDef& op = test_util::model_op("conv2d");
  nlohmann::json p = {{"dtype", "fp32"}, {"layout", "nchw"}, {"n", 1},     {"groups", 1}, {"cg", 8},
                      {"kg", 8},         {"h", 8},           {"w", 8},     {"r", 3},      {"s", 3}};
  EXPECT_TRUE(op.device_reference.when(Params(p)));  // 8 * 6 * 6 * 72 = 20736 multiply-adds
  p["dtype"] = "fp16";
  EXPECT_FALSE(op.device_reference.when(Params(p))) << "only fp32 tensors are drawn on the device";
  p["dtype"] = "fp32";
  p["cg"] = 1, p["kg"] = 1, p["r"] = 1, p["s"] = 1;
  EXPECT_FALSE(op.device_reference.when(Params(p))) << "64 multiply-adds stay on the host";
  EXPECT_FALSE(test_util::model_op("conv2d_bwd_data").device_reference.when);
  EXPECT_FALSE(test_util::model_op("conv2d_bwd_filter").device_reference.when);
}

}  // namespace
}  // namespace assay
