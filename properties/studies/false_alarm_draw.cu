// Device drawing of a false-alarm batch (see false_alarm_draw.h). The arithmetic is
// false_alarm_values.h, the host's; this file is compiled with -fmad=false (CMakeLists.txt)
// so that no multiply-add is contracted.
#include "properties/studies/false_alarm_draw.h"

#include "harness/gpu/cuda_check.h"

namespace assay {
namespace {

// One block per kFaDrawThreads * kFaDrawPerThread elements of one region; consecutive threads
// write consecutive elements. The region is the last one whose first block is at or below
// this block (regions without elements take no block).
__global__ void __launch_bounds__(kFaDrawThreads)
    fa_draw_kernel(const FaRegion* regions, const uint32_t* block_begin, int64_t count, unsigned char* image) {
  int64_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (block_begin[mid] <= blockIdx.x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const FaRegion r = regions[lo];
  const int64_t first = static_cast<int64_t>(blockIdx.x - block_begin[lo]) * kFaDrawThreads * kFaDrawPerThread;
  for (int e = 0; e < kFaDrawPerThread; ++e) {
    const int64_t lin = first + int64_t{e} * kFaDrawThreads + threadIdx.x;
    if (lin < r.extent) fa_region_element(r, lin, image);
  }
}

}  // namespace

Status fa_draw_regions(const FaRegion* regions, const uint32_t* block_begin, int64_t count, uint32_t blocks,
                       unsigned char* image, cudaStream_t stream) {
  if (count == 0 || blocks == 0) return ok_status();
  if (blocks > 0x7fffffffu) return invalid_argument("false-alarm: a batch too large for one drawing launch");
  fa_draw_kernel<<<blocks, kFaDrawThreads, 0, stream>>>(regions, block_begin, count, image);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay
