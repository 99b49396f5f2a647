#include "harness/testbeds/gemm_f32.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include "harness/bounds.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "harness/gpu/materialize_device.h"
#include "harness/shrink.h"
#include "references/device/gemm_f64.h"
#include "references/host/gemm.h"
#include "references/library/cublas_gemm.h"

namespace assay {
namespace {

std::vector<GemmF32Variant>& variant_registry() {
  static std::vector<GemmF32Variant> v;  // construct on first use: static-init order safe
  return v;
}

constexpr int64_t kMaxExtent = int64_t{1} << 31;  // elements per tensor (8 GiB of fp32)
constexpr int kA = 0, kB = 1, kC = 2;
constexpr int kSlotsPerVariant = 2;
constexpr int kSaveSlots = (gpu::kMaxChecks - 1) / kSlotsPerVariant;  // variants per batch

StatusOr<int64_t> int_param(const Case& c, const char* key, int64_t lo, int64_t hi) {
  auto it = c.params.find(key);
  if (it == c.params.end()) return invalid_argument(fmt::format("gemm case: params.{} is missing", key));
  if (!it->is_number_integer())
    return invalid_argument(fmt::format("gemm case: params.{} must be an integer, got {}", key, it->type_name()));
  const int64_t v = it->is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX))
                                             : it->get<int64_t>();
  if (v < lo || v > hi)
    return invalid_argument(fmt::format("gemm case: params.{} = {} is outside [{}, {}]", key, v, lo, hi));
  return v;
}

StatusOr<bool> bool_param(const Case& c, const char* key) {
  auto it = c.params.find(key);
  if (it == c.params.end()) return invalid_argument(fmt::format("gemm case: params.{} is missing", key));
  if (!it->is_boolean())
    return invalid_argument(fmt::format("gemm case: params.{} must be true or false, got {}", key, it->type_name()));
  return it->get<bool>();
}

StatusOr<double> f32_param(const Case& c, const char* key) {
  auto it = c.params.find(key);
  if (it == c.params.end()) return invalid_argument(fmt::format("gemm case: params.{} is missing", key));
  if (!it->is_number()) return invalid_argument(fmt::format("gemm case: params.{} must be a number", key));
  const double v = it->get<double>();
  if (!std::isfinite(v) || static_cast<double>(static_cast<float>(v)) != v)
    return invalid_argument(fmt::format("gemm case: params.{} = {} is not a finite fp32 value", key, v));
  return v;
}

Status check_matrix(const Case& c, const char* name, int64_t rows, int64_t cols, int64_t ld) {
  const TensorSpec* t = c.find(name);
  if (t == nullptr) return invalid_argument(fmt::format("gemm case: tensor {} is missing", name));
  const auto& d = t->desc;
  if (d.dtype != DType::kF32)
    return invalid_argument(
        fmt::format("gemm case: tensor {} has dtype {}, this testbed is fp32", name, dtype_name(d.dtype)));
  if (d.shape != std::vector<int64_t>{rows, cols})
    return invalid_argument(fmt::format("gemm case: tensor {} must have shape [{}, {}]", name, rows, cols));
  if (d.strides != std::vector<int64_t>{ld, 1})
    return invalid_argument(fmt::format("gemm case: tensor {} must have strides [{}, 1]", name, ld));
  if (ld < std::max<int64_t>(cols, 1))
    return invalid_argument(fmt::format("gemm case: tensor {} leading dimension {} < max(1, {})", name, ld, cols));
  if (d.extent() > kMaxExtent)
    return invalid_argument(fmt::format("gemm case: tensor {} needs {} elements, more than 2^31", name, d.extent()));
  return ok_status();
}

// Row and column of an element index inside a row-major view.
std::pair<int64_t, int64_t> row_col(int64_t elem, int64_t off, int64_t ld) {
  const int64_t rel = elem - off;
  return {rel >= 0 ? rel / ld : -1, rel >= 0 ? rel % ld : -1};
}

}  // namespace

bool register_gemm_f32_variant(GemmF32Variant v) {
  variant_registry().push_back(std::move(v));
  return true;
}

const std::vector<GemmF32Variant>& gemm_f32_variants() {
  return variant_registry();
}

StatusOr<GemmParams> parse_gemm_case(const Case& c) {
  GemmParams g;
  constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
  ASSAY_ASSIGN_OR_RETURN(g.m, int_param(c, "m", 0, kMaxDim));
  ASSAY_ASSIGN_OR_RETURN(g.n, int_param(c, "n", 0, kMaxDim));
  ASSAY_ASSIGN_OR_RETURN(g.k, int_param(c, "k", 0, kMaxDim));
  ASSAY_ASSIGN_OR_RETURN(g.trans_a, bool_param(c, "trans_a"));
  ASSAY_ASSIGN_OR_RETURN(g.trans_b, bool_param(c, "trans_b"));
  ASSAY_ASSIGN_OR_RETURN(g.alpha, f32_param(c, "alpha"));
  ASSAY_ASSIGN_OR_RETURN(g.beta, f32_param(c, "beta"));
  if (c.tensors.size() != 3) return invalid_argument("gemm case: expected exactly the tensors A, B and C");
  const TensorSpec *a = c.find("A"), *b = c.find("B"), *cc = c.find("C");
  if (a == nullptr || b == nullptr || cc == nullptr)
    return invalid_argument("gemm case: expected exactly the tensors A, B and C");
  if (a->desc.strides.size() != 2 || b->desc.strides.size() != 2 || cc->desc.strides.size() != 2)
    return invalid_argument("gemm case: A, B and C must be rank 2");
  g.lda = a->desc.strides[0];
  g.ldb = b->desc.strides[0];
  g.ldc = cc->desc.strides[0];
  ASSAY_RETURN_IF_ERROR(check_matrix(c, "A", g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda));
  ASSAY_RETURN_IF_ERROR(check_matrix(c, "B", g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb));
  ASSAY_RETURN_IF_ERROR(check_matrix(c, "C", g.m, g.n, g.ldc));
  if (a->role != Role::kIn || b->role != Role::kIn || cc->role != Role::kInOut)
    return invalid_argument("gemm case: roles must be A:in, B:in, C:inout");
  if (auto it = c.params.find("relation"); it != c.params.end()) {
    if (!it->is_string()) return invalid_argument("gemm case: params.relation must be a string");
    g.relation = it->get<std::string>();
    if (std::find(std::begin(kGemmRelations), std::end(kGemmRelations), g.relation) == std::end(kGemmRelations))
      return invalid_argument(
          fmt::format("gemm case: params.relation '{}' is not transpose, alpha2 or permute_rows", g.relation));
  }
  return g;
}

Case make_gemm_case(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, double alpha, double beta,
                    int64_t pad_a, int64_t pad_b, int64_t pad_c, int64_t off_a, int64_t off_b, int64_t off_c,
                    const ValueRecipe& ra, const ValueRecipe& rb, const ValueRecipe& rc) {
  Case c;
  c.op = "gemm";
  c.params = {{"m", m},         {"n", n},      {"k", k}, {"trans_a", trans_a}, {"trans_b", trans_b},
              {"alpha", alpha}, {"beta", beta}};
  auto matrix = [&](const char* name, Role role, int64_t rows, int64_t cols, int64_t pad, int64_t off,
                    const ValueRecipe& r) {
    TensorSpec t;
    t.name = name;
    t.role = role;
    t.desc.dtype = DType::kF32;
    t.desc.shape = {rows, cols};
    t.desc.strides = {std::max<int64_t>(cols, 1) + pad, 1};
    t.desc.offset = off;
    t.values = r;
    return t;
  };
  c.tensors.push_back(matrix("A", Role::kIn, trans_a ? k : m, trans_a ? m : k, pad_a, off_a, ra));
  c.tensors.push_back(matrix("B", Role::kIn, trans_b ? n : k, trans_b ? k : n, pad_b, off_b, rb));
  c.tensors.push_back(matrix("C", Role::kInOut, m, n, pad_c, off_c, rc));
  return c;
}

