// gemm_batched: C[z] = alpha * op(A[z]) op(B[z]) + beta * C[z] for z < batch, fp32, row-major
// matrices (kernels/gemm/gemm.h conventions), as cublasGemmStridedBatchedEx / GemmBatchedEx.
//
// Sections: references and bound, properties, declaration, vendor, binding.
// Vendor column: cuBLASLt fp32 pedantic as one strided batch on the same views (A's batch stride
// 0 when broadcast), beta * C read only when beta != 0 (BLAS).
// Binding: kernels/gemm/gemm_tiled.cu (the 32x32 tiled kernel, blockIdx.z over the batch):
//   "strided"   gemm_f32_tiled_strided_batched: entry z at base + z * stride;
//   "ptr_array" gemm_f32_tiled_ptr_batched: entry z through device pointer arrays that the
//               binding fills from the same strides (launch_ptr_array).
// The planted bugs of tests/mutants/gemm/batched_mutants.cpp bind through batched_launch
// (properties/gemm_batched.h). The kernels' contracts are empty.
// Tensors (properties/gemm_common.h), rank 3, each with its own leading dimension (the drawn row
// pad) and offset, the entries dense over the padded rows (batch stride = rows * ld):
//   A [batch, m, k] (each entry k x m when trans_a); broadcast_a: every entry reads A's entry 0
//     (stride_a = 0; the other entries are laid out but unread);
//   B [batch, k, n] likewise (n x k when trans_b);
//   C [batch, m, n], kInOut: the prefill is C. BLAS convention: with beta == 0 C is poisoned
//     like an output (OpDef::overwrites: no NaN may reach the result, every element must be
//     written) unless the variant declares reads_c_when_beta0.
// Reference: references/host/gemm.h per entry, in double, on the kernel's own inputs, with
// mag = |alpha| sum |a||b| + |beta||c|. Cases with k > 0 from 2,048 multiply-adds up take the
// device path (relations too, on transformed copies of the drawn inputs): inputs drawn on the GPU, the same per-element reference and tolerance
// there (references/device/gemm_f64_batch_core.h, gemm_f64_tol.h), the host's bits.
// Bound: harness/bounds.h gemm_ceiling (fp32 in, acc and out, length k, |alpha|, beta != 0):
//   gamma_{k+2}(2^-24) mag + floor in any summation order, FMA or not, plus the reference's own
//   gamma_{k+2}(2^-53) mag (Higham (3.5); every entry is an independent GEMM).
//   Non-finite references (NaN/Inf injected into A, B or C): the value classes used here keep
//   every finite partial sum far below the fp32 range (|values| <= 2^8 * 4, k <= 2^10), so a
//   correct kernel reproduces the IEEE pattern exactly (Inf + -Inf = NaN in any order; alpha is
//   never 0, whose 0 * Inf the BLAS convention would skip): tol 0 there, NaN where the
//   reference is NaN, the same-signed Inf where it is Inf.
//   An order that scales an operand by alpha before the products (cuBLAS's; properties/gemm.cpp
//   widens gemm's ceiling for it) needs nothing here: alpha a cannot pass FLT_MAX, and its
//   rounding on the subnormal grid, half a spacing per product (sum_q |b| min_sub / 2 <=
//   k 2^10 2^-150), stays under the flush-to-zero floor of 2k |alpha| min_normal for every
//   |alpha| >= 2^-14 (GemmBatchedBound.AlphaScaledSubnormalOperandStaysInsideTheCeiling).
// Exact tier: A, B, C small integers (no injection), integer alpha, beta and
//   gemm_exact_tier_holds(fp32, k, range, |alpha|, |beta|, range): bit-identical.
// Properties: k == 0 cases (C = beta * C, exact tier with integer data); relation
//   "permute_batches" (a quarter of the cases): the entries of A (unless broadcast), B and C are
//   permuted (entry i of the new batch is entry perm[i] of the old, perm = a reversal rotated by
//   the seed) and the kernel launched again: output entry i must equal entry perm[i] of the
//   first launch within both tolerances (OpDef::relate); this catches a kernel that mixes
//   up its batch index with the data (a wrong stride, a pointer array read out of order).
//   "scale2": every entry of A and the C prefill doubled: alpha (2A) B + beta (2C) = 2 D, the
//   linearity that doubling alpha tests (alpha is a case parameter the transform cannot touch),
//   held within 2 tol1 + tol2. "transpose" (m == n == k, A not broadcast): per entry
//   op(A') = op(B)^T, op(B') = op(A)^T, C' = C^T under the same transpose flags, so
//   D' = D^T: element (z, i, j) against (z, j, i) of the first launch.
// Generation: batch <= 40, m, n <= 96, k <= 1024 (each also capped by the campaign's max_dim),
// at most 2^22 multiply-adds per case (the host reference); k == 0 in a ninth of the cases; a
// third of the cases in the exact tier (OpDef::couple: small integers, alpha in {1, -1, 2}, beta
// in {0, 1, -1, 2}); log-uniform exponents within [-8, 8].
#include "properties/gemm_batched.h"
#include "properties/vendor_columns.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/generators.h"
#include "properties/gemm_common.h"
#include "references/device/gemm_f64_batch.h"
#include "references/host/gemm.h"

