// Host references for 2-D convolution: forward, backward-data and backward-filter, templated on
// the scalar S they compute in (double by default; long double and Boost.Multiprecision
// instantiate too). Direct loops, no im2col, no transforms: each output element is one dot
// product, and its magnitude (the sum of |a||b| over the terms it adds) comes back beside it for
// the dot-product bound of harness/bounds.h (|c^ - c| <= gamma_K(u) * mag, [H] (3.5)).
// Inputs are the kernel's own (already rounded) values, converted exactly to S. No CUDA headers.
//
// Convolution here is cross-correlation, as PyTorch's conv2d and cuDNN's
// CUDNN_CROSS_CORRELATION: with g = k / (K/groups) the group of output channel k and
// Cg = C/groups,
//   y[n,k,p,q]  = sum_{c<Cg, r<R, s<S} x[n, g*Cg + c, p*sh - ph + r*dh, q*sw - pw + s*dw] * w[k,c,r,s]
// (terms outside the input are padding zeros and are not summed). The backward passes are the
// adjoints of that linear map in x and in w:
//   dx[n,ci,i,j] = sum over (k in ci's group, r, s) with i = p*sh - ph + r*dh, j = q*sw - pw + s*dw
//                  for some output position (p, q):  dy[n,k,p,q] * w[k, ci - g*Cg, r, s]
//   dw[k,c,r,s]  = sum_{n,p,q} dy[n,k,p,q] * x[n, g*Cg + c, p*sh - ph + r*dh, q*sw - pw + s*dw]
//
// Layouts (packed): kNCHW: x, dx [N,C,H,W], y, dy [N,K,P,Q], w, dw [K,Cg,R,S];
//                   kNHWC: x, dx [N,H,W,C], y, dy [N,P,Q,K], w, dw [K,R,S,Cg]  (cuDNN's NHWC filter).
//   [H] N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/host_device.h"
#include "references/host/reductions.h"

namespace assay::ref {

/// Memory layout of the activations; the filter follows it (KCRS or KRSC).
enum class ConvLayout : uint8_t { kNCHW, kNHWC };

/// Geometry of one 2-D convolution; every size is in elements.
struct Conv2dGeometry {
  int64_t n = 1, c = 1, h = 1, w = 1;  ///< input x: batch, channels, height, width (>= 1)
  int64_t k = 1, r = 1, s = 1;         ///< filter: output channels, height, width (>= 1)
  int64_t pad_h = 0, pad_w = 0;        ///< zero padding on each side (>= 0)
  int64_t stride_h = 1, stride_w = 1;  ///< >= 1
  int64_t dil_h = 1, dil_w = 1;        ///< dilation, >= 1
  int64_t groups = 1;                  ///< divides c and k; groups == c == k is depthwise
  ConvLayout layout = ConvLayout::kNCHW;

  ASSAY_HD int64_t cg() const { return c / groups; }  ///< input channels per group (the filter's C)
  ASSAY_HD int64_t kg() const { return k / groups; }  ///< output channels per group
  /// Output height P = floor((H + 2ph - dh(R-1) - 1) / sh) + 1 (0 when the filter does not fit).
  ASSAY_HD int64_t out_h() const { return out_extent(h, pad_h, r, dil_h, stride_h); }
  ASSAY_HD int64_t out_w() const { return out_extent(w, pad_w, s, dil_w, stride_w); }

  /// True when every size is positive, padding non-negative, groups divide c and k, and the
  /// output is at least 1 x 1.
  ASSAY_HD bool valid() const {
    return n >= 1 && c >= 1 && h >= 1 && w >= 1 && k >= 1 && r >= 1 && s >= 1 && pad_h >= 0 && pad_w >= 0 &&
           stride_h >= 1 && stride_w >= 1 && dil_h >= 1 && dil_w >= 1 && groups >= 1 && c % groups == 0 &&
           k % groups == 0 && out_h() >= 1 && out_w() >= 1;
  }

  ASSAY_HD int64_t x_elems() const { return n * c * h * w; }
  ASSAY_HD int64_t w_elems() const { return k * cg() * r * s; }
  ASSAY_HD int64_t y_elems() const { return n * k * out_h() * out_w(); }

  /// Offset of x[n,c,i,j] (and dx) in the packed layout.
  ASSAY_HD int64_t x_at(int64_t in, int64_t ic, int64_t i, int64_t j) const {
    return layout == ConvLayout::kNCHW ? ((in * c + ic) * h + i) * w + j : ((in * h + i) * w + j) * c + ic;
  }
  /// Offset of w[k,c,r,s] (and dw), c in [0, cg()).
  ASSAY_HD int64_t w_at(int64_t ik, int64_t ic, int64_t ir, int64_t is) const {
    return layout == ConvLayout::kNCHW ? ((ik * cg() + ic) * r + ir) * s + is : ((ik * r + ir) * s + is) * cg() + ic;
  }
  /// Offset of y[n,k,p,q] (and dy).
  ASSAY_HD int64_t y_at(int64_t in, int64_t ik, int64_t p, int64_t q) const {
    const int64_t P = out_h(), Q = out_w();
    return layout == ConvLayout::kNCHW ? ((in * k + ik) * P + p) * Q + q : ((in * P + p) * Q + q) * k + ik;
  }

