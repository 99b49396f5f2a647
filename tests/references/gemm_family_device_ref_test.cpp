// The device references of gemm_batched, gemm_int8 and gemm_fp8 (references/device/
// gemm_f64_batch.cu: one strided problem per case, then the tolerance pass of gemm_f64_tol.h;
// OpDef::device_reference of properties/gemm_batched.cpp and gemm_quant.cpp), and gemm_tc's and
// gemm_bias_act's (references/device/gemm_f64.cu, properties/gemm_tc.cpp, gemm_epilogue.cpp) at
// the end.
//
// On the CPU: the element functions the kernels loop over, run over the engine's own images
// (padded rows, offsets, broadcast A, transposes, C poisoned where beta == 0, NaN-injected e4m3)
// for generated cases the device path takes, against the host reference and bound: bit for bit.
// Every product and sum is an explicitly rounded fp64 operation on exactly decoded inputs in the
// host's order, and the tolerances are the host bounds' own functions, so nothing may differ.
//
// On a GPU: the op's device reference itself against the host path (test_util::
// check_device_reference: the same NaN / Inf pattern, references within 0 ulps, tolerances
// equal), then the engine takes the device path and the correct kernels pass, relations
// included; a kernel that breaks a relation is caught on the device path (the engine's test of
// device-path relations, and the planted bugs of tests/mutants/ in their own suites).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/ulp_core.h"
#include "properties/gemm_quant.h"
#include "references/device/gemm_f64_batch_core.h"
#include "references/device/gemm_f64_tol.h"
#include "tests/properties/model_host.h"
#include "tests/references/device_ref_check.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

/// Up to `want` generated cases of `name` the device path takes.
std::vector<Case> family_cases(const std::string& name, int want, uint64_t seed, int64_t* host_cases = nullptr) {
  const OpSpec* spec = find_spec(name);
  const OpDef* op = find_op(name);
  std::vector<Case> out;
  if (spec == nullptr || op == nullptr) return out;
  for (int64_t i = 0; static_cast<int>(out.size()) < want && i < 100 * want; ++i) {
    Case c = generate_case(*spec, GenPlan{seed, GenConfig{64}}, i);
    if (op->device_reference.when(Params(c.params))) {
      out.push_back(std::move(c));
    } else if (host_cases != nullptr) {
      ++*host_cases;
    }
  }
  return out;
}

/// The engine's images packed into one buffer at 16-byte aligned offsets, as the lane's arena
/// holds them: the element functions address tensors as byte offsets from one base.
struct Packed {
  std::vector<unsigned char> bytes;
  std::vector<uint64_t> at;  ///< byte offset of each tensor's element [0] (its desc.offset applied)
};

Packed pack(const Case& c, const test_util::ModelHostRun& h) {
  Packed p;
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const size_t start = (p.bytes.size() + 15) / 16 * 16;
    p.bytes.resize(start + h.images[t].size());
    std::memcpy(p.bytes.data() + start, h.images[t].data(), h.images[t].size());
    p.at.push_back(start + static_cast<uint64_t>(c.tensors[t].desc.offset) * dtype_size(c.tensors[t].desc.dtype));
  }
  return p;
}

/// Expects output o of the host run to equal (ref, tol), bit for bit, element for element.
void expect_bits(const Case& c, const test_util::ModelHostRun& h, size_t o, const std::vector<double>& ref,
                 const std::vector<double>& tol, int64_t& elements, int64_t& nonfinite) {
  const OutputRef& r = h.refs[o];
  ASSERT_EQ(r.ref.size(), ref.size()) << c.summary();
  for (size_t l = 0; l < ref.size(); ++l) {
    ++elements;
    nonfinite += std::isfinite(r.ref[l]) ? 0 : 1;
    ASSERT_TRUE(same_bits_or_nan(ref[l], r.ref[l]) && same_bits_or_nan(tol[l], r.tol[l]))
        << c.summary() << " output " << o << " element " << l << ": host " << r.ref[l] << " tol " << r.tol[l]
        << ", device functions " << ref[l] << " tol " << tol[l];
  }
}

