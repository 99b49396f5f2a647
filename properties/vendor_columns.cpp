#include "properties/vendor_columns.h"

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "harness/dtype.h"
#include "harness/gpu/cuda_check.h"

namespace assay::vendor_columns {
namespace {

struct Staging {
  void* ptr = nullptr;
  size_t bytes = 0;
};

/// Per thread and device: the cuDNN handle (or why there is none) and the staging buffers.
struct PerDevice {
  std::unique_ptr<vendor::CudnnHandle> cudnn;
  std::unique_ptr<vendor::CublasLt> lt;
  Status cudnn_error = ok_status();
  bool tried = false;
  std::array<Staging, 4> staging;
  ~PerDevice() {
    for (auto& s : staging)
      if (s.ptr != nullptr) (void)cudaFree(s.ptr);
  }
};

StatusOr<PerDevice*> per_device() {
  thread_local std::vector<std::unique_ptr<PerDevice>> devices;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (devices.size() <= static_cast<size_t>(dev)) devices.resize(static_cast<size_t>(dev) + 1);
  auto& d = devices[static_cast<size_t>(dev)];
  if (d == nullptr) d = std::make_unique<PerDevice>();
  return d.get();
}

int64_t row_bytes(const DevTensor& t) {
  return t.v.cols * static_cast<int64_t>(dtype_size(t.dtype));
}

}  // namespace

StatusOr<vendor::CudnnHandle*> cudnn_handle(cudaStream_t stream) {
  if (!vendor::cudnn_built()) return vendor::cudnn_not_built();
  ASSAY_ASSIGN_OR_RETURN(PerDevice * d, per_device());
  if (!d->tried) {
    d->tried = true;
    auto h = vendor::CudnnHandle::create(stream);
    if (h.ok()) {
      d->cudnn = std::move(h).value();
    } else {
      d->cudnn_error = h.status();
    }
  }
  if (d->cudnn == nullptr) return d->cudnn_error;
  if (d->cudnn->stream() != stream) ASSAY_RETURN_IF_ERROR(d->cudnn->set_stream(stream));
  return d->cudnn.get();
}

StatusOr<vendor::CublasLt*> cublaslt() {
  ASSAY_ASSIGN_OR_RETURN(PerDevice * d, per_device());
  if (d->lt == nullptr) {
    ASSAY_ASSIGN_OR_RETURN(d->lt, vendor::CublasLt::create());
  }
  return d->lt.get();
}

StatusOr<void*> staging(int slot, size_t bytes, cudaStream_t stream) {
  if (slot < 0 || slot >= 4) return invalid_argument("vendor staging: slot out of range");
  ASSAY_ASSIGN_OR_RETURN(PerDevice * d, per_device());
  Staging& s = d->staging[static_cast<size_t>(slot)];
  if (bytes <= s.bytes && s.ptr != nullptr) return s.ptr;
  if (s.ptr != nullptr) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(s.ptr));
    s.ptr = nullptr;
    s.bytes = 0;
  }
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t want = std::max<size_t>((bytes + kMiB - 1) / kMiB * kMiB, kMiB);
  CUDA_CHECK(cudaMalloc(&s.ptr, want));
  s.bytes = want;
  return s.ptr;
}

bool packed(const DevTensor& t) {
  return t.v.rows <= 1 || t.v.ld == t.v.cols;
}

Status pack_rows(const DevTensor& t, void* dst, cudaStream_t stream) {
  if (t.v.rows == 0 || t.v.cols == 0) return ok_status();
  const size_t es = dtype_size(t.dtype);
  CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(row_bytes(t)), t.ptr, static_cast<size_t>(t.v.ld) * es,
                               static_cast<size_t>(row_bytes(t)), static_cast<size_t>(t.v.rows),
                               cudaMemcpyDeviceToDevice, stream));
  return ok_status();
}

Status unpack_rows(const void* src, const DevTensor& t, cudaStream_t stream) {
  if (t.v.rows == 0 || t.v.cols == 0) return ok_status();
  const size_t es = dtype_size(t.dtype);
  CUDA_CHECK(cudaMemcpy2DAsync(t.ptr, static_cast<size_t>(t.v.ld) * es, src, static_cast<size_t>(row_bytes(t)),
                               static_cast<size_t>(row_bytes(t)), static_cast<size_t>(t.v.rows),
                               cudaMemcpyDeviceToDevice, stream));
  return ok_status();
}

StatusOr<const void*> packed_input(const DevTensor& t, int slot, cudaStream_t stream) {
  if (packed(t)) return static_cast<const void*>(t.ptr);
  ASSAY_ASSIGN_OR_RETURN(void* buf, staging(slot, static_cast<size_t>(t.v.rows * row_bytes(t)), stream));
  ASSAY_RETURN_IF_ERROR(pack_rows(t, buf, stream));
  return static_cast<const void*>(buf);
}

StatusOr<void*> packed_output(const DevTensor& t, int slot, cudaStream_t stream) {
  if (packed(t)) return t.ptr;
  return staging(slot, static_cast<size_t>(t.v.rows * row_bytes(t)), stream);
}

Status finish_output(const void* out, const DevTensor& t, cudaStream_t stream) {
  if (out == t.ptr) return ok_status();
  return unpack_rows(out, t, stream);
}

}  // namespace assay::vendor_columns
