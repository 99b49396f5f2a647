// The attention ops on the CPU: generated cases validate, round-trip and reach
// the edges the op declares (every dtype, causal, masks with -inf entries and
// fully masked rows, Sq = 1, lengths that are not multiples of the tiles, GQA,
// head dims other than 64 and 128, very large logits, same-sign V, per-row dO
// scaling, padding, offsets); the generator's realised mix of dtype, mask and
// causal matches the declared weights; malformed cases get a one-line error naming the
// field; shrinking gives valid smaller cases down to the smallest problem; and
// the bound accepts a float-precision host flash-attention emulation (tiles of
// 64 keys, online softmax in float; backward by the kernel's expression tree in
// float) while rejecting the planted bugs' formulas (tail guard, causal off by
// one, rescale forgotten, dV from the wrong row of dO).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "properties/attention.h"
#include "properties/gradcheck_relation.h"

namespace assay {
namespace {

int64_t attn_numel(const Case& c) {
  int64_t n = 0;
  for (const auto& t : c.tensors) n += t.desc.numel();
  return n;
}
int64_t attn_work(const Case& c) {
  const auto& p = c.params;
  return p["B"].get<int64_t>() * p["Hkv"].get<int64_t>() * p["G"].get<int64_t>() * p["Sq"].get<int64_t>() *
         p["Sk"].get<int64_t>() * p["D"].get<int64_t>();
}

class AttentionGen : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionGen, CasesValidateRoundTripAndReachTheEdges) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr) << GetParam();
  const bool fwd = GetParam() == "attention";
  const GenPlan plan{13, GenConfig{4096}};
  std::set<std::string> dtypes;
  std::set<int64_t> dims;
  bool causal = false, mask = false, masked_rows = false, neg_inf = false, sq1 = false, odd_sk = false, gqa = false,
       big = false, same_sign_v = false, row_scale = false, padded = false, offset = false, long_sk = false;
  for (int64_t i = 0; i < 300; ++i) {
    const Case c = generate_case(*spec, plan, i);
    const Status v = spec->validate(c);
    ASSERT_TRUE(v.ok()) << c.summary() << ": " << v.message();
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->id(), c.id());
    const auto& p = c.params;
    dtypes.insert(p["dtype"].get<std::string>());
    dims.insert(p["D"].get<int64_t>());
    causal |= p["causal"].get<bool>();
    mask |= p["mask"].get<bool>();
    masked_rows |= p.value("masked_every", 0) > 0;
    if (const TensorSpec* m = c.find("M"); m != nullptr && p["mask"].get<bool>()) neg_inf |= m->values.inject.active();
    sq1 |= p["Sq"].get<int64_t>() == 1;
    odd_sk |= p["Sk"].get<int64_t>() % 64 != 0 && p["Sk"].get<int64_t>() > 64;
    long_sk |= p["Sk"].get<int64_t>() > 128;
    gqa |= p["G"].get<int64_t>() > 1;
    // Very large logits: Q's small integers up to 8 (scores of tens to hundreds).
    big |= c.tensors[0].values.cls == ValueClass::kSmallInt && c.tensors[0].values.int_range >= 8;
    same_sign_v |= c.tensors[2].values.cls == ValueClass::kSameSign;
    row_scale |= p.value("do_row_scale", false);
    const auto& d0 = c.tensors[0].desc;
    padded |= Layout::pad_of(d0) > 0;
    offset |= d0.offset != 0;
    if (i < 40)
      for (const Case& s : spec->shrink(c)) {
        const Status sv = spec->validate(s);
        EXPECT_TRUE(sv.ok()) << s.summary() << ": " << sv.message();
        EXPECT_LE(attn_numel(s), attn_numel(c)) << s.summary();
        EXPECT_NE(s.id(), c.id()) << "shrink proposed the case itself: " << s.summary();
      }
  }
  EXPECT_EQ(dtypes.size(), 3u);
  EXPECT_TRUE(dims.count(64) && dims.count(128));
  EXPECT_GE(dims.size(), 4u);
  EXPECT_TRUE(causal && mask && masked_rows && neg_inf && sq1 && odd_sk && long_sk && gqa && big && same_sign_v &&
              padded && offset)
      << causal << mask << masked_rows << neg_inf << sq1 << odd_sk << long_sk << gqa << big << same_sign_v << padded
      << offset;
  if (!fwd) {
    EXPECT_TRUE(row_scale);
  }
}

