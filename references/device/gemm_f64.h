// fp64 GEMM reference on the GPU for shapes where the host reference would
// make the CPU the bottleneck: the inputs (fp32, fp16 or bf16) are widened
// exactly to fp64 and multiplied with cuBLAS fp64 pedantic; the magnitude term
// comes from a second fp64 GEMM on absolute values. gemm's reference is
// gemm_f64_reference; gemm_tc's is gemm_f64_products then gemm_tc_f64_finish, gemm_bias_act's
// gemm_f64_products then gemm_epi_f64_finish.
// Checked against references/host on small shapes
// (tests/references/gemm_device_ref_gpu_test.cpp, gemm_family_device_ref_test.cpp).
#pragma once

#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "harness/dtype.h"
#include "harness/status.h"
#include "references/device/gemm_f64_tol.h"
#include "references/library/cublas_gemm.h"

namespace assay::device_ref {

/// Doubles of scratch gemm_f64_reference and gemm_f64_products need for inputs of these extents
/// and an m x n output (the operand statistics included).
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

/// The operands of gemm_f64_products: A and B stored in `in` (fp32, fp16 or bf16), each
/// `extent` elements from its pointer (gaps included: their NaN canaries are never read).
struct F64Operands {
  DType in = DType::kF32;
  const void* a = nullptr;
  int64_t extent_a = 0;
  const void* b = nullptr;
  int64_t extent_b = 0;
  /// Nonzero: every magnitude |x| of a nonzero x is taken as max(|x|, nominal) (gemm_tc's
  /// nominal magnitudes, properties/gemm_tc.cpp); 0: |x|.
  double nominal = 0;
};

/// dot = op(A) op(B) and mag = op(|A|) op(|B|) (|x| nominal as `x` says), m*n doubles each,
/// row-major contiguous, with cuBLAS fp64 pedantic on the widened inputs; k == 0 gives zeros.
/// stats (null: none; else 2(m + n) doubles, which may lie in `scratch` past the widened
/// operands): max |x| and sum |x| per row of op(A), then per column of op(B), of the true
/// magnitudes, [max_a m][sum_a m][max_b n][sum_b n] (the alpha-scaled operand rule).
Status gemm_f64_products(cublasHandle_t handle, cudaStream_t stream, const vendor::RowMajorGemm& g,
                         const F64Operands& x, double* dot, double* mag, double* scratch, double* stats);

/// The operand statistics' place in gemm_f64_products' scratch.
inline double* gemm_f64_stats(double* scratch, int64_t extent_a, int64_t extent_b) {
  return scratch + 2 * (extent_a + extent_b);
}

/// gemm_tc's D from gemm_f64_products' dot and mag (nominal), in place: ref = alpha dot + beta c,
/// and mag replaced by the tolerance f64_tc_element_tol (+Inf for NaN), reading C (ldc apart,
/// dtype c_type) only where beta != 0, stats as gemm_f64_products left them (null: alpha 0 or
/// +-1, no rule).
struct F64TcFinish {
  int64_t m = 0, n = 0;
  double alpha = 1, beta = 0;
  const void* c = nullptr;
  DType c_type = DType::kF32;
  int64_t ldc = 0;
  const double* stats = nullptr;
  F64TcTol tol;
};
Status gemm_tc_f64_finish(const F64TcFinish& f, double* ref, double* mag, cudaStream_t stream);

/// gemm_bias_act's Y and Z from gemm_f64_products' dot and mag: z = dot + bias[j] and
/// mag + |bias[j]| (the host reference's order), y = act(z) (act 0 none, 1 relu, 2 the tanh-form
/// GELU z sigmoid(2 gelu_k (z + 0.044715 z^3)), as references/host/backward.h), each tolerance
/// outright (f64_epi_element_tol, +Inf for NaN). z_ref and z_mag hold dot and mag on entry.
struct F64EpiFinish {
  int64_t m = 0, n = 0;
  const void* bias = nullptr;
  DType bias_type = DType::kF32;
  int act = 0;
  double gelu_k = 0;  ///< sqrt(2 / pi) as the host reference forms it
  F64EpiTol tol;
};
Status gemm_epi_f64_finish(const F64EpiFinish& f, double* y_ref, double* y_tol, double* z_ref, double* z_mag,
                           cudaStream_t stream);

}  // namespace assay::device_ref
