// The convolution ops (properties/conv.cpp) as the tests and the mutants' registration see
// them: the three passes, the geometry of a case's params, the fp64 reference with its
// ceiling (for CPU tests and vendor comparisons), and the binding of a kernel with the
// kernels/conv/conv.h launcher signature. Tensors in OpDef order per pass:
//   conv2d X, W, Y; conv2d_bwd_data dY, W, dX; conv2d_bwd_filter X, dY, dW.
// Each is rank 4 in the layout's order (NCHW: X [n, c, h, w], W [k, cg, r, s], Y [n, k, p, q];
// NHWC: X [n, h, w, c], W [k, r, s, cg], Y [n, p, q, k]), so the engine's rows x cols view with
// its padded row stride is exactly the kernels' 2-D view and ld.
#pragma once

#include <cstdint>

#include "harness/bound_core.h"
#include "harness/op.h"
#include "kernels/conv/conv.h"
#include "references/device/gradcheck_f64.h"
#include "references/host/conv.h"

namespace assay::conv {

enum class ConvPass : uint8_t { kFwd, kBwdData, kBwdFilter };

/// "conv2d", "conv2d_bwd_data", "conv2d_bwd_filter".
const char* conv_op_name(ConvPass pass);

/// The geometry of a case's params: c = groups * cg, k = groups * kg.
ref::Conv2dGeometry conv_geometry(const Params& p);

/// Reference (fp64, references/host/conv.h) and ceiling of every output element of `pass`
/// for packed inputs already rounded to `dt` (fwd: x, w; bwd-data: dy, w; bwd-filter: x, dy).
/// int_range >= 0: every input is an integer in [-int_range, int_range]; the output is then
/// marked exact when gemm_exact_tier_holds says every partial sum is. Output index = the
/// packed layout of conv.h = row * cols + col of the 2-D view. (The op's reference and bound
/// hooks are these two halves.)
OutputRef conv_reference(ConvPass pass, const ref::Conv2dGeometry& g, DType dt, const double* in0, const double* in1,
                         int64_t int_range);

/// The ceiling of `pass`'s fp32 accumulation for inputs in `dt` (GemmBoundModel over its
/// reduction length), before the store's rounding: what the host bound and the device reference
/// hand to dot_element_tol (harness/bound_core.h) per element.
ElementBound conv_accumulation_ceiling(ConvPass pass, const ref::Conv2dGeometry& g, DType dt);

/// The gradcheck relation's sums (properties/gradcheck_relation.h) of a backward pass's case on
/// the device path, reduced on the device from what its device reference left in ctx's scratch
/// (the sign direction, and J u = f(u) with its error bound) and from `in`: what the op's
/// device-side properties judge. Not a gradcheck case, or the forward: n = m = 0.
Status device_gradcheck_sums(ConvPass pass, const Case& c, const DevicePropertiesIn& in, const DeviceContext& ctx,
                             GradSums& sums);

inline kernels::conv::Dt to_conv_dt(DType t) {
  return t == DType::kF16    ? kernels::conv::Dt::kF16
         : t == DType::kBF16 ? kernels::conv::Dt::kBF16
                             : kernels::conv::Dt::kF32;
}

/// fn(const ConvArgs&, stream): x, w, y and their row strides from the pass's tensors.
template <typename Fn>
Launch conv_launch(ConvPass pass, Fn fn) {
  return [pass, fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    const ref::Conv2dGeometry g = conv_geometry(p);
    kernels::conv::ConvArgs a;
    a.g = {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w, g.groups};
    a.layout = g.layout == ref::ConvLayout::kNHWC ? kernels::conv::Layout::kNHWC : kernels::conv::Layout::kNCHW;
    a.dt = to_conv_dt(t[0].dtype);
    const DevTensor &x = pass == ConvPass::kBwdData ? t[2] : t[0], &w = pass == ConvPass::kBwdFilter ? t[2] : t[1],
                    &y = pass == ConvPass::kFwd ? t[2] : pass == ConvPass::kBwdData ? t[0] : t[1];
    a.x = x.ptr, a.ldx = x.v.ld, a.w = w.ptr, a.ldw = w.v.ld, a.y = y.ptr, a.ldy = y.v.ld;
    return fn(a, s);
  };
}

}  // namespace assay::conv
