// gemm_tc: tensor-core GEMM D = alpha * op(A) op(B) + beta * C, A and B both fp16 or both bf16,
// fp32 accumulation, C/D one buffer in fp32, fp16 or bf16 (rounded once from the fp32 result).
//
// Sections: declaration, references and bound, properties, vendor, binding.
// Vendor column: cuBLASLt with fp32 compute on the same views (fp16 / bf16 in; out fp32 or the
// input type: fp16 in with bf16 out, or the reverse, has no cuBLASLt type combination and says
// "not run"). With fp16 / bf16 output and beta != 0 it rounds alpha A B to the output before
// adding beta C (a measured cuBLAS evaluation order; properties/gemm.cpp's product_to_out model),
// so it may exceed the plain ceiling there (vendor_violations, not the variant's fault).
// Binding: kernels/gemm/gemm_tc.h, variants "wmma" (nvcuda::wmma 16x16x16) and "mma"
// (mma.sync m16n8k16 + ldmatrix + 3-stage cp.async); the planted bugs of
// tests/mutants/gemm/tc_mutants.cu bind through gemm_tc_launch (properties/gemm_tc.h).
// Tensors (properties/gemm_common.h):
//   A [m, k] (trans_a: [k, m]), B [k, n] (trans_b: [n, k]) in params.dtype;
//   scalars [2] fp32 = {alpha, beta}, written from params.alpha / params.beta by `prepare`
//     (on the device path by the device reference's prepare; a device tensor rather than
//     launch arguments so that the "alpha2" relation can double alpha by rewriting an input
//     image, as it doubles C);
//   D [m, n] kInOut in params.out_dtype: C on entry, D on exit. BLAS convention: with beta == 0
//     C is not read (OpDef::overwrites: poisoned, no NaN may reach D and every element must be
//     written) unless the variant declares reads_c_when_beta0.
// Each tensor draws its own row pad (0, 1, 3, 8 elements) and leading offset (0, 1, 2 elements):
// odd offsets and pads make the operands misaligned for 16-byte cp.async, the kernels must then
// take their scalar path. The kernels' contracts are empty: no alignment or shape precondition,
// k == 0 included (D = beta*C), every transpose combination.
// Sizes: m, n in [1, 2^16], k in [0, 2^16], m n max(k, 1) <= 2^36 (the bench's 4096^3); generated
// cases stay under 2^31 multiply-adds, as gemm's.
//
// Reference: double on the kernel's own rounded inputs (references/host/gemm.h), exact products,
// with dmag = sum_p |a_ip||b_pj| and mag = |alpha| dmag + |beta||c|. Above 2^22 multiply-adds
// (gemm's kDeviceRefWork) the inputs are drawn on the device and the reference is fp64 there:
// cuBLAS fp64 pedantic on the widened inputs and on their nominal magnitudes, then the same
// per-element tolerance function as the host bound (references/device/gemm_f64.h,
// gemm_f64_tol.h f64_tc_element_tol); the one difference, the overflow test's dmag taken
// nominal, is explained at tc_finish in references/device/gemm_f64.cu.
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
//   Subnormal inputs (found on the H200: both kernels, fp16 and bf16, 7 of 7643 fuzz cases, errors up to ~9x the
//   ceiling above, all with a subnormal factor): the hardware aligns a product by its operands' exponent FIELDS, and a
//   subnormal's field exponent is that of the smallest normal while its significand has leading zeros, so the
//   truncation to the fp32 significand of the aligned terms is relative to min_normal * |b|, not |a| |b| (our reading
//   of the measurement: a model, like the block size, not documented behaviour). The derivation above holds with every
//   |x| in the magnitude replaced by its nominal magnitude max(|x|, min_normal(in)) for x != 0: mag = |alpha| sum_p
//   nom(a_ip) nom(b_pj) + |beta||c|. Nothing changes for normal inputs, whose nominal and true magnitudes are equal.
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
// Properties (params.relation, about a quarter of the cases; OpDef::transform and relate):
//   "permute_rows": rows of op(A) and of C permuted by pi(i) = (m - 1 - i + shift) mod m, the
//     kernel launched again: D'[i] must match D[pi(i)] (relate) within both tolerances.
//   "alpha2": alpha and C doubled: D' = 2 D (relate scale 2); cases without near-overflow data.
//   "transpose" (m == n == k): A' = op(B)^T, B' = op(A)^T, C' = C^T (stored under the same
//     transpose flags): D' = D^T (relate (i, j) -> (j, i)).
//   k == 0 cases (a tenth of the rest): D = beta*C, bit for bit where |beta| is 0 or 1.
// Generation (OpDef::couple): a quarter of the cases are in the exact tier (small-integer A, B, C,
// alpha in {1, -1, 2}, beta in {0, 1, -1}); "alpha2" cases draw no near-overflow data (doubling
// it leaves the range); "transpose" cases are square (n = k = m, m^3 <= 2^22).
// Guards, poison, inputs untouched, gaps and determinism: the engine, every case.
#include "properties/gemm_tc.h"
#include "properties/vendor_columns.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "harness/gpu/cuda_check.h"
#include "properties/gemm.h"
#include "properties/gemm_common.h"
#include "properties/rowwise_values.h"
#include "references/device/gemm_f64.h"
#include "references/host/gemm.h"

