#include "harness/testbeds/gemm_bwd_f32.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "harness/gradcheck.h"
#include "harness/shrink.h"
#include "references/host/gemm.h"

namespace assay {
namespace {

std::vector<GemmBwdF32Variant>& registry() {
  static std::vector<GemmBwdF32Variant> v;
  return v;
}

constexpr int kA = 0, kB = 1, kDC = 2, kDA = 3, kDB = 4;
const char* const kNames[] = {"A", "B", "dC", "dA", "dB"};

struct Shape {
  int64_t m, n, k;
  double alpha;
};

StatusOr<Shape> parse(const Case& c) {
  Shape s{};
  for (const char* key : {"m", "n", "k"}) {
    auto it = c.params.find(key);
    if (it == c.params.end() || !it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 4096)
      return invalid_argument(fmt::format("gemm_bwd case: params.{} must be an integer in [0, 4096]", key));
  }
  s.m = c.params["m"].get<int64_t>();
  s.n = c.params["n"].get<int64_t>();
  s.k = c.params["k"].get<int64_t>();
  auto it = c.params.find("alpha");
  if (it == c.params.end() || !it->is_number() ||
      static_cast<double>(static_cast<float>(it->get<double>())) != it->get<double>())
    return invalid_argument("gemm_bwd case: params.alpha must be an fp32 value");
  s.alpha = it->get<double>();
  const std::vector<std::pair<const char*, std::array<int64_t, 2>>> want = {
      {"A", {s.m, s.k}}, {"B", {s.k, s.n}}, {"dC", {s.m, s.n}}, {"dA", {s.m, s.k}}, {"dB", {s.k, s.n}}};
  if (c.tensors.size() != 5) return invalid_argument("gemm_bwd case: expected tensors A, B, dC, dA, dB");
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorSpec* t = c.find(want[i].first);
    if (t == nullptr || c.tensors[i].name != want[i].first)
      return invalid_argument(fmt::format("gemm_bwd case: tensor {} missing or out of order", want[i].first));
    const auto& d = t->desc;
    if (d.dtype != DType::kF32 || d.shape != std::vector<int64_t>{want[i].second[0], want[i].second[1]} ||
        d.strides.size() != 2 || d.strides[1] != 1 || d.strides[0] < std::max<int64_t>(want[i].second[1], 1))
      return invalid_argument(fmt::format("gemm_bwd case: tensor {} must be fp32 [{}, {}] with strides [ld >= {}, 1]",
                                          want[i].first, want[i].second[0], want[i].second[1],
                                          std::max<int64_t>(want[i].second[1], 1)));
  }
  const Role roles[] = {Role::kIn, Role::kIn, Role::kIn, Role::kOut, Role::kInOut};
  for (size_t i = 0; i < 5; ++i)
    if (c.tensors[i].role != roles[i])
      return invalid_argument("gemm_bwd case: roles must be A,B,dC:in dA:out dB:inout");
  return s;
}

const float* fptr(gpu::Lane& lane, int t, const Case& c) {
  return reinterpret_cast<const float*>(lane.dev_tensor(t)) + c.tensors[static_cast<size_t>(t)].desc.offset;
}

}  // namespace

bool register_gemm_bwd_f32_variant(GemmBwdF32Variant v) {
  registry().push_back(std::move(v));
  return true;
}
const std::vector<GemmBwdF32Variant>& gemm_bwd_f32_variants() {
  return registry();
}

Case make_gemm_bwd_case(int64_t m, int64_t n, int64_t k, double alpha, int64_t pad, int64_t off, const ValueRecipe& ra,
                        const ValueRecipe& rb, const ValueRecipe& rdc, const ValueRecipe& rdb) {
  Case c;
  c.op = "gemm_bwd";
  c.params = {{"m", m}, {"n", n}, {"k", k}, {"alpha", alpha}};
  auto t = [&](const char* name, Role role, int64_t rows, int64_t cols, const ValueRecipe& r) {
    TensorSpec s;
    s.name = name;
    s.role = role;
    s.desc.dtype = DType::kF32;
    s.desc.shape = {rows, cols};
    s.desc.strides = {std::max<int64_t>(cols, 1) + pad, 1};
    s.desc.offset = off;
    s.values = r;
    return s;
  };
  c.tensors = {t("A", Role::kIn, m, k, ra), t("B", Role::kIn, k, n, rb), t("dC", Role::kIn, m, n, rdc),
               t("dA", Role::kOut, m, k, ValueRecipe{}), t("dB", Role::kInOut, k, n, rdb)};
  return c;
}

