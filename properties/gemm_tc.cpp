// gemm_tc: tensor-core GEMM D = alpha * op(A) op(B) + beta * C, A and B both fp16 or both bf16,
// fp32 accumulation, C/D one buffer in fp32, fp16 or bf16 (rounded once from the fp32 result).
//
// Sections: binding, generators, references and bound, properties.
// Binding: kernels/gemm/gemm_tc.h, variants "wmma" (nvcuda::wmma 16x16x16) and "mma"
// (mma.sync m16n8k16 + ldmatrix + 3-stage cp.async); the planted bugs of
// tests/mutants/gemm/tc_mutants.cu register beside them through register_gemm_tc
// (properties/gemm_tc_registry.h). Tensors (tensor_op testbed, rank 2, row stride ld):
//   A [m, k] (trans_a: [k, m]), B [k, n] (trans_b: [n, k]) in params.dtype;
//   scalars [2] fp32 = {alpha, beta}, written from params.alpha / params.beta by `prepare`
//     (a device tensor rather than launch arguments so that the "alpha2" relation can double
//     alpha by rewriting an input image, as it doubles C);
//   D [m, n] kInOut in params.out_dtype: C on entry (its recipe; the NaN class in some beta == 0
//     cases, which must not reach D: the BLAS convention), D on exit.
// All tensors of a case share a row pad (0, 1, 3, 8 elements) and a leading offset (0, 1, 2
// elements): odd offsets and pads make the operands misaligned for 16-byte cp.async, the kernels
// must then take their scalar path. No alignment or shape precondition: m, n, k >= 0 (k == 0
// included, D = beta*C), every transpose combination.
//
// Reference: double on the kernel's own rounded inputs (references/host/gemm.h), exact products,
// with dmag = sum_p |a_ip||b_pj| and mag = |alpha| dmag + |beta||c|.
// Bound (per element; [FHMP] Fasi, Higham, Mikaitis, Pranesh, Numerical behavior of NVIDIA tensor
// cores, PeerJ CS 2021; [BHM] Blanchard, Higham, Mary, SISC 2020; harness/bounds.h gemm_bounds):
//   Products of fp16 (11-bit) or bf16 (8-bit) values are exact in fp32 (22 / 16 bits <= 24).
//   A tensor core adds a block of b' products and the fp32 accumulator by aligning every term to
//   the largest exponent and dropping (truncating, round toward zero) the bits below the fp32
//   significand of the largest term, then normalises the sum by truncation [FHMP]. So each term
//   and the sum lose less than 1 ulp = 2u (u = 2^-24) of the block's largest magnitude, which is
//   at most S_j = |acc| + sum |terms| of the block: |eps_j| <= 2u (b' + 1) S_j, and chaining the
//   blocks gives |err| <= ((1 + 2u(b'+1))^ceil(k/b') - 1) dmag ([BHM] recurrence with truncation
//   in place of rounding). The block size b' is undocumented and differs between generations
//   (4 on Volta, 8 / 16 later, [FHMP]), and a kernel may instead run fp32 FMA (one rounding to
//   nearest, |eps| <= u S_j) or split k into chunks summed in fp32: the model takes b = 1, the
//   largest value of (b+1) ceil(k/b) over b >= 1 (2k >= k + ceil(k/b')), with any split of k
//   (GemmBoundModel::any_split) and two more roundings to nearest for alpha*acc and + beta*c:
//     e32 = gemm_ceiling({in, acc = fp32, out = fp32, k, |alpha|, beta != 0,
//                         kTruncatingBlock, block = 1, any_split})(|ref|, mag)
//         ~ (4k + 2) u mag + (the fp64 reference's own error) + flush-to-zero floor,
//   i.e. u_eff = 2u per term per block (truncation instead of rounding) and k' = 2k terms.
//   Subnormal inputs (found on the H200, session 7: both kernels, fp16 and bf16, 7 of 7643 fuzz
//   cases, errors up to ~9x the ceiling above, all with a subnormal factor): the hardware aligns a
//   product by its operands' exponent FIELDS, and a subnormal's field exponent is that of the
//   smallest normal while its significand has leading zeros, so the truncation to the fp32
//   significand of the aligned terms is relative to min_normal * |b|, not |a| |b| (our reading of
//   the measurement: a model, like the block size, not documented behaviour). The derivation
//   above holds with every |x| in the magnitude replaced by its nominal magnitude
//   max(|x|, min_normal(in)) for x != 0: mag = |alpha| sum_p nom(a_ip) nom(b_pj) + |beta||c|.
//   Nothing changes for normal inputs, whose nominal and true magnitudes are equal.
//   The fp16 / bf16 output rounds the fp32 value once more: tol = e32 + 0.5 ulp_out(|ref| + e32).
//   Overflow: where |ref| + tol reaches the output's largest finite value, or mag or dmag reaches
//   half of fp32's (an fp32 partial sum, alpha*acc or beta*c may overflow although the exact
//   result is finite: bf16 near-overflow inputs), the element is unchecked (tol = +Inf).
//   What it catches: an fp16 accumulator loses 2^-11 |partial| per add (bf16 2^-8), against the
//   ceiling's ~(4k + 2) 2^-24 per unit of mag: for k < ~500 (fp16) or ~4000 (bf16) a single
//   rounding of a partial sum comparable to mag is already beyond it
//   (tests/properties/gemm_tc_test.cpp simulates both).
// Exact tier: small-integer A, B (and C when beta != 0), integer alpha, beta, every partial sum
//   below 2^p with p = min(24, output bits) (gemm_exact_tier_holds): any order, block size or
//   truncation gives the exact result, compared bit for bit; and k == 0 with |beta| in {0, 1}.
// Properties (params.relation, about a quarter of the cases; harness/testbeds/tensor_op.h):
//   "permute_rows": rows of op(A) and of C permuted by pi(i) = (m - 1 - i + shift) mod m, the
//     kernel launched again: D'[i] must match D[pi(i)] (relate) within both tolerances.
//   "alpha2": alpha and C doubled: D' = 2 D (relate scale 2); cases without near-overflow data.
//   "transpose" (m == n == k): A' = op(B)^T, B' = op(A)^T, C' = C^T (stored under the same
//     transpose flags): D' = D^T (relate (i, j) -> (j, i)).
//   k == 0 cases (a tenth of the rest): D = beta*C, bit for bit where |beta| is 0 or 1.
// Guards, poison (NaN C), inputs untouched, gaps and determinism: the testbed, every case.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <vector>

