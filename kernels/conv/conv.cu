// Direct and implicit-GEMM 2-D convolution, forward, backward-data, backward-filter
// (kernels/conv/conv.h states the contract; references/host/conv.h the maths).
#include <algorithm>

#include "kernels/conv/common.cuh"
#include "kernels/conv/conv.h"

namespace assay::kernels::conv {

namespace {
int64_t out_extent(int64_t in, int64_t pad, int64_t f, int64_t dil, int64_t stride) {
  const int64_t span = in + 2 * pad - dil * (f - 1) - 1;  // last valid start, 0-based
  if (span < 0 || stride < 1) return 0;
  return span / stride + 1;
}
}  // namespace

int64_t conv_out_h(const ConvGeom& g) {
  return out_extent(g.h, g.pad_h, g.r, g.dil_h, g.stride_h);
}
int64_t conv_out_w(const ConvGeom& g) {
  return out_extent(g.w, g.pad_w, g.s, g.dil_w, g.stride_w);
}

bool conv_args_valid(const ConvArgs& a) {
  const ConvGeom& g = a.g;
  constexpr int64_t kMax = int64_t{1} << 20;  // every extent and product of extents below fits 32-bit indices
  const bool sizes = g.n >= 1 && g.c >= 1 && g.h >= 1 && g.w >= 1 && g.k >= 1 && g.r >= 1 && g.s >= 1 && g.pad_h >= 0 &&
                     g.pad_w >= 0 && g.stride_h >= 1 && g.stride_w >= 1 && g.dil_h >= 1 && g.dil_w >= 1 &&
                     g.groups >= 1 && g.n < kMax && g.c < kMax && g.h < kMax && g.w < kMax && g.k < kMax &&
                     g.r < kMax && g.s < kMax && g.pad_h < kMax && g.pad_w < kMax && g.stride_h < kMax &&
                     g.stride_w < kMax && g.dil_h < kMax && g.dil_w < kMax;
  if (!sizes || g.c % g.groups != 0 || g.k % g.groups != 0) return false;
  if (conv_out_h(g) < 1 || conv_out_w(g) < 1) return false;
  if (g.r * g.s * std::max(g.c, g.k) >= (int64_t{1} << 31)) return false;
  const bool nchw = a.layout == Layout::kNCHW;
  return a.ldx >= (nchw ? g.w : g.c) && a.ldw >= (nchw ? g.s : g.c / g.groups) && a.ldy >= (nchw ? conv_out_w(g) : g.k);
}

namespace detail {
Geo make_geo(const ConvArgs& a) {
  const ConvGeom& g = a.g;
  Geo o;
  o.n = int(g.n), o.c = int(g.c), o.h = int(g.h), o.w = int(g.w), o.k = int(g.k), o.r = int(g.r), o.s = int(g.s);
  o.ph = int(g.pad_h), o.pw = int(g.pad_w), o.sh = int(g.stride_h), o.sw = int(g.stride_w);
  o.dh = int(g.dil_h), o.dw = int(g.dil_w), o.groups = int(g.groups);
  o.p = int(conv_out_h(g)), o.q = int(conv_out_w(g)), o.cg = int(g.c / g.groups), o.kg = int(g.k / g.groups);
  o.ldx = a.ldx, o.ldw = a.ldw, o.ldy = a.ldy;
  return o;
}
}  // namespace detail

namespace {
using detail::Geo;
using detail::load;
using detail::Off;
using detail::store;

// ---- direct ----------------------------------------------------------------------------------------
template <typename T, Layout L>
__global__ void fwd_direct(Geo g, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  const int64_t total = int64_t(g.n) * g.k * g.p * g.q;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    // Logical order (n, k, p, q) for both layouts: only the offsets differ.
    const int q = int(e % g.q), p = int(e / g.q % g.p), k = int(e / (int64_t(g.q) * g.p) % g.k),
              n = int(e / (int64_t(g.q) * g.p * g.k));
    const int c0 = k / g.kg * g.cg;
    float acc = 0.0f;
    for (int c = 0; c < g.cg; ++c)
      for (int r = 0; r < g.r; ++r) {
        const int i = p * g.sh - g.ph + r * g.dh;
        if (i < 0 || i >= g.h) continue;
        for (int s = 0; s < g.s; ++s) {
          const int j = q * g.sw - g.pw + s * g.dw;
          if (j < 0 || j >= g.w) continue;
          acc = fmaf(load(x + Off<L>::x(g, n, c0 + c, i, j)), load(w + Off<L>::w(g, k, c, r, s)), acc);
        }
      }
    store(y + Off<L>::y(g, n, k, p, q), acc);
  }
}

template <typename T, Layout L>
__global__ void bwd_data_direct(Geo g, const T* __restrict__ dy, const T* __restrict__ w, T* __restrict__ dx) {
  const int64_t total = int64_t(g.n) * g.c * g.h * g.w;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int j = int(e % g.w), i = int(e / g.w % g.h), ci = int(e / (int64_t(g.w) * g.h) % g.c),
              n = int(e / (int64_t(g.w) * g.h * g.c));
    const int grp = ci / g.cg, c = ci % g.cg;
    float acc = 0.0f;
    for (int kq = 0; kq < g.kg; ++kq) {
      const int k = grp * g.kg + kq;
      for (int r = 0; r < g.r; ++r) {
        const int ph = i + g.ph - r * g.dh;  // = p * sh for a contributing output row p
        if (ph < 0 || ph % g.sh != 0 || ph / g.sh >= g.p) continue;
        for (int s = 0; s < g.s; ++s) {
          const int qw = j + g.pw - s * g.dw;
          if (qw < 0 || qw % g.sw != 0 || qw / g.sw >= g.q) continue;
          acc = fmaf(load(dy + Off<L>::y(g, n, k, ph / g.sh, qw / g.sw)), load(w + Off<L>::w(g, k, c, r, s)), acc);
        }
      }
    }
    store(dx + Off<L>::x(g, n, ci, i, j), acc);
  }
}

