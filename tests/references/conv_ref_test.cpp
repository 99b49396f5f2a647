// Host 2-D convolution references (references/host/conv.h) against
//   - hand-computed small cases (one channel, padding, stride, a kernel larger than the input);
//   - a naive scatter loop written independently here: one loop nest over every (n, k, p, q, c,
//     r, s) term that adds x*w into y, dy*w into dx and dy*x into dw, on small-integer data,
//     where every sum is exact in double, so the gather-form references must agree bit for bit;
//   - the adjoint identity <conv(x,w), dy> = <x, bwd_data(dy,w)> = <w, bwd_filter(x,dy)> on
//     random normal data, within the rounding of the three orders of summation;
//   - the gradient-check engine (finite differences of the fp64 forward);
// plus NCHW = NHWC up to the layout, thread-count independence and mag = conv(|x|, |w|).
#include "references/host/conv.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "harness/bounds.h"
#include "harness/gradcheck.h"

namespace assay {
namespace {

using ref::Conv2dGeometry;
using ref::ConvLayout;

Conv2dGeometry geom(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t pad = 0,
                    int64_t stride = 1, int64_t dil = 1, int64_t groups = 1, ConvLayout layout = ConvLayout::kNCHW) {
  Conv2dGeometry g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
  g.pad_h = g.pad_w = pad;
  g.stride_h = g.stride_w = stride;
  g.dil_h = g.dil_w = dil;
  g.groups = groups;
  g.layout = layout;
  return g;
}

std::string describe(const Conv2dGeometry& g) {
  return fmt::format("N{} C{} H{} W{} K{} R{} S{} pad{}x{} stride{}x{} dil{}x{} g{} {}", g.n, g.c, g.h, g.w, g.k, g.r,
                     g.s, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w, g.groups,
                     g.layout == ConvLayout::kNCHW ? "NCHW" : "NHWC");
}

/// The shapes every check runs on: 1x1, a kernel larger than the input with padding, odd
/// sizes, stride 2, dilation 2, grouped, depthwise, rectangular pads/strides, NHWC of several.
std::vector<Conv2dGeometry> shapes() {
  std::vector<Conv2dGeometry> v = {
      geom(2, 3, 4, 5, 4, 1, 1),              // 1x1
      geom(1, 2, 2, 3, 3, 5, 5, 2),           // kernel larger than the input, padded
      geom(2, 3, 7, 5, 5, 3, 3, 1),           // odd sizes
      geom(1, 4, 9, 8, 6, 3, 3, 1, 2),        // stride 2
      geom(2, 2, 9, 7, 3, 3, 3, 2, 1, 2),     // dilation 2
      geom(1, 4, 6, 6, 6, 3, 3, 1, 1, 1, 2),  // 2 groups
      geom(2, 5, 6, 7, 5, 3, 3, 1, 1, 1, 5),  // depthwise
      geom(1, 3, 8, 9, 4, 3, 2, 1, 3, 2),     // stride 3 with dilation 2
  };
  Conv2dGeometry rect = geom(2, 3, 7, 6, 2, 2, 3);
  rect.pad_h = 0, rect.pad_w = 2, rect.stride_h = 2, rect.stride_w = 1, rect.dil_h = 1, rect.dil_w = 2;
  v.push_back(rect);
  const size_t base = v.size();
  for (size_t i = 0; i < base; ++i) {
    Conv2dGeometry g = v[i];
    g.layout = ConvLayout::kNHWC;
    v.push_back(g);
  }
  return v;
}

std::vector<double> small_ints(int64_t count, uint64_t seed, int range) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-range, range);
  std::vector<double> v(static_cast<size_t>(count));
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<double> normals(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(static_cast<size_t>(count));
  for (auto& x : v) x = d(rng);
  return v;
}

/// The independent check: scatter every term of the convolution sum into y, dx and dw, with the
/// 4-D offsets written out here rather than taken from Conv2dGeometry.
struct Naive {
  std::vector<double> y, dx, dw;
};

Naive naive(const Conv2dGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
            const std::vector<double>& dy) {
  const int64_t N = g.n, C = g.c, H = g.h, W = g.w, K = g.k, R = g.r, S = g.s, G = g.groups;
  const int64_t Cg = C / G, Kg = K / G;
  const int64_t P = (H + 2 * g.pad_h - g.dil_h * (R - 1) - 1) / g.stride_h + 1;
  const int64_t Q = (W + 2 * g.pad_w - g.dil_w * (S - 1) - 1) / g.stride_w + 1;
  const bool nchw = g.layout == ConvLayout::kNCHW;
  auto xi = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    return nchw ? n * C * H * W + c * H * W + h * W + w : n * H * W * C + h * W * C + w * C + c;
  };
  auto wi = [&](int64_t k, int64_t c, int64_t r, int64_t s) {
    return nchw ? k * Cg * R * S + c * R * S + r * S + s : k * R * S * Cg + r * S * Cg + s * Cg + c;
  };
  auto yi = [&](int64_t n, int64_t k, int64_t p, int64_t q) {
    return nchw ? n * K * P * Q + k * P * Q + p * Q + q : n * P * Q * K + p * Q * K + q * K + k;
  };
  Naive out;
  out.y.assign(static_cast<size_t>(N * K * P * Q), 0.0);
  out.dx.assign(x.size(), 0.0);
  out.dw.assign(w.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = p * g.stride_h + r * g.dil_h - g.pad_h;
                const int64_t ww = q * g.stride_w + s * g.dil_w - g.pad_w;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;  // a padding zero
                const int64_t ci = (k / Kg) * Cg + c;
                out.y[yi(n, k, p, q)] += x[xi(n, ci, h, ww)] * w[wi(k, c, r, s)];
                out.dx[xi(n, ci, h, ww)] += dy[yi(n, k, p, q)] * w[wi(k, c, r, s)];
                out.dw[wi(k, c, r, s)] += dy[yi(n, k, p, q)] * x[xi(n, ci, h, ww)];
              }
  return out;
}

