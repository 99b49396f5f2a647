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
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/device_output_tol.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "harness/gpu/materialize_device.h"
#include "harness/op_model.h"
#include "harness/phase_time.h"
#include "harness/relation_core.h"
#include "harness/scratch.h"
#include "harness/vendor_share.h"
#include "harness/values.h"

namespace assay {
namespace {

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
  std::vector<OutputRef> refs;
  std::vector<gpu::DevCompare> cmp;
  bool on_device = false;                ///< inputs drawn on the device, device reference
  bool host_inputs = false;              ///< on_device: host/hv hold the snapshot, read back for properties
  std::vector<DeviceOutput> douts;       ///< on_device: the reference buffers per output
  // A metamorphic relation (stage_relation): the transformed images and the relation's map and
  // compares live on the device, so its launch costs a copy, the launch and the check pass.
  bool transformed = false;
  std::vector<gpu::DevCompare> rel;                 ///< per output: the relation's compare
  std::vector<const unsigned char*> dev_timages;    ///< per tensor: its transformed image (null: an output)
  std::vector<std::vector<int64_t>> rel_from;       ///< per output: the map's host copy, for the detail
  std::vector<std::vector<double>> rel_scale;
  std::vector<unsigned char> rel_blob;              ///< what stage_relation uploaded (its copy reads it)
  DeviceContext dctx;                    ///< on_device: what the device reference ran with (its scratch)
  int64_t save_bytes = 0;                ///< scratch taken by the saved outputs (the variant's and the vendor's)
  bool vendor_done = false;              ///< the vendor column ran on this setup
  bool vendor_kept = false;              ///< its outputs are saved (vendor_off) for the vendor-relative ratio
  std::vector<int64_t> vendor_off;       ///< per output: scratch offset of the vendor's output, -1: none
  double vendor_ratio = -1;
  int64_t vendor_violations = 0;
  std::string vendor_note;
};

/// True where the op's overwrites hook makes kInOut tensor t write-only for this case.
bool overwritten(const OpDef& op, const Case& c, int t) {
  const auto& T = c.tensors[static_cast<size_t>(t)];
  return T.role == Role::kInOut && op.overwrites && op.overwrites(Params(c.params), T.name);
}

/// Inputs of at least this many elements are drawn on the device and copied back: the value
/// classes' software log, cos and exp2 cost 35-55 ns an element on the host (host inputs were
/// half of rope's, gemm_batched's and attention_bwd's lane time), against a few launches and one
/// wait per case on the device. Measured on an H100 (docs/results.md): 2,048 lifts those ops and
/// leaves the small GEMM as it was; 512 made the small GEMM and softmax slower.
constexpr int64_t kDeviceDrawElements = 2048;

/// Tensor t drawn into the lane's snapshot on the device: the output poison where the kernel
/// writes it whole, its recipe's values elsewhere (on the stream of its name, as materialize()).
/// An input the device generator has no encoder for (int32: class targets, indices) is drawn on
/// the host and uploaded: such a tensor is a row's worth beside the ones that make a case large.
Status draw_on_device(const OpDef& op, const Case& c, int t, gpu::Lane& lane, gpu::DeviceDraw& draw) {
  const auto& T = c.tensors[static_cast<size_t>(t)];
  unsigned char* dst = lane.dev_snapshot_tensor(t);
  const uint64_t stream = fnv1a64(T.name.data(), T.name.size());
  if (T.role == Role::kOut || overwritten(op, c, t)) return draw.poison(T.desc, dst);
  if (gpu::materialize_device_supports(T.desc)) return draw.values(T.desc, T.values, stream, dst);
  std::vector<unsigned char> img(static_cast<size_t>(lane.tensor_bytes(t)));
  materialize(T.desc, T.values, stream, img.data());
  CUDA_CHECK(cudaMemcpyAsync(dst, img.data(), img.size(), cudaMemcpyHostToDevice, lane.stream()));
  CUDA_CHECK(cudaStreamSynchronize(lane.stream()));  // img is released on return
  return ok_status();
}

bool on_device(const OpDef& op, const Case& c) {
  return op.device_reference.when && op.device_reference.when(Params(c.params));
}

/// Views of the case's tensors at `base(t)` (the working arena or the pristine snapshot).
template <typename Base>
std::vector<DevTensor> views_at(const Case& c, const std::vector<View2D>& views, Base base) {
  std::vector<DevTensor> d;
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& desc = c.tensors[t].desc;
    d.push_back({base(static_cast<int>(t)) + desc.offset * static_cast<int64_t>(dtype_size(desc.dtype)), desc.dtype,
                 views[t], desc.shape, desc.strides});
  }
  return d;
}

/// The reference sees an accumulated output zero-filled (as the kernel would overwrite it);
/// the bound sees its prefill (`bound_in`), which the kernel's sum may round with the result.
Status compute_refs(const OpDef& op, const Case& c, const Arithmetic& arith, const std::vector<HostTensor>& hv,
                    std::vector<OutputRef>& refs, const std::vector<HostTensor>* bound_in = nullptr) {
  refs.clear();
  {
    const PhaseTimer timer(Phase::kReference);
    ASSAY_RETURN_IF_ERROR(op.reference(c, hv, refs));
  }
  const PhaseTimer timer(Phase::kBound);
  if (op.bound) ASSAY_RETURN_IF_ERROR(op.bound(c, arith, bound_in != nullptr ? *bound_in : hv, refs));
  unbounded_where_nan(refs);
  return ok_status();
}

/// A device reference's outputs copied to the host: ref, and tol from its affine form, +Inf
/// where it is NaN or where the check kernel lets the output overflow (its magnitude term
/// reaches overflow_mag, or the output's largest finite value `out_max[o]`), as a host bound
/// leaves such elements unbounded.
Status read_device_refs(gpu::Lane& lane, const std::vector<DeviceOutput>& douts, const std::vector<double>& out_max,
                        std::vector<OutputRef>& out) {
  out.assign(douts.size(), {});
  for (size_t o = 0; o < douts.size(); ++o) {
    const DeviceOutput& d = douts[o];
    const double limit = d.overflow_mag > 0 ? d.overflow_mag : out_max[o];
    const int64_t n = d.rows * d.cols;
    OutputRef& r = out[o];
    r.ref.resize(static_cast<size_t>(n));
    r.tol.resize(static_cast<size_t>(n));
    ASSAY_RETURN_IF_ERROR(lane.read_back(d.ref, r.ref.data(), n * 8));
    ASSAY_RETURN_IF_ERROR(lane.read_back(d.mag, r.tol.data(), n * 8));
    for (size_t l = 0; l < r.tol.size(); ++l)
      r.tol[l] = device_output_tol(r.ref[l], r.tol[l], d.rel_out, d.rel_mag, d.floor, limit);
    r.exact = d.exact;
  }
  return ok_status();
}

/// Compare x against a reference in DeviceOutput's affine form (the host path's is ref, tol:
/// rel_mag 1, no overflow zone).
void compare_against(gpu::DevCompare& x, const DeviceOutput& d) {
  x.ref = d.ref;
  x.mag = d.mag;
  x.rel_out = d.rel_out;
  x.rel_mag = d.rel_mag;
  x.floor = d.floor;
  x.overflow_mag = d.overflow_mag;
}

/// Scratch a metamorphic relation takes (stage_relation): per output its map (none without
/// OpDef::relate) and, where the reference is the host's, the transformed inputs' reference and
/// tolerance; per input, its transformed image.
int64_t relation_bytes(const OpDef& op, const Setup& s, bool host_refs) {
  int64_t bytes = 0;
  for (int t : s.outs) {
    const int64_t n = s.views[t].rows * s.views[t].cols;
    bytes += ((op.relate ? 2 : 0) + (host_refs ? 2 : 0)) * scratch_round_up(8 * n);
  }
  for (const auto& t : s.c.tensors)
    if (t.role != Role::kOut) bytes += scratch_round_up(t.desc.extent() * static_cast<int64_t>(dtype_size(t.desc.dtype)));
  return bytes;
}

