// gemm_batched: C[z] = alpha * op(A[z]) op(B[z]) + beta * C[z] for z < batch, fp32, row-major
// matrices (kernels/gemm/gemm.h conventions), as cublasGemmStridedBatchedEx / GemmBatchedEx.
//
// Sections: binding, generators, references and bound, properties.
// Binding: kernels/gemm/gemm_tiled.cu (the 32x32 tiled kernel, blockIdx.z over the batch):
//   "strided"   gemm_f32_tiled_strided_batched: entry z at base + z * stride;
//   "ptr_array" gemm_f32_tiled_ptr_batched: entry z through device pointer arrays that the
//               binding fills from the same strides (launch_ptr_array).
// The planted bugs of tests/mutants/gemm/batched_mutants.cpp register beside them through
// register_gemm_batched (properties/gemm_batched_registry.h).
// Tensors, as the testbed's 2-D views: one row per batch entry, each row one whole matrix stored
// row-major with an inner leading dimension (params.pad_in extra elements per matrix row), the
// row stride of the view being the batch stride (the case's pad adds a gap between entries,
// which the testbed's gap check watches):
//   A [batch, rows_a * lda] (rows_a x cols_a = m x k, or k x m when trans_a; lda = cols_a + pad_in);
//     broadcast_a: A is ONE matrix ([1, ...], stride_a = 0), shared by every entry;
//   B [batch, rows_b * ldb] likewise (k x n, or n x k when trans_b);
//   C [batch, m * n] (ldc = n), kInOut: the prefill is C, read only when beta != 0.
// Reference: references/host/gemm.h per entry, in double, on the kernel's own inputs, with
// mag = |alpha| sum |a||b| + |beta||c|.
// Bound: harness/bounds.h gemm_ceiling (fp32 in, acc and out, length k, |alpha|, beta != 0):
//   gamma_{k+2}(2^-24) mag + floor in any summation order, FMA or not, plus the reference's own
//   gamma_{k+2}(2^-53) mag (Higham (3.5); every entry is an independent GEMM).
//   Non-finite references (NaN/Inf injected into A, B or C): the value classes used here keep
//   every finite partial sum far below the fp32 range (|values| <= 2^8 * 4, k <= 2^10), so a
//   correct kernel reproduces the IEEE pattern exactly (Inf + -Inf = NaN in any order; alpha is
//   never 0, whose 0 * Inf the BLAS convention would skip): tol 0 there, NaN where the
//   reference is NaN, the same-signed Inf where it is Inf.
// Exact tier: A, B, C small integers (no injection), integer alpha, beta and
//   gemm_exact_tier_holds(fp32, k, range, |alpha|, |beta|, range): bit-identical.
// Properties: k == 0 cases (C = beta * C, exact tier with integer data); relation
//   "permute_batches" (a quarter of the cases): the entries of A (unless broadcast), B and C are
//   permuted (entry i of the new batch is entry perm[i] of the old, perm = a reversal rotated by
//   the seed) and the kernel launched again: output entry i must equal entry perm[i] of the
//   first launch within both tolerances (TensorOpDef::relate); this catches a kernel that mixes
//   up its batch index with the data (a wrong stride, a pointer array read out of order).
//   "scale2": every entry of A and the C prefill doubled: alpha (2A) B + beta (2C) = 2 D, the
//   linearity that doubling alpha tests (alpha is a case parameter the transform cannot touch),
//   held within 2 tol1 + tol2. "transpose" (m == n == k, A not broadcast): per entry
//   op(A') = op(B)^T, op(B') = op(A)^T, C' = C^T under the same transpose flags, so
//   D' = D^T: element (z, i, j) against (z, j, i) of the first launch.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "harness/bounds.h"
#include "harness/generators.h"
#include "properties/gemm_batched_registry.h"
#include "properties/rowwise_common.h"
#include "references/host/gemm.h"

