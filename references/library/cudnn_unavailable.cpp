// The cuDNN wrappers of references/library/cudnn.h in a build without cuDNN (ASSAY_WITH_CUDNN off
// or cuDNN not found): the same symbols, so specs, tests and tools link unchanged, and every call
// returns `unavailable` ("built without cuDNN"), which callers already treat as a skip.
#include <fmt/format.h>

#include "references/library/cudnn.h"

namespace assay::vendor {

bool cudnn_built() {
  return false;
}

Status cudnn_not_built() {
  return unavailable("built without cuDNN (configure with -DASSAY_WITH_CUDNN=ON where cuDNN 9 is installed)");
}

size_t cudnn_compiled_version() {
  return 0;
}

Status cudnn_status(int e, const char* call, const char* file, int line) {
  if (e == 0) return ok_status();
  return unavailable(fmt::format("{} failed ({}) at {}:{}: {}", call, e, file, line, cudnn_not_built().message()));
}

size_t cudnn_runtime_version() {
  return 0;
}

int cudnn_version_major(size_t version) {
  return static_cast<int>(version >= 90000 ? version / 10000 : version / 1000);
}

std::string cudnn_version_string(size_t version) {
  if (version >= 90000) return fmt::format("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
  return fmt::format("{}.{}.{}", version / 1000, version % 1000 / 100, version % 100);
}

Status cudnn_check_major(size_t, size_t) {
  return cudnn_not_built();
}

std::string cudnn_describe() {
  return "cuDNN: built without cuDNN";
}

StatusOr<std::unique_ptr<CudnnHandle>> CudnnHandle::create(cudaStream_t) {
  return cudnn_not_built();
}

CudnnHandle::~CudnnHandle() = default;

Status CudnnHandle::set_stream(cudaStream_t) {
  return cudnn_not_built();
}

StatusOr<void*> CudnnHandle::workspace(size_t) {
  return cudnn_not_built();
}

Status cudnn_softmax_forward(CudnnHandle&, const CudnnSoftmax&, float, const void*, float, void*) {
  return cudnn_not_built();
}

Status cudnn_softmax_backward(CudnnHandle&, const CudnnSoftmax&, float, const void*, const void*, float, void*) {
  return cudnn_not_built();
}

Status cudnn_activation_forward(CudnnHandle&, const CudnnActivation&, float, const void*, float, void*) {
  return cudnn_not_built();
}

Status cudnn_activation_backward(CudnnHandle&, const CudnnActivation&, float, const void*, const void*, const void*,
                                 float, void*) {
  return cudnn_not_built();
}

StatusOr<ConvAlgoUsed> cudnn_conv_forward(CudnnHandle&, const CudnnConv&, float, const void*, const void*, float,
                                          void*) {
  return cudnn_not_built();
}

StatusOr<ConvAlgoUsed> cudnn_conv_backward_data(CudnnHandle&, const CudnnConv&, float, const void*, const void*, float,
                                                void*) {
  return cudnn_not_built();
}

StatusOr<ConvAlgoUsed> cudnn_conv_backward_filter(CudnnHandle&, const CudnnConv&, float, const void*, const void*,
                                                  float, void*) {
  return cudnn_not_built();
}

StatusOr<std::vector<ConvAlgoListed>> cudnn_conv_algorithms(CudnnHandle&, const CudnnConv&, ConvDirection, int) {
  return cudnn_not_built();
}

StatusOr<SdpaEngineUsed> cudnn_sdpa_forward(CudnnHandle&, const CudnnSdpa&, const void*, const void*, const void*,
                                            void*, float*) {
  return cudnn_not_built();
}

}  // namespace assay::vendor
