// Device helpers shared by the convolution kernels (kernels/conv/conv.cu) and their planted
// bugs (tests/mutants/conv): storage loads and stores, the 2-D view offsets of each layout,
// and the implicit-GEMM operand gathers of the three passes.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/common/storage.cuh"
#include "kernels/conv/conv.h"

namespace assay::kernels::conv::detail {

using storage::load;
using storage::store;

/// Geometry and strides in the form the kernels use (32-bit sizes: every extent of a valid
/// case fits; offsets are 64-bit).
struct Geo {
  int n, c, h, w, k, r, s, ph, pw, sh, sw, dh, dw, groups, p, q, cg, kg;
  int64_t ldx, ldw, ldy;
};
Geo make_geo(const ConvArgs& a);

/// Offsets (elements) of x[n,c,i,j], w[k,c,r,s] (c within the group), y[n,k,p,q] in the views.
template <Layout L>
struct Off {
  __device__ __forceinline__ static int64_t x(const Geo& g, int n, int c, int i, int j) {
    return L == Layout::kNCHW ? ((int64_t(n) * g.c + c) * g.h + i) * g.ldx + j
                              : ((int64_t(n) * g.h + i) * g.w + j) * g.ldx + c;
  }
  __device__ __forceinline__ static int64_t w(const Geo& g, int k, int c, int r, int s) {
    return L == Layout::kNCHW ? ((int64_t(k) * g.cg + c) * g.r + r) * g.ldw + s
                              : ((int64_t(k) * g.r + r) * g.s + s) * g.ldw + c;
  }
  __device__ __forceinline__ static int64_t y(const Geo& g, int n, int k, int p, int q) {
    return L == Layout::kNCHW ? ((int64_t(n) * g.k + k) * g.p + p) * g.ldy + q
                              : ((int64_t(n) * g.p + p) * g.q + q) * g.ldy + k;
  }
};

// ---- implicit-GEMM problems: per group gz, C[m][n] = sum_kk A(m, kk) B(kk, n) -----------------
// a() and b() return 0 for taps in the padding or in a stride hole; the kernel guards the tile
// tails (m >= M, n >= Nc, kk >= Kr) itself.

/// Forward: m = (n, p, q), col = k in the group, kk = (r, s, c).
template <typename T, Layout L>
struct FwdProb {
  Geo g;
  const T* x;
  const T* w;
  T* y;
  __device__ int64_t rows() const { return int64_t(g.n) * g.p * g.q; }
  __device__ int cols() const { return g.kg; }
  __device__ int64_t red() const { return int64_t(g.r) * g.s * g.cg; }
  __device__ float a(int gz, int64_t m, int64_t kk) const {
    const int q = int(m % g.q), p = int(m / g.q % g.p), n = int(m / (int64_t(g.q) * g.p));
    const int c = int(kk % g.cg), rs = int(kk / g.cg), s = rs % g.s, r = rs / g.s;
    const int i = p * g.sh - g.ph + r * g.dh, j = q * g.sw - g.pw + s * g.dw;
    if (i < 0 || i >= g.h || j < 0 || j >= g.w) return 0.0f;
    return load(x + Off<L>::x(g, n, gz * g.cg + c, i, j));
  }
  __device__ float b(int gz, int64_t kk, int col) const {
    const int c = int(kk % g.cg), rs = int(kk / g.cg), s = rs % g.s, r = rs / g.s;
    return load(w + Off<L>::w(g, gz * g.kg + col, c, r, s));
  }
  __device__ void put(int gz, int64_t m, int col, float v) const {
    const int q = int(m % g.q), p = int(m / g.q % g.p), n = int(m / (int64_t(g.q) * g.p));
    store(y + Off<L>::y(g, n, gz * g.kg + col, p, q), v);
  }
};

/// Backward-data: m = (n, i, j), col = c in the group, kk = (r, s, k in the group).
template <typename T, Layout L>
struct BwdDataProb {
  Geo g;
  const T* dy;
  const T* w;
  T* dx;
  __device__ int64_t rows() const { return int64_t(g.n) * g.h * g.w; }
  __device__ int cols() const { return g.cg; }
  __device__ int64_t red() const { return int64_t(g.r) * g.s * g.kg; }
  __device__ float a(int gz, int64_t m, int64_t kk) const {
    const int j = int(m % g.w), i = int(m / g.w % g.h), n = int(m / (int64_t(g.w) * g.h));
    const int kq = int(kk % g.kg), rs = int(kk / g.kg), s = rs % g.s, r = rs / g.s;
    const int ph = i + g.ph - r * g.dh, qw = j + g.pw - s * g.dw;  // = p*sh, q*sw for a contributing tap
    if (ph < 0 || qw < 0 || ph % g.sh != 0 || qw % g.sw != 0) return 0.0f;
    const int p = ph / g.sh, q = qw / g.sw;
    if (p >= g.p || q >= g.q) return 0.0f;
    return load(dy + Off<L>::y(g, n, gz * g.kg + kq, p, q));
  }
  __device__ float b(int gz, int64_t kk, int col) const {
    const int kq = int(kk % g.kg), rs = int(kk / g.kg), s = rs % g.s, r = rs / g.s;
    return load(w + Off<L>::w(g, gz * g.kg + kq, col, r, s));
  }
  __device__ void put(int gz, int64_t m, int col, float v) const {
    const int j = int(m % g.w), i = int(m / g.w % g.h), n = int(m / (int64_t(g.w) * g.h));
    store(dx + Off<L>::x(g, n, gz * g.cg + col, i, j), v);
  }
};

/// Backward-filter: m = k in the group, col = (r, s, c), kk = (n, p, q).
template <typename T, Layout L>
struct BwdFilterProb {
  Geo g;
  const T* x;
  const T* dy;
  T* dw;
  __device__ int64_t rows() const { return g.kg; }
  __device__ int cols() const { return g.r * g.s * g.cg; }
  __device__ int64_t red() const { return int64_t(g.n) * g.p * g.q; }
  __device__ float a(int gz, int64_t m, int64_t kk) const {
    const int q = int(kk % g.q), p = int(kk / g.q % g.p), n = int(kk / (int64_t(g.q) * g.p));
    return load(dy + Off<L>::y(g, n, gz * g.kg + int(m), p, q));
  }
  __device__ float b(int gz, int64_t kk, int col) const {
    const int q = int(kk % g.q), p = int(kk / g.q % g.p), n = int(kk / (int64_t(g.q) * g.p));
    const int c = col % g.cg, rs = col / g.cg, s = rs % g.s, r = rs / g.s;
    const int i = p * g.sh - g.ph + r * g.dh, j = q * g.sw - g.pw + s * g.dw;
    if (i < 0 || i >= g.h || j < 0 || j >= g.w) return 0.0f;
    return load(x + Off<L>::x(g, n, gz * g.cg + c, i, j));
  }
  __device__ void put(int gz, int64_t m, int col, float v) const {
    const int c = col % g.cg, rs = col / g.cg, s = rs % g.s, r = rs / g.s;
    store(dw + Off<L>::w(g, gz * g.kg + int(m), c, r, s), v);
  }
};

inline constexpr int kBM = 32, kBN = 32, kBK = 16, kThreads = 256;

template <Layout L>
using LayoutTag = std::integral_constant<Layout, L>;

/// Calls f(T{}, LayoutTag<L>{}) for the args' dtype T and layout L (C++17: the CUDA standard
/// of the build).
template <typename F>
cudaError_t dispatch(const ConvArgs& a, F&& f) {
  auto by_layout = [&](auto tag) -> cudaError_t {
    return a.layout == Layout::kNCHW ? f(tag, LayoutTag<Layout::kNCHW>{}) : f(tag, LayoutTag<Layout::kNHWC>{});
  };
  switch (a.dt) {
    case Dt::kF16:
      return by_layout(__half{});
    case Dt::kBF16:
      return by_layout(__nv_bfloat16{});
    default:
      return by_layout(float{});
  }
}

}  // namespace assay::kernels::conv::detail