TEST(GemmFamilyDeviceRef, GemmBatchedElementFunctionsAreTheHostBitForBit) {
  const OpDef& op = test_util::model_op("gemm_batched");
  int64_t host_cases = 0, elements = 0, nonfinite = 0, exact = 0, broadcast = 0, trans = 0, unread_c = 0;
  const std::vector<Case> cases = family_cases("gemm_batched", 120, 3, &host_cases);
  ASSERT_GE(cases.size(), 100u);
  for (const Case& c : cases) {
    const Params p(c.params);
    const test_util::ModelHostRun h = test_util::model_host_run(op, c);
    const Packed img = pack(c, h);
    device_ref::F64GemmProblem g;
    g.m = p.i("m"), g.n = p.i("n"), g.k = p.i("k"), g.batch = p.i("batch");
    g.trans_a = p.b("trans_a"), g.trans_b = p.b("trans_b");
    g.lda = h.hv[0].v.ld, g.ldb = h.hv[1].v.ld, g.ldc = h.hv[2].v.ld;
    g.stride_a = p.b("broadcast_a") ? 0 : c.tensors[0].desc.strides[0];
    g.stride_b = c.tensors[1].desc.strides[0], g.stride_c = c.tensors[2].desc.strides[0];
    g.a = img.at[0], g.b = img.at[1], g.c = img.at[2];
    g.alpha = p.r("alpha", 1), g.beta = p.r("beta", 0);
    const size_t n = static_cast<size_t>(g.batch * g.m * g.n);
    std::vector<double> ref(n), tol(n);
    for (int64_t e = 0; e < g.batch; ++e)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) device_ref::f64_gemm_element(g, img.bytes.data(), e, i, j, ref.data(), tol.data());
    GemmBoundModel model;
    model.k = g.k, model.alpha_abs = std::fabs(g.alpha), model.has_beta = g.beta != 0;
    const device_ref::F64DotTol dt{.b = gemm_ceiling(model)};
    for (size_t l = 0; l < n; ++l) device_ref::f64_dot_tol_element(dt, &ref[l], &tol[l]);
    ASSERT_NO_FATAL_FAILURE(expect_bits(c, h, 0, ref, tol, elements, nonfinite));
    exact += h.refs[0].exact ? 1 : 0;
    broadcast += p.b("broadcast_a") ? 1 : 0;
    trans += g.trans_a || g.trans_b ? 1 : 0;
    unread_c += g.beta == 0 ? 1 : 0;
  }
  EXPECT_GT(host_cases, 0) << "no case left on the host path (k == 0, the smallest)";
  EXPECT_GT(nonfinite, 0) << "no NaN / Inf reference";
  EXPECT_GT(exact, 0);
  EXPECT_GT(broadcast, 0);
  EXPECT_GT(trans, 0);
  EXPECT_GT(unread_c, 0) << "no beta == 0 case (C poisoned)";
  std::printf("[ measured ] gemm_batched device element functions: %zu cases, %lld elements bit for bit (%lld non-finite, "
              "%lld exact-tier, %lld broadcast-A, %lld beta == 0 cases); %lld cases on the host path\n",
              cases.size(), static_cast<long long>(elements), static_cast<long long>(nonfinite),
              static_cast<long long>(exact), static_cast<long long>(broadcast), static_cast<long long>(unread_c),
              static_cast<long long>(host_cases));
}

/// int8 or fp8: the accumulation problem (A m x k, B n x k, both k-contiguous) on the packed images.
device_ref::F64GemmProblem quant_problem(const Case& c, const test_util::ModelHostRun& h, const Packed& img,
                                         int32_t type) {
  const Params p(c.params);
  device_ref::F64GemmProblem g;
  g.a_type = g.b_type = type;
  g.trans_b = 1;
  g.m = p.i("m"), g.n = p.i("n"), g.k = p.i("k");
  g.lda = h.hv[0].v.ld, g.ldb = h.hv[1].v.ld;
  g.a = img.at[0], g.b = img.at[1];
  return g;
}

