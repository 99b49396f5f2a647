// gemm: C = alpha * op(A) * op(B) + beta * C, fp32, row-major with leading
// dimensions (conventions in kernels/gemm/gemm.h).
//
// Variants: naive (one thread per element), tiled (32x32 shared-memory tiles),
// and the optimisation ladder of kernels/gemm/gemm_ladder_f32.cu: coalesced
// (flat blocks, lane -> column, two k chains), regblock (64x64 tiles, 4x4
// register micro-tiles), vec4 (regblock with float4 loads where the view is
// 16-byte aligned with ld % 4 == 0, scalar fallback otherwise), cpasync
// (3-stage cp.async pipeline), splitk (k chunks over blockIdx.z, C = beta*C,
// then atomicAdd of alpha*partial; non-deterministic, judged by the bound).
// Mutants (tests/mutants/gemm) register themselves as extra variants.
//
// Bound: gemm_ceiling (harness/bounds.h), gamma_{k+2}(2^-24)*mag + floor. It
// is order-free ([H] (3.5): only the number of roundings on a term's path
// counts), so it covers every rung, two-chain sums and split-K alike. Split-K
// with S nonempty chunks of at most c terms: a term passes c FMA roundings in
// its chunk, one for alpha*partial and at most S atomic additions; c + S - 1 <= k
// (the other S-1 chunks hold at least one term each), so c + 1 + S <= k + 2;
// beta*C passes 1 + S <= k + 2. The underflow floor is the one place split-K
// needs more: atom.add.f32 flushes subnormal inputs and results (PTX ISA), so
// each of the S atomics may lose < 2 min_normal and each alpha*partial < one,
// 3S + 2 unscaled operations against the ceiling's 3; with S <= k the testbed
// adds 3k * min_normal (gemm_f32.cpp, split_k_flush_floor).
//
// Metamorphic relations (case param "relation", about a quarter of the cases):
// "transpose" (C^T = op(B)^T op(A)^T + beta C^T through the swapped launch),
// "alpha2" (alpha and C doubled: C doubles), "permute_rows" (rows of op(A)
// and C permuted: rows of C permuted); harness/testbeds/gemm_f32.h.
//
// Sections: binding, generators, references, bound, properties.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "harness/generators.h"
#include "harness/spec.h"
#include "harness/testbeds/gemm_f32.h"
#include "kernels/gemm/gemm.h"
#include "properties/gemm_binding.h"

