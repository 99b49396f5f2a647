// CUDA_CHECK / CUBLAS_CHECK: turn a failed call into a Status carrying the
// call text, file and line, and return it from the enclosing function.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "harness/status.h"

namespace assay {

/// Status for a CUDA runtime result: ok, or internal-error naming the call,
/// the error and file:line. Defined out of line so .cu files avoid fmt.
Status cuda_status(cudaError_t e, const char* call, const char* file, int line);
/// Same for cuBLAS.
Status cublas_status(cublasStatus_t e, const char* call, const char* file, int line);

}  // namespace assay

#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    ::assay::Status assay_cuda_status_ = ::assay::cuda_status((call), #call, __FILE__, __LINE__); \
    if (!assay_cuda_status_.ok()) return assay_cuda_status_;                                      \
  } while (false)

#define CUBLAS_CHECK(call)                                                                            \
  do {                                                                                                \
    ::assay::Status assay_cublas_status_ = ::assay::cublas_status((call), #call, __FILE__, __LINE__); \
    if (!assay_cublas_status_.ok()) return assay_cublas_status_;                                      \
  } while (false)
