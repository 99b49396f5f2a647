// softmax / softmax_bwd: softmax and log-softmax over rows, forward and backward.
//
// Sections: declaration (params, tensors), references, bound, device reference, properties, vendor,
// binding.
// Binding: kernels/rowwise/softmax.cu (online single pass); the planted bugs of
// tests/mutants/rowwise/ bind through softmax_launch / softmax_bwd_launch.
// References: references/host/softmax.h (max first, then exp, sum, divide) and
// backward.h, in double; on the device from 1024 elements (references/device/softmax_f64.cu,
// the same steps and sums with the ceiling beside them; the backward's saved output prepared
// there too).
// Bounds: forward softmax_bounds / log_softmax_bounds (harness/bounds.h) under
// the variant's declared arithmetic (fast-math: __expf's error) with
// the kernel's declared rescale count: each thread scans at most ceil(n/32)
// elements (at least a warp per row), then at most 10 merges (1024 threads),
// so no term meets more than ceil(n/32) + 10 running-max rescalings.
// Backward, softmax: dx_i = y_i (dy_i - s), s = sum_j y_j dy_j in fp32; s errs
// by gamma_n sum_j y_j|dy_j| ([H] (3.5)), the products y_j dy_j by u each,
// dy_i - s by u, y_i (.) by u: |dx^ - dx| <= gamma_{n+3} y_i (|dy_i| + sum_j
// y_j |dy_j|) = gamma_{n+3} mag_i (backward.h's mag). Log-softmax: dx_i = dz_i -
// exp(z_i) S, S = sum dz_j (gamma_{n-1} sum |dz_j|), expf 2 ulp (+0.5: 5u),
// product and difference u each: gamma_{n+7} (|dz_i| + exp(z_i) sum |dz_j|).
// Both + half an ulp of the output dtype (fp16/bf16 stores) and, for
// underflow, (n + 2) min_normal(fp32). Inputs y and dy are exact (their dtype).
// Properties (case param "relation"):
// - "shift": every row shifted by a constant c (rounded into the dtype): the
//   output must not move beyond both tolerances and the change of the exact
//   result (zero when the shift is exact, as for small-integer rows);
// - "rowsum" (softmax forward): each finite row of y (fully masked rows excepted) sums to 1 within the
//   sum of its element tolerances plus the rounding of the host's sum.
// Value classes: mean-spread rows, masked rows (all -inf, "masked_every"),
// single +inf / NaN injections, very large logits (near-overflow), constant
// rows (small-int with range 0), lengths below a warp, around 32, 128, 1024 and
// not multiples of 4, row counts not multiples of the rows per block.
// Vendor column: cuDNN's softmax (CUDNN_SOFTMAX_ACCURATE, or CUDNN_SOFTMAX_LOG for
// params.log) forward and backward on the same inputs, rows with gaps packed first
// (cuDNN 9.14 writes the gaps of strided rows; references/library/cudnn.h). Its fully masked
// rows are 0 or NaN by row length (convention masked_rows_by_length, masked_row_is_nan), and its
// log-softmax forms the log-sum-exp first (log_softmax_lse_first, lse_first_extra).
#include "properties/softmax.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "properties/rowwise_values.h"
#include "properties/vendor_columns.h"
#include "references/device/softmax_f64.h"
#include "references/host/backward.h"
#include "references/host/softmax.h"