Status validate_gemm_bwd_case(const Case& c) {
  return parse(c).status();
}

std::vector<Case> shrink_gemm_bwd_case(const Case& c) {
  auto s = parse(c);
  if (!s.ok()) return {};
  const int64_t pad = c.tensors[0].desc.strides[0] - std::max<int64_t>(c.tensors[0].desc.shape[1], 1);
  const int64_t off = c.tensors[0].desc.offset;
  std::vector<Case> out;
  auto emit = [&](int64_t m, int64_t n, int64_t k, double alpha, int64_t p, int64_t o, ValueRecipe ra, ValueRecipe rb,
                  ValueRecipe rdc, ValueRecipe rdb) {
    Case x = make_gemm_bwd_case(m, n, k, alpha, p, o, ra, rb, rdc, rdb);
    x.variant = c.variant;
    out.push_back(std::move(x));
  };
  const ValueRecipe ra = c.tensors[0].values, rb = c.tensors[1].values, rdc = c.tensors[2].values,
                    rdb = c.tensors[4].values;
  for (int64_t v : smaller_values(s->m, 1)) emit(v, s->n, s->k, s->alpha, pad, off, ra, rb, rdc, rdb);
  for (int64_t v : smaller_values(s->n, 1)) emit(s->m, v, s->k, s->alpha, pad, off, ra, rb, rdc, rdb);
  for (int64_t v : smaller_values(s->k, 1)) emit(s->m, s->n, v, s->alpha, pad, off, ra, rb, rdc, rdb);
  if (pad != 0) emit(s->m, s->n, s->k, s->alpha, 0, off, ra, rb, rdc, rdb);
  if (off != 0) emit(s->m, s->n, s->k, s->alpha, pad, 0, ra, rb, rdc, rdb);
  auto simple = [](ValueRecipe r) {
    ValueRecipe x;
    x.cls = ValueClass::kSmallInt;
    x.seed = r.seed;
    return x;
  };
  if (ra.cls != ValueClass::kSmallInt || rb.cls != ValueClass::kSmallInt || rdc.cls != ValueClass::kSmallInt ||
      rdb.cls != ValueClass::kSmallInt)
    emit(s->m, s->n, s->k, s->alpha, pad, off, simple(ra), simple(rb), simple(rdc), simple(rdb));
  return out;
}