namespace assay::gemm_batched {

using rowwise::bool_or;
using rowwise::int_or;
using rowwise::num_or;
using rowwise::param_int;

namespace {

constexpr const char* kPermuteBatches = "permute_batches";
constexpr const char* kScale2 = "scale2";
constexpr const char* kTranspose = "transpose";

// ---- binding ---------------------------------------------------------------------------------------
std::vector<TensorOpVariant>& reg() {
  static std::vector<TensorOpVariant> v;
  return v;
}

struct Geometry {
  int64_t m = 0, n = 0, k = 0, batch = 1, pad_in = 0;
  bool trans_a = false, trans_b = false, broadcast_a = false;
  double alpha = 1, beta = 0;
  int64_t rows_a() const { return std::max<int64_t>(trans_a ? k : m, 1); }
  int64_t lda() const { return std::max<int64_t>(trans_a ? m : k, 1) + pad_in; }
  int64_t rows_b() const { return std::max<int64_t>(trans_b ? n : k, 1); }
  int64_t ldb() const { return std::max<int64_t>(trans_b ? k : n, 1) + pad_in; }
};

Geometry geometry_of(const nlohmann::json& p) {
  Geometry g;
  g.m = p.value("m", int64_t{1}), g.n = p.value("n", int64_t{1}), g.k = p.value("k", int64_t{1});
  g.batch = p.value("batch", int64_t{1}), g.pad_in = p.value("pad_in", int64_t{0});
  g.trans_a = p.value("trans_a", false), g.trans_b = p.value("trans_b", false);
  g.broadcast_a = p.value("broadcast_a", false);
  g.alpha = p.value("alpha", 1.0), g.beta = p.value("beta", 0.0);
  return g;
}

cudaError_t launch_case(BatchedFn fn, const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
  const Geometry g = geometry_of(c.params);
  BatchedCall call;
  call.g.m = g.m, call.g.n = g.n, call.g.k = g.k, call.g.trans_a = g.trans_a, call.g.trans_b = g.trans_b;
  call.g.alpha = static_cast<float>(g.alpha), call.g.beta = static_cast<float>(g.beta);
  call.g.a = t[0].as<const float>(), call.g.lda = g.lda();
  call.g.b = t[1].as<const float>(), call.g.ldb = g.ldb();
  call.g.c = t[2].as<float>(), call.g.ldc = g.n;
  call.batch = g.batch;
  call.stride_a = g.broadcast_a ? 0 : t[0].v.ld;
  call.stride_b = t[1].v.ld;
  call.stride_c = t[2].v.ld;
  return fn(call, s);
}

cudaError_t strided(const BatchedCall& c, cudaStream_t s) {
  return kernels::gemm_f32_tiled_strided_batched(c.g, c.batch, c.stride_a, c.stride_b, c.stride_c, s);
}
cudaError_t ptr_array(const BatchedCall& c, cudaStream_t s) {
  return launch_ptr_array(c, c.batch, s);
}

[[maybe_unused]] const bool kStrided = register_gemm_batched(
    {"strided", "tiled 32x32, blockIdx.z over entries at base + z * stride", false, true, "kernels/gemm/gemm_tiled.cu"},
    strided);
[[maybe_unused]] const bool kPtrArray =
    register_gemm_batched({"ptr_array", "tiled 32x32, entries through device pointer arrays", false, true,
                           "kernels/gemm/gemm_tiled.cu"},
                          ptr_array);

// ---- generators ------------------------------------------------------------------------------------
// Value classes whose finite partial sums stay far from fp32 overflow (see the header).
const std::vector<ValueClass>& classes() {
  static const std::vector<ValueClass> v = {ValueClass::kNormal,   ValueClass::kUniform,    ValueClass::kSameSign,
                                            ValueClass::kSmallInt, ValueClass::kLogUniform, ValueClass::kSubnormal,
                                            ValueClass::kSignedZero, ValueClass::kOneHot};
  return v;
}

rc::Gen<ValueRecipe> gen_recipe(bool small_int) {
  RecipeOptions o;
  o.classes = small_int ? std::vector<ValueClass>{ValueClass::kSmallInt} : classes();
  o.dtype = DType::kF32;
  o.specials = small_int ? 0 : kSpecialAll;
  o.tile = o.specials != 0 ? kernels::kGemmTiledTile : 0;
  o.inject_percent = o.specials != 0 ? 15 : 0;
  return rc::gen::map(gen_value_recipe(o), [](ValueRecipe r) {
    r.exp_min = std::max<int64_t>(r.exp_min, -8);
    r.exp_max = std::min<int64_t>(r.exp_max, 8);
    if (r.exp_max < r.exp_min) r.exp_max = r.exp_min;
    return r;
  });
}

constexpr int64_t kMaxDim = 96, kMaxK = 1024, kMaxBatch = 40;

/// max_dim (the campaign's size class) caps m, n, k and the batch count.
rc::Gen<Case> gen_case(int64_t max_dim) {
  return rc::gen::exec([max_dim] {
    nlohmann::json p;
    const int64_t t = kernels::kGemmTiledTile;
    const int64_t cap = std::max<int64_t>(1, std::min(kMaxDim, max_dim));
    p["batch"] = *gen_extent(std::max<int64_t>(1, std::min(kMaxBatch, max_dim)), {}, 1);
    p["m"] = *gen_extent(cap, {t}, 1);
    p["n"] = *gen_extent(cap, {t}, 1);
    p["k"] = *gen_weighted_index({1, 8}) == 0
                 ? int64_t{0}
                 : *gen_extent(std::max<int64_t>(1, std::min(*gen_element<int64_t>({96, kMaxK}), max_dim)), {t}, 1);
    // At most 2^22 multiply-adds per case (the host reference): halve the batch or k, the larger.
    while (p["batch"].get<int64_t>() * p["m"].get<int64_t>() * p["n"].get<int64_t>() *
               std::max<int64_t>(p["k"].get<int64_t>(), 1) >
           (int64_t{1} << 22)) {
      const char* key = p["batch"].get<int64_t>() >= p["k"].get<int64_t>() ? "batch" : "k";
      p[key] = std::max<int64_t>(p[key].get<int64_t>() / 2, 1);
    }
    p["trans_a"] = *rc::gen::arbitrary<bool>();
    p["trans_b"] = *rc::gen::arbitrary<bool>();
    p["broadcast_a"] = *gen_weighted_index({4, 1}) == 1;
    p["pad_in"] = *gen_element<int64_t>({0, 0, 1, 3, 4});
    const bool exact = *gen_weighted_index({2, 1}) == 1;
    p["alpha"] = exact ? *gen_element<double>({1, -1, 2}) : *gen_element<double>({1, -1, 0.5, 1.5, -0.75});
    p["beta"] = exact ? *gen_element<double>({0, 1, -1, 2}) : *gen_element<double>({0, 1, -1, 0.5, 2.25});
    if (*gen_weighted_index({3, 1}) == 1) {
      const size_t which = *gen_weighted_index({2, 1, 1});
      if (which == 2) {  // transpose needs square entries and its own A per entry
        p["n"] = p["k"] = p["m"];
        p["broadcast_a"] = false;
      }
      p["relation"] = which == 0 ? kPermuteBatches : which == 1 ? kScale2 : kTranspose;
    }
    const ValueRecipe ra = *gen_recipe(exact), rb = *gen_recipe(exact), rc_ = *gen_recipe(exact);
    const int64_t pad = *gen_element<int64_t>({0, 0, 0, 1, 5, 32});
    const int64_t off = *gen_element<int64_t>({0, 0, 0, 1, 2});
    return build_batched_case(p, {ra, rb, rc_}, pad, off);
  });
}

Status validate(const Case& c) {
  for (const char* k : {"m", "n", "batch"}) ASSAY_RETURN_IF_ERROR(param_int(c, k, 1, 1 << 14).status());
  ASSAY_RETURN_IF_ERROR(param_int(c, "k", 0, 1 << 16).status());
  ASSAY_RETURN_IF_ERROR(param_int(c, "pad_in", 0, 64).status());
  for (const char* k : {"alpha", "beta"})
    if (!c.params.contains(k) || !c.params[k].is_number() || !std::isfinite(c.params[k].get<double>()))
      return invalid_argument(fmt::format("gemm_batched case: params.{} must be a finite number", k));
  for (const char* k : {"trans_a", "trans_b", "broadcast_a"})
    if (c.params.contains(k) && !c.params[k].is_boolean())
      return invalid_argument(fmt::format("gemm_batched case: params.{} must be true or false", k));
  if (c.params["alpha"].get<double>() == 0)
    return invalid_argument("gemm_batched case: params.alpha = 0 is outside the spec (0 * Inf, see its header)");
  const std::string rel = rowwise::str_or(c, "relation", "");
  if (!rel.empty() && rel != kPermuteBatches && rel != kScale2 && rel != kTranspose)
    return invalid_argument(
        fmt::format("gemm_batched case: unknown relation '{}' (permute_batches, scale2, transpose)", rel));
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, {{"A", Role::kIn}, {"B", Role::kIn}, {"C", Role::kInOut}}));
  for (const TensorSpec& t : c.tensors)
    if (t.desc.dtype != DType::kF32)
      return invalid_argument(fmt::format("gemm_batched case: tensor {} must be fp32", t.name));
  const Geometry g = geometry_of(c.params);
  if (g.m * g.n * std::max<int64_t>(g.k, 1) * g.batch > (int64_t{1} << 26))
    return invalid_argument("gemm_batched case: more than 2^26 multiply-adds (the host reference's limit)");
  auto expect = [&](const TensorSpec& t, int64_t rows, int64_t cols) -> Status {
    if (t.desc.shape[0] != rows || t.desc.shape[1] != cols)
      return invalid_argument(fmt::format("gemm_batched case: tensor {} must be [{}, {}] for these params", t.name,
                                          rows, cols));
    return ok_status();
  };
  ASSAY_RETURN_IF_ERROR(expect(c.tensors[0], g.broadcast_a ? 1 : g.batch, g.rows_a() * g.lda()));
  ASSAY_RETURN_IF_ERROR(expect(c.tensors[1], g.batch, g.rows_b() * g.ldb()));
  return expect(c.tensors[2], g.batch, g.m * g.n);
}

