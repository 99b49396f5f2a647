// The attention backward's device reference (references/device/attention_bwd_f64.cu, with the
// device prepare, OpDef::device_reference of properties/attention.cpp) against the host on
// generated cases the device path takes, inputs drawn on the device as the engine draws them:
//  - prepare: the device's O (in its dtype) and LSE (fp32) against the host prepare_bwd run on
//    the same drawn Q, K, V, M: equal but where CUDA's exp / log moved the fp64 O or LSE across
//    a rounding boundary of the stored format (then one ulp of it apart; counted, at most 1% of
//    the elements); dO's per-row scaling and the untouched inputs byte for byte;
//  - the references: the host reference_bwd and bound_bwd on the device-prepared inputs (copied
//    back) against the device's, under the flash kernel's IEEE arithmetic and, on every other
//    case, fast-math. Both run references/host/attention.h's per-pair step and finish in the same
//    order; only exp differs (CUDA's fp64 exp against glibc's, each within an ulp or two), so
//    every term may move by a few ulps and every sum round differently by an ulp per term:
//    dQ, dK, dV within (N + 8) fp64 ulps of their magnitude (N terms: Sk for dQ, G Sq for dK
//    and dV), the tolerances within 1e-7 relative (+Inf and 0 exactly): e_p holds
//    exp(E + u(|x| + E))(1 + c u) - 1 with an argument near (D + |x|) 2^-24, where one ulp of exp
//    is 2^-52 / (D 2^-24) of the difference;
//  - a gradcheck case's relation sums on the device against the host's (check_gradcheck_sums);
//  - the engine: the flash backward passes such cases with the verdict naming the device
//    reference, and both paths' time per case is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "harness/bounds.h"
#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/gpu/materialize_device.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "properties/attention.h"
#include "references/host/attention.h"
#include "tests/references/device_ref_check.h"

namespace assay {
namespace {

int64_t bwd_work(const Case& c) {
  const Params p(c.params);
  return p.i("B") * p.i("Hkv") * p.i("G") * p.i("Sq") * p.i("Sk") * p.i("D");
}

/// Generated attention_bwd cases the device path takes, B H Sq Sk D at most `max_work`.
std::vector<Case> bwd_gpu_cases(int want, uint64_t seed, int64_t max_dim, int64_t max_work, int64_t tries) {
  const OpSpec* spec = find_spec("attention_bwd");
  const OpDef* op = find_op("attention_bwd");
  std::vector<Case> out;
  if (spec == nullptr || op == nullptr || !op->device_reference.when) return out;
  GenPlan plan;
  plan.seed = seed;
  plan.gen.max_dim = max_dim;
  for (int64_t i = 0; static_cast<int>(out.size()) < want && i < tries; ++i) {
    Case c = generate_case(*spec, plan, i);
    if (op->device_reference.when(Params(c.params)) && bwd_work(c) <= max_work) out.push_back(std::move(c));
  }
  return out;
}

/// Per output element of dQ, dK, dV: the sum of its terms' magnitudes (scale |dS||q| or |k|,
/// P |dO|), from the same prepared inputs, by the host's per-pair step.
void magnitudes(const attention::AttnDims& d, const std::vector<HostTensor>& t, std::vector<double> (&mag)[3]) {
  const int64_t G = d.H / d.Hkv, D = d.D;
  mag[0].assign(static_cast<size_t>(d.B * d.H * d.Sq * D), 0.0);
  mag[1].assign(static_cast<size_t>(d.B * d.Hkv * d.Sk * D), 0.0);
  mag[2].assign(mag[1].size(), 0.0);
  const ref::AttnBwdConsts kc = ref::attn_bwd_consts(D, false);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + h) * d.Sq + i, kbase = (b * d.Hkv + h / G) * d.Sk;
        const double L = t[5].data[row];
        if (L == -INFINITY) continue;
        const double *qi = t[0].data + row * t[0].v.ld, *oi = t[3].data + row * t[3].v.ld,
                     *doi = t[4].data + row * t[4].v.ld;
        double Di = 0, Dmag = 0;
        ref::attn_dot_mag(doi, oi, D, Di, Dmag);
        for (int64_t j = 0; j < d.Sk; ++j) {
          const int64_t kr = kbase + j;
          const double *kj = t[1].data + kr * t[1].v.ld, *vj = t[2].data + kr * t[2].v.ld;
          double s = 0, smag = 0, dP = 0, dPmag = 0;
          ref::attn_score(qi, kj, D, d.scale, !(d.causal && j > i), d.has_mask, d.has_mask ? t[6].at(i, j) : 0.0, s,
                          smag);
          if (!std::isfinite(s)) continue;
          ref::attn_dot_mag(doi, vj, D, dP, dPmag);
          const ref::AttnBwdPair pr = ref::attn_bwd_pair(s, smag, L, dP, dPmag, Di, Dmag, kc, false);
          for (int64_t c = 0; c < D; ++c) {
            mag[0][static_cast<size_t>(row * D + c)] += d.scale * std::fabs(pr.dS * kj[c]);
            mag[1][static_cast<size_t>(kr * D + c)] += d.scale * std::fabs(pr.dS * qi[c]);
            mag[2][static_cast<size_t>(kr * D + c)] += pr.P * std::fabs(doi[c]);
          }
        }
      }
}