#include "properties/gemm_tc_registry.h"
#include "properties/rowwise_common.h"
#include "references/host/gemm.h"

namespace assay::gemm_tc {

using rowwise::num_or;
using rowwise::param_int;
using rowwise::peek;
using rowwise::poke;
using rowwise::str_or;

namespace {

// ---- binding ---------------------------------------------------------------------------------------
std::vector<TensorOpVariant>& reg() {
  static std::vector<TensorOpVariant> v;
  return v;
}
std::vector<std::pair<std::string, kernels::GemmTcLauncher>>& fns() {
  static std::vector<std::pair<std::string, kernels::GemmTcLauncher>> v;
  return v;
}

constexpr int kA = 0, kB = 1, kScalars = 2, kD = 3;  // tensor order of a case
constexpr int64_t kMaxDim = int64_t{1} << 14;
constexpr int64_t kMaxMacs = int64_t{1} << 31;     // validate: larger cases are rejected
constexpr int64_t kGenMaxMacs = int64_t{1} << 22;  // generator: the fp64 host reference stays fast

bool flag(const nlohmann::json& p, const char* k) {
  return p.value(k, false);
}

}  // namespace

bool register_gemm_tc(VariantInfo info, kernels::GemmTcLauncher fn) {
  fns().emplace_back(info.name, fn);
  reg().push_back({std::move(info), [fn](const Case& c, const std::vector<DevTensor>& t, cudaStream_t s) {
                     kernels::GemmTcArgs a;
                     a.m = c.params.value("m", int64_t{0});
                     a.n = c.params.value("n", int64_t{0});
                     a.k = c.params.value("k", int64_t{0});
                     a.trans_a = flag(c.params, "trans_a");
                     a.trans_b = flag(c.params, "trans_b");
                     a.in = t[kA].dtype == DType::kBF16 ? kernels::TcIn::kBF16 : kernels::TcIn::kF16;
                     a.out = t[kD].dtype == DType::kF16    ? kernels::TcOut::kF16
                             : t[kD].dtype == DType::kBF16 ? kernels::TcOut::kBF16
                                                           : kernels::TcOut::kF32;
                     a.a = t[kA].ptr, a.lda = t[kA].v.ld;
                     a.b = t[kB].ptr, a.ldb = t[kB].v.ld;
                     a.scalars = t[kScalars].as<const float>();
                     a.d = t[kD].ptr, a.ldd = t[kD].v.ld;
                     return fn(a, s);
                   }});
  return true;
}

const std::vector<TensorOpVariant>& gemm_tc_variants() {
  return reg();
}

kernels::GemmTcLauncher find_gemm_tc(const std::string& name) {
  for (const auto& [n, f] : fns())
    if (n == name) return f;
  return nullptr;
}

namespace {
[[maybe_unused]] const bool kKernels =
    register_gemm_tc({"wmma", "nvcuda::wmma 16x16x16, 64x64x32 tiles via shared memory, fp32 accumulate", false, true,
                      "kernels/gemm/gemm_tc.cu"},
                     kernels::gemm_tc_wmma) &&
    register_gemm_tc({"mma", "mma.sync m16n8k16 + ldmatrix, 3-stage cp.async pipeline, fp32 accumulate", false, true,
                      "kernels/gemm/gemm_tc.cu"},
                     kernels::gemm_tc_mma);
}  // namespace

Case build_gemm_tc_case(const nlohmann::json& params, const std::vector<ValueRecipe>& recipes, int64_t pad,
                        int64_t off) {
  Case c;
  c.op = kOp;
  c.params = params;
  const int64_t m = params.value("m", int64_t{0}), n = params.value("n", int64_t{0}), k = params.value("k", int64_t{0});
  const bool ta = flag(params, "trans_a"), tb = flag(params, "trans_b");
  const DType in = parse_dtype(params.value("dtype", std::string("fp16"))).value_or(DType::kF16);
  const DType out = parse_dtype(params.value("out_dtype", std::string("fp32"))).value_or(DType::kF32);
  auto r = [&](size_t i) { return i < recipes.size() ? recipes[i] : ValueRecipe{}; };
  c.tensors = {make_tensor("A", Role::kIn, in, ta ? k : m, ta ? m : k, pad, off, r(kA)),
               make_tensor("B", Role::kIn, in, tb ? n : k, tb ? k : n, pad, off, r(kB)),
               make_tensor("scalars", Role::kIn, DType::kF32, -1, 2, 0, off, r(kScalars)),
               make_tensor("D", Role::kInOut, out, m, n, pad, off, r(kD))};
  return c;
}

// ---- references and bound -----------------------------------------------------------------------------

GemmBoundModel gemm_tc_model(DType in, int64_t k, double alpha, double beta) {
  GemmBoundModel m;
  m.in = in;
  m.acc = DType::kF32;
  m.out = DType::kF32;  // the store's rounding is added at |ref| + e32 (gemm_tc_reference)
  m.k = k;
  m.alpha_abs = std::fabs(alpha);
  m.has_beta = beta != 0;
  m.accumulation = Accumulation::kTruncatingBlock;
  m.block = 1;
  m.any_split = true;
  return m;
}

OutputRef gemm_tc_reference(const TcProblem& p, bool exact) {
  OutputRef out;
  const size_t mn = static_cast<size_t>(p.m * p.n);
  out.ref.assign(mn, 0.0);
  out.tol.assign(mn, 0.0);
  std::vector<double> dot(mn, 0.0), dmag(mn, 0.0);
  ref::GemmProblem<double> g;
  g.m = p.m, g.n = p.n, g.k = p.k, g.trans_a = p.trans_a, g.trans_b = p.trans_b;
  g.alpha = 1, g.beta = 0, g.a = p.a, g.lda = p.lda, g.b = p.b, g.ldb = p.ldb;
  ref::gemm_reference(g, dot.data(), dmag.data(), 2);
  // Nominal magnitudes (see the header): subnormal inputs count as min_normal in the magnitude.
  std::vector<double> nmag = dmag;
  {
    const double tiny = min_normal(p.in);
    const int64_t a_elems = p.k > 0 ? ((p.trans_a ? p.k : p.m) - 1) * p.lda + (p.trans_a ? p.m : p.k) : 0;
    const int64_t b_elems = p.k > 0 ? ((p.trans_b ? p.n : p.k) - 1) * p.ldb + (p.trans_b ? p.k : p.n) : 0;
    auto subnormal = [tiny](double x) { return x != 0 && std::fabs(x) < tiny; };
    const bool any = std::any_of(p.a, p.a + std::max<int64_t>(a_elems, 0), subnormal) ||
                     std::any_of(p.b, p.b + std::max<int64_t>(b_elems, 0), subnormal);
    if (any) {
      auto nominal = [&](const double* x, int64_t n) {
        std::vector<double> v(x, x + n);
        for (double& e : v)
          if (subnormal(e)) e = std::copysign(tiny, e);
        return v;
      };
      const std::vector<double> na = nominal(p.a, a_elems), nb = nominal(p.b, b_elems);
      std::vector<double> unused(mn, 0.0);
      ref::GemmProblem<double> gn = g;
      gn.a = na.data(), gn.b = nb.data();
      ref::gemm_reference(gn, unused.data(), nmag.data(), 2);
    }
  }
  const ElementBound bound = gemm_ceiling(gemm_tc_model(p.in, p.k, p.alpha, p.beta));
  const double top = max_finite(p.out), top32 = 0.5 * FLT_MAX;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      const size_t l = static_cast<size_t>(i * p.n + j);
      double r = p.alpha * dot[l], mag = std::fabs(p.alpha) * nmag[l];
      if (p.beta != 0) {
        const double c = p.c[i * p.ldc + j];
        r += p.beta * c;
        mag += std::fabs(p.beta) * std::fabs(c);
      }
      const double a = std::fabs(r);
      const double e32 = bound.tol(a, mag);
      const double tol = e32 + rowwise::store_rounding(a + e32, p.out);
      out.ref[l] = r;
      out.tol[l] = a + tol >= top || mag >= top32 || dmag[l] >= top32 || !std::isfinite(mag) ? INFINITY : tol;
    }
  out.exact = exact;
  return out;
}