StatusOr<std::vector<Verdict>> run_gemm_bwd_f32(const Case& c, const std::vector<std::string>& names, gpu::Lane& lane) {
  ASSAY_ASSIGN_OR_RETURN(Shape s, parse(c));
  std::vector<const GemmBwdF32Variant*> variants;
  for (const auto& name : names) {
    const GemmBwdF32Variant* f = nullptr;
    for (const auto& v : registry())
      if (v.info.name == name) f = &v;
    if (f == nullptr) return not_found(fmt::format("gemm_bwd has no variant '{}'", name));
    variants.push_back(f);
  }
  const auto& T = c.tensors;
  std::vector<gpu::ArenaTensor> at;
  for (size_t i = 0; i < 5; ++i) at.push_back({T[i].desc, T[i].role, i == kDA});
  const int64_t mk = s.m * s.k, kn = s.k * s.n;
  const int64_t bytes_da = (T[kDA].desc.extent() * 4 + 255) / 256 * 256;
  const int64_t bytes_db = (T[kDB].desc.extent() * 4 + 255) / 256 * 256;
  ASSAY_RETURN_IF_ERROR(lane.layout(at, 16 * (mk + kn), bytes_da + bytes_db));
  for (int t : {kA, kB, kDC, kDB})
    materialize(T[t].desc, T[t].values, fnv1a64(T[t].name.data(), T[t].name.size()), lane.host_tensor(t));
  materialize_output(T[kDA].desc, lane.host_tensor(kDA));
  auto decode = [&](int t) {
    std::vector<double> v(static_cast<size_t>(T[t].desc.extent()));
    const float* f = reinterpret_cast<const float*>(lane.host_tensor(t));
    for (size_t i = 0; i < v.size(); ++i) v[i] = f[i];
    return v;
  };
  const std::vector<double> A = decode(kA), B = decode(kB), DC = decode(kDC), DB0 = decode(kDB);
  auto* ex = reinterpret_cast<double*>(lane.host_extra());
  double *refA = ex, *magA = ex + mk, *refB = ex + 2 * mk, *magB = ex + 2 * mk + kn;
  const int64_t lda = T[kA].desc.strides[0], ldb = T[kB].desc.strides[0], lddc = T[kDC].desc.strides[0];
  const int64_t ldda = T[kDA].desc.strides[0], lddb = T[kDB].desc.strides[0], off = T[kA].desc.offset;
  ref::gemm_reference(ref::GemmProblem<double>{s.m, s.k, s.n, false, true, s.alpha, 0, DC.data() + off, lddc,
                                               B.data() + off, ldb, nullptr, 0},
                      refA, magA, 1);
  ref::gemm_reference(ref::GemmProblem<double>{s.k, s.n, s.m, true, false, s.alpha, 1, A.data() + off, lda,
                                               DC.data() + off, lddc, DB0.data() + off, lddb},
                      refB, magB, 1);
  ASSAY_RETURN_IF_ERROR(lane.upload());

  GemmBoundModel ma, mb;
  ma.k = s.n, ma.alpha_abs = std::fabs(s.alpha), ma.has_beta = false;
  mb.k = s.m, mb.alpha_abs = std::fabs(s.alpha), mb.has_beta = true;
  ElementBound ba = gemm_ceiling(ma), bb = gemm_ceiling(mb);
  ba.rel_mag /= 1.0 - gamma_n(s.n + 2, 0x1p-53);
  bb.rel_mag /= 1.0 - gamma_n(s.m + 2, 0x1p-53);
  const double* dev_ref = reinterpret_cast<const double*>(lane.dev_extra());
  auto compare = [&](int t, int64_t rows, int64_t cols, const double* r, const double* mg, const ElementBound& b) {
    gpu::DevCompare x;
    x.out_dtype = static_cast<int32_t>(DType::kF32);
    x.out = lane.dev_tensor(t);
    x.off = T[t].desc.offset;
    x.rows = rows;
    x.cols = cols;
    x.ld = T[t].desc.strides[0];
    x.ref = r;
    x.mag = mg;
    x.rel_out = b.rel_out;
    x.rel_mag = b.rel_mag;
    x.floor = b.floor;
    x.out_max = 3.4028234663852886e38;
    return x;
  };
  const gpu::DevCompare ca = compare(kDA, s.m, s.k, dev_ref, dev_ref + mk, ba);
  const gpu::DevCompare cb = compare(kDB, s.k, s.n, dev_ref + 2 * mk, dev_ref + 2 * mk + kn, bb);
  unsigned char* save_da = lane.dev_scratch();
  unsigned char* save_db = save_da + bytes_da;

  std::vector<Verdict> verdicts;
  for (const GemmBwdF32Variant* v : variants) {
    Verdict verdict;
    verdict.variant = v->info.name;
    verdict.metrics.reference = "host-f64";
    verdict.metrics.key = fmt::format("fp32/{}", value_class_name(T[kDC].values.cls));
    cudaError_t launch_err = cudaSuccess;
    std::vector<gpu::CheckParams> params;
    for (int run = 0; run < 2; ++run) {
      ASSAY_RETURN_IF_ERROR(lane.restore());
      GemmBwdF32Problem q;
      q.m = s.m, q.n = s.n, q.k = s.k, q.alpha = static_cast<float>(s.alpha);
      q.a = fptr(lane, kA, c), q.lda = lda, q.b = fptr(lane, kB, c), q.ldb = ldb;
      q.dc = fptr(lane, kDC, c), q.lddc = lddc;
      q.da = const_cast<float*>(fptr(lane, kDA, c)), q.ldda = ldda;
      q.db = const_cast<float*>(fptr(lane, kDB, c)), q.lddb = lddb;
      const cudaError_t e = v->launch(q, lane.stream());
      if (e != cudaSuccess && launch_err == cudaSuccess) launch_err = e;
      gpu::CheckParams cp = lane.check_params();
      cp.compares[0] = ca;
      cp.compares[1] = cb;
      cp.ncompares = 2;
      if (run == 1 && v->info.deterministic) {
        cp.compares[0].prev = save_da;
        cp.compares[1].prev = save_db;
      }
      ASSAY_RETURN_IF_ERROR(lane.check(cp, run));
      params.push_back(cp);
      if (run == 0) {
        CUDA_CHECK(cudaMemcpyAsync(save_da, lane.dev_tensor(kDA), T[kDA].desc.extent() * 4, cudaMemcpyDeviceToDevice,
                                   lane.stream()));
        CUDA_CHECK(cudaMemcpyAsync(save_db, lane.dev_tensor(kDB), T[kDB].desc.extent() * 4, cudaMemcpyDeviceToDevice,
                                   lane.stream()));
      }
    }
    ASSAY_RETURN_IF_ERROR(lane.fetch_results(2));
    if (launch_err != cudaSuccess) {
      verdict.failures.push_back({FailureKind::kLaunchError, "", 1, -1, cudaGetErrorString(launch_err)});
      verdicts.push_back(std::move(verdict));
      continue;
    }
    auto add = [&](FailureKind k, const std::string& t, unsigned long long n, int64_t first, std::string d) {
      for (auto& f : verdict.failures)
        if (f.kind == k && f.tensor == t) return;
      verdict.failures.push_back({k, t, static_cast<int64_t>(n), first, std::move(d)});
    };
    for (int run = 0; run < 2; ++run) {
      const auto& r = lane.result(run);
      for (int ri = 0; ri < params[run].nregions; ++ri) {
        const auto& rr = r.regions[ri];
        const bool guard = ri % 2 == 0;
        const int t = std::min(ri / 2, 4);
        if (rr.changed)
          add(guard ? FailureKind::kGuard
                    : (params[run].regions[ri].kind == gpu::DevRegion::kBytesEqual ? FailureKind::kInputWritten
                                                                                   : FailureKind::kGapWritten),
              kNames[t], rr.changed, gpu::first_index(rr.changed, rr.changed_first),
              guard ? fmt::format("guard band near {} changed", kNames[t])
                    : fmt::format("{} changed outside its view or as an input", kNames[t]));
        if (rr.unwritten)
          add(FailureKind::kUnwritten, kNames[t], rr.unwritten, gpu::first_index(rr.unwritten, rr.unwritten_first),
              fmt::format("{} of {} elements of {} never written", rr.unwritten, t == kDA ? mk : kn, kNames[t]));
      }
      for (int ci = 0; ci < 2; ++ci) {
        const auto& cr = r.compares[ci];
        const char* name = ci == 0 ? "dA" : "dB";
        const int64_t cols = ci == 0 ? s.k : s.n;
        auto at = [&](unsigned long long n, unsigned long long f) {
          const int64_t i = gpu::first_index(n, f);
          return fmt::format("first {}[{}][{}]", name, i / std::max<int64_t>(cols, 1), i % std::max<int64_t>(cols, 1));
        };
        if (cr.naninf)
          add(FailureKind::kNanInf, name, cr.naninf, -1, "NaN/Inf pattern differs, " + at(cr.naninf, cr.naninf_first));
        if (cr.bound)
          add(FailureKind::kBound, name, cr.bound, -1, "beyond the GEMM ceiling, " + at(cr.bound, cr.bound_first));
        if (cr.nondet)
          add(FailureKind::kNondeterministic, name, cr.nondet, -1,
              "differs bitwise between launches, " + at(cr.nondet, cr.nondet_first));
        const double ratio = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(cr.worst_key >> 32)));
        verdict.metrics.max_ratio = std::max(verdict.metrics.max_ratio, ratio);
      }
    }
    // <dC, J u> by central differences of the fp64 forward vs the kernel's own
    // backward contracted with u (its first launch, kept in the save areas).
    bool finite = true;
    for (const auto* v0 : {&A, &B, &DC, &DB0})
      for (double x : *v0) finite = finite && (std::isfinite(x) || std::isnan(x));  // NaN canaries sit in gaps
    if (finite && s.m > 0 && s.n > 0 && s.k > 0) {
      std::vector<float> dA(static_cast<size_t>(T[kDA].desc.extent())), dB(static_cast<size_t>(T[kDB].desc.extent()));
      ASSAY_RETURN_IF_ERROR(lane.read_back(save_da, dA.data(), static_cast<int64_t>(dA.size()) * 4));
      ASSAY_RETURN_IF_ERROR(lane.read_back(save_db, dB.data(), static_cast<int64_t>(dB.size()) * 4));
      const int64_t nx = mk + kn;
      std::vector<double> x(static_cast<size_t>(nx));
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t p = 0; p < s.k; ++p)
          x[static_cast<size_t>(i * s.k + p)] = A[static_cast<size_t>(off + i * lda + p)];
      for (int64_t p = 0; p < s.k; ++p)
        for (int64_t j = 0; j < s.n; ++j)
          x[static_cast<size_t>(mk + p * s.n + j)] = B[static_cast<size_t>(off + p * ldb + j)];
      Differentiable f;
      f.n = nx;
      f.m = s.m * s.n;
      const Shape sh = s;
      f.forward = [sh, mk](const double* xx, double* y) {
        for (int64_t i = 0; i < sh.m; ++i)
          for (int64_t j = 0; j < sh.n; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < sh.k; ++p) acc += xx[i * sh.k + p] * xx[mk + p * sh.n + j];
            y[i * sh.n + j] = sh.alpha * acc;
          }
      };
      f.magnitude = [sh, mk](const double* xx, double* y) {
        for (int64_t i = 0; i < sh.m; ++i)
          for (int64_t j = 0; j < sh.n; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < sh.k; ++p) acc += std::fabs(xx[i * sh.k + p] * xx[mk + p * sh.n + j]);
            y[i * sh.n + j] = std::fabs(sh.alpha) * acc;
          }
      };
      const std::vector<double> u = draw_values(ValueClass::kNormal, T[kA].values.seed ^ 0x5eed, 7, nx);
      auto fd = fd_directional(f, x.data(), u.data());
      if (fd.ok()) {
        double fd_val = 0, fd_err = 0, kern = 0, tol = 0, sum_abs = 0;
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) {
            const double w = DC[static_cast<size_t>(off + i * lddc + j)];
            fd_val += w * fd->jvp[static_cast<size_t>(i * s.n + j)];
            fd_err += std::fabs(w) * fd->err[static_cast<size_t>(i * s.n + j)];
          }
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t p = 0; p < s.k; ++p) {
            const size_t l = static_cast<size_t>(i * s.k + p);
            const double ue = fd->u_eff[l], g = dA[static_cast<size_t>(off + i * ldda + p)];
            kern += ue * g;
            sum_abs += std::fabs(ue * g);
            tol += std::fabs(ue) * ba.tol(std::fabs(refA[l]), magA[l]);
          }
        for (int64_t p = 0; p < s.k; ++p)
          for (int64_t j = 0; j < s.n; ++j) {
            const size_t l = static_cast<size_t>(p * s.n + j);
            const double ue = fd->u_eff[static_cast<size_t>(mk) + l];
            const double g = static_cast<double>(dB[static_cast<size_t>(off + p * lddb + j)]) -
                             DB0[static_cast<size_t>(off + p * lddb + j)];
            kern += ue * g;
            sum_abs += std::fabs(ue * g);
            tol += std::fabs(ue) * bb.tol(std::fabs(refB[l]), magB[l]);
          }
        // FD error (with the engine's safety factor), the kernel's bound
        // summed against |u|, and the rounding of the two contractions.
        tol += 4 * fd_err + gamma_n(nx + s.m * s.n, 0x1p-53) * (sum_abs + std::fabs(fd_val)) + 1e-300;
        if (std::isfinite(kern) && std::isfinite(fd_val) && !(std::fabs(kern - fd_val) <= tol))
          add(FailureKind::kProjection, "", 1, -1,
              fmt::format("<dC, J u> = {:.10g} by central differences of the fp64 forward, {:.10g} from the kernel's "
                          "dA and dB - prefill; |diff| {:.3g} > tolerance {:.3g}",
                          fd_val, kern, std::fabs(kern - fd_val), tol));
      }
    }
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

}  // namespace assay
