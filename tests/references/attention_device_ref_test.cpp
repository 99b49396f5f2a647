// The attention forward's device reference (references/device/attention_f64_row.h, whose
// phases the GPU kernel runs one block per query row) run on the CPU, phase by phase in the
// kernel's sequence, over the engine's own images (Q, K, V in fp32, fp16 or bf16, the mask
// fp32; offsets and padded rows included) for generated cases the device path takes, under the
// flash kernel's declared arithmetic and under fast-math with kv_tile 32: O, LSE and their
// tolerances (a narrow O's store rounding included) bit for bit equal to the host reference and
// bound (properties/attention.cpp). On the CPU both use the same exp and log, so nothing may
// differ; on the GPU only CUDA's exp and log may (attention_device_ref_gpu_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "properties/attention.h"
#include "references/device/attention_f64.h"
#include "tests/properties/model_host.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

/// The kernel's sequence of phases (attention_f64.cu) on one thread: the phases over j or c
/// as loops, the serial ones as they are, the columns' max |v| by max.
void emulate(const device_ref::AttentionF64Problem& p, const device_ref::AttentionF64Io& io) {
  std::vector<double> s(static_cast<size_t>(p.Sk)), P(s.size()), mg(s.size());
  std::vector<ref::AttnOSums> a(static_cast<size_t>(p.D));
  for (int64_t row = 0; row < p.B * p.H * p.Sq; ++row) {
    const device_ref::AttnRowCtx x = device_ref::attn_row_ctx(p, row);
    device_ref::AttnRowState st;
    st.s = s.data(), st.P = P.data(), st.mg = mg.data();
    for (int64_t j = 0; j < p.Sk; ++j) device_ref::attn_phase_score(p, io, x, st, j);
    device_ref::attn_phase_max(p, st);
    if (st.mx == -HUGE_VAL) {
      for (int64_t c = 0; c < p.D; ++c) device_ref::attn_phase_masked(p, io, x, c);
      continue;
    }
    for (int64_t j = 0; j < p.Sk; ++j) device_ref::attn_phase_exp(st, j);
    device_ref::attn_phase_z(p, st);
    for (int64_t j = 0; j < p.Sk; ++j) device_ref::attn_phase_normalise(st, j);
    device_ref::attn_phase_e(p, x, st);
    for (int64_t j = 0; j < p.Sk; ++j) device_ref::attn_phase_tol_p(x, st, j);
    device_ref::attn_phase_dw(p, st);
    double vmax = 0;
    for (int64_t c = 0; c < p.D; ++c) {
      double vm = 0;
      a[static_cast<size_t>(c)] = device_ref::attn_phase_o(p, io, x, st, c, vm);
      vmax = std::max(vmax, vm);
    }
    const ref::AttnRowBound b = device_ref::attn_phase_row(p, io, x, st, vmax);
    for (int64_t c = 0; c < p.D; ++c) device_ref::attn_phase_o_out(p, io, x, b, a[static_cast<size_t>(c)], c);
  }
}