Case make_gemm_case(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, double alpha, double beta,
                    int64_t pad_a, int64_t pad_b, int64_t pad_c, int64_t off_a, int64_t off_b, int64_t off_c,
                    ValueClass cls, uint64_t seed) {
  ValueRecipe r;
  r.cls = cls;
  r.seed = seed;
  r.int_range = 2;
  return make_gemm_case(m, n, k, trans_a, trans_b, alpha, beta, pad_a, pad_b, pad_c, off_a, off_b, off_c, r, r, r);
}

namespace {

struct Prepared {
  GemmParams g;
  unsigned char* rel_dev = nullptr;  ///< "transpose": the n x m C' of the swapped launch
  bool beta0 = false;
  bool device_ref = false;  ///< also: inputs drawn on the device, no host image (gemm_inputs_on_device)
  bool every_check = true;  ///< determinism rerun and vendor column run (gemm_runs_every_check)
  bool exact = false;
  ElementBound bound;
  ElementBound expected;  ///< gemm_bounds' expected level (inspection only)
  const double* ref_dev = nullptr;
  const double* mag_dev = nullptr;
  unsigned char* save_dev = nullptr;
};

thread_local std::vector<double> t_a, t_b, t_c;

void decode(const TensorDesc& d, const unsigned char* src, std::vector<double>& out) {
  const int64_t n = d.extent();
  out.resize(static_cast<size_t>(n));
  const float* f = reinterpret_cast<const float*>(src);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(f[i]);
}

double split_k_flush_floor(int64_t k);

// The ceiling for problem g with |alpha| = alpha_abs (the "alpha2" relation asks
// for the doubled one); `expected` receives the expected level when not null.
ElementBound ceiling_for(const GemmParams& g, double alpha_abs, ElementBound* expected) {
  GemmBoundModel model;
  model.k = g.k;
  model.alpha_abs = alpha_abs;
  model.has_beta = g.beta != 0;
  ElementBound b = gemm_ceiling(model);
  // mag itself is a sum of k+2 non-negative terms computed in fp64, so it may
  // fall short of the exact magnitude by a factor (1 - gamma_{k+2}(2^-53)).
  b.rel_mag /= (1.0 - gamma_n(g.k + 2, 0x1p-53));
  b.floor += split_k_flush_floor(g.k);
  if (expected != nullptr) {
    *expected = gemm_bounds(model).expected;
    expected->rel_mag /= (1.0 - gamma_n(g.k + 2, 0x1p-53));
  }
  return b;
}

StatusOr<Prepared> prepare(const Case& c, gpu::Lane& lane) {
  Prepared p;
  ASSAY_ASSIGN_OR_RETURN(p.g, parse_gemm_case(c));
  const GemmParams& g = p.g;
  p.beta0 = g.beta == 0;
  const TensorSpec& ta = *c.find("A");
  const TensorSpec& tb = *c.find("B");
  const TensorSpec& tc = *c.find("C");
  const int64_t mn = g.m * g.n;
  p.device_ref = gemm_inputs_on_device(g);
  p.every_check = gemm_runs_every_check(c);
  std::vector<gpu::ArenaTensor> tensors = {
      {ta.desc, Role::kIn, false},
      {tb.desc, Role::kIn, false},
      {tc.desc, p.beta0 ? Role::kOut : Role::kInOut, p.beta0},
  };
  const int64_t c_bytes = tc.desc.extent() * 4;
  // One save area per variant of a batch: the first checked launch's output,
  // kept for the determinism compare and for failure details.
  const int64_t save_bytes = kSaveSlots * ((c_bytes + 255) / 256 * 256);
  const int64_t extra = p.device_ref ? 0 : 2 * mn * 8;
  const int64_t dev_ref_bytes =
      p.device_ref ? 2 * mn * 8 + 8 * device_ref::gemm_f64_scratch_doubles(ta.desc.extent(), tb.desc.extent()) : 0;
  // Only relation cases pay: the swapped launch of "transpose" writes an n x m C'.
  const int64_t rel_bytes = p.g.relation == "transpose" ? (mn * 4 + 255) / 256 * 256 : 0;
  if (p.device_ref) {
    // Large: values drawn straight into the device snapshot; no host image.
    ASSAY_RETURN_IF_ERROR(lane.layout_on_device(tensors, save_bytes + dev_ref_bytes + rel_bytes));
    ASSAY_RETURN_IF_ERROR(gpu::materialize_device(ta.desc, ta.values, fnv1a64("A", 1), lane.dev_snapshot_tensor(kA),
                                                  lane.stream()));
    ASSAY_RETURN_IF_ERROR(gpu::materialize_device(tb.desc, tb.values, fnv1a64("B", 1), lane.dev_snapshot_tensor(kB),
                                                  lane.stream()));
    if (p.beta0) {
      ASSAY_RETURN_IF_ERROR(gpu::materialize_output_device(tc.desc, lane.dev_snapshot_tensor(kC), lane.stream()));
    } else {
      ASSAY_RETURN_IF_ERROR(gpu::materialize_device(tc.desc, tc.values, fnv1a64("C", 1), lane.dev_snapshot_tensor(kC),
                                                    lane.stream()));
    }
  } else {
    ASSAY_RETURN_IF_ERROR(lane.layout(tensors, extra, save_bytes + dev_ref_bytes + rel_bytes));
    materialize(ta.desc, ta.values, fnv1a64("A", 1), lane.host_tensor(kA));
    materialize(tb.desc, tb.values, fnv1a64("B", 1), lane.host_tensor(kB));
    if (p.beta0) {
      // Covered elements get the poison: a NaN that must neither reach the
      // result (BLAS: C is not read when beta == 0) nor survive (unwritten).
      materialize_output(tc.desc, lane.host_tensor(kC));
    } else {
      materialize(tc.desc, tc.values, fnv1a64("C", 1), lane.host_tensor(kC));
    }
  }
  if (rel_bytes > 0) p.rel_dev = lane.dev_scratch() + save_bytes + dev_ref_bytes;

  p.save_dev = lane.dev_scratch();
  if (!p.device_ref) {
    decode(ta.desc, lane.host_tensor(kA), t_a);
    decode(tb.desc, lane.host_tensor(kB), t_b);
    if (!p.beta0) decode(tc.desc, lane.host_tensor(kC), t_c);
    ref::GemmProblem<double> rp;
    rp.m = g.m, rp.n = g.n, rp.k = g.k, rp.trans_a = g.trans_a, rp.trans_b = g.trans_b;
    rp.alpha = g.alpha, rp.beta = g.beta;
    rp.a = t_a.data() + ta.desc.offset, rp.lda = g.lda;
    rp.b = t_b.data() + tb.desc.offset, rp.ldb = g.ldb;
    rp.c = p.beta0 ? nullptr : t_c.data() + tc.desc.offset, rp.ldc = g.ldc;
    auto* ref = reinterpret_cast<double*>(lane.host_extra());
    ref::gemm_reference(rp, ref, ref + mn, 1);
    p.ref_dev = reinterpret_cast<const double*>(lane.dev_extra());
    p.mag_dev = p.ref_dev + mn;
    ASSAY_RETURN_IF_ERROR(lane.upload());
  }
  if (p.device_ref) {
    auto* ref = reinterpret_cast<double*>(lane.dev_scratch() + save_bytes);
    vendor::RowMajorGemm rm{g.m, g.n, g.k, g.trans_a, g.trans_b, g.lda, g.ldb, g.ldc};
    ASSAY_RETURN_IF_ERROR(device_ref::gemm_f64_reference(
        lane.cublas(), lane.stream(), rm, g.alpha,
        reinterpret_cast<const float*>(lane.dev_snapshot_tensor(kA)) + ta.desc.offset,
        ta.desc.extent() - ta.desc.offset,
        reinterpret_cast<const float*>(lane.dev_snapshot_tensor(kB)) + tb.desc.offset,
        tb.desc.extent() - tb.desc.offset, g.beta,
        p.beta0 ? nullptr : reinterpret_cast<const float*>(lane.dev_snapshot_tensor(kC)) + tc.desc.offset, ref,
        ref + mn, ref + 2 * mn));
    p.ref_dev = ref;
    p.mag_dev = ref + mn;
  }

  p.bound = ceiling_for(g, std::fabs(g.alpha), &p.expected);

  auto plain_int = [](const ValueRecipe& r) { return r.cls == ValueClass::kSmallInt && !r.inject.active(); };
  const bool ints = plain_int(ta.values) && plain_int(tb.values) && (p.beta0 || plain_int(tc.values));
  const bool int_scalars = g.alpha == std::round(g.alpha) && g.beta == std::round(g.beta);
  const int64_t range = std::max(ta.values.int_range, tb.values.int_range);
  p.exact = ints && int_scalars &&
            gemm_exact_tier_holds(DType::kF32, g.k, range, std::fabs(g.alpha), std::fabs(g.beta),
                                  p.beta0 ? 0.0 : static_cast<double>(tc.values.int_range));
  return p;
}

// Split-K's extra underflow losses (properties/gemm.cpp): atom.add.f32 flushes
// subnormal inputs and results, so S atomics and S alpha*partial products add up
// to 3S + 2 unscaled operations that may each lose < min_normal, against the
// 3 of gemm_ceiling; with S <= k nonempty chunks the excess is below 3k.
double split_k_flush_floor(int64_t k) {
  return (1 + gamma_n(k + 2, 0x1p-24)) * 3.0 * static_cast<double>(k) * static_cast<double>(FLT_MIN);
}

GemmF32Problem problem_on(const GemmParams& g, const Case& c, gpu::Lane& lane) {
  GemmF32Problem q;
  q.m = g.m, q.n = g.n, q.k = g.k, q.trans_a = g.trans_a, q.trans_b = g.trans_b;
  q.alpha = static_cast<float>(g.alpha), q.beta = static_cast<float>(g.beta);
  q.a = reinterpret_cast<const float*>(lane.dev_tensor(kA)) + c.find("A")->desc.offset, q.lda = g.lda;
  q.b = reinterpret_cast<const float*>(lane.dev_tensor(kB)) + c.find("B")->desc.offset, q.ldb = g.ldb;
  q.c = reinterpret_cast<float*>(lane.dev_tensor(kC)) + c.find("C")->desc.offset, q.ldc = g.ldc;
  return q;
}

gpu::DevCompare compare_for(const Prepared& p, const Case& c, gpu::Lane& lane) {
  gpu::DevCompare cmp;
  cmp.out_dtype = static_cast<int32_t>(DType::kF32);
  cmp.exact = p.exact ? 1 : 0;
  cmp.out = lane.dev_tensor(kC);
  cmp.off = c.find("C")->desc.offset;
  cmp.rows = p.g.m;
  cmp.cols = p.g.n;
  cmp.ld = p.g.ldc;
  cmp.ref = p.ref_dev;
  cmp.mag = p.mag_dev;
  cmp.rel_out = p.bound.rel_out;
  cmp.rel_mag = p.bound.rel_mag;
  cmp.floor = p.bound.floor;
  cmp.out_max = FLT_MAX;
  // mag includes |alpha|: the unscaled partial sums |A||B| reach FLT_MAX
  // when mag reaches |alpha|*FLT_MAX (for |alpha| < 1). With alpha = 0 no
  // overflow is excused (the generator keeps near-overflow data away from it).
  const double aa = std::fabs(p.g.alpha);
  cmp.overflow_mag = aa > 0 && aa < 1 ? FLT_MAX * aa : FLT_MAX;
  return cmp;
}

// Failure details from the first checked launch's output (kept in the
// variant's save area), so a race that does not repeat still shows what it did.
struct Detailer {
  const Case& c;
  const Prepared& p;
  gpu::Lane& lane;
  const unsigned char* saved;
  std::vector<float> out;
  std::vector<double> ref, mag;
  bool loaded = false;

