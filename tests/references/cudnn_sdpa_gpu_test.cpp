// cuDNN fused attention (SDPA forward, references/library/cudnn.h cudnn_sdpa_forward, built with
// the backend C API) against the fp64 host reference of the attention spec
// (properties/attention.h attention_fwd_reference) and against the repo's flash kernel
// (kernels/attention flash_fwd), on the same rounded inputs, B = 2, H = 4, S = 113 / 128 / 256,
// D = 64 / 128, fp16 and bf16, causal and not.
//
// Ceilings.
//  kernel: the attention spec's own (attention_fwd_reference with the kernel's key tile).
//  cuDNN:  the same derivation (fp32 scores, fp32 online softmax, fp32 accumulation of P V, one
//          rounding of O to the storage type), taken with key_tile = 1 (one rescale per key: the
//          engine's key tiling is not known here, and more rescales only loosen the bound), plus
//          one extra rounding of P to the storage type before the second matmul (the tensor-core
//          P V product reads P, or the unnormalised exp(s - m) <= 1 that it is divided by later,
//          as fp16/bf16): |fl(p') - p'| <= u_dt p' + min_subnormal/2 with p' <= P + tolP, and
//          sum_j tolP_j |v_j| is a part of the spec's tol, so this adds at most
//              u_dt (sum_j P_j |v_j| + tol_spec) + Sk min_subnormal/2 max|v|,
//          times (1 + 2^-10) for the fp32 accumulation's relative error on the larger magnitude
//          (gamma_{2Sk+1}(2^-24) < 2^-10 for Sk <= 256).
//          Assumed, not derived: the engine's score GEMM (tensor cores, fp32 accumulation) errs
//          within gamma_{D+2}(2^-24) sum|q||k| as the spec's FMA chain does.
//  LSE:    cuDNN's stats against the spec's LSE tol (key_tile = 1) plus 8 u_32 (|LSE| + 1), an
//          allowance for an exp2/log2 form of the softmax (the scale folded with log2 e).
// Both O's must lie within their ceilings of the reference and within the sum of the two
// ceilings of each other. The test prints max and mean of |kernel - ref| / (|cudnn - ref| + 1 ulp).
//
// Suites with "Gpu" in their name skip with the reason without a GPU, and where this cuDNN (the
// GPU machines carry an older 9.x than the build machine) or GPU has no engine for the graph
// (cudnn_sdpa_forward returns `unavailable`, naming the step that refused).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "harness/bounds.h"
#include "harness/dtype.h"
#include "harness/gpu/lane.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "kernels/attention/attention.h"
#include "properties/attention.h"
#include "references/library/cudnn.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;


struct SdpaProblem {
  DType dt;
  int64_t S, D;
  bool causal;
};
void PrintTo(const SdpaProblem& p, std::ostream* os) {
  *os << dtype_name(p.dt) << " B2 H4 S" << p.S << " D" << p.D << (p.causal ? " causal" : "");
}

/// A device buffer freed with its owner.
struct SdpaBuf {
  void* p = nullptr;
  ~SdpaBuf() {
    if (p != nullptr) (void)cudaFree(p);
  }
};

class CudnnSdpaGpu : public ::testing::TestWithParam<SdpaProblem> {};

