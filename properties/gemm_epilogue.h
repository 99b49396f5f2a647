// Binding of the GEMM + bias + activation kernels (kernels/gemm/gemm_epilogue.h signatures) to the
// gemm_bias_act and gemm_bias_act_bwd ops, and the references + ceilings as pure functions for the
// CPU tests and the cuBLASLt comparison (tests/properties/gemm_epilogue_test.cpp, _gpu_test.cpp).
//
// Tensors, in order (params.dtype):
//   gemm_bias_act:     A [m, k] (stored [k, m] with trans_a), B [k, n] ([n, k] with trans_b),
//                      bias [n]; Y [m, n], Z [m, n] (out).
//   gemm_bias_act_bwd: A, B as above, Z [m, n], dY [m, n]; dA (A's layout) out; dB (B's layout)
//                      and dbias [n] out, accumulated (+=: Contract::accumulates).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/op.h"
#include "kernels/gemm/gemm_epilogue.h"
#include "references/host/gemm_epilogue.h"

namespace assay::epilogue {

inline kernels::epi::Dt epi_dt(DType t) {
  return t == DType::kF16 ? kernels::epi::Dt::kF16 : t == DType::kBF16 ? kernels::epi::Dt::kBF16 : kernels::epi::Dt::kF32;
}
inline kernels::epi::Act epi_act(const Params& p) {
  const std::string a = p.s("act", "none");
  return a == "relu" ? kernels::epi::Act::kRelu : a == "gelu" ? kernels::epi::Act::kGelu : kernels::epi::Act::kNone;
}

/// fn(const kernels::epi::FwdArgs&, cudaStream_t) on tensors A, B, bias, Y, Z.
template <typename Fn>
Launch epilogue_fwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    kernels::epi::FwdArgs a;
    a.m = p.i("m"), a.n = p.i("n"), a.k = p.i("k"), a.trans_a = p.b("trans_a"), a.trans_b = p.b("trans_b");
    a.dt = epi_dt(t[0].dtype);
    a.act = epi_act(p);
    a.a = t[0].ptr, a.lda = t[0].v.ld, a.b = t[1].ptr, a.ldb = t[1].v.ld;
    a.bias = t[2].ptr;
    a.y = t[3].ptr, a.ldy = t[3].v.ld, a.z = t[4].ptr, a.ldz = t[4].v.ld;
    return fn(a, s);
  };
}

/// fn(const kernels::epi::BwdArgs&, cudaStream_t) on tensors A, B, Z, dY, dA, dB, dbias.
template <typename Fn>
Launch epilogue_bwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    kernels::epi::BwdArgs a;
    a.m = p.i("m"), a.n = p.i("n"), a.k = p.i("k"), a.trans_a = p.b("trans_a"), a.trans_b = p.b("trans_b");
    a.dt = epi_dt(t[0].dtype);
    a.act = epi_act(p);
    a.a = t[0].ptr, a.lda = t[0].v.ld, a.b = t[1].ptr, a.ldb = t[1].v.ld;
    a.z = t[2].ptr, a.ldz = t[2].v.ld, a.dy = t[3].ptr, a.lddy = t[3].v.ld;
    a.da = t[4].ptr, a.ldda = t[4].v.ld, a.db = t[5].ptr, a.lddb = t[5].v.ld;
    a.dbias = t[6].ptr;
    return fn(a, s);
  };
}

/// The problem of a case's params (validated first).
ref::EpilogueProblem epilogue_problem(const nlohmann::json& params);

/// Forward references for inputs already rounded to `dt` (dense): {Y, Z}, aux[0] = mag of z.
std::vector<OutputRef> forward_reference(const ref::EpilogueProblem& p, const double* a, const double* b,
                                         const double* bias);
/// Their ceilings. int_range >= 0: A, B and bias are integers in [-int_range, int_range]; act none /
/// relu are then exact when every partial sum is (gemm_exact_tier_holds, k + 1 terms).
/// `narrow`: the product sum rounded to dt before the bias (Arithmetic::narrow_intermediates);
/// `fast_math`: GELU's tanh is __tanhf (Arithmetic::fast_math).
void forward_bound(const ref::EpilogueProblem& p, DType dt, int64_t int_range, std::vector<OutputRef>& out,
                   bool narrow, bool fast_math);
/// Both, for the tests.
std::vector<OutputRef> forward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                    const double* bias, int64_t int_range);

/// Backward references {dA, dB, dbias} of the gradients alone (dense; dB in B's storage layout),
/// aux [0] = the magnitude of each sum, [1] = the propagated error of dz (gelu), [2] = the same
/// under fast math (tanhf as __tanhf).
std::vector<OutputRef> backward_reference(const ref::EpilogueProblem& p, const double* a, const double* b,
                                          const double* z, const double* dy);
/// Their ceilings (the engine adds the prefill of the accumulated dB and dbias). int_range over
/// every input as above: dA exact when its n-term sums are.
void backward_bound(const ref::EpilogueProblem& p, DType dt, int64_t int_range, std::vector<OutputRef>& out,
                    bool fast_math = false);
/// Both, for the tests.
std::vector<OutputRef> backward_refs(const ref::EpilogueProblem& p, DType dt, const double* a, const double* b,
                                     const double* z, const double* dy, int64_t int_range);

/// Bound pieces (fp32 evaluation, u = 2^-24), exposed for the CPU tests: the GELU (tanh form)
/// kernel's evaluation error at an fp32 argument x whose exact GELU is y, and that of GELU' at x.
double gelu_eval_error(double x, double y, bool fast_math = false);
double gelu_grad_eval_error(double x, bool fast_math = false);
/// max |GELU'| over the reals (tanh form): the Lipschitz constant the forward bound uses.
inline constexpr double kGeluLipschitz = 1.13;

}  // namespace assay::epilogue
