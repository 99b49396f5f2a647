// Binding of batched fp32 GEMM launchers to the gemm_batched op: the planted bugs of
// tests/mutants/gemm/batched_mutants.cpp bind through batched_launch like the kernels.
//
// Tensors, in order (fp32): A [batch, m, k] (each entry stored [k, m] with trans_a), B [batch, k, n]
// ([n, k] with trans_b), C [batch, m, n] (in and out). Each tensor has its own row stride (the
// leading dimension of every entry) and offset; entries follow each other densely over the padded
// rows. broadcast_a: every entry uses A's entry 0 (batch stride 0).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/op.h"
#include "kernels/gemm/gemm.h"

namespace assay::gemm_batched {

/// One batched GEMM as the launchers see it: the problem of entry 0 (a, b, c point at it) and
/// the element strides between entries (stride_a == 0: A broadcast to every entry).
struct BatchedCall {
  kernels::GemmF32Args g;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

/// fn(const BatchedCall&, cudaStream_t) on tensors A, B, C.
template <typename Fn>
Launch batched_launch(Fn fn) {
  return [fn](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
    BatchedCall call;
    call.g.m = p.i("m"), call.g.n = p.i("n"), call.g.k = p.i("k");
    call.g.trans_a = p.b("trans_a"), call.g.trans_b = p.b("trans_b");
    call.g.alpha = static_cast<float>(p.r("alpha", 1)), call.g.beta = static_cast<float>(p.r("beta", 0));
    call.g.a = t[0].as<const float>(), call.g.lda = t[0].v.ld;
    call.g.b = t[1].as<const float>(), call.g.ldb = t[1].v.ld;
    call.g.c = t[2].as<float>(), call.g.ldc = t[2].v.ld;
    call.batch = p.i("batch", 1);
    call.stride_a = p.b("broadcast_a") ? 0 : t[0].strides[0];
    call.stride_b = t[1].strides[0];
    call.stride_c = t[2].strides[0];
    return fn(call, s);
  };
}

/// The pointer-array launcher driven from a strided description: builds the device arrays
/// a + z*stride_a, b + z*stride_b, c + z*stride_c (one reused device buffer per stream, filled
/// by an asynchronous copy on `stream`) and calls kernels::gemm_f32_tiled_ptr_batched with
/// `batch_launched` entries (== call.batch for the kernel; a mutant may pass fewer).
cudaError_t launch_ptr_array(const BatchedCall& call, int64_t batch_launched, cudaStream_t stream);

}  // namespace assay::gemm_batched