  /// Most terms in one dot product: forward Cg*R*S, backward-data Kg*R*S (an upper bound: with
  /// a stride only every stride-th filter tap meets an output), backward-filter N*P*Q.
  ASSAY_HD int64_t fwd_reduction() const { return cg() * r * s; }
  ASSAY_HD int64_t bwd_data_reduction() const { return kg() * r * s; }
  ASSAY_HD int64_t bwd_filter_reduction() const { return n * out_h() * out_w(); }

 private:
  ASSAY_HD static int64_t out_extent(int64_t in, int64_t pad, int64_t f, int64_t dil, int64_t stride) {
    const int64_t span = in + 2 * pad - dil * (f - 1) - 1;  // last valid start, 0-based
    if (span < 0 || stride < 1) return 0;
    return span / stride + 1;
  }
};

/// acc += t, acc_abs += |t| (|t| without std::abs, which device code lacks for a generic S).
template <typename S>
ASSAY_HD void add_term(const S& t, S& acc, S& acc_abs) {
  S a = t;
  if (a < 0) a = -a;
  acc += t;
  acc_abs += a;
}

/// One forward output y[in, ik, p, q] and its magnitude sum |x||w|, the terms added in the order
/// (c, r, s); x_at(offset) and w_at(offset) read the packed-layout element as S. The host loop
/// below and the device reference (references/device/conv_f64.cu) both call it.
template <typename S, typename XAt, typename WAt>
ASSAY_HD void conv2d_forward_element(const Conv2dGeometry& g, XAt x_at, WAt w_at, int64_t in, int64_t ik, int64_t p,
                                     int64_t q, S& y, S& mag) {
  const int64_t Cg = g.cg(), c0 = ik / g.kg() * Cg;
  S acc = 0, acc_abs = 0;
  for (int64_t ic = 0; ic < Cg; ++ic) {
    for (int64_t ir = 0; ir < g.r; ++ir) {
      const int64_t i = p * g.stride_h - g.pad_h + ir * g.dil_h;
      if (i < 0 || i >= g.h) continue;
      for (int64_t is = 0; is < g.s; ++is) {
        const int64_t j = q * g.stride_w - g.pad_w + is * g.dil_w;
        if (j < 0 || j >= g.w) continue;
        const S t = x_at(g.x_at(in, c0 + ic, i, j)) * w_at(g.w_at(ik, ic, ir, is));
        add_term(t, acc, acc_abs);
      }
    }
  }
  y = acc;
  mag = acc_abs;
}

/// Forward: y = conv(x, w) (y_elems() values in the layout), mag = sum |x||w| per output (may be
/// null). x: x_elems(), w: w_elems(). Work is split over (n, k) output planes across up to
/// `threads` std::threads; every element is computed by the same code whatever the split.
template <typename S, typename X, typename W>
void conv2d_forward(const Conv2dGeometry& g, const X* x, const W* w, S* y, S* mag, int threads = 1) {
  const int64_t P = g.out_h(), Q = g.out_w();
  const auto xa = [x](int64_t o) { return S(x[o]); };
  const auto wa = [w](int64_t o) { return S(w[o]); };
  detail::parallel_rows(g.n * g.k, P * Q * g.fwd_reduction(), threads, [&](int64_t b, int64_t e) {
    for (int64_t nk = b; nk < e; ++nk) {
      const int64_t in = nk / g.k, ik = nk % g.k;
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          S acc = 0, acc_abs = 0;
          conv2d_forward_element<S>(g, xa, wa, in, ik, p, q, acc, acc_abs);
          y[g.y_at(in, ik, p, q)] = acc;
          if (mag != nullptr) mag[g.y_at(in, ik, p, q)] = acc_abs;
        }
      }
    }
  });
}

