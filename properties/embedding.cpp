// embedding / embedding_bwd: lookup of rows of a [vocab, dim] table by int32
// indices, and its backward, a scatter-add into an fp32 gradient table.
//
// Sections: binding, generators, references, bound, properties.
// Binding: kernels/rowwise/embedding.cu (gather; fp32 atomicAdd scatter);
// mutants in tests/mutants/rowwise/ register through register_embedding_*.
// Tensors: the [.., dim] activation first (so that pad and offset, and the
// campaign's dtype/class key, come from it), then idx (kI32, [count]), then
// the output. idx values: U(0, vocab) rounded to int32 (so [0, vocab], vocab
// itself now and then), +-Inf injections saturating to INT32_MAX / INT32_MIN.
// References (here, in double): out[r] = table[idx[r]] or a zero row for an
// index outside [0, vocab) (the declared behaviour); dtable[v] = prefill[v] +
// sum over r with idx[r] == v of dout[r] (out-of-range indices skipped).
// Bounds:
// - embedding: exact tier (OutputRef.exact, tol 0): a gather copies bits.
// - embedding_bwd: atomics sum in any order, so the variant is declared
//   non-deterministic and judged by the bound alone. With k = the number of
//   rows r with idx[r] == v (k + 1 terms, k fp32 additions), [H] (4.4)/(3.5)
//   for any order: |dtable^ - dtable| <= gamma_k(2^-24) (|prefill| + sum |dout|)
//   + (2k + 1) min_normal(fp32) (global fp32 atomics flush subnormals to zero,
//   operands and results) + the double reference's gamma_k(2^-53) share.
//   k = 0: the row is untouched, tol 0. Exact where every term is an integer
//   and |prefill| + sum |dout| < 2^24 (every partial sum, in any order, is an
//   integer below 2^24, so exact in fp32): tol 0, and the whole output is
//   exact tier when every element is. Where |prefill| + sum |dout| reaches the
//   fp32 maximum a partial sum may overflow in some order: tol +Inf.
// Properties (case param "relation"):
// - "permute" (embedding_bwd): reversing the order of the (idx, dout) rows
//   must not change dtable beyond both tolerances (bit-identical in the exact
//   tier): the sum does not depend on the order of its terms.
// Value classes: every activation class for table and dout (NaN/Inf
// injection, near-overflow, subnormals), small integers for the exact tier,
// prefill from normal, small-int, signed-zero and log-uniform recipes; vocab
// 1..4096 (mostly small: many duplicates), dim 1, 3, 4, 31, 32, 33, 128, 129,
// 1024 or any, count up to 4096, padded rows and offsets.
#include <cmath>
#include <vector>

#include "properties/rowwise_common.h"
#include "properties/rowwise_registry.h"

