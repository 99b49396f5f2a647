// Compiled with -fmad=false (CMakeLists.txt): v (J u) and u g are rounded products, as on the host.
#include "references/device/gradcheck_f64.h"

#include <algorithm>
#include <cmath>

#include "harness/device_output_tol.h"
#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 128;
constexpr int kSums = 7;  // the six sums, then the count of non-finite elements

__global__ void linear_grad_partials(LinearGradIn in, double* partials) {
  double a[kSums] = {0, 0, 0, 0, 0, 0, 0};
  const int64_t n = in.rows * in.cols, m = in.up_rows * in.up_cols;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < n; l += stride) {
    const double g = in.grad.at(l / in.cols * in.grad.ld + l % in.cols);
    const double t = device_output_tol(in.ref[l], in.mag[l], in.rel_out, in.rel_mag, in.floor, in.limit);
    if (!isfinite(g) || !isfinite(t)) {
      a[6] += 1;
      continue;
    }
    const double u = in.u[l];
    a[3] += u * g;
    a[4] += fabs(u * g);
    a[5] += fabs(u) * t;
  }
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m; i += stride) {
    const double v = in.upstream.at(i / in.up_cols * in.upstream.ld + i % in.up_cols);
    const double j = in.jvp[i], e = in.err[i];
    if (!isfinite(v) || !isfinite(j) || !isfinite(e)) {
      a[6] += 1;
      continue;
    }
    a[0] += v * j;
    a[1] += fabs(v * j);
    a[2] += fabs(v) * e;
  }
  __shared__ double s[kSums][kThreads];
  for (int k = 0; k < kSums; ++k) s[k][threadIdx.x] = a[k];
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w)
      for (int k = 0; k < kSums; ++k) s[k][threadIdx.x] += s[k][threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int k = 0; k < kSums; ++k) partials[blockIdx.x * kSums + k] = s[k][0];
}

__global__ void linear_grad_total(const double* partials, int blocks, double* total) {
  double a[kSums] = {0, 0, 0, 0, 0, 0, 0};
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < kSums; ++k) a[k] += partials[b * kSums + k];
  for (int k = 0; k < kSums; ++k) total[k] = a[k];
}

}  // namespace

int64_t linear_grad_sums_scratch() {
  return int64_t{kMaxBlocks + 1} * kSums * static_cast<int64_t>(sizeof(double));
}

Status linear_grad_sums(const LinearGradIn& in, unsigned char* scratch, GradSums* out, cudaStream_t stream) {
  if (scratch == nullptr || out == nullptr || in.u == nullptr || in.ref == nullptr || in.mag == nullptr ||
      in.jvp == nullptr || in.err == nullptr)
    return invalid_argument("linear_grad_sums: a device array is missing");
  *out = GradSums{};
  out->n = in.rows * in.cols;
  out->m = in.up_rows * in.up_cols;
  if (out->n <= 0 || out->m <= 0) return ok_status();
  const int blocks =
      static_cast<int>(std::min<int64_t>(kMaxBlocks, (std::max(out->n, out->m) + kThreads - 1) / kThreads));
  double* partials = reinterpret_cast<double*>(scratch);
  double* total = partials + int64_t{kMaxBlocks} * kSums;
  linear_grad_partials<<<blocks, kThreads, 0, stream>>>(in, partials);
  CUDA_CHECK(cudaGetLastError());
  linear_grad_total<<<1, 1, 0, stream>>>(partials, blocks, total);
  CUDA_CHECK(cudaGetLastError());
  double h[kSums];
  CUDA_CHECK(cudaMemcpyAsync(h, total, sizeof h, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  out->fd_val = h[0], out->fd_abs = h[1], out->fd_err = h[2];
  out->kern = h[3], out->kern_abs = h[4], out->ceil = h[5];
  out->skip = h[6] != 0;
  return ok_status();
}

}  // namespace assay::device_ref
