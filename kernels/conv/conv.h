// 2-D convolution kernels (issue 9): a direct kernel and an implicit-GEMM one, each forward,
// backward-data and backward-filter. Cross-correlation as PyTorch's conv2d and cuDNN's
// CUDNN_CROSS_CORRELATION, with stride, zero padding, dilation and groups (depthwise included):
//   y[n,k,p,q]  = sum_{c<Cg, r<R, s<S} x[n, g*Cg + c, p*sh - ph + r*dh, q*sw - pw + s*dw] * w[k,c,r,s]
// with g = k / Kg the group of k, Cg = C/groups, Kg = K/groups; backward-data and
// backward-filter are its adjoints in x and in w (references/host/conv.h writes them out).
//
// Conventions for every launcher:
// - `Dt` is the storage type of x, w, y and their gradients; products and sums are fp32
//   (fmaf), the result is rounded once to `Dt` at the store.
// - Every tensor is a 2-D view, row-major with a row stride (elements, >= the row length):
//     kNCHW: x [N*C*H rows, W], w (KCRS) [K*Cg*R rows, S], y [N*K*P rows, Q];
//     kNHWC: x [N*H*W rows, C], w (KRSC) [K*R*S rows, Cg], y [N*P*Q rows, K].
//   Pointers point at element [0][0]; nothing outside the view is read or written (the gaps
//   between rows keep their canaries), pointers need no alignment (scalar loads and stores).
// - Any valid geometry (references/host/conv.h Conv2dGeometry::valid: sizes >= 1, groups
//   divide C and K, output at least 1 x 1); anything else returns cudaErrorInvalidValue
//   before launching.
// - Deterministic: no atomics; each output is one thread's fmaf chain in a fixed order
//   (backward-filter included: the reduction over N*P*Q is never split across threads).
// - Launchers return the launch status (cudaGetLastError) and never sync.
// kernels/ includes nothing from harness/ or references/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels::conv {

enum class Dt : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };
enum class Layout : int32_t { kNCHW = 0, kNHWC = 1 };

/// Geometry in elements (the fields of references/host/conv.h's Conv2dGeometry).
struct ConvGeom {
  int64_t n = 1, c = 1, h = 1, w = 1;  ///< input: batch, channels, height, width
  int64_t k = 1, r = 1, s = 1;         ///< filter: output channels, height, width
  int64_t pad_h = 0, pad_w = 0;        ///< zero padding on each side
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;
};

/// One convolution. Which tensors are read and which is written depends on the pass:
/// forward reads x, w and writes y; backward-data reads y (= dy), w and writes x (= dx);
/// backward-filter reads x, y (= dy) and writes w (= dw). ld* are the row strides of the
/// 2-D views above, in elements.
struct ConvArgs {
  ConvGeom g;
  Layout layout = Layout::kNCHW;
  Dt dt = Dt::kF32;
  void* x = nullptr;
  int64_t ldx = 0;
  void* w = nullptr;
  int64_t ldw = 0;
  void* y = nullptr;
  int64_t ldy = 0;
};

/// Output height/width (0 when the filter does not fit).
int64_t conv_out_h(const ConvGeom& g);
int64_t conv_out_w(const ConvGeom& g);
/// True when the launchers accept `a`: valid geometry and row strides >= the row lengths.
bool conv_args_valid(const ConvArgs& a);

// ---- direct: one thread per output element -----------------------------------------------------
/// y: each thread loops c, r, s in that order, skipping taps in the padding.
cudaError_t conv2d_fwd_direct(const ConvArgs& a, cudaStream_t s);
/// dx: each thread loops the Kg output channels of its group, r, s, taking the taps whose
/// output position (i + ph - r*dh) / sh is integral and inside P (likewise for q).
cudaError_t conv2d_bwd_data_direct(const ConvArgs& a, cudaStream_t s);
/// dw: each thread loops n, p, q in that order (fixed: deterministic, no split).
cudaError_t conv2d_bwd_filter_direct(const ConvArgs& a, cudaStream_t s);

// ---- implicit GEMM: 32 x 32 output tiles, 16-deep reduction tiles through shared memory -------
// Per group (blockIdx.z), C[M x Nc] = A[M x Kr] B[Kr x Nc], A and B gathered on the fly (im2col
// without the buffer; zeros for padding, stride holes and tile tails), 256 threads, 2 x 2
// outputs each, the Kr tiles in ascending order:
//   forward:         M = N*P*Q, Nc = Kg,       Kr = R*S*Cg  (kk = (r*S + s)*Cg + c)
//   backward-data:   M = N*H*W, Nc = Cg,       Kr = R*S*Kg  (taps of stride holes are zeros)
//   backward-filter: M = Kg,    Nc = R*S*Cg,   Kr = N*P*Q   (one block owns an output: no split)
cudaError_t conv2d_fwd_igemm(const ConvArgs& a, cudaStream_t s);
cudaError_t conv2d_bwd_data_igemm(const ConvArgs& a, cudaStream_t s);
cudaError_t conv2d_bwd_filter_igemm(const ConvArgs& a, cudaStream_t s);

}  // namespace assay::kernels::conv
