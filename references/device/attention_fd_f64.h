// The gradcheck relation's directional derivative of the attention forward on the device:
// J u for O = softmax(S) V as a function of (Q, K, V), by central differences of an fp64
// forward, each output with its error estimate, as the host's fd_directional
// (harness/gradcheck.h) forms them for attention_bwd's relation (properties/attention.cpp
// properties_bwd):
//   - the direction u is the relation's sign direction (harness/gradcheck_direction.h) over
//     Q, K, V packed dense one after another, the host's packing;
//   - the step h is fd::step of the largest relative move (harness/fd_core.h);
//   - the forward at x + t u, t = h, -h, h/2, -h/2, one block per (query row, point), gives O
//     and the bound on its own rounding (ref::attn_fd_mag_weight, the host forward's);
//   - per output, fd::estimate (Richardson) gives J u and its error; per input, fd::u_eff the
//     direction actually differenced.
// A non-finite input makes every J u NaN, so the relation's sums skip the case, as the host
// skips it. The forward's sums run in another order than the host's (parallel reductions over
// the keys): J u differs from the host's by the rounding the error estimate already carries.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/scratch.h"
#include "harness/status.h"
#include "references/device/attention_f64_row.h"

namespace assay::device_ref {

/// Inputs (the snapshot: Q, K, V in the case's dtype, the prepared mask fp32), the direction's
/// seed, and the scratch arrays (attention_fd_f64_scratch).
struct AttentionFdIo {
  InputRows q, k, v, mask;
  uint64_t seed = 0;
  double forward_ulps = 16;  ///< the forward's rounding in units of u times its magnitude (FdOptions)
  double* h = nullptr;       ///< 1: the step (NaN for a non-finite input)
  double* x = nullptr;       ///< 4 n: x + t u for the four t, packed
  double* s = nullptr;       ///< 4 (row, key) pairs: scores, then probabilities
  double* smag = nullptr;    ///< 4 pairs: the scores' magnitudes
  double* y = nullptr;       ///< 4 m: O at each point
  double* mag = nullptr;     ///< 4 m: O's rounding bound at each point
  double* jvp = nullptr;     ///< m: J u
  double* err = nullptr;     ///< m: its error estimate
  double* u_eff = nullptr;   ///< n: the direction actually differenced, packed
};

/// Elements of the packed (Q, K, V): n. O's elements: m = rows x D.
inline int64_t attention_fd_inputs(const AttentionF64Problem& p) {
  return (p.B * p.H * p.Sq + 2 * p.B * p.Hkv * p.Sk) * p.D;
}

/// The scratch arrays into io, in order from `s` (a counting carver gives the bytes).
inline void attention_fd_f64_scratch(const AttentionF64Problem& p, ScratchCarver& s, AttentionFdIo& io) {
  const int64_t n = attention_fd_inputs(p), rows = p.B * p.H * p.Sq, m = rows * p.D, pairs = rows * p.Sk;
  io.h = s.take<double>(1);
  io.x = s.take<double>(4 * n);
  io.s = s.take<double>(4 * pairs);
  io.smag = s.take<double>(4 * pairs);
  io.y = s.take<double>(4 * m);
  io.mag = s.take<double>(4 * m);
  io.jvp = s.take<double>(m);
  io.err = s.take<double>(m);
  io.u_eff = s.take<double>(n);
}

/// J u, its error and u_eff into io's arrays: four launches on `stream`, no wait.
Status attention_fd_f64(const AttentionF64Problem& p, const AttentionFdIo& io, cudaStream_t stream);

}  // namespace assay::device_ref