namespace assay::rowwise {
namespace {

constexpr int64_t kMaxRows = 4096, kMaxN = 16384, kMaxElems = 1 << 20;
constexpr const char* kMaskedZero = "masked_rows_zero";
constexpr const char* kMaskedByLength = "masked_rows_by_length";
constexpr const char* kLseFirst = "log_softmax_lse_first";

/// Under kMaskedByLength: the rows where a fully masked softmax (not log-softmax) gives
/// max-first's NaN rather than 0. cuDNN 9.14 on an H100, CUDNN_SOFTMAX_ACCURATE, every n of
/// 1..12, 16, 31..33, 64, 100, 128..260, 300..513, 600..1025, 2048, 3000, 4095, 4096 with fp32,
/// fp16 and bf16 and 1, 2, 4 or 33 rows: NaN exactly where n is a power of two or above 512 (its
/// kernel choice by row length); log-softmax gave -inf on every one.
bool masked_row_is_nan(int64_t n) {
  return n > 512 || (n > 0 && (n & (n - 1)) == 0);
}

// ---- declaration ------------------------------------------------------------------
std::vector<ParamDef> params(bool fwd) {
  std::vector<ParamDef> p = {
      ParamDef::dtype("dtype", activation_dtypes()),
      ParamDef::extent("n", 1, kMaxN).aim({4, 32, 128, 1024}),
      ParamDef::extent("rows", 1, kMaxRows).aim({4, 8, 32}).cap([](const Params& q) {
        return kMaxElems / std::max<int64_t>(q.i("n"), 1);
      }),
      ParamDef::flag("log")};
  if (fwd) p.push_back(ParamDef::integer("masked_every", 0, 5).optional(7).describe("rows r % k == 0 all -inf"));
  p.push_back(ParamDef::choice("relation", fwd ? std::vector<std::string>{"shift", "rowsum"}
                                               : std::vector<std::string>{"shift"})
                  .optional(fwd ? 6 : 7));
  p.push_back(ParamDef::real("shift", {64, -3.5, 1024, 0.25}).only_when([](const Params& q) {
    return q.s("relation") == "shift";
  }));
  return p;
}

// ---- references and bounds --------------------------------------------------------
SoftmaxModel model_of(DType dt, int64_t n, const Arithmetic& a) {
  SoftmaxModel m;
  m.in = dt;
  m.acc = DType::kF32;
  m.out = dt;
  m.n = n;
  m.fast_math = a.fast_math;
  m.rescales = std::min<int64_t>(std::max<int64_t>(n - 1, 0), (n + 31) / 32 + 10);
  return m;
}

// Rows r with r % masked_every == 0 become all -inf (attention-style masking).
void mask_rows(const Case& c, std::vector<unsigned char*>& img) {
  const int64_t every = Params(c.params).i("masked_every", 0);
  if (every <= 0) return;
  const auto& d = c.tensors[0].desc;
  const View2D v = view_of(d);
  for (int64_t r = 0; r < v.rows; r += every)
    for (int64_t j = 0; j < v.cols; ++j) poke(d.dtype, img[0], d.offset + r * v.ld + j, -INFINITY);
}

/// y (or log y) in ref; aux: [0] mag_i, [1] the row's weighted deviation D, [2] its log-sum-exp L,
/// [3] |max| of the row (0 where it is not finite).
Status reference_fwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  OutputRef y;
  y.ref.resize(static_cast<size_t>(rows * n));
  y.aux.assign(4, std::vector<double>(y.ref.size()));
  std::vector<ref::SoftmaxRowStats<double>> st(static_cast<size_t>(rows));
  if (Params(c.params).b("log"))
    ref::log_softmax_reference<double>(t[0].data, rows, n, t[0].v.ld, y.ref.data(), y.aux[0].data(), st.data());
  else
    ref::softmax_reference<double>(t[0].data, rows, n, t[0].v.ld, y.ref.data(), y.aux[0].data(), st.data());
  const Params p(c.params);
  const bool log = p.b("log");
  const bool masked_zero =
      p.convention(kMaskedZero) || (p.convention(kMaskedByLength) && (log || !masked_row_is_nan(n)));
  const double masked_value = log ? -INFINITY : 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    // A row of -inf only has no softmax (0/0: NaN, what max-first gives); under the
    // masked-attention convention its output is 0 (log-softmax: -inf), exactly.
    const bool masked = masked_zero && st[static_cast<size_t>(r)].max == -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      const size_t l = static_cast<size_t>(r * n + i);
      const auto& s = st[static_cast<size_t>(r)];
      y.aux[1][l] = std::isfinite(s.weighted_dev) ? s.weighted_dev : 0;
      y.aux[2][l] = std::isfinite(s.log_sum_exp) ? s.log_sum_exp : 0;
      y.aux[3][l] = std::isfinite(s.max) ? std::fabs(s.max) : 0;
      if (masked) y.ref[l] = masked_value, y.aux[0][l] = 0;
    }
  }
  out = {std::move(y)};
  return ok_status();
}

