// GPU tests of the convolution ops (properties/conv.cpp): the direct and implicit-GEMM kernels
// pass a fuzz campaign of every op with every check on, each planted bug of tests/mutants/conv is
// caught (and shrunk and stored) by a check that claims it, and each kernel agrees with cuDNN
// (FMA math, dot-product algorithms) within the sum of both ceilings on a handful of shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/dtype.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "tests/properties/campaign_checks.h"
#include "tests/properties/device_buffers.h"
#include "properties/conv.h"
#include "references/library/cudnn.h"

namespace assay {
namespace {

using test_util::DevBuf;
using test_util::encode;
using conv::ConvPass;

using ConvGpu = GpuCampaignTest<ConvPass>;

TEST_P(ConvGpu, CorrectVariantsPass) {
  expect_campaign_passes(conv::conv_op_name(GetParam()), 320, 2048);
}

INSTANTIATE_TEST_SUITE_P(Ops, ConvGpu, ::testing::Values(ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdFilter),
                         [](const ::testing::TestParamInfo<ConvPass>& i) {
                           return std::string(conv::conv_op_name(i.param));
                         });

using ConvGpuMutants = GpuCampaignTest<PlantedMutant>;

TEST_P(ConvGpuMutants, CaughtShrunkAndStored) {
  expect_mutant_caught(GetParam(), 1000, 2048, 30, dir_.string());
}

using namespace failure_kinds;

INSTANTIATE_TEST_SUITE_P(Planted, ConvGpuMutants,
                         ::testing::Values(PlantedMutant{"conv2d", "mutant_conv_pad_offset", {kB, kE}},
                                           PlantedMutant{"conv2d", "mutant_conv_swapped_stride", {kB, kE}},
                                           PlantedMutant{"conv2d", "mutant_conv_right_edge", {kB, kE, kN}},
                                           PlantedMutant{
                                               "conv2d_bwd_filter", "mutant_conv_bwd_filter_last_batch", {kB, kE}},
                                           PlantedMutant{"conv2d", "mutant_conv_igemm_k_tail", {kB, kE, kN, kG}}),
                         [](const ::testing::TestParamInfo<PlantedMutant>& i) { return std::string(i.param.variant); });

// ---- against cuDNN ------------------------------------------------------------------------------------

std::vector<double> conv_values(int64_t n, DType t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = round_to(t, static_cast<float>(nd(rng)));
  return v;
}

ref::Conv2dGeometry shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t pad,
                          int64_t stride, int64_t dil, int64_t groups) {
  ref::Conv2dGeometry g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s, g.pad_h = g.pad_w = pad;
  g.stride_h = g.stride_w = stride, g.dil_h = g.dil_w = dil, g.groups = groups;
  return g;
}

class ConvVendorGpu : public ::testing::TestWithParam<std::tuple<ConvPass, ref::ConvLayout, DType>> {};

TEST_P(ConvVendorGpu, KernelsAgreeWithCudnnWithinBothCeilings) {
  auto devs = gpu::device_count();
  if (!devs.ok()) GTEST_SKIP() << "GPU test skipped: " << devs.status().message();
  auto h = vendor::CudnnHandle::create();
  if (!h.ok() && h.status().code() == StatusCode::kUnavailable) GTEST_SKIP() << h.status().message();
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  const auto [pass, layout, dt] = GetParam();
  const std::vector<ref::Conv2dGeometry> shapes = {
      shape(2, 8, 6, 5, 16, 1, 1, 0, 1, 1, 1),    // 1x1
      shape(1, 3, 2, 3, 4, 5, 5, 2, 1, 1, 1),     // filter larger than the input, padded
      shape(3, 5, 7, 9, 7, 3, 3, 1, 2, 1, 1),     // odd sizes, stride 2
      shape(2, 6, 9, 9, 4, 3, 3, 2, 1, 2, 2),     // dilation 2, 2 groups
      shape(2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 16),  // depthwise
      shape(1, 64, 6, 6, 8, 3, 3, 1, 1, 1, 1),    // reduction 576
  };
  int ran = 0;
  std::string skipped;
  for (ref::Conv2dGeometry g : shapes) {
    g.layout = layout;
    ASSERT_TRUE(g.valid());
    const int64_t n0 = pass == ConvPass::kBwdData ? g.y_elems() : g.x_elems();
    const int64_t n1 = pass == ConvPass::kBwdFilter ? g.y_elems() : g.w_elems();
    const int64_t no = pass == ConvPass::kFwd ? g.y_elems() : pass == ConvPass::kBwdData ? g.x_elems() : g.w_elems();
    const std::vector<double> a = conv_values(n0, dt, 11), b = conv_values(n1, dt, 12);
    const OutputRef ref = conv::conv_reference(pass, g, dt, a.data(), b.data(), -1);
    const size_t es = dtype_size(dt);
    DevBuf da(static_cast<size_t>(n0) * es), db(static_cast<size_t>(n1) * es), dk(static_cast<size_t>(no) * es),
        dc(static_cast<size_t>(no) * es);
    ASSERT_TRUE(da.p && db.p && dk.p && dc.p);
    ASSERT_EQ(cudaMemcpy(da.p, encode(dt, a).data(), static_cast<size_t>(n0) * es, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db.p, encode(dt, b).data(), static_cast<size_t>(n1) * es, cudaMemcpyHostToDevice),
              cudaSuccess);
    vendor::CudnnConv p;
    p.geom = g, p.dtype = dt, p.math = vendor::ConvMath::kFma, p.algos = vendor::ConvAlgoPolicy::kDotProduct;
    StatusOr<vendor::ConvAlgoUsed> used =
        pass == ConvPass::kFwd       ? vendor::cudnn_conv_forward(**h, p, 1.0f, da.p, db.p, 0.0f, dc.p)
        : pass == ConvPass::kBwdData ? vendor::cudnn_conv_backward_data(**h, p, 1.0f, db.p, da.p, 0.0f, dc.p)
                                     : vendor::cudnn_conv_backward_filter(**h, p, 1.0f, da.p, db.p, 0.0f, dc.p);
    if (!used.ok() && used.status().code() == StatusCode::kUnavailable) {
      skipped += " [" + used.status().message() + "]";
      continue;
    }
    ASSERT_TRUE(used.ok()) << used.status().to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<unsigned char> cbytes(static_cast<size_t>(no) * es);
    ASSERT_EQ(cudaMemcpy(cbytes.data(), dc.p, cbytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (const char* variant : {"direct", "implicit_gemm"}) {
      // The registered variant's own launcher, on dense tensors in the op's order (in0, in1, out).
      const VariantDef* v = find_variant(conv::conv_op_name(pass), variant);
      ASSERT_NE(v, nullptr) << variant;
      const bool nchw = layout == ref::ConvLayout::kNCHW;
      const nlohmann::json pj = {{"dtype", std::string(dtype_name(dt))},
                                 {"layout", nchw ? "nchw" : "nhwc"},
                                 {"n", g.n},
                                 {"groups", g.groups},
                                 {"cg", g.cg()},
                                 {"kg", g.kg()},
                                 {"h", g.h},
                                 {"w", g.w},
                                 {"r", g.r},
                                 {"s", g.s},
                                 {"pad_h", g.pad_h},
                                 {"pad_w", g.pad_w},
                                 {"stride_h", g.stride_h},
                                 {"stride_w", g.stride_w},
                                 {"dil_h", g.dil_h},
                                 {"dil_w", g.dil_w}};
      const int64_t ldx = nchw ? g.w : g.c, ldw = nchw ? g.s : g.cg(), ldy = nchw ? g.out_w() : g.k;
      const int64_t ld0 = pass == ConvPass::kBwdData ? ldy : ldx, ld1 = pass == ConvPass::kBwdFilter ? ldy : ldw,
                    ldo = pass == ConvPass::kFwd ? ldy : pass == ConvPass::kBwdData ? ldx : ldw;
      const std::vector<DevTensor> t = {{da.p, dt, {0, 0, ld0}, {}, {}},
                                        {db.p, dt, {0, 0, ld1}, {}, {}},
                                        {dk.p, dt, {0, 0, ldo}, {}, {}}};
      ASSERT_EQ(v->launch(Params(pj), t, nullptr), cudaSuccess) << variant;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << variant;
      std::vector<unsigned char> kbytes(cbytes.size());
      ASSERT_EQ(cudaMemcpy(kbytes.data(), dk.p, kbytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      int64_t bad = 0;
      std::string first;
      for (int64_t i = 0; i < no; ++i) {
        const double kv = load_as_double(dt, kbytes.data() + i * static_cast<int64_t>(es)),
                     cv = load_as_double(dt, cbytes.data() + i * static_cast<int64_t>(es));
        const size_t l = static_cast<size_t>(i);
        const bool ok = std::fabs(kv - cv) <= 2 * ref.tol[l] && std::fabs(kv - ref.ref[l]) <= ref.tol[l] &&
                        std::fabs(cv - ref.ref[l]) <= ref.tol[l];
        if (!ok && bad++ == 0)
          first = "element " + std::to_string(i) + ": kernel " + std::to_string(kv) + ", cuDNN " + std::to_string(cv) +
                  ", ref " + std::to_string(ref.ref[l]) + ", tol " + std::to_string(ref.tol[l]);
      }
      EXPECT_EQ(bad, 0) << conv::conv_op_name(pass) << " " << variant << " vs cuDNN " << used->name << " on " << g.n
                        << "x" << g.c << "x" << g.h << "x" << g.w << " k" << g.k << " " << g.r << "x" << g.s
                        << " groups " << g.groups << ": " << first;
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "cuDNN lacks every shape of this configuration:" << skipped;
  if (!skipped.empty()) RecordProperty("cudnn_skipped", skipped);
}

INSTANTIATE_TEST_SUITE_P(PassesLayoutsDtypes, ConvVendorGpu,
                         ::testing::Combine(::testing::Values(ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdFilter),
                                            ::testing::Values(ref::ConvLayout::kNCHW, ref::ConvLayout::kNHWC),
                                            ::testing::Values(DType::kF32, DType::kF16, DType::kBF16)),
                         [](const ::testing::TestParamInfo<std::tuple<ConvPass, ref::ConvLayout, DType>>& i) {
                           return std::string(conv::conv_op_name(std::get<0>(i.param))) +
                                  (std::get<1>(i.param) == ref::ConvLayout::kNCHW ? "_nchw_" : "_nhwc_") +
                                  std::string(dtype_name(std::get<2>(i.param)));
                         });

}  // namespace
}  // namespace assay
