// The one checking pipeline of the op model. Per case: tensors laid out with
// guard bands, inputs materialised from their recipes (outputs poisoned),
// the op's prepare, the fp64 reference and the bound under each variant's
// declared arithmetic. Per variant: two launches from the same snapshot, one
// device check each (guards, inputs untouched, poison, gaps, every output
// against reference +- tolerance, the NaN/Inf pattern, the exact tier, a
// bitwise rerun for deterministic variants); then the op's host-side
// properties and metamorphic relations for cases that name one. A variant's
// contract can change the setup (accumulated outputs are prefilled and the
// expectation becomes prefill + reference; partly written outputs are checked
// where written; conventions reach the op's hooks through params.conventions),
// so the setup is rebuilt when it differs from the previous variant's.
#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/values.h"

namespace assay {
namespace {

int64_t round256(int64_t b) {
  return (b + 255) / 256 * 256;
}

std::vector<double> decode(DType t, const unsigned char* image, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  const size_t es = dtype_size(t);
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = load_as_double(t, image + static_cast<size_t>(i) * es);
  return v;
}

std::string where(const View2D& v, int64_t idx) {
  const int64_t cols = std::max<int64_t>(v.cols, 1);
  return v.rows <= 1 ? fmt::format("[{}]", idx) : fmt::format("[{}][{}]", idx / cols, idx % cols);
}

/// A NaN tolerance comes from a bound with no finite value (an infinite coefficient times a
/// zero magnitude): no bound, as +Inf says.
void unbounded_where_nan(std::vector<OutputRef>& refs) {
  for (auto& r : refs)
    for (double& t : r.tol)
      if (std::isnan(t)) t = INFINITY;
}

/// What a variant's contract changes in the setup of a case.
std::string setup_key(const Contract& k) {
  std::string s;
  for (const auto& c : k.conventions()) s += "c:" + c + ";";
  for (const auto& a : k.accumulated()) s += "a:" + a + ";";
  for (const auto& p : k.partial()) s += "p:" + p.tensor + ":" + p.what + ";";
  return s + "m:" + k.arithmetic().describe();
}

/// The case as the op's hooks see it for a variant: its conventions in params.conventions.
Case with_conventions(const Case& c, const Contract& k) {
  Case x = c;
  if (!k.conventions().empty()) x.params["conventions"] = k.conventions();
  return x;
}

/// Everything computed before a variant launches; shared by variants with the same setup key.
struct Setup {
  std::string key;
  Case c;                           ///< with the variant's conventions
  std::vector<int> outs;            ///< tensor indices of outputs
  std::vector<View2D> views;
  std::vector<int64_t> ref_off, save_off;
  std::vector<unsigned char*> images;
  std::vector<std::vector<double>> host;
  std::vector<HostTensor> hv;
  std::vector<OutputRef> refs, refs2;
  std::vector<std::vector<unsigned char>> timages;
  std::vector<gpu::DevCompare> cmp;
  bool transformed = false;
};

Status compute_refs(const OpDef& op, const Case& c, const Arithmetic& arith, const std::vector<HostTensor>& hv,
                    std::vector<OutputRef>& refs) {
  refs.clear();
  ASSAY_RETURN_IF_ERROR(op.reference(c, hv, refs));
  if (op.bound) ASSAY_RETURN_IF_ERROR(op.bound(c, arith, hv, refs));
  unbounded_where_nan(refs);
  return ok_status();
}

Status build_setup(const OpDef& op, const VariantDef& v, const Case& c0, gpu::Lane& lane, Setup& s) {
  const Contract& k = v.contract;
  s = Setup{};
  s.key = setup_key(k);
  s.c = with_conventions(c0, k);
  const Case& c = s.c;
  const auto& T = c.tensors;
  const int nt = static_cast<int>(T.size());
  if (2 * nt + 1 > gpu::kMaxRegions) return invalid_argument(fmt::format("{}: too many tensors ({})", op.name, nt));
  for (int t = 0; t < nt; ++t)
    if (T[t].role != Role::kIn) s.outs.push_back(t);
  if (s.outs.empty() || s.outs.size() > static_cast<size_t>(gpu::kMaxCompares))
    return invalid_argument(fmt::format("{}: 1 to {} outputs expected", op.name, gpu::kMaxCompares));
  auto accumulated = [&](int t) {
    return std::find(k.accumulated().begin(), k.accumulated().end(), T[t].name) != k.accumulated().end();
  };
  auto partial = [&](int t) -> const Contract::Partial* {
    for (const auto& p : k.partial())
      if (p.tensor == T[t].name) return &p;
    return nullptr;
  };

  std::vector<gpu::ArenaTensor> at;
  for (int t = 0; t < nt; ++t) {
    const bool out = T[t].role == Role::kOut && !accumulated(t);
    at.push_back({T[t].desc, out ? Role::kOut : (T[t].role == Role::kOut ? Role::kInOut : T[t].role),
                  out && partial(t) == nullptr});
  }
  for (const auto& t : T) s.views.push_back(view_of(t.desc));
  int64_t extra = 0, scratch = 0;
  for (int t : s.outs) {
    const int64_t n = s.views[t].rows * s.views[t].cols;
    s.ref_off.push_back(extra / 8);
    extra += 16 * n;
    s.save_off.push_back(scratch);
    scratch += round256(T[t].desc.extent() * static_cast<int64_t>(dtype_size(T[t].desc.dtype)));
  }
  ASSAY_RETURN_IF_ERROR(lane.layout(at, extra, scratch));
  for (int t = 0; t < nt; ++t) {
    s.images.push_back(lane.host_tensor(t));
    const uint64_t stream = fnv1a64(T[t].name.data(), T[t].name.size());
    if (T[t].role == Role::kOut && accumulated(t)) {
      ValueRecipe prefill;  // an accumulated output starts from values of its own
      prefill.seed = stream;
      materialize(T[t].desc, prefill, stream, s.images.back());
    } else if (T[t].role == Role::kOut) {
      materialize_output(T[t].desc, s.images.back());
    } else {
      materialize(T[t].desc, T[t].values, stream, s.images.back());
    }
  }
  if (op.prepare) op.prepare(c, s.images);
  s.host.resize(static_cast<size_t>(nt));
  auto decode_all = [&](const std::vector<unsigned char*>& img, std::vector<std::vector<double>>& h,
                        std::vector<HostTensor>& hv) {
    hv.clear();
    for (int t = 0; t < nt; ++t) {
      h[static_cast<size_t>(t)] = decode(T[t].desc.dtype, img[static_cast<size_t>(t)], T[t].desc.extent());
      hv.push_back({h[static_cast<size_t>(t)].data() + T[t].desc.offset, s.views[t]});
    }
  };
  decode_all(s.images, s.host, s.hv);
  // The op's reference sees an accumulated output as the kernel would overwrite it.
  std::vector<HostTensor> ref_in = s.hv;
  std::vector<std::vector<double>> zero_fill;
  for (int t = 0; t < nt; ++t)
    if (T[t].role == Role::kOut && accumulated(t)) {
      zero_fill.emplace_back(s.host[static_cast<size_t>(t)].size(), 0.0);
      ref_in[static_cast<size_t>(t)].data = zero_fill.back().data() + T[t].desc.offset;
    }
  ASSAY_RETURN_IF_ERROR(compute_refs(op, c, k.arithmetic(), ref_in, s.refs));
  if (s.refs.size() != s.outs.size())
    return internal_error(fmt::format("{}: reference gave {} outputs", op.name, s.refs.size()));
  auto* ex = reinterpret_cast<double*>(lane.host_extra());
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const int t = s.outs[o];
    const View2D& w = s.views[t];
    const size_t n = static_cast<size_t>(w.rows * w.cols);
    auto& r = s.refs[o];
    if (r.ref.size() != n || r.tol.size() != n)
      return internal_error(fmt::format("{}: reference of {} has the wrong size", op.name, T[t].name));
    if (accumulated(t)) {
      // prefill + result, rounded once more into the output type. A kernel may add in fp32
      // and then store into a narrower float type: one fp32 rounding of the sum before the
      // store's, |rn(rn32(x)) - x| <= (u + u32 + u u32) |x|, x = prefill + the result's value.
      const DType odt = T[t].desc.dtype;
      const double u = unit_roundoff(odt);
      const double u32 = dtype_is_float(odt) && dtype_size(odt) < 4 ? unit_roundoff(DType::kF32) : 0.0;
      const double g = u + u32 + u * u32;
      for (int64_t i = 0; i < w.rows; ++i)
        for (int64_t j = 0; j < w.cols; ++j) {
          const size_t l = static_cast<size_t>(i * w.cols + j);
          const double sum = s.hv[static_cast<size_t>(t)].at(i, j) + r.ref[l];
          r.tol[l] = r.tol[l] * (1 + g) + g * std::fabs(sum);
          r.ref[l] = sum;
        }
    }
    if (const auto* p = partial(t)) {
      const Params pp(c.params);
      for (int64_t i = 0; i < w.rows; ++i)
        for (int64_t j = 0; j < w.cols; ++j)
          if (!p->written(pp, i, j)) s.refs[o].tol[static_cast<size_t>(i * w.cols + j)] = INFINITY;
    }
    std::copy(r.ref.begin(), r.ref.end(), ex + s.ref_off[o]);
    std::copy(r.tol.begin(), r.tol.end(), ex + s.ref_off[o] + n);
  }
  ASSAY_RETURN_IF_ERROR(lane.upload());