// ---- references and bound ----------------------------------------------------------------------------
Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Geometry g = geometry_of(c.params);
  GemmBoundModel model;
  model.k = g.k;
  model.alpha_abs = std::fabs(g.alpha);
  model.has_beta = g.beta != 0;
  const ElementBound bound = gemm_ceiling(model);
  const auto& rec = c.tensors;
  bool exact = true;
  int64_t range = 0;
  for (int i = 0; i < 3; ++i) {
    exact &= rec[static_cast<size_t>(i)].values.cls == ValueClass::kSmallInt &&
             !rec[static_cast<size_t>(i)].values.inject.active();
    range = std::max(range, rec[static_cast<size_t>(i)].values.int_range);
  }
  exact = exact && gemm_exact_tier_holds(DType::kF32, g.k, range, std::fabs(g.alpha), std::fabs(g.beta),
                                         static_cast<double>(range));
  OutputRef r;
  const int64_t mn = g.m * g.n;
  r.ref.resize(static_cast<size_t>(g.batch * mn));
  r.tol.resize(r.ref.size());
  std::vector<double> mag(static_cast<size_t>(mn));
  for (int64_t z = 0; z < g.batch; ++z) {
    ref::GemmProblem<double> p;
    p.m = g.m, p.n = g.n, p.k = g.k, p.trans_a = g.trans_a, p.trans_b = g.trans_b;
    p.alpha = g.alpha, p.beta = g.beta;
    p.a = t[0].data + (g.broadcast_a ? 0 : z) * t[0].v.ld, p.lda = g.lda();
    p.b = t[1].data + z * t[1].v.ld, p.ldb = g.ldb();
    p.c = t[2].data + z * t[2].v.ld, p.ldc = g.n;
    double* y = r.ref.data() + z * mn;
    ref::gemm_reference<double>(p, y, mag.data());
    for (int64_t l = 0; l < mn; ++l) {
      const double v = y[l];
      r.tol[static_cast<size_t>(z * mn + l)] =
          std::isfinite(v) ? bound.tol(std::fabs(v), mag[static_cast<size_t>(l)]) : 0.0;
    }
  }
  r.exact = exact;
  out = {std::move(r)};
  return ok_status();
}

