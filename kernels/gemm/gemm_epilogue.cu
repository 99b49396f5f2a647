// GEMM + bias + activation, epilogue fused, and its backward (kernels/gemm/gemm_epilogue.h).
// Both passes are tiled products of kernels/gemm/gemm_epilogue.cuh; this file picks the
// operands and stores per dtype.
#include "kernels/gemm/gemm_epilogue.cuh"

namespace assay::kernels::epi {
namespace {

template <typename T>
cudaError_t fwd(const FwdArgs& g, cudaStream_t s) {
  const detail::OpMat<T> a{static_cast<const T*>(g.a), g.lda, g.trans_a},
      b{static_cast<const T*>(g.b), g.ldb, g.trans_b};
  const detail::Epilogue<T> e{static_cast<const T*>(g.bias), g.act, static_cast<T*>(g.y), g.ldy,
                              static_cast<T*>(g.z),          g.ldz};
  return detail::launch_product(g.m, g.n, g.k, a, b, e, s);
}

template <typename T>
cudaError_t bwd(const BwdArgs& g, cudaStream_t s) {
  const detail::DzOf<T> dz{static_cast<const T*>(g.z), g.ldz, static_cast<const T*>(g.dy), g.lddy, g.act};
  return detail::launch_bwd<T>(g, dz, detail::AccumulateBias<T>{static_cast<T*>(g.dbias)}, s);
}

}  // namespace

cudaError_t gemm_bias_act_tiled(const FwdArgs& g, cudaStream_t s) {
  if (detail::bad_fwd(g)) return cudaErrorInvalidValue;
  switch (g.dt) {
    case Dt::kF16:
      return fwd<__half>(g, s);
    case Dt::kBF16:
      return fwd<__nv_bfloat16>(g, s);
    default:
      return fwd<float>(g, s);
  }
}

cudaError_t gemm_bias_act_bwd(const BwdArgs& g, cudaStream_t s) {
  if (detail::bad_bwd(g)) return cudaErrorInvalidValue;
  switch (g.dt) {
    case Dt::kF16:
      return bwd<__half>(g, s);
    case Dt::kBF16:
      return bwd<__nv_bfloat16>(g, s);
    default:
      return bwd<float>(g, s);
  }
}

}  // namespace assay::kernels::epi