namespace assay::rowwise {
namespace {

// ---- binding ---------------------------------------------------------------------
std::vector<TensorOpVariant>& fwd_registry() {
  static std::vector<TensorOpVariant> v;
  return v;
}
std::vector<TensorOpVariant>& bwd_registry() {
  static std::vector<TensorOpVariant> v;
  return v;
}

}  // namespace

// Tensors: table [vocab, dim], idx [count], out [count, dim].
bool register_embedding_fwd(VariantInfo info, EmbeddingFwdFn fn) {
  fwd_registry().push_back({std::move(info), [fn](const Case&, const std::vector<DevTensor>& t, cudaStream_t s) {
                              return fn(to_dt(t[0].dtype), t[1].as<const int32_t>(), t[1].v.cols, t[0].ptr, t[0].v.ld,
                                        t[0].v.rows, t[0].v.cols, t[2].ptr, t[2].v.ld, s);
                            }});
  return true;
}
// Tensors: dout [count, dim], idx [count], dtable [vocab, dim] (fp32, accumulated into).
bool register_embedding_bwd(VariantInfo info, EmbeddingBwdFn fn) {
  bwd_registry().push_back({std::move(info), [fn](const Case&, const std::vector<DevTensor>& t, cudaStream_t s) {
                              return fn(to_dt(t[0].dtype), t[1].as<const int32_t>(), t[1].v.cols, t[0].ptr, t[0].v.ld,
                                        t[2].as<float>(), t[2].v.ld, t[2].v.rows, t[2].v.cols, s);
                            }});
  return true;
}

namespace {

const char* const kSrc = "kernels/rowwise/embedding.cu";
[[maybe_unused]] const bool kRegistered =
    register_embedding_fwd(
        {"gather", "a row of threads per index, grid-stride over indices; zero rows out of range", false, true, kSrc},
        kernels::rowwise::embedding_fwd) &&
    register_embedding_bwd(
        {"atomic", "fp32 atomicAdd per element: duplicate indices sum in any order", false, false, kSrc},
        kernels::rowwise::embedding_bwd);

constexpr int64_t kMaxVocab = 4096, kMaxDim = 1024, kMaxCount = 4096, kMaxElems = 1 << 21;
constexpr double u32 = 0x1p-24, u64 = 0x1p-53;

// ---- generators -----------------------------------------------------------------
struct EmbShape {
  DType dt = DType::kF32;
  int64_t vocab = 0, dim = 0, count = 0;
};
EmbShape shape_of(const nlohmann::json& p) {
  return {*parse_dtype(p["dtype"].get<std::string>()), p["vocab"].get<int64_t>(), p["dim"].get<int64_t>(),
          p["count"].get<int64_t>()};
}

/// The index recipe follows vocab: U(0, vocab) rounded to int32 gives [0, vocab].
ValueRecipe idx_recipe(ValueRecipe r, int64_t vocab) {
  if (r.cls == ValueClass::kSameSign) r.scale = static_cast<double>(vocab);
  return r;
}

Case build(bool fwd, const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
  Case c;
  c.op = fwd ? "embedding" : "embedding_bwd";
  c.params = p;
  const EmbShape s = shape_of(p);
  const ValueRecipe ri = idx_recipe(r[1], s.vocab);
  if (fwd)
    c.tensors = {make_tensor("table", Role::kIn, s.dt, s.vocab, s.dim, pad, off, r[0]),
                 make_tensor("idx", Role::kIn, DType::kI32, -1, s.count, 0, off, ri),
                 make_tensor("out", Role::kOut, s.dt, s.count, s.dim, pad, off, {})};
  else
    c.tensors = {make_tensor("dout", Role::kIn, s.dt, s.count, s.dim, pad, off, r[0]),
                 make_tensor("idx", Role::kIn, DType::kI32, -1, s.count, 0, off, ri),
                 make_tensor("dtable", Role::kInOut, DType::kF32, s.vocab, s.dim, pad, off, r[2])};
  return c;
}

rc::Gen<Case> gen(bool fwd, const GenConfig& cfg) {
  const int64_t dcap = std::max<int64_t>(1, std::min<int64_t>(cfg.max_dim, kMaxDim));
  return rc::gen::exec([fwd, dcap] {
    std::vector<int64_t> dims;
    for (int64_t d : {1, 3, 4, 31, 32, 33, 128, 129, 1024})
      if (d <= dcap) dims.push_back(d);
    const int64_t dim = *gen_weighted_index({3, 1}) == 0 ? *gen_element(dims) : *gen_extent(dcap, {32, 128, 256}, 1);
    // Small vocabularies against long index lists: many duplicates.
    const int64_t vocab = *gen_extent(std::min<int64_t>(kMaxVocab, kMaxElems / dim), {32, 128}, 1);
    const int64_t count =
        *gen_extent(std::max<int64_t>(1, std::min<int64_t>(kMaxCount, kMaxElems / dim)), {32, 256}, 1);
    const DType dt = *gen_element(activation_dtypes());
    nlohmann::json p = {{"dtype", std::string(dtype_name(dt))}, {"vocab", vocab}, {"dim", dim}, {"count", count}};
    if (!fwd && *gen_weighted_index({5, 1}) == 1) p["relation"] = "permute";
    // The exact tier: small integers in dout and the prefill.
    const bool exact = !fwd && *gen_weighted_index({2, 1}) == 1;
    RecipeOptions io;
    io.classes = {ValueClass::kSameSign};
    io.dtype = DType::kI32;
    io.specials = kSpecialPosInf | kSpecialNegInf;  // saturate to INT32_MAX / INT32_MIN: out of range
    io.inject_percent = 20;
    std::vector<ValueRecipe> r;
    r.push_back(exact ? *gen_value_recipe(RecipeOptions{{ValueClass::kSmallInt}, dt, 0, 0, 0})
                      : *gen_row_recipe(dt, kSpecialAll));
    r.push_back(idx_recipe(*gen_value_recipe(io), vocab));
    if (!fwd) {
      const std::vector<ValueClass> pre =
          exact ? std::vector<ValueClass>{ValueClass::kSmallInt}
                : std::vector<ValueClass>{ValueClass::kNormal, ValueClass::kSmallInt, ValueClass::kSignedZero,
                                          ValueClass::kLogUniform};
      r.push_back(*gen_value_recipe(RecipeOptions{pre, DType::kF32, 0, 0, 0}));
    }
    const int64_t pad = *gen_element<int64_t>({0, 0, 0, 1, 3, 8});
    const int64_t off = *gen_element<int64_t>({0, 0, 0, 1, 2});
    return build(fwd, p, r, pad, off);
  });
}

Status validate(bool fwd, const Case& c) {
  ASSAY_ASSIGN_OR_RETURN(DType dt, param_dtype(c));
  ASSAY_ASSIGN_OR_RETURN(int64_t vocab, param_int(c, "vocab", 1, kMaxVocab));
  ASSAY_ASSIGN_OR_RETURN(int64_t dim, param_int(c, "dim", 0, kMaxDim));
  ASSAY_ASSIGN_OR_RETURN(int64_t count, param_int(c, "count", 0, kMaxCount));
  const std::string rel = str_or(c, "relation", "");
  if (c.params.contains("relation") && (fwd || rel != "permute"))
    return invalid_argument(
        c.op + (fwd ? " case: params.relation is not supported" : " case: params.relation must be \"permute\""));
  if (fwd)
    ASSAY_RETURN_IF_ERROR(validate_tensor_layout(c, {{"table", Role::kIn}, {"idx", Role::kIn}, {"out", Role::kOut}}));
  else
    ASSAY_RETURN_IF_ERROR(
        validate_tensor_layout(c, {{"dout", Role::kIn}, {"idx", Role::kIn}, {"dtable", Role::kInOut}}));
  auto want = [&](const TensorSpec& t, DType d, std::vector<int64_t> shape, const char* what) -> Status {
    if (t.desc.dtype != d || t.desc.shape != shape)
      return invalid_argument(fmt::format("{} case: tensor {} must be {} {}", c.op, t.name, dtype_name(d), what));
    return ok_status();
  };
  const auto& T = c.tensors;
  if (fwd) {
    ASSAY_RETURN_IF_ERROR(want(T[0], dt, {vocab, dim}, "[vocab, dim]"));
    ASSAY_RETURN_IF_ERROR(want(T[2], dt, {count, dim}, "[count, dim]"));
  } else {
    ASSAY_RETURN_IF_ERROR(want(T[0], dt, {count, dim}, "[count, dim]"));
    ASSAY_RETURN_IF_ERROR(want(T[2], DType::kF32, {vocab, dim}, "[vocab, dim]"));
  }
  ASSAY_RETURN_IF_ERROR(want(T[1], DType::kI32, {count}, "[count]"));
  return ok_status();
}

// ---- references and bounds --------------------------------------------------------
int64_t index_at(const HostTensor& idx, int64_t r) {
  return static_cast<int64_t>(idx.at(0, r));  // decoded int32: exact in double
}

Status reference_fwd(const Case&, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const HostTensor &table = t[0], &idx = t[1];
  const int64_t vocab = table.v.rows, dim = table.v.cols, count = idx.v.cols;
  OutputRef o;
  o.exact = true;
  o.ref.assign(static_cast<size_t>(count * dim), 0.0);
  o.tol.assign(o.ref.size(), 0.0);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t v = index_at(idx, r);
    if (v < 0 || v >= vocab) continue;  // declared: a zero row
    for (int64_t j = 0; j < dim; ++j) o.ref[static_cast<size_t>(r * dim + j)] = table.at(v, j);
  }
  out = {std::move(o)};
  return ok_status();
}

/// Tolerance of one dtable element: `k` fp32 additions (atomics, any order) of terms whose absolute
/// values sum to `mag`; `integers`: every term is an integer (finite).
double scatter_add_tol(int64_t k, double mag, bool integers) {
  if (k == 0) return 0;                                   // untouched
  if (integers && mag < 0x1p24) return 0;                 // every partial sum exact in fp32
  if (!(mag < max_finite(DType::kF32))) return INFINITY;  // a partial sum may overflow in some order
  return (gamma_n(k, u32) + gamma_n(k, u64)) * mag + static_cast<double>(2 * k + 1) * min_normal(DType::kF32);
}

Status reference_bwd(const Case&, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const HostTensor &dout = t[0], &idx = t[1], &pre = t[2];
  const int64_t vocab = pre.v.rows, dim = pre.v.cols, count = idx.v.cols;
  OutputRef o;
  const size_t n = static_cast<size_t>(vocab * dim);
  o.ref.resize(n);
  o.tol.resize(n);
  std::vector<double> mag(n);
  std::vector<uint8_t> integer(n);
  std::vector<int64_t> k(static_cast<size_t>(vocab), 0);
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t j = 0; j < dim; ++j) {
      const size_t l = static_cast<size_t>(v * dim + j);
      const double x = pre.at(v, j);
      o.ref[l] = x;
      mag[l] = std::fabs(x);
      integer[l] = std::isfinite(x) && std::floor(x) == x;
    }
  for (int64_t r = 0; r < count; ++r) {
    const int64_t v = index_at(idx, r);
    if (v < 0 || v >= vocab) continue;
    ++k[static_cast<size_t>(v)];
    for (int64_t j = 0; j < dim; ++j) {
      const size_t l = static_cast<size_t>(v * dim + j);
      const double x = dout.at(r, j);
      o.ref[l] += x;
      mag[l] += std::fabs(x);
      integer[l] = integer[l] && std::isfinite(x) && std::floor(x) == x;
    }
  }
  bool all_exact = true;
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t j = 0; j < dim; ++j) {
      const size_t l = static_cast<size_t>(v * dim + j);
      o.tol[l] = scatter_add_tol(k[static_cast<size_t>(v)], mag[l], integer[l] != 0);
      all_exact = all_exact && o.tol[l] == 0;
    }
  o.exact = all_exact && n > 0;
  out = {std::move(o)};
  return ok_status();
}

