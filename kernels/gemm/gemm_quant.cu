// The quantised GEMM kernels (kernels/gemm/gemm_quant.h); device code in gemm_quant_impl.cuh.
#include "kernels/gemm/gemm_quant.h"
#include "kernels/gemm/gemm_quant_impl.cuh"

namespace assay::kernels::quant {

cudaError_t gemm_int8_dp4a(const GemmInt8Args& args, cudaStream_t stream) {
  return launch_gemm_int8<QuantFault::kNone>(args, stream);
}

cudaError_t gemm_fp8_simt(const GemmFp8Args& args, cudaStream_t stream) {
  return launch_gemm_fp8<QuantFault::kNone>(args, stream);
}

}  // namespace assay::kernels::quant
