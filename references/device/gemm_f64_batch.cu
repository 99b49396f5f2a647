#include "references/device/gemm_f64_batch.h"

#include <algorithm>

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

// One block per tile, one thread per output element: each element's k-loop is the host's
// sequential order (gemm_f64_batch_core.h), so no split of k and no reduction across threads.
// Threads of a warp share a row of A (a broadcast load) and read consecutive columns of B.
__global__ void __launch_bounds__(kF64TileRows * kF64TileCols)
    f64_gemm_batch_kernel(const F64GemmProblem* problems, const F64GemmTile* tiles, const unsigned char* image,
                          double* ref, double* mag) {
  const F64GemmTile t = tiles[blockIdx.x];
  const F64GemmProblem p = problems[t.problem];  // a copy in registers: read once
  const int64_t i = t.i0 + static_cast<int64_t>(threadIdx.y), j = t.j0 + static_cast<int64_t>(threadIdx.x);
  if (i >= p.m || j >= p.n) return;
  f64_gemm_element(p, image, t.entry, i, j, ref, mag);
}

}  // namespace

Status gemm_f64_batch(const F64GemmProblem* problems, const F64GemmTile* tiles, int64_t tile_count,
                      const unsigned char* image, double* ref, double* mag, cudaStream_t stream) {
  // Blocks in x: up to 2^31 - 1, far beyond any staging image's tiles.
  for (int64_t first = 0; first < tile_count; first += int64_t{1} << 30) {
    const int64_t n = std::min<int64_t>(tile_count - first, int64_t{1} << 30);
    f64_gemm_batch_kernel<<<static_cast<unsigned>(n), dim3(kF64TileCols, kF64TileRows), 0, stream>>>(
        problems, tiles + first, image, ref, mag);
    CUDA_CHECK(cudaGetLastError());
  }
  return ok_status();
}

}  // namespace assay::device_ref
