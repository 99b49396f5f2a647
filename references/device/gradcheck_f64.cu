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

__global__ void grad_partials(GradSumsIn in, double* partials) {
  double a[kSums] = {0, 0, 0, 0, 0, 0, 0};
  const int64_t m = in.up_rows * in.up_cols;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int k = 0; k < in.n_terms; ++k) {
    const GradTermIn& t = in.terms[k];
    const int64_t n = t.rows * t.cols;
    for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < n; l += stride) {
      const double g = t.grad.at(l / t.cols * t.grad.ld + l % t.cols);
      double tol = device_output_tol(t.ref[l], t.mag[l], t.rel_out, t.rel_mag, t.floor, t.limit);
      if (t.exact != nullptr) tol += fabs(t.ref[l] - t.exact[l]);
      if (!isfinite(g) || !isfinite(tol)) {
        a[6] += 1;
        continue;
      }
      const double u = t.u.at(l);
      a[3] += u * g;
      a[4] += fabs(u * g);
      a[5] += fabs(u) * tol;
    }
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

__global__ void grad_total(const double* partials, int blocks, double* total) {
  double a[kSums] = {0, 0, 0, 0, 0, 0, 0};
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < kSums; ++k) a[k] += partials[b * kSums + k];
  for (int k = 0; k < kSums; ++k) total[k] = a[k];
}

}  // namespace

int64_t grad_sums_scratch() {
  return int64_t{kMaxBlocks + 1} * kSums * static_cast<int64_t>(sizeof(double));
}

Status grad_sums(const GradSumsIn& in, unsigned char* scratch, GradSums* out, cudaStream_t stream) {
  if (scratch == nullptr || out == nullptr || in.jvp == nullptr || in.err == nullptr || in.n_terms < 1 ||
      in.n_terms > GradSumsIn::kMaxTerms)
    return invalid_argument("grad_sums: a device array is missing, or not 1 to 3 operands");
  *out = GradSums{};
  int64_t widest = 0;
  for (int k = 0; k < in.n_terms; ++k) {
    const GradTermIn& t = in.terms[k];
    if (t.ref == nullptr || t.mag == nullptr || t.u.data == nullptr || t.grad.data == nullptr)
      return invalid_argument("grad_sums: an operand's device array is missing");
    out->n += t.rows * t.cols;
    widest = std::max(widest, t.rows * t.cols);
  }
  out->m = in.up_rows * in.up_cols;
  if (out->n <= 0 || out->m <= 0) return ok_status();
  const int blocks =
      static_cast<int>(std::min<int64_t>(kMaxBlocks, (std::max(widest, out->m) + kThreads - 1) / kThreads));
  double* partials = reinterpret_cast<double*>(scratch);
  double* total = partials + int64_t{kMaxBlocks} * kSums;
  grad_partials<<<blocks, kThreads, 0, stream>>>(in, partials);
  CUDA_CHECK(cudaGetLastError());
  grad_total<<<1, 1, 0, stream>>>(partials, blocks, total);
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
