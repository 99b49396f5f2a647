#include "harness/gpu/cuda_check.h"

#include <fmt/format.h>

namespace assay {

Status cuda_status(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return ok_status();
  return internal_error(
      fmt::format("{} failed: {} ({}) at {}:{}", call, cudaGetErrorName(e), cudaGetErrorString(e), file, line));
}

Status cublas_status(cublasStatus_t e, const char* call, const char* file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return ok_status();
  return internal_error(fmt::format("{} failed: {} at {}:{}", call, cublasGetStatusName(e), file, line));
}

}  // namespace assay
