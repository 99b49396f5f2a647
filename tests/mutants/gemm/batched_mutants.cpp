// Planted bugs of the batched GEMM launchers, registered as mutant variants of gemm_batched
// (bound through batched_launch, properties/gemm_batched.h). Both are launcher bugs, the kind a
// batched wrapper around a correct kernel gets wrong:
//   mutant_batched_swapped_stride  B advanced by A's batch stride (stride_a for stride_b): every
//                                  entry past the first reads the wrong B (all of them B[0] when
//                                  A is broadcast); caught by the bound, by the NaN/Inf
//                                  pattern where A's larger stride reads past B into the
//                                  arena's NaN canary, or as a crash where it reads past the
//                                  lane's allocation (compute-sanitizer saw one 854 KB beyond
//                                  it): its campaign test runs in worker processes.
//   mutant_batched_even_batches    the pointer-array launch covers batch & ~1 entries: the last
//                                  entry of an odd batch is never written; with beta == 0 its C
//                                  keeps the NaN the BLAS convention puts there (NaN/Inf
//                                  pattern), with beta != 0 its stale C is caught by the bound.
#include "properties/gemm_batched.h"

namespace assay::gemm_batched {
namespace {

const char* const kSrc = "tests/mutants/gemm/batched_mutants.cpp";

cudaError_t swapped_stride(const BatchedCall& c, cudaStream_t s) {
  return kernels::gemm_f32_tiled_strided_batched(c.g, c.batch, c.stride_a, c.stride_a, c.stride_c, s);
}

cudaError_t even_batches(const BatchedCall& c, cudaStream_t s) {
  return launch_ptr_array(c, c.batch & ~int64_t{1}, s);
}

ASSAY_REGISTER(add_variant("gemm_batched", {.name = "mutant_batched_swapped_stride",
                                            .description = "strided launcher: B advanced by A's batch stride",
                                            .launch = batched_launch(swapped_stride),
                                            .mutant = true,
                                            .source = kSrc}));
ASSAY_REGISTER(add_variant("gemm_batched", {.name = "mutant_batched_even_batches",
                                            .description = "pointer-array launcher: batch & ~1 entries launched",
                                            .launch = batched_launch(even_batches),
                                            .mutant = true,
                                            .source = kSrc}));

}  // namespace
}  // namespace assay::gemm_batched
