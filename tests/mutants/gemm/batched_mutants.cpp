// Planted bugs of the batched GEMM launchers, registered as [mutant] variants of gemm_batched
// (properties/gemm_batched_registry.h). Both are launcher bugs, the kind a batched wrapper
// around a correct kernel gets wrong:
//   mutant_batched_swapped_stride  B advanced by A's batch stride (stride_a for stride_b): every
//                                  entry past the first reads the wrong B (all of them B[0] when
//                                  A is broadcast); caught by the bound.
//   mutant_batched_even_batches    the pointer-array launch covers batch & ~1 entries: the last
//                                  entry of an odd batch is never written; caught as unwritten
//                                  output (the poison check) or, where the poison survives
//                                  nowhere (beta != 0), by the bound.
#include "properties/gemm_batched_registry.h"

namespace assay::gemm_batched {
namespace {

const char* const kSrc = "tests/mutants/gemm/batched_mutants.cpp";

cudaError_t swapped_stride(const BatchedCall& c, cudaStream_t s) {
  return kernels::gemm_f32_tiled_strided_batched(c.g, c.batch, c.stride_a, c.stride_a, c.stride_c, s);
}

cudaError_t even_batches(const BatchedCall& c, cudaStream_t s) {
  return launch_ptr_array(c, c.batch & ~int64_t{1}, s);
}

[[maybe_unused]] const bool kBatchedMutants =
    register_gemm_batched({"mutant_batched_swapped_stride", "strided launcher: B advanced by A's batch stride", true,
                           true, kSrc},
                          swapped_stride) &&
    register_gemm_batched(
        {"mutant_batched_even_batches", "pointer-array launcher: batch & ~1 entries launched", true, true, kSrc},
        even_batches);

}  // namespace
}  // namespace assay::gemm_batched
