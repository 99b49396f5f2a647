// assay false-alarm on a GPU: a small campaign over every vendor configuration finds no
// element above its ceiling; the device draws the bytes the host draws (every configuration
// and value class, the whole image) and a device input that differs stops the campaign; the
// device fp64 reference gives the host reference's bits on every case of every
// configuration, and the table with it is the table with the host's; shards (one per GPU, or two on one GPU) give the table
// one shard gives; a planted perturbation and fp16 accumulation where fp32 was promised
// (CUBLAS_COMPUTE_16F) are reported; the cuBLASLt wrapper is bit-exact for int8 (strided
// batch, offset pointers) and within the fp8 ceiling with scales. Skipped, with the reason,
// where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <cuda_runtime.h>

#include "properties/studies/false_alarm.h"
#include "harness/gpu/lane.h"
#include "references/host/gemm.h"
#include "references/library/cublaslt_gemm.h"
#include "tests/gpu_test_env.h"

namespace assay {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    auto n = gpu::device_count();                                              \
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message(); \
  } while (false)

FaOptions gpu_options(int64_t cases, uint64_t seed) {
  FaOptions o;
  o.cases = cases;
  o.seed = seed;
  o.quiet = true;
  return o;
}

TEST(FalseAlarmGpu, SmallCampaignHasNoCeilingFailure) {
  SKIP_WITHOUT_GPU();
  const FaOptions o = gpu_options(360, 2026);  // 20 cases per configuration
  const auto r = false_alarm(o, {0}, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const FaFailure& f : r->failures) ADD_FAILURE() << fa_failure_line(f, o);
  const FaRow t = r->table.total();
  EXPECT_EQ(t.failures(), 0);
  EXPECT_GT(t.compared, 0);
  for (int ci : r->configs) {
    const FaRow c = r->table.config_total(ci);
    const std::string name(fa_configs()[static_cast<size_t>(ci)].name);
    EXPECT_GT(c.cases, 0) << name << " ran no case: " << r->not_run_reason[static_cast<size_t>(ci)];
    std::printf("[ measured ] %-24s cases %lld (not run %lld), max err/ceiling %.4g, > expected %lld\n", name.c_str(),
                static_cast<long long>(c.cases), static_cast<long long>(c.not_run), c.max_ratio,
                static_cast<long long>(c.expected_exceedances));
  }
}

TEST(FalseAlarmGpu, DeviceDrawsTheHostBytesOnEveryConfigAndClass) {
  SKIP_WITHOUT_GPU();
  // Batches of every configuration and value class drawn by the backend's kernel against
  // fa_materialize on the host, the whole image byte for byte (both start zeroed, so the
  // padding between regions is compared too): the same functions (false_alarm_values.h), no
  // contraction on the device.
  const std::vector<std::pair<uint64_t, int64_t>> runs = {{31, 2048}, {32, 8192}};  // seed, max_k
  for (const auto& [seed, max_k] : runs) {
    FaOptions o;
    o.seed = seed;
    o.max_k = max_k;
    const auto sel = fa_select(o);
    ASSERT_TRUE(sel.ok());
    std::vector<int64_t> count(fa_configs().size() * kFaClasses, 0);
    int64_t next = 0;
    for (int b = 0; b < 6; ++b) {
      FaBatch batch;
      for (int i = 0; i < 1000; ++i) {
        const FaCase c = fa_make_case(o, *sel, next++);
        ++count[static_cast<size_t>(c.config) * kFaClasses + static_cast<size_t>(c.cls)];
        batch.cases.push_back(c);
      }
      fa_layout(batch);
      std::vector<unsigned char> host(batch.bytes, 0);
      for (size_t i = 0; i < batch.cases.size(); ++i) ASSERT_TRUE(fa_materialize(batch, i, host.data()).ok());
      const auto dev = fa_draw_on_device(batch, 0);
      ASSERT_TRUE(dev.ok()) << dev.status().message();
      ASSERT_EQ(dev->size(), host.size());
      if (std::memcmp(dev->data(), host.data(), host.size()) == 0) continue;
      // The first differing byte, named by its case and region.
      size_t at = 0;
      while ((*dev)[at] == host[at]) ++at;
      size_t ci = 0;
      const auto start = [&](size_t i) { return at < batch.out_begin ? batch.slots[i].a : batch.slots[i].c; };
      while (ci + 1 < batch.cases.size() && start(ci + 1) <= at) ++ci;
      const FaCase& c = batch.cases[ci];
      ADD_FAILURE() << "seed " << seed << " batch " << b << ": byte " << at << " device "
                    << static_cast<int>((*dev)[at]) << " host " << static_cast<int>(host[at]) << " near case "
                    << c.index << " (" << c.cfg().name << ", " << fa_class_name(c.cls) << "), slots a " << batch.slots[ci].a
                    << " b " << batch.slots[ci].b << " c " << batch.slots[ci].c;
      return;
    }
    for (size_t i = 0; i < count.size(); ++i)
      EXPECT_GT(count[i], 0) << "seed " << seed << ": no case of " << fa_configs()[i / kFaClasses].name << " / "
                             << fa_class_name(static_cast<FaClass>(i % kFaClasses));
  }
}