struct BwdStats {
  int64_t cases = 0, fast = 0, elements = 0, ref_bitwise = 0, tol_bitwise = 0;
  double worst_ref = 0, worst_tol = 0;        // fp64 ulps of the magnitude; relative
  int64_t prep_elements = 0, prep_moved = 0;  // O and LSE elements; those one stored ulp apart
  int64_t by_dtype[3] = {0, 0, 0};
  int64_t grad_cases = 0, grad_skipped = 0;  // gradcheck cases; those both sides skip
  double worst_fd = 0;                        // max |sum v (J u) device - host| / (both errors)
  double err_ratio_lo = HUGE_VAL, err_ratio_hi = 0;  // device / host sum |v| err
};

/// A gradcheck case: the relation's sums on the device (device_gradcheck_sums_bwd, from the J u
/// and exact-O gradients the compute left in the scratch) against the host's
/// (grad_problem_bwd, grad_projection_sums) on the same prepared inputs, with the host reference
/// in fp32 as the kernel's gradients. The direction u_eff is the same bit for bit (same step,
/// same signs), so the kernel-side sums differ only in their order (within gamma_{n+m} of the
/// absolute sums) and the ceiling by the two references' tolerances (1e-7, above); J u is two
/// difference estimates of one quantity, each with its error estimate, so sum v (J u) may differ
/// by the two errors together. The reference as the gradient passes both verdicts.
void check_gradcheck_sums(const Case& c, const std::vector<HostTensor>& hv, const std::vector<OutputRef>& refs,
                          const std::vector<DevTensor>& in, const std::vector<DeviceOutput>& douts,
                          const DeviceContext& ctx, BwdStats& st) {
  std::vector<std::vector<double>> g(3);
  std::vector<float> gf;
  std::vector<HostTensor> grads;
  for (size_t o = 0; o < 3; ++o) {
    for (double r : refs[o].ref) {
      gf.push_back(static_cast<float>(r));
      g[o].push_back(static_cast<double>(gf.back()));
    }
  }
  float* dg = nullptr;
  ASSERT_EQ(cudaMalloc(&dg, sizeof(float) * std::max<size_t>(gf.size(), 1)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dg, gf.data(), sizeof(float) * gf.size(), cudaMemcpyHostToDevice), cudaSuccess);
  DevicePropertiesIn pin;
  pin.inputs = in;
  pin.refs = douts;
  for (size_t o = 0, at = 0; o < 3; ++o) {
    const int64_t rows = douts[o].rows, cols = douts[o].cols;
    pin.outputs.push_back({dg + at, DType::kF32, {rows, cols, cols}, {}, {}});
    grads.push_back({g[o].data(), {rows, cols, cols}});
    at += static_cast<size_t>(rows * cols);
  }
  GradSums dev;
  const Status s = attention::device_gradcheck_sums_bwd(c, pin, ctx, dev);
  cudaFree(dg);
  ASSERT_TRUE(s.ok()) << c.summary() << ": " << s.message();
  GradSums host;
  double factor = 0;
  std::string how;
  const bool judged = grad_projection_sums(attention::grad_problem_bwd(c, hv, grads, refs), host, factor, how);
  ++st.grad_cases;
  ASSERT_EQ(dev.skip, !judged) << c.summary() << ": the device skips the relation where the host does not, or back";
  if (!judged) {
    ++st.grad_skipped;
    return;
  }
  EXPECT_EQ(dev.n, host.n) << c.summary();
  EXPECT_EQ(dev.m, host.m) << c.summary();
  const double gam = 2 * gamma_n(host.n + host.m, 0x1p-53);
  EXPECT_LE(std::fabs(dev.kern - host.kern), gam * host.kern_abs + 1e-300) << c.summary();
  EXPECT_LE(std::fabs(dev.kern_abs - host.kern_abs), gam * host.kern_abs + 1e-300) << c.summary();
  EXPECT_LE(std::fabs(dev.ceil - host.ceil), 1e-6 * host.ceil + 1e-300) << c.summary();
  const double fd_gap = std::fabs(dev.fd_val - host.fd_val), fd_room = dev.fd_err + host.fd_err + gam * host.fd_abs;
  st.worst_fd = std::max(st.worst_fd, fd_gap / (fd_room + 1e-300));
  EXPECT_LE(fd_gap, fd_room) << c.summary() << ": sum v (J u) device " << dev.fd_val << ", host " << host.fd_val;
  EXPECT_LE(std::fabs(dev.fd_abs - host.fd_abs), fd_room) << c.summary();
  const double err_ratio = dev.fd_err / (host.fd_err + 1e-300);
  st.err_ratio_lo = std::min(st.err_ratio_lo, err_ratio), st.err_ratio_hi = std::max(st.err_ratio_hi, err_ratio);
  std::vector<Failure> fd, fh;
  judge_grad_projection(dev, factor, "device", "<dO, J u>", "dQ, dK, dV", fd);
  judge_grad_projection(host, factor, how, "<dO, J u>", "dQ, dK, dV", fh);
  EXPECT_TRUE(fd.empty()) << c.summary() << ": " << (fd.empty() ? "" : fd[0].detail);
  EXPECT_TRUE(fh.empty()) << c.summary() << ": " << (fh.empty() ? "" : fh[0].detail);
}