template <typename T, Layout L>
__global__ void bwd_filter_direct(Geo g, const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dw) {
  const int64_t total = int64_t(g.k) * g.cg * g.r * g.s;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int s = int(e % g.s), r = int(e / g.s % g.r), c = int(e / (int64_t(g.s) * g.r) % g.cg),
              k = int(e / (int64_t(g.s) * g.r * g.cg));
    const int ci = k / g.kg * g.cg + c;
    float acc = 0.0f;
    for (int n = 0; n < g.n; ++n)
      for (int p = 0; p < g.p; ++p) {
        const int i = p * g.sh - g.ph + r * g.dh;
        if (i < 0 || i >= g.h) continue;
        for (int q = 0; q < g.q; ++q) {
          const int j = q * g.sw - g.pw + s * g.dw;
          if (j < 0 || j >= g.w) continue;
          acc = fmaf(load(dy + Off<L>::y(g, n, k, p, q)), load(x + Off<L>::x(g, n, ci, i, j)), acc);
        }
      }
    store(dw + Off<L>::w(g, k, c, r, s), acc);
  }
}

template <typename K, typename... A>
cudaError_t launch_1d(K kernel, int64_t total, cudaStream_t st, A... args) {
  constexpr int kBlock = 256;
  const int64_t blocks = std::min<int64_t>((total + kBlock - 1) / kBlock, int64_t{1} << 20);
  kernel<<<static_cast<unsigned>(blocks), kBlock, 0, st>>>(args...);
  return cudaGetLastError();
}

// ---- implicit GEMM ---------------------------------------------------------------------------------
using detail::kBK;
using detail::kBM;
using detail::kBN;
using detail::kThreads;

