// Host backward references, templated on the scalar S they compute in (double by default;
// long double and Boost.Multiprecision instantiate too; the activations need exp, erfc, sqrt
// and atan of S, which DoubleDouble lacks). Inputs are the kernel's own (already rounded)
// values, converted exactly to S: a backward kernel reads saved tensors (the softmax output,
// LayerNorm's mean and rstd, the pre-activation Z), so the references read the same ones.
// Each gradient comes with the magnitude term a bound needs (harness/bounds.h: tol =
// rel_out |ref| + rel_mag mag + floor), the sum of the absolute values of the terms that
// the gradient adds up, e.g. |alpha| |dC| |op(B)|^T for dA; a null mag pointer skips it.
// Every backward here is validated against central differences of its forward by
// harness/gradcheck (tests/references/backward_ref_test.cpp). No CUDA headers.
//
// Gradients overwrite their outputs; whether a kernel overwrites or accumulates (+=) is
// its spec's declaration, checked by check_write_semantics (harness/gradcheck.h).
//
// Forwards come from references/host/{gemm,softmax,norms}.h; those missing there are here:
// GEMM + bias + activation, the elementwise activations (ReLU, GELU erf and tanh forms,
// SiLU), cross-entropy with label smoothing and reductions, rotary embeddings.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "references/host/gemm.h"
#include "references/host/norms.h"
#include "references/host/reductions.h"
#include "references/host/softmax.h"

namespace assay::ref {

// ---- GEMM ---------------------------------------------------------------------------------------

/// Outputs of gemm_backward; null pointers are skipped. Each gradient is in its tensor's
/// storage layout, contiguous: dA is m x k (k x m when trans_a), dB k x n (n x k when trans_b).
template <typename S>
struct GemmGrads {
  S* da = nullptr;      ///< alpha dC op(B)^T (or its transpose for trans_a)
  S* da_mag = nullptr;  ///< |alpha| |dC| |op(B)|^T, same layout
  S* db = nullptr;      ///< alpha op(A)^T dC (or its transpose for trans_b)
  S* db_mag = nullptr;  ///< |alpha| |op(A)|^T |dC|
  S* dc = nullptr;      ///< m x n: beta dC, the gradient of the C input (one product: mag |beta dC|)
};

/// Backward of C = alpha op(A) op(B) + beta C0 (gemm.h's problem; c unused) given dC
/// (m x n, row r at dc_up + r*ld_dc): each gradient is itself a GEMM, run by gemm_reference,
/// which also returns its magnitude:
///   d op(A) = alpha dC op(B)^T (m x k),  dA = d op(A) or, for trans_a, op(B) dC^T alpha (k x m);
///   d op(B) = alpha op(A)^T dC (k x n),  dB = d op(B) or, for trans_b, alpha dC^T op(A) (n x k).
template <typename S>
void gemm_backward(const GemmProblem<S>& p, const S* dc_up, int64_t ld_dc, const GemmGrads<S>& out, int threads = 1) {
  using std::abs;
  std::vector<S> scratch;
  auto run = [&](GemmProblem<S> q, S* ref, S* mag) {
    q.alpha = p.alpha;
    q.beta = 0;
    q.c = nullptr;
    if (mag == nullptr) {
      scratch.assign(static_cast<size_t>(q.m * q.n), S(0));
      mag = scratch.data();
    }
    gemm_reference(q, ref, mag, threads);
  };
  if (out.da != nullptr) {
    GemmProblem<S> q;
    if (!p.trans_a) {  // m x k = dC (m x n) . op(B)^T (n x k)
      q.m = p.m, q.n = p.k, q.k = p.n;
      q.trans_a = false, q.a = dc_up, q.lda = ld_dc;
      q.trans_b = !p.trans_b, q.b = p.b, q.ldb = p.ldb;
    } else {  // k x m = op(B) (k x n) . dC^T (n x m)
      q.m = p.k, q.n = p.m, q.k = p.n;
      q.trans_a = p.trans_b, q.a = p.b, q.lda = p.ldb;
      q.trans_b = true, q.b = dc_up, q.ldb = ld_dc;
    }
    run(q, out.da, out.da_mag);
  }
  if (out.db != nullptr) {
    GemmProblem<S> q;
    if (!p.trans_b) {  // k x n = op(A)^T (k x m) . dC (m x n)
      q.m = p.k, q.n = p.n, q.k = p.m;
      q.trans_a = !p.trans_a, q.a = p.a, q.lda = p.lda;
      q.trans_b = false, q.b = dc_up, q.ldb = ld_dc;
    } else {  // n x k = dC^T (n x m) . op(A) (m x k)
      q.m = p.n, q.n = p.k, q.k = p.m;
      q.trans_a = true, q.a = dc_up, q.lda = ld_dc;
      q.trans_b = p.trans_a, q.b = p.a, q.ldb = p.lda;
    }
    run(q, out.db, out.db_mag);
  }
  if (out.dc != nullptr) {
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) out.dc[i * p.n + j] = p.beta * dc_up[i * ld_dc + j];
  }
}

