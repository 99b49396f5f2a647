// The attention backward's device reference (references/device/attention_bwd_f64_phases.h,
// whose phases the GPU kernels run one thread per row, pair or output element) run on the CPU
// in the kernels' decomposition, over the engine's own images (offsets and padded rows
// included), for generated attention_bwd cases the device path takes:
//  - dQ, dK, dV bit for bit equal to the host reference (bwd_pass without tolerances), and
//    their tolerances bit for bit equal to the host bound (bwd_pass with them) under IEEE
//    arithmetic and under fast-math, after the host's prepare;
//  - the device prepare's phase (O rounded into its dtype, LSE into fp32, dO rescaled per row)
//    writes the images the host prepare writes, byte for byte, from the host forward's O and
//    LSE (which the forward's device reference reproduces: attention_device_ref_test.cpp).
// On the CPU both sides use the same exp, so nothing may differ; on the GPU only CUDA's exp
// and log may (attention_bwd_device_ref_gpu_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "harness/bounds.h"
#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "properties/attention.h"
#include "references/device/attention_bwd_f64.h"
#include "tests/properties/model_host.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

/// The kernels' launches (attention_bwd_f64.cu) on one thread, in their order.
void emulate(const device_ref::AttentionBwdF64Problem& p, const device_ref::AttentionBwdF64Io& io) {
  for (int64_t r = 0; r < p.rows(); ++r) device_ref::attn_bwd_phase_row(p, io, r);
  for (int64_t e = 0; e < p.pairs(); ++e) device_ref::attn_bwd_phase_pair(p, io, e);
  for (int64_t e = 0; e < p.rows() * p.D; ++e) device_ref::attn_bwd_phase_dq(p, io, e);
  for (int64_t e = 0; e < p.kv_rows() * p.D; ++e) device_ref::attn_bwd_phase_dkv(p, io, e);
}

/// Tensor t of a case's images as the device reference reads it (element [0] at its offset).
device_ref::InputRows rows_of(const Case& c, const std::vector<std::vector<unsigned char>>& images, size_t t) {
  const auto& desc = c.tensors[t].desc;
  const View2D v = view_of(desc);
  return device_ref::input_rows(images[t].data() + desc.offset * static_cast<int64_t>(dtype_size(desc.dtype)), v.cols,
                                v.ld, desc.dtype);
}

/// The device phases' dQ, dK, dV (reference, tolerance) on the images.
struct PhaseRun {
  std::vector<double> ref[3], tol[3];
};

PhaseRun run_phases(const Case& c, const std::vector<std::vector<unsigned char>>& images, bool fast_math) {
  const attention::AttnDims d = attention::dims_of(Params(c.params));
  const device_ref::AttentionBwdF64Problem p = attention::attention_bwd_problem(d, fast_math);
  device_ref::AttentionBwdF64Io io;
  ScratchCarver count;
  device_ref::attention_bwd_f64_scratch(p, count, io);
  std::vector<unsigned char> scratch(static_cast<size_t>(count.bytes()) + 256);
  auto* base = scratch.data();
  base += (256 - reinterpret_cast<uintptr_t>(base) % 256) % 256;
  ScratchCarver carve(base);
  device_ref::attention_bwd_f64_scratch(p, carve, io);
  io.q = rows_of(c, images, 0), io.k = rows_of(c, images, 1), io.v = rows_of(c, images, 2);
  io.o = rows_of(c, images, 3), io.dout = rows_of(c, images, 4), io.lse = rows_of(c, images, 5);
  io.mask = rows_of(c, images, 6);
  PhaseRun r;
  const int64_t n[3] = {p.rows() * p.D, p.kv_rows() * p.D, p.kv_rows() * p.D};
  for (size_t o = 0; o < 3; ++o) {
    r.ref[o].assign(static_cast<size_t>(n[o]), -1);
    r.tol[o].assign(static_cast<size_t>(n[o]), -1);
  }
  io.dq_ref = r.ref[0].data(), io.dq_tol = r.tol[0].data();
  io.dk_ref = r.ref[1].data(), io.dk_tol = r.tol[1].data();
  io.dv_ref = r.ref[2].data(), io.dv_tol = r.tol[2].data();
  emulate(p, io);
  return r;
}