namespace assay::gemm_tc {

using rowwise::peek;
using rowwise::poke;

constexpr size_t kA = 0, kB = 1, kScalars = 2, kD = 3;  // tensor order of a case
constexpr int64_t kMaxDim = int64_t{1} << 16;
constexpr int64_t kMaxMacs = int64_t{1} << 36;  // a hand-made case: the bench's 4096^3
constexpr int64_t kGenMacs = int64_t{1} << 31;  // a generated case, as gemm's

// ---- references and bound -----------------------------------------------------------------------------

GemmBoundModel gemm_tc_model(DType in, int64_t k, double alpha, double beta) {
  GemmBoundModel m;
  m.in = in;
  m.acc = DType::kF32;
  m.out = DType::kF32;  // the store's rounding is added at |ref| + e32 (gemm_tc_bound)
  m.k = k;
  m.alpha_abs = std::fabs(alpha);
  m.has_beta = beta != 0;
  m.accumulation = Accumulation::kTruncatingBlock;
  m.block = 1;
  m.any_split = true;
  return m;
}

OutputRef gemm_tc_reference(const TcProblem& p) {
  OutputRef out;
  const size_t mn = static_cast<size_t>(p.m * p.n);
  out.ref.assign(mn, 0.0);
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
  out.aux.assign(2, std::vector<double>(mn, 0.0));
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      const size_t l = static_cast<size_t>(i * p.n + j);
      double r = p.alpha * dot[l], mag = std::fabs(p.alpha) * nmag[l];
      if (p.beta != 0) {
        const double c = p.c[i * p.ldc + j];
        r += p.beta * c;
        mag += std::fabs(p.beta) * std::fabs(c);
      }
      out.ref[l] = r;
      out.aux[0][l] = mag;
      out.aux[1][l] = dmag[l];
    }
  return out;
}

device_ref::F64TcTol gemm_tc_tol(DType in, DType out, int64_t k, double alpha, double beta, bool product_to_out) {
  device_ref::F64TcTol t;
  t.b = gemm_ceiling(gemm_tc_model(in, k, alpha, beta));
  // A declared product_to_out order (harness/bounds.h): alpha*P rounded to the output before
  // the fp32 add of beta*C, |alpha P^| <= (1 + rel_mag) mag, plus that rounding's underflow.
  if (product_to_out && beta != 0) t.prod = product_to_out_terms(out, DType::kF32, 1 + t.b.rel_mag);
  t.top = max_finite(out);
  t.top32 = 0.5 * FLT_MAX;
  t.store = store_rounding_for(out);
  return t;
}

