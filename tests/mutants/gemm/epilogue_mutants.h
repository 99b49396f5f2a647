// Planted-bug ("mutant") kernels of GEMM + bias + activation (kernels/gemm/gemm_epilogue.h).
// Each is one edit of a launcher, with its signature, registered as a variant of its op
// (tests/mutants/gemm/epilogue_register.cpp) so the harness runs it in the launcher's place.
// The header of epilogue_mutants.cu names, per mutant, the bug, the cases that expose it and
// the checks expected to catch it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm/gemm_epilogue.h"

namespace assay::mutants::epi {

using kernels::epi::BwdArgs;
using kernels::epi::FwdArgs;

/// Replaces gemm_bias_act_tiled: Y = act(acc) + bias (the bias added after the activation); Z right.
cudaError_t epi_bias_after_act(const FwdArgs& a, cudaStream_t s);
/// Replaces gemm_bias_act_tiled: the epilogue's column guard is c <= n, so the last column's
/// threads also store column n (act(bias[n]), bias read one past its end) in every row.
cudaError_t epi_store_tail(const FwdArgs& a, cudaStream_t s);
/// Replaces gemm_bias_act_bwd: dbias = column sums (overwritten) instead of dbias += column sums.
cudaError_t epi_dbias_overwrite(const BwdArgs& a, cudaStream_t s);
/// Replaces gemm_bias_act_bwd: GELU' without the 0.5 of its first term: (1 + t) + 0.5 x (1 - t^2) w'.
cudaError_t epi_gelu_grad_half(const BwdArgs& a, cudaStream_t s);
/// Replaces gemm_bias_act_bwd: relu'(z) = 1 for z >= 0 (the gradient passes at an exact zero).
cudaError_t epi_relu_grad_at_zero(const BwdArgs& a, cudaStream_t s);

}  // namespace assay::mutants::epi
