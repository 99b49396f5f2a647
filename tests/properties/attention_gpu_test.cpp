// GPU tests of the attention specs: the flash kernels pass a fuzz campaign
// (300+ cases per op) with every check on; each planted bug of
// tests/mutants/attention is caught (and shrunk and stored) by the check that
// claims to catch it; and the forward kernel agrees with a composite cuBLAS
// attention in the same precision (S = Q K^T by cublasGemmStridedBatchedEx,
// fp16/bf16 inputs, fp32 compute and output; softmax on the host in fp64, P
// rounded to the storage type; O = P V by cublasGemmStridedBatchedEx into the
// storage type) within the sum of both ceilings. The ratio of the kernel's
// error to the composite's is measured and printed, not asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include "harness/bounds.h"
#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/dtype.h"
#include "harness/gpu/lane.h"
#include "harness/spec.h"
#include "tests/properties/campaign_checks.h"
#include "harness/values.h"
#include "kernels/attention/attention.h"
#include "properties/attention.h"

namespace assay {
namespace {

using AttentionGpu = GpuCampaignTest<std::string>;

TEST_P(AttentionGpu, CorrectVariantsPass) {
  expect_campaign_passes(GetParam(), 320, 1024);
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionGpu, ::testing::Values("attention", "attention_bwd"));

using AttentionGpuMutants = GpuCampaignTest<PlantedMutant>;

TEST_P(AttentionGpuMutants, CaughtShrunkAndStored) {
  expect_mutant_caught(GetParam(), 1000, 1024, 60, dir_.string());
}

using namespace failure_kinds;

INSTANTIATE_TEST_SUITE_P(Planted, AttentionGpuMutants,
                         ::testing::Values(PlantedMutant{"attention", "mutant_attn_tail_guard", {kB, kN, kC, kG}},
                                           PlantedMutant{"attention", "mutant_attn_causal_off_by_one", {kB}},
                                           PlantedMutant{"attention", "mutant_attn_no_rescale", {kB, kN}},
                                           PlantedMutant{"attention_bwd", "mutant_attn_dv_wrong_row", {kB}}),
                         [](const ::testing::TestParamInfo<PlantedMutant>& i) { return std::string(i.param.variant); });

// ---- composite cuBLAS reference ---------------------------------------------------------------

struct AttnProblem {
  DType dt;
  int64_t B, H, Hkv, Sq, Sk, D;
  bool causal;
};
void PrintTo(const AttnProblem& p, std::ostream* os) {
  *os << dtype_name(p.dt) << " B" << p.B << " H" << p.H << "/" << p.Hkv << " Sq" << p.Sq << " Sk" << p.Sk << " D" << p.D
      << (p.causal ? " causal" : "");
}

cudaDataType_t cuda_type(DType t) {
  return t == DType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
}

class AttentionCompositeGpu : public ::testing::TestWithParam<AttnProblem> {};

TEST_P(AttentionCompositeGpu, KernelAndCublasCompositeAgreeWithinBothCeilings) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const AttnProblem pb = GetParam();
  attention::AttnDims d;
  d.B = pb.B, d.H = pb.H, d.Hkv = pb.Hkv, d.Sq = pb.Sq, d.Sk = pb.Sk, d.D = pb.D, d.causal = pb.causal;
  d.dt = pb.dt;
  d.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(pb.D)));
  const int64_t G = d.H / d.Hkv, qr = d.B * d.H * d.Sq, kr = d.B * d.Hkv * d.Sk, D = d.D;
  const size_t es = dtype_size(d.dt);
  // Inputs in the storage type, contiguous (ld = D).
  auto make = [&](int64_t rows, uint64_t seed, double scale, std::vector<unsigned char>& bytes,
                  std::vector<double>& dec) {
    const TensorDesc desc = TensorDesc::contiguous(d.dt, {rows, D});
    ValueRecipe r;
    r.cls = ValueClass::kNormal;
    r.seed = seed;
    r.scale = scale;
    bytes.resize(static_cast<size_t>(rows * D) * es);
    materialize(desc, r, seed, bytes.data());
    dec.resize(static_cast<size_t>(rows * D));
    for (size_t i = 0; i < dec.size(); ++i) dec[i] = load_as_double(d.dt, bytes.data() + i * es);
  };
  std::vector<unsigned char> hq, hk, hv;
  std::vector<double> q, k, v;
  make(qr, 11, 1.5, hq, q);
  make(kr, 12, 1.5, hk, k);
  make(kr, 13, 1.0, hv, v);
  const HostTensor tq{q.data(), {qr, D, D}}, tk{k.data(), {kr, D, D}}, tv{v.data(), {kr, D, D}};
  OutputRef ro, rl;
  attention::attention_fwd_reference(d, tq, tk, tv, nullptr, ro, rl);

  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr, *dP = nullptr, *dOc = nullptr;
  float *dlse = nullptr, *dS = nullptr;
  const size_t nS = static_cast<size_t>(d.B * d.H * d.Sq * d.Sk);
  ASSERT_EQ(cudaMalloc(&dq, hq.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dk, hk.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dv, hv.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, hq.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dOc, hq.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dlse, static_cast<size_t>(qr) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dS, nS * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dP, nS * es), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dq, hq.data(), hq.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk, hk.data(), hk.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv, hv.data(), hv.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const auto dt = d.dt == DType::kF16 ? kernels::attention::Dt::kF16 : kernels::attention::Dt::kBF16;
  ASSERT_EQ(kernels::attention::flash_fwd(dt, d.shape(), dq, D, dk, D, dv, D, nullptr, 0, dout, D, dlse, nullptr),
            cudaSuccess);

  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float alpha = static_cast<float>(d.scale), one = 1.f, zero = 0.f;
  // S_h^T (col-major Sk x Sq) = K_g (col-major D x Sk)^T Q_h (col-major D x Sq); the G query heads
  // of kv head g are one strided batch over the same K_g (stride 0).
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t g = 0; g < d.Hkv; ++g) {
      const int64_t h0 = b * d.H + g * G, kv = b * d.Hkv + g;
      ASSERT_EQ(cublasGemmStridedBatchedEx(
                    h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(d.Sk), static_cast<int>(d.Sq), static_cast<int>(D),
                    &alpha, static_cast<unsigned char*>(dk) + kv * d.Sk * D * es, cuda_type(d.dt), static_cast<int>(D),
                    0, static_cast<unsigned char*>(dq) + h0 * d.Sq * D * es, cuda_type(d.dt), static_cast<int>(D),
                    d.Sq * D, &zero, dS + h0 * d.Sq * d.Sk, CUDA_R_32F, static_cast<int>(d.Sk), d.Sq * d.Sk,
                    static_cast<int>(G), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS);
    }
  std::vector<float> S(nS);
  ASSERT_EQ(cudaMemcpy(S.data(), dS, nS * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  // Softmax of cuBLAS's scores in fp64 (causal: invisible keys -inf), P rounded to the storage type.
  std::vector<unsigned char> hP(nS * es);
  std::vector<double> lse_c(static_cast<size_t>(qr));
  for (int64_t row = 0; row < qr; ++row) {
    const int64_t i = row % d.Sq;
    const float* s = S.data() + row * d.Sk;
    double mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < d.Sk; ++j)
      if (!d.causal || j <= i) mx = std::max(mx, static_cast<double>(s[j]));
    for (int64_t j = 0; j < d.Sk; ++j)
      if (!d.causal || j <= i) z += std::exp(static_cast<double>(s[j]) - mx);
    lse_c[static_cast<size_t>(row)] = mx + std::log(z);
    for (int64_t j = 0; j < d.Sk; ++j) {
      const double p = (!d.causal || j <= i) ? std::exp(static_cast<double>(s[j]) - mx) / z : 0.0;
      store_as(d.dt, p, hP.data() + static_cast<size_t>(row * d.Sk + j) * es);
    }
  }
  ASSERT_EQ(cudaMemcpy(dP, hP.data(), hP.size(), cudaMemcpyHostToDevice), cudaSuccess);
  // O_h^T (col-major D x Sq) = V_g (col-major D x Sk) P_h^T (col-major Sk x Sq).
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t g = 0; g < d.Hkv; ++g) {
      const int64_t h0 = b * d.H + g * G, kv = b * d.Hkv + g;
      ASSERT_EQ(cublasGemmStridedBatchedEx(
                    h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(D), static_cast<int>(d.Sq), static_cast<int>(d.Sk),
                    &one, static_cast<unsigned char*>(dv) + kv * d.Sk * D * es, cuda_type(d.dt), static_cast<int>(D), 0,
                    static_cast<unsigned char*>(dP) + h0 * d.Sq * d.Sk * es, cuda_type(d.dt), static_cast<int>(d.Sk),
                    d.Sq * d.Sk, &zero, static_cast<unsigned char*>(dOc) + h0 * d.Sq * D * es, cuda_type(d.dt),
                    static_cast<int>(D), d.Sq * D, static_cast<int>(G), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS);
    }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned char> hO(hq.size()), hOc(hq.size());
  std::vector<float> lse_k(static_cast<size_t>(qr));
  ASSERT_EQ(cudaMemcpy(hO.data(), dout, hO.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(hOc.data(), dOc, hOc.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(lse_k.data(), dlse, lse_k.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cublasDestroy(h);
  for (void* p : {dq, dk, dv, dout, dP, dOc}) cudaFree(p);
  cudaFree(dlse);
  cudaFree(dS);

  // The composite's ceiling. Scores: a tensor-core GEMM with fp32 output (truncating blocks,
  // any split: gemm_bounds); through the fp64 softmax as in the spec (bound step 2); P rounded to
  // the storage type (u_dt relative + half the smallest subnormal); O = P V: a second GEMM into
  // the storage type over Sk products.
  GemmBoundModel ms;
  ms.in = d.dt, ms.acc = DType::kF32, ms.out = DType::kF32, ms.k = D, ms.alpha_abs = d.scale;
  ms.accumulation = Accumulation::kTruncatingBlock, ms.block = 4, ms.block_bits = 24, ms.any_split = true;
  const ElementBound bs = gemm_bounds(ms).ceiling;
  GemmBoundModel mo = ms;
  mo.out = d.dt, mo.k = d.Sk, mo.alpha_abs = 1;
  const ElementBound bo = gemm_bounds(mo).ceiling;
  const double udt = unit_roundoff(d.dt), sub = 0.5 * min_subnormal(d.dt);
  double worst_ratio = 0, sum_ratio = 0;
  int64_t n = 0, bad = 0;
  std::vector<double> E(static_cast<size_t>(d.Sk)), P(static_cast<size_t>(d.Sk));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t hh = 0; hh < d.H; ++hh)
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + hh) * d.Sq + i, kb = (b * d.Hkv + hh / G) * d.Sk;
        double mx = -INFINITY, z = 0, Emax = 0, PE = 0;
        std::vector<double> s(static_cast<size_t>(d.Sk), -INFINITY);
        for (int64_t j = 0; j < d.Sk; ++j) {
          if (d.causal && j > i) continue;
          double dot = 0, mag = 0;
          for (int64_t c = 0; c < D; ++c) {
            dot += q[static_cast<size_t>(row * D + c)] * k[static_cast<size_t>((kb + j) * D + c)];
            mag += std::fabs(q[static_cast<size_t>(row * D + c)] * k[static_cast<size_t>((kb + j) * D + c)]);
          }
          s[static_cast<size_t>(j)] = d.scale * dot;
          E[static_cast<size_t>(j)] = bs.tol(std::fabs(d.scale * dot), d.scale * mag);
          mx = std::max(mx, s[static_cast<size_t>(j)]);
          Emax = std::max(Emax, E[static_cast<size_t>(j)]);
        }
        for (int64_t j = 0; j < d.Sk; ++j) z += std::exp(s[static_cast<size_t>(j)] - mx);
        for (int64_t j = 0; j < d.Sk; ++j) {
          P[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - mx) / z;
          PE += P[static_cast<size_t>(j)] * (std::isfinite(s[static_cast<size_t>(j)]) ? E[static_cast<size_t>(j)] : 0);
        }
        const double eE = std::exp(Emax);
        for (int64_t c = 0; c < D; ++c) {
          double err = 0, mag = 0;
          for (int64_t j = 0; j < d.Sk; ++j) {
            if (!std::isfinite(s[static_cast<size_t>(j)])) continue;
            const double pj = P[static_cast<size_t>(j)], r = E[static_cast<size_t>(j)] + PE;
            const double tS = pj * r * eE * std::exp(eE * r);
            const double tP = tS + udt * (pj + tS) + sub;
            const double av = std::fabs(v[static_cast<size_t>((kb + j) * D + c)]);
            err += tP * av;
            mag += (pj + tP) * av;
          }
          const size_t l = static_cast<size_t>(row * D + c);
          const double ref = ro.ref[l];
          const double tol_c = err + bo.tol(std::fabs(ref) + err, mag);
          const double ok = load_as_double(d.dt, hO.data() + l * es), oc = load_as_double(d.dt, hOc.data() + l * es);
          if (!(std::fabs(ok - oc) <= ro.tol[l] + tol_c) && bad++ < 3)
            ADD_FAILURE() << "O[" << row << "][" << c << "]: kernel " << ok << " composite " << oc << " ref " << ref
                          << " |k - c| > " << ro.tol[l] + tol_c;
          const double ratio = std::fabs(ok - ref) / (std::fabs(oc - ref) + ulp_of(std::fabs(ref), d.dt));
          worst_ratio = std::max(worst_ratio, ratio);
          sum_ratio += ratio;
          ++n;
        }
        const double tol_lc = eE * PE + 1e-12 * std::fabs(lse_c[static_cast<size_t>(row)]);
        if (!(std::fabs(lse_k[static_cast<size_t>(row)] - lse_c[static_cast<size_t>(row)]) <=
              rl.tol[static_cast<size_t>(row)] + tol_lc) &&
            bad++ < 3)
          ADD_FAILURE() << "LSE[" << row << "]: kernel " << lse_k[static_cast<size_t>(row)] << " composite "
                        << lse_c[static_cast<size_t>(row)] << " > " << rl.tol[static_cast<size_t>(row)] + tol_lc;
      }
  EXPECT_EQ(bad, 0);
  std::printf(
      "[ measured ] attention vs cuBLAS composite %s: %lld elements of O, |k-ref| / (|composite-ref| + 1 ulp): "
      "max %.3g, mean %.3g\n",
      ::testing::PrintToString(pb).c_str(), static_cast<long long>(n), worst_ratio,
      sum_ratio / std::max<double>(1, static_cast<double>(n)));
  RecordProperty("worst_ratio", std::to_string(worst_ratio));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionCompositeGpu,
                         ::testing::Values(AttnProblem{DType::kF16, 2, 4, 2, 113, 239, 64, false},
                                           AttnProblem{DType::kBF16, 2, 4, 2, 113, 239, 64, true},
                                           AttnProblem{DType::kF16, 1, 2, 1, 1, 1023, 128, false},
                                           AttnProblem{DType::kBF16, 1, 2, 2, 255, 3, 128, false},
                                           AttnProblem{DType::kF16, 1, 1, 1, 1023, 1023, 128, true}));

}  // namespace
}  // namespace assay