bool exact_tier_case(const Case& c) {
  const double alpha = num_or(c, "alpha", 1), beta = num_or(c, "beta", 0);
  const int64_t k = rowwise::int_or(c, "k", 0);
  if (k == 0) return std::fabs(beta) == 0 || std::fabs(beta) == 1;
  const ValueRecipe &ra = c.tensors[kA].values, &rb = c.tensors[kB].values, &rcv = c.tensors[kD].values;
  auto small_int = [](const ValueRecipe& r) { return r.cls == ValueClass::kSmallInt && !r.inject.active(); };
  if (!small_int(ra) || !small_int(rb) || (beta != 0 && !small_int(rcv))) return false;
  GemmBoundModel m = gemm_tc_model(c.tensors[kA].desc.dtype, k, alpha, beta);
  m.out = c.tensors[kD].desc.dtype;
  return gemm_exact_tier_holds(m, std::max(ra.int_range, rb.int_range), std::fabs(beta),
                               beta != 0 ? static_cast<double>(rcv.int_range) : 0.0);
}

namespace {

Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  TcProblem p;
  p.m = rowwise::int_or(c, "m", 0), p.n = rowwise::int_or(c, "n", 0), p.k = rowwise::int_or(c, "k", 0);
  p.trans_a = flag(c.params, "trans_a"), p.trans_b = flag(c.params, "trans_b");
  p.in = c.tensors[kA].desc.dtype, p.out = c.tensors[kD].desc.dtype;
  // The kernel reads alpha and beta from the scalars tensor (a transform may have doubled alpha).
  p.alpha = t[kScalars].at(0, 0), p.beta = t[kScalars].at(0, 1);
  p.a = t[kA].data, p.lda = t[kA].v.ld, p.b = t[kB].data, p.ldb = t[kB].v.ld;
  p.c = t[kD].data, p.ldc = t[kD].v.ld;
  out = {gemm_tc_reference(p, exact_tier_case(c))};
  return ok_status();
}