TEST_P(AttentionGen, ShrinkEndsAtTheSmallestProblem) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr);
  for (int64_t idx : {3, 17, 29}) {
    Case c = generate_case(*spec, GenPlan{5, GenConfig{4096}}, idx);
    for (int step = 0; step < 300; ++step) {
      const auto s = spec->shrink(c);
      if (s.empty()) break;
      ASSERT_TRUE(spec->validate(s.front()).ok());
      c = s.front();
    }
    for (const char* k : {"B", "Hkv", "G", "Sq", "Sk", "D"}) EXPECT_EQ(c.params[k].get<int64_t>(), 1) << c.summary();
    EXPECT_FALSE(c.params["causal"].get<bool>());
    EXPECT_FALSE(c.params["mask"].get<bool>());
  }
}

TEST_P(AttentionGen, MalformedCasesGetOneLineErrorsNamingTheField) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr);
  Case good = generate_case(*spec, GenPlan{3, GenConfig{64}}, 0);
  ASSERT_TRUE(spec->validate(good).ok());
  auto expect_error = [&](const std::function<void(Case&)>& edit, const std::string& needle) {
    Case c = good;
    edit(c);
    const Status s = spec->validate(c);
    EXPECT_FALSE(s.ok()) << "accepted a case with a bad " << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  };
  expect_error([](Case& c) { c.params.erase("dtype"); }, "dtype");
  expect_error([](Case& c) { c.params["dtype"] = "int8"; }, "dtype");
  expect_error([](Case& c) { c.params["D"] = 129; }, "params.D");
  expect_error([](Case& c) { c.params["D"] = 0; }, "params.D");
  expect_error([](Case& c) { c.params["Sq"] = 0; }, "params.Sq");
  expect_error([](Case& c) { c.params["Sk"] = 5000; }, "params.Sk");
  expect_error([](Case& c) { c.params["G"] = 0; }, "params.G");
  expect_error([](Case& c) { c.params["H"] = 2; }, "unknown param 'H'");  // H = Hkv G
  expect_error([](Case& c) { c.params["causal"] = 1; }, "params.causal");
  expect_error([](Case& c) { c.params["scale"] = -1.0; }, "params.scale");
  expect_error([](Case& c) { c.params["mask"] = false, c.params["masked_every"] = 2; }, "masked_every");
  expect_error([](Case& c) { c.params["relation"] = "shift"; }, "relation");
  expect_error([](Case& c) { c.tensors.pop_back(); }, "tensors, expected");
  expect_error([](Case& c) { c.tensors[0].name = "X"; }, "tensor 0");
  expect_error([](Case& c) { c.tensors[1].desc.shape[0] += 1; }, "tensor K");
  expect_error(
      [](Case& c) { c.tensors[0].desc.dtype = c.tensors[0].desc.dtype == DType::kF32 ? DType::kF16 : DType::kF32; },
      "tensor Q");
  expect_error([](Case& c) { c.params["Sk"] = c.params["Sk"].get<int64_t>() + 1; }, "tensor K");
  if (GetParam() == "attention") {
    expect_error([](Case& c) { c.params["do_row_scale"] = true; }, "do_row_scale");
  } else {
    expect_error([](Case& c) { c.params["do_row_scale"] = "yes"; }, "do_row_scale");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionGen, ::testing::Values("attention", "attention_bwd"));

// ---- host emulation: the testbed's reference side and its device check -----------------------

struct AttnHostRun {
  std::vector<std::vector<unsigned char>> bytes;
  std::vector<unsigned char*> img;
  std::vector<std::vector<double>> dec;
  std::vector<HostTensor> hv;
  std::vector<OutputRef> refs;
};

/// prepare, reference and bound of `op` as the engine runs them, under the arithmetic the
/// "flash" variant declares (its key tile).
void run_reference(const std::string& op, const Case& c, AttnHostRun& h, bool narrow_p = false) {
  const OpDef& def = *find_op(op);
  Arithmetic arith = find_variant(op, "flash")->contract.arithmetic();
  arith.narrow_intermediates = narrow_p;
  h.bytes.assign(c.tensors.size(), {});
  h.img.clear();
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& s = c.tensors[t];
    h.bytes[t].resize(static_cast<size_t>(s.desc.extent()) * dtype_size(s.desc.dtype) + 16);
    h.img.push_back(h.bytes[t].data());
    if (s.role == Role::kOut)
      materialize_output(s.desc, h.img.back());
    else
      materialize(s.desc, s.values, fnv1a64(s.name.data(), s.name.size()), h.img.back());
  }
  if (def.prepare) def.prepare(c, h.img);
  h.dec.assign(c.tensors.size(), {});
  h.hv.clear();
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& d = c.tensors[t].desc;
    h.dec[t].resize(static_cast<size_t>(d.extent()));
    for (int64_t i = 0; i < d.extent(); ++i)
      h.dec[t][static_cast<size_t>(i)] =
          load_as_double(d.dtype, h.img[t] + static_cast<size_t>(i) * dtype_size(d.dtype));
    h.hv.push_back({h.dec[t].data() + d.offset, view_of(d)});
  }
  const Status st = def.reference(c, h.hv, h.refs);
  ASSERT_TRUE(st.ok()) << st.message();
  const Status sb = def.bound(c, arith, h.hv, h.refs);
  ASSERT_TRUE(sb.ok()) << sb.message();
}