TEST_P(CudnnSdpaGpu, MatchesHostReferenceAndFlashKernelWithinBothCeilings) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  auto hr = vendor::CudnnHandle::create();
  if (!hr.ok() && hr.status().code() == StatusCode::kUnavailable) GTEST_SKIP() << hr.status().message();
  ASSERT_TRUE(hr.ok()) << "cuDNN handle: " << hr.status().to_string();
  vendor::CudnnHandle& handle = **hr;

  const SdpaProblem pb = GetParam();
  attention::AttnDims d;
  d.B = 2, d.H = 4, d.Hkv = 4, d.Sq = pb.S, d.Sk = pb.S, d.D = pb.D, d.causal = pb.causal, d.dt = pb.dt;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(pb.D)));
  d.scale = scale;
  const int64_t rows = d.B * d.H * d.Sq, D = d.D;
  const size_t es = dtype_size(d.dt), n = static_cast<size_t>(rows * D);

  // Inputs in the storage type, contiguous [B, H, S, D] (= the kernel's [B*H*S, D], ld = D).
  auto make = [&](uint64_t seed, double sc, std::vector<unsigned char>& bytes, std::vector<double>& dec) {
    const TensorDesc desc = TensorDesc::contiguous(d.dt, {rows, D});
    ValueRecipe r;
    r.cls = ValueClass::kNormal;
    r.seed = seed;
    r.scale = sc;
    bytes.resize(n * es);
    materialize(desc, r, seed, bytes.data());
    dec.resize(n);
    for (size_t i = 0; i < n; ++i) dec[i] = load_as_double(d.dt, bytes.data() + i * es);
  };
  std::vector<unsigned char> hq, hk, hv;
  std::vector<double> q, k, v;
  make(21, 1.5, hq, q);
  make(22, 1.5, hk, k);
  make(23, 1.0, hv, v);
  const HostTensor tq{q.data(), {rows, D, D}}, tk{k.data(), {rows, D, D}}, tv{v.data(), {rows, D, D}};
  OutputRef ro, rl, roc, rlc;
  attention::attention_fwd_reference(d, tq, tk, tv, nullptr, ro, rl);
  attention::attention_fwd_reference(d, tq, tk, tv, nullptr, roc, rlc, /*key_tile=*/1);

  SdpaBuf dq, dk, dv, dok, doc, dlk, dlc;
  ASSERT_EQ(cudaMalloc(&dq.p, n * es), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dk.p, n * es), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dv.p, n * es), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dok.p, n * es), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&doc.p, n * es), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dlk.p, static_cast<size_t>(rows) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dlc.p, static_cast<size_t>(rows) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dq.p, hq.data(), hq.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk.p, hk.data(), hk.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv.p, hv.data(), hv.size(), cudaMemcpyHostToDevice), cudaSuccess);
  // Outputs start as NaN (all-ones bytes): an element never written fails.
  ASSERT_EQ(cudaMemset(dok.p, 0xFF, n * es), cudaSuccess);
  ASSERT_EQ(cudaMemset(doc.p, 0xFF, n * es), cudaSuccess);
  ASSERT_EQ(cudaMemset(dlk.p, 0xFF, static_cast<size_t>(rows) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(dlc.p, 0xFF, static_cast<size_t>(rows) * sizeof(float)), cudaSuccess);

  vendor::CudnnSdpa sp;
  sp.batch = d.B, sp.heads = d.H, sp.sq = d.Sq, sp.sk = d.Sk, sp.d = D, sp.dtype = d.dt, sp.scale = scale;
  sp.causal = d.causal;
  // Explicit packed strides [H*S*D, S*D, D, 1].
  for (int64_t* s : {sp.q_stride, sp.k_stride, sp.v_stride, sp.o_stride}) {
    s[0] = d.H * d.Sq * D, s[1] = d.Sq * D, s[2] = D, s[3] = 1;
  }
  auto used = vendor::cudnn_sdpa_forward(handle, sp, dq.p, dk.p, dv.p, doc.p, static_cast<float*>(dlc.p));
  if (!used.ok() && used.status().code() == StatusCode::kUnavailable)
    GTEST_SKIP() << "cuDNN " << vendor::cudnn_version_string(vendor::cudnn_runtime_version())
                 << " has no SDPA engine for this problem: " << used.status().message();
  ASSERT_TRUE(used.ok()) << used.status().to_string();

  const auto kdt = d.dt == DType::kF16 ? kernels::attention::Dt::kF16 : kernels::attention::Dt::kBF16;
  ASSERT_EQ(kernels::attention::flash_fwd(kdt, d.shape(), dq.p, D, dk.p, D, dv.p, D, nullptr, 0, dok.p, D,
                                          static_cast<float*>(dlk.p), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned char> hok(n * es), hoc(n * es);
  std::vector<float> lk(static_cast<size_t>(rows)), lc(static_cast<size_t>(rows));
  ASSERT_EQ(cudaMemcpy(hok.data(), dok.p, hok.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(hoc.data(), doc.p, hoc.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(lk.data(), dlk.p, lk.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(lc.data(), dlc.p, lc.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);

  const double udt = unit_roundoff(d.dt), sub = 0.5 * min_subnormal(d.dt);
  int64_t bad = 0, count = 0;
  double worst_ratio = 0, sum_ratio = 0, worst_c = 0, worst_k = 0;
  std::vector<double> P(static_cast<size_t>(d.Sk)), pv(static_cast<size_t>(D));
  for (int64_t row = 0; row < rows; ++row) {
    // Exact P of this row (fp64) for the magnitude sum_j P_j |v_j| of the extra rounding.
    const int64_t i = row % d.Sq, base = row - i;  // K, V rows of the same (b, h) start at base
    double mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < d.Sk; ++j) {
      double s = -INFINITY;
      if (!d.causal || j <= i) {
        double dot = 0;
        for (int64_t c = 0; c < D; ++c)
          dot += q[static_cast<size_t>(row * D + c)] * k[static_cast<size_t>((base + j) * D + c)];
        s = d.scale * dot;
      }
      P[static_cast<size_t>(j)] = s;
      mx = std::max(mx, s);
    }
    for (int64_t j = 0; j < d.Sk; ++j) z += std::exp(P[static_cast<size_t>(j)] - mx);
    double vmax = 0;
    std::fill(pv.begin(), pv.end(), 0.0);
    for (int64_t j = 0; j < d.Sk; ++j) {
      const double pj = std::exp(P[static_cast<size_t>(j)] - mx) / z;
      for (int64_t c = 0; c < D; ++c) {
        const double av = std::fabs(v[static_cast<size_t>((base + j) * D + c)]);
        pv[static_cast<size_t>(c)] += pj * av;
        vmax = std::max(vmax, av);
      }
    }
    for (int64_t c = 0; c < D; ++c) {
      const size_t l = static_cast<size_t>(row * D + c);
      const double ref = ro.ref[l];
      const double tol_k = ro.tol[l];
      const double tol_c =
          roc.tol[l] +
          (udt * (pv[static_cast<size_t>(c)] + roc.tol[l]) + static_cast<double>(d.Sk) * sub * vmax) * (1 + 0x1p-10);
      const double ok = load_as_double(d.dt, hok.data() + l * es), oc = load_as_double(d.dt, hoc.data() + l * es);
      const double ek = std::fabs(ok - ref), ec = std::fabs(oc - ref);
      if (!(ek <= tol_k) && bad++ < 4)
        ADD_FAILURE() << "O[" << row << "][" << c << "]: kernel " << ok << " ref " << ref << " |err| " << ek
                      << " > tol " << tol_k;
      if (!(ec <= tol_c) && bad++ < 4)
        ADD_FAILURE() << "O[" << row << "][" << c << "]: cuDNN " << oc << " ref " << ref << " |err| " << ec << " > tol "
                      << tol_c;
      if (!(std::fabs(ok - oc) <= tol_k + tol_c) && bad++ < 4)
        ADD_FAILURE() << "O[" << row << "][" << c << "]: kernel " << ok << " cuDNN " << oc << " differ by more than "
                      << tol_k + tol_c;
      worst_k = std::max(worst_k, ek / tol_k);
      worst_c = std::max(worst_c, ec / tol_c);
      const double ratio = ek / (ec + ulp_of(std::fabs(ref), d.dt));
      worst_ratio = std::max(worst_ratio, ratio);
      sum_ratio += ratio;
      ++count;
    }
    const size_t r = static_cast<size_t>(row);
    const double lref = rl.ref[r];
    if (!(std::fabs(lk[r] - lref) <= rl.tol[r]) && bad++ < 4)
      ADD_FAILURE() << "LSE[" << row << "]: kernel " << lk[r] << " ref " << lref << " > tol " << rl.tol[r];
    const double tol_lc = rlc.tol[r] + 8 * kU32 * (std::fabs(lref) + 1);
    if (!(std::fabs(lc[r] - lref) <= tol_lc) && bad++ < 4)
      ADD_FAILURE() << "LSE[" << row << "]: cuDNN stats " << lc[r] << " ref " << lref << " > tol " << tol_lc;
  }
  EXPECT_EQ(bad, 0);
  std::printf(
      "[ measured ] cuDNN SDPA %s (%s, engine %lld, %d configs passed over, %zu B workspace): %lld elements of O; "
      "|kernel-ref| / (|cudnn-ref| + 1 ulp): max %.3g, mean %.3g; worst |err|/tol kernel %.3g, cuDNN %.3g\n",
      ::testing::PrintToString(pb).c_str(), vendor::cudnn_describe().c_str(),
      static_cast<long long>(used->engine_index), used->passed_over, used->workspace, static_cast<long long>(count),
      worst_ratio, sum_ratio / std::max<double>(1, static_cast<double>(count)), worst_k, worst_c);
  RecordProperty("worst_ratio", std::to_string(worst_ratio));
}

std::vector<SdpaProblem> sdpa_problems() {
  std::vector<SdpaProblem> v;
  for (DType t : {DType::kF16, DType::kBF16})
    for (int64_t s : {113, 128, 256})
      for (int64_t dd : {64, 128})
        for (bool c : {false, true}) v.push_back({t, s, dd, c});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudnnSdpaGpu, ::testing::ValuesIn(sdpa_problems()),
                         [](const ::testing::TestParamInfo<SdpaProblem>& i) {
                           return std::string(dtype_name(i.param.dt)) + "_S" + std::to_string(i.param.S) + "_D" +
                                  std::to_string(i.param.D) + (i.param.causal ? "_causal" : "");
                         });

}  // namespace
}  // namespace assay