// Log-softmax with the row's log-sum-exp formed first (convention log_softmax_lse_first):
// y^ = fl(x_i - S), S = fl(max + L^), against the max-first order fl(fl(x_i - max) - L^). With
// y = t_i - L, t_i = x_i - max, |delta| <= u (fp32):
//   x_i - S = (t_i - L^) - delta1 (max + L^), so
//   y^ - y = (L - L^) - delta1 (max + L^) + delta2 (x_i - S),
// and the rounding u|max + L^| of S takes the place of the max-first order's u|t_i|. The row's
// ceiling (which carries |L - L^| and the final roundings) grows by u (1 + u) (|max| + log n + 1)
// (L^ <= L + its error <= log n + 1), carried through the store into a narrower output
// (1 + u_out). A row of large values and small outputs (mean 10^6, y ~ -7) errs by ~u|max| = 0.03
// here, far above the max-first ceiling: cuDNN's log-softmax does so on rows longer than 512.
double lse_first_extra(double max_abs, const SoftmaxModel& m) {
  return assay::lse_first_extra(max_abs, m.n, unit_roundoff(DType::kF32),
                                m.out == DType::kF32 ? 0.0 : unit_roundoff(m.out));
}

Status bound_fwd(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const SoftmaxModel m = model_of(p.dt("dtype"), t[0].v.cols, a);
  const bool log = p.b("log"), lse_first = p.convention(kLseFirst);
  OutputRef& y = out[0];
  y.tol.resize(y.ref.size());
  // The row's magnitudes are the same for each of its elements: its bound is computed once per
  // row (it was the host's largest cost per small case), from the same inputs, so the same bits.
  BoundPair b{};
  uint64_t dev_bits = 0, lse_bits = 0;
  bool have = false;
  for (size_t l = 0; l < y.ref.size(); ++l) {
    const uint64_t db = std::bit_cast<uint64_t>(y.aux[1][l]), lb = std::bit_cast<uint64_t>(y.aux[2][l]);
    if (!have || db != dev_bits || lb != lse_bits) {
      const SoftmaxRowMags rm{y.aux[1][l], y.aux[2][l]};
      b = log ? log_softmax_bounds(m, rm) : softmax_bounds(m, rm);
      dev_bits = db, lse_bits = lb, have = true;
    }
    y.tol[l] = b.ceiling.tol(std::fabs(y.ref[l]), std::isfinite(y.aux[0][l]) ? y.aux[0][l] : 0);
    if (a.narrow_intermediates && !log) y.tol[l] = narrow_softmax_tol(y.tol[l], std::fabs(y.ref[l]), m.out, m.n);
    if (log && lse_first) y.tol[l] += lse_first_extra(y.aux[3][l], m);
  }
  return ok_status();
}

// ---- device reference ------------------------------------------------------------------------------
// The forward takes the device path as every row-wise op does (rowwise_device_when), relations
// included: the engine reads the device reference's values and tolerances back for rowsum, and
// runs compute again on shift's transformed copy of the prepared snapshot.

/// The device path's inputs of the forward, or a clear error.
Status device_fits(const Case& c, const std::vector<DevTensor>& t) {
  const DType dt = Params(c.params).dt("dtype");
  if (!device_ref::input_rows_support(dt) || t.size() != 2 || t[0].dtype != dt)
    return invalid_argument("softmax: no device reference for this case (fp32, fp16 or bf16 X)");
  return ok_status();
}

/// prepare on the device: the fully masked rows in the snapshot.
Status device_prepare(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_fits(c, t));
  const Params p(c.params);
  const View2D& v = t[0].v;
  return device_ref::softmax_mask_rows(t[0].ptr, p.dt("dtype"), v.rows, v.cols, v.ld, p.i("masked_every", 0),
                                       ctx.stream);
}

