// Device pieces of kernels/gemm/gemm_epilogue.cu, shared with the planted bugs of
// tests/mutants/gemm/epilogue_mutants.cu so that each mutant is one edit of the kernel:
// element loads / stores per dtype (kernels/common/storage.cuh), the activations and their derivatives in fp32, and a
// 32x32 shared-memory tiled product C[r][c] = sum_l L(r, l) R(l, c) whose operands and
// store are functors (the forward's op(A) op(B) + epilogue, the backward's dZ op(B)^T and
// op(A)^T dZ).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/storage.cuh"
#include "kernels/gemm/gemm_epilogue.h"

namespace assay::kernels::epi::detail {

using storage::load;
using storage::store;

// sqrt(2/pi) and 0.044715 rounded to fp32 (the host bound counts their rounding).
constexpr float kGeluK = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

/// act(x) in fp32. GELU: 0.5 x (1 + tanhf(k (x + c x^3))); |x| large: tanhf saturates at +-1
/// and x^3 = +-inf gives tanhf(+-inf) = +-1, so y = x or -0, never NaN.
__device__ __forceinline__ float act_fwd(Act act, float x) {
  switch (act) {
    case Act::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Act::kGelu: {
      const float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
      return 0.5f * x * (1.0f + t);
    }
    default:
      return x;
  }
}

/// act'(x) in fp32. GELU: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2); where t saturates
/// (1 - t^2 == 0) the second term is 0 (x^2 may be +inf there: 0 * inf must not give NaN).
__device__ __forceinline__ float act_grad(Act act, float x) {
  switch (act) {
    case Act::kRelu:
      return x > 0.0f ? 1.0f : 0.0f;
    case Act::kGelu: {
      const float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
      const float s = 1.0f - t * t;
      const float second = s == 0.0f ? 0.0f : 0.5f * x * s * (kGeluK * (1.0f + 3.0f * kGeluC * x * x));
      return 0.5f * (1.0f + t) + second;
    }
    default:
      return 1.0f;
  }
}

constexpr int kTile = kEpilogueTile;  // 32
constexpr int kRows = 8;              // 32 x 8 threads, 4 rows of the tile each
constexpr int kPer = kTile / kRows;

/// C (rows x cols) = sum over l < depth of L(r, l) R(l, c), accumulated in fp32 by fmaf in
/// increasing l; store(r, c, acc) for every r < rows, c < cols. Loads outside the operands
/// read 0 (exact: fmaf(0, x, acc) = acc). Grid-stride over tiles, so any grid works.
template <class LoadL, class LoadR, class Store>
__global__ void __launch_bounds__(kTile* kRows)
    tiled_product(int64_t rows, int64_t cols, int64_t depth, int64_t tiles_r, int64_t tiles_c, LoadL L, LoadR R,
                  Store store) {
  __shared__ float ls[kTile][kTile + 1];
  __shared__ float rs[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y)
    for (int64_t tc = blockIdx.x; tc < tiles_c; tc += gridDim.x) {
      const int64_t r0 = tr * kTile, c0 = tc * kTile;
      float acc[kPer] = {};
      for (int64_t l0 = 0; l0 < depth; l0 += kTile) {
#pragma unroll
        for (int q = 0; q < kPer; ++q) {
          const int s = ty + q * kRows;
          const int64_t r = r0 + s, l = l0 + tx, lr = l0 + s, c = c0 + tx;
          ls[s][tx] = (r < rows && l < depth) ? L(r, l) : 0.0f;
          rs[s][tx] = (lr < depth && c < cols) ? R(lr, c) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < kTile; ++p) {
          const float rv = rs[p][tx];
#pragma unroll
          for (int q = 0; q < kPer; ++q) acc[q] = fmaf(ls[ty + q * kRows][p], rv, acc[q]);
        }
        __syncthreads();
      }
      const int64_t c = c0 + tx;
      if (c < cols)
#pragma unroll
        for (int q = 0; q < kPer; ++q) {
          const int64_t r = r0 + ty + q * kRows;
          if (r < rows) store(r, c, acc[q]);
        }
    }
}

template <class LoadL, class LoadR, class Store>
cudaError_t launch_product(int64_t rows, int64_t cols, int64_t depth, LoadL L, LoadR R, Store store,
                           cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const int64_t tr = (rows + kTile - 1) / kTile, tc = (cols + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(tc < 2147483647 ? tc : 2147483647),
                  static_cast<unsigned>(tr < 65535 ? tr : 65535));
  tiled_product<<<grid, dim3(kTile, kRows), 0, stream>>>(rows, cols, depth, tr, tc, L, R, store);
  return cudaGetLastError();
}

/// op(A)[i][p] of a row-major A with leading dimension ld.
template <typename T>
struct OpMat {
  const T* p;
  int64_t lead;
  bool trans;
  __device__ float operator()(int64_t i, int64_t j) const { return load(trans ? p + j * lead + i : p + i * lead + j); }
};

/// dZ[i][j] = dY[i][j] * act'(Z[i][j]) in fp32.
template <typename T>
struct DzOf {
  const T* z;
  int64_t ldz;
  const T* dy;
  int64_t lddy;
  Act act;
  __device__ float operator()(int64_t i, int64_t j) const {
    return load(dy + i * lddy + j) * act_grad(act, load(z + i * ldz + j));
  }
};

/// dbias stores of the column sums: accumulated (dbias[j] += s).
template <typename T>
struct AccumulateBias {
  T* p;
  __device__ void operator()(int64_t j, float s) const { store(p + j, load(p + j) + s); }
};

/// Column sums of dZ, one thread per column, rows 0..m-1 in order (deterministic); store(j, sum).
template <class Dz, class Store>
__global__ void column_sums(int64_t m, int64_t n, Dz dz, Store store) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int64_t i = 0; i < m; ++i) s += dz(i, j);
    store(j, s);
  }
}

