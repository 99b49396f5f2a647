// Device-side input materialisation: a tensor's device image filled straight
// from its ValueRecipe, so a large case (GEMM: m*n*k > kDeviceRefWork) needs
// neither a host image nor an upload.
//
// The kernels port harness/values.cpp's Expander: the same Philox4x32-10
// keyed by (seed, tensor stream, logical index), the same value classes with
// the same parameters, the same special-value injection and gap canary. They
// use only IEEE basic operations (+, -, *, / and sqrt, correctly rounded on
// the GPU as on the host), frexp/ldexp/floor, and are compiled with FMA
// contraction off, so the values are a pure function of the case: the same
// bits on every run and every GPU. They match the host path bit for bit
// (MaterializeDeviceGpu compares every class, dtype and layout), so the engine
// also draws the large inputs of host-referenced cases here and copies them
// back (harness/engine.cpp, kDeviceDrawElements); the host reference reads the
// copied bytes, so a mismatch could never make a verdict wrong, only make a
// case's inputs depend on its size class.
// fp32, fp16, bf16, e4m3, e5m2 and int8 tensors: a narrow value is the fp32
// value rounded by harness/dtype_encode.h, the code store_as runs on the host,
// and the gap canary and output poison are the dtype's own (write_gap_canary,
// write_output_poison). int32 tensors only as outputs (their poison): the
// value generator has no int32 encoder, so int32 inputs stay on the host.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/gpu/materialize_device_kernels.h"
#include "harness/status.h"
#include "harness/tensor.h"
#include "harness/values.h"

namespace assay::gpu {

/// True when materialize_device() handles `desc`: fp32, fp16, bf16, e4m3, e5m2 or int8, rank 1..8, no
/// overlapping indices (a stride-0 view's write order is not defined on a GPU).
bool materialize_device_supports(const TensorDesc& desc);
/// True when materialize_output_device() handles `desc`: those dtypes and int32 (its poison).
bool materialize_output_device_supports(const TensorDesc& desc);

/// Device images drawn in at most two launches, however many tensors and regions: every
/// constant fill first (guard words, padding bytes, gap canaries), then every tensor's values or
/// poison, in one block row per tensor. A small case's draw used to take two to four launches a
/// tensor, and on the small classes the lanes' launches, not the GPU's arithmetic, set the rate.
/// Queue, then launch(); a full queue launches early, in the same order (fills before draws).
/// Everything is asynchronous on the stream given.
class DeviceDraw {
 public:
  explicit DeviceDraw(cudaStream_t stream) : stream_(stream) {}
  /// `n` units of `width` bytes (1, 2 or 4; `dst` aligned to it) set to the low bytes of `pattern`.
  Status fill(void* dst, int width, uint32_t pattern, int64_t n);
  /// Like materialize(): the recipe's values rounded to the dtype at covered elements, the gap
  /// canary elsewhere in `dst` (device memory, desc.extent() elements of desc.dtype).
  Status values(const TensorDesc& desc, const ValueRecipe& recipe, uint64_t stream_id, void* dst);
  /// Like materialize_output(): the output poison at every covered element, the gap canary elsewhere.
  Status poison(const TensorDesc& desc, void* dst);
  /// Launches what is queued (at most two kernels) and empties the queue; checks the launches.
  Status launch();

 private:
  Status queue(const detail::DrawJob& job);  ///< launches first when the queue is full
  Status launch_fills();
  cudaStream_t stream_;
  detail::FillBatch fills_;
  detail::DrawBatch draws_;
};

/// One tensor's values (DeviceDraw::values), launched at once.
Status materialize_device(const TensorDesc& desc, const ValueRecipe& recipe, uint64_t stream_id, void* dst,
                          cudaStream_t stream);

/// One tensor's poison (DeviceDraw::poison), launched at once.
Status materialize_output_device(const TensorDesc& desc, void* dst, cudaStream_t stream);

}  // namespace assay::gpu
