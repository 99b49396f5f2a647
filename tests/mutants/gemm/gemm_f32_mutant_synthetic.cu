// MUTANTS gemm_f32_mutant_drop_one_k, gemm_f32_mutant_tf32 -- planted bugs, not kernels to use.
//
// The synthetic errors of issue 3's detection table, each a naive one-thread-per-element
// fp32 FMA loop with one change:
// - drop_one_k: the term p = k / 2 is skipped (only for k >= 2): one dropped k-term, the
//   smallest possible loss of a term; invisible at k = 1, and at K = 4096 a single term
//   among 4096 -- the bound must still see it (|a_p b_p| >> gamma_k |A||B| / k only when
//   the term is not small, so normal data catch it at some elements, small integers always
//   through the exact tier).
// - tf32: A and B rounded to tf32 (cvt.rna.tf32.f32: 10 mantissa bits) before the fp32 FMA
//   loop: "tf32 where fp32 was promised" -- an input-rounding error of 2^-11 relative per
//   product, far above the fp32 ceiling's gamma_k(2^-24) at short k, comparable at long k.
#include <algorithm>
#include <cstdint>

#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmF32Args;

__device__ float to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

template <int Mode>  // 0: drop one k-term, 1: tf32 inputs
__global__ void synthetic_kernel(GemmF32Args g) {
  const int64_t total = g.m * g.n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / g.n, j = e % g.n;
    float acc = 0.0f;
    for (int64_t p = 0; p < g.k; ++p) {
      if (Mode == 0 && g.k >= 2 && p == g.k / 2) continue;  // BUG (drop_one_k)
      float a = g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
      float b = g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
      if (Mode == 1) a = to_tf32(a), b = to_tf32(b);  // BUG (tf32)
      acc = fmaf(a, b, acc);
    }
    float* c = g.c + i * g.ldc + j;
    *c = g.beta == 0.0f ? g.alpha * acc : g.alpha * acc + g.beta * *c;
  }
}

template <int Mode>
cudaError_t launch(const GemmF32Args& g, cudaStream_t s) {
  if (g.m <= 0 || g.n <= 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((g.m * g.n + 255) / 256, 1 << 16);
  synthetic_kernel<Mode><<<static_cast<unsigned>(blocks), 256, 0, s>>>(g);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gemm_f32_mutant_drop_one_k(const GemmF32Args& args, cudaStream_t stream) {
  return launch<0>(args, stream);
}
cudaError_t gemm_f32_mutant_tf32(const GemmF32Args& args, cudaStream_t stream) {
  return launch<1>(args, stream);
}

}  // namespace assay::mutants
