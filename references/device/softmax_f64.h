// fp64 reference of softmax and log-softmax over rows on the GPU, with the per-element
// ceiling of properties/softmax.cpp computed beside it: one block per row runs the host
// reference's steps (references/host/softmax.h: the max, exp(x - max), the sum Z, log Z,
// y = e / Z or z = t - log Z, the weighted deviation D = sum y |t|) with the two sums taken
// serially on one thread in the host's order, then the row's bound (harness/bound_core.h
// softmax_level / log_softmax_level, narrow_softmax_tol_of, lse_first_extra) per element.
// X fp32, fp16 or bf16, read widened exactly (input_rows.h). The exponentials and the log are
// CUDA's (1 ulp) rather than the host libm's, so the two references agree to a few fp64 ulps,
// well inside the fp64 share the bound already carries (its ref_slack and reference terms).
// The backward's too: prepare's saved output computed and rounded on the device, then
// references/host/backward.h's steps with properties/softmax.cpp's ceiling. And cross-entropy's
// loss and dlogits, from the same row steps, with properties/cross_entropy.cpp's prepare and bound.
// Checked against the host reference and bound by tests/references/softmax_device_ref_gpu_test.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/bound_core.h"
#include "harness/status.h"
#include "harness/ulp_core.h"
#include "references/device/input_rows.h"

namespace assay::device_ref {

/// One softmax case as the device reference needs it: the row model with its dtypes looked up
/// (softmax_scalars) and the conventions of the variant under test, resolved on the host.
struct SoftmaxF64Problem {
  int64_t rows = 0, n = 0;
  bool log = false;
  /// A row of -inf only gives 0 (log-softmax: -inf) with magnitude 0, instead of max-first's NaN.
  bool masked_zero = false;
  /// Softmax with fp16/bf16 intermediates (Arithmetic::narrow_intermediates, not for log-softmax):
  /// narrow_softmax_tol_of with the output's unit roundoff and smallest subnormal.
  bool narrow = false;
  double narrow_uo = 0, narrow_sub = 0;
  /// Log-softmax with the log-sum-exp formed first: lse_first_extra with these numbers.
  bool lse_first = false;
  double lse_u = 0, lse_u_out = 0;
  SoftmaxScalars soft;
};

/// y (or z) into ref (rows x n, dense) and its ceiling into tol (NaN tolerances as +Inf, as the
/// engine's host path has them), from x (rows of n, stride x.ld). Asynchronous on `stream`;
/// checks the launch error.
Status softmax_f64_reference(const SoftmaxF64Problem& p, InputRows x, double* ref, double* tol, cudaStream_t stream);

/// Rows 0, every, 2 every, ... of `x` (fp32, fp16 or bf16; rows x cols, row stride ld) set to
/// -inf: the device twin of the host prepare's fully masked rows (properties/softmax.cpp
/// mask_rows), written into the drawn snapshot before the reference or any launch reads it.
Status softmax_mask_rows(void* x, DType dtype, int64_t rows, int64_t cols, int64_t ld, int64_t every,
                         cudaStream_t stream);

/// prepare_bwd on the device (properties/softmax.cpp): each row of the drawn logits in `y`
/// (fp32, fp16 or bf16; rows x n, row stride ld) replaced by its softmax (log-softmax), computed
/// by softmax_f64_reference into `tmp_ref` and `tmp_tol` (rows x n doubles each, scratch) and
/// rounded into the dtype as store_as rounds it (to fp32 first, then harness/dtype_encode.h).
/// Asynchronous on `stream`.
Status softmax_prepare_saved(bool log, void* y, DType dtype, int64_t rows, int64_t n, int64_t ld, double* tmp_ref,
                             double* tmp_tol, cudaStream_t stream);

/// The backward from the saved output, as references/host/backward.h softmax_backward /
/// log_softmax_backward (the row's two sums serially in index order) with
/// properties/softmax.cpp bound_bwd's ceiling: e32 = g mag + fl, tol = e32 + store(|dx| (1 + 2^-9) + e32).
struct SoftmaxBwdF64Problem {
  int64_t rows = 0, n = 0;
  bool log = false;
  double g = 0, fl = 0;
  StoreRounding store;
};

/// dx into ref (rows x n, dense) and its ceiling into tol (NaN as +Inf), from the saved output
/// y and the incoming gradient dy (each with its own row stride). Asynchronous on `stream`.
Status softmax_bwd_f64_reference(const SoftmaxBwdF64Problem& p, InputRows y, InputRows dy, double* ref, double* tol,
                                 cudaStream_t stream);

/// Cross-entropy (properties/cross_entropy.cpp): one case's params and model.
struct CrossEntropyF64Problem {
  int64_t rows = 0, n = 0;
  int64_t ignore_index = -100, ignore_every = 0, inf_every = 0;
  bool oob_targets = false;
  double eps = 0;       ///< the smoothing, as the fp32 value the kernel receives
  SoftmaxScalars soft;  ///< the row model (fp32 statistics, the variant's arithmetic)
  StoreRounding store;  ///< dlogits' store rounding
  double f32_max = 0;
};

/// prepare on the device: targets folded into [0, n) (unless oob_targets), ignore_index on rows
/// r % ignore_every == 0, and the -inf logits of rows r % inf_every == inf_every - 1, in the
/// snapshot (`logits` fp32, fp16 or bf16 with row stride ld; `target` int32, contiguous).
/// Idempotent, so a relation's transformed inputs may be prepared again. Asynchronous.
Status cross_entropy_prepare(const CrossEntropyF64Problem& p, void* logits, DType dtype, int64_t ld, int32_t* target,
                             cudaStream_t stream);

/// The loss (rows) and dlogits (rows x n, dense) with their ceilings, as the host reference
/// (references/host/softmax.h cross_entropy_reference, softmax_row) and bound form them: ignored
/// rows exactly 0, out-of-range targets NaN (tolerance 0: the NaN/Inf pattern alone), NaN
/// tolerances as +Inf. Asynchronous on `stream`.
Status cross_entropy_f64_reference(const CrossEntropyF64Problem& p, InputRows logits, const int32_t* target,
                                   double* loss_ref, double* loss_tol, double* dl_ref, double* dl_tol,
                                   cudaStream_t stream);

}  // namespace assay::device_ref
