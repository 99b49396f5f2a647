// Compiled with -fmad=false (CMakeLists.txt): the sums must round like the host's.
#include "references/device/conv_f64.h"

#include <algorithm>

#include "harness/gpu/cuda_check.h"
#include "references/device/conv_f64_element.h"

namespace assay::device_ref {
namespace {

__global__ void conv2d_fwd_f64(ref::Conv2dGeometry g, ElementBound b, double top, F32Rows x, F32Rows w, double* ref,
                               double* tol) {
  const int64_t total = g.y_elems();
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x)
    conv2d_fwd_f64_element(g, b, top, x, w, e, ref[e], tol[e]);
}

}  // namespace

Status conv2d_fwd_f64_reference(const ref::Conv2dGeometry& g, const ElementBound& ceiling, double top, F32Rows x,
                                F32Rows w, double* ref, double* tol, cudaStream_t stream) {
  const int64_t n = g.y_elems();
  if (n <= 0) return ok_status();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 127) / 128, 8192));
  conv2d_fwd_f64<<<blocks, 128, 0, stream>>>(g, ceiling, top, x, w, ref, tol);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