/// The fused epilogue: z = acc + bias[j] (fp32), y = act(z); each rounded once at its store.
template <typename T>
struct Epilogue {
  const T* bias;
  Act act;
  T* y;
  int64_t ldy;
  T* z;
  int64_t ldz;
  __device__ void operator()(int64_t i, int64_t j, float acc) const {
    const float zv = acc + load(bias + j);
    if (z != nullptr) store(z + i * ldz + j, zv);
    store(y + i * ldy + j, act_fwd(act, zv));
  }
};

/// op(M)^T as a right operand: R(j, q) = op(M)[q][j].
template <typename T>
struct OpMatT {
  OpMat<T> m;
  __device__ float operator()(int64_t j, int64_t q) const { return m(q, j); }
};

/// dA in A's storage layout (written).
template <typename T>
struct StoreDa {
  T* p;
  int64_t lead;
  bool trans;
  __device__ void operator()(int64_t i, int64_t q, float v) const {
    store(trans ? p + q * lead + i : p + i * lead + q, v);
  }
};

/// dB in B's storage layout, accumulated: d op(B)[q][j] lands at b[q][j] or, transposed, b[j][q].
template <typename T>
struct AccumulateDb {
  T* p;
  int64_t lead;
  bool trans;
  __device__ void operator()(int64_t q, int64_t j, float v) const {
    T* e = trans ? p + j * lead + q : p + q * lead + j;
    store(e, load(e) + v);
  }
};

inline bool bad_fwd(const FwdArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return true;
  if (g.m == 0 || g.n == 0) return false;
  if (g.ldy < g.n || (g.z != nullptr && g.ldz < g.n)) return true;
  return g.k > 0 && (g.lda < (g.trans_a ? g.m : g.k) || g.ldb < (g.trans_b ? g.k : g.n));
}

inline bool bad_bwd(const BwdArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return true;
  if (g.m > 0 && g.n > 0 && (g.ldz < g.n || g.lddy < g.n)) return true;
  return g.k > 0 && (g.lda < (g.trans_a ? g.m : g.k) || g.ldb < (g.trans_b ? g.k : g.n) ||
                     g.ldda < (g.trans_a ? g.m : g.k) || g.lddb < (g.trans_b ? g.k : g.n));
}

/// The backward with the given dZ operand and dbias store: dA = dZ op(B)^T (written), dB += op(A)^T dZ,
/// then the column sums of dZ.
template <typename T, class Dz, class BiasStore>
cudaError_t launch_bwd(const BwdArgs& g, Dz dz, BiasStore bias_store, cudaStream_t s) {
  const OpMat<T> a{static_cast<const T*>(g.a), g.lda, g.trans_a}, b{static_cast<const T*>(g.b), g.ldb, g.trans_b};
  cudaError_t e =
      launch_product(g.m, g.k, g.n, dz, OpMatT<T>{b}, StoreDa<T>{static_cast<T*>(g.da), g.ldda, g.trans_a}, s);
  if (e != cudaSuccess) return e;
  e = launch_product(g.k, g.n, g.m, OpMatT<T>{a}, dz, AccumulateDb<T>{static_cast<T*>(g.db), g.lddb, g.trans_b}, s);
  if (e != cudaSuccess || g.n == 0) return e;
  const int threads = 128;
  const int64_t blocks = (g.n + threads - 1) / threads;
  column_sums<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), threads, 0, s>>>(g.m, g.n, dz, bias_store);
  return cudaGetLastError();
}

}  // namespace assay::kernels::epi::detail