struct Refs {
  std::vector<double> y, y_mag, dx, dx_mag, dw, dw_mag;
};

Refs run_refs(const Conv2dGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
              const std::vector<double>& dy, int threads = 1) {
  Refs r;
  r.y.resize(static_cast<size_t>(g.y_elems()));
  r.y_mag.resize(r.y.size());
  r.dx.resize(static_cast<size_t>(g.x_elems()));
  r.dx_mag.resize(r.dx.size());
  r.dw.resize(static_cast<size_t>(g.w_elems()));
  r.dw_mag.resize(r.dw.size());
  ref::conv2d_forward<double>(g, x.data(), w.data(), r.y.data(), r.y_mag.data(), threads);
  ref::conv2d_backward_data<double>(g, dy.data(), w.data(), r.dx.data(), r.dx_mag.data(), threads);
  ref::conv2d_backward_filter<double>(g, x.data(), dy.data(), r.dw.data(), r.dw_mag.data(), threads);
  return r;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(ConvReference, GeometryFollowsPyTorchsOutputSize) {
  // floor((H + 2p - d(R-1) - 1)/s) + 1, as torch.nn.Conv2d documents.
  EXPECT_EQ(geom(1, 1, 5, 5, 1, 3, 3, 1, 2).out_h(), 3);
  EXPECT_EQ(geom(1, 1, 6, 6, 1, 3, 3, 0, 2).out_h(), 2);
  EXPECT_EQ(geom(1, 1, 9, 9, 1, 3, 3, 0, 1, 2).out_h(), 5);
  EXPECT_EQ(geom(1, 1, 2, 3, 1, 5, 5, 2).out_h(), 2);
  EXPECT_EQ(geom(1, 1, 2, 3, 1, 5, 5, 2).out_w(), 3);
  EXPECT_TRUE(geom(1, 1, 2, 3, 1, 5, 5, 2).valid());
  EXPECT_FALSE(geom(1, 1, 2, 3, 1, 5, 5, 1).valid());           // the filter does not fit the padded input
  EXPECT_FALSE(geom(1, 3, 4, 4, 4, 1, 1, 0, 1, 1, 2).valid());  // groups do not divide C
  EXPECT_FALSE(geom(1, 4, 4, 4, 3, 1, 1, 0, 1, 1, 2).valid());  // nor K
  const Conv2dGeometry g = geom(2, 6, 5, 7, 4, 3, 2, 1, 2, 1, 2);
  EXPECT_EQ(g.fwd_reduction(), 3 * 3 * 2);
  EXPECT_EQ(g.bwd_data_reduction(), 2 * 3 * 2);
  EXPECT_EQ(g.bwd_filter_reduction(), 2 * g.out_h() * g.out_w());
}

TEST(ConvReference, HandComputedCases) {
  // x = [[1,2,3],[4,5,6],[7,8,9]], w = [[1,0],[0,-1]]: y_pq = x_pq - x_{p+1,q+1}.
  {
    const Conv2dGeometry g = geom(1, 1, 3, 3, 1, 2, 2);
    const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 0, 0, -1};
    std::vector<double> y(4), mag(4);
    ref::conv2d_forward<double>(g, x.data(), w.data(), y.data(), mag.data());
    EXPECT_EQ(y, (std::vector<double>{-4, -4, -4, -4}));
    EXPECT_EQ(mag, (std::vector<double>{6, 8, 12, 14}));
  }
  // Padding 1, 3x3 all-ones filter over a 2x2 input: every output sums the whole input.
  {
    const Conv2dGeometry g = geom(1, 1, 2, 2, 1, 3, 3, 1);
    const std::vector<double> x = {1, 2, 3, 4}, w(9, 1.0);
    std::vector<double> y(4);
    ref::conv2d_forward<double>(g, x.data(), w.data(), y.data(), static_cast<double*>(nullptr));
    EXPECT_EQ(y, (std::vector<double>{10, 10, 10, 10}));
  }
  // Stride 2 on a 1x5 row with a 1x1 filter of 3: picks x_0, x_2, x_4; its backward-data puts
  // dy back at those columns and zeros elsewhere; backward-filter is sum dy_q x_{2q}.
  {
    Conv2dGeometry g = geom(1, 1, 1, 5, 1, 1, 1, 0, 2);
    const std::vector<double> x = {1, 2, 3, 4, 5}, w = {3}, dy = {1, 10, 100};
    std::vector<double> y(3), dx(5), dw(1);
    ref::conv2d_forward<double>(g, x.data(), w.data(), y.data(), static_cast<double*>(nullptr));
    ref::conv2d_backward_data<double>(g, dy.data(), w.data(), dx.data(), static_cast<double*>(nullptr));
    ref::conv2d_backward_filter<double>(g, x.data(), dy.data(), dw.data(), static_cast<double*>(nullptr));
    EXPECT_EQ(y, (std::vector<double>{3, 9, 15}));
    EXPECT_EQ(dx, (std::vector<double>{3, 0, 30, 0, 300}));
    EXPECT_EQ(dw, (std::vector<double>{1 + 30 + 500}));
  }
  // Depthwise, two channels with their own 1x2 filters: no mixing between channels.
  {
    const Conv2dGeometry g = geom(1, 2, 1, 3, 2, 1, 2, 0, 1, 1, 2);
    const std::vector<double> x = {1, 2, 3, 10, 20, 30}, w = {1, 1, 1, -1};
    std::vector<double> y(4);
    ref::conv2d_forward<double>(g, x.data(), w.data(), y.data(), static_cast<double*>(nullptr));
    EXPECT_EQ(y, (std::vector<double>{3, 5, -10, -10}));
  }
}

