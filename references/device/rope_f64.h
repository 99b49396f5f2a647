// rope's fp64 reference and ceiling (properties/rope.cpp, whose header derives the bound), one
// element pair at a time: the angle terms and the rotation's error as __host__ __device__ code
// that the host bound and the device reference both run, and the device reference itself (a
// thread per rotated pair). The device's pow, cos, sin and hypot are CUDA's fp64 functions,
// within 2 ulps where glibc's are within 1: the references agree to a few fp64 ulps of the
// angle, which the position multiplies (tests/references/rope_device_ref_gpu_test.cpp measures
// it). The bound grants its reference what CUDA's functions may err by: 2 ulps in each pow (the
// angle's terms, rope_freq and rope_angle), and for cos, sin and the products a few fp64 ulps of
// the magnitude, far inside the (1 + 2^-20) slack of the sincosf term (rope_rotation_err).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "harness/bound_core.h"
#include "harness/host_device.h"
#include "harness/status.h"
#include "harness/ulp_core.h"
#include "references/device/input_rows.h"

namespace assay::device_ref {

/// The accuracy table's figures the bound takes, looked up on the host.
struct RopeConsts {
  double pow_ulps = 0;  ///< powf, ulps against the correctly rounded result
  double trig_rel = 0;  ///< sincosf, relative to |cos|, |sin|
  FloatFormat f32;
};

inline constexpr double kRopeU32 = 0x1p-24, kRopeU64 = 0x1p-53;

/// ulp of fp32 at |x|, taken at the larger neighbouring binade (x may round up to a power of two).
ASSAY_HD inline double rope_ulp32(double x, const FloatFormat& f32) {
  return ulp_in(::fabs(x) * (1 + 0x1p-20), f32);
}

/// The position-free part of pair i's angle.
struct RopeFreq {
  bool zero = false;  ///< i == 0: pow(x, -0) = 1 exactly (C F.10.4.4, which CUDA's powf follows)
  double p = 0;       ///< base^(-2i/d), double
  double dp = 0;      ///< bound on |powf^ - p|
  double ulp_p = 0;   ///< ulp of the fp32 power
};

ASSAY_HD inline RopeFreq rope_freq(int64_t i, int64_t d, double base, const RopeConsts& k) {
  RopeFreq f;
  if (i == 0) {
    f.zero = true;
    return f;
  }
  const float ef = -static_cast<float>(2 * i) / static_cast<float>(d);  // the kernel's exponent, rounded once
  f.p = ::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  const double ps = ::pow(base, static_cast<double>(ef));
  f.ulp_p = rope_ulp32(ps, k.f32);
  // |powf^ - p|: both fp64 pows within 2 ulps (CUDA's; glibc's within 1), the difference exact.
  f.dp = ::fabs(ps - f.p) + 8 * kRopeU64 * f.p + (k.pow_ulps + 0.5) * f.ulp_p;
  return f;
}

/// Pair i's angle at position t and the bound on the kernel's error in it.
struct RopeAngle {
  double theta = 0;  ///< t base^(-2i/d), double
  double err = 0;    ///< bound on |theta^ - theta|, theta^ the kernel's fp32 angle
};

ASSAY_HD inline RopeAngle rope_angle(int64_t t, const RopeFreq& f, const FloatFormat& f32) {
  RopeAngle a;
  const double tt = static_cast<double>(t);
  if (f.zero) {  // theta = t, exact in fp32
    a.theta = tt;
    return a;
  }
  a.theta = tt * f.p;
  // + the reference's own theta = t p: p within 2 ulps, the product half of one.
  a.err = tt * f.dp + 0.5 * rope_ulp32(tt * (f.p + f.dp), f32) + 6 * kRopeU64 * a.theta;
  return a;
}

/// Error of one output element without the angle term: sincosf, two products and the sum on
/// Ms = |a cos theta^| + |b sin theta^| <= mag + dtheta S, plus the underflow floor.
ASSAY_HD inline double rope_rotation_err(double mag, double dtheta, double s_abs, const RopeConsts& k) {
  const double c = k.trig_rel;
  return (c + gamma_n(2, kRopeU32) * (1 + c)) * (mag + dtheta * s_abs) * (1 + gamma_n(4, kRopeU64)) +
         4 * k.f32.min_normal;
}

/// One case: rows = tokens * heads of d elements (row r at position r / heads).
struct RopeF64Problem {
  int64_t tokens = 0, heads = 0, d = 0;
  double base = 0;
  bool interleaved = false, inverse = false;
  RopeConsts k;
  StoreRounding store;  ///< Y's store into its dtype
};

/// y (dense rows x d) and its tolerance (NaN as +Inf) from x. Asynchronous on `stream`.
Status rope_f64_reference(const RopeF64Problem& p, InputRows x, double* ref, double* tol, cudaStream_t stream);

}  // namespace assay::device_ref