// ---- properties --------------------------------------------------------------------------------------
/// perm[i]: the old entry that becomes entry i (a reversal rotated by the seed of A's recipe).
std::vector<int64_t> permutation(const Case& c) {
  const int64_t b = geometry_of(c.params).batch;
  const int64_t shift = static_cast<int64_t>(c.tensors[0].values.seed % static_cast<uint64_t>(b));
  std::vector<int64_t> perm(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) perm[static_cast<size_t>(i)] = (b - 1 - i + shift) % b;
  return perm;
}

/// Entry z of tensor t of the (fp32) images, as a float pointer.
float* entry(const Case& c, std::vector<unsigned char*>& img, int t, int64_t z) {
  const TensorDesc& d = c.tensors[static_cast<size_t>(t)].desc;
  return reinterpret_cast<float*>(img[static_cast<size_t>(t)]) + d.offset + z * d.strides[0];
}

/// "scale2": A (every stored entry) and the C prefill doubled.
bool scale_inputs(const Case& c, std::vector<unsigned char*>& img) {
  const Geometry g = geometry_of(c.params);
  for (int t : {0, 2})
    for (int64_t z = 0; z < (t == 0 && g.broadcast_a ? 1 : g.batch); ++z) {
      float* e = entry(c, img, t, z);
      for (int64_t l = 0; l < c.tensors[static_cast<size_t>(t)].desc.shape[1]; ++l) e[l] *= 2.0f;
    }
  return true;
}

