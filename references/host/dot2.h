// Double-double arithmetic and references for fp64 kernels. No CUDA headers.
//
// Error-free transformations (exact barring overflow, and underflow of the low part):
//   two_sum      a + b = s + e, s = fl(a + b)      Knuth; [ORO] sec. 3
//   fast_two_sum the same when |a| >= |b|           Dekker; [ORO] sec. 3
//   two_prod     a * b = p + e, p = fl(a * b)      with an FMA; [ORO] sec. 3
// Dot2 ([ORO] sec. 5) keeps every rounding error of the products and sums and
// adds them up at the end: |res - x.y| <= u|x.y| + gamma_n^2 sum|x_i y_i| ([ORO] sec. 5),
// as if computed in twice the working precision and rounded once. dot2() runs `Lanes`
// independent interleaved chains (instruction-level parallelism, the same bound with n
// replaced by 2n) and merges them with the same error-free steps.
// DoubleDouble is a scalar type (hi + lo, |lo| <= ulp(hi)/2) so that the templated
// references (gemm.h, reductions.h, softmax.h, norms.h) instantiate with it; its
// operations follow [JMP]: add ~3u^2, mul ~5u^2 relative error (u = 2^-53). Like every
// double-word format it keeps ~106 bits only while lo stays normal: for |values| below
// ~2^-969 (lo subnormal) the relative precision degrades towards that of double.
//   [ORO] T. Ogita, S. M. Rump, S. Oishi, Accurate sum and dot product, SIAM J. Sci.
//         Comput. 26(6), 2005.
//   [JMP] M. Joldes, J.-M. Muller, V. Popescu, Tight and rigorous error bounds for basic
//         building blocks of double-word arithmetic, ACM TOMS 44(2), 2017.
// The transformations need IEEE round-to-nearest double arithmetic without value-changing
// optimisation: no -ffast-math, no x87; FMA contraction (-ffp-contract=fast) is harmless
// here (every product that matters is an explicit std::fma).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "references/host/gemm.h"

namespace assay::ref {

/// An unevaluated sum hi + lo of two doubles.
struct DD {
  double hi = 0, lo = 0;
};

/// s + e == a + b exactly, s = fl(a + b) (any magnitudes).
inline DD two_sum(double a, double b) {
  const double s = a + b;
  const double bp = s - a;
  const double e = (a - (s - bp)) + (b - bp);
  return {s, e};
}

/// s + e == a + b exactly, s = fl(a + b); requires |a| >= |b| or a == 0.
inline DD fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}

/// p + e == a * b exactly, p = fl(a * b) (e exact unless it underflows).
inline DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}

/// The value and magnitude of one dot product: value.hi + value.lo ~ x.y (fast_two_sum-normalised,
/// so value.hi = fl(x.y) up to the Dot2 error), mag = sum |x_i y_i| in double.
struct Dot2Result {
  DD value;
  double mag = 0;
};

