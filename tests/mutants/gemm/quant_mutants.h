// Planted bugs of the quantised GEMMs (kernels/gemm/gemm_quant.h), one launcher each; registered
// as [mutant] variants of gemm_int8 / gemm_fp8 by tests/mutants/gemm/quant_register.cpp.
#pragma once

#include "kernels/gemm/gemm_quant.h"

namespace assay::mutants::quant {

/// int8: per-channel weight scale sw[i mod n] instead of sw[j] (a wrong scale).
cudaError_t int8_scale_by_row(const kernels::quant::GemmInt8Args& args, cudaStream_t stream);
/// int8: the int32 accumulation replaced by fp32 (wrong once a partial sum passes 2^24).
cudaError_t int8_fp32_acc(const kernels::quant::GemmInt8Args& args, cudaStream_t stream);
/// int8: the dp4a path drops the k % 4 leftovers.
cudaError_t int8_k_tail(const kernels::quant::GemmInt8Args& args, cudaStream_t stream);
/// fp8: D = scale_a * (A B), scale_b ignored.
cudaError_t fp8_ignore_scale_b(const kernels::quant::GemmFp8Args& args, cudaStream_t stream);

}  // namespace assay::mutants::quant