void gemm_tc_bound(const TcProblem& p, bool exact, OutputRef& out) {
  const device_ref::F64TcTol t = gemm_tc_tol(p.in, p.out, p.k, p.alpha, p.beta, p.product_to_out);
  const gemm_common::AlphaScaledOperands scaled(
      p.alpha, p.m, p.n, p.k,
      [&](int64_t i, int64_t q) { return p.a[p.trans_a ? q * p.lda + i : i * p.lda + q]; },
      [&](int64_t q, int64_t j) { return p.b[p.trans_b ? j * p.ldb + q : q * p.ldb + j]; });
  out.tol.resize(out.ref.size());
  for (size_t l = 0; l < out.ref.size(); ++l) {
    const int64_t n = std::max<int64_t>(p.n, 1), i = static_cast<int64_t>(l) / n, j = static_cast<int64_t>(l) % n;
    out.tol[l] = device_ref::f64_tc_element_tol(t, std::fabs(out.ref[l]), out.aux[0][l], out.aux[1][l],
                                                scaled.underflow_slack(i, j), scaled.may_overflow(i, j));
  }
  out.exact = exact;
}

OutputRef gemm_tc_expected(const TcProblem& p, bool exact) {
  OutputRef out = gemm_tc_reference(p);
  gemm_tc_bound(p, exact, out);
  return out;
}

bool exact_tier_case(const Case& c) {
  const Params p(c.params);
  const double alpha = p.r("alpha", 1), beta = p.r("beta", 0);
  const int64_t k = p.i("k");
  if (k == 0) return std::fabs(beta) == 0 || std::fabs(beta) == 1;
  const ValueRecipe &ra = c.tensors[kA].values, &rb = c.tensors[kB].values, &rcv = c.tensors[kD].values;
  if (!gemm_common::small_int(ra) || !gemm_common::small_int(rb) || (beta != 0 && !gemm_common::small_int(rcv)))
    return false;
  GemmBoundModel m = gemm_tc_model(c.tensors[kA].desc.dtype, k, alpha, beta);
  m.out = c.tensors[kD].desc.dtype;
  return gemm_exact_tier_holds(m, std::max(ra.int_range, rb.int_range), std::fabs(beta),
                               beta != 0 ? static_cast<double>(rcv.int_range) : 0.0);
}

namespace {

TcProblem problem_of(const Case& c, const std::vector<HostTensor>& t) {
  const Params q(c.params);
  TcProblem p;
  p.m = q.i("m"), p.n = q.i("n"), p.k = q.i("k");
  p.trans_a = q.b("trans_a"), p.trans_b = q.b("trans_b");
  p.in = c.tensors[kA].desc.dtype, p.out = c.tensors[kD].desc.dtype;
  // The kernel reads alpha and beta from the scalars tensor (a transform may have doubled alpha).
  p.alpha = t[kScalars].at(0, 0), p.beta = t[kScalars].at(0, 1);
  p.a = t[kA].data, p.lda = t[kA].v.ld, p.b = t[kB].data, p.ldb = t[kB].v.ld;
  p.c = t[kD].data, p.ldc = t[kD].v.ld;
  return p;
}

Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  out = {gemm_tc_reference(problem_of(c, t))};
  return ok_status();
}

Status bound(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  TcProblem p = problem_of(c, t);
  p.product_to_out = a.narrow_intermediates;
  gemm_tc_bound(p, exact_tier_case(c), out[0]);
  return ok_status();
}

/// Writes params.alpha and params.beta into the scalars tensor.
void prepare(const Case& c, std::vector<unsigned char*>& img) {
  const Params p(c.params);
  const int64_t o = c.tensors[kScalars].desc.offset;
  poke(DType::kF32, img[kScalars], o, p.r("alpha", 1));
  poke(DType::kF32, img[kScalars], o + 1, p.r("beta", 0));
}

// ---- device reference -----------------------------------------------------------------------------------

bool device_when(const Params& p) {
  return gemm_common::gemm_work(p) > kDeviceRefWork;
}

int64_t device_scratch(const Case& c) {
  const Params p(c.params);
  return 8 * device_ref::gemm_f64_scratch_doubles(gemm_common::extent_from_view(c, kA),
                                                  gemm_common::extent_from_view(c, kB), p.i("m"), p.i("n"));
}