  Status load() {
    if (loaded) return ok_status();
    loaded = true;
    const TensorDesc& dc = c.find("C")->desc;
    out.resize(static_cast<size_t>(dc.extent()));
    ASSAY_RETURN_IF_ERROR(lane.read_back(saved, out.data(), dc.extent() * 4));
    const int64_t mn = p.g.m * p.g.n;
    ref.resize(static_cast<size_t>(mn));
    mag.resize(static_cast<size_t>(mn));
    ASSAY_RETURN_IF_ERROR(lane.read_back(p.ref_dev, ref.data(), mn * 8));
    ASSAY_RETURN_IF_ERROR(lane.read_back(p.mag_dev, mag.data(), mn * 8));
    return ok_status();
  }
  // Logical index (i*n + j) -> a line with the values.
  std::string at_logical(int64_t idx) {
    if (!load().ok() || out.empty() || idx < 0) return "";
    const int64_t i = idx / p.g.n, j = idx % p.g.n;
    const float o = out[static_cast<size_t>(c.find("C")->desc.offset + i * p.g.ldc + j)];
    const double r = ref[static_cast<size_t>(idx)], m = mag[static_cast<size_t>(idx)];
    const double tol = p.bound.tol(std::fabs(r), m);
    return fmt::format("C[{}][{}] = {:.9g}, reference {:.17g}, |err| {:.3g}, bound {:.3g} (|err|/bound {:.3g})", i, j,
                       o, r, std::fabs(o - r), tol, std::fabs(o - r) / tol);
  }
};

void add_failure(Verdict& v, FailureKind kind, std::string tensor, unsigned long long count, int64_t first,
                 std::string detail) {
  for (auto& f : v.failures)
    if (f.kind == kind && f.tensor == tensor) {
      f.count = std::max<int64_t>(f.count, static_cast<int64_t>(count));
      return;
    }
  v.failures.push_back(Failure{kind, std::move(tensor), static_cast<int64_t>(count), first, std::move(detail)});
}

// Translates one check result into failures of `v`.
void read_check(const gpu::CheckResult& r, const gpu::CheckParams& params, [[maybe_unused]] const Case& c,
                const Prepared& p, Detailer& d, bool deterministic, Verdict& v) {
  static const char* names[] = {"A", "B", "C"};
  for (int ri = 0; ri < params.nregions; ++ri) {
    const auto& reg = params.regions[ri];
    const auto& rr = r.regions[ri];
    const bool is_guard = ri % 2 == 0;
    const int t = ri / 2;  // tensor after this guard, or the tensor itself
    if (rr.changed > 0) {
      const int64_t first = gpu::first_index(rr.changed, rr.changed_first);
      if (is_guard) {
        const std::string where = t < 3 ? fmt::format("guard before {}", names[t]) : "guard after C";
        add_failure(
            v, FailureKind::kGuard, names[std::min(t, 2)], rr.changed, first,
            fmt::format("{}: {} bytes changed, first at byte {} of the band", where, rr.changed * 4, first * 4));
      } else if (reg.kind == gpu::DevRegion::kBytesEqual) {
        add_failure(v, FailureKind::kInputWritten, names[t], rr.changed, first * 4 / 4,
                    fmt::format("input {} changed by the kernel, first at element {}", names[t], first));
      } else {
        const auto [row, col] = row_col(first, reg.off, reg.ld);
        const int64_t extent = reg.rows == 0 ? reg.off : reg.off + (reg.rows - 1) * reg.ld + reg.cols;
        add_failure(v, FailureKind::kGapWritten, names[t], rr.changed, first,
                    first >= extent
                        ? fmt::format("element {} past the end of {} (its last element is {}) was written", first,
                                      names[t], extent - 1)
                        : fmt::format("element {} (row {}, column {} of the padded layout) outside the view was "
                                      "written",
                                      first, row, col));
      }
    }
    if (rr.unwritten > 0) {
      const int64_t first = gpu::first_index(rr.unwritten, rr.unwritten_first);
      const auto [row, col] = row_col(first, reg.off, reg.ld);
      add_failure(
          v, FailureKind::kUnwritten, names[t], rr.unwritten, first,
          fmt::format("{} of {} elements never written, first C[{}][{}]", rr.unwritten, p.g.m * p.g.n, row, col));
    }
  }
  if (params.ncompares == 0) return;
  const auto& cr = r.compares[0];
  if (cr.naninf > 0) {
    const int64_t first = gpu::first_index(cr.naninf, cr.naninf_first);
    add_failure(v, FailureKind::kNanInf, "C", cr.naninf, first, "NaN/Inf pattern differs: " + d.at_logical(first));
  }
  if (cr.bound > 0) {
    const int64_t first = gpu::first_index(cr.bound, cr.bound_first);
    add_failure(v, FailureKind::kBound, "C", cr.bound, first, d.at_logical(first));
  }
  if (cr.exact > 0) {
    const int64_t first = gpu::first_index(cr.exact, cr.exact_first);
    add_failure(v, FailureKind::kExact, "C", cr.exact, first, "exact tier: " + d.at_logical(first));
  }
  if (cr.nondet > 0 && deterministic) {
    const int64_t first = gpu::first_index(cr.nondet, cr.nondet_first);
    add_failure(v, FailureKind::kNondeterministic, "C", cr.nondet, first,
                fmt::format("{} elements differ bitwise between two launches, first C[{}][{}]", cr.nondet,
                            first / std::max<int64_t>(p.g.n, 1), first % std::max<int64_t>(p.g.n, 1)));
  }
  const double ratio = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(cr.worst_key >> 32)));
  if (cr.worst_key != 0 && ratio > v.metrics.max_ratio) {
    v.metrics.max_ratio = ratio;
    v.metrics.worst_index = static_cast<int64_t>(~static_cast<uint32_t>(cr.worst_key & 0xffffffffu));
  }
  v.metrics.max_abs_err = std::max(v.metrics.max_abs_err, std::bit_cast<double>(cr.max_abs_bits));
}