TEST(GemmFamilyDeviceRef, QuantElementFunctionsAreTheHostBitForBit) {
  for (const std::string name : {"gemm_int8", "gemm_fp8"}) {
    const bool i8 = name == "gemm_int8";
    const OpDef& op = test_util::model_op(name);
    int64_t host_cases = 0, elements = 0, nonfinite = 0, exact = 0, narrow = 0, padded = 0, split_checked = 0;
    const std::vector<Case> cases = family_cases(name, 120, 4, &host_cases);
    ASSERT_GE(cases.size(), 100u) << name;
    for (const Case& c : cases) {
      const Params p(c.params);
      const test_util::ModelHostRun h = test_util::model_host_run(op, c);
      const Packed img = pack(c, h);
      const device_ref::F64GemmProblem g = quant_problem(c, h, img, i8 ? device_ref::kInI8 : device_ref::kInE4M3);
      const size_t n = static_cast<size_t>(g.m * g.n);
      std::vector<double> acc(n), mag(n);
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) device_ref::f64_gemm_element(g, img.bytes.data(), 0, i, j, acc.data(), mag.data());
      // The warp and block kernels' splits of k (f64_gemm_sums_exact): thread t of 32 or 256 sums
      // q = t, t + 32 (256), ..., then shuffle trees of 32 and a sum of the 8 warps' partials;
      // exact sums make them the sequential order's bits.
      ASSERT_TRUE(device_ref::f64_gemm_sums_exact(g)) << c.summary();
      for (int threads : {32, 256})
        for (int64_t i = 0; i < g.m; ++i)
          for (int64_t j = 0; j < g.n; ++j) {
            std::vector<double> pa(static_cast<size_t>(threads)), ps(pa.size());
            for (int t = 0; t < threads; ++t)
              device_ref::f64_gemm_sums(g, img.bytes.data(), 0, i, j, t, threads, pa[static_cast<size_t>(t)],
                                        ps[static_cast<size_t>(t)]);
            for (int w = 0; w < threads; w += 32)
              for (int off = 16; off > 0; off /= 2)
                for (int t = w; t < w + off; ++t) pa[t] += pa[t + off], ps[t] += ps[t + off];
            double sa = pa[0], ss = ps[0];
            for (int w = 32; w < threads; w += 32) sa += pa[static_cast<size_t>(w)], ss += ps[static_cast<size_t>(w)];
            const size_t l = static_cast<size_t>(i * g.n + j);
            ASSERT_TRUE(same_bits_or_nan(sa, acc[l]) && same_bits_or_nan(ss, mag[l]))
                << c.summary() << " element " << l << " over " << threads << " threads: split sums " << sa << ", "
                << ss << " against " << acc[l] << ", " << mag[l];
            ++split_checked;
          }
      const DType od = p.dt("out");
      narrow += od != DType::kF32 ? 1 : 0;
      padded += h.hv[0].v.ld > h.hv[0].v.cols || h.hv[1].v.ld > h.hv[1].v.cols ? 1 : 0;
      if (i8) {
        // Acc: exact (tolerance 0); D from it through the dequantisation element.
        ASSERT_NO_FATAL_FAILURE(expect_bits(c, h, 0, acc, std::vector<double>(n, 0.0), elements, nonfinite));
        auto floats = [&](size_t t) { return reinterpret_cast<const float*>(img.bytes.data() + img.at[t]); };
        const device_ref::F64Int8Dequant q{.sa = floats(2), .sw = floats(3), .bias = p.b("bias") ? floats(4) : nullptr,
                                           .store = store_rounding_for(od), .top = max_finite(od)};
        std::vector<double> d(n), tol(n);
        for (int64_t i = 0; i < g.m; ++i)
          for (int64_t j = 0; j < g.n; ++j) {
            const size_t l = static_cast<size_t>(i * g.n + j);
            device_ref::f64_int8_dequant_element(q, i, j, acc[l], &d[l], &tol[l]);
          }
        ASSERT_NO_FATAL_FAILURE(expect_bits(c, h, 1, d, tol, elements, nonfinite));
      } else {
        const double sa = h.hv[2].at(0, 0), sb = h.hv[3].at(0, 0);
        const device_ref::F64DotTol dt = quant::fp8_tolerance(g.k, sa, sb, od, sa * sb);
        for (size_t l = 0; l < n; ++l) device_ref::f64_dot_tol_element(dt, &acc[l], &mag[l]);
        ASSERT_NO_FATAL_FAILURE(expect_bits(c, h, 0, acc, mag, elements, nonfinite));
      }
      exact += h.refs.back().exact ? 1 : 0;
    }
    EXPECT_GT(host_cases, 0) << name;
    EXPECT_GT(narrow, 0) << name << ": no fp16 / bf16 output";
    EXPECT_GT(padded, 0) << name;
    if (!i8) {
      EXPECT_GT(nonfinite, 0) << "no NaN-injected fp8 case";
      EXPECT_GT(exact, 0) << "no exact-tier fp8 case";
    }
    std::printf("[ measured ] %s device element functions: %zu cases, %lld elements bit for bit (%lld non-finite, %lld "
                "exact-tier, %lld narrow-output cases), %lld split over 32 and 256 threads bit for bit; %lld cases on the host "
                "path\n",
                name.c_str(), cases.size(), static_cast<long long>(elements), static_cast<long long>(nonfinite),
                static_cast<long long>(exact), static_cast<long long>(narrow), static_cast<long long>(split_checked),
                static_cast<long long>(host_cases));
  }
}