// ---- activations --------------------------------------------------------------------------------

/// Pointwise activations (PyTorch names): ReLU, GELU (approximate='none': erf form;
/// 'tanh': 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))), SiLU z sigmoid(z).
enum class Activation : uint8_t { kIdentity, kRelu, kGeluErf, kGeluTanh, kSilu };

namespace detail {
template <typename S>
S pi_of() {
  using std::atan;
  return S(4) * atan(S(1));
}
inline constexpr double kGeluTanhA = 0.044715;
}  // namespace detail

namespace detail {
/// sigmoid(w) = 1 / (1 + exp(-w)): relative accuracy for every w (no 1 - x cancellation).
template <typename S>
S sigmoid(const S& w) {
  using std::exp;
  return S(1) / (S(1) + exp(-w));
}
/// w = sqrt(2/pi) (z + 0.044715 z^3) of the tanh form, and dw/dz.
template <typename S>
S gelu_tanh_arg(const S& z, S* dw) {
  using std::sqrt;
  const S k = sqrt(S(2) / pi_of<S>());
  const S a = S(kGeluTanhA);
  if (dw != nullptr) *dw = k * (S(1) + S(3) * a * z * z);
  return k * (z + a * z * z * z);
}
}  // namespace detail

/// act(z), in forms without cancellation, so that the reference keeps its relative accuracy
/// where a kernel's 0.5 z (1 + erf(z/sqrt2)) loses it (z << 0): GELU = z Phi(z),
/// Phi(z) = erfc(-z/sqrt2)/2; tanh form 0.5 z (1 + tanh w) = z sigmoid(2w); SiLU z sigmoid(z).
template <typename S>
S activation(Activation a, const S& z) {
  using std::erfc;
  using std::sqrt;
  switch (a) {
    case Activation::kIdentity:
      return z;
    case Activation::kRelu:
      return z > S(0) ? z : S(0);
    case Activation::kGeluErf:
      return z * (erfc(-z / sqrt(S(2))) / S(2));
    case Activation::kGeluTanh:
      return z * detail::sigmoid(S(2) * detail::gelu_tanh_arg(z, static_cast<S*>(nullptr)));
    case Activation::kSilu:
      return z * detail::sigmoid(z);
  }
  return z;
}

/// act'(z) (ReLU: 1 for z > 0, else 0, as PyTorch's threshold_backward), and in `mag` (may be
/// null) the sum of the absolute values of its terms: gelu'(z) = Phi(z) + z phi(z),
/// gelu_tanh'(z) = s + 2 z s (1 - s) w' (s = sigmoid(2w)) and silu'(z) = s + z s (1 - s)
/// cancel for z < 0, so a bound needs |first| + |second|, not |act'|. 1 - s is sigmoid(-.).
template <typename S>
S activation_grad(Activation a, const S& z, S* mag = nullptr) {
  using std::abs;
  using std::erfc;
  using std::exp;
  using std::sqrt;
  S first = 0, second = 0;
  switch (a) {
    case Activation::kIdentity:
      first = S(1);
      break;
    case Activation::kRelu:
      first = z > S(0) ? S(1) : S(0);
      break;
    case Activation::kGeluErf:
      first = erfc(-z / sqrt(S(2))) / S(2);
      second = z * exp(-z * z / S(2)) / sqrt(S(2) * detail::pi_of<S>());
      break;
    case Activation::kGeluTanh: {
      S dw = 0;
      const S w = detail::gelu_tanh_arg(z, &dw);
      first = detail::sigmoid(S(2) * w);
      second = S(2) * z * first * detail::sigmoid(-S(2) * w) * dw;
      break;
    }
    case Activation::kSilu:
      first = detail::sigmoid(z);
      second = z * first * detail::sigmoid(-z);
      break;
  }
  if (mag != nullptr) *mag = abs(first) + abs(second);
  return first + second;
}