TEST(ConvReference, MatchesTheNaiveScatterLoopExactly) {
  for (const Conv2dGeometry& g : shapes()) {
    ASSERT_TRUE(g.valid()) << describe(g);
    const auto x = small_ints(g.x_elems(), 1, 4), w = small_ints(g.w_elems(), 2, 3), dy = small_ints(g.y_elems(), 3, 4);
    const Naive nv = naive(g, x, w, dy);
    const Refs r = run_refs(g, x, w, dy);
    EXPECT_EQ(r.y, nv.y) << "forward, " << describe(g);
    EXPECT_EQ(r.dx, nv.dx) << "backward-data, " << describe(g);
    EXPECT_EQ(r.dw, nv.dw) << "backward-filter, " << describe(g);
    // Integer data: the three inner products of the adjoint identity are exact.
    EXPECT_EQ(dot(r.y, dy), dot(x, r.dx)) << describe(g);
    EXPECT_EQ(dot(r.y, dy), dot(w, r.dw)) << describe(g);
  }
}

TEST(ConvReference, MagnitudeIsTheConvolutionOfAbsoluteValues) {
  for (const Conv2dGeometry& g : shapes()) {
    const auto x = normals(g.x_elems(), 4), w = normals(g.w_elems(), 5), dy = normals(g.y_elems(), 6);
    std::vector<double> ax(x), aw(w), ady(dy);
    for (auto* v : {&ax, &aw, &ady})
      for (double& e : *v) e = std::fabs(e);
    const Refs r = run_refs(g, x, w, dy);
    const Refs a = run_refs(g, ax, aw, ady);
    EXPECT_EQ(r.y_mag, a.y) << describe(g);
    EXPECT_EQ(r.dx_mag, a.dx) << describe(g);
    EXPECT_EQ(r.dw_mag, a.dw) << describe(g);
    for (size_t i = 0; i < r.y.size(); ++i) EXPECT_LE(std::fabs(r.y[i]), r.y_mag[i]) << describe(g);
  }
}

