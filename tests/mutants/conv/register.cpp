// Registers the planted convolution bugs as [mutant] variants of their ops, bound exactly like
// the kernels they replace (conv_launch, properties/conv.h).
#include "properties/conv.h"
#include "tests/mutants/conv/mutants.h"

namespace assay::conv {
namespace {

namespace m = assay::mutants::conv;
const char* const kSrc = "tests/mutants/conv/conv_mutants.cu";

template <typename Fn>
VariantDef mutant(ConvPass pass, const char* name, const char* what, Fn fn) {
  return {.name = name, .description = what, .launch = conv_launch(pass, fn), .mutant = true, .source = kSrc};
}

ASSAY_REGISTER(add_variant("conv2d", mutant(ConvPass::kFwd, "mutant_conv_pad_offset",
                                            "direct: input column offset pad_w - 1", m::conv_fwd_pad_offset)));
ASSAY_REGISTER(add_variant("conv2d", mutant(ConvPass::kFwd, "mutant_conv_swapped_stride",
                                            "direct: stride_h used along w", m::conv_fwd_swapped_stride)));
ASSAY_REGISTER(add_variant("conv2d",
                           mutant(ConvPass::kFwd, "mutant_conv_right_edge",
                                  "direct: no j >= W check, reads the next row past the edge", m::conv_fwd_right_edge)));
ASSAY_REGISTER(add_variant("conv2d_bwd_filter",
                           mutant(ConvPass::kBwdFilter, "mutant_conv_bwd_filter_last_batch",
                                  "direct backward-filter: batch loop stops at N - 1", m::conv_bwd_filter_last_batch)));
ASSAY_REGISTER(add_variant("conv2d", mutant(ConvPass::kFwd, "mutant_conv_igemm_k_tail",
                                            "implicit GEMM: reduction tail tile loaded without kk < Kr",
                                            m::conv_igemm_k_tail)));

}  // namespace
}  // namespace assay::conv