/// Writes params.alpha and params.beta into the scalars tensor.
void prepare(const Case& c, std::vector<unsigned char*>& img) {
  const int64_t o = c.tensors[kScalars].desc.offset;
  poke(DType::kF32, img[kScalars], o, num_or(c, "alpha", 1));
  poke(DType::kF32, img[kScalars], o + 1, num_or(c, "beta", 0));
}

// ---- properties ---------------------------------------------------------------------------------------

/// The row of D (and of op(A), C) that row i of the "permute_rows" launch takes.
int64_t permuted_row(const Case& c, int64_t i) {
  const int64_t m = rowwise::int_or(c, "m", 1);
  return ((m - 1 - i + rowwise::int_or(c, "shift", 0)) % m + m) % m;
}

/// Element (r, q) of op(X) for tensor t stored with transpose flag `tr`: linear image index.
int64_t op_index(const Case& c, int t, bool tr, int64_t r, int64_t q) {
  const auto& d = c.tensors[static_cast<size_t>(t)].desc;
  const int64_t ld = view_of(d).ld;
  return d.offset + (tr ? q * ld + r : r * ld + q);
}

bool transform(const Case& c, std::vector<unsigned char*>& img) {
  const std::string rel = str_or(c, "relation", "");
  const int64_t m = rowwise::int_or(c, "m", 0), n = rowwise::int_or(c, "n", 0), k = rowwise::int_or(c, "k", 0);
  const bool ta = flag(c.params, "trans_a"), tb = flag(c.params, "trans_b");
  const DType in = c.tensors[kA].desc.dtype, out = c.tensors[kD].desc.dtype;
  const int64_t ldd = c.tensors[kD].desc.rank() == 2 ? c.tensors[kD].desc.strides[0] : 1,
                od = c.tensors[kD].desc.offset;
  // Copies of the original images: the rewrites below read the originals.
  auto snapshot = [&](int t) {
    const auto& d = c.tensors[static_cast<size_t>(t)].desc;
    const size_t bytes = static_cast<size_t>(d.extent()) * dtype_size(d.dtype);
    return std::vector<unsigned char>(img[static_cast<size_t>(t)], img[static_cast<size_t>(t)] + bytes);
  };
  if (rel == "permute_rows") {
    if (m < 1) return false;
    const auto a0 = snapshot(kA), d0 = snapshot(kD);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t from = permuted_row(c, i);
      for (int64_t p = 0; p < k; ++p)
        poke(in, img[kA], op_index(c, kA, ta, i, p), peek(in, a0.data(), op_index(c, kA, ta, from, p)));
      for (int64_t j = 0; j < n; ++j) poke(out, img[kD], od + i * ldd + j, peek(out, d0.data(), od + from * ldd + j));
    }
    return true;
  }
  if (rel == "alpha2") {
    const int64_t o = c.tensors[kScalars].desc.offset;
    poke(DType::kF32, img[kScalars], o, 2 * peek(DType::kF32, img[kScalars], o));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) poke(out, img[kD], od + i * ldd + j, 2 * peek(out, img[kD], od + i * ldd + j));
    return true;
  }
  if (rel == "transpose") {
    if (m != n || n != k) return false;
    const auto a0 = snapshot(kA), b0 = snapshot(kB), d0 = snapshot(kD);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < m; ++p) {
        // op(A')[i][p] = op(B)[p][i], op(B')[p][j] = op(A)[j][p]
        poke(in, img[kA], op_index(c, kA, ta, i, p), peek(in, b0.data(), op_index(c, kB, tb, p, i)));
        poke(in, img[kB], op_index(c, kB, tb, i, p), peek(in, a0.data(), op_index(c, kA, ta, p, i)));
        poke(out, img[kD], od + i * ldd + p, peek(out, d0.data(), od + p * ldd + i));
      }
    return true;
  }
  return false;
}