TEST(ConvReference, AdjointIdentityOnRandomData) {
  // <conv(x,w), dy>, <x, bwd_data(dy,w)> and <w, bwd_filter(x,dy)> add the same products
  // x*w*dy, one per (n,k,p,q,c,r,s) term, in three orders. Each is an inner product of a computed
  // dot product (error <= gamma_L u-terms, L <= the longest reduction) with a vector: the whole
  // errs by at most gamma_{L+M}(2^-53) sum|x||w||dy| ([H] (3.5) twice, Lemma 3.3), M the outer
  // length; sum|x||w||dy| = <mag_y, |dy|>.
  for (const Conv2dGeometry& g : shapes()) {
    for (uint64_t seed = 10; seed < 13; ++seed) {
      const auto x = normals(g.x_elems(), seed), w = normals(g.w_elems(), seed + 100),
                 dy = normals(g.y_elems(), seed + 200);
      const Refs r = run_refs(g, x, w, dy);
      double total = 0;
      for (size_t i = 0; i < dy.size(); ++i) total += r.y_mag[i] * std::fabs(dy[i]);
      const int64_t longest = std::max({g.fwd_reduction(), g.bwd_data_reduction(), g.bwd_filter_reduction()});
      const int64_t outer = std::max({g.y_elems(), g.x_elems(), g.w_elems()});
      const double tol = 2 * gamma_n(longest + outer, 0x1p-53) * total;
      const double a = dot(r.y, dy), b = dot(x, r.dx), c = dot(w, r.dw);
      EXPECT_LE(std::fabs(a - b), tol) << describe(g) << " seed " << seed;
      EXPECT_LE(std::fabs(a - c), tol) << describe(g) << " seed " << seed;
      // Not vacuous: the tolerance is tiny next to the sum of |terms|.
      EXPECT_LT(tol, 1e-10 * total);
    }
  }
}

TEST(ConvReference, LayoutsAgreeAndThreadsDoNotChangeBits) {
  for (const Conv2dGeometry& g : shapes()) {
    if (g.layout != ConvLayout::kNCHW) continue;
    Conv2dGeometry h = g;
    h.layout = ConvLayout::kNHWC;
    const auto x = normals(g.x_elems(), 7), w = normals(g.w_elems(), 8), dy = normals(g.y_elems(), 9);
    // The same tensors, written in the NHWC layout.
    std::vector<double> xh(x.size()), wh(w.size()), dyh(dy.size());
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t i = 0; i < g.h; ++i)
          for (int64_t j = 0; j < g.w; ++j) xh[h.x_at(n, c, i, j)] = x[g.x_at(n, c, i, j)];
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t c = 0; c < g.cg(); ++c)
        for (int64_t i = 0; i < g.r; ++i)
          for (int64_t j = 0; j < g.s; ++j) wh[h.w_at(k, c, i, j)] = w[g.w_at(k, c, i, j)];
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t k = 0; k < g.k; ++k)
        for (int64_t p = 0; p < g.out_h(); ++p)
          for (int64_t q = 0; q < g.out_w(); ++q) dyh[h.y_at(n, k, p, q)] = dy[g.y_at(n, k, p, q)];
    const Refs a = run_refs(g, x, w, dy, 1);
    const Refs b = run_refs(h, xh, wh, dyh, 3);  // NHWC, three threads: same terms, same order
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t k = 0; k < g.k; ++k)
        for (int64_t p = 0; p < g.out_h(); ++p)
          for (int64_t q = 0; q < g.out_w(); ++q)
            ASSERT_EQ(a.y[g.y_at(n, k, p, q)], b.y[h.y_at(n, k, p, q)]) << describe(g);
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t i = 0; i < g.h; ++i)
          for (int64_t j = 0; j < g.w; ++j)
            ASSERT_EQ(a.dx[g.x_at(n, c, i, j)], b.dx[h.x_at(n, c, i, j)]) << describe(g);
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t c = 0; c < g.cg(); ++c)
        for (int64_t i = 0; i < g.r; ++i)
          for (int64_t j = 0; j < g.s; ++j)
            ASSERT_EQ(a.dw[g.w_at(k, c, i, j)], b.dw[h.w_at(k, c, i, j)]) << describe(g);
    // Threads alone: bit-identical, on a shape big enough for parallel_rows to split.
    const Conv2dGeometry big = geom(4, 8, 20, 20, 16, 3, 3, 1, 1, 1, 2, g.layout);
    const auto bx = normals(big.x_elems(), 1), bw = normals(big.w_elems(), 2), bdy = normals(big.y_elems(), 3);
    const Refs one = run_refs(big, bx, bw, bdy, 1), four = run_refs(big, bx, bw, bdy, 4);
    EXPECT_EQ(one.y, four.y);
    EXPECT_EQ(one.dx, four.dx);
    EXPECT_EQ(one.dw, four.dw);
    EXPECT_EQ(one.y_mag, four.y_mag);
    break;  // one big shape is enough
  }
}

