// One output element of the convolution device references (conv_f64.cu), as an
// ASSAY_HD function: the kernel is a grid-stride loop over it, and a CPU test runs
// it over host buffers against the host reference and bound
// (tests/references/conv_device_ref_test.cpp). Inputs fp32, fp16 or bf16 (read
// widened, exactly); the tolerance adds the output dtype's store rounding through
// harness/ulp_core.h, as the host bound does. No CUDA header.
#pragma once

#include <cstdint>

#include "harness/bound_core.h"
#include "harness/host_device.h"
#include "harness/ulp_core.h"
#include "references/device/input_rows.h"
#include "references/host/conv.h"

namespace assay::device_ref {

/// Packed-layout offset -> the padded element, widened exactly to double. (A 32-bit division
/// where the offset allows it: 64-bit integer division is slow on a GPU.)
struct PaddedAt {
  InputRows t;
  ASSAY_HD double operator()(int64_t o) const {
    if (t.ld == t.cols) return t.at(o);
    const int64_t r = o >= 0 && o <= 0x7fffffff && t.cols <= 0x7fffffff
                          ? static_cast<int64_t>(static_cast<uint32_t>(o) / static_cast<uint32_t>(t.cols))
                          : o / t.cols;
    return t.at(r * t.ld + (o - r * t.cols));
  }
};

/// Which convolution: the forward y = conv(x, w) or one of its adjoints.
enum class ConvF64Pass : uint8_t { kFwd, kBwdData, kBwdFilter };

/// Output element e of `pass` (its packed index in g's layout: y, dx or dw) from the pass's two
/// inputs (fwd: x, w; bwd-data: dy, w; bwd-filter: x, dy): the reference and its tolerance
/// dot_element_tol(b, ref, sum of |terms|, top, store), a NaN tolerance as +Inf (as the engine's
/// host path has it). `store`: the output dtype's store rounding (none for fp32).
ASSAY_HD inline void conv2d_f64_element(ConvF64Pass pass, const ref::Conv2dGeometry& g, const ElementBound& b,
                                        double top, const StoreRounding& store, InputRows in0, InputRows in1, int64_t e,
                                        double& ref, double& tol) {
  const bool nchw = g.layout == ref::ConvLayout::kNCHW;
  double y = 0, mag = 0;
  if (pass == ConvF64Pass::kFwd) {  // y [n, k, P, Q] or [n, P, Q, k]
    const int64_t P = g.out_h(), Q = g.out_w(), K = g.k;
    const int64_t q = nchw ? e % Q : e / K % Q, p = nchw ? e / Q % P : e / (K * Q) % P,
                  ik = nchw ? e / (Q * P) % K : e % K, in = nchw ? e / (Q * P * K) : e / (K * Q * P);
    ref::conv2d_forward_element<double>(g, PaddedAt{in0}, PaddedAt{in1}, in, ik, p, q, y, mag);
  } else if (pass == ConvF64Pass::kBwdData) {  // dx [n, c, h, w] or [n, h, w, c]
    const int64_t H = g.h, W = g.w, C = g.c;
    const int64_t j = nchw ? e % W : e / C % W, i = nchw ? e / W % H : e / (C * W) % H,
                  ci = nchw ? e / (W * H) % C : e % C, in = nchw ? e / (W * H * C) : e / (C * W * H);
    ref::conv2d_backward_data_element<double>(g, PaddedAt{in0}, PaddedAt{in1}, in, ci, i, j, y, mag);
  } else {  // dw [k, cg, r, s] or [k, r, s, cg]
    const int64_t R = g.r, S = g.s, Cg = g.cg();
    const int64_t is = nchw ? e % S : e / Cg % S, ir = nchw ? e / S % R : e / (Cg * S) % R,
                  ic = nchw ? e / (S * R) % Cg : e % Cg, ik = nchw ? e / (S * R * Cg) : e / (Cg * S * R);
    ref::conv2d_backward_filter_element<double>(g, PaddedAt{in0}, PaddedAt{in1}, ik, ic, ir, is, y, mag);
  }
  const double t = dot_element_tol(b, y, mag, top, store);
  ref = y;
  tol = t != t ? HUGE_VAL : t;
}

/// Elements of `pass`'s output.
ASSAY_HD inline int64_t conv2d_f64_elements(ConvF64Pass pass, const ref::Conv2dGeometry& g) {
  return pass == ConvF64Pass::kFwd ? g.y_elems() : pass == ConvF64Pass::kBwdData ? g.x_elems() : g.w_elems();
}

}  // namespace assay::device_ref