TEST(GemmFamilyDeviceRef, DevicePathTakesCasesFromAFewThousandMultiplyAdds) {
  nlohmann::json b = {{"batch", 4}, {"m", 16}, {"n", 16}, {"k", 16}, {"alpha", 1.0}, {"beta", 0.0}};
  const OpDef& batched = test_util::model_op("gemm_batched");
  EXPECT_TRUE(batched.device_reference.when(Params(b)));  // 16384 multiply-adds
  b["relation"] = "permute_batches";
  EXPECT_TRUE(batched.device_reference.when(Params(b))) << "a relation runs on the device path too";
  b.erase("relation");
  b["k"] = 0;
  EXPECT_FALSE(batched.device_reference.when(Params(b))) << "k == 0 stays on the host";
  b["k"] = 1, b["batch"] = 1, b["m"] = 8, b["n"] = 8;
  EXPECT_FALSE(batched.device_reference.when(Params(b))) << "64 multiply-adds stay on the host";
  for (const char* name : {"gemm_int8", "gemm_fp8"}) {
    nlohmann::json q = {{"m", 16}, {"n", 16}, {"k", 64}, {"out", "fp32"}};
    const OpDef& op = test_util::model_op(name);
    EXPECT_TRUE(op.device_reference.when(Params(q))) << name;
    q["relation"] = "scale2";
    EXPECT_TRUE(op.device_reference.when(Params(q))) << name;
    q.erase("relation");
    q["k"] = 0;
    EXPECT_FALSE(op.device_reference.when(Params(q))) << name;
  }
}

// ---- on a GPU ------------------------------------------------------------------------------------------

const test_util::RefScale kMag = [](size_t, size_t, const std::vector<OutputRef>&) { return 1.0; };

class GemmFamilyDeviceRefGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(GemmFamilyDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = GetParam();
  const OpDef& op = test_util::model_op(name);
  const std::vector<Case> cases = family_cases(name, 200, 21);
  ASSERT_GE(cases.size(), 150u);
  test_util::DeviceRefStats st;
  for (const Case& c : cases) {
    // 0 ulps: the same operations in the same order on both sides.
    ASSERT_NO_FATAL_FAILURE(test_util::check_device_reference(op, c, Contract(), 0, kMag, 0, st));
    if (HasFailure()) break;
  }
  std::printf("[ measured ] %s\n", st.summary(name).c_str());
}

TEST_P(GemmFamilyDeviceRefGpu, EngineTakesTheDevicePathAndCorrectKernelsPass) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::string name = GetParam();
  std::vector<const VariantDef*> variants = {find_variant(name, name == "gemm_batched" ? "strided"
                                                                : name == "gemm_int8"  ? "dp4a"
                                                                                       : "simt")};
  if (name == "gemm_batched") variants.push_back(find_variant(name, "ptr_array"));
  test_util::expect_engine_device_path(test_util::model_op(name), variants, family_cases(name, 40, 22), 40);
}

