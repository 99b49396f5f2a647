// What the ops' vendor columns (OpDef::vendor) share: one cuDNN and one cuBLASLt handle per host
// thread and device (the vendor launcher runs on a lane's thread and gets only its stream, as gemm.cpp's
// cuBLAS handle), dense staging buffers per thread and device for the layouts a library cannot
// take (padded rows: the engine's views may have ld > cols), and the copies in and out of them.
// A vendor launcher writes an output only through its view (unpack_rows), never the gaps
// between rows: the engine discards a column that changes anything outside the views.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "harness/op.h"
#include "harness/status.h"
#include "references/library/cublaslt_gemm.h"
#include "references/library/cudnn.h"

namespace assay::vendor_columns {

/// This thread's cuDNN handle on the current device, bound to `stream`; `unavailable` when
/// assay was built without cuDNN or the runtime's major version differs (the reason says so).
StatusOr<vendor::CudnnHandle*> cudnn_handle(cudaStream_t stream);

/// This thread's cuBLASLt handle (with its 32 MiB workspace) on the current device.
StatusOr<vendor::CublasLt*> cublaslt();

/// This thread's staging buffer `slot` (0 to 3) on the current device, at least `bytes` long.
/// Growing it synchronises `stream` (work queued on the old buffer finishes first).
StatusOr<void*> staging(int slot, size_t bytes, cudaStream_t stream);

/// True when the view has no gaps (rank-1, or ld == cols): a library may take it as packed.
bool packed(const DevTensor& t);

/// Copies the rows x cols view of `t` into `dst`, packed (cudaMemcpy2DAsync on `stream`).
Status pack_rows(const DevTensor& t, void* dst, cudaStream_t stream);
/// Copies packed rows x cols `src` into the view of `t`, leaving its gaps alone.
Status unpack_rows(const void* src, const DevTensor& t, cudaStream_t stream);

/// `t` itself when packed, else a packed copy in staging buffer `slot`.
StatusOr<const void*> packed_input(const DevTensor& t, int slot, cudaStream_t stream);
/// Where a library may write output `t`: `t` itself when packed, else staging buffer `slot`
/// (then unpack_rows it into `t` after the library call).
StatusOr<void*> packed_output(const DevTensor& t, int slot, cudaStream_t stream);
/// After the library wrote `out` (from packed_output): copies it into `t` unless it is `t`.
Status finish_output(const void* out, const DevTensor& t, cudaStream_t stream);

}  // namespace assay::vendor_columns
