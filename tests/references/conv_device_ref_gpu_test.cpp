// The convolution device references (references/device/conv_f64.cu, OpDef::device_reference of
// properties/conv.cpp) against the host reference and bound, per pass, on generated cases where
// the engine takes the device path: both run the same element function (terms in the same
// order, fp32 products exact in fp64, no contracted multiply-adds) and the same
// dot_element_tol, so the references agree to within 4 ulps of the magnitude sum of |terms|
// (bit for bit in fact; the summary line gives the bitwise share) and the tolerances to 1e-12
// relative, with the same NaN / Inf pattern and exact-tier flag; for fp32, fp16 and bf16 cases
// alike (a narrow case's inputs are read widened, its tolerance carries the output's store
// rounding). A gradcheck case of a backward pass also leaves the forward along the relation's
// sign direction in the reference's scratch, from which the device reduces the relation's sums:
// they are the host's (its forward at the same signs), but for the order of the sums.
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
std::vector<Case> conv_cases(const std::string& name, int want, uint64_t seed) {
  return test_util::device_path_cases(name, want, seed, 64, 200 * int64_t{want});
}

class ConvDeviceRefGpu : public ::testing::TestWithParam<ConvPass> {};

TEST_P(ConvDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = conv::conv_op_name(GetParam());
  const OpDef& op = test_util::model_op(name);
  const std::vector<Case> cases = conv_cases(name, 250, 11);
  ASSERT_GE(cases.size(), 200u);
  test_util::DeviceRefStats st;
  const test_util::RefScale mag = [](size_t, size_t l, const std::vector<OutputRef>& h) { return h[0].aux[0][l]; };
  const ConvPass pass = GetParam();
  int64_t grad_cases = 0, grad_skipped = 0;
  double worst = 0;
  // The relation's sums on the device (device_gradcheck_sums, from the direction and J u its
  // device reference left in the scratch) against the host's, from the host forward at the same
  // signs. The gradient is the host reference in fp32, as a correct kernel's output would be
  // read. The two differ only in summation order: each sum within gamma_{n+m}(2^-53) of its
  // absolute sum, the term the relation's tolerance carries for it.
  const test_util::DeviceCheck sums = [&](const test_util::ModelHostRun& h, const std::vector<DevTensor>& in,
                                          const std::vector<DeviceOutput>& douts, const DeviceContext& ctx) {
    if (pass == ConvPass::kFwd || !wants_gradcheck(h.c)) return;
    const bool data = pass == ConvPass::kBwdData;
    const ref::Conv2dGeometry g = conv::conv_geometry(Params(h.c.params));
    const OutputRef& r = h.refs[0];
    const int64_t n = static_cast<int64_t>(r.ref.size()), m = g.y_elems();
    std::vector<float> grad(static_cast<size_t>(n));
    for (int64_t l = 0; l < n; ++l) grad[static_cast<size_t>(l)] = static_cast<float>(r.ref[static_cast<size_t>(l)]);
    float* dgrad = nullptr;
    ASSERT_EQ(cudaMalloc(&dgrad, sizeof(float) * static_cast<size_t>(std::max<int64_t>(n, 1))), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dgrad, grad.data(), sizeof(float) * grad.size(), cudaMemcpyHostToDevice), cudaSuccess);
    const View2D gv = view_of(h.c.tensors[2].desc);
    DevicePropertiesIn pin;
    pin.inputs = in;
    pin.outputs = {{dgrad, DType::kF32, {gv.rows, gv.cols, gv.cols}, {}, {}}};
    pin.refs = douts;
    GradSums dev;
    const Status st = conv::device_gradcheck_sums(pass, h.c, pin, ctx, dev);
    cudaFree(dgrad);
    ASSERT_TRUE(st.ok()) << h.c.summary() << ": " << st.message();
    // The host's sums, as check_grad_projection forms them.
    const std::vector<double> u = gradcheck_signs(gradcheck_seed(h.c), n);
    const std::vector<double> fixed = h.dense(data ? 1 : 0), v = h.dense(data ? 0 : 1);  // W or X; dY
    std::vector<double> y(static_cast<size_t>(m)), mg(y.size());
    if (data)
      ref::conv2d_forward<double>(g, u.data(), fixed.data(), y.data(), mg.data());
    else
      ref::conv2d_forward<double>(g, fixed.data(), u.data(), y.data(), mg.data());
    const double g_t = gamma_n(2 * g.fwd_reduction(), 0x1p-53);
    GradSums host;
    host.n = n, host.m = m;
    for (int64_t l = 0; l < n; ++l) {
      const double gl = grad[static_cast<size_t>(l)], t = r.tol[static_cast<size_t>(l)], ul = u[static_cast<size_t>(l)];
      if (!std::isfinite(gl) || !std::isfinite(t)) host.skip = true;
      host.kern += ul * gl, host.kern_abs += std::fabs(ul * gl), host.ceil += std::fabs(ul) * t;
    }
    for (int64_t i = 0; i < m; ++i) {
      const double vi = v[static_cast<size_t>(i)], j = y[static_cast<size_t>(i)], e = g_t * mg[static_cast<size_t>(i)];
      if (!std::isfinite(vi) || !std::isfinite(j) || !std::isfinite(e)) host.skip = true;
      host.fd_val += vi * j, host.fd_abs += std::fabs(vi * j), host.fd_err += std::fabs(vi) * e;
    }
    ++grad_cases;
    EXPECT_EQ(dev.n, n) << h.c.summary();
    EXPECT_EQ(dev.m, m) << h.c.summary();
    ASSERT_EQ(dev.skip, host.skip) << h.c.summary();
    if (host.skip) {
      ++grad_skipped;
      return;
    }
    const double gam = 2 * gamma_n(n + m, 0x1p-53);
    const auto near = [&](const char* what, double a, double b, double scale) {
      const double d = std::fabs(a - b);
      worst = std::max(worst, d / (scale + 1e-300));
      EXPECT_LE(d, gam * scale + 1e-300) << h.c.summary() << " " << what << ": device " << a << ", host " << b;
    };
    near("sum v (J u)", dev.fd_val, host.fd_val, host.fd_abs);
    near("sum |v (J u)|", dev.fd_abs, host.fd_abs, host.fd_abs);
    near("sum |v| err", dev.fd_err, host.fd_err, host.fd_err);
    near("sum u g", dev.kern, host.kern, host.kern_abs);
    near("sum |u g|", dev.kern_abs, host.kern_abs, host.kern_abs);
    near("sum |u| tol", dev.ceil, host.ceil, host.ceil);
    // The reference as the gradient satisfies the relation on both sides.
    std::vector<Failure> fd, fh;
    judge_grad_projection(dev, 1, kJvpOnDevice, "<dY, J u>", "d", fd);
    judge_grad_projection(host, 1, "host", "<dY, J u>", "d", fh);
    EXPECT_TRUE(fd.empty()) << h.c.summary() << ": " << (fd.empty() ? "" : fd[0].detail);
    EXPECT_TRUE(fh.empty()) << h.c.summary() << ": " << (fh.empty() ? "" : fh[0].detail);
  };
  for (const Case& c : cases) {
    ASSERT_NO_FATAL_FAILURE(test_util::check_device_reference(op, c, Contract(), 4, mag, 1e-12, st, sums));
    if (HasFailure()) break;
  }
  if (pass != ConvPass::kFwd) {
    EXPECT_GT(grad_cases - grad_skipped, 0) << "no gradcheck case took the device path";
    std::printf("[ measured ] %s gradcheck sums on the device: %lld cases (%lld skipped as non-finite), worst "
                "difference from the host's %.3g of the absolute sum\n",
                name.c_str(), static_cast<long long>(grad_cases), static_cast<long long>(grad_skipped), worst);
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
                                       conv_cases(name, 40, 12), 60);
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