// Host image (the whole allocation) of input tensor t: the lane's own, or for
// a case drawn on the device a copy of the snapshot in `storage` (relation and
// triage paths only; the checked run never reads inputs on the host).
StatusOr<const float*> host_image(const Prepared& p, const Case& c, gpu::Lane& lane, int t,
                                  std::vector<float>& storage) {
  if (!p.device_ref) return reinterpret_cast<const float*>(lane.host_tensor(t));
  static const char* names[] = {"A", "B", "C"};
  const int64_t n = c.find(names[t])->desc.extent();
  storage.resize(static_cast<size_t>(n));
  ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_snapshot_tensor(t), storage.data(), n * 4));
  return static_cast<const float*>(storage.data());
}

// Host data a relation needs, read once per case (only relation cases pay).
struct RelationData {
  std::vector<double> ref, mag;
  std::vector<int64_t> perm;  ///< "permute_rows"
};

StatusOr<RelationData> relation_data(const Case& c, const Prepared& p, gpu::Lane& lane) {
  RelationData d;
  const int64_t mn = p.g.m * p.g.n;
  d.ref.resize(static_cast<size_t>(mn));
  d.mag.resize(static_cast<size_t>(mn));
  ASSAY_RETURN_IF_ERROR(lane.read_back(p.ref_dev, d.ref.data(), mn * 8));
  ASSAY_RETURN_IF_ERROR(lane.read_back(p.mag_dev, d.mag.data(), mn * 8));
  if (p.g.relation == "permute_rows") d.perm = gemm_relation_permutation(p.g.m, c.find("A")->values.seed);
  return d;
}