TEST(FalseAlarmGpu, DeviceInputsThatDifferFromTheHostsStopTheCampaign) {
  SKIP_WITHOUT_GPU();
  // The backend draws A from another key than the host: the sampled host reference (every
  // case here) disagrees with the device's and the campaign stops with an error.
  FaOptions o = gpu_options(180, 2031);
  o.check_every = 1;
  o.plant = FaPlant::kDeviceInputs;
  const auto r = false_alarm(o, {0}, "");
  ASSERT_FALSE(r.ok()) << "a device input unlike the host's went unnoticed";
  EXPECT_NE(r.status().message().find("disagrees with the host's"), std::string::npos) << r.status().message();
}

TEST(FalseAlarmGpu, TableWithTheDeviceReferenceIsTheTableWithTheHosts) {
  SKIP_WITHOUT_GPU();
  // The vendor reads device-drawn inputs either way; the judge's reference is the device's
  // (drawn and computed on the device) or the host's (drawn and computed on the host). Equal
  // tables, max ratios included, say that the device drew what the host reference assumed.
  // (cuBLAS gives the same bits run to run on one GPU with one stream, so the ratios match.)
  FaOptions o = gpu_options(720, 2032);
  o.max_k = 2048;
  o.check_every = 0;
  const auto dev = false_alarm(o, {0}, "", /*device_reference=*/true);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  const auto host = false_alarm(o, {0}, "", /*device_reference=*/false);
  ASSERT_TRUE(host.ok()) << host.status().message();
  for (size_t i = 0; i < dev->table.rows.size(); ++i) {
    const FaRow &a = dev->table.rows[i], &b = host->table.rows[i];
    const std::string where = std::string(fa_configs()[i / kFaClasses].name) + " / " +
                              std::string(fa_class_name(static_cast<FaClass>(i % kFaClasses)));
    EXPECT_EQ(a.cases, b.cases) << where;
    EXPECT_EQ(a.elements, b.elements) << where;
    EXPECT_EQ(a.compared, b.compared) << where;
    EXPECT_EQ(a.failures(), b.failures()) << where;
    EXPECT_EQ(a.expected_exceedances, b.expected_exceedances) << where;
    EXPECT_EQ(a.max_ratio, b.max_ratio) << where;
    EXPECT_EQ(a.worst_case, b.worst_case) << where;
  }
  EXPECT_EQ(dev->table.total().failures(), 0);
  EXPECT_GT(dev->table.total().compared, 0);
  std::printf("[ measured ] %lld cases: inputs %.3f s device, reference %.3f s device; host-reference run: "
              "references %.3f s host\n",
              static_cast<long long>(dev->cases), dev->seconds_inputs_device, dev->seconds_reference_device,
              host->seconds_reference);
}

TEST(FalseAlarmGpu, DeviceReferenceIsTheHostReferenceOnEveryConfig) {
  SKIP_WITHOUT_GPU();
  // 200 cases of each of the 18 configurations, the host reference (on inputs the host draws)
  // beside the device's (on inputs the device draws) on every case: a disagreement beyond fp64
  // rounding would stop the campaign (an error here); by construction (false_alarm_values.h,
  // gemm_f64_batch_core.h: the host's functions and order, no contraction) every bit agrees.
  FaOptions o = gpu_options(3600, 2027);
  o.check_every = 1;
  const auto r = false_alarm(o, {0}, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->shards.size(), 1u);
  EXPECT_TRUE(r->shards[0].device_reference);
  EXPECT_EQ(r->ref_check.cases, 3600);
  EXPECT_GE(r->ref_check.elements, r->table.total().elements);
  EXPECT_EQ(r->ref_check.identical, r->ref_check.elements)
      << "not the same bits (still within fp64 rounding): max difference " << r->ref_check.max_diff
      << " x 2^-53 mag";
  EXPECT_EQ(r->table.total().failures(), 0);
  for (const FaFailure& f : r->failures) ADD_FAILURE() << fa_failure_line(f, o);
  std::printf("[ measured ] device vs host fp64 reference: %lld cases, %lld elements, %lld identical; reference "
              "%.3f s device, %.3f s host; vendor %.3f s device\n",
              static_cast<long long>(r->ref_check.cases), static_cast<long long>(r->ref_check.elements),
              static_cast<long long>(r->ref_check.identical), r->seconds_reference_device, r->seconds_reference,
              r->seconds_vendor);
}

