// Planted-bug ("mutant") tensor-core GEMM kernels. Each is a kernel of kernels/gemm/gemm_tc.cuh
// instantiated with one fault switch on (the same code otherwise), with the launcher signature of
// kernels/gemm/gemm_tc.h, registered as a [mutant] variant of gemm_tc
// (tests/mutants/gemm/tc_register.cpp). tc_mutants.cu names, per mutant, the cases that expose it
// and the checks expected to catch it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm/gemm_tc.h"

namespace assay::mutants::tc {

using kernels::GemmTcArgs;

/// mma: the fp32 accumulator rounded to bf16 after every 32-deep k-tile.
cudaError_t gemm_tc_mma_bf16_acc(const GemmTcArgs& a, cudaStream_t s);
/// wmma: the fp32 accumulator fragments rounded to fp16 after every k-tile.
cudaError_t gemm_tc_wmma_f16_acc(const GemmTcArgs& a, cudaStream_t s);
/// mma: no cp.async.wait_group before the barrier that precedes the mma (a tile is read while
/// its copies may still be in flight).
cudaError_t gemm_tc_mma_no_wait(const GemmTcArgs& a, cudaStream_t s);
/// mma: the A ldmatrix of the second k16 step of the first m16 tile takes row r ^ 1.
cudaError_t gemm_tc_mma_ldmatrix_row(const GemmTcArgs& a, cudaStream_t s);
/// mma: elements past k in the last k-tile are left as they were in shared memory, not zeroed.
cudaError_t gemm_tc_mma_k_tail(const GemmTcArgs& a, cudaStream_t s);
/// wmma: the same missing k-tail zero fill.
cudaError_t gemm_tc_wmma_k_tail(const GemmTcArgs& a, cudaStream_t s);
/// wmma: no barrier between the mma of one k-tile and the loads of the next.
cudaError_t gemm_tc_wmma_missing_sync(const GemmTcArgs& a, cudaStream_t s);
/// mma: C read (beta * C added) even when beta == 0.
cudaError_t gemm_tc_mma_beta0_reads_c(const GemmTcArgs& a, cudaStream_t s);

}  // namespace assay::mutants::tc