// One more launch of `v` on the related problem of p.g.relation; its output
// held element by element against the first checked launch (`saved`).
Status check_relation(const Case& c, const Prepared& p, const RelationData& rd, const GemmF32Variant& v,
                      const unsigned char* saved, gpu::Lane& lane, Verdict& verdict) {
  const GemmParams& g = p.g;
  const TensorDesc &da = c.find("A")->desc, &dc = c.find("C")->desc;
  const int64_t m = g.m, n = g.n;
  std::vector<float> img_a, img_c;
  ASSAY_ASSIGN_OR_RETURN(const float* full_c, host_image(p, c, lane, kC, img_c));
  const float* host_c = full_c + dc.offset;
  std::vector<float> out1(static_cast<size_t>(dc.extent()));
  ASSAY_RETURN_IF_ERROR(lane.read_back(saved, out1.data(), dc.extent() * 4));
  ASSAY_RETURN_IF_ERROR(lane.restore());
  GemmF32Problem q = problem_on(g, c, lane);
  double scale = 1;
  std::vector<float> out2, staged_a, staged_c;  // host images of the related inputs, alive until the launch
  // y2(i, j): element (i, j) of the related launch, in C's orientation.
  std::function<float(int64_t, int64_t)> y2;
  int64_t (*from_row)(const RelationData&, int64_t) = [](const RelationData&, int64_t i) { return i; };
  if (g.relation == "transpose") {
    std::vector<float>& ct = staged_c;
    ct.assign(static_cast<size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
    if (!p.beta0)  // beta == 0: C' stays NaN, which must neither be read nor survive
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) ct[static_cast<size_t>(j * m + i)] = host_c[i * g.ldc + j];
    CUDA_CHECK(cudaMemcpyAsync(p.rel_dev, ct.data(), ct.size() * 4, cudaMemcpyHostToDevice, lane.stream()));
    GemmF32Problem t = q;
    t.m = n, t.n = m, t.trans_a = !g.trans_b, t.trans_b = !g.trans_a;
    t.a = q.b, t.lda = q.ldb, t.b = q.a, t.ldb = q.lda;
    t.c = reinterpret_cast<float*>(p.rel_dev), t.ldc = m;
    q = t;
    out2.resize(ct.size());
    y2 = [&out2, m](int64_t i, int64_t j) { return out2[static_cast<size_t>(j * m + i)]; };
  } else {
    if (g.relation == "alpha2") {
      scale = 2;
      q.alpha *= 2;
      if (!p.beta0) {
        std::vector<float>& c2 = staged_c;
        c2.resize(static_cast<size_t>(dc.extent()));
        const float* full = full_c;
        for (size_t e = 0; e < c2.size(); ++e) c2[e] = 2 * full[e];
        CUDA_CHECK(
            cudaMemcpyAsync(lane.dev_tensor(kC), c2.data(), c2.size() * 4, cudaMemcpyHostToDevice, lane.stream()));
      }
    } else {  // permute_rows: op(A)[i][:] and C[i][:] become row perm[i] of the originals
      std::vector<float>& a2 = staged_a;
      a2.resize(static_cast<size_t>(da.extent()));
      ASSAY_ASSIGN_OR_RETURN(const float* a1, host_image(p, c, lane, kA, img_a));
      std::copy(a1, a1 + a2.size(), a2.begin());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t r = 0; r < g.k; ++r) {
          auto at = [&](int64_t row) { return da.offset + (g.trans_a ? r * g.lda + row : row * g.lda + r); };
          a2[static_cast<size_t>(at(i))] = a1[at(rd.perm[static_cast<size_t>(i)])];
        }
      CUDA_CHECK(cudaMemcpyAsync(lane.dev_tensor(kA), a2.data(), a2.size() * 4, cudaMemcpyHostToDevice, lane.stream()));
      if (!p.beta0) {
        std::vector<float>& c2 = staged_c;
        const float* full = full_c;
        c2.assign(full, full + dc.extent());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            c2[static_cast<size_t>(dc.offset + i * g.ldc + j)] =
                full[dc.offset + rd.perm[static_cast<size_t>(i)] * g.ldc + j];
        CUDA_CHECK(
            cudaMemcpyAsync(lane.dev_tensor(kC), c2.data(), c2.size() * 4, cudaMemcpyHostToDevice, lane.stream()));
      }
      from_row = [](const RelationData& d, int64_t i) { return d.perm[static_cast<size_t>(i)]; };
    }
    out2.resize(static_cast<size_t>(dc.extent()));
    y2 = [&out2, &g, off = dc.offset](int64_t i, int64_t j) { return out2[static_cast<size_t>(off + i * g.ldc + j)]; };
  }
  const cudaError_t e = v.launch(q, lane.stream());
  if (e != cudaSuccess) {
    add_failure(verdict, FailureKind::kLaunchError, "", 1, -1,
                fmt::format("relation '{}': the related launch failed: {}", g.relation, cudaGetErrorString(e)));
    return ok_status();
  }
  ASSAY_RETURN_IF_ERROR(lane.read_back(g.relation == "transpose" ? p.rel_dev : lane.dev_tensor(kC), out2.data(),
                                       static_cast<int64_t>(out2.size()) * 4));

  const ElementBound b2 = ceiling_for(g, std::fabs(g.alpha) * scale, nullptr);
  // Left out: a non-finite reference, or a magnitude at which the accumulator
  // (|alpha| < 1: unscaled partial sums up to mag/|alpha|) or the output of
  // either launch may overflow; "alpha2" also where the doubled C overflows.
  const double aa = std::fabs(g.alpha);
  const double top = (aa > 0 && aa < 1 ? FLT_MAX * aa : FLT_MAX) / (2 * scale);
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t fi = from_row(rd, i);
      const size_t l1 = static_cast<size_t>(fi * n + j);
      const double r1 = rd.ref[l1], m1 = rd.mag[l1];
      if (scale != 1 && !p.beta0 && !std::isfinite(2.0f * host_c[fi * g.ldc + j])) continue;
      const double x1 = static_cast<double>(out1[static_cast<size_t>(dc.offset + fi * g.ldc + j)]);
      const double y = static_cast<double>(y2(i, j));
      if (!gemm_relation_breaks(x1, y, r1, m1, scale, p.bound, b2, top)) continue;
      const double y1 = scale * x1;
      const double tol = scale * p.bound.tol(std::fabs(r1), m1) + b2.tol(scale * std::fabs(r1), scale * m1);
      const double d = std::fabs(y - y1);
      if (bad++ == 0) {
        const std::string where = g.relation == "transpose" ? fmt::format("C'[{}][{}] of the swapped launch", j, i)
                                                            : fmt::format("C[{}][{}] of the related launch", i, j);
        first = fmt::format(
            "relation '{}': {} is {:.9g}, expected {}C[{}][{}] = {:.9g} of the original launch; "
            "|diff| {:.3g} > {:.3g} (both ceilings)",
            g.relation, where, y, scale != 1 ? "2*" : "", fi, j, y1, d, tol);
      }
    }
  if (bad > 0) add_failure(verdict, FailureKind::kProperty, "C", static_cast<unsigned long long>(bad), -1, first);
  return ok_status();
}

}  // namespace

bool gemm_relation_breaks(double y1, double y2, double r1, double mag1, double scale, const ElementBound& b1,
                          const ElementBound& b2, double top) {
  if (!std::isfinite(r1) || !std::isfinite(mag1) || mag1 > top) return false;
  const double s = std::fabs(scale);
  if (y2 == scale * y1) return false;
  const double tol = s * b1.tol(std::fabs(r1), mag1) + b2.tol(s * std::fabs(r1), s * mag1);
  return !(std::fabs(y2 - scale * y1) <= tol);  // true for NaN: a NaN on one side only breaks the relation
}

std::vector<int64_t> gemm_relation_permutation(int64_t m, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(m, 0)));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  uint64_t x = seed ^ 0x7065726d75746521ull;  // "permute!"
  auto next = [&x] {                          // SplitMix64
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[next() % i]);
  return perm;
}

