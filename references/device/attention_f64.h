// fp64 reference of the attention forward (O and LSE) on the GPU, with the
// per-element ceilings of properties/attention.cpp computed beside it: one block
// per query row runs the phases of attention_f64_row.h (scores, softmax, the
// score-error terms, O = P V with the bound's sums, the row's softmax and
// log-softmax ceilings of harness/bound_core.h), the host reference's own steps
// (references/host/attention.h) in its order, compiled without contracted
// multiply-adds. Q, K, V (and O) fp32, fp16 or bf16, read widened exactly, O's
// tolerance with its dtype's store rounding (harness/ulp_core.h), the mask and
// LSE fp32; a mask is read as given (its fully masked rows are written first, by
// attention_mask_rows, as the host path's prepare hook writes them). Checked against the host
// reference and bound on the CPU (tests/references/attention_device_ref_test.cpp: the same
// phases) and on the GPU
// (tests/references/attention_device_ref_gpu_test.cpp).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/status.h"
#include "references/device/attention_f64_row.h"

namespace assay::device_ref {

/// Largest head dimension and key count the kernel takes (a block of 128 threads, one per
/// head-dimension column; three doubles of shared memory per key).
inline constexpr int64_t kAttentionF64MaxD = 128, kAttentionF64MaxSk = 8192;

/// O, LSE and their tolerances into io's outputs. Asynchronous on `stream`; checks the
/// launch error.
Status attention_fwd_f64_reference(const AttentionF64Problem& p, const AttentionF64Io& io, cudaStream_t stream);

/// Rows 0, every, 2 every, ... of an fp32 mask (rows x cols, row stride ld) set to -inf: the
/// device twin of the host prepare's fully masked query rows (properties/attention.cpp
/// mask_rows), applied to the drawn mask before any reference or launch reads it.
Status attention_mask_rows(float* mask, int64_t rows, int64_t cols, int64_t ld, int64_t every, cudaStream_t stream);

}  // namespace assay::device_ref
