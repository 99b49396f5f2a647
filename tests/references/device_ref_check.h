// Compares an op's device reference (OpDef::device_reference) with its host reference and
// bound on one case, as the engine would use either: the host side through
// test_util::model_host_run (materialise, prepare, reference, bound, NaN tolerances as
// +Inf), the device side on the same images, in each tensor's own dtype (fp32, fp16, bf16),
// uploaded byte for byte with their offsets and padded rows, outputs holding their poison. Each output's device `mag`
// holds the tolerance outright (rel_out = 0, rel_mag = 1, floor = 0), which is what the ops under test declare.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "harness/gpu/lane.h"
#include "harness/op.h"
#include "harness/op_model.h"
#include "harness/bounds.h"
#include "harness/executor.h"
#include "harness/spec.h"
#include "tests/properties/model_host.h"

namespace assay::test_util {

/// Up to `want` cases of op `name` (generated under `seed` and `max_dim`, from index 0, at most
/// `tries` of them) that the device path takes and `keep`, where given, accepts.
inline std::vector<Case> device_path_cases(const std::string& name, int want, uint64_t seed, int64_t max_dim,
                                           int64_t tries, const std::function<bool(const Params&)>& keep = {}) {
  const OpSpec* spec = find_spec(name);
  const OpDef* op = find_op(name);
  std::vector<Case> out;
  if (spec == nullptr || op == nullptr || !op->device_reference.when) return out;
  for (int64_t i = 0; static_cast<int>(out.size()) < want && i < tries; ++i) {
    Case c = generate_case(*spec, GenPlan{seed, GenConfig{max_dim}}, i);
    const Params p(c.params);
    if (op->device_reference.when(p) && (!keep || keep(p))) out.push_back(std::move(c));
  }
  return out;
}

/// Up to `want` generated cases of a row-wise op (params rows and n) that the device path takes,
/// with rows x n in [min_elems, max_elems] (max_dim 256 by default: from 1024 elements, the
/// threshold, to 65536).
inline std::vector<Case> rowwise_cases(const std::string& name, int want, uint64_t seed, int64_t max_elems = INT64_MAX,
                                       int64_t max_dim = 256, int64_t min_elems = 0) {
  return device_path_cases(name, want, seed, max_dim, 400 * int64_t{want}, [&](const Params& p) {
    const int64_t elems = p.i("rows") * p.i("n");
    return elems <= max_elems && elems >= min_elems;
  });
}

/// What one comparison found, accumulated over cases.
struct DeviceRefStats {
  int64_t cases = 0, elements = 0;
  int64_t ref_bitwise = 0, tol_bitwise = 0;  ///< elements whose device value has the host's bits
  double worst_ref = 0;  ///< max |ref_dev - ref_host| / (scale * 2^-52): fp64 ulps of the magnitude
  double worst_tol = 0;  ///< max |tol_dev - tol_host| / tol_host
  int64_t by_dtype[3] = {0, 0, 0};  ///< cases whose first tensor is fp32, fp16, bf16
  std::string summary(const std::string& op) const {
    return fmt::format(
        "{} device reference: {} cases (fp32 {}, fp16 {}, bf16 {}), {} elements; ref bitwise equal {:.4f}%, tol "
        "bitwise equal {:.4f}%; worst ref difference {:.3g} ulps of the magnitude, worst tol difference {:.3g} "
        "relative",
        op, cases, by_dtype[0], by_dtype[1], by_dtype[2], elements,
        100.0 * static_cast<double>(ref_bitwise) / static_cast<double>(std::max<int64_t>(elements, 1)),
        100.0 * static_cast<double>(tol_bitwise) / static_cast<double>(std::max<int64_t>(elements, 1)), worst_ref,
        worst_tol);
  }
};

/// One output element of both references: the same NaN / Inf pattern, |vr - hr| <= ulps * 2^-52 * m
/// (m: the element's magnitude), the tolerance vt within tol_rel of ht (+Inf and 0 alike exactly).
/// Accumulates elements, bitwise-equal counts and the worst differences into `st` (any stats type
/// with those fields); returns what differs, empty when nothing does.
template <typename Stats>
std::string compare_element(double hr, double ht, double vr, double vt, double m, double ulps, double tol_rel,
                            Stats& st) {
  ++st.elements;
  st.ref_bitwise += std::memcmp(&hr, &vr, sizeof hr) == 0 ? 1 : 0;
  st.tol_bitwise += std::memcmp(&ht, &vt, sizeof ht) == 0 ? 1 : 0;
  std::string why;
  if (std::isnan(hr) || std::isnan(vr) || std::isinf(hr) || std::isinf(vr)) {
    if (!(std::isnan(hr) && std::isnan(vr)) && hr != vr) why = "NaN/Inf pattern";
  } else {
    st.worst_ref = std::max(st.worst_ref, std::fabs(vr - hr) / (std::ldexp(m, -52) + 1e-300));
    if (!(std::fabs(vr - hr) <= ulps * std::ldexp(m, -52))) why = "reference";
  }
  if (std::isinf(ht) || std::isinf(vt) || ht == 0 || vt == 0) {
    if (ht != vt) why += " tolerance (Inf / 0)";
  } else {
    const double rel = std::fabs(vt - ht) / ht;
    st.worst_tol = std::max(st.worst_tol, rel);
    if (!(rel <= tol_rel)) why += " tolerance";
  }
  return why;
}

/// The op's host reference and bound on tensor images as they stand (each tensor's whole
/// allocation in its dtype: a device-prepared snapshot copied back), decoded as the engine
/// decodes them. `hv` views `host`; tolerances are as the bound left them (NaN included).
struct HostOnImages {
  std::vector<std::vector<double>> host;
  std::vector<HostTensor> hv;
  std::vector<OutputRef> refs;
  bool ok = false;  ///< reference and bound both returned ok
};
inline HostOnImages host_refs_on(const OpDef& op, const Case& c, const Contract& k,
                                 const std::vector<std::vector<unsigned char>>& images) {
  HostOnImages r;
  r.host.resize(c.tensors.size());
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& d = c.tensors[t].desc;
    r.host[t].resize(static_cast<size_t>(d.extent()));
    for (size_t i = 0; i < r.host[t].size(); ++i)
      r.host[t][i] = load_as_double(d.dtype, images[t].data() + i * dtype_size(d.dtype));
    r.hv.push_back({r.host[t].data() + d.offset, view_of(d)});
  }
  const Status ref = op.reference(c, r.hv, r.refs);
  EXPECT_TRUE(ref.ok()) << c.summary() << ": " << ref.message();
  const Status bound = ref.ok() ? op.bound(c, k.arithmetic(), r.hv, r.refs) : ref;
  EXPECT_TRUE(bound.ok()) << c.summary() << ": " << bound.message();
  r.ok = ref.ok() && bound.ok();
  return r;
}