bool relate(const Case& c, size_t, int64_t i, int64_t j, RelatedElement& e) {
  const std::string rel = str_or(c, "relation", "");
  if (rel == "permute_rows")
    e = {permuted_row(c, i), j, 1};
  else if (rel == "alpha2")
    e = {i, j, 2};
  else if (rel == "transpose")
    e = {j, i, 1};
  return true;
}

// ---- generators ------------------------------------------------------------------------------------

rc::Gen<ValueRecipe> gen_recipe(DType dt, bool small_int, bool finite_only) {
  std::vector<ValueClass> classes = {ValueClass::kNormal,     ValueClass::kUniform,      ValueClass::kSameSign,
                                     ValueClass::kSmallInt,   ValueClass::kLogUniform,   ValueClass::kMeanSpread,
                                     ValueClass::kSubnormal,  ValueClass::kSignedZero,   ValueClass::kNearOverflow};
  if (finite_only) classes.pop_back();
  if (small_int) classes = {ValueClass::kSmallInt};
  RecipeOptions o;
  o.classes = classes;
  o.dtype = dt;
  o.specials = 0;
  o.inject_percent = 0;
  return gen_value_recipe(o);
}

rc::Gen<Case> gen_case(const GenConfig& cfg) {
  const int64_t cap = std::clamp<int64_t>(cfg.max_dim, 1, 512);
  return rc::gen::exec([cap] {
    const std::vector<int64_t> tiles = {16, kernels::kGemmTcTileK, kernels::kGemmTcTileMN};
    nlohmann::json p;
    const size_t rel = *gen_weighted_index({9, 1, 1, 1});  // none, permute_rows, alpha2, transpose
    int64_t m = *gen_extent(cap, tiles, 1), n = *gen_extent(cap, tiles, 1), k = *gen_extent(cap, tiles, 0);
    if (rel == 0 && *gen_weighted_index({9, 1}) == 1) k = 0;
    if (rel == 3) n = k = m;
    while (m * n * std::max<int64_t>(k, 1) > kGenMaxMacs) {  // keep the fp64 reference fast
      if (rel == 3) {
        m = n = k = m / 2;
      } else {
        (m >= n ? m : n) /= 2;
        if (k > 64) k /= 2;
      }
    }
    const DType in = *gen_element<DType>({DType::kF16, DType::kBF16});
    const DType out = *gen_element<DType>({DType::kF32, DType::kF16, DType::kBF16});
    const bool exact = *gen_weighted_index({3, 1}) == 1;
    const double alpha = exact ? *gen_element<double>({1, -1, 2}) : *gen_element<double>({1, -1, 2, 0.5, 1.5, -0.75, 0.3});
    const double beta = exact ? *gen_element<double>({0, 1, -1}) : *gen_element<double>({0, 0, 1, -1, 0.5, 2, 0.3});
    p["m"] = m, p["n"] = n, p["k"] = k;
    p["trans_a"] = *rc::gen::arbitrary<bool>();
    p["trans_b"] = *rc::gen::arbitrary<bool>();
    p["dtype"] = std::string(dtype_name(in));
    p["out_dtype"] = std::string(dtype_name(out));
    p["alpha"] = alpha, p["beta"] = beta;
    if (rel != 0) p["relation"] = std::vector<std::string>{"", "permute_rows", "alpha2", "transpose"}[rel];
    if (rel == 1) p["shift"] = *rc::gen::inRange<int64_t>(0, m);
    const bool finite_only = rel == 2;  // doubling near-overflow data leaves the range
    const ValueRecipe ra = *gen_recipe(in, exact, finite_only), rb = *gen_recipe(in, exact, finite_only);
    ValueRecipe rcv = *gen_recipe(out, exact, finite_only);
    if (beta == 0 && *gen_weighted_index({1, 1}) == 1) {
      rcv = ValueRecipe{};
      rcv.cls = ValueClass::kNaN;  // must not be read
    }
    const int64_t pad = *gen_element<int64_t>({0, 0, 0, 1, 3, 8});
    const int64_t off = *gen_element<int64_t>({0, 0, 0, 1, 2});
    return build_gemm_tc_case(p, {ra, rb, ValueRecipe{}, rcv}, pad, off);
  });
}

