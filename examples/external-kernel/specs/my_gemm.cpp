// my_gemm: this repository's fp32 GEMM kernels, fuzzed by assay as variants
// of its built-in "gemm" op. Generators, references (host and device fp64,
// cuBLAS), the per-element bound, the memory checks, shrinking and the corpus
// all come from assay's gemm testbed; this file only binds the kernels.
//
// Variants:
//   my_gemm      kernels/my_gemm.cu, compiled into this executable (KERNELS).
//   my_gemm_aot  kernels/my_gemm_aot.cu, compiled to PTX by the build (IMAGES)
//                and loaded at run time through the CUDA driver API, the way
//                a kernel built elsewhere (a Triton AOT cubin) is: a file, a
//                symbol, a launch signature and a launch geometry.
//
// Sections: binding (linked kernel), binding (kernel built elsewhere).
#include "kernels/my_gemm.h"
#include "harness/gpu/module.h"
#include "harness/testbeds/gemm_f32.h"

namespace {

using assay::GemmF32Problem;
using assay::StatusOr;
namespace gpu = assay::gpu;

// ---- binding: the linked kernel -----------------------------------------------
[[maybe_unused]] const bool kMyGemm =
    assay::register_gemm_f32_variant({{"my_gemm", "this repository's fp32 GEMM: 16x16 blocks, one element per thread",
                                       false, true, "kernels/my_gemm.cu"},
                                      [](const GemmF32Problem& p, cudaStream_t s) {
                                        my::GemmArgs g;
                                        g.m = p.m, g.n = p.n, g.k = p.k, g.trans_a = p.trans_a, g.trans_b = p.trans_b;
                                        g.alpha = p.alpha, g.beta = p.beta;
                                        g.a = p.a, g.lda = p.lda, g.b = p.b, g.ldb = p.ldb, g.c = p.c, g.ldc = p.ldc;
                                        return my::my_gemm(g, s);
                                      }});

// ---- binding: the kernel built elsewhere -----------------------------------------
// ASSAY_IMAGE_MY_GEMM_AOT is the image's absolute path, defined by
// assay_add_kernel_spec(... IMAGES kernels/my_gemm_aot.cu). The signature is
// the kernel's parameter list; each parameter is bound by name below (a
// pointer to a tensor, or a scalar). The driver checks its count and sizes
// against the kernel's own when the image is loaded.
const gpu::DriverKernel kMyGemmAot(
    ASSAY_IMAGE_MY_GEMM_AOT, "my_gemm_aot",
    "const float* A, const float* B, float* C, int64_t m, int64_t n, int64_t k, int32_t trans_a, int32_t trans_b, "
    "int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta",
    // 32x8 threads, one per element of C; the kernel loops past the grid limits.
    [](const nlohmann::json& s) -> StatusOr<gpu::LaunchDims> {
      return gpu::LaunchDims::cover_2d(s.at("n").get<int64_t>(), s.at("m").get<int64_t>(), 32, 8);
    });

[[maybe_unused]] const bool kMyGemmAotRegistered = assay::register_gemm_f32_variant(
    {{"my_gemm_aot", "my_gemm_aot.cu as PTX, loaded through the driver API (a kernel built elsewhere)", false, true,
      "kernels/my_gemm_aot.cu"},
     [](const GemmF32Problem& p, cudaStream_t s) {
       gpu::LaunchBindings b;
       b.tensors = {{"A", p.a}, {"B", p.b}, {"C", p.c}};
       b.scalars = {{"m", p.m},     {"n", p.n},     {"k", p.k},     {"trans_a", p.trans_a}, {"trans_b", p.trans_b},
                    {"lda", p.lda}, {"ldb", p.ldb}, {"ldc", p.ldc}, {"alpha", p.alpha},     {"beta", p.beta}};
       // A load or launch failure is printed once and comes back as the
       // matching cudaError_t, which the testbed reports as a launch error.
       return kMyGemmAot.launch_or_report(b, s);
     }});

}  // namespace
