#include "harness/testbeds/tensor_op.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
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

}  // namespace

TensorSpec make_tensor(const std::string& name, Role role, DType dt, int64_t rows, int64_t cols, int64_t pad,
                       int64_t off, const ValueRecipe& values) {
  TensorSpec s;
  s.name = name;
  s.role = role;
  s.desc.dtype = dt;
  if (rows < 0) {
    s.desc.shape = {cols};
    s.desc.strides = {1};
  } else {
    s.desc.shape = {rows, cols};
    s.desc.strides = {std::max<int64_t>(cols, 1) + pad, 1};
  }
  s.desc.offset = off;
  s.values = role == Role::kOut ? ValueRecipe{} : values;
  return s;
}

Status validate_tensor_layout(const Case& c, const std::vector<std::pair<std::string, Role>>& expected) {
  if (c.tensors.size() != expected.size()) {
    std::string names;
    for (const auto& e : expected) names += (names.empty() ? "" : ", ") + e.first;
    return invalid_argument(fmt::format("{} case: expected tensors {}", c.op, names));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const TensorSpec& t = c.tensors[i];
    if (t.name != expected[i].first)
      return invalid_argument(fmt::format("{} case: tensor {} must be '{}'", c.op, i, expected[i].first));
    if (t.role != expected[i].second)
      return invalid_argument(
          fmt::format("{} case: tensor {} must have role {}", c.op, t.name, role_name(expected[i].second)));
    const auto& d = t.desc;
    if (d.rank() != 1 && d.rank() != 2)
      return invalid_argument(fmt::format("{} case: tensor {} must be rank 1 or 2", c.op, t.name));
    if (d.strides.back() != 1)
      return invalid_argument(fmt::format("{} case: tensor {} must have unit innermost stride", c.op, t.name));
    if (d.rank() == 2 && d.strides[0] < std::max<int64_t>(d.shape[1], 1))
      return invalid_argument(
          fmt::format("{} case: tensor {} row stride {} is below its {} columns", c.op, t.name, d.strides[0], d.shape[1]));
    ASSAY_RETURN_IF_ERROR(d.validate(c.op + " case: tensor " + t.name, int64_t{1} << 28));
    if (t.role != Role::kOut) ASSAY_RETURN_IF_ERROR(validate_recipe(t.values, c.op + " case: tensor " + t.name));
  }
  return ok_status();
}

