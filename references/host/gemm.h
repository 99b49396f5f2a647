// Host GEMM reference, templated on the accumulation scalar. No CUDA headers.
// Computes ref = alpha * op(A) op(B) + beta * C  (C not read when beta == 0)
// and the magnitude term of its error bound
//   mag = |alpha| * |op(A)| |op(B)| + |beta| * |C|    (beta*|C| term only if beta != 0),
// both m x n, row-major contiguous. Same layout conventions as kernels/gemm/gemm.h.
// Inputs are the exact (already rounded) values the kernel saw, as Scalar.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

namespace assay::ref {

template <typename Scalar>
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  Scalar alpha = 1, beta = 0;
  const Scalar* a = nullptr;
  int64_t lda = 0;
  const Scalar* b = nullptr;
  int64_t ldb = 0;
  const Scalar* c = nullptr;  ///< may be null when beta == 0
  int64_t ldc = 0;
};

/// Rows [row_begin, row_end) of ref and mag (each m*n, row-major, ld = n).
template <typename Scalar>
void gemm_reference_rows(const GemmProblem<Scalar>& p, int64_t row_begin, int64_t row_end, Scalar* ref, Scalar* mag) {
  using std::abs;
  for (int64_t i = row_begin; i < row_end; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      Scalar acc = 0, s = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        const Scalar av = p.trans_a ? p.a[q * p.lda + i] : p.a[i * p.lda + q];
        const Scalar bv = p.trans_b ? p.b[j * p.ldb + q] : p.b[q * p.ldb + j];
        acc += av * bv;
        s += abs(av) * abs(bv);
      }
      Scalar r = p.alpha * acc;
      Scalar sm = abs(p.alpha) * s;
      if (p.beta != Scalar(0)) {
        const Scalar cv = p.c[i * p.ldc + j];
        r += p.beta * cv;
        sm += abs(p.beta) * abs(cv);
      }
      ref[i * p.n + j] = r;
      mag[i * p.n + j] = sm;
    }
  }
}

/// Whole reference, split over `threads` threads by rows (threads <= 1: inline).
template <typename Scalar>
void gemm_reference(const GemmProblem<Scalar>& p, Scalar* ref, Scalar* mag, int threads = 1) {
  if (p.m <= 0 || p.n <= 0) return;
  const int64_t work = p.m * p.n * std::max<int64_t>(p.k, 1);
  const int64_t max_useful = std::max<int64_t>(1, work / (int64_t{1} << 16));
  const int t = static_cast<int>(std::min<int64_t>({threads, p.m, max_useful}));
  if (t <= 1) {
    gemm_reference_rows(p, 0, p.m, ref, mag);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(t);
  for (int w = 0; w < t; ++w) {
    const int64_t b = p.m * w / t, e = p.m * (w + 1) / t;
    pool.emplace_back([&p, b, e, ref, mag] { gemm_reference_rows(p, b, e, ref, mag); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace assay::ref
