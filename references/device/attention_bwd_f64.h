// fp64 reference of the attention backward (dQ, dK, dV) on the GPU, with the per-element
// ceilings of properties/attention.cpp computed beside it, in the host reference's order
// (the phases of attention_bwd_f64_phases.h, compiled without contracted multiply-adds): a
// thread per query row (D_i), per (row, key) pair (score, P, dP, dS and their error terms into
// scratch), then a thread per output element summing its terms serially as the host does.
// Also the device side of attention_bwd's prepare (O and LSE saved as a training step saves
// them, dO rescaled per row), after the forward's device reference (attention_f64.h) has
// computed O and LSE. Checked against the host reference and bound on the CPU
// (tests/references/attention_bwd_device_ref_test.cpp: the same phases) and on the GPU
// (tests/references/attention_bwd_device_ref_gpu_test.cpp).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/scratch.h"
#include "harness/status.h"
#include "references/device/attention_bwd_f64_phases.h"

namespace assay::device_ref {

/// Largest head dimension and key count the backward takes: the forward's, which its prepare
/// runs first.
inline constexpr int64_t kAttentionBwdF64MaxD = 128, kAttentionBwdF64MaxSk = 8192;

/// The backward's scratch arrays into io, in order from `s` (harness/scratch.h): two doubles per
/// query row, four doubles and a flag per (row, key) pair. A counting carver gives the bytes.
inline void attention_bwd_f64_scratch(const AttentionBwdF64Problem& p, ScratchCarver& s, AttentionBwdF64Io& io) {
  io.Di = s.take<double>(p.rows());
  io.Dmag = s.take<double>(p.rows());
  io.P = s.take<double>(p.pairs());
  io.dS = s.take<double>(p.pairs());
  io.ep = s.take<double>(p.pairs());
  io.eds = s.take<double>(p.pairs());
  io.live = s.take<unsigned char>(p.pairs());
}

/// dQ, dK, dV and their tolerances into io's outputs (scratch laid out by
/// attention_bwd_f64_scratch). Asynchronous on `stream`; checks every launch.
Status attention_bwd_f64_reference(const AttentionBwdF64Problem& p, const AttentionBwdF64Io& io, cudaStream_t stream);

/// Writes the prepared O, LSE and dO (attn_bwd_prepare_phase) into io's tensors. Asynchronous
/// on `stream`; checks the launch.
Status attention_bwd_f64_prepare(const AttentionBwdPrepareIo& io, cudaStream_t stream);

}  // namespace assay::device_ref