// ---- properties ---------------------------------------------------------------------
/// "permute": the rows of idx and dout in reverse order.
bool reverse_rows(const Case& c, std::vector<unsigned char*>& img) {
  if (str_or(c, "relation", "") != "permute") return false;
  const auto& dd = c.tensors[0].desc;
  const auto& di = c.tensors[1].desc;
  const View2D v = view_of(dd);
  const int64_t count = view_of(di).cols;
  const size_t es = dtype_size(dd.dtype);
  std::vector<unsigned char> tmp(static_cast<size_t>(v.cols) * es);
  for (int64_t r = 0, q = count - 1; r < q; ++r, --q) {
    unsigned char* a = img[0] + static_cast<size_t>(dd.offset + r * v.ld) * es;
    unsigned char* b = img[0] + static_cast<size_t>(dd.offset + q * v.ld) * es;
    std::copy(a, a + tmp.size(), tmp.begin());
    std::copy(b, b + tmp.size(), a);
    std::copy(tmp.begin(), tmp.end(), b);
    int32_t* ia = reinterpret_cast<int32_t*>(img[1]) + di.offset + r;
    int32_t* ib = reinterpret_cast<int32_t*>(img[1]) + di.offset + q;
    std::swap(*ia, *ib);
  }
  return true;
}