/// Elements the device check would flag (value beyond tolerance, NaN/Inf pattern); got dense.
int64_t attn_violations(const OutputRef& r, const std::vector<double>& got, std::string* first = nullptr) {
  int64_t bad = 0;
  for (size_t l = 0; l < got.size(); ++l) {
    const double o = got[l], ref = r.ref[l], tol = r.tol[l];
    bool b;
    if (std::isnan(ref))
      b = !std::isnan(o);
    else if (std::isinf(ref))
      b = !(std::isinf(o) && std::signbit(o) == std::signbit(ref));
    else if (!(tol < INFINITY))
      b = false;
    else
      b = !(std::fabs(o - ref) <= tol);
    if (b && bad++ == 0 && first != nullptr)
      *first = fmt::format("element {}: got {:.9g}, reference {:.9g}, tolerance {:.3g}", l, o, ref, tol);
  }
  return bad;
}

double stored_as(DType t, float y) {
  unsigned char buf[8];
  store_as(t, static_cast<double>(y), buf);
  return load_as_double(t, buf);
}

struct Dims {
  int64_t B, H, Hkv, Sq, Sk, D;
  bool causal, mask;
  float scale;
  DType dt;
};
Dims dims(const Case& c) {
  const auto& p = c.params;
  Dims d{p["B"].get<int64_t>(),
         p["Hkv"].get<int64_t>() * p["G"].get<int64_t>(),
         p["Hkv"].get<int64_t>(),
         p["Sq"].get<int64_t>(),
         p["Sk"].get<int64_t>(),
         p["D"].get<int64_t>(),
         p["causal"].get<bool>(),
         p["mask"].get<bool>(),
         0.f,
         *parse_dtype(p["dtype"].get<std::string>())};
  d.scale = static_cast<float>(p.value("scale", 1.0 / std::sqrt(static_cast<double>(d.D))));
  return d;
}

enum class FwdBug { kNone, kTailGuard, kCausalOffByOne, kNoRescale };