/// Tensor t's view in the device-prepared image against the host prepare's: bytes equal, or one
/// unit in the last place of the dtype apart (two fp64 computations straddling a rounding
/// boundary). Counts the elements and those that moved.
inline ::testing::AssertionResult prepared_within_an_ulp(const Case& c, size_t t, const std::vector<unsigned char>& host,
                                                         const std::vector<unsigned char>& dev, int64_t& elements,
                                                         int64_t& moved) {
  const auto& desc = c.tensors[t].desc;
  const View2D v = view_of(desc);
  const size_t w = dtype_size(desc.dtype);
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t j = 0; j < v.cols; ++j) {
      const size_t at = static_cast<size_t>(desc.offset + r * v.ld + j) * w;
      ++elements;
      if (std::memcmp(dev.data() + at, host.data() + at, w) == 0) continue;
      ++moved;
      const double hv = load_as_double(desc.dtype, host.data() + at), dv = load_as_double(desc.dtype, dev.data() + at);
      if (!(std::fabs(hv - dv) <= ulp_of(std::max(std::fabs(hv), std::fabs(dv)), desc.dtype)))
        return ::testing::AssertionFailure() << c.summary() << ": prepared " << dtype_name(desc.dtype) << " "
                                             << c.tensors[t].name << " [" << r << ", " << j << "]: host " << hv
                                             << ", device " << dv;
    }
  return ::testing::AssertionSuccess();
}

/// Per output o and dense element l: the magnitude against which the two references''
/// difference is measured (the sum of |terms|), from the host run's refs (ref, aux).
using RefScale = std::function<double(size_t o, size_t l, const std::vector<OutputRef>& host)>;

/// A device reference's buffers for one case: the tensors' images uploaded whole (offsets and row
/// gaps included) and the inputs on them in OpDef order, a ref + mag pair per output, and any
/// scratch the test adds to `dev`. All of it is freed with the object, early returns included.
struct DeviceRefBuffers {
  std::vector<unsigned char*> dev;  ///< one per tensor, then scratch
  std::vector<DevTensor> in;
  std::vector<DeviceOutput> douts;