// The metamorphic relations on the device path (the engine transforms copies of the drawn inputs
// and runs the device reference on them): a correct kernel passes them with nothing reported as
// not run, and the swapped-stride launcher, which permute_batches catches on the host path, is
// caught by the relation on exactly the same cases on the device path.
TEST(GemmFamilyDeviceRefGpu, RelationsRunOnTheDevicePathAsOnTheHost) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("gemm_batched");
  OpDef host_op = op;
  host_op.device_reference = DeviceReference{};
  std::vector<Case> cases;
  for (const Case& c : family_cases("gemm_batched", 400, 23))
    if (!Params(c.params).s("relation").empty()) cases.push_back(c);
  ASSERT_GE(cases.size(), 40u);
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const VariantDef* good = find_variant("gemm_batched", "strided");
  const VariantDef* bad = find_variant("gemm_batched", "mutant_batched_swapped_stride");
  ASSERT_NE(good, nullptr);
  ASSERT_NE(bad, nullptr);
  auto property_failed = [](const Verdict& v) {
    for (const Failure& f : v.failures)
      if (f.kind == FailureKind::kProperty) return true;
    return false;
  };
  int64_t relations_caught = 0;
  for (const Case& c : cases) {
    auto dev = run_model(op, {good, bad}, c, **lane, false);
    auto host = run_model(host_op, {good, bad}, c, **lane, false);
    ASSERT_TRUE(dev.ok() && host.ok()) << c.summary();
    ASSERT_EQ(dev->size(), 2u);
    ASSERT_EQ(host->size(), 2u);
    EXPECT_TRUE((*dev)[0].passed()) << c.summary() << ": " << (*dev)[0].summary();
    EXPECT_EQ((*dev)[0].metrics.reference, op.device_reference.name) << c.summary();
    EXPECT_EQ((*dev)[0].metrics.not_run.find("relation"), std::string::npos) << (*dev)[0].metrics.not_run;
    EXPECT_EQ(property_failed((*dev)[1]), property_failed((*host)[1]))
        << c.summary() << "\n device path: " << (*dev)[1].summary() << "\n host path: " << (*host)[1].summary();
    relations_caught += property_failed((*dev)[1]) ? 1 : 0;
  }
  EXPECT_GT(relations_caught, 0) << "the relation never caught the swapped stride: the test shows nothing";
  std::printf("[ measured ] gemm_batched relations on the device path: %zu cases, the swapped-stride launcher broke "
              "the relation in %lld (the same cases as on the host path)\n",
              cases.size(), static_cast<long long>(relations_caught));
}

INSTANTIATE_TEST_SUITE_P(Ops, GemmFamilyDeviceRefGpu, ::testing::Values("gemm_batched", "gemm_int8", "gemm_fp8"));

// ---- gemm_tc (references/device/gemm_f64.cu: cuBLAS fp64 products, then tc_finish) ---------------------

/// Generated gemm_tc cases the device path takes (above 2^22 multiply-adds: extents to 256 reach
/// 2^24), relations and every dtype pair among them.
std::vector<Case> tc_cases(int want, uint64_t seed) {
  return test_util::device_path_cases("gemm_tc", want, seed, 256, 400 * int64_t{want});
}

TEST(GemmTcDeviceRef, TakesCasesAboveGemmsThreshold) {
  const OpDef& op = test_util::model_op("gemm_tc");
  nlohmann::json p = {{"m", 256}, {"n", 128}, {"k", 128}, {"dtype", "bf16"}, {"out_dtype", "fp32"}};
  EXPECT_FALSE(op.device_reference.when(Params(p))) << "2^22 multiply-adds stay on the host";
  p["k"] = 129;
  EXPECT_TRUE(op.device_reference.when(Params(p)));
  p["relation"] = "alpha2";
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "a relation runs on the device path too";
  p.erase("relation");
  p["k"] = 0, p["m"] = 4096, p["n"] = 2048;
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "k == 0 counts as k == 1, as gemm's";
}