/// y_i = act(x_i), n values.
template <typename S, typename In>
void activation_forward(Activation a, const In* x, int64_t n, S* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = activation(a, S(x[i]));
}

/// dx_i = dy_i act'(x_i), mag_i = |dy_i| (sum of |terms| of act'(x_i)) (may be null).
template <typename S, typename In, typename G = In>
void activation_backward(Activation a, const In* x, const G* dy, int64_t n, S* dx, S* mag) {
  using std::abs;
  for (int64_t i = 0; i < n; ++i) {
    S gm = 0;
    const S g = activation_grad(a, S(x[i]), &gm);
    dx[i] = S(dy[i]) * g;
    if (mag != nullptr) mag[i] = abs(S(dy[i])) * gm;
  }
}

// ---- GEMM + bias + activation ----------------------------------------------------------------

/// Z = alpha op(A) op(B) + beta C + bias (bias: n values, per column, or null), Y = act(Z);
/// all m x n contiguous. z (the pre-activation a fused kernel saves for its backward) and
/// z_mag = |alpha||A||B| + |beta||C| + |bias| may be null.
template <typename S>
void gemm_bias_act_forward(const GemmProblem<S>& p, const S* bias, Activation act, S* y, S* z, S* z_mag,
                           int threads = 1) {
  using std::abs;
  const auto mn = static_cast<size_t>(p.m * p.n);
  std::vector<S> zs(mn), ms(mn);
  gemm_reference(p, zs.data(), ms.data(), threads);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      S& zij = zs[i * p.n + j];
      if (bias != nullptr) {
        zij += bias[j];
        ms[i * p.n + j] += abs(bias[j]);
      }
      y[i * p.n + j] = activation(act, zij);
      if (z != nullptr) z[i * p.n + j] = zij;
      if (z_mag != nullptr) z_mag[i * p.n + j] = ms[i * p.n + j];
    }
  }
}

/// Outputs of gemm_bias_act_backward beyond the GEMM's; null pointers are skipped.
template <typename S>
struct BiasActGrads {
  S* dz = nullptr;         ///< m x n: dY act'(Z)
  S* dz_mag = nullptr;     ///< m x n: |dY| (sum of |terms| of act'(Z))
  S* dbias = nullptr;      ///< n: sum_i dZ_ij (a reduction over rows)
  S* dbias_mag = nullptr;  ///< n: sum_i |dZ_ij|
};

/// Backward of gemm_bias_act_forward from the saved pre-activation z (m x n) and dY (row r
/// at dy + r*ld_dy): dZ = dY act'(Z), dbias = column sums of dZ, then gemm_backward with
/// dC = dZ (so g.da_mag = |alpha| |dZ| |op(B)|^T: the magnitude of the GEMM on the dZ the
/// kernel computed; dZ's own error is bounded separately through dz_mag).
template <typename S>
void gemm_bias_act_backward(const GemmProblem<S>& p, Activation act, const S* z, const S* dy, int64_t ld_dy,
                            const BiasActGrads<S>& ba, const GemmGrads<S>& g, int threads = 1) {
  using std::abs;
  std::vector<S> dz_local;
  S* dz = ba.dz;
  if (dz == nullptr) {
    dz_local.assign(static_cast<size_t>(p.m * p.n), S(0));
    dz = dz_local.data();
  }
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      S gm = 0;
      const S d = activation_grad(act, z[i * p.n + j], &gm);
      const S up = dy[i * ld_dy + j];
      dz[i * p.n + j] = up * d;
      if (ba.dz_mag != nullptr) ba.dz_mag[i * p.n + j] = abs(up) * gm;
    }
  }
  if (ba.dbias != nullptr || ba.dbias_mag != nullptr) {
    for (int64_t j = 0; j < p.n; ++j) {
      S s = 0, sa = 0;
      for (int64_t i = 0; i < p.m; ++i) {
        s += dz[i * p.n + j];
        sa += abs(dz[i * p.n + j]);
      }
      if (ba.dbias != nullptr) ba.dbias[j] = s;
      if (ba.dbias_mag != nullptr) ba.dbias_mag[j] = sa;
    }
  }
  gemm_backward(p, dz, p.n, g, threads);
}

// ---- softmax, log-softmax -------------------------------------------------------------------------

