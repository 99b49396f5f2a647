// Compiled with -fmad=false (CMakeLists.txt): the products and sums round as the host's.
#include "references/device/rope_f64.h"

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 256;

__device__ double unbounded_if_nan(double t) {
  return isnan(t) ? HUGE_VAL : t;
}

// references/host/backward.h rotary_tables and rotary_apply for pair i of row r, then
// properties/rope.cpp bound's ceiling of its two elements.
__global__ void __launch_bounds__(kThreads) rope_f64(RopeF64Problem p, InputRows x, double* ref, double* tol,
                                                     int64_t pairs) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= pairs) return;
  const int64_t half = p.d / 2, r = e / half, i = e % half, tok = r / p.heads;
  const int64_t ca = p.interleaved ? 2 * i : i, cb = p.interleaved ? 2 * i + 1 : i + half;
  const double theta = static_cast<double>(tok) * ::pow(p.base, -static_cast<double>(2 * i) / static_cast<double>(p.d));
  const double c = ::cos(theta), s = (p.inverse ? -1.0 : 1.0) * ::sin(theta);
  const double a = x.at(r * x.ld + ca), b = x.at(r * x.ld + cb);
  const int64_t la = r * p.d + ca, lb = r * p.d + cb;
  const double ya = a * c - b * s, yb = a * s + b * c;
  const double mag_a = ::fabs(a * c) + ::fabs(b * s), mag_b = ::fabs(a * s) + ::fabs(b * c);
  const RopeAngle g = rope_angle(tok, rope_freq(i, p.d, p.base, p.k), p.k.f32);
  double ta = 0, tb = 0, ra = ya, rb = yb;
  if (!isfinite(a) || !isfinite(b)) {
    // A coefficient of an infinite input within the angle and sincosf error of 0 leaves the
    // kernel's sign open: unchecked (the host bound's rule; at t = 0 nothing is open).
    const double slack = tok == 0 ? -1.0 : g.err + p.k.trig_rel + 1e-30;
    const double co = ::fabs(::cos(g.theta)), si = ::fabs(::sin(g.theta));
    const bool ia = isinf(a), ib = isinf(b);
    if ((ia && co <= slack) || (ib && si <= slack)) ra = 0, ta = HUGE_VAL;
    if ((ia && si <= slack) || (ib && co <= slack)) rb = 0, tb = HUGE_VAL;
  } else {
    const double norm = ::hypot(a, b), sabs = ::fabs(a) + ::fabs(b);
    const double ea = rope_rotation_err(mag_a, g.err, sabs, p.k) + g.err * norm;
    const double eb = rope_rotation_err(mag_b, g.err, sabs, p.k) + g.err * norm;
    ta = ea + p.store(::fabs(ya) + ea);
    tb = eb + p.store(::fabs(yb) + eb);
  }
  ref[la] = ra, ref[lb] = rb;
  tol[la] = unbounded_if_nan(ta), tol[lb] = unbounded_if_nan(tb);
}

}  // namespace

Status rope_f64_reference(const RopeF64Problem& p, InputRows x, double* ref, double* tol, cudaStream_t stream) {
  const int64_t pairs = p.tokens * p.heads * (p.d / 2);
  if (pairs <= 0) return ok_status();
  if ((pairs + kThreads - 1) / kThreads > 0x7fffffff)
    return invalid_argument("rope device reference: problem too large for one launch");
  rope_f64<<<static_cast<unsigned>((pairs + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p, x, ref, tol, pairs);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