/// The forward kernel's arithmetic in float on the host: serial FMA dot products, tiles of 64
/// keys, online max/sum with one rescale per tile, o * (1/l), m + logf(l). Dense O and LSE.
/// max_rise (may be null): the largest rise of a row's running max after its first tile with a
/// visible key (what the rescale bug needs).
void emulate_fwd(const Case& c, const std::vector<HostTensor>& t, FwdBug bug, std::vector<double>& O,
                 std::vector<double>& LSE, double* max_rise = nullptr, bool narrow_p = false) {
  const Dims d = dims(c);
  const HostTensor &q = t[0], &k = t[1], &v = t[2];
  const HostTensor* m = d.mask ? &t[3] : nullptr;
  const int64_t G = d.H / d.Hkv, T = 64;
  O.assign(static_cast<size_t>(d.B * d.H * d.Sq * d.D), 0.0);
  LSE.assign(static_cast<size_t>(d.B * d.H * d.Sq), 0.0);
  std::vector<float> o(static_cast<size_t>(d.D)), p(static_cast<size_t>(T));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + h) * d.Sq + i, kb = (b * d.Hkv + h / G) * d.Sk;
        float mx = -INFINITY, l = 0;
        std::fill(o.begin(), o.end(), 0.f);
        const int64_t tiles = (d.Sk + T - 1) / T;
        for (int64_t t0 = 0; t0 < tiles * T; t0 += T) {
          float tmax = -INFINITY;
          std::vector<float> s(static_cast<size_t>(T), -INFINITY);
          for (int64_t jl = 0; jl < T; ++jl) {
            const int64_t j = t0 + jl;
            const bool causal_ok = !d.causal || j <= i + (bug == FwdBug::kCausalOffByOne ? 1 : 0);
            if (j >= d.Sk) {
              if (bug == FwdBug::kTailGuard && causal_ok) s[static_cast<size_t>(jl)] = 0.f;  // a zero key beyond Sk
              continue;
            }
            if (!causal_ok) continue;
            float acc = 0.f;
            for (int64_t cc = 0; cc < d.D; ++cc)
              acc = std::fma(static_cast<float>(q.at(row, cc)), static_cast<float>(k.at(kb + j, cc)), acc);
            float x = acc * d.scale;
            if (m != nullptr) x = x + static_cast<float>(m->at(i, j));
            s[static_cast<size_t>(jl)] = x;
          }
          for (float x : s) tmax = std::max(tmax, x);
          const float mn = std::max(mx, tmax);
          float alpha = 1.f;
          float tsum = 0.f;
          for (int64_t jl = 0; jl < T; ++jl) p[static_cast<size_t>(jl)] = 0.f;
          if (mn != -INFINITY) {
            alpha = bug == FwdBug::kNoRescale ? 1.f : std::exp(mx - mn);
            for (int64_t jl = 0; jl < T; ++jl) {
              p[static_cast<size_t>(jl)] = std::exp(s[static_cast<size_t>(jl)] - mn);
              tsum += p[static_cast<size_t>(jl)];
            }
          }
          l = l * alpha + tsum;
          if (max_rise != nullptr && mx != -INFINITY) *max_rise = std::max(*max_rise, static_cast<double>(mn - mx));
          mx = mn;
          for (int64_t cc = 0; cc < d.D; ++cc) {
            float acc = o[static_cast<size_t>(cc)] * alpha;
            for (int64_t jl = 0; jl < T; ++jl) {
              const int64_t j = t0 + jl;
              const float vv = j < d.Sk ? static_cast<float>(v.at(kb + j, cc)) : 0.f;
              // narrow_p: P in the data's dtype for the P V product (FlashAttention-2's order).
              const float pj =
                  narrow_p ? static_cast<float>(stored_as(d.dt, p[static_cast<size_t>(jl)])) : p[static_cast<size_t>(jl)];
              acc = std::fma(pj, vv, acc);
            }
            o[static_cast<size_t>(cc)] = acc;
          }
        }
        const bool any = l > 0.f;
        const float inv = any ? 1.f / l : 0.f;
        for (int64_t cc = 0; cc < d.D; ++cc)
          O[static_cast<size_t>(row * d.D + cc)] = stored_as(d.dt, any ? o[static_cast<size_t>(cc)] * inv : 0.f);
        LSE[static_cast<size_t>(row)] = any ? static_cast<double>(mx + std::log(l)) : -INFINITY;
      }
}