/// Softmax backward from the saved output y and dy (rows x n, row r at y + r*ld, dy + r*ld):
///   dx_i = y_i (dy_i - s),  s = sum_j y_j dy_j,   mag_i = y_i (|dy_i| + sum_j y_j |dy_j|).
/// dx, mag: rows x n contiguous; mag may be null.
template <typename S, typename In, typename G = In>
void softmax_backward(const In* y, const G* dy, int64_t rows, int64_t n, int64_t ld, S* dx, S* mag, int threads = 1) {
  using std::abs;
  detail::parallel_rows(rows, 3 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const In* yr = y + r * ld;
      const G* gr = dy + r * ld;
      S s = 0, sa = 0;
      for (int64_t j = 0; j < n; ++j) {
        s += S(yr[j]) * S(gr[j]);
        sa += S(yr[j]) * abs(S(gr[j]));
      }
      for (int64_t i = 0; i < n; ++i) {
        dx[r * n + i] = S(yr[i]) * (S(gr[i]) - s);
        if (mag != nullptr) mag[r * n + i] = S(yr[i]) * (abs(S(gr[i])) + sa);
      }
    }
  });
}

/// Log-softmax backward from the saved output z and dz:
///   dx_i = dz_i - exp(z_i) sum_j dz_j,   mag_i = |dz_i| + exp(z_i) sum_j |dz_j|.
template <typename S, typename In, typename G = In>
void log_softmax_backward(const In* z, const G* dz, int64_t rows, int64_t n, int64_t ld, S* dx, S* mag,
                          int threads = 1) {
  using std::abs;
  using std::exp;
  detail::parallel_rows(rows, 3 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const In* zr = z + r * ld;
      const G* gr = dz + r * ld;
      S s = 0, sa = 0;
      for (int64_t j = 0; j < n; ++j) {
        s += S(gr[j]);
        sa += abs(S(gr[j]));
      }
      for (int64_t i = 0; i < n; ++i) {
        const S p = exp(S(zr[i]));
        dx[r * n + i] = S(gr[i]) - p * s;
        if (mag != nullptr) mag[r * n + i] = abs(S(gr[i])) + p * sa;
      }
    }
  });
}

// ---- LayerNorm, RMSNorm -------------------------------------------------------------------------------

/// Outputs of the norm backwards; null pointers are skipped. dx: rows x n contiguous;
/// dgamma, dbeta: n (reductions over rows, summed in row order).
template <typename S>
struct NormGrads {
  S* dx = nullptr;
  S* dx_mag = nullptr;
  S* dgamma = nullptr;
  S* dgamma_mag = nullptr;  ///< sum_r |dy xhat|
  S* dbeta = nullptr;       ///< LayerNorm only
  S* dbeta_mag = nullptr;   ///< sum_r |dy|
};

