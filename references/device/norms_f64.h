// fp64 reference of LayerNorm and RMSNorm forward over rows on the GPU, with the per-element
// ceiling of properties/norms.cpp computed beside it: one block per row runs the host
// reference's steps (references/host/norms.h: LayerNorm's two-pass statistics of
// variance_reference, the sum and |x| sum, then the corrected sum of squared deviations;
// RMSNorm's sum of squares) with every sum taken serially on one thread in the host's order,
// then the row's bound (harness/bound_core.h layernorm_row_bound / rmsnorm_row_bound) and each
// element's (layernorm_y_tol / rmsnorm_y_tol). X, gamma and beta fp32, fp16 or bf16, read widened
// exactly (input_rows.h). Only IEEE operations (+, -, *, /, sqrt) are involved, so with
// contraction off (-fmad=false) the references and tolerances have the host's bits.
// Checked against the host reference and bound by tests/references/norms_device_ref_gpu_test.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/bound_core.h"
#include "harness/status.h"
#include "references/device/input_rows.h"

namespace assay::device_ref {

/// One LayerNorm or RMSNorm case as the device reference needs it: the model with its dtypes
/// looked up on the host (norm_scalars), rows of s.n elements.
struct NormF64Problem {
  int64_t rows = 0;
  bool rms = false;   ///< RMSNorm (no mean, no beta)
  bool bias = false;  ///< LayerNorm with beta
  double eps = 0;     ///< as the reference adds it (the fp32 value, widened)
  NormScalars s;
};

/// One fp64 output: dense values and their tolerances (NaN tolerances as +Inf, as the engine's
/// host path has them).
struct NormF64Out {
  double* ref = nullptr;
  double* tol = nullptr;
};

/// y (rows x n) and the saved statistics (rows each: LayerNorm's mean and rstd, RMSNorm's rstd;
/// `mean` is ignored for RMSNorm) from x (rows of n, stride x.ld), gamma and beta (n each; beta
/// read only with p.bias). Asynchronous on `stream`; checks the launch error.
Status norm_f64_reference(const NormF64Problem& p, InputRows x, InputRows gamma, InputRows beta, NormF64Out y,
                          NormF64Out mean, NormF64Out rstd, cudaStream_t stream);

/// Rows 0, every, 2 every, ... of `x` (fp32, fp16 or bf16; rows x cols, row stride ld) made
/// constant: each element set to the row's first (`zero`: to +0): the device twin of the host
/// prepare's constant rows (properties/norms.cpp constant_rows), written into the drawn
/// snapshot before the reference or any launch reads it.
Status norm_constant_rows(void* x, DType dtype, int64_t rows, int64_t cols, int64_t ld, int64_t every, bool zero,
                          cudaStream_t stream);

}  // namespace assay::device_ref