Status validate(const Case& c) {
  for (const char* key : {"dtype", "out_dtype"})
    if (!c.params.contains(key) || !c.params[key].is_string())
      return invalid_argument(fmt::format("gemm_tc case: params.{} must be a string", key));
  const auto in = parse_dtype(c.params["dtype"].get<std::string>());
  if (!in || (*in != DType::kF16 && *in != DType::kBF16))
    return invalid_argument("gemm_tc case: params.dtype must be \"fp16\" or \"bf16\"");
  const auto out = parse_dtype(c.params["out_dtype"].get<std::string>());
  if (!out || (*out != DType::kF32 && *out != DType::kF16 && *out != DType::kBF16))
    return invalid_argument("gemm_tc case: params.out_dtype must be \"fp32\", \"fp16\" or \"bf16\"");
  ASSAY_ASSIGN_OR_RETURN(int64_t m, param_int(c, "m", 0, kMaxDim));
  ASSAY_ASSIGN_OR_RETURN(int64_t n, param_int(c, "n", 0, kMaxDim));
  ASSAY_ASSIGN_OR_RETURN(int64_t k, param_int(c, "k", 0, kMaxDim));
  if (m * n * k > kMaxMacs)
    return invalid_argument(fmt::format("gemm_tc case: {} multiply-adds, above the limit of {}", m * n * k, kMaxMacs));
  for (const char* key : {"trans_a", "trans_b"})
    if (c.params.contains(key) && !c.params[key].is_boolean())
      return invalid_argument(fmt::format("gemm_tc case: params.{} must be a boolean", key));
  for (const char* key : {"alpha", "beta"})
    if (!c.params.contains(key) || !c.params[key].is_number() || !std::isfinite(c.params[key].get<double>()) ||
        std::fabs(c.params[key].get<double>()) > 1e6)
      return invalid_argument(fmt::format("gemm_tc case: params.{} must be a finite number, |x| <= 1e6", key));
  if (c.params.contains("relation")) {
    const std::string rel = str_or(c, "relation", "");
    if (rel != "permute_rows" && rel != "alpha2" && rel != "transpose")
      return invalid_argument("gemm_tc case: params.relation must be \"permute_rows\", \"alpha2\" or \"transpose\"");
    if (rel == "transpose" && (m != n || n != k))
      return invalid_argument("gemm_tc case: params.relation \"transpose\" needs m == n == k");
    if (rel == "permute_rows") ASSAY_RETURN_IF_ERROR(param_int(c, "shift", 0, kMaxDim).status());
  }
  ASSAY_RETURN_IF_ERROR(validate_tensor_layout(
      c, {{"A", Role::kIn}, {"B", Role::kIn}, {"scalars", Role::kIn}, {"D", Role::kInOut}}));
  const Case want = build_gemm_tc_case(c.params, {}, 0, 0);
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const auto& d = c.tensors[i].desc;
    const auto& e = want.tensors[i].desc;
    if (d.dtype != e.dtype || d.shape != e.shape)
      return invalid_argument(fmt::format("gemm_tc case: tensor {} must be {} with shape {}", c.tensors[i].name,
                                          dtype_name(e.dtype), nlohmann::json(e.shape).dump()));
  }
  return ok_status();
}

