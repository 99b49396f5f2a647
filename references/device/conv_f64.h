// fp64 references of the 2-D convolution (forward, backward-data, backward-filter)
// on the GPU, with the per-element tolerance computed beside them: one thread per
// output element runs the host reference's own element function
// (references/host/conv.h, the same terms in the same order, compiled without
// contracted multiply-adds) and the host bound's own element tolerance
// (harness/bound_core.h dot_element_tol, with the output dtype's store rounding
// of harness/ulp_core.h), through conv_f64_element.h. fp32, fp16 or bf16
// inputs and output (one dtype per case, as properties/conv.cpp declares).
// Checked against the host reference and bound by tests/references/conv_device_ref_gpu_test.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/bound_core.h"
#include "harness/status.h"
#include "references/device/conv_f64_element.h"
#include "references/device/input_rows.h"
#include "references/host/conv.h"

namespace assay::device_ref {

/// The output of `pass` (conv2d_f64_elements doubles, packed layout) into ref from its inputs
/// (fwd: x, w; bwd-data: dy, w; bwd-filter: x, dy), and the tolerance dot_element_tol(ceiling,
/// ref, sum of |terms|, top, store) into tol (NaN tolerances as +Inf, as the engine's host path
/// has them). Asynchronous on `stream`; checks the launch error.
Status conv2d_f64_reference(ConvF64Pass pass, const ref::Conv2dGeometry& g, const ElementBound& ceiling, double top,
                            const StoreRounding& store, InputRows in0, InputRows in1, double* ref, double* tol,
                            cudaStream_t stream);

/// u[l] = gradcheck_sign(seed, l) for l < n (harness/gradcheck_direction.h), exact in fp32: the
/// gradcheck relation's direction for a forward linear in its operand. Asynchronous on `stream`.
Status fill_gradcheck_signs(float* u, int64_t n, uint64_t seed, cudaStream_t stream);

}  // namespace assay::device_ref