TEST(FalseAlarmGpu, ShardsGiveTheTableOfOneShard) {
  SKIP_WITHOUT_GPU();
  // Every GPU a shard; on a one-GPU machine, two shards (two backends, two streams) on GPU 0.
  const int ndev = *gpu::device_count();
  std::vector<int> devices;
  for (int d = 0; d < ndev; ++d) devices.push_back(d);
  if (devices.size() == 1) devices.push_back(0);
  FaOptions o = gpu_options(1080, 2028);
  o.batch_cases = 97;  // several batches per shard, two in flight
  const auto one = false_alarm(o, {0}, "");
  ASSERT_TRUE(one.ok()) << one.status().message();
  const auto many = false_alarm(o, devices, "");
  ASSERT_TRUE(many.ok()) << many.status().message();
  ASSERT_EQ(many->shards.size(), devices.size());
  int64_t shard_cases = 0;
  for (const FaShard& h : many->shards) {
    EXPECT_GT(h.cases, 0) << h.device;
    shard_cases += h.cases;
    std::printf("[ measured ] shard %s: %lld cases in %.2f s\n", h.device.c_str(), static_cast<long long>(h.cases),
                h.seconds);
  }
  EXPECT_EQ(shard_cases, many->cases);
  for (size_t i = 0; i < one->table.rows.size(); ++i) {
    const FaRow &a = one->table.rows[i], &b = many->table.rows[i];
    EXPECT_EQ(a.cases + a.not_run, b.cases + b.not_run) << i;
    EXPECT_EQ(a.elements, b.elements) << i;
    EXPECT_EQ(a.exact_cases, b.exact_cases) << i;
  }
  EXPECT_EQ(many->table.total().failures(), 0);
  for (const FaFailure& f : many->failures) ADD_FAILURE() << fa_failure_line(f, o);
}

TEST(FalseAlarmGpu, HostReferenceModeHasNoCeilingFailure) {
  SKIP_WITHOUT_GPU();
  const FaOptions o = gpu_options(180, 2029);
  const auto r = false_alarm(o, {0}, "", /*device_reference=*/false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->shards[0].device_reference);
  EXPECT_EQ(r->ref_check.cases, 0);
  EXPECT_EQ(r->table.total().failures(), 0);
  EXPECT_GT(r->table.total().compared, 0);
}