/// Puts a metamorphic relation on the device, in one copy into scratch at `area`: the transformed
/// images, the map of OpDef::relate and, with a host reference (`refs2`), the transformed inputs'
/// reference. Sets up per output the relation's compare (s.rel): the transformed launch's output
/// against the first launch's, saved at save_off, under s.cmp's reference and tolerance. Without
/// `refs2` the caller points the compares at the device reference of the transformed inputs.
Status stage_relation(const OpDef& op, Setup& s, gpu::Lane& lane, int64_t area,
                      const std::vector<std::vector<unsigned char>>& timages, const std::vector<OutputRef>* refs2) {
  const auto& T = s.c.tensors;
  s.rel_blob.assign(static_cast<size_t>(relation_bytes(op, s, refs2 != nullptr)), 0);
  unsigned char* dev = lane.dev_scratch() + area;
  int64_t at = 0;
  auto put = [&](const void* src, int64_t bytes) {
    if (bytes > 0) std::memcpy(s.rel_blob.data() + at, src, static_cast<size_t>(bytes));
    const unsigned char* d = dev + at;
    at += scratch_round_up(bytes);
    return d;
  };
  const RelateElement related = op.relate ? op.relate(s.c) : RelateElement{};
  s.rel.clear();
  s.rel_from.assign(s.outs.size(), {});
  s.rel_scale.assign(s.outs.size(), {});
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const View2D& w = s.views[s.outs[o]];
    const int64_t n = w.rows * w.cols;
    gpu::DevCompare x = s.cmp[o];
    x.exact = 0;
    x.related.first = lane.dev_scratch() + s.save_off[o];
    x.related.ref = x.ref;
    x.related.mag = x.mag;
    x.related.rel_out = x.rel_out;
    x.related.rel_mag = x.rel_mag;
    x.related.floor = x.floor;
    x.related.limit = x.overflow_mag > 0 ? x.overflow_mag : x.out_max;
    if (related) {
      auto& from = s.rel_from[o];
      auto& scale = s.rel_scale[o];
      from.resize(static_cast<size_t>(n));
      scale.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < w.rows; ++i)
        for (int64_t j = 0; j < w.cols; ++j) {
          const size_t l = static_cast<size_t>(i * w.cols + j);
          RelatedElement e{i, j, 1};
          if (!related(o, i, j, e)) {
            from[l] = -1, scale[l] = 0;
            continue;
          }
          if (e.from_i < 0 || e.from_i >= w.rows || e.from_j < 0 || e.from_j >= w.cols)
            return internal_error(fmt::format("{}: relation '{}' maps {}{} outside the output", op.name,
                                              Params(s.c.params).s("relation"), T[s.outs[o]].name,
                                              where(w, static_cast<int64_t>(l))));
          from[l] = e.from_i * w.cols + e.from_j;
          scale[l] = e.scale;
        }
      x.related.from = reinterpret_cast<const int64_t*>(put(from.data(), 8 * n));
      x.related.scale = reinterpret_cast<const double*>(put(scale.data(), 8 * n));
    }
    if (refs2 != nullptr) {
      DeviceOutput d;
      d.ref = reinterpret_cast<double*>(const_cast<unsigned char*>(put((*refs2)[o].ref.data(), 8 * n)));
      d.mag = reinterpret_cast<double*>(const_cast<unsigned char*>(put((*refs2)[o].tol.data(), 8 * n)));
      compare_against(x, d);
    }
    s.rel.push_back(x);
  }
  s.dev_timages.assign(T.size(), nullptr);
  for (size_t t = 0; t < T.size(); ++t)
    if (T[t].role != Role::kOut) s.dev_timages[t] = put(timages[t].data(), lane.tensor_bytes(static_cast<int>(t)));
  CUDA_CHECK(cudaMemcpyAsync(dev, s.rel_blob.data(), s.rel_blob.size(), cudaMemcpyHostToDevice, lane.stream()));
  s.transformed = true;
  return ok_status();
}

/// The transformed images into the working arena, after a restore (outputs keep their poison).
Status load_transformed(const Setup& s, gpu::Lane& lane) {
  for (size_t t = 0; t < s.dev_timages.size(); ++t)
    if (s.dev_timages[t] != nullptr)
      CUDA_CHECK(cudaMemcpyAsync(lane.dev_tensor(static_cast<int>(t)), s.dev_timages[t],
                                 lane.tensor_bytes(static_cast<int>(t)), cudaMemcpyDeviceToDevice, lane.stream()));
  return ok_status();
}

/// The line for output o's first element that breaks the relation (dense index l): the element
/// and its related one read back (the working arena still holds the transformed launch's
/// output) and judged again by the check kernel's rule.
StatusOr<std::string> relation_detail(const OpDef& op, const Setup& s, gpu::Lane& lane, size_t o, int64_t l) {
  const gpu::DevCompare& x = s.rel[o];
  const auto& d = s.c.tensors[static_cast<size_t>(s.outs[o])].desc;
  const View2D& w = s.views[static_cast<size_t>(s.outs[o])];
  const bool mapped = !s.rel_from[o].empty();
  const int64_t l1 = mapped ? s.rel_from[o][static_cast<size_t>(l)] : l;
  const double scale = mapped ? s.rel_scale[o][static_cast<size_t>(l)] : 1.0;
  const int64_t cols = std::max<int64_t>(w.cols, 1), es = static_cast<int64_t>(dtype_size(d.dtype));
  auto element = [&](const void* base, int64_t dense, double& v) -> Status {
    unsigned char raw[8] = {};
    ASSAY_RETURN_IF_ERROR(lane.read_back(static_cast<const unsigned char*>(base) +
                                             (d.offset + dense / cols * w.ld + dense % cols) * es,
                                         raw, es));
    v = load_as_double(d.dtype, raw);
    return ok_status();
  };
  double y1 = 0, y2 = 0, ref1 = 0, mag1 = 0, ref2 = 0, mag2 = 0;
  ASSAY_RETURN_IF_ERROR(element(x.related.first, l1, y1));
  ASSAY_RETURN_IF_ERROR(element(x.out, l, y2));
  ASSAY_RETURN_IF_ERROR(lane.read_back(x.related.ref + l1, &ref1, 8));
  ASSAY_RETURN_IF_ERROR(lane.read_back(x.related.mag + l1, &mag1, 8));
  ASSAY_RETURN_IF_ERROR(lane.read_back(x.ref + l, &ref2, 8));
  ASSAY_RETURN_IF_ERROR(lane.read_back(x.mag + l, &mag2, 8));
  const auto& r = x.related;
  const double t1 = device_output_tol(ref1, mag1, r.rel_out, r.rel_mag, r.floor, r.limit);
  const double t2 = device_output_tol(ref2, mag2, x.rel_out, x.rel_mag, x.floor,
                                      x.overflow_mag > 0 ? x.overflow_mag : x.out_max);
  const RelationElement e = relation_element(scale, ref1, t1, y1, ref2, t2, y2, x.out_max);
  return fmt::format("metamorphic '{}': {}{} on the transformed inputs is {:.9g}, the original launch gives {:.9g} "
                     "for it{}; |diff| {:.3g} > {:.3g} (both tolerances + |change of the exact result|)",
                     Params(s.c.params).s("relation"), s.c.tensors[static_cast<size_t>(s.outs[o])].name, where(w, l),
                     e.y2, e.y1, op.relate ? " (moved and scaled as the relation says)" : "", e.diff, e.tol);
}

/// The first launch's outputs into their save areas: the determinism rerun and a relation's
/// launch compare against them.
Status save_outputs(const Setup& s, gpu::Lane& lane) {
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const TensorDesc& d = s.c.tensors[static_cast<size_t>(s.outs[o])].desc;
    CUDA_CHECK(cudaMemcpyAsync(lane.dev_scratch() + s.save_off[o], lane.dev_tensor(s.outs[o]),
                               d.extent() * static_cast<int64_t>(dtype_size(d.dtype)), cudaMemcpyDeviceToDevice,
                               lane.stream()));
  }
  return ok_status();
}