TEST(AttentionDeviceRef, KernelPhasesAreTheHostReferenceAndBoundBitForBit) {
  const OpSpec* spec = find_spec("attention");
  const OpDef& op = test_util::model_op("attention");
  ASSERT_NE(spec, nullptr);
  ASSERT_TRUE(op.device_reference.when && op.device_reference.compute);
  const Contract flash = test_util::variant_contract("attention", "flash");
  const Contract fast = Contract().fast_math().tile("kv_tile", 32);
  int64_t cases = 0, elements = 0, masked_rows = 0, causal = 0, mask = 0, gqa = 0, padded = 0;
  int64_t per_dtype[3] = {0, 0, 0};  // fp32, fp16, bf16
  for (int64_t idx = 0; cases < 150 && idx < 20000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{9, GenConfig{128}}, idx);
    const Params prm(c.params);
    if (!op.device_reference.when(prm)) continue;
    const attention::AttnDims d = attention::dims_of(prm);
    if (d.B * d.H * d.Sq * d.Sk * d.D > (int64_t{1} << 20)) continue;  // the host reference's time
    const Contract& k = cases % 2 == 0 ? flash : fast;
    ++cases;
    ++per_dtype[d.dt == DType::kF16 ? 1 : d.dt == DType::kBF16 ? 2 : 0];
    causal += d.causal ? 1 : 0;
    mask += d.has_mask ? 1 : 0;
    gqa += d.H > d.Hkv ? 1 : 0;
    const test_util::ModelHostRun h = test_util::model_host_run(op, c, k);
    auto rows = [&](size_t t) {
      const auto& desc = c.tensors[t].desc;
      const View2D v = view_of(desc);
      padded += v.ld > v.cols ? 1 : 0;
      return device_ref::input_rows(h.images[t].data() + desc.offset * static_cast<int64_t>(dtype_size(desc.dtype)),
                                    v.cols, v.ld, desc.dtype);
    };
    const device_ref::AttentionF64Problem p = attention::attention_fwd_problem(d, k.arithmetic());
    const int64_t rows_n = d.B * d.H * d.Sq;
    std::vector<double> o_ref(static_cast<size_t>(rows_n * d.D), -1), o_tol(o_ref.size(), -1),
        l_ref(static_cast<size_t>(rows_n), -1), l_tol(l_ref.size(), -1);
    device_ref::AttentionF64Io io;
    io.q = rows(0), io.k = rows(1), io.v = rows(2), io.mask = rows(3);
    io.o_ref = o_ref.data(), io.o_tol = o_tol.data(), io.lse_ref = l_ref.data(), io.lse_tol = l_tol.data();
    emulate(p, io);
    const std::vector<double>* mine[2][2] = {{&o_ref, &o_tol}, {&l_ref, &l_tol}};
    for (size_t o = 0; o < 2; ++o)
      for (size_t l = 0; l < mine[o][0]->size(); ++l) {
        ++elements;
        const double hr = h.refs[o].ref[l], ht = h.refs[o].tol[l], vr = (*mine[o][0])[l], vt = (*mine[o][1])[l];
        if (o == 1) masked_rows += hr == -INFINITY ? 1 : 0;
        ASSERT_TRUE(same_bits(hr, vr) && same_bits(ht, vt))
            << c.summary() << (k.arithmetic().fast_math ? " (fast-math, kv_tile 32)" : " (flash)")
            << (o == 0 ? " O" : " LSE") << " element " << l << ": host " << hr << " tol " << ht << ", phases " << vr
            << " tol " << vt;
      }
  }
  EXPECT_GE(cases, 120);
  EXPECT_GT(per_dtype[0], 0);
  EXPECT_GT(per_dtype[1], 0) << "no fp16 case";
  EXPECT_GT(per_dtype[2], 0) << "no bf16 case";
  EXPECT_GT(causal, 0);
  EXPECT_GT(mask, 0);
  EXPECT_GT(gqa, 0);
  EXPECT_GT(padded, 0);
  std::printf(
      "[ measured ] attention device phases: %lld cases (fp32 %lld, fp16 %lld, bf16 %lld), %lld elements bit "
      "for bit (%lld rows fully masked by -inf mask entries)\n",
      static_cast<long long>(cases), static_cast<long long>(per_dtype[0]), static_cast<long long>(per_dtype[1]),
      static_cast<long long>(per_dtype[2]), static_cast<long long>(elements), static_cast<long long>(masked_rows));
}

TEST(AttentionDeviceRef, TakesEveryDtypeAndMaskedRows) {
  const OpDef& op = test_util::model_op("attention");
  nlohmann::json p = {{"dtype", "fp32"}, {"D", 64}, {"Hkv", 1}, {"G", 1},        {"B", 1},
                      {"Sq", 16},        {"Sk", 16}, {"causal", false}, {"mask", false}};
  EXPECT_TRUE(op.device_reference.when(Params(p)));  // 16 * 16 * 64 = 16384
  p["dtype"] = "bf16";
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "bf16 tensors are drawn on the device too";
  p["dtype"] = "fp16";
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "fp16 tensors are drawn on the device too";
  p["dtype"] = "fp32";
  p["mask"] = true;
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "a mask as drawn (with -inf entries) is read as given";
  p["masked_every"] = 2;
  EXPECT_TRUE(op.device_reference.when(Params(p))) << "the device writes the fully masked rows, as prepare does";
  p.erase("masked_every");
  p["Sq"] = 1, p["Sk"] = 4, p["D"] = 8;
  EXPECT_FALSE(op.device_reference.when(Params(p))) << "32 units of work stay on the host";
}

}  // namespace
}  // namespace assay
