// Planted-bug ("mutant") convolution kernels. Each is a minimal edit of a launcher
// of kernels/conv/conv.h with the same signature, registered as a variant of its op
// (tests/mutants/conv/register.cpp) so the harness runs it in the launcher's place. The
// header of conv_mutants.cu names, per mutant, the bug, the cases that expose it and the
// check expected to catch it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/conv/conv.h"

namespace assay::mutants::conv {

using kernels::conv::ConvArgs;

/// Replaces conv2d_fwd_direct: the input column is q*sw - (pw - 1) + s*dw when pw > 0 (the
/// padding taken as pw - 1 on the left, pw + 1 on the right).
cudaError_t conv_fwd_pad_offset(const ConvArgs& a, cudaStream_t s);
/// Replaces conv2d_fwd_direct: the input column steps by stride_h (q*sh - pw + s*dw).
cudaError_t conv_fwd_swapped_stride(const ConvArgs& a, cudaStream_t s);
/// Replaces conv2d_fwd_direct: no j >= W check, so taps right of the input read the start of
/// the next row (or the row gap) instead of the padding zero.
cudaError_t conv_fwd_right_edge(const ConvArgs& a, cudaStream_t s);
/// Replaces conv2d_bwd_filter_direct: the batch loop stops at N - 1.
cudaError_t conv_bwd_filter_last_batch(const ConvArgs& a, cudaStream_t s);
/// Replaces conv2d_fwd_igemm: the reduction tail of the last 16-deep tile is loaded without the
/// kk < R*S*Cg guard, so taps r >= R (of the neighbouring filter row) join the sum.
cudaError_t conv_igemm_k_tail(const ConvArgs& a, cudaStream_t s);

}  // namespace assay::mutants::conv