/// Dot2 over n elements x[i*incx], y[i*incy] with `Lanes` interleaved chains ([ORO] sec. 5):
/// |value.hi + value.lo - x.y| <= gamma_{2n}^2 sum|x_i y_i| (and value.hi within u|x.y| more).
template <int Lanes = 4>
Dot2Result dot2(const double* x, int64_t incx, const double* y, int64_t incy, int64_t n) {
  static_assert(Lanes >= 1);
  double p[Lanes] = {}, s[Lanes] = {};
  double mag = 0;
  int64_t i = 0;
  for (; i + Lanes <= n; i += Lanes) {
    for (int l = 0; l < Lanes; ++l) {
      const double xv = x[(i + l) * incx], yv = y[(i + l) * incy];
      const DD h = two_prod(xv, yv);
      const DD t = two_sum(p[l], h.hi);
      p[l] = t.hi;
      s[l] += t.lo + h.lo;
      mag += std::fabs(h.hi);
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    const double xv = x[i * incx], yv = y[i * incy];
    const DD h = two_prod(xv, yv);
    const DD t = two_sum(p[l], h.hi);
    p[l] = t.hi;
    s[l] += t.lo + h.lo;
    mag += std::fabs(h.hi);
  }
  // Merge the lanes: an error-free cascade of the p's, every error into the s's (Sum2).
  double ph = p[0], sl = s[0];
  for (int l = 1; l < Lanes; ++l) {
    const DD t = two_sum(ph, p[l]);
    ph = t.hi;
    sl += t.lo + s[l];
  }
  Dot2Result r;
  r.value = std::isfinite(ph) ? fast_two_sum(ph, sl) : DD{ph + sl, 0};
  r.mag = mag;
  return r;
}

// ---- DoubleDouble: a scalar type for the templated references -----------------------------------

/// hi + lo with hi = fl(hi + lo). Non-finite values live in hi with lo = 0.
struct DoubleDouble {
  double hi = 0, lo = 0;
  constexpr DoubleDouble() = default;
  constexpr DoubleDouble(double v) : hi(v), lo(0) {}  // NOLINT: implicit, as for a built-in type
  constexpr DoubleDouble(double h, double l) : hi(h), lo(l) {}
  explicit operator double() const { return hi + lo; }
  explicit operator float() const { return static_cast<float>(hi + lo); }

  DoubleDouble& operator+=(const DoubleDouble& b);
  DoubleDouble& operator-=(const DoubleDouble& b);
  DoubleDouble& operator*=(const DoubleDouble& b);
  DoubleDouble& operator/=(const DoubleDouble& b);
};

namespace detail {
inline DoubleDouble finite_or(double v, const DoubleDouble& r) {
  return std::isfinite(v) ? r : DoubleDouble(v);
}
}  // namespace detail

inline DoubleDouble operator-(const DoubleDouble& a) {
  return {-a.hi, -a.lo};
}

/// [JMP] AccurateDWPlusDW: relative error <= 3u^2 / (1 - 4u).
inline DoubleDouble operator+(const DoubleDouble& a, const DoubleDouble& b) {
  const DD s = two_sum(a.hi, b.hi);
  if (!std::isfinite(s.hi)) return DoubleDouble(s.hi);
  const DD t = two_sum(a.lo, b.lo);
  const DD v = fast_two_sum(s.hi, s.lo + t.hi);
  const DD z = fast_two_sum(v.hi, t.lo + v.lo);
  return {z.hi, z.lo};
}
inline DoubleDouble operator-(const DoubleDouble& a, const DoubleDouble& b) {
  return a + (-b);
}

/// [JMP] DWTimesDW3 (with FMA): relative error <= 5u^2.
inline DoubleDouble operator*(const DoubleDouble& a, const DoubleDouble& b) {
  const DD c = two_prod(a.hi, b.hi);
  if (!std::isfinite(c.hi)) return DoubleDouble(c.hi);
  const double tl0 = a.lo * b.lo;
  const double tl1 = std::fma(a.hi, b.lo, tl0);
  const double cl2 = std::fma(a.lo, b.hi, tl1);
  const DD z = fast_two_sum(c.hi, c.lo + cl2);
  return detail::finite_or(z.hi, {z.hi, z.lo});
}

/// Three-quotient long division (the QD library's accurate division), ~u^2 relative.
inline DoubleDouble operator/(const DoubleDouble& a, const DoubleDouble& b) {
  const double q1 = a.hi / b.hi;
  if (!std::isfinite(q1) || q1 == 0) return DoubleDouble(q1);
  DoubleDouble r = a - b * DoubleDouble(q1);
  const double q2 = r.hi / b.hi;
  r = r - b * DoubleDouble(q2);
  const double q3 = r.hi / b.hi;
  const DD q = fast_two_sum(q1, q2);
  return DoubleDouble(q.hi, q.lo) + DoubleDouble(q3);
}

inline DoubleDouble& DoubleDouble::operator+=(const DoubleDouble& b) {
  return *this = *this + b;
}
inline DoubleDouble& DoubleDouble::operator-=(const DoubleDouble& b) {
  return *this = *this - b;
}
inline DoubleDouble& DoubleDouble::operator*=(const DoubleDouble& b) {
  return *this = *this * b;
}
inline DoubleDouble& DoubleDouble::operator/=(const DoubleDouble& b) {
  return *this = *this / b;
}

inline bool operator==(const DoubleDouble& a, const DoubleDouble& b) {
  return a.hi == b.hi && a.lo == b.lo;
}
inline bool operator!=(const DoubleDouble& a, const DoubleDouble& b) {
  return !(a == b);
}
inline bool operator<(const DoubleDouble& a, const DoubleDouble& b) {
  return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}
inline bool operator>(const DoubleDouble& a, const DoubleDouble& b) {
  return b < a;
}
inline bool operator<=(const DoubleDouble& a, const DoubleDouble& b) {
  return a < b || a == b;
}
inline bool operator>=(const DoubleDouble& a, const DoubleDouble& b) {
  return b <= a;
}

// Math functions, found by argument-dependent lookup from the templates (`using std::exp; exp(x)`).
inline DoubleDouble abs(const DoubleDouble& a) {
  return a.hi < 0 || (a.hi == 0 && std::signbit(a.hi)) ? -a : a;
}
inline DoubleDouble fabs(const DoubleDouble& a) {
  return abs(a);
}
inline bool isnan(const DoubleDouble& a) {
  return std::isnan(a.hi);
}
inline bool isinf(const DoubleDouble& a) {
  return std::isinf(a.hi);
}
inline bool isfinite(const DoubleDouble& a) {
  return std::isfinite(a.hi);
}

/// sqrt by one Newton step on the double root: s + (a - s^2) / (2s), ~u^2 relative.
inline DoubleDouble sqrt(const DoubleDouble& a) {
  if (!(a.hi > 0) || !std::isfinite(a.hi)) return DoubleDouble(std::sqrt(a.hi));
  const double s = std::sqrt(a.hi);
  const DD sq = two_prod(s, s);
  const DoubleDouble r = a - DoubleDouble(sq.hi, sq.lo);
  const DD z = fast_two_sum(s, r.hi / (2 * s));
  return {z.hi, z.lo};
}

/// exp: x = k ln2 + r, |r| <= ln2/2; expm1(r / 2^9) by Taylor (|r/2^9| < 7e-4, 11 terms leave
/// < 1e-40), doubled back nine times through expm1(2t) = e (e + 2); times 2^k. ~10u^2 relative.
inline DoubleDouble exp(const DoubleDouble& a) {
  if (std::isnan(a.hi)) return a;
  if (a.hi > 709.79) return DoubleDouble(std::numeric_limits<double>::infinity());
  if (a.hi < -745.2) return DoubleDouble(0.0);
  const DoubleDouble ln2(0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56);
  const double k = std::nearbyint(a.hi / ln2.hi);
  const DoubleDouble r = a - ln2 * DoubleDouble(k);
  const DoubleDouble t(std::ldexp(r.hi, -9), std::ldexp(r.lo, -9));
  // expm1(t) = t + t^2/2! + ... + t^11/11!, each term from the last by one product and one division.
  DoubleDouble term = t, e = t;
  for (int j = 2; j <= 11; ++j) {
    term = term * t / DoubleDouble(static_cast<double>(j));
    e = e + term;
  }
  for (int j = 0; j < 9; ++j) e = e * (e + DoubleDouble(2.0));
  e = e + DoubleDouble(1.0);
  const int ki = static_cast<int>(k);
  return {std::ldexp(e.hi, ki), std::ldexp(e.lo, ki)};
}

/// log a = log m + e ln2 with a = m 2^e, m in [1, 2) (exact scaling, so exp(-y) below cannot
/// underflow), and one Newton step y + m exp(-y) - 1 from the double log of m: absolute error
/// ~u^2 (1 + |log a|).
inline DoubleDouble log(const DoubleDouble& a) {
  if (std::isnan(a.hi) || a.hi < 0) return DoubleDouble(std::numeric_limits<double>::quiet_NaN());
  if (a.hi == 0) return DoubleDouble(-std::numeric_limits<double>::infinity());
  if (std::isinf(a.hi)) return a;
  const int e = std::ilogb(a.hi);
  const DoubleDouble m(std::ldexp(a.hi, -e), std::ldexp(a.lo, -e));
  const DoubleDouble y(std::log(m.hi));
  const DoubleDouble lm = y + m * exp(-y) - DoubleDouble(1.0);
  if (e == 0) return lm;
  const DoubleDouble ln2(0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56);
  return lm + ln2 * DoubleDouble(static_cast<double>(e));
}

// ---- GEMM reference in double-double ------------------------------------------------------------

/// GEMM for fp64 kernels: every element by dot2<Lanes>, then alpha * dot + beta * c in
/// double-double. ref = fl(hi + lo) (error <= u|c| + gamma_{2k}^2 mag), ref_lo = lo (may be
/// null; ref + ref_lo is within ~gamma_{2k}^2 mag of the exact value), mag = |alpha||A||B| +
/// |beta||C| in double (each m*n, row-major, ld = n). Same problem description and threading
/// as gemm_reference; C is not read when beta == 0.
template <int Lanes = 4>
void gemm_reference_dd_rows(const GemmProblem<double>& p, int64_t row_begin, int64_t row_end, double* ref,
                            double* ref_lo, double* mag) {
  for (int64_t i = row_begin; i < row_end; ++i) {
    const double* a = p.trans_a ? p.a + i : p.a + i * p.lda;
    const int64_t inc_a = p.trans_a ? p.lda : 1;
    for (int64_t j = 0; j < p.n; ++j) {
      const double* b = p.trans_b ? p.b + j * p.ldb : p.b + j;
      const int64_t inc_b = p.trans_b ? 1 : p.ldb;
      const Dot2Result d = dot2<Lanes>(a, inc_a, b, inc_b, p.k);
      DoubleDouble r = DoubleDouble(d.value.hi, d.value.lo) * DoubleDouble(p.alpha);
      double sm = std::fabs(p.alpha) * d.mag;
      if (p.beta != 0) {
        const double cv = p.c[i * p.ldc + j];
        const DD bc = two_prod(p.beta, cv);
        r = r + DoubleDouble(bc.hi, bc.lo);
        sm += std::fabs(p.beta) * std::fabs(cv);
      }
      ref[i * p.n + j] = r.hi;
      if (ref_lo != nullptr) ref_lo[i * p.n + j] = r.lo;
      mag[i * p.n + j] = sm;
    }
  }
}

/// Whole double-double reference split over `threads` threads by rows (threads <= 1: inline);
/// the result does not depend on the thread count.
template <int Lanes = 4>
void gemm_reference_dd(const GemmProblem<double>& p, double* ref, double* ref_lo, double* mag, int threads = 1) {
  if (p.m <= 0 || p.n <= 0) return;
  const int64_t work = p.m * p.n * std::max<int64_t>(p.k, 1);
  const int64_t max_useful = std::max<int64_t>(1, work / (int64_t{1} << 15));
  const int t = static_cast<int>(std::min<int64_t>({threads, p.m, max_useful}));
  if (t <= 1) {
    gemm_reference_dd_rows<Lanes>(p, 0, p.m, ref, ref_lo, mag);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(t);
  for (int w = 0; w < t; ++w) {
    const int64_t b = p.m * w / t, e = p.m * (w + 1) / t;
    pool.emplace_back([&p, b, e, ref, ref_lo, mag] { gemm_reference_dd_rows<Lanes>(p, b, e, ref, ref_lo, mag); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace assay::ref