/// y (or log y) and its ceiling: the tolerance itself in mag (DeviceOutput's defaults: a bound
/// computed outright, as the host path uploads it).
Status device_compute(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                      std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_fits(c, t));
  if (out.size() != 1) return invalid_argument("softmax: the device reference has one output");
  const Params p(c.params);
  const DType dt = p.dt("dtype");
  const View2D& v = t[0].v;
  const bool log = p.b("log");
  const SoftmaxModel m = model_of(dt, v.cols, a);
  device_ref::SoftmaxF64Problem q;
  q.rows = v.rows, q.n = v.cols, q.log = log;
  q.masked_zero = p.convention(kMaskedZero) || (p.convention(kMaskedByLength) && (log || !masked_row_is_nan(v.cols)));
  q.narrow = a.narrow_intermediates && !log && m.out != DType::kF32;
  q.narrow_uo = unit_roundoff(m.out), q.narrow_sub = min_subnormal(m.out);
  q.lse_first = log && p.convention(kLseFirst);
  q.lse_u = unit_roundoff(DType::kF32), q.lse_u_out = m.out == DType::kF32 ? 0.0 : unit_roundoff(m.out);
  q.soft = softmax_scalars(m);
  return device_ref::softmax_f64_reference(q, device_ref::input_rows(t[0].ptr, v.cols, v.ld, dt), out[0].ref,
                                           out[0].mag, ctx.stream);
}

void prepare_bwd(const Case& c, std::vector<unsigned char*>& img) {
  // Y = softmax(logits) (or log-softmax), rounded into the dtype: a realistic saved output.
  const auto& d = c.tensors[0].desc;
  const View2D v = view_of(d);
  std::vector<double> x(static_cast<size_t>(v.cols)), y(static_cast<size_t>(v.cols));
  for (int64_t r = 0; r < v.rows; ++r) {
    for (int64_t j = 0; j < v.cols; ++j) x[static_cast<size_t>(j)] = peek(d.dtype, img[0], d.offset + r * v.ld + j);
    if (Params(c.params).b("log"))
      ref::log_softmax_row<double>(x.data(), v.cols, y.data(), nullptr);
    else
      ref::softmax_row<double>(x.data(), v.cols, y.data(), nullptr);
    for (int64_t j = 0; j < v.cols; ++j) poke(d.dtype, img[0], d.offset + r * v.ld + j, y[static_cast<size_t>(j)]);
  }
}

/// dx in ref; aux[0]: the magnitude mag_i of backward.h.
Status reference_bwd(const Case& c, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const int64_t rows = t[0].v.rows, n = t[0].v.cols;
  // Y and dY each have their own row stride: the reference reads dense copies of both.
  std::vector<double> y(static_cast<size_t>(rows * n)), dy(y.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      y[static_cast<size_t>(r * n + j)] = t[0].at(r, j);
      dy[static_cast<size_t>(r * n + j)] = t[1].at(r, j);
    }
  OutputRef dx;
  dx.ref.resize(static_cast<size_t>(rows * n));
  dx.aux.assign(1, std::vector<double>(dx.ref.size()));
  if (Params(c.params).b("log"))
    ref::log_softmax_backward<double>(y.data(), dy.data(), rows, n, n, dx.ref.data(), dx.aux[0].data());
  else
    ref::softmax_backward<double>(y.data(), dy.data(), rows, n, n, dx.ref.data(), dx.aux[0].data());
  out = {std::move(dx)};
  return ok_status();
}

/// The backward ceiling's coefficients: e32 = g mag + fl (the header comment's derivation).
struct BwdCoeffs {
  double g = 0, fl = 0;
};
BwdCoeffs bwd_coeffs(int64_t n, bool log, bool fast_math) {
  const double u = unit_roundoff(DType::kF32);
  // Log-softmax's exp: expf 2 ulp (5u with the rounding), __expf 2 + floor(1.173|x|) ulp, |x| <= 88.
  const int64_t exp_terms = log ? (fast_math ? 4 + 2 * 104 : 4) : 0;
  return {gamma_n(n + 3 + exp_terms, u) * (1 + gamma_n(n + 4, 0x1p-53)),  // + the reference's own mag rounding
          static_cast<double>(n + 2) * min_normal(DType::kF32)};
}