// Both references on the same images. They sum in different orders, so ref may differ by each
// one's fp64 error, (k + 2) 2^-53 mag at most (mag: |alpha| sum nom|a||b| + |beta||c|, at least
// the true magnitude); the tolerance is the same function of slightly different inputs.
TEST(GemmTcDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("gemm_tc");
  const std::vector<Case> cases = tc_cases(40, 31);
  ASSERT_GE(cases.size(), 30u);
  const test_util::RefScale mag = [](size_t o, size_t l, const std::vector<OutputRef>& h) {
    return h[o].aux[0][l] + DBL_MIN;
  };
  test_util::DeviceRefStats st;
  int64_t by_in[2] = {0, 0}, relations = 0, alpha_rule = 0, beta0 = 0;
  for (const Case& c : cases) {
    const Params p(c.params);
    for (const auto& [what, k] : {std::pair<const char*, Contract>{"plain", Contract()},
                                  std::pair<const char*, Contract>{"narrow", Contract().narrow_intermediates()}}) {
      ASSERT_NO_FATAL_FAILURE(
          test_util::check_device_reference(op, c, k, static_cast<double>(p.i("k") + 2), mag, 1e-9, st))
          << what;
      if (HasFailure()) break;
    }
    if (HasFailure()) break;
    ++by_in[p.dt("dtype") == DType::kBF16 ? 1 : 0];
    relations += p.s("relation").empty() ? 0 : 1;
    alpha_rule += std::fabs(p.r("alpha", 1)) != 1 && p.r("alpha", 1) != 0 ? 1 : 0;
    beta0 += p.r("beta", 0) == 0 ? 1 : 0;
  }
  EXPECT_GT(by_in[0], 0) << "no fp16 case";
  EXPECT_GT(by_in[1], 0) << "no bf16 case";
  EXPECT_GT(alpha_rule, 0) << "no case with the alpha-scaled operand rule";
  std::printf(
      "[ measured ] %s; fp16 %lld, bf16 %lld cases, %lld with a relation, %lld with |alpha| not 0 or 1, %lld "
      "with beta 0\n",
      st.summary("gemm_tc").c_str(), static_cast<long long>(by_in[0]), static_cast<long long>(by_in[1]),
      static_cast<long long>(relations), static_cast<long long>(alpha_rule), static_cast<long long>(beta0));
}

// The engine on device-path cases: the device prepare writes the scalars the kernels read, the
// relations run on the transformed snapshot, and both kernels pass; then two planted bugs are
// caught there: the k tail left unzeroed, and C read when beta == 0 (the poison of the
// overwritten D must reach the output).
TEST(GemmTcDeviceRefGpu, EngineTakesTheDevicePathAndCatchesPlantedBugs) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("gemm_tc");
  const std::vector<Case> cases = tc_cases(40, 32);
  ASSERT_GE(cases.size(), 30u);
  test_util::expect_engine_device_path(op, {find_variant("gemm_tc", "wmma"), find_variant("gemm_tc", "mma")}, cases,
                                       60);
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  // beta == 0 cases without near-overflow data: there every element is checked somewhere, so
  // the poison read must fail each one (with near-overflow operands every element of a case may
  // be unchecked, where Inf and NaN are accepted).
  std::vector<Case> k_tail, beta0;
  int64_t near_overflow = 0;
  for (const Case& c : cases) {
    const Params p(c.params);
    if (p.i("k") % 32 != 0) k_tail.push_back(c);
    if (p.r("beta", 0) != 0) continue;
    bool big = false;
    for (const auto& t : c.tensors) big |= t.values.cls == ValueClass::kNearOverflow;
    near_overflow += big ? 1 : 0;
    if (!big) beta0.push_back(c);
  }
  std::printf("[ measured ] gemm_tc beta == 0 device-path cases: %zu, %lld more with near-overflow data left out\n",
              beta0.size(), static_cast<long long>(near_overflow));
  ASSERT_FALSE(k_tail.empty());
  ASSERT_FALSE(beta0.empty());
  EXPECT_GT(test_util::run_on_device_path(op, "mutant_tc_mma_k_tail", k_tail, **lane).second, 0);
  const auto [ran, failed] = test_util::run_on_device_path(op, "mutant_tc_mma_beta0_reads_c", beta0, **lane);
  EXPECT_EQ(failed, ran) << "every beta == 0 case reads the poison";
}