  const double* dev_ref = reinterpret_cast<const double*>(lane.dev_extra());
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const int t = s.outs[o];
    gpu::DevCompare x;
    x.out_dtype = static_cast<int32_t>(T[t].desc.dtype);
    x.exact = s.refs[o].exact ? 1 : 0;
    x.out = lane.dev_tensor(t);
    x.off = T[t].desc.offset;
    x.rows = s.views[t].rows;
    x.cols = s.views[t].cols;
    x.ld = s.views[t].ld;
    x.ref = dev_ref + s.ref_off[o];
    x.mag = dev_ref + s.ref_off[o] + x.rows * x.cols;
    x.rel_mag = 1;
    x.out_max = max_finite(T[t].desc.dtype);
    x.overflow_mag = INFINITY;  // tolerances carry their own overflow story: only +Inf tol accepts Inf/NaN
    s.cmp.push_back(x);
  }

  // The metamorphic transform, its images and its reference.
  const std::string relation = Params(c.params).s("relation");
  if (!relation.empty() && op.transform) {
    std::vector<unsigned char*> timg;
    s.timages.resize(static_cast<size_t>(nt));
    for (int t = 0; t < nt; ++t) {
      s.timages[static_cast<size_t>(t)].assign(s.images[static_cast<size_t>(t)],
                                               s.images[static_cast<size_t>(t)] + lane.tensor_bytes(t));
      timg.push_back(s.timages[static_cast<size_t>(t)].data());
    }
    if (op.transform(c, timg)) {
      std::vector<std::vector<double>> host2(static_cast<size_t>(nt));
      std::vector<HostTensor> hv2;
      decode_all(timg, host2, hv2);
      ASSAY_RETURN_IF_ERROR(compute_refs(op, c, k.arithmetic(), hv2, s.refs2));
      if (s.refs2.size() != s.outs.size())
        return internal_error(fmt::format("{}: reference gave {} outputs", op.name, s.refs2.size()));
      s.transformed = true;
    }
  }
  return ok_status();
}

