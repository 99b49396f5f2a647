// Planted-bug ("mutant") fp32 GEMM kernels. Each one is a bug a real engineer
// could plausibly write, launched through the same GemmF32Launcher signature
// as the real variants, so the harness can prove that each of its checks
// fires: a mutant that passes every case is a hole in the harness (or a case
// set too weak to expose it). See each .cu file's header for the bug and the
// check expected to catch it.
#pragma once

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_backward.h"

namespace assay::mutants {

/// Tiled kernel without the store-side m/n tail guard: writes a full 32x32 tile.
cudaError_t gemm_f32_mutant_tail_guard(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Naive kernel that assumes contiguous A and C (k or m for lda, n for ldc).
cudaError_t gemm_f32_mutant_wrong_ld(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Tiled kernel accumulating in __half instead of fp32.
cudaError_t gemm_f32_mutant_fp16_acc(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Naive kernel that reads C even when beta == 0 (alpha*acc + 0*C).
cudaError_t gemm_f32_mutant_beta0_reads_c(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Tiled kernel missing the __syncthreads() after the compute loop (shared-memory race).
cudaError_t gemm_f32_mutant_missing_sync(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Tiled kernel that iterates k / 32 k-tiles, dropping the partial last one.
cudaError_t gemm_f32_mutant_k_tail(const kernels::GemmF32Args& args, cudaStream_t stream);

/// Synthetic errors (gemm_f32_mutant_synthetic.cu): one k-term dropped; inputs rounded to tf32.
cudaError_t gemm_f32_mutant_drop_one_k(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_mutant_tf32(const kernels::GemmF32Args& args, cudaStream_t stream);

/// Correct product, then zeroes A[0]: an input written by the kernel.
cudaError_t gemm_f32_mutant_writes_input(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Covers only floor(m/8)*8 rows: trailing rows never written.
cudaError_t gemm_f32_mutant_skips_last_row(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Writes one element past the end of every row of C (j <= n).
cudaError_t gemm_f32_mutant_writes_past_end(const kernels::GemmF32Args& args, cudaStream_t stream);

/// Correct for its first 200 launches in the process, then drops the last k term.
cudaError_t gemm_f32_mutant_degrades(const kernels::GemmF32Args& args, cudaStream_t stream);
/// Faults (see gemm_f32_mutant_faults.cu): correct except when k % 7 hits the trigger.
cudaError_t gemm_f32_fault_trap(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_fault_far_write(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_fault_spin(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_fault_misaligned(const kernels::GemmF32Args& args, cudaStream_t stream);

/// Ladder mutants (gemm_f32_mutant_ladder.cu), one per rung.
cudaError_t gemm_f32_mutant_coalesced_row_tail(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_mutant_regblock_swizzle(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_mutant_vec4_misaligned(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_mutant_cpasync_no_wait(const kernels::GemmF32Args& args, cudaStream_t stream);
cudaError_t gemm_f32_mutant_splitk_drops_tail(const kernels::GemmF32Args& args, cudaStream_t stream);

/// GEMM backward mutants (gemm_bwd_mutants.cu).
cudaError_t gemm_bwd_mutant_wrong_sign(const kernels::GemmBwdF32Args& g, cudaStream_t s);
cudaError_t gemm_bwd_mutant_missing_alpha(const kernels::GemmBwdF32Args& g, cudaStream_t s);
cudaError_t gemm_bwd_mutant_transposed(const kernels::GemmBwdF32Args& g, cudaStream_t s);
cudaError_t gemm_bwd_mutant_overwrite(const kernels::GemmBwdF32Args& g, cudaStream_t s);
cudaError_t gemm_bwd_mutant_wrong_row(const kernels::GemmBwdF32Args& g, cudaStream_t s);

/// One mutant: its registry name, launcher, the planted bug and the harness
/// checks expected to catch it. `caught_by` is a comma-separated list of
/// failure kinds, spelled as assay::FailureKind without the k, in snake_case
/// (kGapWritten -> "gap_written"), most likely first.
struct MutantInfo {
  const char* name;
  kernels::GemmF32Launcher launch;
  const char* bug;
  const char* caught_by;
  const char* source;  ///< the .cu file, relative to the project
};

/// Every fp32 GEMM mutant, in a static array; `*count` receives its length
/// (count may be null).
const MutantInfo* gemm_f32_mutants(int* count);

}  // namespace assay::mutants
