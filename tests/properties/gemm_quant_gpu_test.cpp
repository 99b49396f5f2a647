// GPU tests of the quantised GEMM specs (properties/gemm_quant.cpp): the kernels pass a fuzz
// campaign of each op with every check on (bound, exact tier, relations, guards, poison,
// determinism), each planted bug of tests/mutants/gemm/quant_mutants.cu is caught (and shrunk and
// stored) by a check that claims it, the int8 accumulator agrees with cuBLASLt int8 -> int32 bit
// for bit on a dozen shapes, and the fp8 kernel stays within the host ceiling while cuBLASLt fp8
// (fast accumulation off and on) is measured against the same ceiling and reported, not asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/dtype.h"
#include "harness/gpu/lane.h"
#include "properties/gemm_quant.h"
#include "references/host/gemm_quant.h"
#include "references/library/cublaslt_gemm.h"
#include "tests/properties/campaign_checks.h"
#include "tests/properties/device_buffers.h"

namespace assay {
namespace {

using test_util::encode;

namespace kq = kernels::quant;

enum class QuantGpuOp { kInt8, kFp8 };

const char* quant_op_name(QuantGpuOp op) {
  return op == QuantGpuOp::kFp8 ? "gemm_fp8" : "gemm_int8";
}

using QuantGpu = GpuCampaignTest<QuantGpuOp>;

TEST_P(QuantGpu, CorrectVariantsPass) {
  expect_campaign_passes(quant_op_name(GetParam()), 400, 2048);
}

INSTANTIATE_TEST_SUITE_P(Ops, QuantGpu, ::testing::Values(QuantGpuOp::kInt8, QuantGpuOp::kFp8),
                         [](const ::testing::TestParamInfo<QuantGpuOp>& i) {
                           return std::string(quant_op_name(i.param));
                         });

using QuantGpuMutants = GpuCampaignTest<PlantedMutant>;

TEST_P(QuantGpuMutants, CaughtShrunkAndStored) {
  expect_mutant_caught(GetParam(), 1000, 2048, 30, dir_.string());
}

using namespace failure_kinds;

INSTANTIATE_TEST_SUITE_P(Planted, QuantGpuMutants,
                         ::testing::Values(PlantedMutant{"gemm_int8", "mutant_int8_scale_by_row", {kB}},
                                           PlantedMutant{"gemm_int8", "mutant_int8_fp32_acc", {kE, kB}},
                                           PlantedMutant{"gemm_int8", "mutant_int8_k_tail", {kE, kB}},
                                           PlantedMutant{"gemm_fp8", "mutant_fp8_ignore_scale_b", {kB, kE}}),
                         [](const ::testing::TestParamInfo<PlantedMutant>& i) { return std::string(i.param.variant); });

// ---- against cuBLASLt ----------------------------------------------------------------------------------

/// A device allocation freed on scope exit (cudaMalloc: 256-byte aligned).
struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t bytes) {
    if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) p = nullptr;
  }
  ~DeviceMem() { cudaFree(p); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

/// Uploads `v` rounded to `t`; returns the values actually stored (decoded back).
std::vector<double> upload(DType t, const std::vector<double>& v, const DeviceMem& d) {
  const std::vector<unsigned char> b = encode(t, v);
  EXPECT_EQ(cudaMemcpy(d.p, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<double> back(v.size());
  for (size_t i = 0; i < v.size(); ++i) back[i] = load_as_double(t, b.data() + i * dtype_size(t));
  return back;
}

bool have_gpu(std::string& why) {
  auto n = gpu::device_count();
  if (!n.ok()) why = n.status().message();
  return n.ok();
}

struct QuantShape {
  int64_t m, n, k;
};

TEST(GemmQuantVendor, Int8AccumulatorMatchesCublasLtBitForBit) {
  std::string why;
  if (!have_gpu(why)) GTEST_SKIP() << "GPU test skipped: " << why;
  auto lt = vendor::CublasLt::create();
  ASSERT_TRUE(lt.ok()) << lt.status().to_string();
  const kq::GemmInt8Launcher kernel = kq::gemm_int8_dp4a;  // the "dp4a" variant
  const QuantShape shapes[] = {{1, 1, 1},      {4, 4, 4},     {7, 8, 12},       {16, 16, 16},
                          {33, 17, 5},    {13, 4, 8},    {64, 64, 64},     {128, 96, 256},
                          {256, 256, 32}, {3, 64, 4096}, {100, 100, 1000}, {32, 32, 20000}};
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> full(-128, 127);
  int vendor_runs = 0;
  for (const QuantShape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k);
    std::vector<double> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.n * s.k));
    for (double& x : a) x = full(rng);
    for (double& x : b) x = full(rng);
    DeviceMem da(a.size()), db(b.size()), dsa(4 * s.m), dsw(4 * s.n), dacc(4 * s.m * s.n), dd(4 * s.m * s.n),
        dv(4 * s.m * s.n);
    ASSERT_TRUE(da.p && db.p && dsa.p && dsw.p && dacc.p && dd.p && dv.p);
    upload(DType::kI8, a, da);
    upload(DType::kI8, b, db);
    upload(DType::kF32, std::vector<double>(static_cast<size_t>(s.m), 1.0), dsa);
    upload(DType::kF32, std::vector<double>(static_cast<size_t>(s.n), 1.0), dsw);
    kq::GemmInt8Args args;
    args.m = s.m, args.n = s.n, args.k = s.k;
    args.a = static_cast<const int8_t*>(da.p), args.lda = s.k;
    args.b = static_cast<const int8_t*>(db.p), args.ldb = s.k;
    args.sa = static_cast<const float*>(dsa.p), args.sw = static_cast<const float*>(dsw.p);
    args.acc = static_cast<int32_t*>(dacc.p), args.ldacc = s.n;
    args.d = dd.p, args.ldd = s.n;
    ASSERT_EQ(kernel(args, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int32_t> acc(static_cast<size_t>(s.m * s.n)), ven(acc.size());
    ASSERT_EQ(cudaMemcpy(acc.data(), dacc.p, acc.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<int64_t> ref;
    ref::gemm_tn_int_exact(s.m, s.n, s.k, a.data(), s.k, b.data(), s.k, ref);
    int64_t host_bad = 0;
    for (size_t e = 0; e < acc.size(); ++e) host_bad += acc[e] != ref[e];
    EXPECT_EQ(host_bad, 0) << "kernel Acc differs from the exact int64 host sum";
    if (s.n % 4 != 0 || s.k % 4 != 0) {
      std::printf("[ skipped  ] cuBLASLt int8 %lldx%lldx%lld: needs n and k multiples of 4 (IMMA, regular order)\n",
                  static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k));
      continue;
    }
    vendor::LtGemm g;
    g.g = {s.m, s.n, s.k, false, true, s.k, s.k, s.n};
    g.a = g.b = DType::kI8;
    g.out = DType::kI32;
    const Status st = (*lt)->matmul(g, 1, da.p, db.p, 0, dv.p, nullptr);
    if (st.code() == StatusCode::kUnavailable) {
      std::printf("[ skipped  ] cuBLASLt int8 %lldx%lldx%lld: %s\n", static_cast<long long>(s.m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), st.message().c_str());
      continue;
    }
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ven.data(), dv.p, ven.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    int64_t bad = 0;
    for (size_t e = 0; e < acc.size(); ++e) bad += acc[e] != ven[e];
    EXPECT_EQ(bad, 0) << "kernel Acc and cuBLASLt int32 differ";
    ++vendor_runs;
  }
  std::printf("[ measured ] cuBLASLt int8 compared on %d of %zu shapes\n", vendor_runs, std::size(shapes));
  EXPECT_GE(vendor_runs, 6) << "cuBLASLt int8 declined most admissible shapes";
}

TEST(GemmQuantVendor, Fp8KernelWithinTheCeilingCublasLtMeasured) {
  std::string why;
  if (!have_gpu(why)) GTEST_SKIP() << "GPU test skipped: " << why;
  auto lt = vendor::CublasLt::create();
  ASSERT_TRUE(lt.ok()) << lt.status().to_string();
  const kq::GemmFp8Launcher kernel = kq::gemm_fp8_simt;  // the "simt" variant
  // cuBLASLt fp8 (row-major terms): k, lda, ldb multiples of 16, n * 4 bytes a multiple of 16.
  const QuantShape shapes[] = {{16, 16, 16}, {64, 64, 64}, {33, 48, 512}, {128, 128, 1024}, {8, 16, 8192}};
  const double sa = 0.75, sb = 1.25;  // not powers of two: each costs a rounding
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_real_distribution<double> pos(0, 4);
  for (int same_sign = 0; same_sign < 2; ++same_sign)
    for (const QuantShape& s : shapes) {
      SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << (same_sign ? " same-sign" : " N(0,1)"));
      std::vector<double> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.n * s.k));
      for (double& x : a) x = same_sign ? pos(rng) : nd(rng);
      for (double& x : b) x = same_sign ? pos(rng) : nd(rng);
      DeviceMem da(a.size()), db(b.size()), dsa(4), dsb(4), dd(4 * s.m * s.n);
      ASSERT_TRUE(da.p && db.p && dsa.p && dsb.p && dd.p);
      a = upload(DType::kE4M3, a, da);
      b = upload(DType::kE4M3, b, db);
      upload(DType::kF32, {sa}, dsa);
      upload(DType::kF32, {sb}, dsb);
      const OutputRef r = quant::fp8_expected(s.m, s.n, s.k, a, b, sa, sb, DType::kF32, -1);
      auto ratio = [&](const char* who) {
        std::vector<float> y(static_cast<size_t>(s.m * s.n));
        EXPECT_EQ(cudaMemcpy(y.data(), dd.p, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        double worst = 0;
        for (size_t e = 0; e < y.size(); ++e) worst = std::max(worst, std::fabs(y[e] - r.ref[e]) / r.tol[e]);
        std::printf("[ measured ] %s fp8 %lldx%lldx%lld %s: max error / ceiling %.3g\n", who,
                    static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                    same_sign ? "same-sign" : "N(0,1)", worst);
        return worst;
      };
      kq::GemmFp8Args args;
      args.m = s.m, args.n = s.n, args.k = s.k;
      args.a = static_cast<const uint8_t*>(da.p), args.lda = s.k;
      args.b = static_cast<const uint8_t*>(db.p), args.ldb = s.k;
      args.scale_a = static_cast<const float*>(dsa.p), args.scale_b = static_cast<const float*>(dsb.p);
      args.d = dd.p, args.ldd = s.n;
      ASSERT_EQ(kernel(args, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_LE(ratio("kernel simt"), 1.0);
      for (bool fast : {false, true}) {
        vendor::LtGemm g;
        g.g = {s.m, s.n, s.k, false, true, s.k, s.k, s.n};
        g.a = g.b = DType::kE4M3;
        g.out = DType::kF32;
        g.fast_accum = fast;
        g.scale_a = static_cast<const float*>(dsa.p);
        g.scale_b = static_cast<const float*>(dsb.p);
        ASSERT_EQ(cudaMemset(dd.p, 0, 4 * s.m * s.n), cudaSuccess);
        const Status st = (*lt)->matmul(g, 1, da.p, db.p, 0, dd.p, nullptr);
        if (!st.ok()) {
          std::printf("[ skipped  ] cuBLASLt fp8 fast_accum=%d: %s\n", fast ? 1 : 0, st.to_string().c_str());
          continue;
        }
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        // Measured, not asserted: cuBLASLt's tensor-core fp8 path accumulates with truncation
        // (fast accumulation far more), outside the round-to-nearest fp32 model of this ceiling.
        const double q = ratio(fast ? "cuBLASLt fast-accum" : "cuBLASLt");
        ::testing::Test::RecordProperty(
            fmt::format("cublaslt_fast{}_{}x{}x{}_{}", fast ? 1 : 0, s.m, s.n, s.k, same_sign ? "same" : "normal"),
            std::to_string(q));
      }
    }
}

}  // namespace
}  // namespace assay
