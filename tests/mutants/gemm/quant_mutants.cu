// Planted bugs of the quantised GEMMs: the kernels of kernels/gemm/gemm_quant_impl.cuh, each
// instantiated with one fault (tests/mutants/gemm/quant_mutants.h).
#include "kernels/gemm/gemm_quant_impl.cuh"
#include "tests/mutants/gemm/quant_mutants.h"

namespace assay::mutants::quant {

namespace k = assay::kernels::quant;

cudaError_t int8_scale_by_row(const k::GemmInt8Args& args, cudaStream_t stream) {
  return k::launch_gemm_int8<k::QuantFault::kScaleByRow>(args, stream);
}
cudaError_t int8_fp32_acc(const k::GemmInt8Args& args, cudaStream_t stream) {
  return k::launch_gemm_int8<k::QuantFault::kFp32Acc>(args, stream);
}
cudaError_t int8_k_tail(const k::GemmInt8Args& args, cudaStream_t stream) {
  return k::launch_gemm_int8<k::QuantFault::kDropKTail>(args, stream);
}
cudaError_t fp8_ignore_scale_b(const k::GemmFp8Args& args, cudaStream_t stream) {
  return k::launch_gemm_fp8<k::QuantFault::kIgnoreScaleB>(args, stream);
}

}  // namespace assay::mutants::quant
