// Host references for softmax, log-softmax and cross-entropy over rows, templated on the
// scalar S they compute in (double by default; DoubleDouble; Boost.Multiprecision in tests).
// Max-subtraction first (t = x - max), then exp, sum, divide / subtract the log: the
// formulation whose error softmax_bounds, log_softmax_bounds and cross_entropy_bounds
// (harness/bounds.h) analyse, and whose magnitudes each row returns. No CUDA headers.
//
// Special values follow IEEE arithmetic, which is what PyTorch produces:
//   -inf entries          y = 0, log-softmax -inf (exp(-inf) = 0)
//   every entry -inf      max = -inf, x - max = NaN: the whole row NaN (softmax, log-softmax, loss)
//   a +inf entry          max = +inf, inf - inf = NaN: the whole row NaN
//   a NaN entry           the whole row NaN
//   target logit -inf     (others finite) loss +inf
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "references/host/reductions.h"

namespace assay::ref {

/// What the bounds need per row, beside the outputs.
template <typename S>
struct SoftmaxRowStats {
  S max = 0;           ///< row maximum (-inf when all -inf, NaN when any NaN)
  S sum_exp = 0;       ///< Z = sum exp(x_j - max), >= 1 for a finite max
  S log_sum_exp = 0;   ///< L = log Z in [0, log n]; the row's logsumexp is max + L
  S weighted_dev = 0;  ///< D = sum_j y_j |x_j - max| (terms with y_j = 0 skipped)
};

namespace detail {

/// NaN-propagating maximum of a row.
template <typename S, typename In>
S row_max(const In* x, int64_t n) {
  S m = S(-std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < n; ++i) {
    const S v = S(x[i]);
    if (is_nan(v)) return v;
    if (v > m) m = v;
  }
  return m;
}

/// max, Z, L and D of a row; e (n values, may be null) receives exp(x_i - max).
template <typename S, typename In>
SoftmaxRowStats<S> softmax_stats(const In* x, int64_t n, S* e) {
  using std::abs;
  using std::exp;
  using std::log;
  SoftmaxRowStats<S> st;
  st.max = row_max<S>(x, n);
  for (int64_t i = 0; i < n; ++i) {
    const S ei = exp(S(x[i]) - st.max);
    if (e != nullptr) e[i] = ei;
    st.sum_exp += ei;
  }
  st.log_sum_exp = log(st.sum_exp);
  for (int64_t i = 0; i < n; ++i) {
    const S t = S(x[i]) - st.max;
    const S y = exp(t) / st.sum_exp;
    if (y != S(0)) st.weighted_dev += y * abs(t);
  }
  return st;
}

}  // namespace detail

/// Softmax of one row of n values: y_i = exp(x_i - max) / Z, mag_i = y_i |x_i - max| (0 where
/// y_i == 0; the softmax_bounds magnitude). y and mag may alias nothing; mag may be null.
template <typename S, typename In>
SoftmaxRowStats<S> softmax_row(const In* x, int64_t n, S* y, S* mag) {
  using std::abs;
  const SoftmaxRowStats<S> st = detail::softmax_stats<S>(x, n, y);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = y[i] / st.sum_exp;
    if (mag != nullptr) mag[i] = y[i] == S(0) ? S(0) : y[i] * abs(S(x[i]) - st.max);
  }
  return st;
}

/// Log-softmax of one row: z_i = (x_i - max) - L, mag_i = |x_i - max| (log_softmax_bounds'
/// magnitude; +inf for -inf entries, whose z is -inf). mag may be null.
template <typename S, typename In>
SoftmaxRowStats<S> log_softmax_row(const In* x, int64_t n, S* z, S* mag) {
  using std::abs;
  const SoftmaxRowStats<S> st = detail::softmax_stats<S>(x, n, static_cast<S*>(nullptr));
  for (int64_t i = 0; i < n; ++i) {
    const S t = S(x[i]) - st.max;
    z[i] = t - st.log_sum_exp;
    if (mag != nullptr) mag[i] = abs(t);
  }
  return st;
}

/// rows x n logits, row r at x + r*ld; y, mag: rows x n contiguous; stats: one per row (may be null).
template <typename S, typename In>
void softmax_reference(const In* x, int64_t rows, int64_t n, int64_t ld, S* y, S* mag, SoftmaxRowStats<S>* stats,
                       int threads = 1) {
  detail::parallel_rows(rows, 3 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const SoftmaxRowStats<S> st = softmax_row<S>(x + r * ld, n, y + r * n, mag == nullptr ? nullptr : mag + r * n);
      if (stats != nullptr) stats[r] = st;
    }
  });
}

template <typename S, typename In>
void log_softmax_reference(const In* x, int64_t rows, int64_t n, int64_t ld, S* z, S* mag, SoftmaxRowStats<S>* stats,
                           int threads = 1) {
  detail::parallel_rows(rows, 3 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const SoftmaxRowStats<S> st =
          log_softmax_row<S>(x + r * ld, n, z + r * n, mag == nullptr ? nullptr : mag + r * n);
      if (stats != nullptr) stats[r] = st;
    }
  });
}

// ---- cross-entropy ------------------------------------------------------------------------------

/// One row of cross-entropy (PyTorch F.cross_entropy with class indices, reduction='none').
template <typename S>
struct CrossEntropyRow {
  S loss = 0;        ///< log Z - (x_c - max) = logsumexp(x) - x_c; 0 when ignored
  S target_dev = 0;  ///< |x_c - max|: cross_entropy_bounds' magnitude
  SoftmaxRowStats<S> stats;
  bool ignored = false;  ///< target == ignore_index
};

/// rows x n logits (row r at logits + r*ld), target class per row. A target outside [0, n)
/// that is not ignore_index gives a NaN loss (PyTorch raises).
template <typename S, typename In>
void cross_entropy_reference(const In* logits, int64_t rows, int64_t n, int64_t ld, const int64_t* target,
                             CrossEntropyRow<S>* out, int threads = 1, int64_t ignore_index = -100) {
  using std::abs;
  detail::parallel_rows(rows, 2 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      CrossEntropyRow<S> row;
      const In* x = logits + r * ld;
      row.stats = detail::softmax_stats<S>(x, n, static_cast<S*>(nullptr));
      const int64_t c = target[r];
      if (c == ignore_index) {
        row.ignored = true;
      } else if (c < 0 || c >= n) {
        row.loss = row.target_dev = detail::quiet_nan<S>();
      } else {
        const S t = S(x[c]) - row.stats.max;
        row.loss = row.stats.log_sum_exp - t;
        row.target_dev = abs(t);
      }
      out[r] = row;
    }
  });
}

/// reduction='mean': the mean of the non-ignored losses (NaN when every row is ignored, as
/// PyTorch) and their mean |loss| (for cross_entropy_mean_tol).
template <typename S>
struct CrossEntropyMean {
  S mean = 0, mean_abs = 0;
  int64_t count = 0;
};

template <typename S>
CrossEntropyMean<S> cross_entropy_mean(const CrossEntropyRow<S>* rows, int64_t n_rows) {
  using std::abs;
  CrossEntropyMean<S> m;
  S sum = 0, abs_sum = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    if (rows[r].ignored) continue;
    sum += rows[r].loss;
    abs_sum += abs(rows[r].loss);
    ++m.count;
  }
  if (m.count == 0) return {detail::quiet_nan<S>(), detail::quiet_nan<S>(), 0};
  m.mean = sum / S(static_cast<double>(m.count));
  m.mean_abs = abs_sum / S(static_cast<double>(m.count));
  return m;
}

}  // namespace assay::ref