/// Generated attention_bwd cases the device path takes, with at most `max_work` B H Sq Sk D
/// (the host reference's time).
std::vector<Case> bwd_cases(int want, uint64_t seed, int64_t max_work) {
  const OpSpec* spec = find_spec("attention_bwd");
  const OpDef& op = test_util::model_op("attention_bwd");
  std::vector<Case> out;
  if (spec == nullptr || !op.device_reference.when) return out;
  GenPlan plan;
  plan.seed = seed;
  plan.gen.max_dim = 128;
  for (int64_t idx = 0; static_cast<int>(out.size()) < want && idx < 40000; ++idx) {
    Case c = generate_case(*spec, plan, idx);
    const Params prm(c.params);
    if (!op.device_reference.when(prm)) continue;
    const attention::AttnDims d = attention::dims_of(prm);
    if (d.B * d.H * d.Sq * d.Sk * d.D > max_work) continue;
    out.push_back(std::move(c));
  }
  return out;
}

TEST(AttentionBwdDeviceRef, KernelPhasesAreTheHostReferenceAndBoundBitForBit) {
  const OpDef& op = test_util::model_op("attention_bwd");
  ASSERT_TRUE(op.device_reference.when && op.device_reference.compute && op.device_reference.scratch);
  const std::vector<Case> cases = bwd_cases(100, 9, int64_t{1} << 20);
  ASSERT_GE(cases.size(), 90u);
  const Contract flash = test_util::variant_contract("attention_bwd", "flash");
  ASSERT_FALSE(flash.arithmetic().fast_math) << "the flash backward is meant to declare IEEE expf";
  const Arithmetic fast = Contract().fast_math().arithmetic();
  int64_t elements = 0, masked_rows = 0, causal = 0, mask = 0, gqa = 0, scaled_do = 0, padded = 0, inf_tol = 0;
  int64_t per_dtype[3] = {0, 0, 0};  // fp32, fp16, bf16
  for (const Case& c : cases) {
    const Params prm(c.params);
    const attention::AttnDims d = attention::dims_of(prm);
    ++per_dtype[d.dt == DType::kF16 ? 1 : d.dt == DType::kBF16 ? 2 : 0];
    causal += d.causal ? 1 : 0;
    mask += d.has_mask ? 1 : 0;
    gqa += d.H > d.Hkv ? 1 : 0;
    scaled_do += prm.b("do_row_scale") ? 1 : 0;
    for (size_t t = 0; t < 7; ++t) {
      const View2D v = view_of(c.tensors[t].desc);
      padded += v.ld > v.cols && v.rows > 1 ? 1 : 0;
    }
    // Host: prepare, reference (bwd_pass without tolerances), bound (with, IEEE expf).
    const test_util::ModelHostRun h = test_util::model_host_run(op, c, flash);
    ASSERT_EQ(h.refs.size(), 3u);
    // The bound once more under fast-math, on the same prepared inputs.
    std::vector<OutputRef> fast_refs = h.refs;
    ASSERT_TRUE(op.bound(h.c, fast, h.hv, fast_refs).ok());
    for (auto& o : fast_refs)
      for (double& t : o.tol)
        if (std::isnan(t)) t = INFINITY;
    for (int64_t r = 0; r < h.hv[5].v.cols; ++r) masked_rows += h.hv[5].data[r] == -INFINITY ? 1 : 0;
    for (int mode = 0; mode < 2; ++mode) {
      const PhaseRun ph = run_phases(h.c, h.images, mode == 1);
      const std::vector<OutputRef>& host = mode == 0 ? h.refs : fast_refs;
      const char* names[3] = {"dQ", "dK", "dV"};
      for (size_t o = 0; o < 3; ++o) {
        ASSERT_EQ(host[o].ref.size(), ph.ref[o].size()) << c.summary();
        ASSERT_EQ(host[o].tol.size(), ph.tol[o].size()) << c.summary();
        for (size_t l = 0; l < ph.ref[o].size(); ++l) {
          ++elements;
          inf_tol += std::isinf(ph.tol[o][l]) ? 1 : 0;
          const double hr = host[o].ref[l], ht = host[o].tol[l], vr = ph.ref[o][l], vt = ph.tol[o][l];
          ASSERT_TRUE(same_bits(hr, vr) && same_bits(ht, vt))
              << c.summary() << (mode == 1 ? " (fast-math) " : " (IEEE) ") << names[o] << " element " << l << ": host "
              << hr << " tol " << ht << ", phases " << vr << " tol " << vt;
        }
      }
    }
  }
  EXPECT_GT(per_dtype[0], 0);
  EXPECT_GT(per_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(per_dtype[2], 0) << "no bf16 case";
  EXPECT_GT(causal, 0);
  EXPECT_GT(mask, 0);
  EXPECT_GT(gqa, 0);
  EXPECT_GT(scaled_do, 0);
  EXPECT_GT(padded, 0);
  std::printf(
      "[ measured ] attention_bwd device phases: %zu cases (fp32 %lld, fp16 %lld, bf16 %lld; %lld causal, %lld "
      "masked, %lld GQA, %lld dO row-scaled), %lld elements bit for bit under IEEE and fast-math (%lld fully masked "
      "rows, %lld infinite tolerances)\n",
      cases.size(), static_cast<long long>(per_dtype[0]), static_cast<long long>(per_dtype[1]),
      static_cast<long long>(per_dtype[2]), static_cast<long long>(causal), static_cast<long long>(mask),
      static_cast<long long>(gqa), static_cast<long long>(scaled_do), static_cast<long long>(elements),
      static_cast<long long>(masked_rows), static_cast<long long>(inf_tol));
}

/// A case's images as the engine draws them, before prepare (outputs poisoned).
std::vector<std::vector<unsigned char>> drawn_images(const Case& c) {
  std::vector<std::vector<unsigned char>> images;
  for (const auto& ts : c.tensors) {
    images.emplace_back(static_cast<size_t>(ts.desc.extent()) * dtype_size(ts.desc.dtype));
    if (ts.role == Role::kOut)
      materialize_output(ts.desc, images.back().data());
    else
      materialize(ts.desc, ts.values, fnv1a64(ts.name.data(), ts.name.size()), images.back().data());
  }
  return images;
}

std::vector<double> decode_all(const TensorDesc& d, const std::vector<unsigned char>& image) {
  std::vector<double> v(static_cast<size_t>(d.extent()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_double(d.dtype, image.data() + i * dtype_size(d.dtype));
  return v;
}

TEST(AttentionBwdDeviceRef, PreparePhaseWritesTheHostPreparesBytes) {
  const OpDef& op = test_util::model_op("attention_bwd");
  const std::vector<Case> cases = bwd_cases(100, 11, int64_t{1} << 20);
  ASSERT_GE(cases.size(), 90u);
  int64_t scaled_do = 0, narrow = 0, bytes = 0;
  for (const Case& c : cases) {
    const Params prm(c.params);
    const attention::AttnDims d = attention::dims_of(prm);
    scaled_do += prm.b("do_row_scale") ? 1 : 0;
    narrow += d.dt != DType::kF32 ? 1 : 0;
    std::vector<std::vector<unsigned char>> host = drawn_images(c), dev = host;
    std::vector<unsigned char*> ptrs;
    for (auto& im : host) ptrs.push_back(im.data());
    op.prepare(c, ptrs);
    // The device side: the fully masked rows (attention_mask_rows, held to prepare's bytes by
    // AttentionDeviceRefGpu.MaskRowsOnTheDeviceAreThePreparedRows), the forward's fp64 O and
    // LSE on the drawn Q, K, V, M, then the phase.
    if (d.has_mask && prm.i("masked_every", 0) > 0) {
      const auto& md = c.tensors[6].desc;
      const View2D mv = view_of(md);
      for (int64_t r = 0; r < mv.rows; r += prm.i("masked_every"))
        for (int64_t j = 0; j < mv.cols; ++j) {
          const float ninf = -INFINITY;
          std::memcpy(dev[6].data() + static_cast<size_t>(md.offset + r * mv.ld + j) * 4, &ninf, 4);
        }
    }
    std::vector<double> dec[7];
    HostTensor hv[7];
    for (size_t t = 0; t < 7; ++t) {
      dec[t] = decode_all(c.tensors[t].desc, dev[t]);
      hv[t] = {dec[t].data() + c.tensors[t].desc.offset, view_of(c.tensors[t].desc)};
    }
    OutputRef o, l;
    attention::attention_fwd_reference(d, hv[0], hv[1], hv[2], d.has_mask ? &hv[6] : nullptr, o, l);
    const device_ref::InputRows orow = rows_of(c, dev, 3), drow = rows_of(c, dev, 4);
    device_ref::AttentionBwdPrepareIo io;
    io.o_ref = o.ref.data(), io.lse_ref = l.ref.data();
    io.o = const_cast<void*>(orow.data), io.o_ld = orow.ld, io.o_type = orow.type;
    io.lse = const_cast<float*>(static_cast<const float*>(rows_of(c, dev, 5).data));
    io.dout = const_cast<void*>(drow.data), io.do_ld = drow.ld, io.do_type = drow.type;
    io.do_row_scale = prm.b("do_row_scale");
    io.rows = d.B * d.H * d.Sq, io.D = d.D;
    for (int64_t e = 0; e < io.rows * io.D; ++e) device_ref::attn_bwd_prepare_phase(io, e);
    for (size_t t = 0; t < host.size(); ++t) {
      bytes += static_cast<int64_t>(host[t].size());
      ASSERT_TRUE(host[t] == dev[t]) << c.summary() << ": tensor " << c.tensors[t].name
                                     << " differs from the host prepare's";
    }
  }
  EXPECT_GT(scaled_do, 0);
  EXPECT_GT(narrow, 0);
  std::printf(
      "[ measured ] attention_bwd device prepare phase: %zu cases (%lld fp16 / bf16, %lld dO row-scaled), "
      "%lld image bytes equal to the host prepare's\n",
      cases.size(), static_cast<long long>(narrow), static_cast<long long>(scaled_do), static_cast<long long>(bytes));
}

TEST(AttentionBwdDeviceRef, TakesSmallCasesMaskedRowsAndTheGradcheck) {
  const OpDef& op = test_util::model_op("attention_bwd");
  ASSERT_TRUE(op.device_reference.when);
  nlohmann::json p = {{"dtype", "fp16"}, {"D", 64},  {"Hkv", 1},        {"G", 1},        {"B", 1},
                      {"Sq", 16},        {"Sk", 16}, {"causal", false}, {"mask", false}, {"do_row_scale", true}};
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "16 * 16 * 64 = 16384 units of work";
  p["dtype"] = "bf16";
  EXPECT_TRUE(op.device_reference.when(Params(p)));
  p["dtype"] = "fp32";
  p["mask"] = true;
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "a mask as drawn (with -inf entries) is read as given";
  p["masked_every"] = 3;
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "the device writes the fully masked rows, as prepare does";
  p.erase("masked_every");
  p["relation"] = "gradcheck";
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "the gradcheck relation runs on the device too";
  p.erase("relation");
  p["Sq"] = 1, p["Sk"] = 4, p["D"] = 8;
  EXPECT_FALSE(op.device_reference.when(Params(p))) << "32 units of work stay on the host";
  p["Sq"] = 4096, p["Sk"] = 512, p["D"] = 1;
  EXPECT_FALSE(op.device_reference.when(Params(p))) << "2^21 (row, key) pairs exceed the scratch cap";
  p["Sk"] = 256;
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "2^20 pairs fit";
}

}  // namespace
}  // namespace assay
