// Row-wise and elementwise kernels (issue 8): softmax / log-softmax,
// LayerNorm, RMSNorm, GELU (erf, tanh) and SiLU, rotary position embedding,
// embedding lookup, fused softmax + cross-entropy. Forward and backward.
//
// Conventions for every launcher:
// - `Dt` is the storage type of the activations (x, y, dy, dx, gamma, beta,
//   logits, dlogits, embedding tables); statistics and accumulation are fp32.
// - 2-D tensors are row-major with a row stride `ld*` in elements, ld >= n;
//   pointers already point at element [0][0]; nothing outside the view is
//   read or written (padded rows hold canaries).
// - Any rows / n / count >= 0 is valid (0: nothing launched); n need not be a
//   multiple of any vector width, and pointers need not be 16-byte aligned.
// - Launchers return the launch status (cudaGetLastError) and never sync.
// kernels/ includes nothing from harness/ or references/.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::kernels::rowwise {

enum class Dt : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

// ---- softmax ------------------------------------------------------------------------------
/// y = softmax(x) per row (log: y = log_softmax(x)), online single pass over x
/// (running max and rescaled sum, Milakov and Gimelshein 2018), then one pass
/// writing y. A row of all -inf gives NaN (as PyTorch); +inf gives NaN too.
cudaError_t softmax_fwd(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t n, bool log,
                        cudaStream_t s);
/// dx = y (dy - sum_j y_j dy_j)  (log: dx = dy - exp(y) sum_j dy_j), from the saved output y.
cudaError_t softmax_bwd(Dt dt, const void* y, int64_t ldy, const void* dy, int64_t lddy, void* dx, int64_t lddx,
                        int64_t rows, int64_t n, bool log, cudaStream_t s);

// ---- LayerNorm / RMSNorm --------------------------------------------------------------------
/// y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps), population
/// variance by Welford (fp32); mean and rstd (fp32, `rows` each) saved for
/// the backward. gamma, beta: n values each; beta may be null (no bias).
cudaError_t layernorm_fwd(Dt dt, const void* x, int64_t ldx, const void* gamma, const void* beta, void* y, int64_t ldy,
                          float* mean, float* rstd, int64_t rows, int64_t n, float eps, cudaStream_t s);
/// dx (overwritten), dgamma and dbeta (fp32, n each, overwritten; reductions
/// over rows, deterministic), from x, dy, gamma and the saved mean/rstd.
/// dbeta may be null.
cudaError_t layernorm_bwd(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy, const void* gamma,
                          const float* mean, const float* rstd, void* dx, int64_t lddx, float* dgamma, float* dbeta,
                          int64_t rows, int64_t n, cudaStream_t s);
/// y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps) (fp32, saved).
cudaError_t rmsnorm_fwd(Dt dt, const void* x, int64_t ldx, const void* gamma, void* y, int64_t ldy, float* rstd,
                        int64_t rows, int64_t n, float eps, cudaStream_t s);
/// dx (overwritten) and dgamma (fp32, n, overwritten, deterministic).
cudaError_t rmsnorm_bwd(Dt dt, const void* x, int64_t ldx, const void* dy, int64_t lddy, const void* gamma,
                        const float* rstd, void* dx, int64_t lddx, float* dgamma, int64_t rows, int64_t n,
                        cudaStream_t s);

// ---- activations (contiguous, `count` elements) ---------------------------------------------
enum class Act : int32_t {
  kGeluErf = 0,   ///< 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh = 1,  ///< 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kSilu = 2,      ///< x sigmoid(x)
};
cudaError_t activation_fwd(Dt dt, Act act, const void* x, void* y, int64_t count, cudaStream_t s);
/// dx = dy * act'(x).
cudaError_t activation_bwd(Dt dt, Act act, const void* x, const void* dy, void* dx, int64_t count, cudaStream_t s);

// ---- rotary position embedding ---------------------------------------------------------------
/// x: tokens*heads rows of head_dim (row t*heads + h, row stride ldx); token t
/// at position t. Angle theta_{t,i} = t * base^(-2i/head_dim), i < head_dim/2
/// (head_dim even), computed in fp32 by the kernel. Pairs: half-split
/// (i, i + head_dim/2) or interleaved (2i, 2i+1). (a, b) -> (a cos - b sin,
/// a sin + b cos); inverse rotates by -theta (the backward: dx from dy).
cudaError_t rope(Dt dt, const void* x, int64_t ldx, void* y, int64_t ldy, int64_t tokens, int64_t heads,
                 int64_t head_dim, float base, bool interleaved, bool inverse, cudaStream_t s);

// ---- embedding ----------------------------------------------------------------------------------
/// out[r][:] = table[idx[r]][:] for r < count (dim columns; table vocab rows,
/// row stride ldt; out row stride ldo). Declared out-of-range behaviour: an
/// index outside [0, vocab) writes a row of zeros (and reads nothing).
cudaError_t embedding_fwd(Dt dt, const int32_t* idx, int64_t count, const void* table, int64_t ldt, int64_t vocab,
                          int64_t dim, void* out, int64_t ldo, cudaStream_t s);
/// dtable[idx[r]][:] += dout[r][:] (fp32 dtable, accumulated with atomics:
/// duplicate indices sum, order unspecified); out-of-range indices ignored.
cudaError_t embedding_bwd(Dt dt, const int32_t* idx, int64_t count, const void* dout, int64_t lddo, float* dtable,
                          int64_t lddt, int64_t vocab, int64_t dim, cudaStream_t s);

// ---- fused softmax + cross-entropy ----------------------------------------------------------
/// Per row r (class-index target c = target[r], n classes, smoothing eps,
/// q_j = (1 - eps)[j == c] + eps/n):
///   loss[r] = -sum_j q_j log_softmax(x)_j, dlogits[r][j] = softmax(x)_j - q_j,
/// i.e. reduction 'none', and dlogits the gradient of sum_r loss[r]. A row with
/// c == ignore_index has loss 0 and dlogits 0. A target outside [0, n) that is
/// not ignore_index: loss NaN and dlogits NaN for that row (declared).
cudaError_t cross_entropy_fwd_bwd(Dt dt, const void* logits, int64_t ldx, const int32_t* target, int64_t rows,
                                  int64_t n, int64_t ignore_index, float smoothing, float* loss, void* dlogits,
                                  int64_t lddx, cudaStream_t s);

}  // namespace assay::kernels::rowwise