rowwise::RowOpConfig config() {
  rowwise::RowOpConfig cfg;
  cfg.name = kOp;
  cfg.description = "tensor-core GEMM D = alpha op(A) op(B) + beta C, fp16/bf16 in, fp32 accumulate, fp32/fp16/bf16 out";
  cfg.def.op = kOp;
  cfg.def.bound_name = "tensor-core GEMM ceiling";
  cfg.def.prepare = prepare;
  cfg.def.reference = reference;
  cfg.def.transform = transform;
  cfg.def.relate = relate;
  cfg.registry = &reg();
  cfg.gen = gen_case;
  cfg.build = build_gemm_tc_case;
  cfg.validate = validate;
  cfg.shrink_keys = {{"m", 1}, {"n", 1}, {"k", 0}};
  cfg.self_check_note = "reference and ceiling checked on simulated truncating / fp16 / bf16 accumulations in "
                        "tests/properties/gemm_tc_test.cpp";
  return cfg;
}

[[maybe_unused]] const bool kSpec = register_spec(std::make_unique<rowwise::RowOpSpec>(config()));

}  // namespace

const TensorOpDef& gemm_tc_def() {
  static const rowwise::RowOpConfig cfg = config();
  return cfg.def;
}

}  // namespace assay::gemm_tc