/// The device path of build_setup: inputs drawn into the snapshot, outputs poisoned there,
/// the op's device reference into scratch after the save areas.
Status build_device_setup(const OpDef& op, const Contract& k, gpu::Lane& lane, const std::vector<gpu::ArenaTensor>& at,
                          int64_t save_bytes, Setup& s) {
  const Case& c = s.c;
  const auto& T = c.tensors;
  const int nt = static_cast<int>(T.size());
  for (int t = 0; t < nt; ++t) {
    const bool out = T[t].role == Role::kOut || overwritten(op, c, t);  // poisoned, not drawn
    if (out && !gpu::materialize_output_device_supports(T[t].desc))
      return unavailable(fmt::format("{}: output {} cannot be poisoned on the device ({})", op.name, T[t].name,
                                     dtype_name(T[t].desc.dtype)));
  }
  int64_t ref_bytes = 0;
  for (int t : s.outs) ref_bytes += 16 * s.views[t].rows * s.views[t].cols;
  // A metamorphic relation's transformed inputs get a reference of their own beside the first,
  // and their images and map a place after the op's scratch.
  const bool relation = op.transform && !Params(c.params).s("relation").empty();
  const int64_t refs_bytes = scratch_round_up(ref_bytes) * (relation ? 2 : 1);
  const int64_t op_scratch = op.device_reference.scratch ? op.device_reference.scratch(c) : 0;
  const int64_t rel_area = save_bytes + refs_bytes + scratch_round_up(op_scratch);
  gpu::DeviceDraw draw(lane.stream());
  ASSAY_RETURN_IF_ERROR(lane.layout_on_device(at, rel_area + (relation ? relation_bytes(op, s, false) : 0), draw));
  // Accumulated outputs take the host path (build_setup), so an arena output is exactly a kOut
  // or overwritten tensor: draw_on_device poisons it.
  for (int t = 0; t < nt; ++t) ASSAY_RETURN_IF_ERROR(draw_on_device(op, c, t, lane, draw));
  ASSAY_RETURN_IF_ERROR(draw.launch());
  auto buffers = [&](unsigned char* at, std::vector<DeviceOutput>& douts) {
    auto* refs = reinterpret_cast<double*>(at);
    for (int t : s.outs) {
      DeviceOutput d;
      d.rows = s.views[t].rows;
      d.cols = s.views[t].cols;
      d.ref = refs;
      d.mag = refs + d.rows * d.cols;
      refs += 2 * d.rows * d.cols;
      douts.push_back(d);
    }
  };
  buffers(lane.dev_scratch() + save_bytes, s.douts);
  DeviceContext ctx;
  ctx.stream = lane.stream();
  ctx.cublas = lane.cublas();
  ctx.scratch = lane.dev_scratch() + save_bytes + refs_bytes;
  ctx.scratch_bytes = op_scratch;
  const auto inputs = views_at(c, s.views, [&](int t) { return lane.dev_snapshot_tensor(t); });
  if (op.device_reference.prepare) ASSAY_RETURN_IF_ERROR(op.device_reference.prepare(c, inputs, ctx));
  ASSAY_RETURN_IF_ERROR(op.device_reference.compute(c, k.arithmetic(), inputs, s.douts, ctx));
  s.dctx = ctx;
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const int t = s.outs[o];
    const DeviceOutput& d = s.douts[o];
    gpu::DevCompare x;
    x.out_dtype = static_cast<int32_t>(T[t].desc.dtype);
    x.exact = d.exact ? 1 : 0;
    x.out = lane.dev_tensor(t);
    x.off = T[t].desc.offset;
    x.rows = d.rows;
    x.cols = d.cols;
    x.ld = s.views[t].ld;
    x.out_max = max_finite(T[t].desc.dtype);
    compare_against(x, d);
    s.cmp.push_back(x);
    OutputRef r;
    r.exact = d.exact;
    s.refs.push_back(std::move(r));  // the values stay on the device (read per element for details)
  }
  // An op's properties read decoded host inputs, and a transform works on host images: both
  // the drawn snapshot as the device reference left it (an op's device-side prepare included),
  // copied back once (outputs keep their poison). A device-side properties hook reads the device
  // buffers themselves.
  const bool props = op.properties && !op.device_reference.properties && !Params(c.params).s("relation").empty();
  std::vector<std::vector<unsigned char>> images;
  if (props || relation) {
    images.resize(static_cast<size_t>(nt));
    for (int t = 0; t < nt; ++t) {
      images[static_cast<size_t>(t)].resize(static_cast<size_t>(lane.tensor_bytes(t)));
      CUDA_CHECK(cudaMemcpyAsync(images[static_cast<size_t>(t)].data(), lane.dev_snapshot_tensor(t),
                                 images[static_cast<size_t>(t)].size(), cudaMemcpyDeviceToHost, lane.stream()));
    }
    CUDA_CHECK(cudaStreamSynchronize(lane.stream()));
  }
  if (props) {  // decoded as the host path decodes its images
    s.host.resize(static_cast<size_t>(nt));
    s.hv.clear();
    for (int t = 0; t < nt; ++t) {
      const auto& img = images[static_cast<size_t>(t)];
      s.host[static_cast<size_t>(t)] = decode(T[t].desc.dtype, img.data(), T[t].desc.extent());
      s.hv.push_back({s.host[static_cast<size_t>(t)].data() + T[t].desc.offset, s.views[t]});
    }
    s.host_inputs = true;
  }
  if (relation) {
    // The transformed inputs' reference into the second buffers, computed in the working arena
    // (every launch restores it from the snapshot first).
    std::vector<unsigned char*> timg;
    for (auto& img : images) timg.push_back(img.data());
    if (op.transform(c, timg)) {
      ASSAY_RETURN_IF_ERROR(stage_relation(op, s, lane, rel_area, images, nullptr));
      ASSAY_RETURN_IF_ERROR(load_transformed(s, lane));
      std::vector<DeviceOutput> douts2;
      buffers(lane.dev_scratch() + save_bytes + scratch_round_up(ref_bytes), douts2);
      const auto transformed = views_at(c, s.views, [&](int t) { return lane.dev_tensor(t); });
      ASSAY_RETURN_IF_ERROR(op.device_reference.compute(c, k.arithmetic(), transformed, douts2, ctx));
      for (size_t o = 0; o < s.outs.size(); ++o) compare_against(s.rel[o], douts2[o]);
    }
  }
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
    const bool out = (T[t].role == Role::kOut && !accumulated(t)) || overwritten(op, c, t);
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
    scratch += scratch_round_up(T[t].desc.extent() * static_cast<int64_t>(dtype_size(T[t].desc.dtype)));
  }
  // The vendor's outputs are kept beside the variant's, for every variant of the setup.
  for (int t : s.outs) {
    const bool computed = op.vendor.computes(T[t].name);
    s.vendor_off.push_back(computed ? scratch : -1);
    if (computed) scratch += scratch_round_up(T[t].desc.extent() * static_cast<int64_t>(dtype_size(T[t].desc.dtype)));
  }
  s.save_bytes = scratch;
  // An accumulated output's expectation adds the prefill to the result on the host (accumulate
  // below), with the op's per-term figures, and a partially written output's unwritten elements
  // are unchecked through its host tolerances (Contract::writes_only: a vendor library's
  // outputs it does not compute): such a variant takes the host path on every case.
  s.on_device = on_device(op, c) && k.accumulated().empty() && k.partial().empty();
  if (s.on_device) {
    const PhaseTimer timer(Phase::kDeviceReference);
    return build_device_setup(op, k, lane, at, scratch, s);
  }
  std::optional<PhaseTimer> inputs_timer(std::in_place, Phase::kInputs);
  const bool relation = op.transform && !Params(c.params).s("relation").empty();
  ASSAY_RETURN_IF_ERROR(lane.layout(at, extra, scratch + (relation ? relation_bytes(op, s, true) : 0)));
  gpu::DeviceDraw draw(lane.stream());
  std::vector<int> drawn_on_device;
  for (int t = 0; t < nt; ++t) {
    s.images.push_back(lane.host_tensor(t));
    const uint64_t stream = fnv1a64(T[t].name.data(), T[t].name.size());
    if (T[t].role == Role::kOut && accumulated(t)) {
      ValueRecipe prefill;  // an accumulated output starts from values of its own
      prefill.seed = stream;
      materialize(T[t].desc, prefill, stream, s.images.back());
    } else if (T[t].role == Role::kOut || overwritten(op, c, t)) {
      materialize_output(T[t].desc, s.images.back());
    } else if (T[t].desc.numel() >= kDeviceDrawElements && gpu::materialize_device_supports(T[t].desc)) {
      // The same bytes as materialize() (MaterializeDeviceGpu.HalfAndFp32ImagesAreTheHostsBytes),
      // drawn into the snapshot and copied back for the host reference and the op's prepare.
      ASSAY_RETURN_IF_ERROR(draw_on_device(op, c, t, lane, draw));
      drawn_on_device.push_back(t);
    } else {
      materialize(T[t].desc, T[t].values, stream, s.images.back());
    }
  }
  if (!drawn_on_device.empty()) {
    ASSAY_RETURN_IF_ERROR(draw.launch());
    for (int t : drawn_on_device)
      CUDA_CHECK(cudaMemcpyAsync(s.images[static_cast<size_t>(t)], lane.dev_snapshot_tensor(t),
                                 static_cast<size_t>(lane.tensor_bytes(t)), cudaMemcpyDeviceToHost, lane.stream()));
    CUDA_CHECK(cudaStreamSynchronize(lane.stream()));
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
  inputs_timer.reset();
  // The op's reference sees an accumulated output as the kernel would overwrite it.
  std::vector<HostTensor> ref_in = s.hv;
  std::vector<std::vector<double>> zero_fill;
  for (int t = 0; t < nt; ++t)
    if (T[t].role == Role::kOut && accumulated(t)) {
      zero_fill.emplace_back(s.host[static_cast<size_t>(t)].size(), 0.0);
      ref_in[static_cast<size_t>(t)].data = zero_fill.back().data() + T[t].desc.offset;
    }
  ASSAY_RETURN_IF_ERROR(compute_refs(op, c, k.arithmetic(), ref_in, s.refs, &s.hv));
  if (s.refs.size() != s.outs.size())
    return internal_error(fmt::format("{}: reference gave {} outputs", op.name, s.refs.size()));
  // An accumulated output's expectation: prefill + result, rounded once more into the output
  // type, or k times for a kernel that adds term by term in place (OutputRef::acc_terms). The
  // prefill is the engine's, not the op's: the exact tier does not carry over.
  auto accumulate = [&](std::vector<OutputRef>& refs) {
    for (size_t o = 0; o < s.outs.size(); ++o) {
      const int t = s.outs[o];
      if (!accumulated(t)) continue;
      const View2D& w = s.views[t];
      auto& r = refs[o];
      const bool terms = r.acc_terms.size() == r.ref.size() && r.acc_mag.size() == r.ref.size();
      // A kernel may add in fp32 and then store into a narrower float type: one fp32 rounding
      // of the sum before the store's, |rn(rn32(x)) - x| <= (u + u32 + u u32) |x| + eta, where
      // eta is half the subnormal spacing of each rounding (a sum below the smallest normal
      // rounds to an absolute grid, not a relative one: fp16 2^-25).
      const DType odt = T[t].desc.dtype;
      const bool narrow = dtype_is_float(odt) && dtype_size(odt) < 4;
      const double u = unit_roundoff(odt);
      const double u32 = narrow ? unit_roundoff(DType::kF32) : 0.0;
      const double g = u + u32 + u * u32;
      const double eta = dtype_is_float(odt)
                             ? min_subnormal(odt) / 2 + (narrow ? (1 + u) * min_subnormal(DType::kF32) / 2 : 0.0)
                             : 0.0;
      r.exact = false;
      for (int64_t i = 0; i < w.rows; ++i)
        for (int64_t j = 0; j < w.cols; ++j) {
          const size_t l = static_cast<size_t>(i * w.cols + j);
          const double pre = s.hv[static_cast<size_t>(t)].at(i, j), sum = pre + r.ref[l];
          r.tol[l] = r.tol[l] * (1 + g) + g * std::fabs(sum) + eta;
          if (terms)
            r.tol[l] += gamma_n(r.acc_terms[l], u) * (std::fabs(pre) + r.acc_mag[l]) + static_cast<double>(r.acc_terms[l]) * eta;
          r.ref[l] = sum;
        }
    }
  };
  auto* ex = reinterpret_cast<double*>(lane.host_extra());
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const int t = s.outs[o];
    const View2D& w = s.views[t];
    const size_t n = static_cast<size_t>(w.rows * w.cols);
    if (s.refs[o].ref.size() != n || s.refs[o].tol.size() != n)
      return internal_error(fmt::format("{}: reference of {} has the wrong size", op.name, T[t].name));
  }
  std::optional<PhaseTimer> bound_timer(std::in_place, Phase::kBound);
  accumulate(s.refs);
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const int t = s.outs[o];
    const View2D& w = s.views[t];
    const size_t n = static_cast<size_t>(w.rows * w.cols);
    auto& r = s.refs[o];
    if (const auto* p = partial(t)) {
      const Params pp(c.params);
      for (int64_t i = 0; i < w.rows; ++i)
        for (int64_t j = 0; j < w.cols; ++j)
          if (!p->written(pp, i, j)) s.refs[o].tol[static_cast<size_t>(i * w.cols + j)] = INFINITY;
    }
    std::copy(r.ref.begin(), r.ref.end(), ex + s.ref_off[o]);
    std::copy(r.tol.begin(), r.tol.end(), ex + s.ref_off[o] + n);
  }
  bound_timer.reset();
  {
    const PhaseTimer timer(Phase::kUpload);
    ASSAY_RETURN_IF_ERROR(lane.upload());
  }

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

  // The metamorphic transform, its images and its reference, staged after the save areas.
  if (relation) {
    std::vector<std::vector<unsigned char>> timages(static_cast<size_t>(nt));
    std::vector<unsigned char*> timg;
    for (int t = 0; t < nt; ++t) {
      timages[static_cast<size_t>(t)].assign(s.images[static_cast<size_t>(t)],
                                             s.images[static_cast<size_t>(t)] + lane.tensor_bytes(t));
      timg.push_back(timages[static_cast<size_t>(t)].data());
    }
    if (op.transform(c, timg)) {
      std::vector<std::vector<double>> host2(static_cast<size_t>(nt));
      std::vector<HostTensor> hv2;
      decode_all(timg, host2, hv2);
      std::vector<OutputRef> refs2;
      ASSAY_RETURN_IF_ERROR(compute_refs(op, c, k.arithmetic(), hv2, refs2));
      if (refs2.size() != s.outs.size())
        return internal_error(fmt::format("{}: reference gave {} outputs", op.name, refs2.size()));
      for (size_t o = 0; o < s.outs.size(); ++o)
        if (refs2[o].ref.size() != s.refs[o].ref.size() || refs2[o].tol.size() != s.refs[o].ref.size())
          return internal_error(fmt::format("{}: reference of {} on the transformed inputs has the wrong size", op.name,
                                            T[s.outs[o]].name));
      accumulate(refs2);
      ASSAY_RETURN_IF_ERROR(stage_relation(op, s, lane, scratch, timages, &refs2));
    }
  }
  return ok_status();
}

