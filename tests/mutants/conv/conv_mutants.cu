// MUTANTS conv -- planted bugs, not kernels to use. Each is a copy of a kernel of
// kernels/conv/conv.cu with one edit (tests/mutants/conv/mutants.h lists them).
//
// conv_fwd_pad_offset (direct forward): column j = q*sw - (pw - 1) + s*dw when pw > 0.
//   Exposed by pad_w > 0 with W > 1 or S > 1 and nonzero data; caught by the bound (kBound),
//   the exact tier (kExact) on small-integer data.
// conv_fwd_swapped_stride (direct forward): j = q*sh - pw + s*dw. Exposed by stride_h !=
//   stride_w with Q > 1; caught by kBound / kExact.
// conv_fwd_right_edge (direct forward): the j >= W check is dropped; a tap right of the input
//   reads x[row][j] with j >= W: the row gap (canaries) or the next row's first elements.
//   Reads stay within W + pad_w - 1 < W + 3 columns, so at most 3 rows of the view (NHWC: 3
//   pixels) past the end of x: inside the 1 KiB guard. Exposed by pad_w > 0 where the last
//   output column's window overhangs the right edge; caught by kBound / kExact / kNanInf.
// conv_bwd_filter_last_batch (direct backward-filter): the batch loop stops at N - 1 (N = 1:
//   dw = 0). Caught by kBound / kExact whenever the last image contributes.
// conv_igemm_k_tail (implicit-GEMM forward): the tile loads drop the kk < Kr guard
//   (Kr = R*S*Cg). With kk = (r*S + s)*Cg + c, a tail kk >= Kr decodes to r >= R: the input
//   gather still checks i, j against the image (in bounds), the filter load reads the next
//   filter rows (at most 15 rows of the view past the end of w for the last filter: inside the
//   guard). Exposed by Kr % 16 != 0 with an input row p*sh - ph + r*dh < H for some r >= R;
//   caught by kBound / kExact (kNanInf if a guard pattern decodes to NaN).
#include <algorithm>

#include "kernels/conv/common.cuh"
#include "tests/mutants/conv/mutants.h"

namespace assay::mutants::conv {
namespace {

using kernels::conv::Layout;
using kernels::conv::detail::Geo;
using kernels::conv::detail::load;
using kernels::conv::detail::Off;
using kernels::conv::detail::store;

enum class FwdBug { kPadOffset, kSwappedStride, kRightEdge };

template <typename T, Layout L, FwdBug B>
__global__ void fwd_direct_bug(Geo g, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  const int64_t total = int64_t(g.n) * g.k * g.p * g.q;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int q = int(e % g.q), p = int(e / g.q % g.p), k = int(e / (int64_t(g.q) * g.p) % g.k),
              n = int(e / (int64_t(g.q) * g.p * g.k));
    const int c0 = k / g.kg * g.cg;
    float acc = 0.0f;
    for (int c = 0; c < g.cg; ++c)
      for (int r = 0; r < g.r; ++r) {
        const int i = p * g.sh - g.ph + r * g.dh;
        if (i < 0 || i >= g.h) continue;
        for (int s = 0; s < g.s; ++s) {
          int j = q * g.sw - g.pw + s * g.dw;
          if (B == FwdBug::kPadOffset) j = q * g.sw - (g.pw > 0 ? g.pw - 1 : 0) + s * g.dw;  // BUG
          if (B == FwdBug::kSwappedStride) j = q * g.sh - g.pw + s * g.dw;                   // BUG
          if (B == FwdBug::kRightEdge) {
            if (j < 0) continue;  // BUG: no j >= W
          } else if (j < 0 || j >= g.w) {
            continue;
          }
          acc = fmaf(load(x + Off<L>::x(g, n, c0 + c, i, j)), load(w + Off<L>::w(g, k, c, r, s)), acc);
        }
      }
    store(y + Off<L>::y(g, n, k, p, q), acc);
  }
}

template <typename T, Layout L>
__global__ void bwd_filter_last_batch(Geo g, const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dw) {
  const int64_t total = int64_t(g.k) * g.cg * g.r * g.s;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int s = int(e % g.s), r = int(e / g.s % g.r), c = int(e / (int64_t(g.s) * g.r) % g.cg),
              k = int(e / (int64_t(g.s) * g.r * g.cg));
    const int ci = k / g.kg * g.cg + c;
    float acc = 0.0f;
    for (int n = 0; n < g.n - 1; ++n)  // BUG: the last image is left out
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

using kernels::conv::detail::kBK;
using kernels::conv::detail::kBM;
using kernels::conv::detail::kBN;
using kernels::conv::detail::kThreads;

template <class P>
__global__ void __launch_bounds__(kThreads) igemm_k_tail(P prob) {
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
      const int64_t m = m0 + mm;
      as[kk][mm] = m < M ? prob.a(gz, m, k0 + kk) : 0.0f;  // BUG: no k0 + kk < Kr
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int kk = e / kBN, nn = e % kBN;
      bs[kk][nn] = n0 + nn < Nc ? prob.b(gz, k0 + kk, n0 + nn) : 0.0f;  // BUG: no k0 + kk < Kr
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

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, int64_t{1} << 20));
}

template <FwdBug B>
cudaError_t fwd_bug(const ConvArgs& a, cudaStream_t st) {
  if (!kernels::conv::conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = kernels::conv::detail::make_geo(a);
  return kernels::conv::detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    fwd_direct_bug<T, L, B><<<blocks_for(int64_t(g.n) * g.k * g.p * g.q), 256, 0, st>>>(
        g, static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<T*>(a.y));
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t conv_fwd_pad_offset(const ConvArgs& a, cudaStream_t s) {
  return fwd_bug<FwdBug::kPadOffset>(a, s);
}
cudaError_t conv_fwd_swapped_stride(const ConvArgs& a, cudaStream_t s) {
  return fwd_bug<FwdBug::kSwappedStride>(a, s);
}
cudaError_t conv_fwd_right_edge(const ConvArgs& a, cudaStream_t s) {
  return fwd_bug<FwdBug::kRightEdge>(a, s);
}

cudaError_t conv_bwd_filter_last_batch(const ConvArgs& a, cudaStream_t st) {
  if (!kernels::conv::conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = kernels::conv::detail::make_geo(a);
  return kernels::conv::detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    bwd_filter_last_batch<T, L><<<blocks_for(int64_t(g.k) * g.cg * g.r * g.s), 256, 0, st>>>(
        g, static_cast<const T*>(a.x), static_cast<const T*>(a.y), static_cast<T*>(a.w));
    return cudaGetLastError();
  });
}

cudaError_t conv_igemm_k_tail(const ConvArgs& a, cudaStream_t st) {
  if (!kernels::conv::conv_args_valid(a)) return cudaErrorInvalidValue;
  const Geo g = kernels::conv::detail::make_geo(a);
  return kernels::conv::detail::dispatch(a, [&](auto tt, auto lt) {
    using T = decltype(tt);
    constexpr Layout L = decltype(lt)::value;
    const kernels::conv::detail::FwdProb<T, L> p{g, static_cast<const T*>(a.x), static_cast<const T*>(a.w),
                                                 static_cast<T*>(a.y)};
    const int64_t rows = int64_t(g.n) * g.p * g.q;
    const dim3 grid(static_cast<unsigned>((rows + kBM - 1) / kBM), static_cast<unsigned>((g.kg + kBN - 1) / kBN),
                    static_cast<unsigned>(g.groups));
    igemm_k_tail<<<grid, kThreads, 0, st>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace assay::mutants::conv