// ---- gemm_bias_act (references/device/gemm_f64.cu: cuBLAS fp64 products, then epi_finish) -------------

TEST(GemmEpiDeviceRef, ForwardTakesCasesAboveGemmsThresholdTheBackwardNone) {
  const OpDef& fwd = test_util::model_op("gemm_bias_act");
  nlohmann::json p = {{"m", 256}, {"n", 128}, {"k", 128}, {"dtype", "bf16"}, {"act", "gelu"}};
  EXPECT_FALSE(fwd.device_reference.when(Params(p))) << "2^22 multiply-adds stay on the host";
  p["k"] = 129;
  EXPECT_TRUE(fwd.device_reference.when(Params(p)));
  EXPECT_FALSE(test_util::model_op("gemm_bias_act_bwd").device_reference.when)
      << "the backward accumulates dB and dbias: the host path";
}

// Both references on the same images, under the plain, the narrow (sum rounded before the bias)
// and the fast-math contracts. Z's sums differ by each side's fp64 error, (k + 2) 2^-53 mag at
// most; Y = act(Z) moves by at most 1.13 times that, plus a few ulps of exp (|y| <= |z| <= mag).
TEST(GemmEpiDeviceRefGpu, MatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("gemm_bias_act");
  const std::vector<Case> cases = test_util::device_path_cases("gemm_bias_act", 30, 41, 256, 12000);
  ASSERT_GE(cases.size(), 20u);
  const test_util::RefScale mag = [](size_t o, size_t l, const std::vector<OutputRef>& h) {
    return h[o].aux[0][l] + DBL_MIN;
  };
  test_util::DeviceRefStats st;
  int64_t gelu = 0, relations = 0;
  for (const Case& c : cases) {
    const Params p(c.params);
    for (const auto& [what, k] : {std::pair<const char*, Contract>{"plain", Contract()},
                                  std::pair<const char*, Contract>{"narrow", Contract().narrow_intermediates()},
                                  std::pair<const char*, Contract>{"fast", Contract().fast_math()}}) {
      ASSERT_NO_FATAL_FAILURE(
          test_util::check_device_reference(op, c, k, 2.0 * static_cast<double>(p.i("k") + 8), mag, 1e-9, st))
          << what;
      if (HasFailure()) break;
    }
    if (HasFailure()) break;
    gelu += p.s("act") == "gelu" ? 1 : 0;
    relations += p.s("relation").empty() ? 0 : 1;
  }
  EXPECT_GT(st.by_dtype[0], 0) << "no fp32 case";
  EXPECT_GT(st.by_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(st.by_dtype[2], 0) << "no bf16 case";
  EXPECT_GT(gelu, 0) << "no GELU case";
  std::printf("[ measured ] %s; %zu cases, %lld GELU, %lld with a relation\n", st.summary("gemm_bias_act").c_str(),
              cases.size(), static_cast<long long>(gelu), static_cast<long long>(relations));
}

// The engine on device-path cases (relations included): the tiled kernel passes; the planted
// bias-after-activation is caught there on cases it changes (act relu or gelu).
TEST(GemmEpiDeviceRefGpu, EngineTakesTheDevicePathAndCatchesAPlantedBug) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("gemm_bias_act");
  const std::vector<Case> cases = test_util::device_path_cases("gemm_bias_act", 30, 42, 256, 12000);
  ASSERT_GE(cases.size(), 20u);
  test_util::expect_engine_device_path(op, {find_variant("gemm_bias_act", "tiled")}, cases, 20);
  std::vector<Case> with_act;
  for (const Case& c : cases)
    if (Params(c.params).s("act") != "none") with_act.push_back(c);
  ASSERT_FALSE(with_act.empty());
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  const auto [ran, failed] = test_util::run_on_device_path(op, "mutant_epi_bias_after_act", with_act, **lane);
  EXPECT_GT(ran, 0);
  EXPECT_GT(failed, ran / 2) << "act(acc) + bias passed " << ran - failed << " of " << ran;
}

}  // namespace
}  // namespace assay