std::vector<DevTensor> dev_views(const Case& c, const std::vector<View2D>& views, gpu::Lane& lane) {
  std::vector<DevTensor> d;
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& desc = c.tensors[t].desc;
    d.push_back({lane.dev_tensor(static_cast<int>(t)) + desc.offset * static_cast<int64_t>(dtype_size(desc.dtype)),
                 desc.dtype, views[t], desc.shape, desc.strides});
  }
  return d;
}

}  // namespace

View2D view_of(const TensorDesc& d) {
  View2D v;
  const int64_t r = d.rank();
  if (r <= 1) {
    v.rows = 1;
    v.cols = r == 1 ? d.shape[0] : 1;
    v.ld = std::max<int64_t>(v.cols, 1);
    return v;
  }
  v.rows = 1;
  for (int64_t k = 0; k + 1 < r; ++k) v.rows *= d.shape[static_cast<size_t>(k)];
  v.cols = d.shape[static_cast<size_t>(r - 1)];
  v.ld = d.strides[static_cast<size_t>(r - 2)];
  return v;
}

StatusOr<std::vector<Verdict>> run_model(const OpDef& op, const std::vector<const VariantDef*>& variants, const Case& c,
                                         gpu::Lane& lane, bool probe) {
  const auto& T = c.tensors;
  const int nt = static_cast<int>(T.size());
  Setup s;
  std::vector<Verdict> verdicts;
  for (const VariantDef* v : variants) {
    Verdict verdict;
    verdict.variant = v->name;
    if (!probe)
      if (auto rule = outside_contract(v->contract, c)) {
        verdict.not_applicable = *rule;
        verdicts.push_back(std::move(verdict));
        continue;
      }
    if (s.key.empty() || s.key != setup_key(v->contract)) ASSAY_RETURN_IF_ERROR(build_setup(op, *v, c, lane, s));
    const Case& cv = s.c;
    const Params params(cv.params);
    const auto& views = s.views;
    const auto& outs = s.outs;
    const auto& refs = s.refs;
    verdict.metrics.reference = "host-f64";
    verdict.metrics.key = fmt::format("{}/{}", dtype_name(T[0].desc.dtype), value_class_name(T[0].values.cls));
    verdict.metrics.exact_tier = std::any_of(refs.begin(), refs.end(), [](const OutputRef& r) { return r.exact; });
    cudaError_t launch_err = cudaSuccess;
    std::vector<gpu::CheckParams> checks;
    const auto dv = dev_views(cv, views, lane);
    for (int rep = 1; rep < lane.options.repeat; ++rep) {  // a kernel that degrades after N calls
      ASSAY_RETURN_IF_ERROR(lane.restore());
      const cudaError_t e = v->launch(params, dv, lane.stream());
      if (e != cudaSuccess && launch_err == cudaSuccess) launch_err = e;
    }
    for (int run = 0; run < 2; ++run) {
      ASSAY_RETURN_IF_ERROR(lane.restore());
      const cudaError_t e = v->launch(params, dv, lane.stream());
      if (e != cudaSuccess && launch_err == cudaSuccess) launch_err = e;
      gpu::CheckParams cp = lane.check_params();
      for (size_t o = 0; o < s.cmp.size(); ++o) {
        cp.compares[o] = s.cmp[o];
        if (run == 1 && v->deterministic) cp.compares[o].prev = lane.dev_scratch() + s.save_off[o];
      }
      cp.ncompares = static_cast<int32_t>(s.cmp.size());
      ASSAY_RETURN_IF_ERROR(lane.check(cp, run));
      checks.push_back(cp);
      if (run == 0)
        for (size_t o = 0; o < outs.size(); ++o)
          CUDA_CHECK(cudaMemcpyAsync(lane.dev_scratch() + s.save_off[o], lane.dev_tensor(outs[o]),
                                     T[outs[o]].desc.extent() * static_cast<int64_t>(dtype_size(T[outs[o]].desc.dtype)),
                                     cudaMemcpyDeviceToDevice, lane.stream()));
    }
    ASSAY_RETURN_IF_ERROR(lane.fetch_results(2));
    if (launch_err != cudaSuccess) {
      verdict.failures.push_back({probe ? FailureKind::kRejected : FailureKind::kLaunchError, "", 1, -1,
                                  cudaGetErrorString(launch_err)});
      verdicts.push_back(std::move(verdict));
      continue;
    }
    auto add = [&](FailureKind k, const std::string& t, int64_t n, int64_t first, std::string d) {
      for (auto& f : verdict.failures)
        if (f.kind == k && f.tensor == t) return;
      verdict.failures.push_back({k, t, n, first, std::move(d)});
    };
    for (int run = 0; run < 2; ++run) {
      const auto& r = lane.result(run);
      for (int ri = 0; ri < checks[static_cast<size_t>(run)].nregions; ++ri) {
        const auto& rr = r.regions[ri];
        const bool guard = ri % 2 == 0;
        const int t = std::min(ri / 2, nt - 1);
        const std::string& name = T[t].name;
        if (rr.changed) {
          const bool input = checks[static_cast<size_t>(run)].regions[ri].kind == gpu::DevRegion::kBytesEqual;
          add(guard ? FailureKind::kGuard : (input ? FailureKind::kInputWritten : FailureKind::kGapWritten), name,
              static_cast<int64_t>(rr.changed), gpu::first_index(rr.changed, rr.changed_first),
              guard ? fmt::format("guard band near {} changed", name)
                    : fmt::format("{} changed {}", name, input ? "although it is an input" : "outside its view"));
        }
        if (rr.unwritten)
          add(FailureKind::kUnwritten, name, static_cast<int64_t>(rr.unwritten),
              gpu::first_index(rr.unwritten, rr.unwritten_first),
              fmt::format("{} of {} elements of {} never written", rr.unwritten, views[t].rows * views[t].cols, name));
      }
      for (size_t o = 0; o < outs.size(); ++o) {
        const auto& cr = r.compares[o];
        const int t = outs[o];
        const std::string& name = T[t].name;
        const auto& rf = refs[o];
        auto at = [&](unsigned long long n, unsigned long long f) {
          const int64_t i = gpu::first_index(n, f);
          return fmt::format("first {}{} (reference {:.9g}, tolerance {:.3g})", name, where(views[t], i),
                             rf.ref[static_cast<size_t>(i)], rf.tol[static_cast<size_t>(i)]);
        };
        if (cr.naninf)
          add(FailureKind::kNanInf, name, static_cast<int64_t>(cr.naninf), -1,
              "NaN/Inf pattern differs, " + at(cr.naninf, cr.naninf_first));
        if (cr.bound)
          add(FailureKind::kBound, name, static_cast<int64_t>(cr.bound), -1,
              fmt::format("beyond the {}, {}", op.bound_name, at(cr.bound, cr.bound_first)));
        if (cr.exact)
          add(FailureKind::kExact, name, static_cast<int64_t>(cr.exact), -1,
              "exact-tier case not bit-identical, " + at(cr.exact, cr.exact_first));
        if (cr.nondet)
          add(FailureKind::kNondeterministic, name, static_cast<int64_t>(cr.nondet), -1,
              "differs bitwise between launches, " + at(cr.nondet, cr.nondet_first));
        const double ratio = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(cr.worst_key >> 32)));
        if (ratio > verdict.metrics.max_ratio) {
          verdict.metrics.max_ratio = ratio;
          verdict.metrics.worst_index = static_cast<int64_t>(~static_cast<uint32_t>(cr.worst_key & 0xffffffffu));
        }
        verdict.metrics.max_abs_err =
            std::max(verdict.metrics.max_abs_err, std::bit_cast<double>(static_cast<uint64_t>(cr.max_abs_bits)));
      }
    }

    // ---- properties and metamorphic relations (cases that name one) -------------------------
    const std::string relation = params.s("relation");
    if (!relation.empty() && (op.properties || s.transformed)) {
      auto read_outputs = [&](const std::vector<const unsigned char*>& dev, std::vector<std::vector<double>>& store,
                              std::vector<HostTensor>& view) -> Status {
        store.assign(outs.size(), {});
        view.clear();
        for (size_t o = 0; o < outs.size(); ++o) {
          const auto& d = T[outs[o]].desc;
          std::vector<unsigned char> raw(static_cast<size_t>(d.extent()) * dtype_size(d.dtype));
          ASSAY_RETURN_IF_ERROR(lane.read_back(dev[o], raw.data(), static_cast<int64_t>(raw.size())));
          store[o] = decode(d.dtype, raw.data(), d.extent());
          view.push_back({store[o].data() + d.offset, views[outs[o]]});
        }
        return ok_status();
      };
      std::vector<const unsigned char*> first_dev;
      for (size_t o = 0; o < outs.size(); ++o) first_dev.push_back(lane.dev_scratch() + s.save_off[o]);
      std::vector<std::vector<double>> out1;
      std::vector<HostTensor> ov1;
      ASSAY_RETURN_IF_ERROR(read_outputs(first_dev, out1, ov1));
      std::vector<Failure> props;
      if (op.properties) op.properties(cv, s.hv, ov1, refs, props);
      if (s.transformed) {
        ASSAY_RETURN_IF_ERROR(lane.restore());
        for (int t = 0; t < nt; ++t)
          if (T[t].role != Role::kOut)
            CUDA_CHECK(cudaMemcpyAsync(lane.dev_tensor(t), s.timages[static_cast<size_t>(t)].data(),
                                       lane.tensor_bytes(t), cudaMemcpyHostToDevice, lane.stream()));
        const cudaError_t e = v->launch(params, dev_views(cv, views, lane), lane.stream());
        if (e != cudaSuccess) {
          props.push_back({FailureKind::kLaunchError, "", 1, -1,
                           fmt::format("on the transformed inputs ({}): {}", relation, cudaGetErrorString(e))});
        } else {
          std::vector<const unsigned char*> now;
          for (int t : outs) now.push_back(lane.dev_tensor(t));
          std::vector<std::vector<double>> out2;
          std::vector<HostTensor> ov2;
          ASSAY_RETURN_IF_ERROR(read_outputs(now, out2, ov2));
          for (size_t o = 0; o < outs.size(); ++o) {
            const View2D& w = views[outs[o]];
            int64_t bad = 0, first = -1;
            double worst_d = 0, worst_t = 0, a1 = 0, a2 = 0;
            for (int64_t i = 0; i < w.rows; ++i)
              for (int64_t j = 0; j < w.cols; ++j) {
                const size_t l = static_cast<size_t>(i * w.cols + j);
                RelatedElement from{i, j, 1};
                if (op.relate && !op.relate(cv, o, i, j, from)) continue;
                if (from.from_i < 0 || from.from_i >= w.rows || from.from_j < 0 || from.from_j >= w.cols)
                  return internal_error(fmt::format("{}: relation '{}' maps {}{} outside the output", op.name,
                                                    relation, T[outs[o]].name, where(w, static_cast<int64_t>(l))));
                const size_t l1 = static_cast<size_t>(from.from_i * w.cols + from.from_j);
                const double sc = from.scale;
                const double r1 = sc * refs[o].ref[l1], r2 = s.refs2[o].ref[l];
                if (!std::isfinite(r1) || !std::isfinite(r2)) continue;
                const double y1 = sc * ov1[o].at(from.from_i, from.from_j), y2 = ov2[o].at(i, j);
                const double tol = std::fabs(sc) * refs[o].tol[l1] + s.refs2[o].tol[l] + std::fabs(r2 - r1);
                if (y1 == y2 || std::isinf(tol)) continue;  // equal (the same Inf included), or no bound
                if (!std::isfinite(y1) || !std::isfinite(y2)) {
                  // A non-finite output is the bound check's business where the exact result
                  // may round past the largest finite value; elsewhere it breaks the relation.
                  const double top = max_finite(T[outs[o]].desc.dtype);
                  if (std::fabs(r1) + std::fabs(sc) * refs[o].tol[l1] > top || std::fabs(r2) + s.refs2[o].tol[l] > top)
                    continue;
                }
                const double d = std::fabs(y2 - y1);
                if (!(d <= tol)) {
                  if (bad++ == 0) first = static_cast<int64_t>(l), worst_d = d, worst_t = tol, a1 = y1, a2 = y2;
                }
              }
            if (bad > 0)
              props.push_back({FailureKind::kProperty, T[outs[o]].name, bad, -1,
                               fmt::format("metamorphic '{}': {}{} on the transformed inputs is {:.9g}, the original launch "
                                           "gives {:.9g} for it{}; |diff| {:.3g} > {:.3g} (both tolerances + |change "
                                           "of the exact result|)",
                                           relation, T[outs[o]].name, where(w, first), a2, a1,
                                           op.relate ? " (moved and scaled as the relation says)" : "", worst_d,
                                           worst_t)});
          }
        }
        // The next variant starts from the original inputs again.
        s.key.clear();
      }
      for (auto& f : props) add(f.kind, f.tensor, f.count, f.first_index, f.detail);
    }
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