namespace assay::gemm_batched {

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

namespace {

constexpr const char* kPermuteBatches = "permute_batches";
constexpr const char* kScale2 = "scale2";
constexpr const char* kTranspose = "transpose";
constexpr size_t kA = 0, kB = 1, kC = 2;

struct Geometry {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false, broadcast_a = false;
  double alpha = 1, beta = 0;
};

Geometry geometry_of(const Params& p) {
  Geometry g;
  g.m = p.i("m", 1), g.n = p.i("n", 1), g.k = p.i("k", 1), g.batch = p.i("batch", 1);
  g.trans_a = p.b("trans_a"), g.trans_b = p.b("trans_b"), g.broadcast_a = p.b("broadcast_a");
  g.alpha = p.r("alpha", 1), g.beta = p.r("beta", 0);
  return g;
}

/// Element offset of entry z of tensor t from its element [0, 0, 0].
int64_t entry_offset(const Case& c, size_t t, int64_t z) {
  return z * c.tensors[t].desc.strides[0];
}

// ---- references and bound ----------------------------------------------------------------------------
/// D per entry (rows z*m .. z*m + m - 1 of the dense [batch*m, n] view); aux[0] = mag.
Status reference(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Geometry g = geometry_of(Params(c.params));
  OutputRef r;
  const int64_t mn = g.m * g.n;
  r.ref.resize(static_cast<size_t>(g.batch * mn));
  r.aux.assign(1, std::vector<double>(r.ref.size()));
  for (int64_t z = 0; z < g.batch; ++z) {
    ref::GemmProblem<double> p;
    p.m = g.m, p.n = g.n, p.k = g.k, p.trans_a = g.trans_a, p.trans_b = g.trans_b;
    p.alpha = g.alpha, p.beta = g.beta;
    p.a = t[kA].data + entry_offset(c, kA, g.broadcast_a ? 0 : z), p.lda = t[kA].v.ld;
    p.b = t[kB].data + entry_offset(c, kB, z), p.ldb = t[kB].v.ld;
    p.c = t[kC].data + entry_offset(c, kC, z), p.ldc = t[kC].v.ld;
    ref::gemm_reference<double>(p, r.ref.data() + z * mn, r.aux[0].data() + z * mn);
  }
  out = {std::move(r)};
  return ok_status();
}

bool exact_tier(const Case& c, const Geometry& g) {
  const int64_t range = gemm_common::int_range({&c.tensors[kA].values, &c.tensors[kB].values, &c.tensors[kC].values});
  return range >= 0 && gemm_exact_tier_holds(DType::kF32, g.k, range, std::fabs(g.alpha), std::fabs(g.beta),
                                             static_cast<double>(range));
}

/// The ceiling with no store rounding or overflow limit: 0 where the reference is not finite.
device_ref::F64DotTol tolerance_of(const Geometry& g) {
  GemmBoundModel model;
  model.k = g.k;
  model.alpha_abs = std::fabs(g.alpha);
  model.has_beta = g.beta != 0;
  return {.b = gemm_ceiling(model)};
}

Status bound(const Case& c, const Arithmetic&, const std::vector<HostTensor>&, std::vector<OutputRef>& out) {
  const Geometry g = geometry_of(Params(c.params));
  OutputRef& r = out[0];
  r.tol = device_ref::f64_dot_tolerances(tolerance_of(g), r.ref, r.aux[0]);
  r.exact = exact_tier(c, g);
  return ok_status();
}

/// The device path: cases with k > 0 from kDeviceRefMacs multiply-adds up, as conv's (below it
/// the host reference takes a few microseconds), relations included (the engine transforms
/// copies of the drawn inputs and runs this reference on them too). The same per-element
/// reference and tolerance as the host path (references/device/gemm_f64_batch_core.h,
/// gemm_f64_tol.h), bit for bit.
constexpr int64_t kDeviceRefMacs = 2048;

bool device_when(const Params& p) {
  const Geometry g = geometry_of(p);
  return g.k > 0 && g.batch * g.m * g.n * g.k >= kDeviceRefMacs;
}

Status device_reference(const Case& c, const Arithmetic&, const std::vector<DevTensor>& t,
                        std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  const Geometry g = geometry_of(Params(c.params));
  const auto* base = static_cast<const unsigned char*>(std::min({t[kA].ptr, t[kB].ptr, t[kC].ptr}));
  auto at = [&](size_t i) { return static_cast<uint64_t>(static_cast<const unsigned char*>(t[i].ptr) - base); };
  device_ref::F64GemmProblem p;
  p.trans_a = g.trans_a ? 1 : 0, p.trans_b = g.trans_b ? 1 : 0;
  p.m = g.m, p.n = g.n, p.k = g.k, p.batch = g.batch;
  p.lda = t[kA].v.ld, p.ldb = t[kB].v.ld, p.ldc = t[kC].v.ld;
  p.stride_a = g.broadcast_a ? 0 : entry_offset(c, kA, 1);
  p.stride_b = entry_offset(c, kB, 1), p.stride_c = entry_offset(c, kC, 1);
  p.a = at(kA), p.b = at(kB), p.c = at(kC);
  p.alpha = g.alpha, p.beta = g.beta;
  ASSAY_RETURN_IF_ERROR(device_ref::gemm_f64_strided(p, base, out[0].ref, out[0].mag, ctx.stream));
  ASSAY_RETURN_IF_ERROR(
      device_ref::gemm_f64_dot_tol(tolerance_of(g), out[0].ref, out[0].mag, g.batch * g.m * g.n, ctx.stream));
  out[0].exact = exact_tier(c, g);
  return ok_status();
}


// ---- properties --------------------------------------------------------------------------------------
/// perm[i]: the old entry that becomes entry i (a reversal rotated by the seed of A's recipe).
std::vector<int64_t> permutation(const Case& c) {
  const int64_t b = std::max<int64_t>(Params(c.params).i("batch", 1), 1);
  const int64_t shift = static_cast<int64_t>(c.tensors[kA].values.seed % static_cast<uint64_t>(b));
  std::vector<int64_t> perm(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) perm[static_cast<size_t>(i)] = (b - 1 - i + shift) % b;
  return perm;
}

/// Calls f(element index) for every element of entry z of tensor t's view.
template <typename F>
void for_entry(const Case& c, size_t t, int64_t z, F f) {
  const TensorDesc& d = c.tensors[t].desc;
  const int64_t rows = d.shape[1], cols = d.shape[2], ld = d.strides[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < cols; ++q) f(d.offset + entry_offset(c, t, z) + r * ld + q);
}

float* as_f32(std::vector<unsigned char*>& img, size_t t) {
  return reinterpret_cast<float*>(img[t]);
}

/// "scale2": A (every stored entry) and the C prefill doubled.
bool scale_inputs(const Case& c, std::vector<unsigned char*>& img) {
  const Geometry g = geometry_of(Params(c.params));
  for (size_t t : {kA, kC}) {
    float* x = as_f32(img, t);
    for (int64_t z = 0; z < g.batch; ++z) for_entry(c, t, z, [&](int64_t e) { x[e] *= 2.0f; });
  }
  return true;
}

/// "transpose" (square, A not broadcast): op(A') = op(B)^T, op(B') = op(A)^T, C' = C^T per entry.
bool transpose_inputs(const Case& c, std::vector<unsigned char*>& img) {
  const Geometry g = geometry_of(Params(c.params));
  if (g.m != g.n || g.n != g.k || g.broadcast_a) return false;
  const int64_t n = g.n;
  float *a = as_f32(img, kA), *b = as_f32(img, kB), *cc = as_f32(img, kC);
  using gemm_common::op_index;
  for (int64_t z = 0; z < g.batch; ++z) {
    std::vector<float> oa(static_cast<size_t>(n * n)), ob(oa.size()), oc(oa.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < n; ++p) {
        const size_t l = static_cast<size_t>(i * n + p);
        oa[l] = a[op_index(c, kA, g.trans_a, i, p, z)];
        ob[l] = b[op_index(c, kB, g.trans_b, i, p, z)];
        oc[l] = cc[op_index(c, kC, false, i, p, z)];
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < n; ++p) {
        const size_t l = static_cast<size_t>(p * n + i);
        a[op_index(c, kA, g.trans_a, i, p, z)] = ob[l];
        b[op_index(c, kB, g.trans_b, i, p, z)] = oa[l];
        cc[op_index(c, kC, false, i, p, z)] = oc[l];
      }
  }
  return true;
}

/// "permute_batches": entry i of A (unless broadcast), B and C becomes entry perm[i].
bool permute_inputs(const Case& c, std::vector<unsigned char*>& img) {
  const Geometry g = geometry_of(Params(c.params));
  const std::vector<int64_t> perm = permutation(c);
  for (size_t t : {kA, kB, kC}) {
    if (t == kA && g.broadcast_a) continue;
    float* x = as_f32(img, t);
    const TensorDesc& d = c.tensors[t].desc;
    const std::vector<float> old(x, x + d.extent());
    for (int64_t i = 0; i < g.batch; ++i) {
      const int64_t shift = entry_offset(c, t, perm[static_cast<size_t>(i)]) - entry_offset(c, t, i);
      for_entry(c, t, i, [&](int64_t e) { x[e] = old[static_cast<size_t>(e + shift)]; });
    }
  }
  return true;
}

bool transform(const Case& c, std::vector<unsigned char*>& img) {
  const std::string rel = Params(c.params).s("relation");
  if (rel == kScale2) return scale_inputs(c, img);
  if (rel == kTranspose) return transpose_inputs(c, img);
  if (rel == kPermuteBatches) return permute_inputs(c, img);
  return false;
}

/// Output element (i, j) of the [batch*m, n] view is (z, r, j) with i = z*m + r.
RelateElement relate(const Case& c) {
  const Params p(c.params);
  const std::string rel = p.s("relation");
  const int64_t m = std::max<int64_t>(p.i("m", 1), 1);
  if (rel == kPermuteBatches)
    return [m, perm = permutation(c)](size_t, int64_t i, int64_t j, RelatedElement& e) {
      return e = {perm[static_cast<size_t>(i / m)] * m + i % m, j, 1}, true;
    };
  if (rel == kScale2) return [](size_t, int64_t i, int64_t j, RelatedElement& e) { return e = {i, j, 2}, true; };
  if (rel == kTranspose)
    return [m](size_t, int64_t i, int64_t j, RelatedElement& e) { return e = {i / m * m + j, i % m, 1}, true; };
  return [](size_t, int64_t i, int64_t j, RelatedElement& e) { return e = {i, j, 1}, true; };
}

// ---- declaration -------------------------------------------------------------------------------------
constexpr int64_t kMaxDim = 96, kMaxK = 1024, kMaxBatch = 40;
constexpr int64_t kMaxMacs = int64_t{1} << 22;  // the host reference's budget

std::vector<ParamDef> params() {
  const int64_t t = kernels::kGemmTiledTile;
  return {
      ParamDef::extent("batch", 1, kMaxBatch),
      ParamDef::extent("m", 1, kMaxDim).aim({t}),
      ParamDef::extent("n", 1, kMaxDim).aim({t}),
      ParamDef::extent("k", 0, kMaxK).aim({t}).cap([](const Params& p) {
        return kMaxMacs / std::max<int64_t>(p.i("batch") * p.i("m") * p.i("n"), 1);
      }),
      gemm_common::trans_param("trans_a"),
      gemm_common::trans_param("trans_b"),
      ParamDef::flag("broadcast_a").weigh({4, 1}).describe("every entry reads A's entry 0 (stride 0)"),
      // alpha is never 0 (see the header: 0 * Inf).
      ParamDef::real("alpha", {1, -1, 0.5, 1.5, -0.75, 2}),
      ParamDef::real("beta", {0, 1, -1, 0.5, 2.25, 2}),
      ParamDef::choice("relation", {kPermuteBatches, kScale2, kTranspose}).weigh({2, 1, 1}).optional(3),
  };
}

Status check(const Params& p) {
  if (p.r("alpha") == 0)
    return invalid_argument("gemm_batched case: params.alpha = 0 is outside the spec (0 * Inf, see its header)");
  if (p.s("relation") == kTranspose && (p.i("m") != p.i("n") || p.i("n") != p.i("k") || p.b("broadcast_a")))
    return invalid_argument("gemm_batched case: params.relation \"transpose\" needs m == n == k and no broadcast_a");
  return ok_status();
}

/// The exact tier, exponents within [-8, 8], k == 0 cases, square "transpose" cases.
void couple(nlohmann::json& p, std::vector<ValueRecipe>& r) {
  gemm_common::couple_exact_tier(p, r, {kA, kB, kC}, {DType::kF32, DType::kF32, DType::kF32}, 2, {1, -1, 2},
                                 {0, 1, -1, 2});
  for (auto& x : r) gemm_common::clamp_exponents(x, -8, 8);
  if (p.value("relation", std::string()) == kTranspose) {
    int64_t m = p["m"].get<int64_t>();
    const int64_t batch = p["batch"].get<int64_t>();
    while (m > 1 && batch * m * m * m > kMaxMacs) m /= 2;
    p["m"] = p["n"] = p["k"] = m;
    p["broadcast_a"] = false;
  } else if (*gen_weighted_index({8, 1}) == 1) {
    p["k"] = 0;
  }
}

/// The host reference against long double on two entries, A broadcast and transposed.
Status self_check(std::string& report) {
  const int64_t m = 3, n = 4, k = 6, batch = 2;
  std::vector<double> a(static_cast<size_t>(k * m)), b(static_cast<size_t>(batch * k * n)), cc(static_cast<size_t>(batch * m * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.7 * static_cast<double>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(1.9 * static_cast<double>(i));
  for (size_t i = 0; i < cc.size(); ++i) cc[i] = 0.5 * static_cast<double>(i) - 3;
  double worst = 0;
  for (int64_t z = 0; z < batch; ++z) {
    ref::GemmProblem<double> p;
    p.m = m, p.n = n, p.k = k, p.trans_a = true, p.trans_b = false, p.alpha = -1.5, p.beta = 0.75;
    p.a = a.data(), p.lda = m, p.b = b.data() + z * k * n, p.ldb = n, p.c = cc.data() + z * m * n, p.ldc = n;
    std::vector<double> y(static_cast<size_t>(m * n)), mag(y.size());
    ref::gemm_reference<double>(p, y.data(), mag.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double s = 0;
        for (int64_t q = 0; q < k; ++q) s += static_cast<long double>(a[static_cast<size_t>(q * m + i)]) * p.b[q * n + j];
        const long double want = -1.5L * s + 0.75L * p.c[i * n + j];
        worst = std::max(worst, static_cast<double>(std::fabs(y[static_cast<size_t>(i * n + j)] - want)));
      }
  }
  if (!(worst < 1e-13)) return internal_error(fmt::format("gemm_batched: host reference off by {:.3g}", worst));
  report += fmt::format(
      "gemm_batched: host reference within {:.2g} of a long-double evaluation (2 entries 3x4x6, A shared and "
      "transposed)\n",
      worst);
  return ok_status();
}

// ---- vendor -------------------------------------------------------------------------------

Status cublaslt_batched(const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
  ASSAY_ASSIGN_OR_RETURN(vendor::CublasLt * lt, vendor_columns::cublaslt());
  vendor::LtGemm g;
  g.g = vendor::RowMajorGemm{p.i("m"), p.i("n"), p.i("k"), p.b("trans_a"), p.b("trans_b"),
                             t[0].v.ld, t[1].v.ld, t[2].v.ld};
  g.batch = p.i("batch", 1);
  g.stride_a = p.b("broadcast_a") ? 0 : t[0].strides[0];
  g.stride_b = t[1].strides[0];
  g.stride_c = t[2].strides[0];
  return lt->matmul(g, p.r("alpha", 1), t[0].ptr, t[1].ptr, p.r("beta", 0), t[2].ptr, s);
}

OpDef make() {
  OpDef op;
  op.name = "gemm_batched";
  op.description = "fp32 batched GEMM C[z] = alpha*op(A[z])op(B[z]) + beta*C[z], strided and pointer-array";
  op.params = params();
  const ValueSpec v{.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                ValueClass::kSmallInt, ValueClass::kLogUniform, ValueClass::kSubnormal,
                                ValueClass::kSignedZero, ValueClass::kOneHot},
                    .specials = kSpecialAll};
  using gemm_common::matrix;
  op.tensors = {matrix("A", Role::kIn, {"batch"}, "m", "k", "fp32", v, "trans_a"),
                matrix("B", Role::kIn, {"batch"}, "k", "n", "fp32", v, "trans_b"),
                matrix("C", Role::kInOut, {"batch"}, "m", "n", "fp32", v)};
  op.conventions = gemm_common::blas_conventions();
  op.check = check;
  op.couple = couple;
  // C that must not be read (the BLAS convention) is laid out and poisoned like an output, on
  // the host and the device path alike.
  op.overwrites = [](const Params& p, const std::string& t) { return t == "C" && gemm_common::c_unread(p); };
  op.reference = reference;
  op.bound = bound;
  op.bound_name = "gemm ceiling";
  op.transform = transform;
  op.relate = relate;
  op.self_check = self_check;
  op.device_reference = {.when = device_when, .compute = device_reference};
  op.vendor = {.name = "cublaslt-pedantic", .run = cublaslt_batched};
  return op;
}

// ---- binding ------------------------------------------------------------------------------------------
cudaError_t strided(const BatchedCall& c, cudaStream_t s) {
  return kernels::gemm_f32_tiled_strided_batched(c.g, c.batch, c.stride_a, c.stride_b, c.stride_c, s);
}
cudaError_t ptr_array(const BatchedCall& c, cudaStream_t s) {
  return launch_ptr_array(c, c.batch, s);
}

const char* const kSrc = "kernels/gemm/gemm_tiled.cu";
ASSAY_REGISTER(register_op(make()));
ASSAY_REGISTER(add_variant("gemm_batched",
                           {.name = "strided",
                            .description = "tiled 32x32, blockIdx.z over entries at base + z * stride",
                            .launch = batched_launch(strided),
                            .source = kSrc}));
ASSAY_REGISTER(add_variant("gemm_batched", {.name = "ptr_array",
                                            .description = "tiled 32x32, entries through device pointer arrays",
                                            .launch = batched_launch(ptr_array),
                                            .source = kSrc}));

}  // namespace
}  // namespace assay::gemm_batched