std::vector<DevTensor> dev_views(const Case& c, const std::vector<View2D>& views, gpu::Lane& lane) {
  return views_at(c, views, [&](int t) { return lane.dev_tensor(t); });
}

/// Reference and tolerance of output o at dense index i (read back on the device path).
std::pair<double, double> ref_tol_at(const Setup& s, size_t o, int64_t i, gpu::Lane& lane) {
  if (!s.on_device) return {s.refs[o].ref[static_cast<size_t>(i)], s.refs[o].tol[static_cast<size_t>(i)]};
  const DeviceOutput& d = s.douts[o];
  double r = NAN, m = NAN;
  if (!lane.read_back(d.ref + i, &r, 8).ok() || !lane.read_back(d.mag + i, &m, 8).ok()) return {NAN, NAN};
  return {r, d.rel_out * std::fabs(r) + d.rel_mag * m + d.floor};
}

/// Runs the op's vendor launcher (VendorDef::run or launch).
/// The thread's last CUDA error is cleared after it: the library's status says how the call
/// went, and a library that tries configurations until one runs (cuDNN's engine lists) may leave
/// a dropped try's launch error behind, which the next variant's launcher, reading the last
/// error after its own launch, would report as its own. A sticky error is not cleared by this
/// and still fails what follows.
Status call_vendor(const OpDef& op, const Params& p, const std::vector<DevTensor>& t, cudaStream_t stream) {
  Status st = ok_status();
  if (op.vendor.run) {
    st = op.vendor.run(p, t, stream);
  } else if (const cudaError_t e = op.vendor.launch(p, t, stream); e != cudaSuccess) {
    st = unavailable(cudaGetErrorString(e));
  }
  (void)cudaGetLastError();
  return st;
}