TEST(FalseAlarmGpu, PlantedPerturbationIsReported) {
  SKIP_WITHOUT_GPU();
  FaOptions o = gpu_options(90, 7);
  o.plant = FaPlant::kPerturb;
  const auto r = false_alarm(o, {0}, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const FaRow t = r->table.total();
  EXPECT_GT(r->planted, 30);
  EXPECT_GE(t.ceiling_failures + t.exact_failures, r->planted);
  ASSERT_FALSE(r->failures.empty());
  EXPECT_NE(fa_failure_line(r->failures.front(), o).find("replay: assay false-alarm"), std::string::npos);
}

TEST(FalseAlarmGpu, Fp16AccumulationWhereFp32WasPromisedIsCaught) {
  SKIP_WITHOUT_GPU();
  FaOptions o = gpu_options(120, 8);
  o.configs = {"fp16_out_fp16"};
  o.plant = FaPlant::kF16Accumulate;
  const auto r = false_alarm(o, {0}, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const FaRow t = r->table.total();
  EXPECT_GT(t.cases, 0) << r->not_run_reason[static_cast<size_t>(find_fa_config("fp16_out_fp16"))];
  EXPECT_GT(t.ceiling_failures, 0);
  std::printf(
      "[ measured ] CUBLAS_COMPUTE_16F judged as fp32 accumulation: %lld ceiling failures in %lld cases, "
      "max err/ceiling %.3g\n",
      static_cast<long long>(t.ceiling_failures), static_cast<long long>(t.cases), t.max_ratio);
}

TEST(FalseAlarmGpu, CommandWritesItsReportsAndExitsZero) {
  SKIP_WITHOUT_GPU();
  const std::string dir = std::filesystem::temp_directory_path() / ("assay-fa-" + std::to_string(::getpid()));
  // No --seed: a rotating seed, printed and recorded; every GPU a shard.
  const std::string cmd = assay_binary() + " false-alarm --cases 72 --devices all --max-k 2048 --out " + dir + " > " +
                          dir + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  std::ifstream log(dir + ".log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(WEXITSTATUS(rc), 0) << text.str();
  EXPECT_TRUE(std::filesystem::exists(dir + "/false-alarm.json"));
  EXPECT_NE(text.str().find("(rotating, from the clock; --seed "), std::string::npos) << text.str();
  std::ifstream js(dir + "/false-alarm.json");
  std::stringstream jss;
  jss << js.rdbuf();
  EXPECT_NE(jss.str().find("\"seed_source\": \"rotate\""), std::string::npos);
  EXPECT_NE(jss.str().find("\"shards\""), std::string::npos);
  std::ifstream md(dir + "/false-alarm.md");
  std::stringstream mds;
  mds << md.rdbuf();
  EXPECT_NE(mds.str().find("**PASS**"), std::string::npos) << mds.str();
  std::filesystem::remove_all(dir);
  std::filesystem::remove(dir + ".log");
}

// --ops: other ops' vendor libraries fuzzed as variants under their declared contracts, one
// row and report case each: softmax_bwd's cuDNN (inside its ceiling on an H100) and
// gemm_bias_act's cuBLASLt epilogue (its GELU is not modelled: outside the ceiling on an H100,
// where the exit is 1 and the shrunk case is stored).
TEST(FalseAlarmGpu, OpsFuzzTheVendorLibrariesUnderTheirContracts) {
  SKIP_WITHOUT_GPU();
  const std::string dir = std::filesystem::temp_directory_path() / ("assay-fa-ops-" + std::to_string(::getpid()));
  const std::string cmd = assay_binary() + " false-alarm --cases 36 --max-k 512 --ops softmax_bwd,gemm_bias_act " +
                          "--ops-seconds 4 --out " + dir + " > " + dir + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  std::ifstream log(dir + ".log");
  std::stringstream text;
  text << log.rdbuf();
  const int code = WEXITSTATUS(rc);
  EXPECT_TRUE(code == 0 || code == 1) << text.str();
  std::ifstream md(dir + "/vendor-ops.md");
  std::stringstream mds;
  mds << md.rdbuf();
  EXPECT_NE(mds.str().find("| softmax_bwd | cudnn-softmax |"), std::string::npos) << mds.str();
  EXPECT_NE(mds.str().find("| gemm_bias_act | cublaslt-epilogue |"), std::string::npos) << mds.str();
  if (code == 1) EXPECT_TRUE(std::filesystem::exists(dir + "/corpus")) << "a failure's shrunk case is stored";
  std::filesystem::remove_all(dir);
  std::filesystem::remove(dir + ".log");
}

// ---- the cuBLASLt wrapper directly ---------------------------------------------------------------

struct FaDevBuf {
  void* p = nullptr;
  explicit FaDevBuf(size_t n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~FaDevBuf() { cudaFree(p); }
  unsigned char* bytes() const { return static_cast<unsigned char*>(p); }
};

TEST(CublasLtGpu, Int8StridedBatchWithOffsetsIsBitExact) {
  SKIP_WITHOUT_GPU();
  auto lt = vendor::CublasLt::create();
  ASSERT_TRUE(lt.ok()) << lt.status().message();
  // TN (A m x k, B n x k, k contiguous), m = 5, n = 12, k = 36, 3 batch entries, padded,
  // A and C offset by 4 elements (16-byte aligned) from a 256-byte base.
  const int64_t m = 5, n = 12, k = 36, batch = 3, lda = 40, ldb = 44, ldc = 16, off = 4;
  const int64_t sa = m * lda + 8, sb = n * ldb, sc = m * ldc + 4;
  std::vector<int8_t> a(static_cast<size_t>(off + batch * sa)), b(static_cast<size_t>(batch * sb));
  std::vector<int32_t> c(static_cast<size_t>(off + batch * sc), -7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>(static_cast<int>(i * 91 % 256) - 128);
  FaDevBuf da(a.size()), db(b.size()), dc(c.size() * 4);
  cudaMemcpy(da.p, a.data(), a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db.p, b.data(), b.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dc.p, c.data(), c.size() * 4, cudaMemcpyHostToDevice);
  vendor::LtGemm g;
  g.g = vendor::RowMajorGemm{m, n, k, false, true, lda, ldb, ldc};
  g.a = g.b = DType::kI8;
  g.out = DType::kI32;
  g.batch = batch;
  g.stride_a = sa;
  g.stride_b = sb;
  g.stride_c = sc;
  const Status st = (*lt)->matmul(g, 2, da.bytes() + off, db.p, -1, dc.bytes() + off * 4, nullptr);
  if (st.code() == StatusCode::kUnavailable) GTEST_SKIP() << "cuBLASLt declined: " << st.message();
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<int32_t> got(c.size());
  ASSERT_EQ(cudaMemcpy(got.data(), dc.p, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t s = 0;
        for (int64_t q = 0; q < k; ++q)
          s += int64_t{a[static_cast<size_t>(off + e * sa + i * lda + q)]} *
               b[static_cast<size_t>(e * sb + j * ldb + q)];
        const size_t at = static_cast<size_t>(off + e * sc + i * ldc + j);
        EXPECT_EQ(got[at], 2 * s - 1 * c[at]) << e << " " << i << " " << j;
      }
  // Padding and the offset are untouched.
  EXPECT_EQ(got[0], -7);
  EXPECT_EQ(got[static_cast<size_t>(off + ldc - 1)], -7);
}

TEST(CublasLtGpu, Fp8WithScalesWithinItsCeiling) {
  SKIP_WITHOUT_GPU();
  auto lt = vendor::CublasLt::create();
  ASSERT_TRUE(lt.ok()) << lt.status().message();
  // The documented FP8 layout (cublasLtMatmul, "To use FP8 kernels"; 2.1.11 Tensor Core
  // Usage), row-major: TN (A m x k, B n x k), k, lda, ldb multiples of 16, n * 4 and ldc * 4
  // multiples of 16 bytes, 16-byte aligned pointers; each scale in its own allocation. m = 32,
  // and m = 31: our m is the library's n, which the rules leave free (the campaign fuzzes it).
  const int64_t n = 48, k = 256;
  const float scales[2] = {0.75f, 3.0f};  // not powers of two
  FaDevBuf dsa(sizeof(float)), dsb(sizeof(float));
  cudaMemcpy(dsa.p, &scales[0], sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dsb.p, &scales[1], sizeof(float), cudaMemcpyHostToDevice);
  for (int64_t m : {32, 31}) {
    std::vector<uint8_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k));
    std::vector<double> ad(a.size()), bd(b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = f32_to_e4m3_bits(static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 8), Overflow::kSaturate);
      ad[i] = scales[0] * static_cast<double>(e4m3_bits_to_f32(a[i]));
    }
    for (size_t i = 0; i < b.size(); ++i) {
      b[i] = f32_to_e4m3_bits(static_cast<float>(std::cos(0.11 * static_cast<double>(i)) * 2), Overflow::kSaturate);
      bd[i] = scales[1] * static_cast<double>(e4m3_bits_to_f32(b[i]));
    }
    FaDevBuf da(a.size()), db(b.size()), dc(static_cast<size_t>(m * n) * 4);
    cudaMemcpy(da.p, a.data(), a.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(db.p, b.data(), b.size(), cudaMemcpyHostToDevice);
    for (bool fast : {false, true}) {
      vendor::LtGemm g;
      g.g = vendor::RowMajorGemm{m, n, k, false, true, k, k, n};
      g.a = g.b = DType::kE4M3;
      g.out = DType::kF32;
      g.fast_accum = fast;
      g.scale_a = static_cast<const float*>(dsa.p);
      g.scale_b = static_cast<const float*>(dsb.p);
      const Status st = (*lt)->matmul(g, 1, da.p, db.p, 0, dc.p, nullptr);
      ASSERT_TRUE(st.ok()) << "m " << m << ": " << st.message();
      std::vector<float> got(static_cast<size_t>(m * n));
      ASSERT_EQ(cudaMemcpy(got.data(), dc.p, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      std::vector<double> ref(got.size()), mag(got.size());
      ref::gemm_reference(ref::GemmProblem<double>{m, n, k, false, true, 1, 0, ad.data(), k, bd.data(), k, nullptr, 0},
                          ref.data(), mag.data(), 1);
      FaCase c;
      c.config = find_fa_config(fast ? "e4m3_fast" : "e4m3");
      c.k = k;
      c.scale_a = scales[0];
      c.scale_b = scales[1];
      const ElementBound cb = fa_bounds(c).ceiling;
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(got[i] - ref[i]);
        EXPECT_LE(err, cb.tol(std::fabs(ref[i]), mag[i])) << "fast " << fast << " element " << i;
        worst = std::max(worst, accuracy_ratio(err, std::fabs(ref[i]), mag[i], cb));
      }
      std::printf("[ measured ] cuBLASLt e4m3 m=%lld k=256 scales 0.75/3 fast=%d: max err/ceiling %.4g\n",
                  static_cast<long long>(m), fast ? 1 : 0, worst);
    }
  }
}

}  // namespace
}  // namespace assay