Status bound_bwd(const Case& c, const Arithmetic& a, const std::vector<HostTensor>& t, std::vector<OutputRef>& out) {
  const Params p(c.params);
  const BwdCoeffs k = bwd_coeffs(t[0].v.cols, p.b("log"), a.fast_math);
  OutputRef& dx = out[0];
  dx.tol.resize(dx.ref.size());
  for (size_t l = 0; l < dx.ref.size(); ++l) {
    const double e32 = k.g * dx.aux[0][l] + k.fl;
    dx.tol[l] = e32 + store_rounding(std::fabs(dx.ref[l]) * (1 + 0x1p-9) + e32, p.dt("dtype"));
  }
  return ok_status();
}

// The backward takes the device path from the same threshold, relations included (shift
// transforms copies of the prepared snapshot, as on the host path).

/// device_prepare_bwd's scratch: two doubles per element of Y.
int64_t device_scratch_bwd(const Case& c) {
  const View2D v = view_of(c.tensors[0].desc);
  return 16 * v.rows * v.cols;
}

/// The device path's inputs of the backward, or a clear error.
Status device_bwd_fits(const Case& c, const std::vector<DevTensor>& t) {
  const DType dt = Params(c.params).dt("dtype");
  if (!device_ref::input_rows_support(dt) || t.size() != 3 || t[0].dtype != dt || t[1].dtype != dt)
    return invalid_argument("softmax_bwd: no device reference for this case (fp32, fp16 or bf16 Y and dY)");
  return ok_status();
}

/// prepare_bwd on the device: the drawn logits turned into the saved (log-)softmax rounded into
/// the dtype, in the snapshot every launch restores from, with the scratch as its workspace.
/// Once per draw: a second call would take the saved output for logits.
Status device_prepare_bwd(const Case& c, const std::vector<DevTensor>& t, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_bwd_fits(c, t));
  if (ctx.scratch == nullptr || ctx.scratch_bytes < device_scratch_bwd(c))
    return invalid_argument("softmax_bwd: device reference scratch missing or too small");
  const Params p(c.params);
  const View2D& yv = t[0].v;
  auto* scratch = reinterpret_cast<double*>(ctx.scratch);
  return device_ref::softmax_prepare_saved(p.b("log"), t[0].ptr, p.dt("dtype"), yv.rows, yv.cols, yv.ld, scratch,
                                           scratch + yv.rows * yv.cols, ctx.stream);
}

/// dx and its ceiling on the saved output device_prepare_bwd left.
Status device_compute_bwd(const Case& c, const Arithmetic& a, const std::vector<DevTensor>& t,
                          std::vector<DeviceOutput>& out, const DeviceContext& ctx) {
  ASSAY_RETURN_IF_ERROR(device_bwd_fits(c, t));
  if (out.size() != 1) return invalid_argument("softmax_bwd: the device reference has one output");
  const Params p(c.params);
  const DType dt = p.dt("dtype");
  const View2D &yv = t[0].v, &gv = t[1].v;
  const bool log = p.b("log");
  const BwdCoeffs k = bwd_coeffs(yv.cols, log, a.fast_math);
  device_ref::SoftmaxBwdF64Problem q;
  q.rows = yv.rows, q.n = yv.cols, q.log = log, q.g = k.g, q.fl = k.fl;
  q.store = store_rounding_for(dt);
  return device_ref::softmax_bwd_f64_reference(q, device_ref::input_rows(t[0].ptr, yv.cols, yv.ld, dt),
                                               device_ref::input_rows(t[1].ptr, gv.cols, gv.ld, dt), out[0].ref,
                                               out[0].mag, ctx.stream);
}