StatusOr<std::vector<Verdict>> run_tensor_op(const TensorOpDef& def, const std::vector<TensorOpVariant>& registry,
                                             const Case& c, const std::vector<std::string>& names, gpu::Lane& lane) {
  std::vector<const TensorOpVariant*> variants;
  for (const auto& name : names) {
    const TensorOpVariant* f = nullptr;
    for (const auto& v : registry)
      if (v.info.name == name) f = &v;
    if (f == nullptr) return not_found(fmt::format("{} has no variant '{}'", def.op, name));
    variants.push_back(f);
  }
  const auto& T = c.tensors;
  const int nt = static_cast<int>(T.size());
  if (2 * nt + 1 > gpu::kMaxRegions) return invalid_argument(fmt::format("{}: too many tensors ({})", def.op, nt));
  std::vector<int> outs;  // tensor indices of outputs, in case order
  for (int t = 0; t < nt; ++t)
    if (T[t].role != Role::kIn) outs.push_back(t);
  if (outs.empty() || outs.size() > static_cast<size_t>(gpu::kMaxCompares))
    return invalid_argument(fmt::format("{}: 1 to {} outputs expected", def.op, gpu::kMaxCompares));

  // ---- layout, inputs, references -------------------------------------------------
  std::vector<gpu::ArenaTensor> at;
  for (int t = 0; t < nt; ++t) at.push_back({T[t].desc, T[t].role, T[t].role == Role::kOut});
  std::vector<View2D> views;
  for (const auto& t : T) views.push_back(view_of(t.desc));
  int64_t extra = 0, scratch = 0;
  std::vector<int64_t> ref_off, save_off;  // per output: doubles into extra, bytes into scratch
  for (int t : outs) {
    const int64_t n = views[t].rows * views[t].cols;
    ref_off.push_back(extra / 8);
    extra += 16 * n;
    save_off.push_back(scratch);
    scratch += round256(T[t].desc.extent() * static_cast<int64_t>(dtype_size(T[t].desc.dtype)));
  }
  ASSAY_RETURN_IF_ERROR(lane.layout(at, extra, scratch));
  std::vector<unsigned char*> images;
  for (int t = 0; t < nt; ++t) {
    images.push_back(lane.host_tensor(t));
    if (T[t].role == Role::kOut)
      materialize_output(T[t].desc, images.back());
    else
      materialize(T[t].desc, T[t].values, fnv1a64(T[t].name.data(), T[t].name.size()), images.back());
  }
  if (def.prepare) def.prepare(c, images);
  std::vector<std::vector<double>> host(static_cast<size_t>(nt));
  std::vector<HostTensor> hv;
  auto decode_all = [&](const std::vector<unsigned char*>& img, std::vector<std::vector<double>>& h,
                        std::vector<HostTensor>& v) {
    v.clear();
    for (int t = 0; t < nt; ++t) {
      h[static_cast<size_t>(t)] = decode(T[t].desc.dtype, img[static_cast<size_t>(t)], T[t].desc.extent());
      v.push_back({h[static_cast<size_t>(t)].data() + T[t].desc.offset, views[t]});
    }
  };
  decode_all(images, host, hv);
  std::vector<OutputRef> refs;
  ASSAY_RETURN_IF_ERROR(def.reference(c, hv, refs));
  if (refs.size() != outs.size()) return internal_error(fmt::format("{}: reference gave {} outputs", def.op, refs.size()));
  unbounded_where_nan(refs);
  auto* ex = reinterpret_cast<double*>(lane.host_extra());
  for (size_t o = 0; o < outs.size(); ++o) {
    const size_t n = static_cast<size_t>(views[outs[o]].rows * views[outs[o]].cols);
    if (refs[o].ref.size() != n || refs[o].tol.size() != n)
      return internal_error(fmt::format("{}: reference of {} has the wrong size", def.op, T[outs[o]].name));
    std::copy(refs[o].ref.begin(), refs[o].ref.end(), ex + ref_off[o]);
    std::copy(refs[o].tol.begin(), refs[o].tol.end(), ex + ref_off[o] + n);
  }
  ASSAY_RETURN_IF_ERROR(lane.upload());

  const double* dev_ref = reinterpret_cast<const double*>(lane.dev_extra());
  std::vector<gpu::DevCompare> cmp;
  for (size_t o = 0; o < outs.size(); ++o) {
    const int t = outs[o];
    gpu::DevCompare x;
    x.out_dtype = static_cast<int32_t>(T[t].desc.dtype);
    x.exact = refs[o].exact ? 1 : 0;
    x.out = lane.dev_tensor(t);
    x.off = T[t].desc.offset;
    x.rows = views[t].rows;
    x.cols = views[t].cols;
    x.ld = views[t].ld;
    x.ref = dev_ref + ref_off[o];
    x.mag = dev_ref + ref_off[o] + x.rows * x.cols;
    x.rel_mag = 1;
    x.out_max = max_finite(T[t].desc.dtype);
    x.overflow_mag = INFINITY;  // tolerances carry their own overflow story: only +Inf tol accepts Inf/NaN
    cmp.push_back(x);
  }
  auto dev_views = [&] {
    std::vector<DevTensor> d;
    for (int t = 0; t < nt; ++t)
      d.push_back({lane.dev_tensor(t) + T[t].desc.offset * static_cast<int64_t>(dtype_size(T[t].desc.dtype)),
                   T[t].desc.dtype, views[t]});
    return d;
  };
  const std::string relation = c.params.contains("relation") && c.params["relation"].is_string()
                                   ? c.params["relation"].get<std::string>()
                                   : std::string();

  // The metamorphic transform, its images and its reference do not depend on the variant.
  std::vector<std::vector<unsigned char>> timages;
  std::vector<OutputRef> refs2;
  bool transformed = false;
  if (!relation.empty() && def.transform) {
    std::vector<unsigned char*> timg;
    timages.resize(static_cast<size_t>(nt));
    for (int t = 0; t < nt; ++t) {
      timages[static_cast<size_t>(t)].assign(images[static_cast<size_t>(t)],
                                             images[static_cast<size_t>(t)] + lane.tensor_bytes(t));
      timg.push_back(timages[static_cast<size_t>(t)].data());
    }
    if (def.transform(c, timg)) {
      std::vector<std::vector<double>> host2(static_cast<size_t>(nt));
      std::vector<HostTensor> hv2;
      decode_all(timg, host2, hv2);
      ASSAY_RETURN_IF_ERROR(def.reference(c, hv2, refs2));
      if (refs2.size() != outs.size())
        return internal_error(fmt::format("{}: reference gave {} outputs", def.op, refs2.size()));
      unbounded_where_nan(refs2);
      transformed = true;
    }
  }

  std::vector<Verdict> verdicts;
  for (const TensorOpVariant* v : variants) {
    Verdict verdict;
    verdict.variant = v->info.name;
    verdict.metrics.reference = "host-f64";
    verdict.metrics.key = fmt::format("{}/{}", dtype_name(T[0].desc.dtype), value_class_name(T[0].values.cls));
    verdict.metrics.exact_tier = std::any_of(refs.begin(), refs.end(), [](const OutputRef& r) { return r.exact; });
    cudaError_t launch_err = cudaSuccess;
    std::vector<gpu::CheckParams> params;
    const auto dv = dev_views();
    for (int rep = 1; rep < lane.options.repeat; ++rep) {  // a kernel that degrades after N calls
      ASSAY_RETURN_IF_ERROR(lane.restore());
      const cudaError_t e = v->launch(c, dv, lane.stream());
      if (e != cudaSuccess && launch_err == cudaSuccess) launch_err = e;
    }
    for (int run = 0; run < 2; ++run) {
      ASSAY_RETURN_IF_ERROR(lane.restore());
      const cudaError_t e = v->launch(c, dv, lane.stream());
      if (e != cudaSuccess && launch_err == cudaSuccess) launch_err = e;
      gpu::CheckParams cp = lane.check_params();
      for (size_t o = 0; o < cmp.size(); ++o) {
        cp.compares[o] = cmp[o];
        if (run == 1 && v->info.deterministic) cp.compares[o].prev = lane.dev_scratch() + save_off[o];
      }
      cp.ncompares = static_cast<int32_t>(cmp.size());
      ASSAY_RETURN_IF_ERROR(lane.check(cp, run));
      params.push_back(cp);
      if (run == 0)
        for (size_t o = 0; o < outs.size(); ++o)
          CUDA_CHECK(cudaMemcpyAsync(lane.dev_scratch() + save_off[o], lane.dev_tensor(outs[o]),
                                     T[outs[o]].desc.extent() * static_cast<int64_t>(dtype_size(T[outs[o]].desc.dtype)),
                                     cudaMemcpyDeviceToDevice, lane.stream()));
    }
    ASSAY_RETURN_IF_ERROR(lane.fetch_results(2));
    if (launch_err != cudaSuccess) {
      verdict.failures.push_back({FailureKind::kLaunchError, "", 1, -1, cudaGetErrorString(launch_err)});
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
      for (int ri = 0; ri < params[static_cast<size_t>(run)].nregions; ++ri) {
        const auto& rr = r.regions[ri];
        const bool guard = ri % 2 == 0;
        const int t = std::min(ri / 2, nt - 1);
        const std::string& name = T[t].name;
        if (rr.changed) {
          const bool input = params[static_cast<size_t>(run)].regions[ri].kind == gpu::DevRegion::kBytesEqual;
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
              fmt::format("beyond the {}, {}", def.bound_name, at(cr.bound, cr.bound_first)));
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
    if (!relation.empty() && (def.properties || transformed)) {
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
      for (size_t o = 0; o < outs.size(); ++o) first_dev.push_back(lane.dev_scratch() + save_off[o]);
      std::vector<std::vector<double>> out1;
      std::vector<HostTensor> ov1;
      ASSAY_RETURN_IF_ERROR(read_outputs(first_dev, out1, ov1));
      std::vector<Failure> props;
      if (def.properties) def.properties(c, hv, ov1, refs, props);
      // Metamorphic: transformed inputs through the same kernel.
      if (transformed) {
        ASSAY_RETURN_IF_ERROR(lane.restore());
        for (int t = 0; t < nt; ++t)
          if (T[t].role != Role::kOut)
            CUDA_CHECK(cudaMemcpyAsync(lane.dev_tensor(t), timages[static_cast<size_t>(t)].data(),
                                       lane.tensor_bytes(t), cudaMemcpyHostToDevice, lane.stream()));
        const cudaError_t e = v->launch(c, dev_views(), lane.stream());
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
                if (def.relate && !def.relate(c, o, i, j, from)) continue;
                if (from.from_i < 0 || from.from_i >= w.rows || from.from_j < 0 || from.from_j >= w.cols)
                  return internal_error(fmt::format("{}: relation '{}' maps {}{} outside the output", def.op,
                                                    relation, T[outs[o]].name, where(w, static_cast<int64_t>(l))));
                const size_t l1 = static_cast<size_t>(from.from_i * w.cols + from.from_j);
                const double s = from.scale;
                const double r1 = s * refs[o].ref[l1], r2 = refs2[o].ref[l];
                if (!std::isfinite(r1) || !std::isfinite(r2)) continue;
                const double y1 = s * ov1[o].at(from.from_i, from.from_j), y2 = ov2[o].at(i, j);
                const double tol = std::fabs(s) * refs[o].tol[l1] + refs2[o].tol[l] + std::fabs(r2 - r1);
                if (y1 == y2 || std::isinf(tol)) continue;  // equal (the same Inf included), or no bound
                if (!std::isfinite(y1) || !std::isfinite(y2)) {
                  // A non-finite output is the bound check's business where the exact result
                  // may round past the largest finite value; elsewhere it breaks the relation.
                  const double top = max_finite(T[outs[o]].desc.dtype);
                  if (std::fabs(r1) + std::fabs(s) * refs[o].tol[l1] > top || std::fabs(r2) + refs2[o].tol[l] > top)
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
                                           def.relate ? " (moved and scaled as the relation says)" : "", worst_d,
                                           worst_t)});
          }
        }
      }
      for (auto& f : props) add(f.kind, f.tensor, f.count, f.first_index, f.detail);
    }
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

}  // namespace assay
