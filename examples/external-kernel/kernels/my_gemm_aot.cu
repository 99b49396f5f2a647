// my_gemm_aot: the same GEMM as a kernel "built elsewhere". It stands for
// what another toolchain delivers (an ahead-of-time compiled Triton kernel, a
// cubin from another repository): a file and a plain extern "C" symbol, no
// host code. The build compiles it to PTX (assay_add_kernel_spec ... IMAGES);
// assay loads that file at run time through the CUDA driver API and launches
// it with the signature written in specs/my_gemm.cpp.
//
// Parameters are Triton-like: pointers first, then int64 extents and leading
// dimensions, int32 flags, fp32 scalars. One thread per element of C; the
// launch geometry (32x8 blocks) is stated in the spec.
#include <cstdint>

extern "C" __global__ void __launch_bounds__(256)
    my_gemm_aot(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int64_t m, int64_t n,
                int64_t k, int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha,
                float beta) {
  const int64_t a_step = trans_a ? lda : 1;
  const int64_t b_step = trans_b ? 1 : ldb;
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  const int64_t col_stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; i < m; i += row_stride) {
    for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += col_stride) {
      const float* pa = a + (trans_a ? i : i * lda);
      const float* pb = b + (trans_b ? j * ldb : j);
      float acc = 0.0f;
#pragma unroll 4
      for (int64_t p = 0; p < k; ++p) acc = fmaf(pa[p * a_step], pb[p * b_step], acc);
      float* pc = c + i * ldc + j;
      *pc = beta == 0.0f ? alpha * acc : fmaf(beta, *pc, alpha * acc);  // beta == 0: C is not read
    }
  }
}
