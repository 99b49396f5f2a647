// sgemm_tiled as a variant of assay's built-in gemm op (tensors A, B, C; params
// m, n, k, trans_a, trans_b, alpha, beta: `sgemm_assay list --op gemm`). The contract
// says what the kernel assumes; assay draws cases inside it, reports cases
// outside it as not applicable, and `--probe-contract` tries each rule's edge.
#include "harness/op.h"
#include "kernels/sgemm_tiled.h"

using namespace assay;

ASSAY_REGISTER(add_variant(
    "gemm",
    {.name = "sgemm_tiled",
     .description = "32x32 / 64x64 shared-memory tiles, 4x4 per thread, float4 loads",
     .launch =
         [](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
           demo::SgemmArgs g;
           g.m = static_cast<int>(p.i("m")), g.n = static_cast<int>(p.i("n")), g.k = static_cast<int>(p.i("k"));
           g.alpha = static_cast<float>(p.r("alpha", 1)), g.beta = static_cast<float>(p.r("beta"));
           g.a = t[0].as<const float>(), g.lda = static_cast<int>(t[0].v.ld);
           g.b = t[1].as<const float>(), g.ldb = static_cast<int>(t[1].v.ld);
           g.c = t[2].as<float>(), g.ldc = static_cast<int>(t[2].v.ld);
           return demo::sgemm_tiled(g, s);
         },
     .contract = Contract()
                     .only("trans_a", {false})  // row-major A and B only
                     .only("trans_b", {false})
                     .multiple_of("m", 64)  // whole tiles: no bounds checks
                     .multiple_of("n", 64)
                     .multiple_of("k", 8)
                     .aligned(16)             // float4 loads and stores
                     .reads_c_when_beta0()    // beta * C is computed even for beta == 0
                     .switches_at("m", {256}),  // 32x32 tiles below, 64x64 from 256
     .source = "kernels/sgemm_tiled.cu"}));
