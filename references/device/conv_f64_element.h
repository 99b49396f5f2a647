// One output element of the conv2d forward device reference (conv_f64.cu), as an
// ASSAY_HD function: the kernel is a grid-stride loop over it, and a CPU test runs
// it over host buffers against the host reference and bound
// (tests/references/conv_device_ref_test.cpp). No CUDA header.
#pragma once

#include <cstdint>

#include "harness/bound_core.h"
#include "harness/host_device.h"
#include "references/device/f32_rows.h"
#include "references/host/conv.h"

namespace assay::device_ref {

/// Packed-layout offset -> the padded element, widened exactly to double.
struct PaddedAt {
  F32Rows t;
  ASSAY_HD double operator()(int64_t o) const { return static_cast<double>(t.data[o / t.cols * t.ld + o % t.cols]); }
};

/// An fp32 output: the store adds no rounding.
struct NoStoreRounding {
  ASSAY_HD double operator()(double) const { return 0.0; }
};

/// Output element e (its packed index in g's layout): the reference and its tolerance
/// dot_element_tol(b, ref, sum |x||w|, top, 0), a NaN tolerance as +Inf (as the engine's host
/// path has it).
ASSAY_HD inline void conv2d_fwd_f64_element(const ref::Conv2dGeometry& g, const ElementBound& b, double top, F32Rows x,
                                            F32Rows w, int64_t e, double& ref, double& tol) {
  const int64_t P = g.out_h(), Q = g.out_w(), K = g.k;
  int64_t in = 0, ik = 0, p = 0, q = 0;
  if (g.layout == ref::ConvLayout::kNCHW) {
    q = e % Q, p = e / Q % P, ik = e / (Q * P) % K, in = e / (Q * P * K);
  } else {
    ik = e % K, q = e / K % Q, p = e / (K * Q) % P, in = e / (K * Q * P);
  }
  double y = 0, mag = 0;
  ref::conv2d_forward_element<double>(g, PaddedAt{x}, PaddedAt{w}, in, ik, p, q, y, mag);
  const double t = dot_element_tol(b, y, mag, top, NoStoreRounding{});
  ref = y;
  tol = t != t ? HUGE_VAL : t;
}

}  // namespace assay::device_ref
