// fp64 reference of the 2-D convolution forward on the GPU, with its per-element
// tolerance computed beside it: one thread per output element runs the host
// reference's own element function (references/host/conv.h
// conv2d_forward_element, the same terms in the same order, compiled without
// contracted multiply-adds) and the host bound's own element tolerance
// (harness/bound_core.h dot_element_tol), through conv_f64_element.h. fp32
// inputs and output only.
// Checked against the host reference and bound by tests/references/conv_device_ref_gpu_test.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/bound_core.h"
#include "harness/status.h"
#include "references/device/f32_rows.h"
#include "references/host/conv.h"

namespace assay::device_ref {

/// y = conv(x, w) into ref (g.y_elems() doubles, packed layout) and the tolerance
/// dot_element_tol(ceiling, ref, sum |x||w|, top, 0) into tol (NaN tolerances as +Inf, as the
/// engine's host path has them). Asynchronous on `stream`; checks the launch error.
Status conv2d_fwd_f64_reference(const ref::Conv2dGeometry& g, const ElementBound& ceiling, double top, F32Rows x,
                                F32Rows w, double* ref, double* tol, cudaStream_t stream);

}  // namespace assay::device_ref
