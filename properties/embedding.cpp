// embedding / embedding_bwd: lookup of rows of a [vocab, dim] table by int32
// indices, and its backward, a scatter-add into an fp32 gradient table.
//
// Sections: declaration (params, tensors), references, bounds, properties, binding.
// Binding: kernels/rowwise/embedding.cu (gather; fp32 atomicAdd scatter, which
// adds into dtable: Contract::accumulates, and is non-deterministic); the
// planted bugs of tests/mutants/rowwise/ bind through embedding_launch /
// embedding_bwd_launch (embedding.h).
// Tensors: the [.., dim] activation first (the campaign's dtype/class key comes
// from it), then idx (i32, [count]), then the output. idx values: U(0, vocab)
// rounded to int32 (so [0, vocab], vocab itself now and then), +-Inf injections
// saturating to INT32_MAX / INT32_MIN.
// References (here, in double): out[r] = table[idx[r]] or a zero row for an
// index outside [0, vocab) (the declared behaviour); dtable[v] = sum over r
// with idx[r] == v of dout[r] (out-of-range indices skipped). A variant that
// accumulates into dtable (+=) declares it; the engine prefills dtable and
// expects prefill + that sum.
// Bounds:
// - embedding: exact tier (OutputRef.exact, tol 0): a gather copies bits.
// - embedding_bwd: atomics sum in any order, so the variant is declared
//   non-deterministic and judged by the bound alone. With k = the number of
//   rows r with idx[r] == v (k terms, at most k fp32 additions), [H] (4.4)/(3.5)
//   for any order: |dtable^ - dtable| <= gamma_k(2^-24) sum |dout| + (2k + 1)
//   min_normal(fp32) (global fp32 atomics flush subnormals to zero, operands and
//   results) + the double reference's gamma_k(2^-53) share. Accumulated in
//   place into a prefill p, every partial sum holds p too: the bound hands k and
//   sum |dout| to the engine (OutputRef::acc_terms / acc_mag), which adds
//   gamma_k (|p| + sum |dout|) and the final rounding u |p + sum| (and drops the
//   exact tier: the prefill is the engine's). k = 0: the row is untouched, tol
//   0. Exact where every term is an integer and sum |dout| < 2^24 (every
//   partial sum, in any order, is an integer below 2^24, so exact in fp32): tol
//   0, and the whole output is exact tier when every element is. Where sum
//   |dout| reaches the fp32 maximum a partial sum may overflow in some order:
//   tol +Inf.
// Properties (case param "relation"):
// - "permute" (embedding_bwd): reversing the order of the (idx, dout) rows
//   must not change dtable beyond both tolerances (bit-identical in the exact
//   tier): the sum does not depend on the order of its terms.
// Value classes: every activation class for table and dout (NaN/Inf
// injection, near-overflow, subnormals), small integers for the exact tier;
// vocab 1..4096 (mostly small: many duplicates), dim around 1, 4, 32, 128, 256,
// 1024 or any, count up to 4096, padded rows and offsets per tensor.
#include "properties/embedding.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"

