// fp64 reference of LayerNorm and RMSNorm backward on the GPU, with the per-element ceiling of
// properties/norms.cpp (bound_bwd) computed beside it: references/host/backward.h's steps from
// the saved fp32 statistics. One block per row for dX: its sums (the reference's m1, m2, a1, a2
// and the bound's mean |xhat|, mean |dxhat|, mean dxhat xhat and max |x| + |mean|) run serially on
// one thread in the host's index order, the element-wise steps across the block. One thread per
// column for dgamma and dbeta: the sums over rows in row order, as the host's. Only IEEE
// operations, compiled without contraction (-fmad=false): references and tolerances have the
// host's bits (tests/references/norms_bwd_device_ref_gpu_test.cpp).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/status.h"
#include "harness/ulp_core.h"
#include "references/device/input_rows.h"

namespace assay::device_ref {

/// One backward case: its shape and the bound's constants, looked up on the host (bound_bwd's).
struct NormBwdF64Problem {
  int64_t rows = 0, n = 0;
  bool rms = false;              ///< RMSNorm (no mean, no dbeta)
  bool dbeta = false;            ///< LayerNorm with a bias: dbeta wanted
  bool ftz = false;              ///< the variant's declared flush-to-zero
  double U = 0;                  ///< the absolute error of an underflowing fp32 result
  double big = 0;                ///< FLT_MAX / 4: past it an fp32 intermediate may overflow
  double gdx = 0, gdg = 0, gdb = 0;
  double flushes = 0;            ///< the dgamma / dbeta sums' underflow count
  StoreRounding store;           ///< dX's store into its dtype
};

/// Inputs (x, dy: rows of n at their row strides; gamma: n; mean, rstd: rows each, fp32, mean
/// unused for RMSNorm) and the dense outputs, each with its tolerance (NaN as +Inf).
struct NormBwdF64Io {
  InputRows x, dy, gamma, mean, rstd;
  double *dx_ref = nullptr, *dx_tol = nullptr;
  double *dgamma_ref = nullptr, *dgamma_tol = nullptr;
  double *dbeta_ref = nullptr, *dbeta_tol = nullptr;
};

/// dX, dgamma (and dbeta) with their ceilings. Asynchronous on `stream`; checks the launch error.
Status norm_bwd_f64_reference(const NormBwdF64Problem& p, const NormBwdF64Io& io, cudaStream_t stream);

/// The saved statistics as a correct forward stores them: fp32 of the fp64 `mean` and `rstd`
/// (rows each, dense; `mean` null for RMSNorm) into the fp32 tensors at `mean_out` and `rstd_out`.
Status norm_saved_stats(const double* mean, const double* rstd, int64_t rows, float* mean_out, float* rstd_out,
                        cudaStream_t stream);

}  // namespace assay::device_ref
