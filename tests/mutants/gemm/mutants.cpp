// Registry of the fp32 GEMM mutants (plain C++: the kernels live in the .cu files).
#include "tests/mutants/gemm/mutants.h"

#include <iterator>

namespace assay::mutants {
namespace {

constexpr MutantInfo kGemmF32Mutants[] = {
    {"mutant_tail_guard", &gemm_f32_mutant_tail_guard,
     "tiled kernel stores the whole 32x32 tile of C without checking i < m, j < n: writes past the last "
     "row / into the ldc gap when m or n is not a multiple of 32",
     "guard,gap_written,bound,crash", "tests/mutants/gemm/gemm_f32_mutant_tail_guard.cu"},
    {"mutant_wrong_ld", &gemm_f32_mutant_wrong_ld,
     "uses k (m when transposed) as lda and n as ldc, i.e. assumes contiguous A and C; right only when "
     "lda and ldc are unpadded",
     "nan_inf,unwritten,gap_written,bound", "tests/mutants/gemm/gemm_f32_mutant_wrong_ld.cu"},
    {"mutant_fp16_acc", &gemm_f32_mutant_fp16_acc,
     "tiled kernel rounds each product to __half and accumulates with __hadd (u = 2^-11 instead of 2^-24)",
     "bound,nan_inf", "tests/mutants/gemm/gemm_f32_mutant_fp16_acc.cu"},
    {"mutant_beta0_reads_c", &gemm_f32_mutant_beta0_reads_c,
     "computes alpha*acc + beta*C even when beta == 0, so NaN/Inf already in C propagates (0*NaN = NaN)", "nan_inf",
     "tests/mutants/gemm/gemm_f32_mutant_beta0_reads_c.cu"},
    {"mutant_missing_sync", &gemm_f32_mutant_missing_sync,
     "tiled kernel lacks the __syncthreads() between the compute loop and the next k-tile load: fast warps "
     "overwrite shared tiles that slow warps still read; only shows on large shapes (m, n >= 1024, k >= "
     "1024)",
     "exact,bound,nondeterministic", "tests/mutants/gemm/gemm_f32_mutant_missing_sync.cu"},
    {"mutant_k_tail", &gemm_f32_mutant_k_tail,
     "tiled kernel loops over k / 32 k-tiles, silently dropping the last k % 32 terms", "exact,bound",
     "tests/mutants/gemm/gemm_f32_mutant_k_tail.cu"},
    {"mutant_drop_one_k", &gemm_f32_mutant_drop_one_k,
     "naive fp32 loop that skips the single term p = k/2 (k >= 2): one dropped k-term", "bound,exact",
     "tests/mutants/gemm/gemm_f32_mutant_synthetic.cu"},
    {"mutant_tf32", &gemm_f32_mutant_tf32,
     "naive fp32 loop on inputs rounded to tf32 (10 mantissa bits): tf32 where fp32 was promised", "bound,exact",
     "tests/mutants/gemm/gemm_f32_mutant_synthetic.cu"},
    {"mutant_writes_input", &gemm_f32_mutant_writes_input,
     "computes C correctly, then zeroes A[0] (uses an input as scratch)", "input_written",
     "tests/mutants/gemm/gemm_f32_mutant_memory.cu"},
    {"mutant_skips_last_row", &gemm_f32_mutant_skips_last_row,
     "grid covers floor(m/8)*8 rows: up to 7 trailing rows of C never written", "unwritten",
     "tests/mutants/gemm/gemm_f32_mutant_memory.cu"},
    {"mutant_writes_past_end", &gemm_f32_mutant_writes_past_end,
     "column guard off by one (j <= n): one element written past the end of every row of C", "gap_written,guard",
     "tests/mutants/gemm/gemm_f32_mutant_memory.cu"},
    {"mutant_degrades", &gemm_f32_mutant_degrades,
     "correct for its first 200 launches in the process, then drops the last k term", "bound,exact (with --repeat)",
     "tests/mutants/gemm/gemm_f32_mutant_memory.cu"},
    {"mutant_coalesced_row_tail", &gemm_f32_mutant_coalesced_row_tail,
     "coalesced kernel's row loop runs i <= m: the warp past the last row writes row m of C, past its end",
     "guard,gap_written", "tests/mutants/gemm/gemm_f32_mutant_ladder.cu"},
    {"mutant_regblock_swizzle", &gemm_f32_mutant_regblock_swizzle,
     "regblock stores the A tile with rows swapped in pairs (i ^ 1) on odd k slices, read unswizzled: rows trade "
     "k-terms 8..15, 24..31, ... (k > 8 only)",
     "exact,bound", "tests/mutants/gemm/gemm_f32_mutant_ladder.cu"},
    {"mutant_vec4_misaligned", &gemm_f32_mutant_vec4_misaligned,
     "vec4 takes the float4 path on any 16-byte aligned base pointer, ignoring ld % 4: rows not starting on a "
     "multiple of 4 read data shifted by up to 3 elements",
     "bound,exact,nan_inf", "tests/mutants/gemm/gemm_f32_mutant_ladder.cu"},
    {"mutant_cpasync_no_wait", &gemm_f32_mutant_cpasync_no_wait,
     "cpasync without cp.async.wait_group and __syncthreads() before each compute: reads stages still in flight",
     "exact,bound,nan_inf", "tests/mutants/gemm/gemm_f32_mutant_ladder.cu"},
    {"mutant_splitk_drops_tail", &gemm_f32_mutant_splitk_drops_tail,
     "splitk launches k / chunk splits (floor): the last, shorter k chunk is dropped when chunk does not divide k",
     "exact,bound", "tests/mutants/gemm/gemm_f32_mutant_ladder.cu"},
    {"fault_trap", &gemm_f32_fault_trap, "__trap() when k % 7 == 3: the context is lost", "crash",
     "tests/mutants/gemm/gemm_f32_mutant_faults.cu"},
    {"fault_far_write", &gemm_f32_fault_far_write, "store 2^40 bytes past C when k % 7 == 4: illegal address", "crash",
     "tests/mutants/gemm/gemm_f32_mutant_faults.cu"},
    {"fault_spin", &gemm_f32_fault_spin, "spins forever when k % 7 == 5", "hang",
     "tests/mutants/gemm/gemm_f32_mutant_faults.cu"},
    {"fault_misaligned", &gemm_f32_fault_misaligned,
     "16-byte load from a 4-byte aligned address when k % 7 == 6: misaligned address", "crash",
     "tests/mutants/gemm/gemm_f32_mutant_faults.cu"},
};

}  // namespace

const MutantInfo* gemm_f32_mutants(int* count) {
  if (count != nullptr) *count = static_cast<int>(std::size(kGemmF32Mutants));
  return kGemmF32Mutants;
}

}  // namespace assay::mutants
