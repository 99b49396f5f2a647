// Host references (fp64) of GEMM + bias + activation (kernels/gemm/gemm_epilogue.h) and its
// analytic backward, with the magnitudes their bounds need. No CUDA headers. Every operand is
// a dense row-major array of the kernel's own (rounded) values; op(A), op(B) as in
// references/host/gemm.h. Activations from references/host/backward.h (ReLU' = 1 for z > 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "references/host/backward.h"
#include "references/host/gemm.h"

namespace assay::ref {

struct EpilogueProblem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  Activation act = Activation::kIdentity;  ///< kIdentity, kRelu or kGeluTanh
};

/// op(A) stored as (trans ? k x m : m x k), dense: leading dimension of the storage.
inline int64_t lda_of(const EpilogueProblem& p) {
  return p.trans_a ? p.m : p.k;
}
inline int64_t ldb_of(const EpilogueProblem& p) {
  return p.trans_b ? p.k : p.n;
}

/// z = op(A) op(B) + bias, y = act(z), mag = |op(A)||op(B)| + |bias| (each m x n dense).
inline void epilogue_forward(const EpilogueProblem& p, const double* a, const double* b, const double* bias,
                             std::vector<double>& z, std::vector<double>& y, std::vector<double>& mag) {
  const size_t mn = static_cast<size_t>(p.m * p.n);
  z.assign(mn, 0.0);
  y.assign(mn, 0.0);
  mag.assign(mn, 0.0);
  GemmProblem<double> g;
  g.m = p.m, g.n = p.n, g.k = p.k, g.trans_a = p.trans_a, g.trans_b = p.trans_b;
  g.a = a, g.lda = lda_of(p), g.b = b, g.ldb = ldb_of(p);
  gemm_reference(g, z.data(), mag.data(), 2);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      const size_t e = static_cast<size_t>(i * p.n + j);
      z[e] += bias[j];
      mag[e] += std::fabs(bias[j]);
      y[e] = activation(p.act, z[e]);
    }
}

/// The analytic backward at (A, B, Z, dY): dz = dY act'(Z); dA = dz op(B)^T in A's storage
/// layout; dB = op(A)^T dz in B's storage layout; dbias = column sums of dz (no prefill: the
/// caller adds the accumulated prefill). Magnitudes: |dz| |op(B)|^T, |op(A)|^T |dz|, sum |dz|.
struct EpilogueGrads {
  std::vector<double> dz, da, db, dbias, mag_da, mag_db, mag_dbias;
};
inline EpilogueGrads epilogue_backward(const EpilogueProblem& p, const double* a, const double* b, const double* z,
                                       const double* dy) {
  EpilogueGrads g;
  const int64_t m = p.m, n = p.n, k = p.k, la = lda_of(p), lb = ldb_of(p);
  g.dz.resize(static_cast<size_t>(m * n));
  for (int64_t e = 0; e < m * n; ++e) g.dz[static_cast<size_t>(e)] = dy[e] * activation_grad(p.act, z[e]);
  auto A = [&](int64_t i, int64_t q) { return p.trans_a ? a[q * la + i] : a[i * la + q]; };
  auto B = [&](int64_t q, int64_t j) { return p.trans_b ? b[j * lb + q] : b[q * lb + j]; };
  auto a_at = [&](int64_t i, int64_t q) { return static_cast<size_t>(p.trans_a ? q * la + i : i * la + q); };
  auto b_at = [&](int64_t q, int64_t j) { return static_cast<size_t>(p.trans_b ? j * lb + q : q * lb + j); };
  g.da.assign(static_cast<size_t>(m * k), 0.0);
  g.mag_da = g.da;
  g.db.assign(static_cast<size_t>(k * n), 0.0);
  g.mag_db = g.db;
  g.dbias.assign(static_cast<size_t>(n), 0.0);
  g.mag_dbias = g.dbias;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double d = g.dz[static_cast<size_t>(i * n + j)];
      g.dbias[static_cast<size_t>(j)] += d;
      g.mag_dbias[static_cast<size_t>(j)] += std::fabs(d);
      for (int64_t q = 0; q < k; ++q) {
        const double av = A(i, q), bv = B(q, j);
        g.da[a_at(i, q)] += d * bv;
        g.mag_da[a_at(i, q)] += std::fabs(d * bv);
        g.db[b_at(q, j)] += av * d;
        g.mag_db[b_at(q, j)] += std::fabs(av * d);
      }
    }
  return g;
}

}  // namespace assay::ref