/// The vendor column on the current setup, before the setup's first variant runs: one launch,
/// the same compares and the arena's regions (a library that writes outside an output's view
/// is discarded, not trusted), its outputs saved to scratch for the vendor-relative ratio of
/// every variant. Check slot `slot`, fetched by the caller; read_vendor reads it.
Status launch_vendor(const OpDef& op, Setup& s, gpu::Lane& lane, int slot, bool& launched) {
  launched = false;
  ASSAY_RETURN_IF_ERROR(lane.restore());
  const Status st = call_vendor(op, Params(s.c.params), dev_views(s.c, s.views, lane), lane.stream());
  if (!st.ok()) {
    s.vendor_note = fmt::format("vendor column ({}) not run: {}", op.vendor.name, st.message());
    return ok_status();
  }
  gpu::CheckParams vp = lane.check_params();
  for (size_t o = 0; o < s.cmp.size(); ++o) {
    vp.compares[o] = s.cmp[o];
    if (s.vendor_off[o] < 0) vp.compares[o].check_bound = 0;
  }
  vp.ncompares = static_cast<int32_t>(s.cmp.size());
  ASSAY_RETURN_IF_ERROR(lane.check(vp, slot));
  const auto& T = s.c.tensors;
  for (size_t o = 0; o < s.outs.size(); ++o)
    if (s.vendor_off[o] >= 0)
      CUDA_CHECK(cudaMemcpyAsync(lane.dev_scratch() + s.vendor_off[o], lane.dev_tensor(s.outs[o]),
                                 T[s.outs[o]].desc.extent() * static_cast<int64_t>(dtype_size(T[s.outs[o]].desc.dtype)),
                                 cudaMemcpyDeviceToDevice, lane.stream()));
  launched = true;
  s.vendor_kept = true;
  return ok_status();
}

/// The float ratio and the element index packed in a check kernel's worst key.
float key_float(unsigned long long key) {
  return std::bit_cast<float>(static_cast<uint32_t>(key >> 32));
}
int64_t key_index(unsigned long long key) {
  return static_cast<int64_t>(~static_cast<uint32_t>(key & 0xffffffffu));
}

void read_vendor(const OpDef& op, Setup& s, const gpu::CheckResult& r, int nregions) {
  s.vendor_ratio = 0;
  s.vendor_violations = 0;
  uint64_t outside = 0;
  for (int ri = 0; ri < nregions; ++ri) outside += r.regions[ri].changed;
  if (outside > 0) {
    s.vendor_ratio = -1;
    s.vendor_kept = false;
    s.vendor_note = fmt::format("vendor column ({}) discarded: it changed {} elements outside the output views or "
                                "its inputs", op.vendor.name, outside);
    return;
  }
  for (size_t o = 0; o < s.cmp.size(); ++o) {
    if (s.vendor_off[o] < 0) continue;
    const auto& cr = r.compares[o];
    s.vendor_ratio = std::max(s.vendor_ratio, static_cast<double>(key_float(cr.worst_key)));
    s.vendor_violations += static_cast<int64_t>(cr.bound + cr.naninf);
  }
}

/// The compare of output o with the vendor-relative ratio against the kept vendor output.
void with_vendor(const OpDef& op, const Setup& s, gpu::Lane& lane, size_t o, gpu::DevCompare& x) {
  if (!s.vendor_kept || s.vendor_off[o] < 0) return;
  const DType dt = s.c.tensors[static_cast<size_t>(s.outs[o])].desc.dtype;
  x.vendor = lane.dev_scratch() + s.vendor_off[o];
  x.vr_bits = dtype_is_float(dt) ? precision_bits(dt) : 0;
  x.vr_min_normal = dtype_is_float(dt) ? min_normal(dt) : 0;
  x.vr_min_sub = dtype_is_float(dt) ? min_subnormal(dt) : 0;
  x.vr_max = max_finite(dt);
  x.vr_alpha = op.vendor.warn_ratio;
}

/// The vendor-relative ratio of a variant's first launch (check result `r`) into `m`, with an
/// accuracy warning naming the variant's worst element when the ratio passes
/// OpDef::vendor.warn_ratio.
Status vendor_relative(const OpDef& op, const Setup& s, gpu::Lane& lane, const gpu::CheckResult& r, Metrics& m) {
  const auto& T = s.c.tensors;
  double kernel = 0, vendor = 0, worst = 0;
  int64_t over = 0, at = -1;
  size_t at_o = 0;
  bool measured = false;
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const auto& cr = r.compares[o];
    if (s.vendor_off[o] < 0 || cr.vrel_vendor == 0) continue;  // no vendor column, or no finite element
    measured = true;
    over += static_cast<int64_t>(cr.vrel_over);
    worst = std::max(worst, static_cast<double>(key_float(cr.vrel_key)));
    vendor = std::max(vendor, static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(cr.vrel_vendor))));
    const double k = key_float(cr.vrel_kernel);
    if (at < 0 || k > kernel) kernel = k, at = key_index(cr.vrel_kernel), at_o = o;
  }
  if (!measured) return ok_status();
  m.vendor_rel_ratio = kernel / vendor;  // vendor > 0: its errors count at least one ulp
  m.vendor_rel_worst = worst;
  m.vendor_rel_elements = over;
  if (!(m.vendor_rel_ratio > op.vendor.warn_ratio)) return ok_status();
  // The variant's worst element, read back for the warning line (warnings are rare).
  const int t = s.outs[at_o];
  const auto& d = T[static_cast<size_t>(t)].desc;
  const View2D& w = s.views[static_cast<size_t>(t)];
  const int64_t cols = std::max<int64_t>(w.cols, 1);
  const int64_t e = d.offset + (at / cols) * w.ld + at % cols;
  const int64_t es = static_cast<int64_t>(dtype_size(d.dtype));
  std::vector<unsigned char> ko(static_cast<size_t>(es)), vo(static_cast<size_t>(es));
  ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_scratch() + s.save_off[at_o] + e * es, ko.data(), es));
  ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_scratch() + s.vendor_off[at_o] + e * es, vo.data(), es));
  const double kv = load_as_double(d.dtype, ko.data()), vv = load_as_double(d.dtype, vo.data());
  const auto [rv, tv] = ref_tol_at(s, at_o, at, lane);
  m.accuracy_warning = fmt::format(
      "worst error/bound {:.3g} is {:.3g}x {}'s worst {:.3g} (its errors counted as at least one ulp): {}{} = {:.9g}, "
      "{} {:.9g}, reference {:.9g}, {} {:.3g}; element-wise |out - ref| / max(|vendor - ref|, ulp) up to {:.3g}x, "
      "{} elements above {:g}x",
      kernel, m.vendor_rel_ratio, op.vendor.name, vendor, T[static_cast<size_t>(t)].name, where(w, at), kv,
      op.vendor.name, vv, rv, op.bound_name, tv, worst, over, op.vendor.warn_ratio);
  return ok_status();
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

