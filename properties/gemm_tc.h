// Binding of tensor-core GEMM kernels (kernels/gemm/gemm_tc.h signature) to the gemm_tc op, and
// the reference + ceiling as pure functions for the CPU tests and the cuBLASLt comparison
// (tests/properties/gemm_tc_test.cpp, gemm_tc_gpu_test.cpp).
//
// Tensors, in order: A [m, k] (stored [k, m] with trans_a) and B [k, n] ([n, k] with trans_b) in
// params.dtype; scalars fp32 [2] = {alpha, beta} (written by the op's prepare, host or device);
// D [m, n] in params.out_dtype, kInOut: C on entry, D on exit.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/bounds.h"
#include "harness/case.h"
#include "harness/op.h"
#include "kernels/gemm/gemm_tc.h"
#include "references/device/gemm_f64_tol.h"

namespace assay::gemm_tc {

/// fn(const kernels::GemmTcArgs&, cudaStream_t) on tensors A, B, scalars, D.
template <typename Fn>
Launch gemm_tc_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    kernels::GemmTcArgs a;
    a.m = p.i("m"), a.n = p.i("n"), a.k = p.i("k");
    a.trans_a = p.b("trans_a"), a.trans_b = p.b("trans_b");
    a.in = t[0].dtype == DType::kBF16 ? kernels::TcIn::kBF16 : kernels::TcIn::kF16;
    a.out = t[3].dtype == DType::kF16    ? kernels::TcOut::kF16
            : t[3].dtype == DType::kBF16 ? kernels::TcOut::kBF16
                                         : kernels::TcOut::kF32;
    a.a = t[0].ptr, a.lda = t[0].v.ld;
    a.b = t[1].ptr, a.ldb = t[1].v.ld;
    a.scalars = t[2].as<const float>();
    a.d = t[3].ptr, a.ldd = t[3].v.ld;
    return fn(a, s);
  };
}

/// The ceiling's model for one case: fp16/bf16 products exact, truncating block accumulation in
/// fp32 with any block size and any split of k (see the header of properties/gemm_tc.cpp).
GemmBoundModel gemm_tc_model(DType in, int64_t k, double alpha, double beta);

/// One problem on host values already rounded to the kernel's types, op(A) and op(B) read through
/// the leading dimensions and transposes; c may be null when beta == 0.
struct TcProblem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  DType in = DType::kF16, out = DType::kF32;
  double alpha = 1, beta = 0;
  const double* a = nullptr;
  int64_t lda = 0;
  const double* b = nullptr;
  int64_t ldb = 0;
  const double* c = nullptr;
  int64_t ldc = 0;
  bool product_to_out = false;  ///< the kernel's declared order (Contract::narrow_intermediates)
};

/// The reference of every element of D (dense m x n) with aux[0] = mag (nominal magnitudes:
/// |alpha| sum nom(a) nom(b) + |beta||c|) and aux[1] = dmag = sum |a||b| (true magnitudes).
OutputRef gemm_tc_reference(const TcProblem& p);
/// The per-element tolerance's constants (references/device/gemm_f64_tol.h f64_tc_element_tol),
/// one set for the host bound and the device reference.
device_ref::F64TcTol gemm_tc_tol(DType in, DType out, int64_t k, double alpha, double beta, bool product_to_out);
/// Fills tol from a reference of gemm_tc_reference:
///   tol = e32 + 0.5 ulp_out(|ref| + e32), e32 = gemm_ceiling(gemm_tc_model)(|ref|, mag);
/// +Inf (unchecked) where an fp32 intermediate or the output may overflow; `exact`: bit for bit.
void gemm_tc_bound(const TcProblem& p, bool exact, OutputRef& out);
/// Both, for the tests.
OutputRef gemm_tc_expected(const TcProblem& p, bool exact);

/// True when a case's D must be bit-identical to the reference: k == 0 with |beta| in {0, 1}
/// (D = beta*C), or small-integer A, B (and C where beta != 0) whose every partial sum stays exact
/// in fp32 and in the output type (gemm_exact_tier_holds).
bool exact_tier_case(const Case& c);

}  // namespace assay::gemm_tc