/// The backward kernels' arithmetic in float: D_i, s, dP serial FMA; p = exp(s*scale + mask - LSE);
/// dS = p (dP - D); dV, dK over the group's query rows in order, dQ over keys in order.
void emulate_bwd(const Case& c, const std::vector<HostTensor>& t, bool dv_wrong_row, std::vector<double>& dQ,
                 std::vector<double>& dK, std::vector<double>& dV) {
  const Dims d = dims(c);
  const HostTensor &q = t[0], &k = t[1], &v = t[2], &o = t[3], &g = t[4], &lse = t[5];
  const HostTensor* m = d.mask ? &t[6] : nullptr;
  const int64_t G = d.H / d.Hkv, qr = d.B * d.H * d.Sq, kr = d.B * d.Hkv * d.Sk, D = d.D;
  std::vector<float> fq(static_cast<size_t>(qr * D), 0.f), fk(static_cast<size_t>(kr * D), 0.f),
      fv(static_cast<size_t>(kr * D), 0.f), Di(static_cast<size_t>(qr));
  for (int64_t row = 0; row < qr; ++row) {
    float acc = 0.f;
    for (int64_t cc = 0; cc < D; ++cc)
      acc = std::fma(static_cast<float>(g.at(row, cc)), static_cast<float>(o.at(row, cc)), acc);
    Di[static_cast<size_t>(row)] = acc;
  }
  auto p_ds = [&](int64_t row, int64_t i, int64_t kj, int64_t j, float& p, float& ds) {
    const float L = static_cast<float>(lse.data[row]);
    p = ds = 0.f;
    if (L == -INFINITY || (d.causal && j > i)) return;
    float s = 0.f, dp = 0.f;
    for (int64_t cc = 0; cc < D; ++cc) {
      s = std::fma(static_cast<float>(q.at(row, cc)), static_cast<float>(k.at(kj, cc)), s);
      dp = std::fma(static_cast<float>(g.at(row, cc)), static_cast<float>(v.at(kj, cc)), dp);
    }
    float x = s * d.scale;
    if (m != nullptr) x = x + static_cast<float>(m->at(i, j));
    p = std::exp(x - L);
    ds = p * (dp - Di[static_cast<size_t>(row)]);
  };
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t hk = 0; hk < d.Hkv; ++hk)
      for (int64_t j = 0; j < d.Sk; ++j) {
        const int64_t kj = (b * d.Hkv + hk) * d.Sk + j;
        for (int64_t hh = 0; hh < G; ++hh) {
          const int64_t h = hk * G + hh;
          for (int64_t i = 0; i < d.Sq; ++i) {
            const int64_t row = (b * d.H + h) * d.Sq + i;
            float p, ds;
            p_ds(row, i, kj, j, p, ds);
            // The mutant reads the next staged row of the 32-row tile (zeros past Sq).
            const int64_t i2 = (i / 32) * 32 + (i % 32 + 1) % 32;
            for (int64_t cc = 0; cc < D; ++cc) {
              const float gdo = dv_wrong_row ? (i2 < d.Sq ? static_cast<float>(g.at(row - i + i2, cc)) : 0.f)
                                             : static_cast<float>(g.at(row, cc));
              fv[static_cast<size_t>(kj * D + cc)] = std::fma(p, gdo, fv[static_cast<size_t>(kj * D + cc)]);
              fk[static_cast<size_t>(kj * D + cc)] =
                  std::fma(ds, static_cast<float>(q.at(row, cc)), fk[static_cast<size_t>(kj * D + cc)]);
            }
          }
        }
      }
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t i = 0; i < d.Sq; ++i) {
        const int64_t row = (b * d.H + h) * d.Sq + i;
        for (int64_t j = 0; j < d.Sk; ++j) {
          const int64_t kj = (b * d.Hkv + h / G) * d.Sk + j;
          float p, ds;
          p_ds(row, i, kj, j, p, ds);
          for (int64_t cc = 0; cc < D; ++cc)
            fq[static_cast<size_t>(row * D + cc)] =
                std::fma(ds, static_cast<float>(k.at(kj, cc)), fq[static_cast<size_t>(row * D + cc)]);
        }
      }
  dQ.resize(fq.size());
  dK.resize(fk.size());
  dV.resize(fv.size());
  for (size_t l = 0; l < fq.size(); ++l) dQ[l] = stored_as(d.dt, fq[l] * d.scale);
  for (size_t l = 0; l < fk.size(); ++l) dK[l] = stored_as(d.dt, fk[l] * d.scale);
  for (size_t l = 0; l < fv.size(); ++l) dV[l] = stored_as(d.dt, fv[l]);
}

constexpr int64_t kEmuWork = int64_t{1} << 21;

