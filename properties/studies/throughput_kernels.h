// Device helpers of assay throughput (properties/studies/throughput.cpp): input fills, a gate that keeps the
// stream busy while the host enqueues the timed work, and the softmax pieces of the composite
// (cuBLAS) attention. dt codes are those of the kernels' Dt enums: 0 fp32, 1 fp16, 2 bf16; the fill
// also takes 3 int8 (40 x N(0, 1) rounded, clamped to +-127) and 4 fp8 e4m3 (saturating).
// Launchers return the launch status and never sync.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::tput {

/// p[i] = scale * N(0, 1) from a counter-based hash of (seed, i), stored rounded to dt.
cudaError_t fill_normal(int dt, void* p, int64_t n, uint64_t seed, float scale, cudaStream_t s);
/// One thread that spins for `ns` nanoseconds of %globaltimer.
cudaError_t gate(uint64_t ns, cudaStream_t s);
/// Row r of S (fp32, rows x sk, packed): P_r = softmax(S_r) stored in dt, causal: key j of query
/// i = r % sq is visible iff j <= i (invisible ones get P = 0). One block per row.
cudaError_t softmax_rows(int dt, const float* S, void* P, int64_t rows, int64_t sq, int64_t sk, bool causal,
                         cudaStream_t s);
/// dS_r = P_r * (dP_r - sum_j P_rj dP_rj), P and dS in dt, dP fp32 (rows x sk, packed).
cudaError_t softmax_bwd_rows(int dt, const void* P, const float* dP, void* dS, int64_t rows, int64_t sk,
                             cudaStream_t s);

}  // namespace assay::tput