// Thread t owns rows tm, tm + 16 and columns tn, tn + 16 of the 32 x 32 tile: its four
// accumulators add the Kr products in ascending kk (a fixed fmaf chain per output).
template <class P>
__global__ void __launch_bounds__(kThreads) igemm(P prob) {
  __shared__ float as[kBK][kBM + 1];
  __shared__ float bs[kBK][kBN + 1];
  const int gz = int(blockIdx.z);
  const int64_t M = prob.rows(), Kr = prob.red();
  const int Nc = prob.cols();
  const int64_t m0 = int64_t(blockIdx.x) * kBM;
  const int n0 = int(blockIdx.y) * kBN;
  const int tid = int(threadIdx.x), tm = tid % 16, tn = tid / 16;
  float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
  for (int64_t k0 = 0; k0 < Kr; k0 += kBK) {
    for (int e = tid; e < kBK * kBM; e += kThreads) {
      const int kk = e / kBM, mm = e % kBM;
      const int64_t m = m0 + mm, kr = k0 + kk;
      as[kk][mm] = (m < M && kr < Kr) ? prob.a(gz, m, kr) : 0.0f;  // tails: zeros
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int kk = e / kBN, nn = e % kBN;
      const int64_t kr = k0 + kk;
      bs[kk][nn] = (n0 + nn < Nc && kr < Kr) ? prob.b(gz, kr, n0 + nn) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      const float a0 = as[kk][tm], a1 = as[kk][tm + 16], b0 = bs[kk][tn], b1 = bs[kk][tn + 16];
      acc[0][0] = fmaf(a0, b0, acc[0][0]);
      acc[0][1] = fmaf(a0, b1, acc[0][1]);
      acc[1][0] = fmaf(a1, b0, acc[1][0]);
      acc[1][1] = fmaf(a1, b1, acc[1][1]);
    }
    __syncthreads();
  }
  for (int di = 0; di < 2; ++di)
    for (int dj = 0; dj < 2; ++dj) {
      const int64_t m = m0 + tm + 16 * di;
      const int col = n0 + tn + 16 * dj;
      if (m < M && col < Nc) prob.put(gz, m, col, acc[di][dj]);
    }
}

template <class P>
cudaError_t launch_igemm(const P& prob, int64_t rows, int64_t cols, int groups, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>((rows + kBM - 1) / kBM), static_cast<unsigned>((cols + kBN - 1) / kBN),
                  static_cast<unsigned>(groups));
  if (grid.y > 65535 || grid.z > 65535) return cudaErrorInvalidConfiguration;
  igemm<<<grid, kThreads, 0, st>>>(prob);
  return cudaGetLastError();
}

}  // namespace

cudaError_t conv2d_fwd_direct(const ConvArgs& a, cudaStream_t st) {
  if (!conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = detail::make_geo(a);
  return detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    return launch_1d(fwd_direct<T, L>, int64_t(g.n) * g.k * g.p * g.q, st, g, static_cast<const T*>(a.x),
                     static_cast<const T*>(a.w), static_cast<T*>(a.y));
  });
}
cudaError_t conv2d_bwd_data_direct(const ConvArgs& a, cudaStream_t st) {
  if (!conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = detail::make_geo(a);
  return detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    return launch_1d(bwd_data_direct<T, L>, int64_t(g.n) * g.c * g.h * g.w, st, g, static_cast<const T*>(a.y),
                     static_cast<const T*>(a.w), static_cast<T*>(a.x));
  });
}
cudaError_t conv2d_bwd_filter_direct(const ConvArgs& a, cudaStream_t st) {
  if (!conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = detail::make_geo(a);
  return detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    return launch_1d(bwd_filter_direct<T, L>, int64_t(g.k) * g.cg * g.r * g.s, st, g, static_cast<const T*>(a.x),
                     static_cast<const T*>(a.y), static_cast<T*>(a.w));
  });
}

cudaError_t conv2d_fwd_igemm(const ConvArgs& a, cudaStream_t st) {
  if (!conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = detail::make_geo(a);
  return detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    const detail::FwdProb<T, L> p{g, static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<T*>(a.y)};
    return launch_igemm(p, int64_t(g.n) * g.p * g.q, g.kg, g.groups, st);
  });
}
cudaError_t conv2d_bwd_data_igemm(const ConvArgs& a, cudaStream_t st) {
  if (!conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = detail::make_geo(a);
  return detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    const detail::BwdDataProb<T, L> p{g, static_cast<const T*>(a.y), static_cast<const T*>(a.w), static_cast<T*>(a.x)};
    return launch_igemm(p, int64_t(g.n) * g.h * g.w, g.cg, g.groups, st);
  });
}
cudaError_t conv2d_bwd_filter_igemm(const ConvArgs& a, cudaStream_t st) {
  if (!conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = detail::make_geo(a);
  return detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    const detail::BwdFilterProb<T, L> p{g, static_cast<const T*>(a.x), static_cast<const T*>(a.y),
                                        static_cast<T*>(a.w)};
    return launch_igemm(p, g.kg, int64_t(g.r) * g.s * g.cg, g.groups, st);
  });
}

}  // namespace assay::kernels::conv
