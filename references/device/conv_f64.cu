// Compiled with -fmad=false (CMakeLists.txt): the sums must round like the host's.
#include "references/device/conv_f64.h"

#include <algorithm>

#include "harness/gpu/cuda_check.h"
#include "harness/gradcheck_direction.h"
#include "references/device/conv_f64_element.h"

namespace assay::device_ref {
namespace {

__global__ void conv2d_f64(ConvF64Pass pass, ref::Conv2dGeometry g, ElementBound b, double top, StoreRounding store,
                           InputRows in0, InputRows in1, double* ref, double* tol) {
  const int64_t total = conv2d_f64_elements(pass, g);
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x)
    conv2d_f64_element(pass, g, b, top, store, in0, in1, e, ref[e], tol[e]);
}

__global__ void gradcheck_signs(float* u, int64_t n, uint64_t seed) {
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < n; l += int64_t{gridDim.x} * blockDim.x)
    u[l] = static_cast<float>(gradcheck_sign(seed, l));
}

}  // namespace

Status conv2d_f64_reference(ConvF64Pass pass, const ref::Conv2dGeometry& g, const ElementBound& ceiling, double top,
                            const StoreRounding& store, InputRows in0, InputRows in1, double* ref, double* tol,
                            cudaStream_t stream) {
  const int64_t n = conv2d_f64_elements(pass, g);
  if (n <= 0) return ok_status();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 127) / 128, 8192));
  conv2d_f64<<<blocks, 128, 0, stream>>>(pass, g, ceiling, top, store, in0, in1, ref, tol);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status fill_gradcheck_signs(float* u, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n <= 0) return ok_status();
  gradcheck_signs<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096)), 256, 0, stream>>>(u, n, seed);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
