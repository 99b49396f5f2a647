// The tensor-core GEMM kernels (kernels/gemm/gemm_tc.h): the templates of gemm_tc.cuh with no
// planted fault.
#include "kernels/gemm/gemm_tc.cuh"

namespace assay::kernels {

bool gemm_tc_args_valid(const GemmTcArgs& a) {
  if (a.m < 0 || a.n < 0 || a.k < 0 || a.m > kGemmTcMaxDim || a.n > kGemmTcMaxDim) return false;
  const int64_t a_rows = a.trans_a ? a.k : a.m, a_cols = a.trans_a ? a.m : a.k;
  const int64_t b_rows = a.trans_b ? a.n : a.k, b_cols = a.trans_b ? a.k : a.n;
  if (a.lda < (a_cols > 0 ? a_cols : 1) || a.ldb < (b_cols > 0 ? b_cols : 1) || a.ldd < (a.n > 0 ? a.n : 1))
    return false;
  if (a.m > 0 && a.n > 0 && (a.scalars == nullptr || a.d == nullptr)) return false;
  if (a_rows > 0 && a_cols > 0 && a.a == nullptr) return false;
  if (b_rows > 0 && b_cols > 0 && a.b == nullptr) return false;
  return true;
}

cudaError_t gemm_tc_wmma(const GemmTcArgs& args, cudaStream_t stream) {
  return tc::launch_wmma<tc::NoFault>(args, stream);
}

cudaError_t gemm_tc_mma(const GemmTcArgs& args, cudaStream_t stream) {
  return tc::launch_mma<tc::NoFault>(args, stream);
}

}  // namespace assay::kernels