/// LayerNorm backward (norms.h's forward) from x, dy (row r at x + r*ld, dy + r*ld), gamma
/// (n or null: 1) and the saved per-row mean and rstd (the kernel's own values, or null:
/// recomputed in S as layernorm_reference does, with `eps`). With xhat = (x - mean) rstd,
/// dxhat = dy gamma:
///   dx_i = rstd (dxhat_i - mean_j dxhat_j - xhat_i mean_j(dxhat_j xhat_j)),
///   dgamma_i = sum_r dy_i xhat_i,  dbeta_i = sum_r dy_i.
/// The magnitudes carry the cancellation in x - mean (|mean| >> spread): with
/// xabs_i = (|x_i| + |mean|) rstd >= |xhat_i| (what a computed xhat_i errs relative to),
///   dx_mag_i = rstd (|dxhat_i| + mean_j |dxhat_j| + xabs_i mean_j |dxhat_j| xabs_j),
///   dgamma_mag_i = sum_r |dy_i| xabs_i,  dbeta_mag_i = sum_r |dy_i|.
template <typename S, typename In, typename W = In, typename St = In>
void layernorm_backward(const In* x, const In* dy, int64_t rows, int64_t n, int64_t ld, const W* gamma, const St* mean,
                        const St* rstd, double eps, const NormGrads<S>& out, int threads = 1) {
  using std::abs;
  using std::sqrt;
  std::vector<S> mu(rows), rs(rows);
  detail::parallel_rows(rows, 4 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const In* xr = x + r * ld;
      if (mean != nullptr && rstd != nullptr) {
        mu[r] = S(mean[r]);
        rs[r] = S(rstd[r]);
      } else {
        const VarianceResult<S> v = variance_reference<S>(xr, n, 0);
        mu[r] = v.mean;
        rs[r] = S(1) / sqrt(v.var + S(eps));
      }
      if (out.dx == nullptr && out.dx_mag == nullptr) continue;
      const In* gr = dy + r * ld;
      S m1 = 0, m2 = 0, a1 = 0, a2 = 0;
      for (int64_t i = 0; i < n; ++i) {
        const S g = gamma != nullptr ? S(gamma[i]) : S(1);
        const S xhat = (S(xr[i]) - mu[r]) * rs[r];
        const S dxh = S(gr[i]) * g;
        m1 += dxh;
        m2 += dxh * xhat;
        a1 += abs(dxh);
        a2 += abs(dxh) * (abs(S(xr[i])) + abs(mu[r])) * rs[r];
      }
      const S nn = S(static_cast<double>(n));
      m1 /= nn, m2 /= nn, a1 /= nn, a2 /= nn;
      for (int64_t i = 0; i < n; ++i) {
        const S g = gamma != nullptr ? S(gamma[i]) : S(1);
        const S xhat = (S(xr[i]) - mu[r]) * rs[r];
        const S dxh = S(gr[i]) * g;
        if (out.dx != nullptr) out.dx[r * n + i] = rs[r] * (dxh - m1 - xhat * m2);
        if (out.dx_mag != nullptr)
          out.dx_mag[r * n + i] = rs[r] * (abs(dxh) + a1 + (abs(S(xr[i])) + abs(mu[r])) * rs[r] * a2);
      }
    }
  });
  if (out.dgamma == nullptr && out.dgamma_mag == nullptr && out.dbeta == nullptr && out.dbeta_mag == nullptr) return;
  for (int64_t i = 0; i < n; ++i) {
    S dg = 0, dga = 0, db = 0, dba = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const S up = S(dy[r * ld + i]);
      const S xi = S(x[r * ld + i]);
      dg += up * ((xi - mu[r]) * rs[r]);
      dga += abs(up) * (abs(xi) + abs(mu[r])) * rs[r];
      db += up;
      dba += abs(up);
    }
    if (out.dgamma != nullptr) out.dgamma[i] = dg;
    if (out.dgamma_mag != nullptr) out.dgamma_mag[i] = dga;
    if (out.dbeta != nullptr) out.dbeta[i] = db;
    if (out.dbeta_mag != nullptr) out.dbeta_mag[i] = dba;
  }
}

/// RMSNorm backward (norms.h's forward), rstd saved (or null: 1/sqrt(mean(x^2) + eps) in S).
/// With xhat = x rstd, dxhat = dy gamma:
///   dx_i = rstd (dxhat_i - xhat_i mean_j(dxhat_j xhat_j)),
///   mag_i = rstd (|dxhat_i| + |xhat_i| mean_j |dxhat_j xhat_j|),  dgamma_i = sum_r dy_i xhat_i.
template <typename S, typename In, typename W = In, typename St = In>
void rmsnorm_backward(const In* x, const In* dy, int64_t rows, int64_t n, int64_t ld, const W* gamma, const St* rstd,
                      double eps, const NormGrads<S>& out, int threads = 1) {
  using std::abs;
  using std::sqrt;
  std::vector<S> rs(rows);
  detail::parallel_rows(rows, 4 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const In* xr = x + r * ld;
      if (rstd != nullptr) {
        rs[r] = S(rstd[r]);
      } else {
        S ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += S(xr[i]) * S(xr[i]);
        rs[r] = S(1) / sqrt(ss / S(static_cast<double>(n)) + S(eps));
      }
      if (out.dx == nullptr && out.dx_mag == nullptr) continue;
      const In* gr = dy + r * ld;
      S m2 = 0, a2 = 0;
      for (int64_t i = 0; i < n; ++i) {
        const S g = gamma != nullptr ? S(gamma[i]) : S(1);
        const S t = S(gr[i]) * g * S(xr[i]) * rs[r];
        m2 += t;
        a2 += abs(t);
      }
      const S nn = S(static_cast<double>(n));
      m2 /= nn, a2 /= nn;
      for (int64_t i = 0; i < n; ++i) {
        const S g = gamma != nullptr ? S(gamma[i]) : S(1);
        const S xhat = S(xr[i]) * rs[r];
        const S dxh = S(gr[i]) * g;
        if (out.dx != nullptr) out.dx[r * n + i] = rs[r] * (dxh - xhat * m2);
        if (out.dx_mag != nullptr) out.dx_mag[r * n + i] = rs[r] * (abs(dxh) + abs(xhat) * a2);
      }
    }
  });
  if (out.dgamma == nullptr && out.dgamma_mag == nullptr) return;
  for (int64_t i = 0; i < n; ++i) {
    S dg = 0, dga = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const S t = S(dy[r * ld + i]) * S(x[r * ld + i]) * rs[r];
      dg += t;
      dga += abs(t);
    }
    if (out.dgamma != nullptr) out.dgamma[i] = dg;
    if (out.dgamma_mag != nullptr) out.dgamma_mag[i] = dga;
  }
}