/// The vendor column's share of the lanes (harness/vendor_share.h): one clock per lane thread,
/// one pool of slots per process. Only its host time counts (plans, graphs, heuristics, launches,
/// the warning's read-back): that is what makes a library slow per small case; its kernels
/// overlap the lane's other work.
namespace {

thread_local VendorClock vendor_clock;
thread_local bool vendor_lane_counted = false;
VendorSlots vendor_slots;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Whether this case's column runs; true takes a slot, which VendorTimer(true) gives back.
bool vendor_admit(double share) {
  if (share >= 1) return true;    // a replay, the library API: every case, no cap
  if (share <= 0) return false;   // the column turned off
  if (!vendor_lane_counted) vendor_lane_counted = true, vendor_slots.add_lane();
  return vendor_clock.within(share, steady_seconds()) && vendor_slots.acquire(share);
}

/// Adds its lifetime to the vendor column's phase and to this thread's vendor clock; gives back
/// the slot vendor_admit took, if it holds one.
class VendorTimer {
 public:
  explicit VendorTimer(bool slot = false) : slot_(slot), t0_(std::chrono::steady_clock::now()) {}
  ~VendorTimer() {
    vendor_clock.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
    if (slot_) vendor_slots.release();
  }
  VendorTimer(const VendorTimer&) = delete;
  VendorTimer& operator=(const VendorTimer&) = delete;