  DeviceRefBuffers() = default;
  DeviceRefBuffers(const DeviceRefBuffers&) = delete;
  DeviceRefBuffers& operator=(const DeviceRefBuffers&) = delete;
  ~DeviceRefBuffers() {
    for (auto* p : dev) cudaFree(p);
    for (const auto& o : douts) cudaFree(o.ref);
  }
};

/// Fills `b` for `c`: `images` (one per tensor) uploaded, one output buffer pair per tensor of
/// `outs`. Call through ASSERT_NO_FATAL_FAILURE: a failed allocation or copy is a fatal failure.
inline void upload_for_device_ref(const Case& c, const std::vector<std::vector<unsigned char>>& images,
                                  const std::vector<int>& outs, DeviceRefBuffers& b) {
  b.dev.assign(c.tensors.size(), nullptr);
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& d = c.tensors[t].desc;
    const size_t bytes = static_cast<size_t>(d.extent()) * dtype_size(d.dtype);
    ASSERT_GE(images[t].size(), bytes) << c.summary() << " tensor " << t;
    ASSERT_EQ(cudaMalloc(&b.dev[t], std::max<size_t>(bytes, 4)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b.dev[t], images[t].data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    b.in.push_back({b.dev[t] + d.offset * static_cast<int64_t>(dtype_size(d.dtype)), d.dtype, view_of(d), d.shape,
                    d.strides});
  }
  for (int t : outs) {
    const View2D v = view_of(c.tensors[static_cast<size_t>(t)].desc);
    DeviceOutput o;
    o.rows = v.rows, o.cols = v.cols;
    double* buf = nullptr;
    ASSERT_EQ(cudaMalloc(&buf, sizeof(double) * 2 * std::max<int64_t>(v.rows * v.cols, 1)), cudaSuccess);
    o.ref = buf, o.mag = buf + v.rows * v.cols;
    b.douts.push_back(o);
  }
}

/// Checks, while the device buffers live, what the device reference left beyond its outputs (in
/// its scratch, for the op's device-side properties) against the host run.
using DeviceCheck = std::function<void(const ModelHostRun& h, const std::vector<DevTensor>& in,
                                       const std::vector<DeviceOutput>& douts, const DeviceContext& ctx)>;

/// Runs both references on `c` under `k`'s arithmetic and checks, per output element: the same
/// NaN / Inf pattern, |ref_dev - ref_host| <= ulps * 2^-52 * scale(o, l), the tolerance within
/// `tol_rel` of the host's (+Inf and 0 alike exactly), and the same exact-tier flag; then runs
/// `device_check`. The compute gets the scratch its op asks for.
inline void check_device_reference(const OpDef& op, const Case& c, const Contract& k, double ulps, const RefScale& scale,
                                   double tol_rel, DeviceRefStats& stats, const DeviceCheck& device_check = {}) {
  ASSERT_TRUE(op.device_reference.when && op.device_reference.compute) << op.name;
  const ModelHostRun h = model_host_run(op, c, k);
  ASSERT_EQ(h.refs.size(), h.outs.size()) << c.summary();
  // The device side: the same images.
  DeviceRefBuffers b;
  ASSERT_NO_FATAL_FAILURE(upload_for_device_ref(c, h.images, h.outs, b));
  const std::vector<DevTensor>& in = b.in;
  const std::vector<DeviceOutput>& douts = b.douts;
  DeviceContext ctx;
  // A cuBLAS handle as the lane gives one (gemm_tc's products run through cuBLAS fp64): one per
  // thread, kept for the process.
  thread_local cublasHandle_t handle = nullptr;
  if (handle == nullptr) ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(handle, nullptr), CUBLAS_STATUS_SUCCESS);
  ctx.cublas = handle;
  ctx.scratch_bytes = op.device_reference.scratch ? op.device_reference.scratch(h.c) : 0;
  if (ctx.scratch_bytes > 0) {
    ASSERT_EQ(cudaMalloc(&ctx.scratch, static_cast<size_t>(ctx.scratch_bytes)), cudaSuccess);
    b.dev.push_back(ctx.scratch);  // freed with the inputs
  }
  // The host images are prepared already, and the device prepare runs on them again: the ops
  // compared through here prepare idempotently (masked or constant rows, targets, statistics
  // recomputed from the same X); those that do not (softmax_bwd, attention_bwd) have tests that
  // start from unprepared images.
  if (op.device_reference.prepare) {
    const Status p = op.device_reference.prepare(h.c, in, ctx);
    ASSERT_TRUE(p.ok()) << c.summary() << ": " << p.message();
  }
  const Status s = op.device_reference.compute(h.c, k.arithmetic(), in, b.douts, ctx);
  ASSERT_TRUE(s.ok()) << c.summary() << ": " << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.summary();
  ++stats.cases;
  const DType dt0 = c.tensors.front().desc.dtype;
  ++stats.by_dtype[dt0 == DType::kF16 ? 1 : dt0 == DType::kBF16 ? 2 : 0];
  for (size_t o = 0; o < douts.size(); ++o) {
    const DeviceOutput& d = douts[o];
    const OutputRef& r = h.refs[o];
    EXPECT_EQ(d.rel_out, 0) << "the device tolerance is meant to be computed outright";
    EXPECT_EQ(d.rel_mag, 1);
    EXPECT_EQ(d.floor, 0);
    EXPECT_EQ(d.exact, r.exact) << c.summary() << " output " << o;
    const size_t n = static_cast<size_t>(d.rows * d.cols);
    ASSERT_EQ(r.ref.size(), n) << c.summary();
    std::vector<double> dr(2 * n);
    ASSERT_EQ(cudaMemcpy(dr.data(), d.ref, sizeof(double) * 2 * n, cudaMemcpyDeviceToHost), cudaSuccess);
    int reported = 0;
    for (size_t l = 0; l < n; ++l) {
      const double hr = r.ref[l], ht = r.tol[l], vr = dr[l], vt = dr[n + l];
      const std::string why = compare_element(hr, ht, vr, vt, scale(o, l, h.refs), ulps, tol_rel, stats);
      const bool bad = !why.empty();
      if (bad) {
        ADD_FAILURE() << c.summary() << " output " << o << " element " << l << " (" << why << "): host ref " << hr
                      << " tol " << ht << ", device ref " << vr << " tol " << vt;
        if (++reported >= 5) break;
      }
    }
  }
  if (device_check) device_check(h, in, douts, ctx);
}

