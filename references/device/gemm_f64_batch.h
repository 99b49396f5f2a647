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
#include "references/device/gemm_f64_tol.h"

namespace assay::device_ref {

/// Enqueues the reference of `tiles` (each a 16 x 16 output block of one problem entry) on
/// `stream`: problems, tiles, image, ref and mag are device pointers. Does not synchronise.
Status gemm_f64_batch(const F64GemmProblem* problems, const F64GemmTile* tiles, int64_t tile_count,
                      const unsigned char* image, double* ref, double* mag, cudaStream_t stream);

/// Enqueues the reference of every entry of one problem, given by value (no problem or tile
/// list to stage: the op-model device references of gemm_batched, gemm_fp8 and gemm_int8, whose
/// tensors sit in one arena). `image` is the lowest of the tensors' addresses, p.a, p.b, p.c
/// each tensor's byte offset from it; ref and mag get batch * m * n doubles, row-major per entry.
Status gemm_f64_strided(const F64GemmProblem& p, const unsigned char* image, double* ref, double* mag,
                        cudaStream_t stream);

/// Enqueues f64_dot_tol_element over n elements: ref scaled in place, mag replaced by the tolerance.
Status gemm_f64_dot_tol(const F64DotTol& t, double* ref, double* mag, int64_t n, cudaStream_t stream);

/// Enqueues gemm_int8's D (f64_int8_dequant_element) from the m x n accumulator reference
/// `acc`; acc_mag (the accumulator's tolerance: exact) is set to 0.
Status gemm_f64_int8_dequant(const F64Int8Dequant& q, int64_t m, int64_t n, const double* acc, double* acc_mag,
                             double* d_ref, double* d_tol, cudaStream_t stream);

}  // namespace assay::device_ref