 private:
  PhaseTimer phase_{Phase::kVendor};
  bool slot_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

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
    verdict.metrics.reference = s.on_device ? op.device_reference.name : "host-f64";
    verdict.metrics.key = fmt::format("{}/{}", dtype_name(T[0].desc.dtype), value_class_name(T[0].values.cls));
    verdict.metrics.exact_tier = std::any_of(refs.begin(), refs.end(), [](const OutputRef& r) { return r.exact; });
    const bool every = !op.every_check || op.every_check(c);
    const int runs = every ? 2 : 1;  // the second launch is the determinism rerun
    std::vector<std::string> not_run;
    if (!every) not_run.push_back("determinism not rerun, vendor column not run (sampled)");
    cudaError_t launch_err = cudaSuccess;
    std::vector<gpu::CheckParams> checks;
    // The vendor column first, once per setup: its kept outputs serve every variant's ratio. Not
    // for the vendor itself run as a variant: its verdict already judges the library.
    const bool column = op.vendor.defined() && every && !probe && !v->vendor;
    const double share = lane.options.vendor_share;
    const bool admitted = column && !s.vendor_done && vendor_admit(share);
    if (column && !s.vendor_done && !admitted) {
      s.vendor_done = true;  // for every variant of this case
      s.vendor_violations = -1;
      s.vendor_note = fmt::format("vendor-relative ratio not measured on this case ({} is held to {:.0f}% of the "
                                  "lane's time: --vendor-share)",
                                  op.vendor.name, 100 * lane.options.vendor_share);
    }
    const bool vendor_now = column && !s.vendor_done;
    bool vendor_launched = false;
    if (vendor_now) {
      const VendorTimer timer(admitted && share < 1);
      ASSAY_RETURN_IF_ERROR(launch_vendor(op, s, lane, runs, vendor_launched));
    }
    std::optional<PhaseTimer> launch_timer(std::in_place, Phase::kLaunchCheck);
    const int vendor_regions = vendor_launched ? lane.check_params().nregions : 0;
    const bool vendor_rel = column && s.vendor_kept;
    const auto dv = dev_views(cv, views, lane);
    for (int rep = 1; rep < lane.options.repeat; ++rep) {  // a kernel that degrades after N calls
      ASSAY_RETURN_IF_ERROR(lane.restore());
      const cudaError_t e = v->launch(params, dv, lane.stream());
      if (e != cudaSuccess && launch_err == cudaSuccess) launch_err = e;
    }
    for (int run = 0; run < runs; ++run) {
      ASSAY_RETURN_IF_ERROR(lane.restore());
      const cudaError_t e = v->launch(params, dv, lane.stream());
      if (e != cudaSuccess && launch_err == cudaSuccess) launch_err = e;
      gpu::CheckParams cp = lane.check_params();
      for (size_t o = 0; o < s.cmp.size(); ++o) {
        cp.compares[o] = s.cmp[o];
        if (run == 1 && v->deterministic) cp.compares[o].prev = lane.dev_scratch() + s.save_off[o];
        if (run == 0 && vendor_rel) with_vendor(op, s, lane, o, cp.compares[o]);
      }
      cp.ncompares = static_cast<int32_t>(s.cmp.size());
      ASSAY_RETURN_IF_ERROR(lane.check(cp, run));
      checks.push_back(cp);
      if (run == 0) ASSAY_RETURN_IF_ERROR(save_outputs(s, lane));
    }
    // The metamorphic relation's launch on the transformed inputs, compared on the device with
    // the first launch's saved outputs; its check comes back with the others.
    const int relation_slot = runs + (vendor_launched ? 1 : 0);
    cudaError_t relation_err = cudaSuccess;
    if (s.transformed) {
      ASSAY_RETURN_IF_ERROR(lane.restore());
      ASSAY_RETURN_IF_ERROR(load_transformed(s, lane));
      relation_err = v->launch(params, dv, lane.stream());
      if (relation_err == cudaSuccess) {
        gpu::CheckParams rp = lane.check_params();
        rp.nregions = 0;
        std::copy(s.rel.begin(), s.rel.end(), rp.compares);
        rp.ncompares = static_cast<int32_t>(s.rel.size());
        ASSAY_RETURN_IF_ERROR(lane.check(rp, relation_slot));
      }
    }
    const bool relation_checked = s.transformed && relation_err == cudaSuccess;
    launch_timer.reset();
    {
      const PhaseTimer timer(Phase::kWait);
      ASSAY_RETURN_IF_ERROR(lane.fetch_results(relation_slot + (relation_checked ? 1 : 0)));
    }
    if (vendor_now) {
      s.vendor_done = true;
      if (vendor_launched) read_vendor(op, s, lane.result(runs), vendor_regions);
    }
    if (column) {
      verdict.metrics.vendor_max_ratio = s.vendor_ratio;
      // The column is judged only under the vendor's own declared arithmetic and conventions.
      verdict.metrics.vendor_violations = s.key == setup_key(op.vendor.contract) ? s.vendor_violations : -1;
      if (!s.vendor_note.empty()) not_run.push_back(s.vendor_note);
    }
    if (vendor_rel && s.vendor_kept && launch_err == cudaSuccess) {
      const VendorTimer timer;
      ASSAY_RETURN_IF_ERROR(vendor_relative(op, s, lane, lane.result(0), verdict.metrics));
    }
    // A relation the device path cannot run: neither a transform nor properties to run it.
    if (s.on_device && !params.s("relation").empty() && !s.transformed && !op.properties)
      not_run.push_back(fmt::format("relation '{}' not run ({} reference: the op has no transform for it)",
                                    params.s("relation"), op.device_reference.name));
    verdict.metrics.not_run = fmt::format("{}", fmt::join(not_run, "; "));
    if (launch_err == cudaErrorNotSupported && v->vendor && !probe) {
      // A vendor library declining a case (no algorithm, an unsupported type pair) is outside
      // its support set, which no contract rule spells out: neither a pass nor a failure.
      verdict.not_applicable = fmt::format("{} declined the case (operation not supported)", v->name);
      verdicts.push_back(std::move(verdict));
      continue;
    }
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
    for (int run = 0; run < runs; ++run) {
      const auto& r = lane.result(run);
      for (int ri = 0; ri < checks[static_cast<size_t>(run)].nregions; ++ri) {
        const auto& rr = r.regions[ri];
        const bool guard = ri % 2 == 0;
        const int t = std::min(ri / 2, nt - 1);
        const std::string& name = T[t].name;
        if (rr.changed) {
          const bool input = checks[static_cast<size_t>(run)].regions[ri].kind == gpu::DevRegion::kBytesEqual;
          const int64_t first = gpu::first_index(rr.changed, rr.changed_first);
          std::string what = guard   ? fmt::format("guard band near {} changed", name)
                             : input ? fmt::format("{} changed although it is an input", name)
                                     : fmt::format("{} changed outside its view", name);
          if (!guard && !input && first >= 0) {
            // Where in the allocation: past the last element, before the first, or in a row's padding.
            const View2D& w = views[t];
            const int64_t off = T[t].desc.offset, ld = std::max<int64_t>(w.ld, 1);
            const int64_t end = w.rows == 0 ? off : off + (w.rows - 1) * ld + w.cols;
            what = first >= end  ? fmt::format("element {} past the end of {} (its last element is {}) was written",
                                               first, name, end - 1)
                   : first < off ? fmt::format("element {} before the first element of {} (offset {}) was written",
                                               first, name, off)
                                 : fmt::format("element {} (row {}, column {} of the padded layout) outside the view "
                                               "of {} was written",
                                               first, (first - off) / ld, (first - off) % ld, name);
          }
          add(guard ? FailureKind::kGuard : (input ? FailureKind::kInputWritten : FailureKind::kGapWritten), name,
              static_cast<int64_t>(rr.changed), first, std::move(what));
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
        auto at = [&](unsigned long long n, unsigned long long f) {
          const int64_t i = gpu::first_index(n, f);
          const auto [rv, tv] = ref_tol_at(s, o, i, lane);
          return fmt::format("first {}{} (reference {:.9g}, tolerance {:.3g})", name, where(views[t], i), rv, tv);
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
        const double ratio = static_cast<double>(key_float(cr.worst_key));
        if (ratio > verdict.metrics.max_ratio) {
          verdict.metrics.max_ratio = ratio;
          verdict.metrics.worst_index = key_index(cr.worst_key);
        }
        verdict.metrics.max_abs_err =
            std::max(verdict.metrics.max_abs_err, std::bit_cast<double>(static_cast<uint64_t>(cr.max_abs_bits)));
      }
    }

    // ---- properties and metamorphic relations (cases that name one) -------------------------
    const std::string relation = params.s("relation");
    const bool properties = op.properties && (!s.on_device || s.host_inputs);
    const bool device_props = s.on_device && static_cast<bool>(op.device_reference.properties);
    if (!relation.empty() && (properties || device_props || s.transformed)) {
      const PhaseTimer timer(Phase::kProperties);
      std::vector<Failure> props;
      if (device_props) {
        DevicePropertiesIn in;
        in.inputs = views_at(cv, views, [&](int t) { return lane.dev_snapshot_tensor(t); });
        for (size_t o = 0; o < outs.size(); ++o) {
          const auto& d = T[outs[o]].desc;
          in.outputs.push_back({lane.dev_scratch() + s.save_off[o] + d.offset * static_cast<int64_t>(dtype_size(d.dtype)),
                                d.dtype, views[outs[o]], d.shape, d.strides});
        }
        in.refs = s.douts;
        for (size_t o = 0; o < in.refs.size(); ++o)
          if (!(in.refs[o].overflow_mag > 0)) in.refs[o].overflow_mag = s.cmp[o].out_max;
        ASSAY_RETURN_IF_ERROR(op.device_reference.properties(cv, in, s.dctx, props));
      }
      // The device path's references, read back for the host properties.
      std::vector<OutputRef> dev1;
      if (s.on_device && properties) {
        std::vector<double> out_max;
        for (const auto& x : s.cmp) out_max.push_back(x.out_max);
        ASSAY_RETURN_IF_ERROR(read_device_refs(lane, s.douts, out_max, dev1));
      }
      if (properties) {
        std::vector<std::vector<double>> out1(outs.size());
        std::vector<HostTensor> ov1;
        for (size_t o = 0; o < outs.size(); ++o) {
          const auto& d = T[outs[o]].desc;
          std::vector<unsigned char> raw(static_cast<size_t>(d.extent()) * dtype_size(d.dtype));
          ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_scratch() + s.save_off[o], raw.data(),
                                               static_cast<int64_t>(raw.size())));
          out1[o] = decode(d.dtype, raw.data(), d.extent());
          ov1.push_back({out1[o].data() + d.offset, views[outs[o]]});
        }
        op.properties(cv, s.hv, ov1, s.on_device ? dev1 : refs, props);
      }
      if (s.transformed && relation_err != cudaSuccess)
        props.push_back({FailureKind::kLaunchError, "", 1, -1,
                         fmt::format("on the transformed inputs ({}): {}", relation, cudaGetErrorString(relation_err))});
      if (relation_checked)
        for (size_t o = 0; o < outs.size(); ++o) {
          const auto& cr = lane.result(relation_slot).compares[o];
          if (cr.relation == 0) continue;
          auto detail = relation_detail(op, s, lane, o, gpu::first_index(cr.relation, cr.relation_first));
          if (!detail.ok()) return detail.status();
          props.push_back({FailureKind::kProperty, T[outs[o]].name, static_cast<int64_t>(cr.relation), -1, *detail});
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
  in.exact_tier = s.refs.front().exact;
  if (s.on_device) {
    const DeviceOutput& dd = s.douts.front();
    const int64_t n = dd.rows * dd.cols;
    std::vector<double> mag(static_cast<size_t>(n));
    in.ref.resize(static_cast<size_t>(n));
    ASSAY_RETURN_IF_ERROR(lane.read_back(dd.ref, in.ref.data(), n * 8));
    ASSAY_RETURN_IF_ERROR(lane.read_back(dd.mag, mag.data(), n * 8));
    in.tol.resize(static_cast<size_t>(n));
    for (size_t l = 0; l < in.tol.size(); ++l) in.tol[l] = dd.rel_out * std::fabs(in.ref[l]) + dd.rel_mag * mag[l] + dd.floor;
    if (!std::isnan(dd.expected_rel_mag)) {
      in.tol_expected.resize(in.tol.size());
      for (size_t l = 0; l < in.tol.size(); ++l)
        in.tol_expected[l] =
            dd.expected_rel_out * std::fabs(in.ref[l]) + dd.expected_rel_mag * mag[l] + dd.expected_floor;
    }
    in.reference = op.device_reference.name;
    // Host copies of the inputs, for the element view.
    for (size_t u = 0; u < c.tensors.size(); ++u) {
      const auto& du = c.tensors[u].desc;
      std::vector<unsigned char> img(static_cast<size_t>(du.extent()) * dtype_size(du.dtype));
      ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_snapshot_tensor(static_cast<int>(u)), img.data(),
                                           static_cast<int64_t>(img.size())));
      s.host.push_back(decode(du.dtype, img.data(), du.extent()));
    }
  } else {
    in.ref = s.refs.front().ref;
    in.tol = s.refs.front().tol;
    in.tol_expected = s.refs.front().expected;
    in.reference = "host-f64";
  }
  if (op.vendor.computes(c.tensors[static_cast<size_t>(t)].name)) {
    ASSAY_RETURN_IF_ERROR(lane.restore());
    if (call_vendor(op, Params(s.c.params), dev_views(s.c, s.views, lane), lane.stream()).ok()) {
      std::vector<unsigned char> vraw(raw.size());
      ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_tensor(t), vraw.data(), static_cast<int64_t>(vraw.size())));
      const std::vector<double> vall = decode(d.dtype, vraw.data(), d.extent());
      in.vendor.resize(static_cast<size_t>(w.rows * w.cols));
      for (int64_t i = 0; i < w.rows; ++i)
        for (int64_t j = 0; j < w.cols; ++j)
          in.vendor[static_cast<size_t>(i * w.cols + j)] = vall[static_cast<size_t>(d.offset + i * w.ld + j)];
    }
  }
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
      if (host.size() <= t) break;
      const double* base = host[t].data() + tensors[t].desc.offset + r * v2.ld;
      line += fmt::format("{}[{}][..]: ", tensors[t].name, r);
      for (int64_t k = 0; k < std::min<int64_t>(v2.cols, 8); ++k) line += fmt::format("{:.6g} ", base[k]);
      if (v2.cols > 8) line += "... ";
    }
    return line;
  };
  return in;
}

