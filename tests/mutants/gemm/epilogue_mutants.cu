// MUTANTS gemm_bias_act / gemm_bias_act_bwd -- planted bugs, not kernels to use. Each is the kernel
// of kernels/gemm/gemm_epilogue.cu with one functor swapped (tests/mutants/gemm/epilogue_mutants.h).
//
// epi_bias_after_act (forward): Y = act(acc) + bias. Identical for act none; for relu / gelu
//   exposed by any bias with some negative pre-activations; caught by the bound (kBound), the
//   exact tier (kExact), and the Y = act(Z) property of relation cases (kProperty).
// epi_store_tail (forward): the store guard is c <= n: column n of every row gets act(0 + bias[n])
//   (bias read one element past its end, from its guard band). With a row pad that lands in the
//   row gap (kGap); without, on element (i + 1, 0), racing with its rightful writer, and past the
//   last row into Y's or Z's guard band (kGuard).
// epi_dbias_overwrite (backward): dbias = sum_i dZ[i][:], the prefill dropped. Caught by the bound
//   (kBound / kExact) wherever the prefill is nonzero, and by the gradient check (kProjection:
//   dbias - prefill is then off by the prefill).
// epi_gelu_grad_half (backward, act gelu): the first term of GELU' is (1 + t), not 0.5 (1 + t): dZ
//   is off by 0.5 (1 + t) dY. Caught by the bound (kBound) and the gradient check (kProjection).
// epi_relu_grad_at_zero (backward, act relu): relu'(0) = 1. Exposed only where Z holds an exact
//   zero with a nonzero dY (small-integer Z: the exact tier); caught by kExact / kBound.
#include "kernels/gemm/gemm_epilogue.cuh"
#include "tests/mutants/gemm/epilogue_mutants.h"

namespace assay::mutants::epi {
namespace {

namespace d = kernels::epi::detail;
using kernels::epi::Act;
using kernels::epi::Dt;

template <typename T>
struct BiasAfterAct {
  d::Epilogue<T> e;
  __device__ void operator()(int64_t i, int64_t j, float acc) const {
    const float b = d::load(e.bias + j);
    if (e.z != nullptr) d::store(e.z + i * e.ldz + j, acc + b);
    d::store(e.y + i * e.ldy + j, d::act_fwd(e.act, acc) + b);  // BUG: bias after the activation
  }
};

template <typename T>
struct TailStore {
  d::Epilogue<T> e;
  int64_t n;
  __device__ void operator()(int64_t i, int64_t j, float acc) const {
    e(i, j, acc);
    if (j == n - 1) e(i, n, 0.0f);  // BUG: the guard c < n written c <= n (column n's accumulator is 0)
  }
};

template <typename T>
struct OverwriteBias {
  T* p;
  __device__ void operator()(int64_t j, float s) const { d::store(p + j, s); }  // BUG: = instead of +=
};

enum class GradBug { kGeluHalf, kReluAtZero };

template <typename T, GradBug B>
struct DzBug {
  d::DzOf<T> dz;
  __device__ float operator()(int64_t i, int64_t j) const {
    const float x = d::load(dz.z + i * dz.ldz + j), g = d::load(dz.dy + i * dz.lddy + j);
    if (B == GradBug::kReluAtZero && dz.act == Act::kRelu) return g * (x >= 0.0f ? 1.0f : 0.0f);  // BUG: >=
    if (B == GradBug::kGeluHalf && dz.act == Act::kGelu) {
      const float t = tanhf(d::kGeluK * (x + d::kGeluC * x * x * x));
      const float s = 1.0f - t * t;
      const float second = s == 0.0f ? 0.0f : 0.5f * x * s * (d::kGeluK * (1.0f + 3.0f * d::kGeluC * x * x));
      return g * ((1.0f + t) + second);  // BUG: 0.5 missing in the first term
    }
    return dz(i, j);
  }
};

template <typename T>
d::Epilogue<T> epilogue_of(const FwdArgs& g) {
  return {static_cast<const T*>(g.bias), g.act, static_cast<T*>(g.y), g.ldy, static_cast<T*>(g.z), g.ldz};
}

template <typename T>
d::DzOf<T> dz_of(const BwdArgs& g) {
  return {static_cast<const T*>(g.z), g.ldz, static_cast<const T*>(g.dy), g.lddy, g.act};
}

template <typename T, int Bug>
cudaError_t fwd(const FwdArgs& g, cudaStream_t s) {
  const d::OpMat<T> a{static_cast<const T*>(g.a), g.lda, g.trans_a}, b{static_cast<const T*>(g.b), g.ldb, g.trans_b};
  if constexpr (Bug == 0)
    return d::launch_product(g.m, g.n, g.k, a, b, BiasAfterAct<T>{epilogue_of<T>(g)}, s);
  else
    return d::launch_product(g.m, g.n, g.k, a, b, TailStore<T>{epilogue_of<T>(g), g.n}, s);
}

template <typename T, int Bug>
cudaError_t bwd(const BwdArgs& g, cudaStream_t s) {
  if constexpr (Bug == 0)
    return d::launch_bwd<T>(g, dz_of<T>(g), OverwriteBias<T>{static_cast<T*>(g.dbias)}, s);
  else
    return d::launch_bwd<T>(g, DzBug < T, Bug == 1 ? GradBug::kGeluHalf : GradBug::kReluAtZero > {dz_of<T>(g)},
                            d::AccumulateBias<T>{static_cast<T*>(g.dbias)}, s);
}

template <int Bug>
cudaError_t dispatch_fwd(const FwdArgs& g, cudaStream_t s) {
  if (d::bad_fwd(g)) return cudaErrorInvalidValue;
  return g.dt == Dt::kF16    ? fwd<__half, Bug>(g, s)
         : g.dt == Dt::kBF16 ? fwd<__nv_bfloat16, Bug>(g, s)
                             : fwd<float, Bug>(g, s);
}

template <int Bug>
cudaError_t dispatch_bwd(const BwdArgs& g, cudaStream_t s) {
  if (d::bad_bwd(g)) return cudaErrorInvalidValue;
  return g.dt == Dt::kF16    ? bwd<__half, Bug>(g, s)
         : g.dt == Dt::kBF16 ? bwd<__nv_bfloat16, Bug>(g, s)
                             : bwd<float, Bug>(g, s);
}

}  // namespace

cudaError_t epi_bias_after_act(const FwdArgs& a, cudaStream_t s) {
  return dispatch_fwd<0>(a, s);
}
cudaError_t epi_store_tail(const FwdArgs& a, cudaStream_t s) {
  return dispatch_fwd<1>(a, s);
}
cudaError_t epi_dbias_overwrite(const BwdArgs& a, cudaStream_t s) {
  return dispatch_bwd<0>(a, s);
}
cudaError_t epi_gelu_grad_half(const BwdArgs& a, cudaStream_t s) {
  return dispatch_bwd<1>(a, s);
}
cudaError_t epi_relu_grad_at_zero(const BwdArgs& a, cudaStream_t s) {
  return dispatch_bwd<2>(a, s);
}

}  // namespace assay::mutants::epi
