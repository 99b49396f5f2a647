// RMSNorm backward, fp32, one block per row. Given the forward's saved rstd:
//   dx     = rstd (dy * gamma - x rstd * m2),  m2 = mean_j(dy_j gamma_j x_j rstd)
//   dgamma += sum_rows dy * x * rstd          (atomicAdd: accumulated, order varies)
// dgamma is added into, not overwritten: the caller zeroes it (or sums several
// micro-batches into it). Built with --use_fast_math (see CMakeLists.txt).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace demo {

cudaError_t rmsnorm_bwd_atomic(const float* x, int64_t ldx, const float* dy, int64_t lddy, const float* gamma,
                               const float* rstd, float* dx, int64_t lddx, float* dgamma, int64_t rows, int64_t n,
                               cudaStream_t stream);

}  // namespace demo
