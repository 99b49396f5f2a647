// Binding of the quantised GEMM kernels (kernels/gemm/gemm_quant.h signatures) to the gemm_int8
// and gemm_fp8 ops, and the references + bounds as pure functions for the CPU tests and the
// cuBLASLt comparison (tests/properties/gemm_quant_test.cpp, gemm_quant_gpu_test.cpp).
//
// Tensors, in order ("TN": A m x k, B n x k, k contiguous):
//   gemm_int8: A int8 [m, k], B int8 [n, k], sa fp32 [m], sw fp32 [n], bias fp32 [n] (read only
//              when params.bias), Acc int32 [m, n] (out), D params.out [m, n] (out).
//   gemm_fp8:  A e4m3 [m, k], B e4m3 [n, k], scale_a fp32 [1], scale_b fp32 [1], D params.out [m, n].
#pragma once

#include <cstdint>
#include <vector>

#include "harness/case.h"
#include "harness/op.h"
#include "kernels/gemm/gemm_quant.h"
#include "references/device/gemm_f64_tol.h"

namespace assay::quant {

inline kernels::quant::OutDt quant_out_dt(DType t) {
  return t == DType::kF16 ? kernels::quant::OutDt::kF16
         : t == DType::kBF16 ? kernels::quant::OutDt::kBF16
                             : kernels::quant::OutDt::kF32;
}

/// fn(const kernels::quant::GemmInt8Args&, cudaStream_t) on tensors A, B, sa, sw, bias, Acc, D.
template <typename Fn>
Launch int8_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    kernels::quant::GemmInt8Args a;
    a.m = t[0].v.rows, a.k = t[0].v.cols, a.n = t[1].v.rows;
    a.a = t[0].as<const int8_t>(), a.lda = t[0].v.ld;
    a.b = t[1].as<const int8_t>(), a.ldb = t[1].v.ld;
    a.sa = t[2].as<const float>(), a.sw = t[3].as<const float>();
    a.bias = p.b("bias") ? t[4].as<const float>() : nullptr;
    a.acc = t[5].as<int32_t>(), a.ldacc = t[5].v.ld;
    a.d = t[6].ptr, a.ldd = t[6].v.ld, a.out = quant_out_dt(t[6].dtype);
    return fn(a, s);
  };
}

/// fn(const kernels::quant::GemmFp8Args&, cudaStream_t) on tensors A, B, scale_a, scale_b, D.
template <typename Fn>
Launch fp8_launch(Fn fn) {
  return [fn](const Params&, const std::vector<DevTensor>& t, cudaStream_t s) {
    kernels::quant::GemmFp8Args a;
    a.m = t[0].v.rows, a.k = t[0].v.cols, a.n = t[1].v.rows;
    a.a = t[0].as<const uint8_t>(), a.lda = t[0].v.ld;
    a.b = t[1].as<const uint8_t>(), a.ldb = t[1].v.ld;
    a.scale_a = t[2].as<const float>(), a.scale_b = t[3].as<const float>();
    a.d = t[4].ptr, a.ldd = t[4].v.ld, a.out = quant_out_dt(t[4].dtype);
    return fn(a, s);
  };
}

/// Largest k of either op (int8: int32 exactness, kernels::quant::kInt8MaxK; fp8: the exactness
/// of the double reference, references/host/gemm_quant.h).
inline constexpr int64_t kQuantMaxK = kernels::quant::kInt8MaxK;

/// int8 references of both outputs from dense inputs (a: m*k, b: n*k, sa: m, sw: n, bias: n or
/// empty): Acc exactly, D = sa sw acc + bias with aux [0] x = |sa sw acc|, [1] |bias|, [2] 1 where
/// acc == 0.
std::vector<OutputRef> int8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a,
                                      const std::vector<double>& b, const std::vector<double>& sa,
                                      const std::vector<double>& sw, const std::vector<double>& bias);
/// Their bounds: Acc exact (tol 0, exact tier), D the dequantisation bound (int8_d_tol).
void int8_bound(DType out, std::vector<OutputRef>& r);
/// Both, for the tests.
std::vector<OutputRef> int8_expected(int64_t m, int64_t n, int64_t k, const std::vector<double>& a,
                                     const std::vector<double>& b, const std::vector<double>& sa,
                                     const std::vector<double>& sw, const std::vector<double>& bias, DType out);
/// The int8 D tolerance of one element: x = |sa sw acc|, bias_abs = |bias|, ref_abs = |D|.
double int8_d_tol(double x, double bias_abs, double ref_abs, bool acc_zero, DType out);

/// fp8 reference of D from dense inputs (a: m*k, b: n*k, e4m3 values) and the scales; aux[0] =
/// |scale_a scale_b| sum |a||b|.
OutputRef fp8_reference(int64_t m, int64_t n, int64_t k, const std::vector<double>& a, const std::vector<double>& b,
                        double scale_a, double scale_b);
/// Its fp32-accumulation ceiling; `exact_range` >= 0: both inputs are integers in [-r, r] (exact
/// tier when gemm_exact_tier_holds says so).
void fp8_bound(int64_t k, double scale_a, double scale_b, DType out, int64_t exact_range, OutputRef& r);
/// D's tolerance function (references/device/gemm_f64_tol.h) on a reference scaled by `scale`
/// (1: scaled already): what fp8_bound and the device path apply to every element.
device_ref::F64DotTol fp8_tolerance(int64_t k, double scale_a, double scale_b, DType out, double scale);
/// Both, for the tests.
OutputRef fp8_expected(int64_t m, int64_t n, int64_t k, const std::vector<double>& a, const std::vector<double>& b,
                       double scale_a, double scale_b, DType out, int64_t exact_range);

}  // namespace assay::quant