/// "transpose" (square, A not broadcast): op(A') = op(B)^T, op(B') = op(A)^T, C' = C^T per entry.
bool transpose_inputs(const Case& c, std::vector<unsigned char*>& img) {
  const Geometry g = geometry_of(c.params);
  if (g.m != g.n || g.n != g.k || g.broadcast_a) return false;
  const int64_t n = g.n, lda = g.lda(), ldb = g.ldb();
  // op(X)[i][p] of a matrix stored row-major with leading dimension ld, transposed or not.
  auto at = [](float* x, bool trans, int64_t ld, int64_t i, int64_t p) -> float& {
    return trans ? x[p * ld + i] : x[i * ld + p];
  };
  for (int64_t z = 0; z < g.batch; ++z) {
    float *a = entry(c, img, 0, z), *b = entry(c, img, 1, z), *cc = entry(c, img, 2, z);
    std::vector<float> oa(static_cast<size_t>(n * n)), ob(oa.size()), oc(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < n; ++p) {
        oa[static_cast<size_t>(i * n + p)] = at(a, g.trans_a, lda, i, p);
        ob[static_cast<size_t>(i * n + p)] = at(b, g.trans_b, ldb, i, p);
        oc[static_cast<size_t>(i * n + p)] = cc[i * n + p];
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < n; ++p) {
        at(a, g.trans_a, lda, i, p) = ob[static_cast<size_t>(p * n + i)];
        at(b, g.trans_b, ldb, i, p) = oa[static_cast<size_t>(p * n + i)];
        cc[i * n + p] = oc[static_cast<size_t>(p * n + i)];
      }
  }
  return true;
}

bool transform_inputs(const Case& c, std::vector<unsigned char*>& img) {
  const std::string rel = rowwise::str_or(c, "relation", "");
  if (rel == kScale2) return scale_inputs(c, img);
  if (rel == kTranspose) return transpose_inputs(c, img);
  if (rel != kPermuteBatches) return false;
  const Geometry g = geometry_of(c.params);
  const std::vector<int64_t> perm = permutation(c);
  for (int ti = 0; ti < 3; ++ti) {
    if (ti == 0 && g.broadcast_a) continue;
    const TensorDesc& d = c.tensors[static_cast<size_t>(ti)].desc;
    const size_t es = dtype_size(d.dtype);
    const size_t row_bytes = static_cast<size_t>(d.shape[1]) * es, ld_bytes = static_cast<size_t>(d.strides[0]) * es;
    unsigned char* base = img[static_cast<size_t>(ti)] + static_cast<size_t>(d.offset) * es;
    std::vector<unsigned char> old(base, base + static_cast<size_t>(g.batch - 1) * ld_bytes + row_bytes);
    for (int64_t i = 0; i < g.batch; ++i)
      std::copy_n(old.data() + static_cast<size_t>(perm[static_cast<size_t>(i)]) * ld_bytes, row_bytes,
                  base + static_cast<size_t>(i) * ld_bytes);
  }
  return true;
}