namespace {

// run_gemm_f32 with the sampling policy forced (every_check set) or the
// case's own (gemm_runs_every_check); gemm_time_large times both branches.
StatusOr<std::vector<Verdict>> run_gemm_f32_with(const Case& c, const std::vector<std::string>& names, gpu::Lane& lane,
                                                 std::optional<bool> every_check) {
  std::vector<const GemmF32Variant*> variants;
  for (const auto& n : names) {
    const GemmF32Variant* found = nullptr;
    for (const auto& v : gemm_f32_variants())
      if (v.info.name == n) found = &v;
    if (found == nullptr) return not_found(fmt::format("gemm has no variant '{}'", n));
    variants.push_back(found);
  }
  ASSAY_ASSIGN_OR_RETURN(Prepared p, prepare(c, lane));
  if (every_check) p.every_check = *every_check;
  const int runs = p.every_check ? 2 : 1;  // the second launch is the determinism rerun
  const gpu::DevCompare cmp = compare_for(p, c, lane);
  // Baseline key: dtype, A's value class, and whether specials were injected
  // or the case is exact-tier (whose ratio is 0 by construction).
  const ValueRecipe& ra = c.find("A")->values;
  const bool special = ra.inject.active() || c.find("B")->values.inject.active() || c.find("C")->values.inject.active();
  const std::string key =
      fmt::format("fp32/{}{}", value_class_name(ra.cls), p.exact ? "/exact" : (special ? "/special" : ""));
  const int64_t c_bytes = c.find("C")->desc.extent() * 4;
  std::vector<Verdict> verdicts;
  std::optional<RelationData> rel;  // read on the first variant that needs it
  constexpr int kPerBatch = (gpu::kMaxChecks - 1) / kSlotsPerVariant;
  for (size_t b0 = 0; b0 < variants.size(); b0 += kPerBatch) {
    const size_t b1 = std::min(variants.size(), b0 + kPerBatch);
    std::vector<cudaError_t> launch_err(b1 - b0, cudaSuccess);
    std::vector<gpu::CheckParams> params(static_cast<size_t>(gpu::kMaxChecks));
    for (size_t vi = b0; vi < b1; ++vi) {
      const GemmF32Variant& v = *variants[vi];
      // --repeat N: N-1 unchecked launches first, for kernels that go wrong
      // only after many calls (a static counter, a leaked workspace).
      for (int extra = 1; extra < lane.options.repeat; ++extra) {
        ASSAY_RETURN_IF_ERROR(lane.restore());
        const cudaError_t e = v.launch(problem_on(p.g, c, lane), lane.stream());
        if (e != cudaSuccess && launch_err[vi - b0] == cudaSuccess) launch_err[vi - b0] = e;
      }
      for (int run = 0; run < runs; ++run) {
        ASSAY_RETURN_IF_ERROR(lane.restore());
        const cudaError_t e = v.launch(problem_on(p.g, c, lane), lane.stream());
        if (e != cudaSuccess && launch_err[vi - b0] == cudaSuccess) launch_err[vi - b0] = e;
        gpu::CheckParams cp = lane.check_params();
        cp.compares[0] = cmp;
        unsigned char* save = p.save_dev + (vi - b0) * ((c_bytes + 255) / 256 * 256);
        if (run == 1) cp.compares[0].prev = save;
        cp.ncompares = 1;
        const int slot = static_cast<int>(vi - b0) * kSlotsPerVariant + run;
        ASSAY_RETURN_IF_ERROR(lane.check(cp, slot));
        params[static_cast<size_t>(slot)] = cp;
        if (run == 0)
          CUDA_CHECK(cudaMemcpyAsync(save, lane.dev_tensor(kC), static_cast<size_t>(c_bytes), cudaMemcpyDeviceToDevice,
                                     lane.stream()));
      }
    }
    // Vendor column: cuBLAS pedantic on the same arena, same bound.
    const int vendor_slot = static_cast<int>(b1 - b0) * kSlotsPerVariant;
    if (p.every_check) {
      ASSAY_RETURN_IF_ERROR(lane.restore());
      const GemmF32Problem q = problem_on(p.g, c, lane);
      ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f32_pedantic(
          lane.cublas(), vendor::RowMajorGemm{q.m, q.n, q.k, q.trans_a, q.trans_b, q.lda, q.ldb, q.ldc}, q.alpha, q.a,
          q.b, q.beta, q.c));
      gpu::CheckParams vp;
      vp.arena = nullptr;
      vp.compares[0] = cmp;
      vp.ncompares = 1;
      ASSAY_RETURN_IF_ERROR(lane.check(vp, vendor_slot));
    }
    ASSAY_RETURN_IF_ERROR(lane.fetch_results(vendor_slot + (p.every_check ? 1 : 0)));
    gpu::CompareResult vr{};
    double vendor_ratio = -1;  // -1: not run
    if (p.every_check) {
      vr = lane.result(vendor_slot).compares[0];
      vendor_ratio = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(vr.worst_key >> 32)));
    }

    for (size_t vi = b0; vi < b1; ++vi) {
      const GemmF32Variant& v = *variants[vi];
      Verdict verdict;
      verdict.variant = v.info.name;
      verdict.metrics.exact_tier = p.exact;
      verdict.metrics.reference = p.device_ref ? "device-f64" : "host-f64";
      verdict.metrics.key = key;
      verdict.metrics.vendor_max_ratio = vendor_ratio;
      verdict.metrics.vendor_violations = static_cast<int64_t>(vr.bound + vr.naninf);
      if (!p.every_check) verdict.metrics.not_run = "determinism not rerun, vendor column not run (sampled)";
      if (launch_err[vi - b0] != cudaSuccess) {
        add_failure(verdict, FailureKind::kLaunchError, "", 1, -1,
                    fmt::format("launch failed: {} ({})", cudaGetErrorName(launch_err[vi - b0]),
                                cudaGetErrorString(launch_err[vi - b0])));
      } else {
        const unsigned char* saved = p.save_dev + (vi - b0) * ((c_bytes + 255) / 256 * 256);
        Detailer d{c, p, lane, saved, {}, {}, {}, false};
        const int s0 = static_cast<int>(vi - b0) * kSlotsPerVariant;
        read_check(lane.result(s0), params[s0], c, p, d, v.info.deterministic, verdict);
        if (runs == 2) read_check(lane.result(s0 + 1), params[s0 + 1], c, p, d, v.info.deterministic, verdict);
        if (!p.g.relation.empty() && p.g.m > 0 && p.g.n > 0) {
          if (!rel) {
            ASSAY_ASSIGN_OR_RETURN(RelationData r, relation_data(c, p, lane));
            rel = std::move(r);
          }
          ASSAY_RETURN_IF_ERROR(check_relation(c, p, *rel, v, saved, lane, verdict));
        }
      }
      verdicts.push_back(std::move(verdict));
    }
  }
  return verdicts;
}

}  // namespace

bool gemm_inputs_on_device(const GemmParams& g) {
  return g.m * g.n * std::max<int64_t>(g.k, 1) > kDeviceRefWork;
}

bool gemm_runs_every_check(const Case& c) {
  auto g = parse_gemm_case(c);
  if (!g.ok() || g->m * g->n * std::max<int64_t>(g->k, 1) <= kSampledChecksWork) return true;
  Case key = c;
  key.variant.clear();  // the same case sampled alike whichever variant it was stored for
  return std::stoull(key.id(), nullptr, 16) % 4 == 0;
}

StatusOr<std::vector<Verdict>> run_gemm_f32(const Case& c, const std::vector<std::string>& names, gpu::Lane& lane) {
  return run_gemm_f32_with(c, names, lane, std::nullopt);
}

Status gemm_host_self_check(int cases, std::string& report) {
  using Mp = boost::multiprecision::cpp_bin_float_50;
  std::mt19937_64 rng(20261121);
  double worst = 0;
  for (int t = 0; t < cases; ++t) {
    const int64_t m = 1 + rng() % 12, n = 1 + rng() % 12, k = rng() % 40;
    const bool ta = rng() & 1, tb = rng() & 2;
    const double beta = (rng() & 4) ? 0.0 : 0.75;
    const double alpha = 1.25;
    const int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 1;
    std::normal_distribution<float> nd;
    std::vector<double> a(static_cast<size_t>((ta ? k : m) * lda + 1)), b(static_cast<size_t>((tb ? n : k) * ldb + 1)),
        cc(static_cast<size_t>(m * ldc));
    for (auto* v : {&a, &b, &cc})
      for (auto& x : *v) x = static_cast<double>(nd(rng)) * std::ldexp(1.0, static_cast<int>(rng() % 16) - 8);
    std::vector<Mp> am(a.begin(), a.end()), bm(b.begin(), b.end()), cm(cc.begin(), cc.end());
    ref::GemmProblem<double> p{m, n, k, ta, tb, alpha, beta, a.data(), lda, b.data(), ldb, cc.data(), ldc};
    ref::GemmProblem<Mp> pm{m, n, k, ta, tb, Mp(alpha), Mp(beta), am.data(), lda, bm.data(), ldb, cm.data(), ldc};
    std::vector<double> r(static_cast<size_t>(m * n)), s(r.size());
    std::vector<Mp> rm(r.size()), sm(r.size());
    ref::gemm_reference(p, r.data(), s.data(), 1);
    ref::gemm_reference(pm, rm.data(), sm.data(), 1);
    const double g = gamma_n(k + 2, 0x1p-53);
    for (size_t i = 0; i < r.size(); ++i) {
      const double err = std::fabs(static_cast<double>(Mp(r[i]) - rm[i]));
      const double tol = g * s[i] + 1e-300;
      if (!(err <= tol))
        return internal_error(
            fmt::format("gemm host reference self-check failed: case {} element {}: |err| {} > {}", t, i, err, tol));
      worst = std::max(worst, err / tol);
    }
  }
  report += fmt::format(
      "gemm: fp64 host reference vs 50-digit multiprecision on {} random cases: pass "
      "(max error/bound {:.3g})\n",
      cases, worst);
  return ok_status();
}

}  // namespace assay

