// Host references for row reductions, templated on the scalar S they compute in (double by
// default; DoubleDouble from dot2.h for fp64 kernels; Boost.Multiprecision in tests). Inputs
// are the kernel's own (already rounded) values of type In, converted exactly to S. Each
// result carries the magnitude terms its bound in harness/bounds.h needs. No CUDA headers.
//   [H]   N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002.
//   [CGL] T. F. Chan, G. H. Golub, R. J. LeVeque, Algorithms for computing the sample
//         variance: analysis and recommendations, Amer. Statist. 37(3), 1983.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

namespace assay::ref {

namespace detail {

/// Runs fn(row_begin, row_end) over [0, rows), split into contiguous blocks over up to
/// `threads` std::threads; inline when threads <= 1 or the work (rows * work_per_row) is
/// under ~2^15 operations per thread. Every row is computed by the same code whatever the
/// split, so results do not depend on the thread count.
template <typename Fn>
void parallel_rows(int64_t rows, int64_t work_per_row, int threads, Fn&& fn) {
  if (rows <= 0) return;
  const int64_t work = rows * std::max<int64_t>(work_per_row, 1);
  const int64_t max_useful = std::max<int64_t>(1, work / (int64_t{1} << 15));
  const int t = static_cast<int>(std::min<int64_t>({static_cast<int64_t>(threads), rows, max_useful}));
  if (t <= 1) {
    fn(int64_t{0}, rows);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(t);
  for (int w = 0; w < t; ++w) {
    const int64_t b = rows * w / t, e = rows * (w + 1) / t;
    pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  for (auto& th : pool) th.join();
}

template <typename S>
bool is_nan(const S& x) {
  return x != x;
}

template <typename S>
S quiet_nan() {
  return S(std::numeric_limits<double>::quiet_NaN());
}

}  // namespace detail

// ---- sum, mean ----------------------------------------------------------------------------------

/// sum x_i and the magnitude sum |x_i| (sum_bounds' mag).
template <typename S>
struct SumResult {
  S sum = 0, abs_sum = 0;
};

/// Recursive summation in S of x[0], x[stride], ..., n values.
template <typename S, typename In>
SumResult<S> sum_reference(const In* x, int64_t n, int64_t stride = 1) {
  using std::abs;
  SumResult<S> r;
  for (int64_t i = 0; i < n; ++i) {
    const S v = S(x[i * stride]);
    r.sum += v;
    r.abs_sum += abs(v);
  }
  return r;
}

/// mean x_i and mean |x_i| (mean_bounds' mag); NaN for n == 0 (as torch.mean of an empty tensor).
template <typename S>
struct MeanResult {
  S mean = 0, mean_abs = 0;
};

template <typename S, typename In>
MeanResult<S> mean_reference(const In* x, int64_t n, int64_t stride = 1) {
  if (n <= 0) return {detail::quiet_nan<S>(), detail::quiet_nan<S>()};
  const SumResult<S> s = sum_reference<S>(x, n, stride);
  return {s.sum / S(static_cast<double>(n)), s.abs_sum / S(static_cast<double>(n))};
}

// ---- variance -----------------------------------------------------------------------------------

/// Mean, variance and the magnitudes of variance_bounds: A = mean|x|, X = max|x|, W = max - min.
template <typename S>
struct VarianceResult {
  S mean = 0;
  S var = 0;  ///< with the requested ddof; NaN when n - ddof <= 0 (torch.var of one value)
  S mean_abs = 0, max_abs = 0, range = 0;
};

/// Corrected two-pass in S ([CGL] (1.7)): mu = sum/n, then
/// var = (sum (x - mu)^2 - (sum (x - mu))^2 / n) / (n - ddof); the correction removes the
/// first-order effect of the rounded mean. Non-finite inputs give NaN (Inf - Inf).
template <typename S, typename In>
VarianceResult<S> variance_reference(const In* x, int64_t n, int ddof = 0, int64_t stride = 1) {
  using std::abs;
  VarianceResult<S> r;
  if (n <= 0) {
    r.mean = r.var = detail::quiet_nan<S>();
    return r;
  }
  S sum = 0, abs_sum = 0, mx = S(x[0]), mn = S(x[0]);
  for (int64_t i = 0; i < n; ++i) {
    const S v = S(x[i * stride]);
    sum += v;
    abs_sum += abs(v);
    if (v > mx) mx = v;
    if (v < mn) mn = v;
    if (abs(v) > r.max_abs) r.max_abs = abs(v);
  }
  const S nn = S(static_cast<double>(n));
  r.mean = sum / nn;
  r.mean_abs = abs_sum / nn;
  r.range = mx - mn;
  S ss = 0, dev = 0;
  for (int64_t i = 0; i < n; ++i) {
    const S d = S(x[i * stride]) - r.mean;
    ss += d * d;
    dev += d;
  }
  r.var = n - ddof <= 0 ? detail::quiet_nan<S>() : (ss - dev * dev / nn) / S(static_cast<double>(n - ddof));
  if (r.var < S(0)) r.var = S(0);  // the correction can only overshoot by rounding
  return r;
}

// ---- norms ----------------------------------------------------------------------------------------

/// L1 = sum|x|, L2 = sqrt(sum x^2), Linf = max|x|. Any NaN gives NaN; otherwise any Inf gives Inf.
template <typename S>
struct NormResult {
  S l1 = 0, l2 = 0, linf = 0;
};

/// L2 sums squares of x scaled by a power of two near 1/max|x| (exact in any binary S), so
/// that squares neither overflow nor underflow even in double for fp64 inputs.
template <typename S, typename In>
NormResult<S> norm_reference(const In* x, int64_t n, int64_t stride = 1) {
  using std::abs;
  using std::sqrt;
  NormResult<S> r;
  double xmax = 0;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(x[i * stride]);
    if (std::isnan(v)) nan = true;
    xmax = std::max(xmax, std::fabs(v));
    r.l1 += abs(S(x[i * stride]));
  }
  if (nan) return {detail::quiet_nan<S>(), detail::quiet_nan<S>(), detail::quiet_nan<S>()};
  r.linf = S(xmax);
  if (std::isinf(xmax)) {
    r.l2 = S(xmax);
    return r;
  }
  if (xmax == 0) return r;
  // xmax * scale in [1, 2), the exponent clamped so that scale itself is a finite double
  // (subnormal xmax then lands near 2^-28, still far from underflow when squared).
  const double scale = std::ldexp(1.0, std::clamp(-std::ilogb(xmax), -1000, 1000));
  S ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const S v = S(x[i * stride]) * S(scale);
    ss += v * v;
  }
  r.l2 = sqrt(ss) / S(scale);
  return r;
}

// ---- row-wise, multithreaded ------------------------------------------------------------------------

/// Each of `rows` rows of n values, row r at x + r*ld; out has one result per row.
template <typename S, typename In>
void sum_rows(const In* x, int64_t rows, int64_t n, int64_t ld, SumResult<S>* out, int threads = 1) {
  detail::parallel_rows(rows, n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) out[r] = sum_reference<S>(x + r * ld, n);
  });
}

template <typename S, typename In>
void mean_rows(const In* x, int64_t rows, int64_t n, int64_t ld, MeanResult<S>* out, int threads = 1) {
  detail::parallel_rows(rows, n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) out[r] = mean_reference<S>(x + r * ld, n);
  });
}

template <typename S, typename In>
void variance_rows(const In* x, int64_t rows, int64_t n, int64_t ld, int ddof, VarianceResult<S>* out,
                   int threads = 1) {
  detail::parallel_rows(rows, 2 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) out[r] = variance_reference<S>(x + r * ld, n, ddof);
  });
}

template <typename S, typename In>
void norm_rows(const In* x, int64_t rows, int64_t n, int64_t ld, NormResult<S>* out, int threads = 1) {
  detail::parallel_rows(rows, 2 * n, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) out[r] = norm_reference<S>(x + r * ld, n);
  });
}

}  // namespace assay::ref