/// One case: draw on the device, run the op's device compute (prepare + backward), compare.
void check_case(const OpDef& op, const Case& c, const Contract& k, BwdStats& st) {
  const Params prm(c.params);
  const attention::AttnDims d = attention::dims_of(prm);
  const size_t nt = c.tensors.size();
  ASSERT_EQ(nt, 10u);
  std::vector<unsigned char*> dev(nt, nullptr);
  std::vector<std::vector<unsigned char>> drawn(nt), prepared(nt);
  std::vector<DevTensor> in;
  double* outs = nullptr;
  unsigned char* scratch = nullptr;
  auto release = [&] {
    for (auto* p : dev) cudaFree(p);
    cudaFree(outs);
    cudaFree(scratch);
  };
  for (size_t t = 0; t < nt; ++t) {
    const auto& ts = c.tensors[t];
    const size_t bytes = static_cast<size_t>(ts.desc.extent()) * dtype_size(ts.desc.dtype);
    ASSERT_EQ(cudaMalloc(&dev[t], std::max<size_t>(bytes, 4)), cudaSuccess);
    const Status s =
        ts.role == Role::kOut
            ? gpu::materialize_output_device(ts.desc, dev[t], nullptr)
            : gpu::materialize_device(ts.desc, ts.values, fnv1a64(ts.name.data(), ts.name.size()), dev[t], nullptr);
    ASSERT_TRUE(s.ok()) << c.summary() << ": " << s.message();
    drawn[t].resize(bytes);
    ASSERT_EQ(cudaMemcpy(drawn[t].data(), dev[t], bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    in.push_back({dev[t] + ts.desc.offset * static_cast<int64_t>(dtype_size(ts.desc.dtype)), ts.desc.dtype,
                  view_of(ts.desc), ts.desc.shape, ts.desc.strides});
  }
  std::vector<DeviceOutput> douts;
  int64_t total = 0;
  for (size_t t = 7; t < 10; ++t) total += 2 * in[t].v.rows * in[t].v.cols;
  ASSERT_EQ(cudaMalloc(&outs, sizeof(double) * static_cast<size_t>(total)), cudaSuccess);
  for (size_t t = 7, at = 0; t < 10; ++t) {
    DeviceOutput o;
    o.rows = in[t].v.rows, o.cols = in[t].v.cols;
    o.ref = outs + at, o.mag = outs + at + o.rows * o.cols;
    at += static_cast<size_t>(2 * o.rows * o.cols);
    douts.push_back(o);
  }
  DeviceContext ctx;
  ctx.scratch_bytes = op.device_reference.scratch(c);
  ASSERT_EQ(cudaMalloc(&scratch, static_cast<size_t>(ctx.scratch_bytes)), cudaSuccess);
  ctx.scratch = scratch;
  const Status prep = op.device_reference.prepare(c, in, ctx);
  ASSERT_TRUE(prep.ok()) << c.summary() << ": " << prep.message();
  const Status s = op.device_reference.compute(c, k.arithmetic(), in, douts, ctx);
  ASSERT_TRUE(s.ok()) << c.summary() << ": " << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.summary();
  for (size_t t = 0; t < nt; ++t) {
    prepared[t].resize(drawn[t].size());
    ASSERT_EQ(cudaMemcpy(prepared[t].data(), dev[t], drawn[t].size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  ++st.cases;
  ++st.by_dtype[d.dt == DType::kF16 ? 1 : d.dt == DType::kBF16 ? 2 : 0];
  st.fast += k.arithmetic().fast_math ? 1 : 0;

  // The host prepare on the drawn images against the device's.
  std::vector<std::vector<unsigned char>> host_prep = drawn;
  std::vector<unsigned char*> ptrs;
  for (auto& im : host_prep) ptrs.push_back(im.data());
  op.prepare(c, ptrs);
  for (size_t t = 0; t < 7; ++t) {
    if (t == 3 || t == 5) continue;
    ASSERT_TRUE(prepared[t] == host_prep[t])
        << c.summary() << ": " << c.tensors[t].name << " differs from the host prepare's";
  }
  for (size_t t : {size_t{3}, size_t{5}})
    ASSERT_TRUE(test_util::prepared_within_an_ulp(c, t, host_prep[t], prepared[t], st.prep_elements, st.prep_moved));

  // The host reference and bound on the device-prepared inputs.
  const test_util::HostOnImages h = test_util::host_refs_on(op, c, k, prepared);
  ASSERT_TRUE(h.ok);
  const std::vector<HostTensor>& hv = h.hv;
  const std::vector<OutputRef>& refs = h.refs;
  std::vector<double> mag[3];
  magnitudes(d, hv, mag);
  const int64_t n_terms[3] = {d.Sk, (d.H / d.Hkv) * d.Sq, (d.H / d.Hkv) * d.Sq};
  std::vector<double> back(static_cast<size_t>(total));
  ASSERT_EQ(cudaMemcpy(back.data(), outs, sizeof(double) * back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  const char* names[3] = {"dQ", "dK", "dV"};
  for (size_t o = 0, at = 0; o < 3; ++o) {
    const size_t n = static_cast<size_t>(douts[o].rows * douts[o].cols);
    ASSERT_EQ(refs[o].ref.size(), n);
    const double ulps = static_cast<double>(n_terms[o] + 8);
    int reported = 0;
    for (size_t l = 0; l < n; ++l) {
      const double hr = refs[o].ref[l], vr = back[at + l], vt = back[at + n + l];
      const double ht = std::isnan(refs[o].tol[l]) ? INFINITY : refs[o].tol[l];
      const bool bad = !test_util::compare_element(hr, ht, vr, vt, mag[o][l] + std::fabs(hr), ulps, 1e-7, st).empty();
      if (bad) {
        ADD_FAILURE() << c.summary() << (k.arithmetic().fast_math ? " (fast-math) " : " (IEEE) ") << names[o]
                      << " element " << l << ": host ref " << hr << " tol " << ht << ", device ref " << vr << " tol "
                      << vt << " (magnitude " << mag[o][l] << ")";
        if (++reported >= 5) break;
      }
    }
    at += 2 * n;
  }
  if (wants_gradcheck(c)) check_gradcheck_sums(c, hv, refs, in, douts, ctx, st);
  release();
}

TEST(AttentionBwdDeviceRefGpu, PreparesAndMatchesTheHostReferenceAndBound) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const OpDef& op = test_util::model_op("attention_bwd");
  ASSERT_TRUE(op.device_reference.when && op.device_reference.compute && op.device_reference.scratch);
  const std::vector<Case> cases = bwd_gpu_cases(200, 17, 256, int64_t{1} << 21, 400000);
  ASSERT_GE(cases.size(), 150u);
  const Contract flash = test_util::variant_contract("attention_bwd", "flash");
  const Contract fast = Contract().fast_math();
  int64_t causal = 0, mask = 0, gqa = 0, scaled = 0;
  BwdStats st;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Params p(cases[i].params);
    causal += p.b("causal") ? 1 : 0;
    mask += p.b("mask") ? 1 : 0;
    gqa += p.i("G") > 1 ? 1 : 0;
    scaled += p.b("do_row_scale") ? 1 : 0;
    ASSERT_NO_FATAL_FAILURE(check_case(op, cases[i], i % 2 == 1 ? fast : flash, st));
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(causal, 0);
  EXPECT_GT(mask, 0);
  EXPECT_GT(gqa, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(st.by_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(st.by_dtype[2], 0) << "no bf16 case";
  const double moved = static_cast<double>(st.prep_moved) / static_cast<double>(std::max<int64_t>(st.prep_elements, 1));
  EXPECT_LE(moved, 0.01) << "the device prepare's O / LSE differ from the host's in more than 1% of the elements";
  const double el = static_cast<double>(std::max<int64_t>(st.elements, 1));
  std::printf(
      "[ measured ] attention_bwd device reference: %lld cases (fp32 %lld, fp16 %lld, bf16 %lld; %lld causal, %lld "
      "masked, %lld GQA, %lld dO row-scaled, %lld under fast-math), %lld elements; ref bitwise equal %.4f%%, tol "
      "bitwise equal %.4f%%; worst ref difference %.3g ulps of the magnitude, worst tol difference %.3g relative\n",
      static_cast<long long>(st.cases), static_cast<long long>(st.by_dtype[0]), static_cast<long long>(st.by_dtype[1]),
      static_cast<long long>(st.by_dtype[2]), static_cast<long long>(causal), static_cast<long long>(mask),
      static_cast<long long>(gqa), static_cast<long long>(scaled), static_cast<long long>(st.fast),
      static_cast<long long>(st.elements), 100.0 * static_cast<double>(st.ref_bitwise) / el,
      100.0 * static_cast<double>(st.tol_bitwise) / el, st.worst_ref, st.worst_tol);
  EXPECT_GE(st.grad_cases, 20) << "too few gradcheck cases";
  std::printf(
      "[ measured ] attention_bwd gradcheck sums on the device: %lld cases (%lld skipped by both sides); worst "
      "|sum v (J u) device - host| %.3g of the two error estimates together; device / host sum |v| err in [%.3g, "
      "%.3g]\n",
      static_cast<long long>(st.grad_cases), static_cast<long long>(st.grad_skipped), st.worst_fd, st.err_ratio_lo,
      st.err_ratio_hi);
  std::printf(
      "[ measured ] attention_bwd device prepare: %lld of %lld saved O / LSE elements one stored ulp from the host "
      "prepare's (%.4f%%), dO and the other inputs byte for byte\n",
      static_cast<long long>(st.prep_moved), static_cast<long long>(st.prep_elements), 100.0 * moved);
}

TEST(AttentionBwdDeviceRefGpu, EngineTakesTheDevicePathAndTheFlashKernelPasses) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  test_util::expect_engine_device_path(test_util::model_op("attention_bwd"), {find_variant("attention_bwd", "flash")},
                                       bwd_gpu_cases(60, 23, 512, int64_t{1} << 22, 400000), 50);
}

// Small cases just above the threshold (B H Sq Sk D in [4096, 16384)): the printed times per
// case say what the device path saves where the host path cost most per unit of work.
TEST(AttentionBwdDeviceRefGpu, EngineTimesBothPathsNearTheThreshold) {
  auto nd = gpu::device_count();
  if (!nd.ok()) GTEST_SKIP() << "GPU test skipped: " << nd.status().message();
  const std::vector<Case> cases = bwd_gpu_cases(80, 29, 64, int64_t{1} << 14, 400000);
  ASSERT_GE(cases.size(), 40u);
  test_util::expect_engine_device_path(test_util::model_op("attention_bwd"), {find_variant("attention_bwd", "flash")},
                                       cases, 30);
}

}  // namespace
}  // namespace assay
