// fp64 GEMM reference on the GPU for shapes where the host reference would
// make the CPU the bottleneck: the fp32 inputs are widened exactly to fp64 and
// multiplied with cuBLAS fp64 pedantic; the magnitude term |alpha||A||B| +
// |beta||C| comes from a second fp64 GEMM on absolute values. Checked against
// references/host on small shapes (tests/references/gemm_device_ref_gpu_test.cpp).
#pragma once

#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "harness/status.h"
#include "references/library/cublas_gemm.h"

namespace assay::device_ref {

/// Doubles of scratch gemm_f64_reference needs for inputs of these extents and an m x n output.
inline int64_t gemm_f64_scratch_doubles(int64_t extent_a, int64_t extent_b, int64_t m, int64_t n) {
  return 2 * (extent_a + extent_b) + 2 * (m + n);
}

/// ref and mag: m*n doubles each, row-major contiguous. `c` null: C unread (only with beta == 0);
/// given, it is read even when beta == 0 (0 * Inf = NaN, as a kernel that reads it gives).
/// slack_to_mag > 0 (with alpha not 0 or +-1): the alpha-scaled operand rule of
/// properties/gemm_common.h AlphaScaledOperands enters mag: +Inf where |alpha| scales an operand
/// element an output reads to FLT_MAX, elsewhere its underflow slack times slack_to_mag (the
/// reciprocal of the ceiling's rel_mag, so that the ceiling grows by the slack itself).
Status gemm_f64_reference(cublasHandle_t handle, cudaStream_t stream, const vendor::RowMajorGemm& g, double alpha,
                          const float* a, int64_t extent_a, const float* b, int64_t extent_b, double beta,
                          const float* c, double* ref, double* mag, double* scratch, double slack_to_mag = 0);

}  // namespace assay::device_ref
