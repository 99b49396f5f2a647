// Kernels for tests/harness/module_test.cpp, compiled to PTX at build time
// (nvcc -ptx) and loaded through the driver API at run time: they stand for
// a kernel built elsewhere. extern "C" keeps the symbol names plain.
#include <cstdint>

/// y[i] = a * x[i] + y[i] + b for 0 <= i < n (grid-stride: any grid covers n).
/// The mix of parameter kinds (two pointers, int64, float, int32) exercises
/// the packing of every size class.
extern "C" __global__ void assay_module_test_axpb(float* y, const float* x, int64_t n, float a, int32_t b) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = fmaf(a, x[i], y[i]) + static_cast<float>(b);
}

/// out[i] = value for 0 <= i < n, staged through dynamic shared memory (one
/// float per thread), so a launch that forgets the shared bytes faults.
extern "C" __global__ void assay_module_test_fill(float* out, uint64_t n, double value) {
  extern __shared__ float stage[];
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  stage[threadIdx.x] = static_cast<float>(value);
  __syncthreads();
  if (i < n) out[i] = stage[threadIdx.x];
}
