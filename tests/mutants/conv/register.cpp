// Registers the planted convolution bugs as [mutant] variants of their ops, bound exactly like
// the kernels they replace (properties/conv_registry.h).
#include "properties/conv_registry.h"
#include "tests/mutants/conv/mutants.h"

namespace assay::conv {
namespace {

namespace m = assay::mutants::conv;
const char* const kSrc = "tests/mutants/conv/conv_mutants.cu";

VariantInfo mutant(const char* name, const char* what) {
  return {name, what, true, true, kSrc};
}

[[maybe_unused]] const bool kConvMutants =
    register_conv(ConvPass::kFwd, mutant("mutant_conv_pad_offset", "direct: input column offset pad_w - 1"),
                  m::conv_fwd_pad_offset) &&
    register_conv(ConvPass::kFwd, mutant("mutant_conv_swapped_stride", "direct: stride_h used along w"),
                  m::conv_fwd_swapped_stride) &&
    register_conv(ConvPass::kFwd,
                  mutant("mutant_conv_right_edge", "direct: no j >= W check, reads the next row past the edge"),
                  m::conv_fwd_right_edge) &&
    register_conv(ConvPass::kBwdFilter,
                  mutant("mutant_conv_bwd_filter_last_batch", "direct backward-filter: batch loop stops at N - 1"),
                  m::conv_bwd_filter_last_batch) &&
    register_conv(ConvPass::kFwd,
                  mutant("mutant_conv_igemm_k_tail", "implicit GEMM: reduction tail tile loaded without kk < Kr"),
                  m::conv_igemm_k_tail);

}  // namespace
}  // namespace assay::conv