TEST(ConvReference, BackwardPassesPassTheGradientCheck) {
  // f(x, w) = conv(x, w); its vector-Jacobian product is (bwd_data(v, w), bwd_filter(x, v)).
  for (const Conv2dGeometry& g : shapes()) {
    const int64_t nx = g.x_elems(), nw = g.w_elems();
    Differentiable f;
    f.n = nx + nw;
    f.m = g.y_elems();
    f.forward = [g, nx](const double* in, double* y) {
      ref::conv2d_forward<double>(g, in, in + nx, y, static_cast<double*>(nullptr));
    };
    f.vjp = [g, nx](const double* in, const double* v, double* grad) {
      ref::conv2d_backward_data<double>(g, v, in + nx, grad, static_cast<double*>(nullptr));
      ref::conv2d_backward_filter<double>(g, in, v, grad + nx, static_cast<double*>(nullptr));
    };
    f.magnitude = [g, nx](const double* in, double* mag) {
      std::vector<double> y(static_cast<size_t>(g.y_elems()));
      ref::conv2d_forward<double>(g, in, in + nx, y.data(), mag);
    };
    std::vector<double> in = normals(nx, 21);
    const auto w = normals(nw, 22);
    in.insert(in.end(), w.begin(), w.end());
    GradCheckOptions o;
    o.seed = 5;
    const auto res = gradcheck_projections(f, in.data(), o);
    ASSERT_TRUE(res.ok()) << res.status().to_string() << " " << describe(g);
    EXPECT_TRUE(res->pass) << res->summary << " " << describe(g);
  }
}

TEST(ConvReference, AMisIndexedBackwardFailsTheChecks) {
  // The checks above can fail: a backward-data that reads the filter un-flipped (w[k,c,R-1-r,
  // S-1-s], a classic transposed-convolution slip) breaks the adjoint identity and the naive match.
  const Conv2dGeometry g = geom(1, 2, 5, 5, 3, 3, 3, 1);
  const auto x = small_ints(g.x_elems(), 31, 4), w = small_ints(g.w_elems(), 32, 3),
             dy = small_ints(g.y_elems(), 33, 4);
  std::vector<double> wf(w.size());
  for (int64_t k = 0; k < g.k; ++k)
    for (int64_t c = 0; c < g.cg(); ++c)
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s) wf[g.w_at(k, c, r, s)] = w[g.w_at(k, c, g.r - 1 - r, g.s - 1 - s)];
  const Refs good = run_refs(g, x, w, dy);
  std::vector<double> bad(static_cast<size_t>(g.x_elems()));
  ref::conv2d_backward_data<double>(g, dy.data(), wf.data(), bad.data(), static_cast<double*>(nullptr));
  EXPECT_NE(dot(good.y, dy), dot(x, bad));
  EXPECT_NE(bad, naive(g, x, w, dy).dx);
}

}  // namespace
}  // namespace assay