/// A RefScale for references that keep their terms' magnitude in aux[0] (the norms: |gamma xhat|,
/// mean |x|, backward.h's dx_mag, ...): |ref| plus it where finite, plus fp64's smallest normal
/// for zeros.
inline double ref_and_aux_magnitude(size_t o, size_t l, const std::vector<OutputRef>& h) {
  double m = std::fabs(h[o].ref[l]);
  if (!h[o].aux.empty() && l < h[o].aux[0].size() && std::isfinite(h[o].aux[0][l])) m += std::fabs(h[o].aux[0][l]);
  return m + DBL_MIN;
}

/// check_device_reference on every case under each contract (name, contract): each contract's
/// cases must span fp32, fp16 and bf16, and its figures are printed with how many cases have a
/// NaN / Inf reference or an unbounded element. Returns the least such count over the contracts.
/// `scale_for` gives each case its RefScale (one that reads the case's shape), `scale` one for all.
using CaseScale = std::function<RefScale(const Case&)>;
inline int64_t expect_device_reference_matches(const OpDef& op, const std::vector<Case>& cases,
                                               const std::vector<std::pair<const char*, Contract>>& contracts,
                                               double ulps, const CaseScale& scale_for, double tol_rel) {
  int64_t least = INT64_MAX;
  for (const auto& [what, k] : contracts) {
    DeviceRefStats st;
    int64_t nonfinite = 0;
    const DeviceCheck count = [&](const ModelHostRun& h, const std::vector<DevTensor>&,
                                  const std::vector<DeviceOutput>&, const DeviceContext&) {
      bool any = false;
      for (const OutputRef& r : h.refs)
        for (size_t l = 0; l < r.ref.size() && !any; ++l) any = !std::isfinite(r.ref[l]) || !std::isfinite(r.tol[l]);
      nonfinite += any ? 1 : 0;
    };
    for (const Case& c : cases) {
      check_device_reference(op, c, k, ulps, scale_for(c), tol_rel, st, count);
      if (::testing::Test::HasFailure()) return least;
    }
    EXPECT_GT(st.by_dtype[0], 0) << op.name << ", " << what << ": no fp32 case";
    EXPECT_GT(st.by_dtype[1], 0) << op.name << ", " << what << ": no fp16 case";
    EXPECT_GT(st.by_dtype[2], 0) << op.name << ", " << what << ": no bf16 case";
    std::printf("[ measured ] %s, contract %s: %s; %lld cases with NaN/Inf or unbounded elements\n", op.name.c_str(),
                what, st.summary(op.name).c_str(), static_cast<long long>(nonfinite));
    least = std::min(least, nonfinite);
  }
  return least;
}
inline int64_t expect_device_reference_matches(const OpDef& op, const std::vector<Case>& cases,
                                               const std::vector<std::pair<const char*, Contract>>& contracts,
                                               double ulps, const RefScale& scale, double tol_rel) {
  return expect_device_reference_matches(
      op, cases, contracts, ulps, [&](const Case&) { return scale; }, tol_rel);
}