// ---- properties ---------------------------------------------------------------------
void rowsum(const Case& c, const std::vector<HostTensor>&, const std::vector<HostTensor>& out,
            const std::vector<OutputRef>& refs, std::vector<Failure>& f) {
  if (Params(c.params).s("relation") != "rowsum" || Params(c.params).b("log")) return;
  const HostTensor& y = out[0];
  int64_t bad = 0, first = -1;
  double worst = 0, worst_tol = 0;
  for (int64_t r = 0; r < y.v.rows; ++r) {
    double s = 0, tol = 0, sa = 0;
    bool finite = true, zero = true;
    for (int64_t j = 0; j < y.v.cols; ++j) {
      const size_t l = static_cast<size_t>(r * y.v.cols + j);
      finite = finite && std::isfinite(refs[0].ref[l]);
      zero = zero && refs[0].ref[l] == 0;
      s += y.at(r, j);
      sa += std::fabs(y.at(r, j));
      tol += refs[0].tol[l];
    }
    // A row whose reference is 0 throughout is a fully masked row under a masked-row convention
    // (a softmax row is 1 / sum > 0 at its maximum): it has no distribution to sum to 1.
    if (!finite || zero || y.v.cols == 0) continue;
    tol += gamma_n(y.v.cols, 0x1p-53) * sa + 1e-300;
    if (!(std::fabs(s - 1) <= tol) && bad++ == 0) first = r, worst = s, worst_tol = tol;
  }
  if (bad > 0)
    f.push_back({FailureKind::kProperty, "Y", bad, -1,
                 fmt::format("row {} of the softmax sums to {:.9g}, not 1 within {:.3g} (the row's tolerances)", first,
                             worst, worst_tol)});
}

/// The host references against long double on a few rows (the CLI's selfcheck).
Status self_check(std::string& report) {
  const int64_t n = 37;
  std::vector<double> x(n), y(n);
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = std::sin(0.7 * static_cast<double>(j)) * 30;
  ref::softmax_row<double>(x.data(), n, y.data(), nullptr);
  long double mx = -INFINITY, z = 0;
  for (double v : x) mx = std::max<long double>(mx, v);
  for (double v : x) z += std::exp(static_cast<long double>(v) - mx);
  double worst = 0;
  for (int64_t j = 0; j < n; ++j) {
    const long double e = std::exp(static_cast<long double>(x[static_cast<size_t>(j)]) - mx) / z;
    worst = std::max(worst, static_cast<double>(std::fabs((y[static_cast<size_t>(j)] - e) / e)));
  }
  if (!(worst < 1e-13)) return internal_error(fmt::format("softmax: host reference off by {:.3g} (relative)", worst));
  report += fmt::format("softmax: host reference within {:.2g} of a long-double evaluation (37 elements)\n", worst);
  return ok_status();
}

// ---- vendor ---------------------------------------------------------------------------

/// cuDNN softmax on the case's tensors: X -> Y (forward) or Y, dY -> dX (backward), rows with
/// gaps packed into staging buffers (one layout per call: cuDNN takes a packed [rows, n]).
Status cudnn_softmax(bool fwd, const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
  namespace vc = vendor_columns;
  ASSAY_ASSIGN_OR_RETURN(vendor::CudnnHandle * h, vc::cudnn_handle(s));
  vendor::CudnnSoftmax sm;
  sm.rows = t[0].v.rows;
  sm.n = t[0].v.cols;
  sm.dtype = t[0].dtype;
  sm.algo = p.b("log") ? vendor::SoftmaxAlgo::kLog : vendor::SoftmaxAlgo::kAccurate;
  if (sm.rows == 0 || sm.n == 0) return ok_status();
  const DevTensor& out = t[fwd ? 1 : 2];
  ASSAY_ASSIGN_OR_RETURN(const void* a, vc::packed_input(t[0], 0, s));
  ASSAY_ASSIGN_OR_RETURN(void* o, vc::packed_output(out, 2, s));
  if (fwd) {
    ASSAY_RETURN_IF_ERROR(vendor::cudnn_softmax_forward(*h, sm, 1.0f, a, 0.0f, o));
  } else {
    ASSAY_ASSIGN_OR_RETURN(const void* b, vc::packed_input(t[1], 1, s));
    ASSAY_RETURN_IF_ERROR(vendor::cudnn_softmax_backward(*h, sm, 1.0f, a, b, 0.0f, o));
  }
  return vc::finish_output(o, out, s);
}