/// prepare on the device: params.alpha and params.beta into the snapshot's scalars.
Status device_prepare(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  const Params p(c.params);
  const float s[2] = {static_cast<float>(p.r("alpha", 1)), static_cast<float>(p.r("beta", 0))};
  CUDA_CHECK(cudaMemcpyAsync(t[kScalars].ptr, s, sizeof s, cudaMemcpyHostToDevice, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // s is released on return
  return ok_status();
}

/// D's reference and tolerance (outright, in mag) on the device; alpha and beta as the kernel
/// reads them, from the scalars tensor (the "alpha2" relation doubles alpha there).
Status device_compute(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                      std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  const Params p(c.params);
  if (t.size() != 4 || out.size() != 1 || t[kA].dtype != t[kB].dtype)
    return invalid_argument("gemm_tc: no device reference for this case (A, B, scalars, D)");
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch(c))
    return invalid_argument("gemm_tc: device reference scratch missing or too small");
  if (ctx.cublas == nullptr) return invalid_argument("gemm_tc: the device reference needs a cuBLAS handle");
  float s[2] = {0, 0};
  CUDA_CHECK(cudaMemcpyAsync(s, t[kScalars].ptr, sizeof s, cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  const double alpha = s[0], beta = s[1];
  const int64_t m = p.i("m"), n = p.i("n"), k = p.i("k");
  const vendor::RowMajorGemm g{m, n, k, p.b("trans_a"), p.b("trans_b"), t[kA].v.ld, t[kB].v.ld, t[kD].v.ld};
  const DType in = t[kA].dtype;
  auto* scratch = reinterpret_cast<double*>(ctx.scratch);
  const int64_t ea = gemm_common::extent_from_view(c, kA), eb = gemm_common::extent_from_view(c, kB);
  double* stats =
      std::fabs(alpha) != 0 && std::fabs(alpha) != 1 ? device_ref::gemm_f64_stats(scratch, ea, eb) : nullptr;
  const device_ref::F64Operands x{in, t[kA].ptr, ea, t[kB].ptr, eb, min_normal(in)};
  ASSAY_RETURN_IF_ERROR(device_ref::gemm_f64_products(static_cast<cublasHandle_t>(ctx.cublas), ctx.stream, g, x,
                                                      out[0].ref, out[0].mag, scratch, stats));
  device_ref::F64TcFinish f;
  f.m = m, f.n = n, f.alpha = alpha, f.beta = beta;
  f.c = t[kD].ptr, f.c_type = t[kD].dtype, f.ldc = t[kD].v.ld;
  f.stats = stats;
  f.tol = gemm_tc_tol(in, t[kD].dtype, k, alpha, beta, a.narrow_intermediates);
  ASSAY_RETURN_IF_ERROR(device_ref::gemm_tc_f64_finish(f, out[0].ref, out[0].mag, ctx.stream));
  out[0].rel_out = 0, out[0].rel_mag = 1, out[0].floor = 0;
  out[0].exact = exact_tier_case(c);
  return ok_status();
}

// ---- properties ---------------------------------------------------------------------------------------

/// The row of D (and of op(A), C) that row i of the "permute_rows" launch takes.
int64_t permuted_row(const Params& p, int64_t i) {
  const int64_t m = std::max<int64_t>(p.i("m", 1), 1);
  return ((m - 1 - i + p.i("shift", 0)) % m + m) % m;
}

bool transform(const Case& c, std::vector<unsigned char*>& img) {
  const Params q(c.params);
  const std::string rel = q.s("relation");
  const int64_t m = q.i("m"), n = q.i("n"), k = q.i("k");
  const bool ta = q.b("trans_a"), tb = q.b("trans_b");
  const DType in = c.tensors[kA].desc.dtype, out = c.tensors[kD].desc.dtype;
  auto d_index = [&](int64_t i, int64_t j) { return gemm_common::op_index(c, kD, false, i, j); };
  // Copies of the original images: the rewrites below read the originals.
  auto snapshot = [&](size_t t) {
    const auto& d = c.tensors[t].desc;
    const size_t bytes = static_cast<size_t>(d.extent()) * dtype_size(d.dtype);
    return std::vector<unsigned char>(img[t], img[t] + bytes);
  };
  if (rel == "permute_rows") {
    if (m < 1) return false;
    const auto a0 = snapshot(kA), d0 = snapshot(kD);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t from = permuted_row(q, i);
      for (int64_t p = 0; p < k; ++p)
        poke(in, img[kA], gemm_common::op_index(c, kA, ta, i, p),
             peek(in, a0.data(), gemm_common::op_index(c, kA, ta, from, p)));
      for (int64_t j = 0; j < n; ++j) poke(out, img[kD], d_index(i, j), peek(out, d0.data(), d_index(from, j)));
    }
    return true;
  }
  if (rel == "alpha2") {
    const int64_t o = c.tensors[kScalars].desc.offset;
    poke(DType::kF32, img[kScalars], o, 2 * peek(DType::kF32, img[kScalars], o));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) poke(out, img[kD], d_index(i, j), 2 * peek(out, img[kD], d_index(i, j)));
    return true;
  }
  if (rel == "transpose") {
    if (m != n || n != k) return false;
    const auto a0 = snapshot(kA), b0 = snapshot(kB), d0 = snapshot(kD);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < m; ++p) {
        // op(A')[i][p] = op(B)[p][i], op(B')[p][j] = op(A)[j][p]
        poke(in, img[kA], gemm_common::op_index(c, kA, ta, i, p),
             peek(in, b0.data(), gemm_common::op_index(c, kB, tb, p, i)));
        poke(in, img[kB], gemm_common::op_index(c, kB, tb, i, p),
             peek(in, a0.data(), gemm_common::op_index(c, kA, ta, p, i)));
        poke(out, img[kD], d_index(i, p), peek(out, d0.data(), d_index(p, i)));
      }
    return true;
  }
  return false;
}

