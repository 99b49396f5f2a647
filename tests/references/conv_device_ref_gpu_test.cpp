// The convolution device references (references/device/conv_f64.cu, OpDef::device_reference of
// properties/conv.cpp) against the host reference and bound, per pass, on generated cases where
// the engine takes the device path: both run the same element function (terms in the same
// order, fp32 products exact in fp64, no contracted multiply-adds) and the same
// dot_element_tol, so the references agree to within 4 ulps of the magnitude sum of |terms|
// (bit for bit in fact; the summary line gives the bitwise share) and the tolerances to 1e-12
// relative, with the same NaN / Inf pattern and exact-tier flag; for fp32, fp16 and bf16 cases
// alike (a narrow case's inputs are read widened, its tolerance carries the output's store
// rounding). A gradcheck case of a backward pass also leaves the forward along the relation's
// sign direction beside the reference (DeviceOutput::aux): it is the host forward at the same
// signs, within the same 4 ulps, and its error bound gamma_{2T}(2^-53) x magnitude within 1e-12.
// Then the engine itself: the direct and implicit-GEMM kernels pass such cases, of
// every dtype, with the verdict naming the device reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "properties/conv.h"
#include "properties/gradcheck_relation.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

using conv::ConvPass;

/// Up to `want` generated cases of `op` the device path takes (max_dim 64 keeps the host side quick).
std::vector<Case> device_cases(const std::string& name, int want, uint64_t seed) {
  const OpSpec* spec = find_spec(name);
  const OpDef* op = find_op(name);
  std::vector<Case> out;
  if (spec == nullptr || op == nullptr) return out;
  for (int64_t i = 0; static_cast<int>(out.size()) < want && i < 200 * want; ++i) {
    Case c = generate_case(*spec, GenPlan{seed, GenConfig{64}}, i);
    if (op->device_reference.when(Params(c.params))) out.push_back(std::move(c));
  }
  return out;
}

class ConvDeviceRefGpu : public ::testing::TestWithParam<ConvPass> {};

TEST_P(ConvDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = conv::conv_op_name(GetParam());
  const OpDef& op = test_util::model_op(name);
  const std::vector<Case> cases = device_cases(name, 250, 11);
  ASSERT_GE(cases.size(), 200u);
  test_util::DeviceRefStats st;
  const test_util::RefScale mag = [](size_t, size_t l, const std::vector<OutputRef>& h) { return h[0].aux[0][l]; };
  const ConvPass pass = GetParam();
  int64_t grad_cases = 0, grad_elems = 0, grad_bitwise = 0;
  // The host's J u: its forward at the signs the relation draws for the case, with the magnitude.
  const test_util::AuxCheck jvp = [&](const test_util::ModelHostRun& h, size_t,
                                      const std::vector<std::vector<double>>& aux) {
    const bool data = pass == ConvPass::kBwdData;
    const ref::Conv2dGeometry g = conv::conv_geometry(Params(h.c.params));
    const std::vector<double> u = gradcheck_signs(gradcheck_seed(h.c), data ? g.x_elems() : g.w_elems());
    const std::vector<double> fixed = h.dense(data ? 1 : 0);  // W, or X
    std::vector<double> y(static_cast<size_t>(g.y_elems())), m(y.size());
    if (data)
      ref::conv2d_forward<double>(g, u.data(), fixed.data(), y.data(), m.data());
    else
      ref::conv2d_forward<double>(g, fixed.data(), u.data(), y.data(), m.data());
    ASSERT_EQ(aux.size(), 2u) << h.c.summary();
    ASSERT_EQ(aux[0].size(), y.size()) << h.c.summary();
    ++grad_cases;
    const double g_t = gamma_n(2 * g.fwd_reduction(), 0x1p-53);
    int reported = 0;
    for (size_t i = 0; i < y.size() && reported < 5; ++i) {
      ++grad_elems;
      grad_bitwise += aux[0][i] == y[i] || (std::isnan(aux[0][i]) && std::isnan(y[i])) ? 1 : 0;
      // A non-finite J u (an Inf input) ends the relation on either path: only its value must agree.
      const bool ok = !std::isfinite(y[i])
                          ? aux[0][i] == y[i] || (std::isnan(aux[0][i]) && std::isnan(y[i]))
                          : std::fabs(aux[0][i] - y[i]) <= 4 * std::ldexp(m[i], -52) &&
                                std::fabs(aux[1][i] - g_t * m[i]) <= 1e-12 * g_t * m[i];
      if (!ok) {
        ++reported;
        ADD_FAILURE() << h.c.summary() << " J u[" << i << "]: device " << aux[0][i] << " err " << aux[1][i]
                      << ", host " << y[i] << " err " << g_t * m[i];
      }
    }
  };
  for (const Case& c : cases) {
    ASSERT_NO_FATAL_FAILURE(test_util::check_device_reference(op, c, Contract(), 4, mag, 1e-12, st, jvp));
    if (HasFailure()) break;
  }
  if (pass != ConvPass::kFwd) {
    EXPECT_GT(grad_cases, 0) << "no gradcheck case took the device path";
    std::printf("[ measured ] %s gradcheck J u on the device: %lld cases, %lld elements, %lld bit for bit\n",
                name.c_str(), static_cast<long long>(grad_cases), static_cast<long long>(grad_elems),
                static_cast<long long>(grad_bitwise));
  }
  EXPECT_GT(st.by_dtype[0], 0);
  EXPECT_GT(st.by_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(st.by_dtype[2], 0) << "no bf16 case";
  std::printf("[ measured ] %s\n", st.summary(name).c_str());
}

TEST_P(ConvDeviceRefGpu, EngineTakesTheDevicePathAndCorrectKernelsPass) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = conv::conv_op_name(GetParam());
  test_util::expect_engine_device_path(test_util::model_op(name),
                                       {find_variant(name, "direct"), find_variant(name, "implicit_gemm")},
                                       device_cases(name, 40, 12), 60);
}

// Small cases just above the device threshold (2048 to 8192 multiply-adds, every dtype): the
// printed device-path and host-path times per case say whether the threshold
// (properties/conv.cpp kDeviceRefMacs) sits where the two paths cost the same.
TEST_P(ConvDeviceRefGpu, EngineTimesBothPathsNearTheThreshold) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = conv::conv_op_name(GetParam());
  const OpSpec* spec = find_spec(name);
  const OpDef& op = test_util::model_op(name);
  ASSERT_NE(spec, nullptr);
  std::vector<Case> cases;
  for (int64_t i = 0; cases.size() < 60 && i < 200000; ++i) {
    Case c = generate_case(*spec, GenPlan{13, GenConfig{64}}, i);
    const Params p(c.params);
    const ref::Conv2dGeometry g = conv::conv_geometry(p);
    const int64_t macs = g.n * g.k * g.out_h() * g.out_w() * g.fwd_reduction();
    if (op.device_reference.when(p) && macs < 8192) cases.push_back(std::move(c));
  }
  ASSERT_GE(cases.size(), 20u);
  test_util::expect_engine_device_path(test_util::model_op(name),
                                       {find_variant(name, "direct"), find_variant(name, "implicit_gemm")}, cases, 40);
}

INSTANTIATE_TEST_SUITE_P(Passes, ConvDeviceRefGpu,
                         ::testing::Values(ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdFilter),
                         [](const auto& i) { return std::string(conv::conv_op_name(i.param)); });

}  // namespace
}  // namespace assay
