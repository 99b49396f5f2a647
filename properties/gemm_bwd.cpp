// gemm_bwd: the backward of C = alpha * A * B (fp32, row-major):
//   dA = alpha dC B^T (overwrite), dB += alpha A^T dC (accumulate).
//
// Variants: tiled (two tiled GEMMs), atomic (dB by atomicAdd over row chunks;
// declared non-deterministic, so judged by the bound alone).
// Mutants (tests/mutants/gemm/gemm_bwd_mutants.cu) register as extra variants.
//
// Sections: binding, generators, references, bound, properties.
// References: the fp64 host GEMM reference for both outputs (dB with its
// prefill as beta*C). Bound: gemm_ceiling with k = n for dA and k = m (+beta)
// for dB. Properties: both bounds, NaN/Inf pattern, guards, poison of dA, gaps,
// inputs untouched, determinism where declared, accumulate semantics (the
// prefill is random, never zero), and <dC, J u> against central differences
// of the fp64 forward. Upstream gradients dC come from the value classes, so
// their rows differ.
#include <algorithm>
#include <vector>

#include <rapidcheck.h>

#include "harness/generators.h"
#include "harness/spec.h"
#include "harness/testbeds/gemm_bwd_f32.h"
#include "kernels/gemm/gemm_backward.h"
#include "properties/gemm_binding.h"

namespace assay {
namespace {

// ---- binding ---------------------------------------------------------------------
[[maybe_unused]] const bool kTiled =
    register_gemm_bwd_f32_variant({{"tiled", "dA and dB through the tiled GEMM (dB accumulates with beta = 1)", false,
                                    true, "kernels/gemm/gemm_backward.cu"},
                                   launch_through(kernels::gemm_bwd_f32_tiled)});
[[maybe_unused]] const bool kAtomic = register_gemm_bwd_f32_variant(
    {{"atomic", "dB by atomicAdd over row chunks (non-deterministic order: judged by the bound)", false, false,
      "kernels/gemm/gemm_backward.cu"},
     launch_through(kernels::gemm_bwd_f32_atomic)});

// ---- generators -----------------------------------------------------------------
rc::Gen<Case> gemm_bwd_cases(const GenConfig& cfg) {
  const int64_t cap = std::min<int64_t>(cfg.max_dim, 96);  // the fp64 finite differences run on the host
  return rc::gen::exec([cap] {
    const int64_t m = *gen_extent(cap, {32}, 1), n = *gen_extent(cap, {32}, 1), k = *gen_extent(cap, {32}, 1);
    const double alpha = *rc::gen::elementOf(std::vector<double>{1, -1, 0.5, 1.5, 2});
    const int64_t pad = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 5});
    const int64_t off = *rc::gen::elementOf(std::vector<int64_t>{0, 0, 0, 1, 2});
    const std::vector<ValueClass> classes = {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign,
                                             ValueClass::kSmallInt, ValueClass::kLogUniform};
    const ValueRecipe ra = *gen_value_recipe(classes), rb = *gen_value_recipe(classes);
    const ValueRecipe rdc = *gen_value_recipe(classes), rdb = *gen_value_recipe(classes);
    return make_gemm_bwd_case(m, n, k, alpha, pad, off, ra, rb, rdc, rdb);
  });
}

// ---- spec --------------------------------------------------------------------------
class GemmBwdSpec final : public OpSpec {
 public:
  std::string name() const override { return "gemm_bwd"; }
  std::string description() const override {
    return "fp32 backward of C = alpha*A*B: dA = alpha dC B^T, dB += alpha A^T dC";
  }
  std::vector<VariantInfo> variants() const override {
    std::vector<VariantInfo> out;
    for (const auto& v : gemm_bwd_f32_variants()) out.push_back(v.info);
    return out;
  }
  rc::Gen<Case> generator(const GenConfig& config) const override { return gemm_bwd_cases(config); }
  Status validate(const Case& c) const override { return validate_gemm_bwd_case(c); }
  StatusOr<std::vector<Verdict>> run(const Case& c, const std::vector<std::string>& variants,
                                     gpu::Lane& lane) const override {
    return run_gemm_bwd_f32(c, variants, lane);
  }
  std::vector<Case> shrink(const Case& c) const override { return shrink_gemm_bwd_case(c); }
  Status self_check(std::string& report) const override {
    report += "gemm_bwd: host references are the GEMM reference (see gemm) and are gradient-checked in CPU tests\n";
    return ok_status();
  }
};

ASSAY_REGISTER_SPEC(GemmBwdSpec);

}  // namespace
}  // namespace assay