StatusOr<nlohmann::json> time_model(const OpDef& op, const VariantDef& v, gpu::Lane& lane) {
  std::vector<ValueRecipe> recipes;
  for (const auto& t : op.tensors)
    if (t.role != Role::kOut) {
      ValueRecipe r;
      r.cls = ValueClass::kNormal;
      r.seed = 1;
      recipes.push_back(r);
    }
  ASSAY_ASSIGN_OR_RETURN(Case c, build_case(op, op.large, recipes, std::vector<Layout>(op.tensors.size())));
  ASSAY_RETURN_IF_ERROR(validate_case(op, c));
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  nlohmann::json out;
  out["params"] = op.large;
  out["variant"] = v.name;
  // The whole checked run: first a warm-up (it pays for growing the lane's buffers).
  bool passed = true;
  for (const char* key : {"full_run_first_ms", "full_run_ms"}) {
    const auto t = Clock::now();
    ASSAY_ASSIGN_OR_RETURN(auto verdicts, run_model(op, {&v}, c, lane, false));
    out[key] = ms_since(t);
    passed = passed && verdicts.front().passed();
  }
  {
    // The same without the vendor column (a campaign holds it to a share of the lane's time):
    // the median of three, as the steps below, since the ratio to the floor rests on it.
    const double share = lane.options.vendor_share;
    lane.options.vendor_share = 0;
    std::vector<double> t3;
    for (int i = 0; i < 3; ++i) {
      const auto t = Clock::now();
      auto verdicts = run_model(op, {&v}, c, lane, false);
      if (!verdicts.ok()) {
        lane.options.vendor_share = share;
        return verdicts.status();
      }
      t3.push_back(ms_since(t));
      passed = passed && verdicts->front().passed();
    }
    lane.options.vendor_share = share;
    std::sort(t3.begin(), t3.end());
    out["full_run_without_vendor_ms"] = t3[1];
    out["full_run_without_vendor_runs_ms"] = t3;
  }
  out["passed"] = passed;
  const bool every = !op.every_check || op.every_check(c);
  out["case_runs_every_check"] = every;
  Setup s;
  const auto tp = Clock::now();
  ASSAY_RETURN_IF_ERROR(build_setup(op, v, c, lane, s));
  CUDA_CHECK(cudaStreamSynchronize(lane.stream()));
  out["prepare_ms"] = ms_since(tp);  // inputs, reference and bound
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  auto median3 = [&](auto&& body) -> StatusOr<double> {
    std::vector<double> t;
    for (int i = 0; i < 3; ++i) {
      const auto h0 = Clock::now();
      CUDA_CHECK(cudaEventRecord(e0, lane.stream()));
      ASSAY_RETURN_IF_ERROR(body());
      CUDA_CHECK(cudaEventRecord(e1, lane.stream()));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(s.on_device ? static_cast<double>(ms) : std::max<double>(ms, ms_since(h0)));
    }
    std::sort(t.begin(), t.end());
    return t[1];
  };
  const auto dv = dev_views(s.c, s.views, lane);
  ASSAY_ASSIGN_OR_RETURN(double kernel_ms, median3([&]() -> Status {
                           const cudaError_t e = v.launch(Params(s.c.params), dv, lane.stream());
                           return e == cudaSuccess ? ok_status() : internal_error(cudaGetErrorString(e));
                         }));
  ASSAY_ASSIGN_OR_RETURN(double ref_ms, median3([&]() -> Status {
                           if (!s.on_device) {
                             std::vector<OutputRef> r;
                             return compute_refs(op, s.c, v.contract.arithmetic(), s.hv, r);
                           }
                           const auto in = views_at(s.c, s.views, [&](int t) { return lane.dev_snapshot_tensor(t); });
                           std::vector<DeviceOutput> d = s.douts;
                           return op.device_reference.compute(s.c, v.contract.arithmetic(), in, d, s.dctx);
                         }));
  // The other steps of a checked run, each alone: what the run cannot do without (the floor),
  // against what it took.
  ASSAY_ASSIGN_OR_RETURN(double restore_ms, median3([&]() { return lane.restore(); }));
  // The check reads the kernel's output: on the restored poison every element would fail, and
  // the failures' atomics (not the comparison) would set the time.
  if (const cudaError_t e = v.launch(Params(s.c.params), dv, lane.stream()); e != cudaSuccess)
    return internal_error(cudaGetErrorString(e));
  gpu::CheckParams cp = lane.check_params();
  for (size_t o = 0; o < s.cmp.size(); ++o) cp.compares[o] = s.cmp[o];
  cp.ncompares = static_cast<int32_t>(s.cmp.size());
  ASSAY_ASSIGN_OR_RETURN(double check_ms, median3([&]() { return lane.check(cp, 0); }));
  // The rerun's check compares against the first launch's saved outputs and reads the reference
  // only where the bits differ: less than the first check, so timed on its own.
  // A variant not declared deterministic has its second launch checked in full.
  double check_rerun_ms = every ? check_ms : 0;
  if (every && v.deterministic) {
    ASSAY_RETURN_IF_ERROR(save_outputs(s, lane));
    for (size_t o = 0; o < s.outs.size(); ++o) cp.compares[o].prev = lane.dev_scratch() + s.save_off[o];
    ASSAY_ASSIGN_OR_RETURN(check_rerun_ms, median3([&]() { return lane.check(cp, 1); }));
  }
  double inputs_ms = 0;
  if (s.on_device) {
    ASSAY_ASSIGN_OR_RETURN(inputs_ms, median3([&]() -> Status {
                             gpu::DeviceDraw draw(lane.stream());
                             for (int t = 0; t < static_cast<int>(s.c.tensors.size()); ++t)
                               ASSAY_RETURN_IF_ERROR(draw_on_device(op, s.c, t, lane, draw));
                             ASSAY_RETURN_IF_ERROR(draw.launch());
                             if (!op.device_reference.prepare) return ok_status();
                             const auto in = views_at(s.c, s.views, [&](int t) { return lane.dev_snapshot_tensor(t); });
                             return op.device_reference.prepare(s.c, in, s.dctx);
                           }));
  }
  double vendor_ms = 0;
  if (op.vendor.defined() && every) {
    ASSAY_ASSIGN_OR_RETURN(vendor_ms, median3([&]() {
                             return call_vendor(op, Params(s.c.params), dev_views(s.c, s.views, lane), lane.stream());
                           }));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  out["kernel_ms"] = kernel_ms;
  out["reference_ms"] = ref_ms;
  out["reference"] = s.on_device ? op.device_reference.name : "host-f64";
  out["inputs_ms"] = inputs_ms;
  out["restore_ms"] = restore_ms;
  out["check_ms"] = check_ms;
  out["check_rerun_ms"] = check_rerun_ms;
  out["vendor_ms"] = vendor_ms;
  // Every check needs each of these steps once (the kernel and its restore twice with the
  // determinism rerun, which has its own check); the vendor column comes on top where it runs.
  const int runs = every ? 2 : 1;
  const double floor_ms = inputs_ms + ref_ms + runs * (restore_ms + kernel_ms) + check_ms + check_rerun_ms;
  out["floor_ms"] = floor_ms;
  out["floor_ratio"] = floor_ms / (kernel_ms + ref_ms);
  out["ratio"] = out["full_run_ms"].get<double>() / (kernel_ms + ref_ms);
  out["ratio_without_vendor"] = out["full_run_without_vendor_ms"].get<double>() / (kernel_ms + ref_ms);
  return out;
}

}  // namespace assay