// ---- cross-entropy with logits ---------------------------------------------------------------------

enum class Reduction : uint8_t { kNone, kSum, kMean };

/// PyTorch F.cross_entropy(logits, target, ignore_index, label_smoothing, reduction) with
/// class-index targets. With z = log_softmax(x), eps = label_smoothing, q_j = (1-eps) [j == c] + eps/n:
/// loss_r = -sum_j q_j z_j (0 for an ignored row). kMean divides by the non-ignored rows.
struct CrossEntropyParams {
  int64_t ignore_index = -100;
  double label_smoothing = 0;  ///< in [0, 1]
  Reduction reduction = Reduction::kMean;
};

/// loss: rows values (kNone) or one (kSum, kMean; NaN for kMean when every row is ignored, as
/// PyTorch). A target outside [0, n) that is not ignore_index gives a NaN row (PyTorch raises).
/// Returns the number of non-ignored rows.
template <typename S, typename In>
int64_t cross_entropy_forward(const In* logits, int64_t rows, int64_t n, int64_t ld, const int64_t* target,
                              const CrossEntropyParams& prm, S* loss) {
  std::vector<S> per(rows), z(n);
  int64_t count = 0;
  const S eps = S(prm.label_smoothing);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = target[r];
    if (c == prm.ignore_index) {
      per[r] = 0;
      continue;
    }
    ++count;
    if (c < 0 || c >= n) {
      per[r] = detail::quiet_nan<S>();
      continue;
    }
    log_softmax_row<S>(logits + r * ld, n, z.data(), static_cast<S*>(nullptr));
    S zsum = 0;
    for (int64_t j = 0; j < n; ++j) zsum += z[j];
    per[r] = -(S(1) - eps) * z[c] - eps / S(static_cast<double>(n)) * zsum;
  }
  if (prm.reduction == Reduction::kNone) {
    for (int64_t r = 0; r < rows; ++r) loss[r] = per[r];
  } else {
    S s = 0;
    for (int64_t r = 0; r < rows; ++r) s += per[r];
    loss[0] = prm.reduction == Reduction::kSum ? s
              : count == 0                     ? detail::quiet_nan<S>()
                                               : s / S(static_cast<double>(count));
  }
  return count;
}

/// dlogits_rj = w_r (p_j - q_j), p = softmax(x_r), w_r = dloss_r (kNone), dloss (kSum) or
/// dloss / count (kMean); 0 for ignored rows. mag_rj = |w_r| (p_j + q_j). dloss: rows values
/// (kNone) or one. dlogits, mag: rows x n contiguous; mag may be null.
template <typename S, typename In, typename G = In>
void cross_entropy_backward(const In* logits, int64_t rows, int64_t n, int64_t ld, const int64_t* target,
                            const CrossEntropyParams& prm, const G* dloss, S* dlogits, S* mag) {
  using std::abs;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) count += target[r] != prm.ignore_index ? 1 : 0;
  const S eps = S(prm.label_smoothing);
  std::vector<S> p(n);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = target[r];
    S* dr = dlogits + r * n;
    S* mr = mag != nullptr ? mag + r * n : nullptr;
    if (c == prm.ignore_index) {
      for (int64_t j = 0; j < n; ++j) {
        dr[j] = 0;
        if (mr != nullptr) mr[j] = 0;
      }
      continue;
    }
    S w = prm.reduction == Reduction::kNone ? S(dloss[r]) : S(dloss[0]);
    if (prm.reduction == Reduction::kMean) w /= S(static_cast<double>(count));
    if (c < 0 || c >= n) w = detail::quiet_nan<S>();
    softmax_row<S>(logits + r * ld, n, p.data(), static_cast<S*>(nullptr));
    for (int64_t j = 0; j < n; ++j) {
      const S q = (j == c ? S(1) - eps : S(0)) + eps / S(static_cast<double>(n));
      dr[j] = w * (p[j] - q);
      if (mr != nullptr) mr[j] = abs(w) * (p[j] + q);
    }
  }
}

