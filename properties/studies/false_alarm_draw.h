// The device half of false_alarm_values.h: one launch draws every region of a batch (A, B,
// the fp8 scales, C of every case) into the device image, each element by fa_region_element,
// the function fa_materialize runs on the host. Compiled with -fmad=false (CMakeLists.txt),
// so the image holds the host's bytes.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/status.h"
#include "properties/studies/false_alarm_values.h"

namespace assay {

/// Threads per block of the drawing kernel and elements per thread: a block draws
/// kFaDrawThreads * kFaDrawPerThread consecutive elements of one region.
inline constexpr int kFaDrawThreads = 256, kFaDrawPerThread = 8;

/// Blocks that draw region r.
inline uint32_t fa_draw_blocks(const FaRegion& r) {
  constexpr int64_t per_block = int64_t{kFaDrawThreads} * kFaDrawPerThread;
  return static_cast<uint32_t>((r.extent + per_block - 1) / per_block);
}

/// Enqueues the drawing of `count` regions into `image` on `stream` (device pointers):
/// block_begin[i] is region i's first block (the running sum of fa_draw_blocks), `blocks`
/// their total. Does not synchronise.
Status fa_draw_regions(const FaRegion* regions, const uint32_t* block_begin, int64_t count, uint32_t blocks,
                       unsigned char* image, cudaStream_t stream);

}  // namespace assay