RelateElement relate(const Case& c) {
  const Params q(c.params);
  const std::string rel = q.s("relation");
  if (rel == "permute_rows") {
    std::vector<int64_t> rows(static_cast<size_t>(std::max<int64_t>(q.i("m", 1), 1)));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = permuted_row(q, static_cast<int64_t>(i));
    return [rows](size_t, int64_t i, int64_t j, RelatedElement& e) {
      return e = {rows[static_cast<size_t>(i)], j, 1}, true;
    };
  }
  if (rel == "alpha2") return [](size_t, int64_t i, int64_t j, RelatedElement& e) { return e = {i, j, 2}, true; };
  if (rel == "transpose") return [](size_t, int64_t i, int64_t j, RelatedElement& e) { return e = {j, i, 1}, true; };
  return [](size_t, int64_t, int64_t, RelatedElement&) { return true; };
}

// ---- declaration ------------------------------------------------------------------------------------

std::vector<ParamDef> params() {
  const std::vector<int64_t> tiles = {16, kernels::kGemmTcTileK, kernels::kGemmTcTileMN};
  return {
      ParamDef::dtype("dtype", {DType::kF16, DType::kBF16}),
      ParamDef::dtype("out_dtype", {DType::kF32, DType::kF16, DType::kBF16}),
      ParamDef::extent("m", 1, kMaxDim).aim(tiles),
      ParamDef::extent("n", 1, kMaxDim).aim(tiles).cap([](const Params& p) {
        return kMaxMacs / std::max<int64_t>(p.i("m"), 1);
      }),
      ParamDef::extent("k", 0, kMaxDim).aim(tiles).cap([](const Params& p) {
        return kMaxMacs / std::max<int64_t>(p.i("m") * p.i("n"), 1);
      }),
      gemm_common::trans_param("trans_a"),
      gemm_common::trans_param("trans_b"),
      ParamDef::real("alpha", {1, -1, 2, 0.5, 1.5, -0.75, 0.3}),
      ParamDef::real("beta", {0, 1, -1, 0.5, 2, 0.3}).weigh({2, 1, 1, 1, 1, 1}),
      ParamDef::choice("relation", {"permute_rows", "alpha2", "transpose"}).optional(3),
      ParamDef::integer("shift", 0, kMaxDim - 1)
          .only_when([](const Params& p) { return p.s("relation") == "permute_rows"; })
          .cap([](const Params& p) { return std::max<int64_t>(p.i("m") - 1, 0); })
          .describe("rotation of the reversed rows"),
  };
}