TEST(AttentionBound, AcceptsFloatFlashEmulationAndRejectsTheMutantFormulas) {
  const OpSpec* spec = find_spec("attention");
  ASSERT_NE(spec, nullptr);
  int64_t checked = 0, tail_exposed = 0, tail_caught = 0, causal_exposed = 0, causal_caught = 0, resc_exposed = 0,
          resc_caught = 0;
  double worst = 0;
  for (int64_t idx = 0; checked < 120 && idx < 2000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{21, GenConfig{512}}, idx);
    if (attn_work(c) > kEmuWork) continue;
    ++checked;
    AttnHostRun h;
    ASSERT_NO_FATAL_FAILURE(run_reference("attention", c, h));
    std::vector<double> O, L;
    double rise = 0;
    emulate_fwd(c, h.hv, FwdBug::kNone, O, L, &rise);
    std::string first;
    ASSERT_EQ(attn_violations(h.refs[0], O, &first), 0) << c.summary() << " O: " << first;
    ASSERT_EQ(attn_violations(h.refs[1], L, &first), 0) << c.summary() << " LSE: " << first;
    for (size_t l = 0; l < O.size(); ++l)
      if (h.refs[0].tol[l] > 0 && std::isfinite(h.refs[0].tol[l]))
        worst = std::max(worst, std::fabs(O[l] - h.refs[0].ref[l]) / h.refs[0].tol[l]);
    const Dims d = dims(c);
    auto caught = [&](FwdBug bug) {
      emulate_fwd(c, h.hv, bug, O, L);
      return attn_violations(h.refs[0], O) + attn_violations(h.refs[1], L) > 0;
    };
    if (d.Sk % 64 != 0 && !d.causal && !d.mask) {
      ++tail_exposed;
      const bool k = caught(FwdBug::kTailGuard);
      tail_caught += k;
    }
    if (d.causal && d.Sk >= 2 && d.Sq >= 2 && !d.mask) {
      ++causal_exposed;
      causal_caught += caught(FwdBug::kCausalOffByOne);
    }
    if (rise > 0.05) {  // a later tile raised some row's max by a visible amount
      ++resc_exposed;
      resc_caught += caught(FwdBug::kNoRescale);
    }
  }
  std::printf(
      "[ measured ] attention emulation: %lld cases, worst |O - ref| / tol = %.3g; caught: tail %lld/%lld, "
      "causal %lld/%lld, rescale %lld/%lld\n",
      static_cast<long long>(checked), worst, static_cast<long long>(tail_caught), static_cast<long long>(tail_exposed),
      static_cast<long long>(causal_caught), static_cast<long long>(causal_exposed),
      static_cast<long long>(resc_caught), static_cast<long long>(resc_exposed));
  EXPECT_GE(checked, 100);
  EXPECT_GT(tail_exposed, 5);
  EXPECT_GT(causal_exposed, 5);
  EXPECT_GT(resc_exposed, 5);
  // A leaked future key shifts softmax weight by O(1): all caught. The emulated tail keys score 0
  // (zero keys), so with very large logits (max score >> 1) their weight vanishes: most, not all.
  EXPECT_EQ(causal_caught, causal_exposed);
  EXPECT_GE(tail_caught * 4, tail_exposed * 3);
  EXPECT_GE(resc_caught * 10, resc_exposed * 8);
}

// P rounded to fp16/bf16 before P V (narrow_intermediates: references/host/attention.h
// AttnNarrowP): the emulated kernel with that order stays inside the ceiling it declares, and
// outside the fp32-P ceiling on some elements, which is why the model is needed.
TEST(AttentionBound, NarrowPHoldsTheRoundedProbabilitiesOrder) {
  const OpSpec* spec = find_spec("attention");
  ASSERT_NE(spec, nullptr);
  int64_t checked = 0, elements = 0, beyond_plain = 0;
  double worst = 0;
  for (int64_t idx = 0; checked < 120 && idx < 4000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{23, GenConfig{256}}, idx);
    if (attn_work(c) > kEmuWork || dims(c).dt == DType::kF32) continue;
    ++checked;
    AttnHostRun plain, narrow;
    ASSERT_NO_FATAL_FAILURE(run_reference("attention", c, plain));
    ASSERT_NO_FATAL_FAILURE(run_reference("attention", c, narrow, true));
    std::vector<double> O, L;
    emulate_fwd(c, narrow.hv, FwdBug::kNone, O, L, nullptr, true);
    std::string first;
    ASSERT_EQ(attn_violations(narrow.refs[0], O, &first), 0) << c.summary() << " O: " << first;
    for (size_t l = 0; l < O.size(); ++l) {
      const double ref = narrow.refs[0].ref[l], tol = narrow.refs[0].tol[l];
      if (!std::isfinite(ref) || !(tol > 0) || !std::isfinite(tol)) continue;
      ++elements;
      ASSERT_GE(tol, plain.refs[0].tol[l]) << c.summary();
      worst = std::max(worst, std::fabs(O[l] - ref) / tol);
      beyond_plain += std::fabs(O[l] - ref) > plain.refs[0].tol[l] ? 1 : 0;
    }
  }
  std::printf("[ measured ] attention with P rounded to fp16/bf16: %lld cases, %lld elements, worst |O - ref| / tol "
              "%.3g, %lld beyond the fp32-P ceiling\n",
              static_cast<long long>(checked), static_cast<long long>(elements), worst,
              static_cast<long long>(beyond_plain));
  EXPECT_GE(checked, 100);
  EXPECT_GT(beyond_plain, 0) << "the emulation never leaves the fp32-P ceiling: it does not exercise the model";
}