namespace assay {

std::vector<Case> shrink_gemm_case(const Case& c) {
  auto parsed = parse_gemm_case(c);
  if (!parsed.ok()) return {};
  const GemmParams g = *parsed;
  const TensorSpec &a = *c.find("A"), &b = *c.find("B"), &cc = *c.find("C");
  struct Knobs {
    int64_t m, n, k;
    bool ta, tb;
    double alpha, beta;
    int64_t pa, pb, pc, oa, ob, oc;
    ValueRecipe ra, rb, rc;
  };
  auto pad_of = [](const TensorSpec& t) { return t.desc.strides[0] - std::max<int64_t>(t.desc.shape[1], 1); };
  const Knobs base{g.m,       g.n,        g.k,           g.trans_a,     g.trans_b,      g.alpha,  g.beta,   pad_of(a),
                   pad_of(b), pad_of(cc), a.desc.offset, b.desc.offset, cc.desc.offset, a.values, b.values, cc.values};
  std::vector<Case> out;
  auto emit = [&](const Knobs& k) {
    Case n = make_gemm_case(k.m, k.n, k.k, k.ta, k.tb, k.alpha, k.beta, k.pa, k.pb, k.pc, k.oa, k.ob, k.oc, k.ra, k.rb,
                            k.rc);
    n.variant = c.variant;
    if (!g.relation.empty()) n.params["relation"] = g.relation;  // a relation failure must survive shrinking
    out.push_back(std::move(n));
  };
  // Shapes first: they dominate the size of a stored case. m and n stop at 1
  // (an empty C checks nothing), k may reach 0.
  for (int64_t v : smaller_values(base.m, 1)) {
    Knobs k = base;
    k.m = v;
    emit(k);
  }
  for (int64_t v : smaller_values(base.n, 1)) {
    Knobs k = base;
    k.n = v;
    emit(k);
  }
  for (int64_t v : smaller_values(base.k, 0)) {
    Knobs k = base;
    k.k = v;
    emit(k);
  }
  if (base.ta) {
    Knobs k = base;
    k.ta = false;
    emit(k);
  }
  if (base.tb) {
    Knobs k = base;
    k.tb = false;
    emit(k);
  }
  for (int64_t Knobs::*f : {&Knobs::pa, &Knobs::pb, &Knobs::pc, &Knobs::oa, &Knobs::ob, &Knobs::oc})
    if (base.*f != 0) {
      Knobs k = base;
      k.*f = 0;
      emit(k);
    }
  if (base.alpha != 1) {
    Knobs k = base;
    k.alpha = 1;
    emit(k);
  }
  if (base.beta != 0) {
    Knobs k = base;
    k.beta = 0;
    emit(k);
    if (base.beta != 1) {
      k.beta = 1;
      emit(k);
    }
  }
  // Values: fewer special values first, then simpler classes, then seed 0.
  for (ValueRecipe Knobs::*r : {&Knobs::ra, &Knobs::rb, &Knobs::rc}) {
    const ValueRecipe& cur = base.*r;
    if (cur.inject.active()) {
      Knobs k = base;
      (k.*r).inject = SpecialInjection{};
      emit(k);
    }
  }
  auto simpler = [](const ValueRecipe& cur, ValueClass cls) {
    ValueRecipe n;  // class defaults; seed and injection kept
    n.cls = cls;
    n.seed = cur.seed;
    n.inject = cur.inject;
    return n;
  };
  for (ValueClass target : {ValueClass::kSmallInt, ValueClass::kNormal}) {
    bool any = false;
    Knobs k = base;
    for (ValueRecipe Knobs::*r : {&Knobs::ra, &Knobs::rb, &Knobs::rc})
      if ((k.*r).cls != target && (k.*r).cls != ValueClass::kSmallInt) {
        k.*r = simpler(k.*r, target);
        any = true;
      }
    if (!any) continue;
    if (target == ValueClass::kSmallInt) {
      if (k.alpha != std::round(k.alpha)) k.alpha = 1;
      if (k.beta != std::round(k.beta)) k.beta = 1;
    }
    emit(k);
  }
  if (base.ra.seed != 0 || base.rb.seed != 0 || base.rc.seed != 0) {
    Knobs k = base;
    k.ra.seed = k.rb.seed = k.rc.seed = 0;
    emit(k);
  }
  // Last: the same case without its relation (kept only if it still fails).
  if (!g.relation.empty()) {
    emit(base);
    out.back().params.erase("relation");
  }
  return out;
}

}  // namespace assay