Status check(const Params& p) {
  if (std::fabs(p.r("alpha")) > 1e6 || std::fabs(p.r("beta")) > 1e6)
    return invalid_argument("gemm_tc case: params.alpha and params.beta must be |x| <= 1e6");
  if (p.s("relation") == "transpose" && (p.i("m") != p.i("n") || p.i("n") != p.i("k")))
    return invalid_argument("gemm_tc case: params.relation \"transpose\" needs m == n == k");
  return ok_status();
}

/// The exact tier, finite data for "alpha2", square "transpose" cases, k == 0 cases, and the
/// generated size under kGenMacs.
void couple(nlohmann::json& p, std::vector<ValueRecipe>& r) {
  const DType in = Params(p).dt("dtype"), out = Params(p).dt("out_dtype");
  const std::string rel = Params(p).s("relation");
  const bool exact = gemm_common::couple_exact_tier(p, r, {kA, kB, kD}, {in, in, out}, 3, {1, -1, 2}, {0, 1, -1});
  if (!exact && rel == "alpha2")  // doubling near-overflow data leaves the range
    for (size_t t : {kA, kB, kD})
      if (r[t].cls == ValueClass::kNearOverflow) {
        RecipeOptions o;
        o.classes = gemm_common::finite_classes(false);
        o.dtype = t == kD ? out : in;
        r[t] = *gen_value_recipe(o);
      }
  if (rel == "transpose") {
    int64_t m = p["m"].get<int64_t>();
    while (m * m * m > kGenMacs) m /= 2;
    p["m"] = p["n"] = p["k"] = m;
  } else if (rel.empty() && *gen_weighted_index({9, 1}) == 1) {
    p["k"] = 0;
  }
  gemm_common::halve_to_work(p, kGenMacs);
  if (p.contains("shift"))
    p["shift"] = std::min(p["shift"].get<int64_t>(), std::max<int64_t>(p["m"].get<int64_t>() - 1, 0));
}

/// The host reference against a long-double evaluation, and the ceiling against an fp32 FMA
/// loop, on a small bf16 case with mixed signs and magnitudes.
Status self_check(std::string& report) {
  const int64_t m = 3, n = 4, k = 37;
  std::vector<double> a(m * k), b(k * n), cc(m * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = round_to(DType::kBF16, static_cast<float>(std::sin(0.7 * i) * 3));
  for (int64_t i = 0; i < k * n; ++i) b[i] = round_to(DType::kBF16, static_cast<float>(std::cos(1.3 * i) * 2));
  for (int64_t i = 0; i < m * n; ++i) cc[i] = 0.25 * static_cast<double>(i) - 1;
  TcProblem p;
  p.m = m, p.n = n, p.k = k, p.in = DType::kBF16, p.out = DType::kF32, p.alpha = 1.5, p.beta = -0.5;
  p.a = a.data(), p.lda = k, p.b = b.data(), p.ldb = n, p.c = cc.data(), p.ldc = n;
  const OutputRef r = gemm_tc_expected(p, false);
  double worst = 0, worst_ratio = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double s = 0;
      float f = 0;
      for (int64_t q = 0; q < k; ++q) {
        s += static_cast<long double>(a[i * k + q]) * b[q * n + j];
        f = std::fma(static_cast<float>(a[i * k + q]), static_cast<float>(b[q * n + j]), f);
      }
      const long double want = 1.5L * s - 0.5L * cc[i * n + j];
      const size_t l = static_cast<size_t>(i * n + j);
      worst = std::max(worst, static_cast<double>(std::fabs(r.ref[l] - want)));
      const float got = std::fma(-0.5f, static_cast<float>(cc[l]), 1.5f * f);
      worst_ratio = std::max(worst_ratio, std::fabs(got - r.ref[l]) / r.tol[l]);
    }
  if (!(worst < 1e-12) || !(worst_ratio <= 1))
    return internal_error(fmt::format("gemm_tc: host reference off by {:.3g} or an fp32 FMA loop at {:.3g} of the "
                                      "ceiling",
                                      worst, worst_ratio));
  report += fmt::format(
      "gemm_tc: host reference within {:.2g} of long double, an fp32 FMA loop at {:.2g} of the ceiling (3x4x37 bf16)\n",
      worst, worst_ratio);
  return ok_status();
}