/// One backward-data element dx[in, ci, i, j] and its magnitude sum |dy||w|, the terms added in
/// the order (k of ci's group, r, s) over the taps that meet an output position; dy_at and
/// w_at read the packed-layout element as S. The host loop below and the device reference
/// (references/device/conv_f64.cu) both call it.
template <typename S, typename DyAt, typename WAt>
ASSAY_HD void conv2d_backward_data_element(const Conv2dGeometry& g, DyAt dy_at, WAt w_at, int64_t in, int64_t ci,
                                           int64_t i, int64_t j, S& dx, S& mag) {
  const int64_t P = g.out_h(), Q = g.out_w(), Cg = g.cg(), Kg = g.kg();
  const int64_t grp = ci / Cg, ic = ci % Cg;
  S acc = 0, acc_abs = 0;
  for (int64_t kk = 0; kk < Kg; ++kk) {
    const int64_t ik = grp * Kg + kk;
    for (int64_t ir = 0; ir < g.r; ++ir) {
      const int64_t ph = i + g.pad_h - ir * g.dil_h;  // = p * stride_h for a contributing p
      if (ph < 0 || ph % g.stride_h != 0) continue;
      const int64_t p = ph / g.stride_h;
      if (p >= P) continue;
      for (int64_t is = 0; is < g.s; ++is) {
        const int64_t qw = j + g.pad_w - is * g.dil_w;
        if (qw < 0 || qw % g.stride_w != 0) continue;
        const int64_t q = qw / g.stride_w;
        if (q >= Q) continue;
        const S t = dy_at(g.y_at(in, ik, p, q)) * w_at(g.w_at(ik, ic, ir, is));
        add_term(t, acc, acc_abs);
      }
    }
  }
  dx = acc;
  mag = acc_abs;
}

/// Backward-data: dx = conv^T(dy, w) (x_elems() values), mag = sum |dy||w| per input element
/// (may be null). dy: y_elems(), w: w_elems(). Split over (n, c) input planes.
template <typename S, typename G, typename W>
void conv2d_backward_data(const Conv2dGeometry& g, const G* dy, const W* w, S* dx, S* mag, int threads = 1) {
  const auto ga = [dy](int64_t o) { return S(dy[o]); };
  const auto wa = [w](int64_t o) { return S(w[o]); };
  detail::parallel_rows(g.n * g.c, g.h * g.w * g.bwd_data_reduction(), threads, [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t in = nc / g.c, ci = nc % g.c;
      for (int64_t i = 0; i < g.h; ++i) {
        for (int64_t j = 0; j < g.w; ++j) {
          S acc = 0, acc_abs = 0;
          conv2d_backward_data_element<S>(g, ga, wa, in, ci, i, j, acc, acc_abs);
          dx[g.x_at(in, ci, i, j)] = acc;
          if (mag != nullptr) mag[g.x_at(in, ci, i, j)] = acc_abs;
        }
      }
    }
  });
}

/// One backward-filter element dw[ik, ic, ir, is] and its magnitude sum |dy||x|, the terms added
/// in the order (n, p, q) over the output positions whose tap lies inside the input; x_at and
/// dy_at read the packed-layout element as S. The host loop below and the device reference
/// (references/device/conv_f64.cu) both call it.
template <typename S, typename XAt, typename DyAt>
ASSAY_HD void conv2d_backward_filter_element(const Conv2dGeometry& g, XAt x_at, DyAt dy_at, int64_t ik, int64_t ic,
                                             int64_t ir, int64_t is, S& dw, S& mag) {
  const int64_t P = g.out_h(), Q = g.out_w(), c0 = ik / g.kg() * g.cg();
  S acc = 0, acc_abs = 0;
  for (int64_t in = 0; in < g.n; ++in) {
    for (int64_t p = 0; p < P; ++p) {
      const int64_t i = p * g.stride_h - g.pad_h + ir * g.dil_h;
      if (i < 0 || i >= g.h) continue;
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t j = q * g.stride_w - g.pad_w + is * g.dil_w;
        if (j < 0 || j >= g.w) continue;
        const S t = dy_at(g.y_at(in, ik, p, q)) * x_at(g.x_at(in, c0 + ic, i, j));
        add_term(t, acc, acc_abs);
      }
    }
  }
  dw = acc;
  mag = acc_abs;
}

/// Backward-filter: dw = sum over the batch and output positions of dy * x (w_elems() values),
/// mag = sum |dy||x| per filter element (may be null). x: x_elems(), dy: y_elems(). Split over
/// output channels k.
template <typename S, typename X, typename G>
void conv2d_backward_filter(const Conv2dGeometry& g, const X* x, const G* dy, S* dw, S* mag, int threads = 1) {
  const auto xa = [x](int64_t o) { return S(x[o]); };
  const auto ga = [dy](int64_t o) { return S(dy[o]); };
  detail::parallel_rows(g.k, g.cg() * g.r * g.s * g.bwd_filter_reduction(), threads, [&](int64_t b, int64_t e) {
    for (int64_t ik = b; ik < e; ++ik) {
      for (int64_t ic = 0; ic < g.cg(); ++ic) {
        for (int64_t ir = 0; ir < g.r; ++ir) {
          for (int64_t is = 0; is < g.s; ++is) {
            S acc = 0, acc_abs = 0;
            conv2d_backward_filter_element<S>(g, xa, ga, ik, ic, ir, is, acc, acc_abs);
            dw[g.w_at(ik, ic, ir, is)] = acc;
            if (mag != nullptr) mag[g.w_at(ik, ic, ir, is)] = acc_abs;
          }
        }
      }
    }
  });
}

}  // namespace assay::ref
