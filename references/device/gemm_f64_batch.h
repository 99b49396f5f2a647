// Batched mixed-input fp64 GEMM reference on the GPU: many small strided-batched GEMMs of any
// stored input type (fp32 / tf32, fp16, bf16, fp8 e4m3 / e5m2, int8, int32 C) with per-tensor
// scales, decoded from one device image and computed in fp64 in one launch, each element in the
// host reference's order (gemm_f64_batch_core.h), so that ref and mag are the host's bits.
// Where the host reference would make the CPU the bottleneck of a campaign of many small
// GEMMs (assay false-alarm), this replaces it; the host keeps checking a sample.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/status.h"
#include "references/device/gemm_f64_batch_core.h"

namespace assay::device_ref {

/// Enqueues the reference of `tiles` (each a 16 x 16 output block of one problem entry) on
/// `stream`: problems, tiles, image, ref and mag are device pointers. Does not synchronise.
Status gemm_f64_batch(const F64GemmProblem* problems, const F64GemmTile* tiles, int64_t tile_count,
                      const unsigned char* image, double* ref, double* mag, cudaStream_t stream);

}  // namespace assay::device_ref