// ---- vendor -------------------------------------------------------------------------------

Status cublaslt_tc(const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
  if (t[3].dtype != DType::kF32 && t[3].dtype != t[0].dtype)
    return unavailable(fmt::format("cuBLASLt has no {} x {} -> {} GEMM", dtype_name(t[0].dtype),
                                   dtype_name(t[0].dtype), dtype_name(t[3].dtype)));
  ASSAY_ASSIGN_OR_RETURN(vendor::CublasLt * lt, vendor_columns::cublaslt());
  vendor::LtGemm g;
  g.g = vendor::RowMajorGemm{p.i("m"), p.i("n"), p.i("k"), p.b("trans_a"), p.b("trans_b"),
                             t[0].v.ld, t[1].v.ld, t[3].v.ld};
  g.a = g.b = t[0].dtype;
  g.out = t[3].dtype;
  return lt->matmul(g, p.r("alpha", 1), t[0].ptr, t[1].ptr, p.r("beta", 0), t[3].ptr, s);
}

OpDef make() {
  OpDef op;
  op.name = "gemm_tc";
  op.description =
      "tensor-core GEMM D = alpha op(A) op(B) + beta C, fp16/bf16 in, fp32 accumulate, fp32/fp16/bf16 out";
  op.params = params();
  const ValueSpec operand{.classes = gemm_common::finite_classes(true)};
  op.tensors = {gemm_common::matrix("A", Role::kIn, {}, "m", "k", "dtype", operand, "trans_a"),
                gemm_common::matrix("B", Role::kIn, {}, "k", "n", "dtype", operand, "trans_b"),
                {.name = "scalars", .dims = {"2"}, .dtype = "fp32"},
                gemm_common::matrix("D", Role::kInOut, {}, "m", "n", "out_dtype", operand)};
  op.conventions = gemm_common::blas_conventions();
  op.check = check;
  op.couple = couple;
  op.prepare = prepare;
  op.overwrites = [](const Params& p, const std::string& t) { return t == "D" && gemm_common::c_unread(p); };
  op.reference = reference;
  op.bound = bound;
  op.bound_name = "tensor-core GEMM ceiling";
  op.transform = transform;
  op.relate = relate;
  op.self_check = self_check;
  op.device_reference = {.when = device_when,
                         .scratch = device_scratch,
                         .prepare = device_prepare,
                         .compute = device_compute,
                         .name = "device-f64"};
  op.large = {{"m", 4096},        {"n", 4096},        {"k", 4096},    {"dtype", "bf16"}, {"out_dtype", "fp32"},
              {"trans_a", false}, {"trans_b", false}, {"alpha", 1.0}, {"beta", 0.0}};
  // alpha*A*B rounded to a bf16/fp16 output before beta*C: cuBLAS's measured order. The
  // launcher hands cuBLASLt alpha and beta from the params (host pointer mode), so the alpha2
  // relation, which doubles them in the device scalars, cannot reach it: outside its contract.
  op.vendor = {.name = "cublaslt",
               .run = cublaslt_tc,
               .contract = Contract().narrow_intermediates().only("relation", {"permute_rows", "transpose"})};
  return op;
}

// ---- binding ------------------------------------------------------------------------
const char* const kSrc = "kernels/gemm/gemm_tc.cu";
ASSAY_REGISTER(register_op(make()));
ASSAY_REGISTER(add_variant("gemm_tc",
                           {.name = "wmma",
                            .description = "nvcuda::wmma 16x16x16, 64x64x32 tiles via shared memory, fp32 accumulate",
                            .launch = gemm_tc_launch(kernels::gemm_tc_wmma),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("gemm_tc",
                           {.name = "mma",
                            .description = "mma.sync m16n8k16 + ldmatrix, 3-stage cp.async pipeline, fp32 accumulate",
                            .launch = gemm_tc_launch(kernels::gemm_tc_mma),
                            .source = kSrc}));

}  // namespace

}  // namespace assay::gemm_tc
