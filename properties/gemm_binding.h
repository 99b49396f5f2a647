// The one translation from the harness's GEMM problems (device pointers into
// a lane's arena) to the kernels' argument structs, shared by the specs in
// properties/ and the mutant registrations in tests/mutants/.
#pragma once

#include "harness/testbeds/gemm_bwd_f32.h"
#include "harness/testbeds/gemm_f32.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_backward.h"

namespace assay {

inline kernels::GemmF32Args to_kernel_args(const GemmF32Problem& p) {
  kernels::GemmF32Args a;
  a.m = p.m, a.n = p.n, a.k = p.k, a.trans_a = p.trans_a, a.trans_b = p.trans_b;
  a.alpha = p.alpha, a.beta = p.beta;
  a.a = p.a, a.lda = p.lda, a.b = p.b, a.ldb = p.ldb, a.c = p.c, a.ldc = p.ldc;
  return a;
}

inline kernels::GemmBwdF32Args to_kernel_args(const GemmBwdF32Problem& p) {
  kernels::GemmBwdF32Args a;
  a.m = p.m, a.n = p.n, a.k = p.k, a.alpha = p.alpha;
  a.a = p.a, a.lda = p.lda, a.b = p.b, a.ldb = p.ldb, a.dc = p.dc, a.lddc = p.lddc;
  a.da = p.da, a.ldda = p.ldda, a.db = p.db, a.lddb = p.lddb;
  return a;
}

/// A harness launch function for a kernel launcher (forward or backward).
template <typename Launcher>
auto launch_through(Launcher fn) {
  return [fn](const auto& problem, cudaStream_t s) { return fn(to_kernel_args(problem), s); };
}

}  // namespace assay
