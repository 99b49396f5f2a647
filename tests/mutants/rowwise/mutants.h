// Planted-bug ("mutant") row-wise and elementwise kernels (issue 8). Each is a
// minimal edit of the kernel it replaces in kernels/rowwise/, a bug a real
// engineer could plausibly write, with the SAME signature as that launcher so
// the harness can run it in the launcher's place and prove that its checks
// fire. A mutant that passes every case is a hole in the harness (or a case set
// too weak to expose it). Each .cu file's header names the bug, the cases that
// expose it and the check expected to catch it.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/rowwise/rowwise.h"

namespace assay::mutants::rowwise {

using kernels::rowwise::Act;
using kernels::rowwise::Dt;

// ---- softmax (softmax_mutants.cu) ---------------------------------------------------------
/// Replaces softmax_fwd: online sum of exp(x) with no running max (overflows for x > ~88).
cudaError_t softmax_no_max(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                           cudaStream_t s);
/// Replaces softmax_fwd: the 16-byte vector path drops the n % pack tail of every aligned row
/// (missing from the sum; left unwritten when y is aligned too).
cudaError_t softmax_vec_tail(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                             cudaStream_t s);
/// Replaces softmax_fwd: __expf / __logf in place of expf / logf (fast-math arithmetic, declared).
cudaError_t softmax_fast_exp(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                             cudaStream_t s);
/// Replaces softmax_bwd: dx = y dy (log: dx = dy), the "- sum" term forgotten.
cudaError_t softmax_bwd_no_sum(Dt dt, const void* y, int64_t ldy, const void* dy, int64_t lddy, void* dx, int64_t lddx,
                               int64_t rows, int64_t n, bool log, cudaStream_t s);

// ---- LayerNorm / RMSNorm (norm_mutants.cu) ------------------------------------------------------
/// Replaces layernorm_fwd: var = E[x^2] - E[x]^2 in fp32 (clamped at 0), one pass.
cudaError_t layernorm_one_pass(Dt dt, const void* x, int64_t ldx, const void* gamma, const void* beta, void* y,
                               int64_t ldy, float* mean, float* rstd, int64_t rows, int64_t n, float eps,
                               cudaStream_t s);
/// Replaces layernorm_bwd: the dgamma / dbeta row loop stops at rows - 1.
cudaError_t layernorm_dbeta_skip_last_row(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy,
                                          const void* gamma, const float* mean, const float* rstd, void* dx,
                                          int64_t lddx, float* dgamma, float* dbeta, int64_t rows, int64_t n,
                                          cudaStream_t s);
/// Replaces layernorm_bwd: block-per-row dx (n > 1024) reads the per-warp partial sums from
/// shared memory without a __syncthreads() after writing them (a data race).
cudaError_t layernorm_bwd_race(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy, const void* gamma,
                               const float* mean, const float* rstd, void* dx, int64_t lddx, float* dgamma,
                               float* dbeta, int64_t rows, int64_t n, cudaStream_t s);
/// Replaces rmsnorm_fwd: rstd = 1/sqrt(mean(x^2)), eps ignored.
cudaError_t rmsnorm_no_eps(Dt dt, const void* x, int64_t ldx, const void* gamma, void* y, int64_t ldy, float* rstd,
                           int64_t rows, int64_t n, float eps, cudaStream_t s);

// ---- activations (activation_mutants.cu) ----------------------------------------------------
/// Replaces activation_fwd: tanh-GELU with c = 0.0447 instead of 0.044715 (other acts correct).
cudaError_t gelu_tanh_wrong_const(Dt dt, Act act, const void* x, void* y, int64_t count, cudaStream_t s);
/// Replaces activation_bwd: silu'(x) = sigmoid(x), the x s (1 - s) term missing (other acts correct).
cudaError_t silu_bwd_missing_term(Dt dt, Act act, const void* x, const void* dy, void* dx, int64_t count,
                                  cudaStream_t s);

// ---- RoPE (rope_mutants.cu) --------------------------------------------------------------------
/// Replaces rope: pairs (i, i + head_dim/2) even when interleaved is true.
cudaError_t rope_wrong_pairing(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t tokens, int64_t heads,
                               int64_t head_dim, float base, bool interleaved, bool inverse, cudaStream_t s);

// ---- embedding (embedding_mutants.cu) ----------------------------------------------------------
/// Replaces embedding_bwd: dtable[idx[r]][j] = dout[r][j], a plain store (no accumulation).
cudaError_t embedding_bwd_overwrite(Dt dt, const int32_t* idx, int64_t count, const void* dout, int64_t lddo,
                                    float* dtable, int64_t lddt, int64_t vocab, int64_t dim, cudaStream_t s);

// ---- cross-entropy (cross_entropy_mutants.cu) --------------------------------------------------
/// Replaces cross_entropy_fwd_bwd: ignore_index not honoured (such rows are computed, or NaN
/// when the index is outside [0, n)).
cudaError_t ce_ignore_index_ignored(Dt dt, const void* logits, int64_t ldx, const int32_t* target, int64_t rows,
                                    int64_t n, int64_t ignore_index, float smoothing, float* loss, void* dlogits,
                                    int64_t lddx, cudaStream_t s);
/// Replaces cross_entropy_fwd_bwd: smoothing mass eps / (n - 1) on each j != c (none on c)
/// instead of eps / n on every class.
cudaError_t ce_smoothing_wrong(Dt dt, const void* logits, int64_t ldx, const int32_t* target, int64_t rows, int64_t n,
                               int64_t ignore_index, float smoothing, float* loss, void* dlogits, int64_t lddx,
                               cudaStream_t s);

/// Embedding forward whose range check accepts index == vocab (reads the row past the table).
cudaError_t embedding_fwd_off_by_one(Dt dt, const int32_t* idx, int64_t count, const void* table, int64_t ldt,
                                     int64_t vocab, int64_t dim, void* out, int64_t ldo, cudaStream_t s);
/// RMSNorm backward without the projection term of d rstd / dx.
cudaError_t rmsnorm_bwd_no_projection(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy,
                                      const void* gamma, const float* rstd, void* dx, int64_t lddx, float* dgamma,
                                      int64_t rows, int64_t n, cudaStream_t s);

}  // namespace assay::mutants::rowwise