RowOpConfig fwd_config() {
  RowOpConfig cfg;
  cfg.name = "embedding";
  cfg.description = "embedding lookup out[r] = table[idx[r]] (int32 idx; zero rows out of range), bit-exact";
  cfg.def.op = "embedding";
  cfg.def.bound_name = "embedding exact tier";
  cfg.def.reference = reference_fwd;
  cfg.registry = &fwd_registry();
  cfg.gen = [](const GenConfig& g) { return gen(true, g); };
  cfg.build = [](const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
    return build(true, p, r, pad, off);
  };
  cfg.validate = [](const Case& c) { return validate(true, c); };
  cfg.shrink_keys = {{"count", 1}, {"dim", 1}, {"vocab", 1}};
  cfg.self_check_note = "reference is a gather (no arithmetic)";
  return cfg;
}
RowOpConfig bwd_config() {
  RowOpConfig cfg;
  cfg.name = "embedding_bwd";
  cfg.description =
      "embedding backward dtable[idx[r]] += dout[r] into an fp32 table (accumulate), duplicates summed in any order";
  cfg.def.op = "embedding_bwd";
  cfg.def.bound_name = "scatter-add ceiling";
  cfg.def.reference = reference_bwd;
  cfg.def.transform = reverse_rows;
  cfg.registry = &bwd_registry();
  cfg.gen = [](const GenConfig& g) { return gen(false, g); };
  cfg.build = [](const nlohmann::json& p, const std::vector<ValueRecipe>& r, int64_t pad, int64_t off) {
    return build(false, p, r, pad, off);
  };
  cfg.validate = [](const Case& c) { return validate(false, c); };
  cfg.shrink_keys = {{"count", 1}, {"dim", 1}, {"vocab", 1}};
  cfg.self_check_note = "reference is a sum in double over the rows (no transcendental functions)";
  return cfg;
}

const RowOpConfig& config(bool fwd) {
  static const RowOpConfig f = fwd_config(), b = bwd_config();
  return fwd ? f : b;
}

[[maybe_unused]] const bool kSpecs = register_spec(std::make_unique<RowOpSpec>(config(true))) &&
                                     register_spec(std::make_unique<RowOpSpec>(config(false)));

}  // namespace

const TensorOpDef& embedding_def() {
  return config(true).def;
}
const TensorOpDef& embedding_bwd_def() {
  return config(false).def;
}

}  // namespace assay::rowwise