OpDef make(bool fwd) {
  OpDef op;
  op.name = fwd ? "softmax" : "softmax_bwd";
  op.description = fwd ? "softmax / log-softmax over rows (params.log), fp32/fp16/bf16 with fp32 statistics"
                       : "backward of softmax / log-softmax from the saved output (params.log)";
  op.params = params(fwd);
  if (fwd) {
    op.tensors = {{.name = "X", .dims = {"rows", "n"}, .values = {.specials = kSpecialAll}},
                  {.name = "Y", .role = Role::kOut, .dims = {"rows", "n"}}};
    op.prepare = mask_rows;
    op.reference = reference_fwd;
    op.bound = bound_fwd;
    op.bound_name = "softmax ceiling";
    op.device_reference = {.when = rowwise_device_when, .prepare = device_prepare, .compute = device_compute};
    op.properties = rowsum;
    op.transform = [](const Case& c, std::vector<unsigned char*>& img) {
      if (Params(c.params).s("relation") != "shift") return false;
      shift_tensor(c, img, 0);
      return true;
    };
    op.self_check = self_check;
    op.backward = "softmax_bwd";
    op.conventions = {{kMaskedZero, "a row of -inf only gives 0 (log-softmax: -inf), the masked-attention "
                                     "convention, instead of max-first's NaN"},
                      {kMaskedByLength, "a row of -inf only gives 0 (log-softmax: -inf), except softmax rows whose "
                                        "length is a power of two or above 512: NaN there (cuDNN's kernel choice)"},
                      {kLseFirst, "log-softmax as x - (max + log sum exp(x - max)): the row's log-sum-exp formed "
                                  "first, one more rounding of a sum as large as |max|"}};
    // cuDNN documents no exp: fast-math is allowed; its fp16/bf16 path rounds the exponentials
    // (narrow_softmax_tol); its fully masked rows follow its kernel choice (masked_row_is_nan).
    op.vendor = {.name = "cudnn-softmax",
                 .run = [](const Params& p, const std::vector<DevTensor>& t, cudaStream_t st) {
                   return cudnn_softmax(true, p, t, st);
                 },
                 .contract = Contract()
                                 .fast_math()
                                 .narrow_intermediates()
                                 .convention(kMaskedByLength)
                                 .convention(kLseFirst)};
  } else {
    // Y's recipe gives logits; prepare turns them into a (log-)softmax output in the dtype.
    op.tensors = {{.name = "Y", .dims = {"rows", "n"}},
                  {.name = "dY",
                   .dims = {"rows", "n"},
                   .values = {.classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                          ValueClass::kSmallInt, ValueClass::kLogUniform, ValueClass::kMeanSpread}}},
                  {.name = "dX", .role = Role::kOut, .dims = {"rows", "n"}}};
    op.prepare = prepare_bwd;
    op.reference = reference_bwd;
    op.bound = bound_bwd;
    op.bound_name = "softmax-backward ceiling";
    op.device_reference = {.when = rowwise_device_when,
                           .scratch = device_scratch_bwd,
                           .prepare = device_prepare_bwd,
                           .compute = device_compute_bwd};
    op.transform = [](const Case& c, std::vector<unsigned char*>& img) {
      // dx is invariant to adding a constant to dy for softmax (sum y = 1), not for log-softmax.
      if (Params(c.params).s("relation") != "shift" || Params(c.params).b("log")) return false;
      shift_tensor(c, img, 1);
      return true;
    };
    op.vendor = {.name = "cudnn-softmax",
                 .run = [](const Params& p, const std::vector<DevTensor>& t, cudaStream_t st) {
                   return cudnn_softmax(false, p, t, st);
                 },
                 .contract = Contract().fast_math()};
  }
  return op;
}

// ---- binding ------------------------------------------------------------------------
ASSAY_REGISTER(register_op(make(true)));
ASSAY_REGISTER(register_op(make(false)));
ASSAY_REGISTER(add_variant("softmax", {.name = "online",
                                       .description = "online single pass: running max and sum, one warp or block per row",
                                       .launch = softmax_launch(kernels::rowwise::softmax_fwd),
                                       .source = "kernels/rowwise/softmax.cu"}));
ASSAY_REGISTER(add_variant("softmax_bwd", {.name = "rowwise",
                                           .description = "dx = y (dy - sum y dy), one warp or block per row",
                                           .launch = softmax_bwd_launch(kernels::rowwise::softmax_bwd),
                                           .source = "kernels/rowwise/softmax.cu"}));

}  // namespace
}  // namespace assay::rowwise