TEST(AttentionBound, BackwardAcceptsFloatEmulationAndRejectsTheWrongDoRow) {
  const OpSpec* spec = find_spec("attention_bwd");
  ASSERT_NE(spec, nullptr);
  int64_t checked = 0, exposed = 0, caught = 0;
  double worst = 0;
  for (int64_t idx = 0; checked < 80 && idx < 2000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{23, GenConfig{512}}, idx);
    if (attn_work(c) > kEmuWork / 2) continue;
    ++checked;
    AttnHostRun h;
    ASSERT_NO_FATAL_FAILURE(run_reference("attention_bwd", c, h));
    std::vector<double> dQ, dK, dV;
    emulate_bwd(c, h.hv, false, dQ, dK, dV);
    std::string first;
    ASSERT_EQ(attn_violations(h.refs[0], dQ, &first), 0) << c.summary() << " dQ: " << first;
    ASSERT_EQ(attn_violations(h.refs[1], dK, &first), 0) << c.summary() << " dK: " << first;
    ASSERT_EQ(attn_violations(h.refs[2], dV, &first), 0) << c.summary() << " dV: " << first;
    for (size_t l = 0; l < dV.size(); ++l)
      if (h.refs[2].tol[l] > 0 && std::isfinite(h.refs[2].tol[l]))
        worst = std::max(worst, std::fabs(dV[l] - h.refs[2].ref[l]) / h.refs[2].tol[l]);
    const Dims d = dims(c);
    if (!d.mask) {
      ++exposed;
      emulate_bwd(c, h.hv, true, dQ, dK, dV);
      caught += attn_violations(h.refs[2], dV) > 0;
    }
  }
  std::printf(
      "[ measured ] attention_bwd emulation: %lld cases, worst |dV - ref| / tol = %.3g; dV wrong row caught "
      "%lld/%lld\n",
      static_cast<long long>(checked), worst, static_cast<long long>(caught), static_cast<long long>(exposed));
  EXPECT_GE(checked, 60);
  EXPECT_GT(exposed, 10);
  EXPECT_GE(caught * 10, exposed * 9);
}

// relation "gradcheck": the properties hook on host data. A float emulation of the correct
// backward passes the finite-difference projection check; dV read from the wrong row of dO fails it.
// The projection <dO, J u> is one scalar: the wrong-row signal sum_l u_l (g' - g)_l grows like
// sqrt(n) times a typical per-element difference while its allowance sum_l |u_l| tol_l grows
// like n times the per-element tolerance, so it has less power than the element-wise ceiling
// (which catches this mutant in 25 of 26 cases, AttentionBound above). Its role is an
// independent check of the gradients against the fp64 forward, not against the host backward:
// it must never fire on a correct backward, and must fire on a wrong one in a fair share of cases.
TEST(AttentionGradcheck, ProjectionPassesTheFloatBackwardAndCatchesTheWrongDoRow) {
  const OpSpec* spec = find_spec("attention_bwd");
  ASSERT_NE(spec, nullptr);
  const OpDef& def = *find_op("attention_bwd");
  ASSERT_TRUE(static_cast<bool>(def.properties));
  int64_t generated = 0, checked = 0, exposed = 0, caught = 0;
  for (int64_t idx = 0; checked < 60 && idx < 1000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{29, GenConfig{512}}, idx);
    ++generated;
    if (!wants_gradcheck(c)) continue;
    ASSERT_LE(attn_work(c), int64_t{1} << 16) << c.summary();
    ++checked;
    AttnHostRun h;
    ASSERT_NO_FATAL_FAILURE(run_reference("attention_bwd", c, h));
    const Dims d = dims(c);
    const int64_t qr = d.B * d.H * d.Sq, kr = d.B * d.Hkv * d.Sk;
    auto run = [&](bool wrong) {
      std::vector<double> dQ, dK, dV;
      emulate_bwd(c, h.hv, wrong, dQ, dK, dV);
      const std::vector<HostTensor> out = {{dQ.data(), {qr, d.D, d.D}}, {dK.data(), {kr, d.D, d.D}},
                                           {dV.data(), {kr, d.D, d.D}}};
      std::vector<Failure> f;
      def.properties(c, h.hv, out, h.refs, f);
      return f;
    };
    const auto good = run(false);
    EXPECT_TRUE(good.empty()) << c.summary() << ": " << good.front().detail;
    // The mutant differs when some group's query rows see different dO rows: Sq >= 2.
    if (d.Sq >= 2) {
      ++exposed;
      const auto bad = run(true);
      caught += !bad.empty() && bad.front().kind == FailureKind::kProjection;
      if (exposed == 1 && !bad.empty()) std::printf("[ measured ] e.g. %s\n", bad.front().detail.c_str());
    }
  }
  std::printf("[ measured ] attention_bwd gradcheck: %lld of the first %lld cases; wrong dO row caught %lld/%lld\n",
              static_cast<long long>(checked), static_cast<long long>(generated), static_cast<long long>(caught),
              static_cast<long long>(exposed));
  EXPECT_GE(checked, 40);
  EXPECT_GT(exposed, 10);
  EXPECT_GE(caught * 4, exposed);
}

