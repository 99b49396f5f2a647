// Binding of the fp32 GEMM kernels (kernels/gemm/gemm.h, gemm_backward.h signatures) to
// the gemm and gemm_bwd ops, and the case helpers tests and tools share.
//
// gemm: params m, n, k (extents), trans_a, trans_b (flags), alpha, beta (fp32 scalars),
// relation (optional: "transpose", "alpha2", "permute_rows"); tensors A [m, k] (stored
// [k, m] when trans_a), B [k, n] ([n, k] when trans_b), C [m, n] (in and out).
// gemm_bwd: params m, n, k, alpha; tensors A [m, k], B [k, n], dC [m, n], dA [m, k] (out),
// dB [k, n] (out; the kernels accumulate into it: Contract::accumulates("dB")).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/op.h"
#include "harness/status.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_backward.h"

namespace assay {

/// fn(const kernels::GemmF32Args&, cudaStream_t) on tensors A, B, C.
template <typename Fn>
Launch gemm_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    kernels::GemmF32Args a;
    a.m = p.i("m"), a.n = p.i("n"), a.k = p.i("k");
    a.trans_a = p.b("trans_a"), a.trans_b = p.b("trans_b");
    a.alpha = static_cast<float>(p.r("alpha", 1)), a.beta = static_cast<float>(p.r("beta", 0));
    a.a = t[0].as<const float>(), a.lda = t[0].v.ld;
    a.b = t[1].as<const float>(), a.ldb = t[1].v.ld;
    a.c = t[2].as<float>(), a.ldc = t[2].v.ld;
    return fn(a, s);
  };
}

/// fn(const kernels::GemmBwdF32Args&, cudaStream_t) on tensors A, B, dC, dA, dB.
template <typename Fn>
Launch gemm_bwd_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    kernels::GemmBwdF32Args a;
    a.m = p.i("m"), a.n = p.i("n"), a.k = p.i("k"), a.alpha = static_cast<float>(p.r("alpha", 1));
    a.a = t[0].as<const float>(), a.lda = t[0].v.ld;
    a.b = t[1].as<const float>(), a.ldb = t[1].v.ld;
    a.dc = t[2].as<const float>(), a.lddc = t[2].v.ld;
    a.da = t[3].as<float>(), a.ldda = t[3].v.ld;
    a.db = t[4].as<float>(), a.lddb = t[4].v.ld;
    return fn(a, s);
  };
}

// ---- case helpers (tests, tools) ------------------------------------------------------------

/// Metamorphic relations a gemm case may name in params.relation (OpDef::transform/relate):
///   "transpose":    square C (the generator sets n = m): A' = op(B)^T, B' = op(A)^T,
///                   C' = C^T in the same layouts, so C'[i][j] is held against C[j][i];
///   "alpha2":       A and C doubled (alpha*(2A)B + beta*(2C) = 2 * the original): C
///                   doubles; the same as doubling alpha, with the launch's params unchanged;
///   "permute_rows": rows of op(A) and C permuted by gemm_relation_permutation(m, A's
///                   seed): C2[i][j] against C[perm[i]][j].
inline constexpr const char* kGemmRelations[] = {"transpose", "alpha2", "permute_rows"};

/// A gemm case's scalars, read after validation.
struct GemmParams {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  std::string relation;
};
/// Validates `c` against the gemm op and reads its scalars; one-line errors.
StatusOr<GemmParams> parse_gemm_case(const Case& c);

/// A gemm case; leading dimensions are cols + pad, offsets in elements.
Case make_gemm_case(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, double alpha, double beta,
                    int64_t pad_a, int64_t pad_b, int64_t pad_c, int64_t off_a, int64_t off_b, int64_t off_c,
                    const ValueRecipe& ra, const ValueRecipe& rb, const ValueRecipe& rc);
/// Same, every input drawing class `cls` (int_range 2) with `seed`.
Case make_gemm_case(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, double alpha, double beta,
                    int64_t pad_a, int64_t pad_b, int64_t pad_c, int64_t off_a, int64_t off_b, int64_t off_c,
                    ValueClass cls, uint64_t seed);

/// The "permute_rows" permutation of m rows for A's recipe seed: Fisher-Yates on SplitMix64.
std::vector<int64_t> gemm_relation_permutation(int64_t m, uint64_t seed);

/// m*n*max(k,1) above which the inputs are drawn on the device and the fp64 reference runs
/// there (OpDef::device_reference).
inline constexpr int64_t kDeviceRefWork = int64_t{1} << 22;
bool gemm_inputs_on_device(const GemmParams& g);
/// m*n*max(k,1) above which the determinism rerun and the vendor column run only on a
/// deterministic quarter of the cases (content hash without the variant, % 4 == 0). The
/// generator stays below 2^31, so this touches only hand-made and bench cases.
inline constexpr int64_t kSampledChecksWork = int64_t{1} << 32;
bool gemm_runs_every_check(const Case& c);

/// A gemm_bwd case: one pad and offset for every tensor; recipes of A, B, dC.
Case make_gemm_bwd_case(int64_t m, int64_t n, int64_t k, double alpha, int64_t pad, int64_t off, const ValueRecipe& ra,
                        const ValueRecipe& rb, const ValueRecipe& rdc);

}  // namespace assay