namespace assay {
namespace {

// ---- binding ----------------------------------------------------------------
[[maybe_unused]] const bool kNaive = register_gemm_f32_variant(
    {{"naive", "one thread per element of C, fp32 FMA k-loop", false, true, "kernels/gemm/gemm_naive.cu"},
     launch_through(kernels::gemm_f32_naive)});
[[maybe_unused]] const bool kTiled = register_gemm_f32_variant(
    {{"tiled", "32x32 shared-memory tiles, guarded tails", false, true, "kernels/gemm/gemm_tiled.cu"},
     launch_through(kernels::gemm_f32_tiled)});
// The optimisation ladder (kernels/gemm/gemm_ladder_f32.cu).
constexpr const char* kLadderSrc = "kernels/gemm/gemm_ladder_f32.cu";
[[maybe_unused]] const bool kLadder[] = {
    register_gemm_f32_variant({{"coalesced", "flat blocks, lane -> column of C, two k chains", false, true, kLadderSrc},
                               launch_through(kernels::gemm_f32_coalesced)}),
    register_gemm_f32_variant(
        {{"regblock", "64x64 tiles, 4x4 register micro-tiles, 8-wide k slices", false, true, kLadderSrc},
         launch_through(kernels::gemm_f32_regblock)}),
    register_gemm_f32_variant(
        {{"vec4", "regblock with float4 loads on aligned views, scalar fallback", false, true, kLadderSrc},
         launch_through(kernels::gemm_f32_vec4)}),
    register_gemm_f32_variant(
        {{"cpasync", "regblock tiles through a 3-stage cp.async pipeline", false, true, kLadderSrc},
         launch_through(kernels::gemm_f32_cpasync)}),
    // Atomic accumulation order varies between launches: no bitwise rerun, the bound judges.
    register_gemm_f32_variant(
        {{"splitk", "k split over blockIdx.z, C = beta*C then atomicAdd of partials", false, false, kLadderSrc},
         launch_through(kernels::gemm_f32_splitk)}),
};

// ---- generators ---------------------------------------------------------------
// Edge-biased extents: the small and structural values first, so shrinking
// (which moves toward earlier elements and toward 0) ends at small shapes.
rc::Gen<int64_t> extent(int64_t max_dim) {
  const int64_t t = kernels::kGemmTiledTile;
  std::vector<int64_t> edges = {1,  2,  3,  0,  5,   7,   t - 1, t,   t + 1, 2 * t - 1, 2 * t + 1, 17,  31,
                                37, 61, 67, 97, 127, 129, 255,   257, 509,   1021,      2039,      2048};
  edges.erase(std::remove_if(edges.begin(), edges.end(), [&](int64_t e) { return e > max_dim; }), edges.end());
  return rc::gen::weightedOneOf<int64_t>({
      {5, rc::gen::elementOf(edges)},
      {4, rc::gen::inRange<int64_t>(0, std::min<int64_t>(max_dim, 96) + 1)},
      {1, rc::gen::inRange<int64_t>(0, max_dim + 1)},
  });
}

rc::Gen<Case> gemm_cases(const GenConfig& cfg) {
  return rc::gen::exec([cfg] {
    int64_t m = *extent(cfg.max_dim), n = *extent(cfg.max_dim), k = *extent(cfg.max_dim);
    // Keep any one case under ~2^31 multiply-adds so a campaign's rate stays
    // meaningful; shrink the largest dimension until it fits.
    while (m * n * std::max<int64_t>(k, 1) > (int64_t{1} << 31)) {
      int64_t& big = m >= n && m >= k ? m : (n >= k ? n : k);
      big /= 2;
    }
    const bool trans_a = *rc::gen::arbitrary<bool>();
    const bool trans_b = *rc::gen::arbitrary<bool>();
    const auto pad = rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::elementOf(std::vector<int64_t>{1, 3, 4, 16, 33})}});
    const int64_t pad_a = *pad, pad_b = *pad, pad_c = *pad;
    const auto off = rc::gen::weightedOneOf<int64_t>(
        {{4, rc::gen::just<int64_t>(0)}, {1, rc::gen::elementOf(std::vector<int64_t>{1, 2, 4, 5})}});
    const int64_t off_a = *off, off_b = *off, off_c = *off;
    // Values: a third of the cases are exact-tier (small integers in A, B and
    // C, integer scalars: compared bit for bit); the rest draw A, B and C
    // independently from every value class, a fifth of them with NaN/Inf/-0
    // injected at random positions, the first/last element or tile edges.
    const bool exact = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    ValueRecipe ra, rb, rc_;
    double alpha, beta;
    if (exact) {
      ra.cls = ValueClass::kSmallInt;
      ra.seed = *rc::gen::arbitrary<uint64_t>();
      rb = rc_ = ra;
      alpha = *rc::gen::elementOf(std::vector<double>{1, -1, 2});
      beta = *rc::gen::elementOf(std::vector<double>{0, 1, -1, 2});
    } else {
      RecipeOptions ro;
      ro.classes = {ValueClass::kNormal,     ValueClass::kUniform,      ValueClass::kSameSign,
                    ValueClass::kSmallInt,   ValueClass::kLogUniform,   ValueClass::kPareto,
                    ValueClass::kMeanSpread, ValueClass::kNearOverflow, ValueClass::kSubnormal,
                    ValueClass::kSignedZero, ValueClass::kOneHot,       ValueClass::kPermutation};
      ro.dtype = DType::kF32;
      ro.specials = kSpecialAll;
      ro.tile = kernels::kGemmTiledTile;
      ro.inject_percent = 20;
      const auto recipe = gen_value_recipe(ro);
      ra = *recipe;
      rb = *recipe;
      rc_ = *recipe;
      const bool near_overflow = ra.cls == ValueClass::kNearOverflow || rb.cls == ValueClass::kNearOverflow ||
                                 rc_.cls == ValueClass::kNearOverflow;
      // alpha = 0 would turn an overflowed (Inf) accumulator into NaN, which
      // the exact result (beta*C) does not excuse: keep it for finite data.
      alpha = near_overflow ? *rc::gen::elementOf(std::vector<double>{1, -1, 1.5})
                            : *rc::gen::elementOf(std::vector<double>{1, -1, 0.5, 1.5, -0.75, 0});
      beta = *rc::gen::elementOf(std::vector<double>{0, 1, -1, 0.5, 2.25});
    }
    Case c =
        make_gemm_case(m, n, k, trans_a, trans_b, alpha, beta, pad_a, pad_b, pad_c, off_a, off_b, off_c, ra, rb, rc_);
    // A quarter of the cases also run a metamorphic relation (one more launch each).
    // (weightedElement: inRange's spread depends on the generation size.)
    const int rel = *rc::gen::weightedElement<int>({{9, -1}, {1, 0}, {1, 1}, {1, 2}});
    if (rel >= 0) c.params["relation"] = kGemmRelations[rel];
    return c;
  });
}

// ---- spec -------------------------------------------------------------------------
// References: host fp64 (references/host/gemm.h) up to kDeviceRefWork
// multiply-adds, device fp64 (references/device/gemm_f64.cu) above; cuBLAS
// fp32 pedantic as the vendor column. Bound: gemm_ceiling (harness/bounds.h).
// Properties checked per case: bound, NaN/Inf pattern (incl. beta = 0 with NaN
// in C), exact tier for small integers, guards, poison, gaps, inputs
// untouched, determinism over two launches.
class GemmSpec final : public OpSpec {
 public:
  std::string name() const override { return "gemm"; }
  std::string description() const override { return "fp32 C = alpha*op(A)op(B) + beta*C, row-major"; }
  std::vector<VariantInfo> variants() const override {
    std::vector<VariantInfo> out;
    for (const auto& v : gemm_f32_variants()) out.push_back(v.info);
    return out;
  }
  rc::Gen<Case> generator(const GenConfig& config) const override { return gemm_cases(config); }
  Status validate(const Case& c) const override { return parse_gemm_case(c).status(); }
  StatusOr<std::vector<Verdict>> run(const Case& c, const std::vector<std::string>& variants,
                                     gpu::Lane& lane) const override {
    return run_gemm_f32(c, variants, lane);
  }
  StatusOr<nlohmann::json> time_large(const std::string& variant, gpu::Lane& lane) const override {
    return gemm_time_large(variant, lane);
  }
  StatusOr<Inspection> inspect(const Case& c, const std::string& variant, gpu::Lane& lane) const override {
    return gemm_inspect(c, variant, lane);
  }
  StatusOr<Case> with_param(const Case& c, const std::string& key, int64_t value) const override {
    return gemm_with_param(c, key, value);
  }
  std::vector<Case> shrink(const Case& c) const override { return shrink_gemm_case(c); }
  Status self_check(std::string& report) const override { return gemm_host_self_check(200, report); }
};

ASSAY_REGISTER_SPEC(GemmSpec);

}  // namespace
}  // namespace assay
