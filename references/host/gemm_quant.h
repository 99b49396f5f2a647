// Host references of the quantised GEMMs (kernels/gemm/gemm_quant.h), "TN" layout: A is m x k,
// B is n x k, k contiguous, inputs given as the exact (already rounded) values the kernel saw.
// No CUDA headers.
//   int8: the accumulator exactly, in int64 (any k; the int32 kernel's precondition is the
//         caller's business), and the dequantised D = sa[i] sw[j] acc + bias[j] in double.
//   fp8:  sum_p A[i][p] B[j][p] in double, which is exact here: e4m3 values are multiples of
//         2^-9 below 2^9, so every product is a multiple of 2^-18 below 2^18 and every partial
//         sum of k <= 2^17 of them a multiple of 2^-18 below 2^35, representable in 53 bits;
//         mag = sum |A||B| beside it. NaN inputs propagate (NaN in ref and mag).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace assay::ref {

/// acc[i*n + j] = sum_p a[i*lda + p] * b[j*ldb + p], exact (a, b integer-valued, |a|, |b| <= 2^31).
inline void gemm_tn_int_exact(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                              int64_t ldb, std::vector<int64_t>& acc) {
  acc.assign(static_cast<size_t>(m * n), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<int64_t>(a[i * lda + p]) * static_cast<int64_t>(b[j * ldb + p]);
      acc[static_cast<size_t>(i * n + j)] = s;
    }
}

/// ref[i*n + j] = sum_p a[i*lda + p] * b[j*ldb + p] and mag = sum_p |a||b|, in double.
inline void gemm_tn_f64(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                        std::vector<double>& ref, std::vector<double>& mag) {
  ref.assign(static_cast<size_t>(m * n), 0.0);
  mag.assign(ref.size(), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, g = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = a[i * lda + p] * b[j * ldb + p];
        s += x;
        g += std::fabs(x);
      }
      ref[static_cast<size_t>(i * n + j)] = s;
      mag[static_cast<size_t>(i * n + j)] = g;
    }
}

}  // namespace assay::ref