StatusOr<Inspection> inspect_model(const OpDef& op, const VariantDef& v, const Case& c, gpu::Lane& lane) {
  Setup s;
  ASSAY_RETURN_IF_ERROR(build_setup(op, v, c, lane, s));
  ASSAY_RETURN_IF_ERROR(lane.restore());
  const cudaError_t e = v.launch(Params(s.c.params), dev_views(s.c, s.views, lane), lane.stream());
  if (e != cudaSuccess) return internal_error(fmt::format("launch of {}: {}", v.name, cudaGetErrorString(e)));
  const int t = s.outs.front();
  const auto& d = c.tensors[static_cast<size_t>(t)].desc;
  std::vector<unsigned char> raw(static_cast<size_t>(d.extent()) * dtype_size(d.dtype));
  ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_tensor(t), raw.data(), static_cast<int64_t>(raw.size())));
  const std::vector<double> all = decode(d.dtype, raw.data(), d.extent());
  const View2D& w = s.views[static_cast<size_t>(t)];
  Inspection in;
  in.tensor = c.tensors[static_cast<size_t>(t)].name;
  in.rows = w.rows;
  in.cols = w.cols;
  in.ref = s.refs.front().ref;
  in.tol = s.refs.front().tol;
  in.exact_tier = s.refs.front().exact;
  in.reference = "host-f64";
  in.out.resize(static_cast<size_t>(w.rows * w.cols));
  in.unwritten.resize(in.out.size());
  for (int64_t i = 0; i < w.rows; ++i)
    for (int64_t j = 0; j < w.cols; ++j) {
      const size_t l = static_cast<size_t>(i * w.cols + j);
      const size_t e2 = static_cast<size_t>(d.offset + i * w.ld + j);
      in.out[l] = all[e2];
      in.unwritten[l] = is_output_poison(d.dtype, raw.data() + e2 * dtype_size(d.dtype)) ? 1 : 0;
    }
  // The inputs feeding row i (the first elements of each input's row), for the element view.
  std::vector<std::vector<double>> host = s.host;
  std::vector<TensorSpec> tensors = c.tensors;
  std::vector<View2D> views = s.views;
  in.inputs = [host, tensors, views](int64_t i, int64_t) {
    std::string line;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].role != Role::kIn) continue;
      const View2D& v2 = views[t];
      if (v2.rows == 0 || v2.cols == 0) continue;
      const int64_t r = std::min(i, v2.rows - 1);
      const double* base = host[t].data() + tensors[t].desc.offset + r * v2.ld;
      line += fmt::format("{}[{}][..]: ", tensors[t].name, r);
      for (int64_t k = 0; k < std::min<int64_t>(v2.cols, 8); ++k) line += fmt::format("{:.6g} ", base[k]);
      if (v2.cols > 8) line += "... ";
    }
    return line;
  };
  return in;
}

}  // namespace assay
