// my_gemm: this repository's fp32 GEMM kernels, fuzzed by assay as variants
// of its built-in "gemm" op. Generators, references (host and device fp64,
// cuBLAS), the per-element bound, the memory checks, shrinking and the corpus
// all come from assay's gemm op; this file only binds the kernels.
//
// Variants:
//   my_gemm      kernels/my_gemm.cu, compiled into this executable (KERNELS).
//   my_gemm_aot  kernels/my_gemm_aot.cu, compiled to PTX by the build (IMAGES)
//                and loaded at run time through the CUDA driver API, the way
//                a kernel built elsewhere (a Triton AOT cubin) is: a file, a
//                symbol, a launch signature and a launch geometry.
//
// The gemm op's tensors are A, B, C in that order; its params m, n, k,
// trans_a, trans_b, alpha, beta (assay list --op gemm). Both kernels take any
// shape, transpose and leading dimension, so neither declares a contract.
#include "kernels/my_gemm.h"
#include "harness/gpu/module.h"
#include "harness/op.h"

namespace {

using assay::DevTensor;
using assay::Params;
namespace gpu = assay::gpu;

// ---- binding: the linked kernel -----------------------------------------------
ASSAY_REGISTER(assay::add_variant(
    "gemm", {.name = "my_gemm",
             .description = "this repository's fp32 GEMM: 16x16 blocks, one element per thread",
             .launch =
                 [](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
                   my::GemmArgs g;
                   g.m = p.i("m"), g.n = p.i("n"), g.k = p.i("k"), g.trans_a = p.b("trans_a"), g.trans_b = p.b("trans_b");
                   g.alpha = static_cast<float>(p.r("alpha", 1)), g.beta = static_cast<float>(p.r("beta"));
                   g.a = t[0].as<const float>(), g.lda = t[0].v.ld;
                   g.b = t[1].as<const float>(), g.ldb = t[1].v.ld;
                   g.c = t[2].as<float>(), g.ldc = t[2].v.ld;
                   return my::my_gemm(g, s);
                 },
             .source = "kernels/my_gemm.cu"}));

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
    [](const nlohmann::json& s) -> assay::StatusOr<gpu::LaunchDims> {
      return gpu::LaunchDims::cover_2d(s.at("n").get<int64_t>(), s.at("m").get<int64_t>(), 32, 8);
    });

ASSAY_REGISTER(assay::add_variant(
    "gemm", {.name = "my_gemm_aot",
             .description = "my_gemm_aot.cu as PTX, loaded through the driver API (a kernel built elsewhere)",
             .launch =
                 [](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
                   gpu::LaunchBindings b;
                   b.tensors = {{"A", t[0].ptr}, {"B", t[1].ptr}, {"C", t[2].ptr}};
                   b.scalars = {{"m", p.i("m")},         {"n", p.i("n")},         {"k", p.i("k")},
                                {"trans_a", p.b("trans_a")}, {"trans_b", p.b("trans_b")}, {"lda", t[0].v.ld},
                                {"ldb", t[1].v.ld},      {"ldc", t[2].v.ld},      {"alpha", p.r("alpha", 1)},
                                {"beta", p.r("beta")}};
                   // A load or launch failure is printed once and comes back as the
                   // matching cudaError_t, which the engine reports as a launch error.
                   return kMyGemmAot.launch_or_report(b, s);
                 },
             .source = "kernels/my_gemm_aot.cu"}));

}  // namespace