namespace assay::rowwise {
namespace {

constexpr int64_t kMaxVocab = 4096, kMaxDim = 1024, kMaxCount = 4096, kMaxElems = 1 << 21;
constexpr double u32 = 0x1p-24, u64 = 0x1p-53;

// ---- declaration ------------------------------------------------------------------
std::vector<ParamDef> params(bool fwd) {
  auto per_dim = [](const Params& q) { return kMaxElems / std::max<int64_t>(q.i("dim"), 1); };
  std::vector<ParamDef> p = {
      ParamDef::dtype("dtype", activation_dtypes()),
      ParamDef::extent("dim", 1, kMaxDim).aim({4, 32, 128, 256, 1024}),
      // Small vocabularies against long index lists: many duplicates.
      ParamDef::extent("vocab", 1, kMaxVocab).aim({32, 128}).cap(per_dim),
      ParamDef::extent("count", 0, kMaxCount).aim({32, 256}).cap(per_dim)};
  if (!fwd) p.push_back(ParamDef::choice("relation", {"permute"}).optional(5));
  return p;
}

TensorDef idx_tensor() {
  return {.name = "idx",
          .dims = {"count"},
          .dtype = "int32",
          // +-Inf saturate to INT32_MAX / INT32_MIN: out of range.
          .values = {.specials = kSpecialPosInf | kSpecialNegInf, .inject_percent = 20, .int_hi_param = "vocab"}};
}

// ---- references and bounds --------------------------------------------------------
int64_t index_at(const HostTensor& idx, int64_t r) {
  return static_cast<int64_t>(idx.at(0, r));  // decoded int32: exact in double
}

Status reference_fwd(const Case&, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const HostTensor &table = t[0], &idx = t[1];
  const int64_t vocab = table.v.rows, dim = table.v.cols, count = idx.v.cols;
  OutputRef o;
  o.ref.assign(static_cast<size_t>(count * dim), 0.0);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t v = index_at(idx, r);
    if (v < 0 || v >= vocab) continue;  // declared: a zero row
    for (int64_t j = 0; j < dim; ++j) o.ref[static_cast<size_t>(r * dim + j)] = table.at(v, j);
  }
  out = {std::move(o)};
  return ok_status();
}

Status bound_fwd(const Case&, const Arithmetic&, const std::vector<HostTensor>&, std::vector<OutputRef>& out) {
  out[0].exact = true;  // a gather copies bits
  out[0].tol.assign(out[0].ref.size(), 0.0);
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

/// dtable in ref (dtable's own contents are not read: the op overwrites it); aux: [0] sum |dout|,
/// [1] k (the rows hitting the element's row), [2] 1 where every term is a finite integer.
Status reference_bwd(const Case&, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const HostTensor &dout = t[0], &idx = t[1], &tab = t[2];
  const int64_t vocab = tab.v.rows, dim = tab.v.cols, count = idx.v.cols;
  const size_t n = static_cast<size_t>(vocab * dim);
  OutputRef o;
  o.ref.assign(n, 0.0);
  o.aux.assign(3, std::vector<double>(n, 0.0));
  std::fill(o.aux[2].begin(), o.aux[2].end(), 1.0);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t v = index_at(idx, r);
    if (v < 0 || v >= vocab) continue;
    for (int64_t j = 0; j < dim; ++j) {
      const size_t l = static_cast<size_t>(v * dim + j);
      const double x = dout.at(r, j);
      o.ref[l] += x;
      o.aux[0][l] += std::fabs(x);
      o.aux[1][l] += 1;
      if (!(std::isfinite(x) && std::floor(x) == x)) o.aux[2][l] = 0;
    }
  }
  out = {std::move(o)};
  return ok_status();
}

Status bound_bwd(const Case&, const Arithmetic&, const std::vector<HostTensor>&, std::vector<OutputRef>& out) {
  OutputRef& o = out[0];
  const size_t n = o.ref.size();
  o.tol.resize(n);
  o.acc_terms.resize(n);
  o.acc_mag = o.aux[0];
  bool all_exact = true;
  for (size_t l = 0; l < n; ++l) {
    const auto k = static_cast<int64_t>(o.aux[1][l]);
    o.tol[l] = scatter_add_tol(k, o.aux[0][l], o.aux[2][l] != 0);
    o.acc_terms[l] = k;
    all_exact = all_exact && o.tol[l] == 0;
  }
  o.exact = all_exact && n > 0;
  return ok_status();
}

// ---- properties ---------------------------------------------------------------------
/// "permute": the rows of idx and dout in reverse order.
bool reverse_rows(const Case& c, std::vector<unsigned char*>& img) {
  if (Params(c.params).s("relation") != "permute") return false;
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

/// The references on a hand-made case: rows picked (and zero rows out of range), sums per row.
Status self_check(bool fwd, std::string& report) {
  // table / dout 3 x 2, idx {2, -1, 0, 2, 7} against vocab 3.
  const std::vector<double> data = {1.5, -2, 0.25, 8, -3, 1e-3, 4, 5, 6, 7}, idx = {2, -1, 0, 2, 7};
  const std::vector<double> zeros(6, 0.0);
  std::vector<OutputRef> out;
  const Case c;
  if (fwd) {
    const std::vector<HostTensor> t = {{data.data(), {3, 2, 2}}, {idx.data(), {1, 5, 5}}, {zeros.data(), {5, 2, 2}}};
    ASSAY_RETURN_IF_ERROR(reference_fwd(c, t, out));
    const std::vector<double> want = {-3, 1e-3, 0, 0, 1.5, -2, -3, 1e-3, 0, 0};
    if (out[0].ref != want) return internal_error("embedding: host gather picks the wrong rows");
    report += "embedding: host gather checked on a hand-made case (rows picked, zero rows out of range)\n";
  } else {
    const std::vector<HostTensor> t = {{data.data(), {5, 2, 2}}, {idx.data(), {1, 5, 5}}, {zeros.data(), {3, 2, 2}}};
    ASSAY_RETURN_IF_ERROR(reference_bwd(c, t, out));
    const std::vector<double> want = {-3, 1e-3, 0, 0, 1.5 + 4, -2 + 5};
    if (out[0].ref != want || out[0].aux[1][4] != 2)
      return internal_error("embedding_bwd: host scatter-sum gives the wrong rows");
    report += "embedding_bwd: host scatter-sum checked on a hand-made case (duplicates summed, out of range skipped)\n";
  }
  return ok_status();
}

OpDef make(bool fwd) {
  OpDef op;
  op.name = fwd ? "embedding" : "embedding_bwd";
  op.description = fwd ? "embedding lookup out[r] = table[idx[r]] (int32 idx; zero rows out of range), bit-exact"
                       : "embedding backward dtable[v] = sum of dout[r] over idx[r] == v (fp32 table), duplicates "
                         "summed in any order";
  op.params = params(fwd);
  if (fwd) {
    op.tensors = {{.name = "table", .dims = {"vocab", "dim"}, .values = {.specials = kSpecialAll}},
                  idx_tensor(),
                  {.name = "out", .role = Role::kOut, .dims = {"count", "dim"}}};
    op.reference = reference_fwd;
    op.bound = bound_fwd;
    op.bound_name = "embedding exact tier";
    op.backward = "embedding_bwd";
  } else {
    op.tensors = {{.name = "dout", .dims = {"count", "dim"}, .values = {.specials = kSpecialAll}},
                  idx_tensor(),
                  {.name = "dtable", .role = Role::kOut, .dims = {"vocab", "dim"}, .dtype = "fp32"}};
    op.reference = reference_bwd;
    op.bound = bound_bwd;
    op.bound_name = "scatter-add ceiling";
    op.transform = reverse_rows;
  }
  op.self_check = [fwd](std::string& r) { return self_check(fwd, r); };
  return op;
}

// ---- binding ------------------------------------------------------------------------
const char* const kSrc = "kernels/rowwise/embedding.cu";
ASSAY_REGISTER(register_op(make(true)));
ASSAY_REGISTER(register_op(make(false)));
ASSAY_REGISTER(add_variant("embedding",
                           {.name = "gather",
                            .description = "a row of threads per index, grid-stride over indices; zero rows out of range",
                            .launch = embedding_launch(kernels::rowwise::embedding_fwd),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("embedding_bwd",
                           {.name = "atomic",
                            .description = "fp32 atomicAdd per element into dtable: duplicate indices sum in any order",
                            .launch = embedding_bwd_launch(kernels::rowwise::embedding_bwd),
                            .contract = Contract().accumulates("dtable"),
                            .deterministic = false,
                            .source = kSrc}));

}  // namespace
}  // namespace assay::rowwise
