// Host references for LayerNorm and RMSNorm forward over rows, templated on the scalar S
// they compute in (double by default; DoubleDouble; Boost.Multiprecision in tests). Each row
// returns what layernorm_bounds / rmsnorm_bounds (harness/bounds.h) need. No CUDA headers.
//   LayerNorm (PyTorch F.layer_norm over the last dim): y = (x - mean) * rstd * gamma + beta,
//     population variance, rstd = 1/sqrt(var + eps); mean and rstd per row as PyTorch saves them.
//   RMSNorm (PyTorch F.rms_norm): y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps).
#pragma once

#include <cmath>
#include <cstdint>

#include "references/host/reductions.h"

namespace assay::ref {

/// Per-row results of layernorm_reference.
template <typename S>
struct LayerNormRowStats {
  S mean = 0, var = 0, rstd = 0;           ///< var: population (ddof 0)
  S mean_abs = 0, max_abs = 0, range = 0;  ///< A, X, W of the row (variance_bounds)
  S max_abs_gamma = 1;                     ///< max |gamma_i| (1 without weights)
};

/// rows x n inputs (row r at x + r*ld); gamma, beta: n each or null (1, 0); y and mag: rows x n
/// contiguous, mag_i = |gamma_i xhat_i| (layernorm_bounds' magnitude; may be null); stats may be null.
/// The statistics are the corrected two-pass of variance_reference, in S.
template <typename S, typename In, typename W = In>
void layernorm_reference(const In* x, int64_t rows, int64_t n, int64_t ld, const W* gamma, const W* beta, double eps,
                         S* y, S* mag, LayerNormRowStats<S>* stats, int threads = 1) {
  using std::abs;
  using std::sqrt;
  S max_gamma = 1;
  if (gamma != nullptr) {
    max_gamma = 0;
    for (int64_t i = 0; i < n; ++i)
      if (abs(S(gamma[i])) > max_gamma) max_gamma = abs(S(gamma[i]));
  }
  detail::parallel_rows(rows, 4 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const In* xr = x + r * ld;
      const VarianceResult<S> v = variance_reference<S>(xr, n, 0);
      LayerNormRowStats<S> st;
      st.mean = v.mean;
      st.var = v.var;
      st.rstd = S(1) / sqrt(v.var + S(eps));
      st.mean_abs = v.mean_abs;
      st.max_abs = v.max_abs;
      st.range = v.range;
      st.max_abs_gamma = max_gamma;
      for (int64_t i = 0; i < n; ++i) {
        const S xhat = (S(xr[i]) - st.mean) * st.rstd;
        const S g = gamma != nullptr ? S(gamma[i]) : S(1);
        const S bt = beta != nullptr ? S(beta[i]) : S(0);
        y[r * n + i] = g * xhat + bt;
        if (mag != nullptr) mag[r * n + i] = abs(g * xhat);
      }
      if (stats != nullptr) stats[r] = st;
    }
  });
}

/// Per-row results of rmsnorm_reference.
template <typename S>
struct RmsNormRowStats {
  S mean_sq = 0, rstd = 0;  ///< mean(x^2) (rmsnorm_bounds' argument) and 1/sqrt(mean_sq + eps)
};

/// rows x n inputs (row r at x + r*ld); gamma: n or null; y: rows x n contiguous; stats may be null.
template <typename S, typename In, typename W = In>
void rmsnorm_reference(const In* x, int64_t rows, int64_t n, int64_t ld, const W* gamma, double eps, S* y,
                       RmsNormRowStats<S>* stats, int threads = 1) {
  using std::sqrt;
  detail::parallel_rows(rows, 3 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const In* xr = x + r * ld;
      S ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += S(xr[i]) * S(xr[i]);
      RmsNormRowStats<S> st;
      st.mean_sq = ss / S(static_cast<double>(n));
      st.rstd = S(1) / sqrt(st.mean_sq + S(eps));
      for (int64_t i = 0; i < n; ++i) {
        const S g = gamma != nullptr ? S(gamma[i]) : S(1);
        y[r * n + i] = S(xr[i]) * st.rstd * g;
      }
      if (stats != nullptr) stats[r] = st;
    }
  });
}

}  // namespace assay::ref