// ---- rotary position embedding ------------------------------------------------------------------------

/// Which dimensions rotate together: half-split (GPT-NeoX, Llama in HF: i and i + rd/2)
/// or interleaved (GPT-J, Meta's Llama: 2i and 2i + 1), for pair i in [0, rd/2).
enum class RotaryLayout : uint8_t { kHalfSplit, kInterleaved };

/// cos and sin tables, positions x rd/2 each: theta_{p,i} = p base^(-2i/rd) (rd even).
template <typename S>
void rotary_tables(int64_t positions, int64_t rotary_dim, double base, S* cos_t, S* sin_t) {
  using std::cos;
  using std::pow;
  using std::sin;
  const int64_t half = rotary_dim / 2;
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const S theta =
          S(static_cast<double>(p)) * pow(S(base), -S(static_cast<double>(2 * i)) / S(static_cast<double>(rotary_dim)));
      cos_t[p * half + i] = cos(theta);
      sin_t[p * half + i] = sin(theta);
    }
  }
}

namespace detail {
/// Rotates each pair of row r by (cos, sign*sin) of its position; the dims past rotary_dim copy.
template <typename S, typename In, typename T>
void rotary_apply(const In* x, int64_t rows, int64_t d, int64_t ld, int64_t rotary_dim, const T* cos_t, const T* sin_t,
                  const int64_t* pos, RotaryLayout layout, int sign, S* y, S* mag) {
  using std::abs;
  const int64_t half = rotary_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const In* xr = x + r * ld;
    const int64_t p = pos != nullptr ? pos[r] : r;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = layout == RotaryLayout::kHalfSplit ? i : 2 * i;
      const int64_t b = layout == RotaryLayout::kHalfSplit ? i + half : 2 * i + 1;
      const S c = S(cos_t[p * half + i]);
      const S s = S(sign) * S(sin_t[p * half + i]);
      const S xa = S(xr[a]), xb = S(xr[b]);
      y[r * d + a] = xa * c - xb * s;
      y[r * d + b] = xa * s + xb * c;
      if (mag != nullptr) {
        mag[r * d + a] = abs(xa * c) + abs(xb * s);
        mag[r * d + b] = abs(xa * s) + abs(xb * c);
      }
    }
    for (int64_t j = rotary_dim; j < d; ++j) {
      y[r * d + j] = S(xr[j]);
      if (mag != nullptr) mag[r * d + j] = abs(S(xr[j]));
    }
  }
}
}  // namespace detail

/// Rotary embedding of rows x d (row r at x + r*ld, at position pos[r], or r when pos is
/// null): the first rotary_dim (even, <= d) dims rotate in pairs, y_a = x_a cos - x_b sin,
/// y_b = x_a sin + x_b cos; the rest pass through. y, mag (|x_a cos| + |x_b sin|, may be
/// null): rows x d contiguous. cos_t, sin_t: rotary_tables' layout (the kernel's own cache).
template <typename S, typename In, typename T = In>
void rotary_forward(const In* x, int64_t rows, int64_t d, int64_t ld, int64_t rotary_dim, const T* cos_t,
                    const T* sin_t, const int64_t* pos, RotaryLayout layout, S* y, S* mag) {
  detail::rotary_apply<S>(x, rows, d, ld, rotary_dim, cos_t, sin_t, pos, layout, 1, y, mag);
}

/// Backward: the transposed rotation, dx_a = dy_a cos + dy_b sin, dx_b = -dy_a sin + dy_b cos;
/// pass-through dims copy dy. mag = |dy_a cos| + |dy_b sin|.
template <typename S, typename In, typename T = In>
void rotary_backward(const In* dy, int64_t rows, int64_t d, int64_t ld, int64_t rotary_dim, const T* cos_t,
                     const T* sin_t, const int64_t* pos, RotaryLayout layout, S* dx, S* mag) {
  detail::rotary_apply<S>(dy, rows, d, ld, rotary_dim, cos_t, sin_t, pos, layout, -1, dx, mag);
}

}  // namespace assay::ref