namespace assay {

StatusOr<nlohmann::json> gemm_time_large(const std::string& variant, gpu::Lane& lane, int64_t m) {
  const GemmF32Variant* v = nullptr;
  for (const auto& x : gemm_f32_variants())
    if (x.info.name == variant) v = &x;
  if (v == nullptr) return not_found(fmt::format("gemm has no variant '{}'", variant));
  const Case c = make_gemm_case(m, m, m, false, false, 1, 0, 0, 0, 0, 0, 0, 0, ValueClass::kNormal, 1);
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  nlohmann::json out;
  // Whole checked run: first a warm-up (it pays for growing the lane's
  // buffers), then with every check and with the sampled-out policy (one
  // launch, no cuBLAS), whichever of the two this case draws in a campaign.
  bool passed = true;
  for (const char* key : {"full_run_first_ms", "full_run_ms", "sampled_run_ms"}) {
    const bool every = std::string(key) != "sampled_run_ms";
    const auto t = Clock::now();
    ASSAY_ASSIGN_OR_RETURN(auto verdicts, run_gemm_f32_with(c, {variant}, lane, every));
    out[key] = ms_since(t);
    passed = passed && verdicts.front().passed();
  }
  out["passed"] = passed;
  out["case_runs_every_check"] = gemm_runs_every_check(c);
  const auto tp = Clock::now();
  ASSAY_ASSIGN_OR_RETURN(Prepared p, prepare(c, lane));
  CUDA_CHECK(cudaStreamSynchronize(lane.stream()));
  out["prepare_ms"] = ms_since(tp);  // inputs drawn on the device + device reference
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  auto median3 = [&](auto&& body) -> StatusOr<double> {
    std::vector<double> t;
    for (int i = 0; i < 3; ++i) {
      CUDA_CHECK(cudaEventRecord(e0, lane.stream()));
      ASSAY_RETURN_IF_ERROR(body());
      CUDA_CHECK(cudaEventRecord(e1, lane.stream()));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[1];
  };
  ASSAY_ASSIGN_OR_RETURN(double kernel_ms, median3([&]() -> Status {
                           const cudaError_t e = v->launch(problem_on(p.g, c, lane), lane.stream());
                           return e == cudaSuccess ? ok_status() : internal_error(cudaGetErrorString(e));
                         }));
  const TensorSpec &ta = *c.find("A"), &tb = *c.find("B");
  const int64_t mn = m * m;
  auto* ref =
      reinterpret_cast<double*>(lane.dev_scratch() + kSaveSlots * ((c.find("C")->desc.extent() * 4 + 255) / 256 * 256));
  ASSAY_ASSIGN_OR_RETURN(double ref_ms, median3([&]() -> Status {
                           vendor::RowMajorGemm rm{m, m, m, false, false, m, m, m};
                           return device_ref::gemm_f64_reference(
                               lane.cublas(), lane.stream(), rm, 1.0,
                               reinterpret_cast<const float*>(lane.dev_snapshot_tensor(kA)), ta.desc.extent(),
                               reinterpret_cast<const float*>(lane.dev_snapshot_tensor(kB)), tb.desc.extent(), 0.0,
                               nullptr, ref, ref + mn, ref + 2 * mn);
                         }));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  out["m"] = m;
  out["variant"] = variant;
  out["kernel_ms"] = kernel_ms;
  out["reference_ms"] = ref_ms;
  out["ratio"] = out["full_run_ms"].get<double>() / (kernel_ms + ref_ms);
  out["ratio_sampled"] = out["sampled_run_ms"].get<double>() / (kernel_ms + ref_ms);
  return out;
}

}  // namespace assay

namespace assay {

StatusOr<Case> gemm_with_param(const Case& c, const std::string& key, int64_t value) {
  ASSAY_ASSIGN_OR_RETURN(GemmParams g, parse_gemm_case(c));
  if (value < 0) return invalid_argument(fmt::format("gemm: {} = {} is negative", key, value));
  if (key == "m")
    g.m = value;
  else if (key == "n")
    g.n = value;
  else if (key == "k")
    g.k = value;
  else
    return invalid_argument(fmt::format("gemm has no integer knob '{}' (m, n, k)", key));
  const TensorSpec &a = *c.find("A"), &b = *c.find("B"), &cc = *c.find("C");
  auto pad_of = [](const TensorSpec& t) { return t.desc.strides[0] - std::max<int64_t>(t.desc.shape[1], 1); };
  Case out = make_gemm_case(g.m, g.n, g.k, g.trans_a, g.trans_b, g.alpha, g.beta, pad_of(a), pad_of(b), pad_of(cc),
                            a.desc.offset, b.desc.offset, cc.desc.offset, a.values, b.values, cc.values);
  out.variant = c.variant;
  if (!g.relation.empty()) out.params["relation"] = g.relation;
  return out;
}

StatusOr<Inspection> gemm_inspect(const Case& c, const std::string& variant, gpu::Lane& lane) {
  const GemmF32Variant* v = nullptr;
  for (const auto& x : gemm_f32_variants())
    if (x.info.name == variant) v = &x;
  if (v == nullptr) return not_found(fmt::format("gemm has no variant '{}'", variant));
  ASSAY_ASSIGN_OR_RETURN(Prepared p, prepare(c, lane));
  const GemmParams& g = p.g;
  const TensorDesc &da = c.find("A")->desc, &db = c.find("B")->desc, &dc = c.find("C")->desc;
  // Host copies of the exact inputs, for the per-element input lines (read
  // back from the device snapshot for a case drawn on the device).
  auto host_copy = [&](int t, const TensorDesc& d) -> StatusOr<std::shared_ptr<std::vector<float>>> {
    std::vector<float> storage;
    ASSAY_ASSIGN_OR_RETURN(const float* img, host_image(p, c, lane, t, storage));
    return std::make_shared<std::vector<float>>(img, img + d.extent());
  };
  ASSAY_ASSIGN_OR_RETURN(auto ha, host_copy(kA, da));
  ASSAY_ASSIGN_OR_RETURN(auto hb, host_copy(kB, db));
  std::vector<float> out_raw(static_cast<size_t>(dc.extent())), vendor_raw(out_raw.size());
  ASSAY_RETURN_IF_ERROR(lane.restore());
  const cudaError_t e = v->launch(problem_on(g, c, lane), lane.stream());
  if (e != cudaSuccess) return internal_error(fmt::format("launch of {} failed: {}", variant, cudaGetErrorString(e)));
  ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_tensor(kC), out_raw.data(), dc.extent() * 4));
  ASSAY_RETURN_IF_ERROR(lane.restore());
  const GemmF32Problem q = problem_on(g, c, lane);
  ASSAY_RETURN_IF_ERROR(vendor::cublas_gemm_f32_pedantic(
      lane.cublas(), vendor::RowMajorGemm{q.m, q.n, q.k, q.trans_a, q.trans_b, q.lda, q.ldb, q.ldc}, q.alpha, q.a, q.b,
      q.beta, q.c));
  ASSAY_RETURN_IF_ERROR(lane.read_back(lane.dev_tensor(kC), vendor_raw.data(), dc.extent() * 4));
  const int64_t mn = g.m * g.n;
  std::vector<double> ref(static_cast<size_t>(mn)), mag(static_cast<size_t>(mn));
  ASSAY_RETURN_IF_ERROR(lane.read_back(p.ref_dev, ref.data(), mn * 8));
  ASSAY_RETURN_IF_ERROR(lane.read_back(p.mag_dev, mag.data(), mn * 8));
  Inspection in;
  in.tensor = "C";
  in.rows = g.m;
  in.cols = g.n;
  in.reference = p.device_ref ? "device-f64" : "host-f64";
  in.out.resize(static_cast<size_t>(mn));
  in.vendor.resize(static_cast<size_t>(mn));
  in.tol.resize(static_cast<size_t>(mn));
  in.tol_expected.resize(static_cast<size_t>(mn));
  in.exact_tier = p.exact;
  in.unwritten.assign(static_cast<size_t>(mn), 0);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      const size_t l = static_cast<size_t>(i * g.n + j);
      const size_t e_ = static_cast<size_t>(dc.offset + i * g.ldc + j);
      in.out[l] = out_raw[e_];
      in.vendor[l] = vendor_raw[e_];
      in.tol[l] = p.bound.tol(std::fabs(ref[l]), mag[l]);
      in.tol_expected[l] = p.expected.tol(std::fabs(ref[l]), mag[l]);
      in.unwritten[l] = p.beta0 && is_output_poison(DType::kF32, &out_raw[e_]) ? 1 : 0;
    }
  // Which outputs a NaN/Inf input reaches: row i of op(A) or column j of op(B).
  std::vector<uint8_t> row_special(static_cast<size_t>(g.m), 0), col_special(static_cast<size_t>(g.n), 0);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t q = 0; q < g.k; ++q)
      if (!std::isfinite((*ha)[static_cast<size_t>(da.offset + (g.trans_a ? q * g.lda + i : i * g.lda + q))]))
        row_special[static_cast<size_t>(i)] = 1;
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t q = 0; q < g.k; ++q)
      if (!std::isfinite((*hb)[static_cast<size_t>(db.offset + (g.trans_b ? j * g.ldb + q : q * g.ldb + j))]))
        col_special[static_cast<size_t>(j)] = 1;
  in.touches_special.assign(static_cast<size_t>(mn), 0);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j)
      in.touches_special[static_cast<size_t>(i * g.n + j)] =
          row_special[static_cast<size_t>(i)] | col_special[static_cast<size_t>(j)];
  in.ref = std::move(ref);
  in.inputs = [g, ha, hb, oa = da.offset, ob = db.offset](int64_t i, int64_t j) {
    std::string s = fmt::format("A[{}][:] =", i);
    const int64_t show = std::min<int64_t>(g.k, 8);
    for (int64_t q = 0; q < show; ++q)
      s += fmt::format(" {:.6g}", (*ha)[static_cast<size_t>(oa + (g.trans_a ? q * g.lda + i : i * g.lda + q))]);
    if (g.k > show) s += " ...";
    s += fmt::format("; B[:][{}] =", j);
    for (int64_t q = 0; q < show; ++q)
      s += fmt::format(" {:.6g}", (*hb)[static_cast<size_t>(ob + (g.trans_b ? j * g.ldb + q : q * g.ldb + j))]);
    if (g.k > show) s += " ...";
    return s;
  };
  return in;
}

}  // namespace assay