TEST(AttentionGradcheck, CampaignOf320CasesCarriesAQuarterAsGradcheck) {
  const OpSpec* spec = find_spec("attention_bwd");
  ASSERT_NE(spec, nullptr);
  int64_t n = 0;
  for (int64_t i = 0; i < 320; ++i) {
    const Case c = generate_case(*spec, GenPlan{1, GenConfig{1024}}, i);  // the GPU campaign's plan
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary();
    if (wants_gradcheck(c)) {
      ++n;
      EXPECT_LE(attn_work(c), int64_t{1} << 16) << c.summary();
    }
  }
  std::printf("[ measured ] attention_bwd: %lld gradcheck cases in the 320-case campaign (seed 1)\n",
              static_cast<long long>(n));
  EXPECT_GE(n, 50);
  EXPECT_LE(n, 110);
  const OpSpec* fwd = find_spec("attention");
  Case c = generate_case(*fwd, GenPlan{1, GenConfig{64}}, 0);
  c.params["relation"] = "gradcheck";
  EXPECT_FALSE(fwd->validate(c).ok());
}

TEST(AttentionBound, FullyMaskedRowsGiveZeroOutputAndMinusInfLse) {
  const OpSpec* spec = find_spec("attention");
  for (int64_t idx = 0; idx < 3000; ++idx) {
    const Case c = generate_case(*spec, GenPlan{31, GenConfig{256}}, idx);
    if (c.params.value("masked_every", 0) == 0 || attn_work(c) > kEmuWork) continue;
    AttnHostRun h;
    ASSERT_NO_FATAL_FAILURE(run_reference("attention", c, h));
    const Dims d = dims(c);
    const int64_t every = c.params["masked_every"].get<int64_t>();
    for (int64_t row = 0; row < d.B * d.H * d.Sq; ++row) {
      if ((row % d.Sq) % every != 0) continue;
      EXPECT_EQ(h.refs[1].ref[static_cast<size_t>(row)], -INFINITY);
      for (int64_t cc = 0; cc < d.D; ++cc) {
        EXPECT_EQ(h.refs[0].ref[static_cast<size_t>(row * d.D + cc)], 0.0);
        EXPECT_EQ(h.refs[0].tol[static_cast<size_t>(row * d.D + cc)], 0.0);
      }
    }
    return;
  }
  FAIL() << "no case with fully masked rows";
}

// The generator's realised mix against the declared weights (dtype fp32 2/10, mask 3/10, causal
// 2/5), drawn straight through the op's generator at every RapidCheck size: the draws are by
// weight, not by a size-scaled range. Both square (Sq == Sk) and non-square shapes appear.
TEST(AttentionGen, RealisedMixMatchesTheDeclaredWeights) {
  const OpSpec* spec = find_spec("attention");
  ASSERT_NE(spec, nullptr);
  const rc::Gen<Case> gen = spec->generator(GenConfig{});
  constexpr int kN = 5000;
  int fp32 = 0, mask = 0, causal = 0, square = 0, non_square = 0;
  for (int i = 0; i < kN; ++i) {
    const Case c = gen(rc::Random(0x5eed0000u + static_cast<uint64_t>(i)), i % 100).value();
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary();
    const auto& p = c.params;
    fp32 += p["dtype"].get<std::string>() == "fp32";
    mask += p["mask"].get<bool>();
    causal += p["causal"].get<bool>();
    (p["Sq"].get<int64_t>() == p["Sk"].get<int64_t>() ? square : non_square) += 1;
  }
  const double n = kN;
  std::printf("[ measured ] attention mix over %d cases: fp32 %.3f, mask %.3f, causal %.3f; Sq == Sk %d, Sq != Sk %d\n",
              kN, fp32 / n, mask / n, causal / n, square, non_square);
  EXPECT_NEAR(fp32 / n, 0.2, 0.03);
  EXPECT_NEAR(mask / n, 0.3, 0.03);
  EXPECT_NEAR(causal / n, 0.4, 0.03);
  EXPECT_GT(square, 0);
  EXPECT_GT(non_square, 0);
}

}  // namespace
}  // namespace assay
