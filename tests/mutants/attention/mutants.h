// Planted-bug ("mutant") attention kernels. Each is a minimal edit of
// the kernel it replaces in kernels/attention/, with the SAME signature as that
// launcher, registered as a [mutant] variant through the spec's own binding
// (properties/attention.h). Each .cu file's header names the bug, the
// cases that expose it and the check expected to catch it.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/attention/attention.h"

namespace assay::mutants::attention {

using kernels::attention::AttnShape;
using kernels::attention::Dt;

/// Replaces flash_fwd: the last key tile is used whole (no k0 + j < Sk guard on the loads or the scores).
cudaError_t attn_tail_guard(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                            const void* v, int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo,
                            float* lse, cudaStream_t stream);
/// Replaces flash_fwd: causal visibility j <= i + 1 (one key of the future leaks in).
cudaError_t attn_causal_off_by_one(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                                   const void* v, int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo,
                                   float* lse, cudaStream_t stream);
/// Replaces flash_fwd: l and o are not rescaled by exp(m_old - m_new) when a tile raises the max.
cudaError_t attn_no_rescale(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                            const void* v, int64_t ldv, const float* mask, int64_t ldm, void* o, int64_t ldo,
                            float* lse, cudaStream_t stream);
/// Replaces flash_bwd: dV_j accumulates P_ij dO_{i+1} (the next row of the query tile, wrapping).
cudaError_t attn_dv_wrong_row(Dt dt, const AttnShape& s, const void* q, int64_t ldq, const void* k, int64_t ldk,
                              const void* v, int64_t ldv, const void* o, int64_t ldo, const void* dout, int64_t lddo,
                              const float* lse, const float* mask, int64_t ldm, void* dq, int64_t lddq, void* dk,
                              int64_t lddk, void* dv, int64_t lddv, cudaStream_t stream);

}  // namespace assay::mutants::attention