/// The engine on `cases` (each meant for the device path): every variant passes each case
/// with the verdict naming the device reference; at least `min_verdicts` verdicts in all. Then
/// the same cases with the device reference taken out of a copy of the op (the host path) and
/// both wall times printed: what the device path saves per case on one lane.
inline void expect_engine_device_path(const OpDef& op, const std::vector<const VariantDef*>& variants,
                                      const std::vector<Case>& cases, int64_t min_verdicts) {
  for (const auto* v : variants) ASSERT_NE(v, nullptr) << op.name;
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  OpDef host_op = op;
  host_op.device_reference = DeviceReference{};
  if (!cases.empty()) {  // warm both paths up (module loads, first allocations) before timing
    ASSERT_TRUE(run_model(op, variants, cases.front(), **lane, false).ok());
    ASSERT_TRUE(run_model(host_op, variants, cases.front(), **lane, false).ok());
  }
  double seconds[2] = {0, 0};
  int64_t verdicts = 0;
  for (int path = 0; path < 2; ++path) {
    const OpDef& o = path == 0 ? op : host_op;
    const auto t0 = std::chrono::steady_clock::now();
    for (const Case& c : cases) {
      auto r = run_model(o, variants, c, **lane, false);
      ASSERT_TRUE(r.ok()) << c.summary() << ": " << r.status().message();
      for (const Verdict& v : *r) {
        if (!v.not_applicable.empty()) continue;  // outside the variant's contract: nothing ran
        EXPECT_TRUE(v.passed()) << c.summary() << " (" << (path == 0 ? "device" : "host") << " path): " << v.summary();
        EXPECT_EQ(v.metrics.reference, path == 0 ? op.device_reference.name : std::string("host-f64")) << c.summary();
        verdicts += path == 0 ? 1 : 0;
      }
    }
    seconds[path] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  EXPECT_GE(verdicts, min_verdicts);
  std::printf("[ measured ] %s on one lane, %zu cases x %zu variants: device path %.3f ms/case, host path %.3f ms/case\n",
              op.name.c_str(), cases.size(), variants.size(), 1e3 * seconds[0] / static_cast<double>(cases.size()),
              1e3 * seconds[1] / static_cast<double>(cases.size()));
}

/// The engine with one variant (a planted bug) on `cases`, each meant for the device path:
/// every verdict that ran names the device reference. Prints and returns {ran, failed}.
inline std::pair<int64_t, int64_t> run_on_device_path(const OpDef& op, const std::string& variant,
                                                      const std::vector<Case>& cases, gpu::Lane& lane) {
  const VariantDef* v = find_variant(op.name, variant);
  EXPECT_NE(v, nullptr) << op.name << " " << variant;
  int64_t ran = 0, failed = 0;
  if (v == nullptr) return {ran, failed};
  for (const Case& c : cases) {
    auto r = run_model(op, {v}, c, lane, false);
    EXPECT_TRUE(r.ok()) << c.summary() << ": " << r.status().message();
    if (!r.ok()) break;
    for (const Verdict& vd : *r) {
      if (!vd.not_applicable.empty()) continue;
      ++ran;
      failed += vd.passed() ? 0 : 1;
      EXPECT_EQ(vd.metrics.reference, op.device_reference.name) << c.summary();
    }
  }
  std::printf("[ measured ] %s on the device path: failed %lld of %lld cases\n", variant.c_str(),
              static_cast<long long>(failed), static_cast<long long>(ran));
  return {ran, failed};
}

}  // namespace assay::test_util