rowwise::RowOpConfig config() {
  rowwise::RowOpConfig cfg;
  cfg.name = "gemm_batched";
  cfg.description = "fp32 batched GEMM C[z] = alpha*op(A[z])op(B[z]) + beta*C[z], strided and pointer-array";
  cfg.def.op = cfg.name;
  cfg.def.bound_name = "gemm ceiling";
  cfg.def.reference = reference;
  cfg.def.transform = transform_inputs;
  cfg.def.relate = [](const Case& c, size_t, int64_t i, int64_t j, RelatedElement& e) {
    const std::string rel = rowwise::str_or(c, "relation", "");
    e.from_i = i, e.from_j = j, e.scale = 1;
    if (rel == kPermuteBatches) {
      e.from_i = permutation(c)[static_cast<size_t>(i)];
    } else if (rel == kScale2) {
      e.scale = 2;
    } else if (rel == kTranspose) {
      const int64_t n = geometry_of(c.params).n;
      e.from_j = (j % n) * n + j / n;
    }
    return true;
  };
  cfg.registry = &reg();
  cfg.gen = [](const GenConfig& g) { return gen_case(g.max_dim); };
  cfg.build = build_batched_case;
  cfg.validate = validate;
  cfg.shrink_keys = {{"batch", 1}, {"m", 1}, {"n", 1}, {"k", 0}, {"pad_in", 0}};
  cfg.self_check_note = "host reference references/host/gemm.h (checked with the gemm spec's self-check)";
  return cfg;
}

[[maybe_unused]] const bool kSpec = register_spec(std::make_unique<rowwise::RowOpSpec>(config()));

}  // namespace

bool register_gemm_batched(VariantInfo info, BatchedFn fn) {
  reg().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                     return launch_case(fn, c, t, s);
                   }});
  return true;
}

const std::vector<TensorOpVariant>& gemm_batched_variants() {
  return reg();
}

cudaError_t launch_ptr_array(const BatchedCall& call, int64_t batch_launched, cudaStream_t stream) {
  // One device buffer per stream, grown as needed and never freed (a lane keeps its stream for
  // the whole campaign). The host array is pageable: cudaMemcpyAsync stages it before returning.
  static std::mutex mu;
  static std::map<cudaStream_t, std::pair<void*, size_t>> buffers;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(call.batch, 1)) * 3 * sizeof(void*);
  void* dev = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& [ptr, size] = buffers[stream];
    if (size < bytes) {
      if (ptr != nullptr) {
        if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return e;
        (void)cudaFree(ptr);
        ptr = nullptr, size = 0;
      }
      if (const cudaError_t e = cudaMalloc(&ptr, bytes); e != cudaSuccess) return e;
      size = bytes;
    }
    dev = ptr;
  }
  std::vector<const void*> host(static_cast<size_t>(call.batch) * 3);
  for (int64_t z = 0; z < call.batch; ++z) {
    host[static_cast<size_t>(z)] = call.g.a + z * call.stride_a;
    host[static_cast<size_t>(call.batch + z)] = call.g.b + z * call.stride_b;
    host[static_cast<size_t>(2 * call.batch + z)] = call.g.c + z * call.stride_c;
  }
  if (call.batch > 0)
    if (const cudaError_t e =
            cudaMemcpyAsync(dev, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice, stream);
        e != cudaSuccess)
      return e;
  auto* arrays = static_cast<void**>(dev);
  return kernels::gemm_f32_tiled_ptr_batched(call.g, batch_launched, reinterpret_cast<const float* const*>(arrays),
                                             reinterpret_cast<const float* const*>(arrays + call.batch),
                                             reinterpret_cast<float* const*>(arrays + 2 * call.batch), stream);
}

Case build_batched_case(const nlohmann::json& params, const std::vector<ValueRecipe>& recipes, int64_t pad,
                        int64_t off) {
  Case c;
  c.op = "gemm_batched";
  c.params = params;
  const Geometry g = geometry_of(params);
  auto r = [&](size_t i) { return i < recipes.size() ? recipes[i] : ValueRecipe{}; };
  c.tensors = {make_tensor("A", Role::kIn, DType::kF32, g.broadcast_a ? 1 : g.batch, g.rows_a() * g.lda(), pad, off,
                           r(0)),
               make_tensor("B", Role::kIn, DType::kF32, g.batch, g.rows_b() * g.ldb(), pad, off, r(1)),
               make_tensor("C", Role::kInOut, DType::kF32, g.batch, g.m * g.n, pad, off, r(2))};
  return c;
}

const TensorOpDef& batched_def() {
  static const TensorOpDef def = config().def;
  return def;
}

}  // namespace assay::gemm_batched
