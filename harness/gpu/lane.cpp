#include "harness/gpu/lane.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "harness/gpu/cuda_check.h"
#include "harness/gpu/materialize_device.h"
#include "harness/op.h"
#include "harness/values.h"

namespace assay::gpu {

void prefer_queue_per_stream() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
}

StatusOr<int> device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return unavailable(fmt::format("no CUDA GPU present ({}: {})", cudaGetErrorName(e), cudaGetErrorString(e)));
  }
  if (n == 0) return unavailable("no CUDA GPU present (cudaGetDeviceCount returned 0)");
  return n;
}

std::string cudnn_version() {
  // Looked up at run time: GPU machines may carry another cuDNN than the
  // build machine, or none; assay's GEMM path does not need it.
  void* h = ::dlopen("libcudnn.so.9", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return "none";
  using Fn = size_t (*)();
  auto fn = reinterpret_cast<Fn>(::dlsym(h, "cudnnGetVersion"));
  const size_t v = fn != nullptr ? fn() : 0;
  ::dlclose(h);
  return v == 0 ? "unknown" : fmt::format("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
}

std::string describe_device(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "unknown device";
  int driver = 0, runtime = 0, cublas = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
    cublasGetVersion(h, &cublas);
    cublasDestroy(h);
  }
  return fmt::format("{} (sm_{}{}), driver {}.{}, runtime {}.{}, cuBLAS {}.{}.{}, cuDNN {}", prop.name, prop.major,
                     prop.minor, driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, cublas / 10000,
                     cublas % 10000 / 100, cublas % 100, cudnn_version());
}

StatusOr<std::unique_ptr<Lane>> Lane::create(int device) {
  std::unique_ptr<Lane> lane(new Lane());
  lane->device_ = device;
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&lane->stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&lane->cublas_));
  CUBLAS_CHECK(cublasSetStream(lane->cublas_, lane->stream_));
  CUDA_CHECK(cudaMalloc(&lane->dev_results_, sizeof(CheckResult) * kMaxChecks));
  CUDA_CHECK(cudaMallocHost(&lane->host_results_, sizeof(CheckResult) * kMaxChecks));
  return lane;
}

Lane::~Lane() {
  // Best effort: a lane destroyed after a sticky CUDA error cannot free anything.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  cudaFree(dev_);
  cudaFreeHost(host_);
  cudaFree(dev_results_);
  cudaFreeHost(host_results_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status Lane::reserve(int64_t device_bytes, int64_t host_bytes) {
  if (device_bytes > dev_cap_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaFree(dev_));
    dev_ = nullptr;
    const int64_t cap = std::max(device_bytes, dev_cap_ * 2);
    CUDA_CHECK(cudaMalloc(&dev_, static_cast<size_t>(cap)));
    dev_cap_ = cap;
  }
  if (host_bytes > host_cap_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaFreeHost(host_));
    host_ = nullptr;
    const int64_t cap = std::max(host_bytes, host_cap_ * 2);
    CUDA_CHECK(cudaMallocHost(&host_, static_cast<size_t>(cap)));
    host_cap_ = cap;
  }
  return ok_status();
}

Status Lane::place(const std::vector<ArenaTensor>& tensors) {
  if (2 * tensors.size() + 1 > static_cast<size_t>(kMaxRegions))
    return invalid_argument(fmt::format("a case may have at most {} tensors", (kMaxRegions - 1) / 2));
  tensors_ = tensors;
  offsets_.clear();
  sizes_.clear();
  int64_t payload = 0;
  for (const auto& t : tensors)
    payload += scratch_round_up(t.desc.extent() * static_cast<int64_t>(dtype_size(t.desc.dtype)));
  const int64_t moat = std::max<int64_t>(64 << 10, scratch_round_up(payload / 8));
  int64_t at = moat;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    offsets_.push_back(at);
    const int64_t bytes = t.desc.extent() * static_cast<int64_t>(dtype_size(t.desc.dtype));
    sizes_.push_back(bytes);
    at += scratch_round_up(bytes) + (i + 1 < tensors.size() ? kGuardBytes : moat);
  }
  if (tensors.empty()) at += moat;
  arena_bytes_ = at;
  plan_restore();
  return ok_status();
}

// Below this the arena is restored by one copy: a small case's restore is one operation's
// latency, not its bytes.
constexpr int64_t kSpanRestoreBytes = int64_t{16} << 20;

void Lane::plan_restore() {
  restore_spans_.clear();
  if (arena_bytes_ < kSpanRestoreBytes || 2 * tensors_.size() + 1 > static_cast<size_t>(detail::kMaxRestoreJobs))
    return;
  auto span = [&](int64_t b, int64_t e, bool copy, const uint32_t* pattern) {
    if (e <= b) return;
    RestoreSpan r;
    r.begin = b, r.end = e, r.copy = copy;
    if (!copy) std::memcpy(r.pattern, pattern, sizeof r.pattern);
    restore_spans_.push_back(r);
  };
  const uint32_t guard[4] = {kGuardWord, kGuardWord, kGuardWord, kGuardWord};
  uint32_t pad[4];
  std::memset(pad, kPadByte, sizeof pad);
  int64_t prev = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    span(prev, offsets_[i], false, guard);
    const auto& t = tensors_[i];
    const int64_t end = offsets_[i] + scratch_round_up(sizes_[i]);
    // A poisoned output laid out densely is its poison throughout (materialize_output), its
    // padding kPadByte (layout); anything else is copied.
    const bool dense = t.desc.offset == 0 && t.desc.extent() == t.desc.numel();
    if (t.role == Role::kOut && dense && sizes_[i] % 16 == 0 && dtype_size(t.desc.dtype) <= 16) {
      uint32_t poison[4];
      poison_words(t.desc.dtype, poison);
      span(offsets_[i], offsets_[i] + sizes_[i], false, poison);
      span(offsets_[i] + sizes_[i], end, false, pad);
    } else {
      span(offsets_[i], end, true, nullptr);
    }
    prev = end;
  }
  span(prev, arena_bytes_, false, guard);
  for (const auto& r : restore_spans_)
    if (r.begin % 16 != 0 || r.end % 16 != 0) return restore_spans_.clear();
}

Status Lane::layout(const std::vector<ArenaTensor>& tensors, int64_t extra_bytes, int64_t scratch_bytes) {
  ASSAY_RETURN_IF_ERROR(place(tensors));
  extra_bytes_ = extra_bytes;
  scratch_bytes_ = scratch_bytes;
  const int64_t device_bytes = 2 * arena_bytes_ + scratch_round_up(extra_bytes) + scratch_round_up(scratch_bytes);
  ASSAY_RETURN_IF_ERROR(reserve(device_bytes, arena_bytes_ + extra_bytes));
  // Guards and padding get the canary; tensor payloads are written by the caller.
  auto fill = [&](int64_t b, int64_t e) {
    for (int64_t x = b; x < e; x += 4) std::memcpy(host_ + x, &kGuardWord, 4);
  };
  int64_t prev = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    fill(prev, offsets_[i]);
    const int64_t pad_begin = offsets_[i] + sizes_[i];
    const int64_t pad_end = offsets_[i] + scratch_round_up(sizes_[i]);
    std::memset(host_ + pad_begin, kPadByte, static_cast<size_t>(pad_end - pad_begin));
    prev = pad_end;
  }
  fill(prev, arena_bytes_);
  return ok_status();
}

Status Lane::layout_on_device(const std::vector<ArenaTensor>& tensors, int64_t scratch_bytes, DeviceDraw& draw) {
  ASSAY_RETURN_IF_ERROR(place(tensors));
  extra_bytes_ = 0;
  scratch_bytes_ = scratch_bytes;
  ASSAY_RETURN_IF_ERROR(reserve(2 * arena_bytes_ + scratch_round_up(scratch_bytes), 0));
  // The same guard words and padding bytes as layout(), into the snapshot.
  auto guard = [&](int64_t b, int64_t e) { return draw.fill(dev_snapshot() + b, 4, kGuardWord, (e - b) / 4); };
  int64_t prev = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    ASSAY_RETURN_IF_ERROR(guard(prev, offsets_[i]));
    const int64_t pad_begin = offsets_[i] + sizes_[i];
    const int64_t pad_end = offsets_[i] + scratch_round_up(sizes_[i]);
    ASSAY_RETURN_IF_ERROR(draw.fill(dev_snapshot() + pad_begin, 1, kPadByte, pad_end - pad_begin));
    prev = pad_end;
  }
  return guard(prev, arena_bytes_);
}

Status Lane::upload() {
  CUDA_CHECK(cudaMemcpyAsync(dev_snapshot(), host_, static_cast<size_t>(arena_bytes_ + extra_bytes_),
                             cudaMemcpyHostToDevice, stream_));
  return ok_status();
}

Status Lane::restore() {
  if (restore_spans_.empty()) {
    CUDA_CHECK(cudaMemcpyAsync(dev_arena(), dev_snapshot(), static_cast<size_t>(arena_bytes_), cudaMemcpyDeviceToDevice,
                               stream_));
    return ok_status();
  }
  detail::RestoreBatch b;
  for (const auto& r : restore_spans_) {
    detail::RestoreJob& j = b.job[b.count++];
    j.dst = dev_arena() + r.begin;
    j.src = r.copy ? dev_snapshot() + r.begin : nullptr;
    j.n16 = (r.end - r.begin) / 16;
    std::memcpy(j.pattern, r.pattern, sizeof j.pattern);
  }
  CUDA_CHECK(detail::launch_restore(b, stream_));
  return ok_status();
}

CheckParams Lane::check_params() {
  CheckParams p;
  p.arena = dev_arena();
  p.snapshot = dev_snapshot();
  int64_t prev = 0;
  auto add_bytes = [&](int64_t b, int64_t e) {  // a guard band or moat: the canary throughout
    DevRegion r;
    r.byte_begin = b;
    r.byte_end = e;
    r.kind = DevRegion::kBytesEqual;
    r.constant = 1;
    for (uint32_t& w : r.poison) w = kGuardWord;
    p.regions[p.nregions++] = r;
  };
  for (size_t i = 0; i < tensors_.size(); ++i) {
    add_bytes(prev, offsets_[i]);
    const auto& t = tensors_[i];
    DevRegion r;
    r.byte_begin = offsets_[i];
    r.byte_end = offsets_[i] + scratch_round_up(sizes_[i]);
    if (t.role == Role::kIn) {
      r.kind = DevRegion::kBytesEqual;
    } else {
      r.kind = DevRegion::kOutput;
      r.elem_size = static_cast<int32_t>(dtype_size(t.desc.dtype));
      r.check_unwritten = t.check_unwritten ? 1 : 0;
      if (t.check_unwritten) poison_words(t.desc.dtype, r.poison);
      // Coverage as a 2-D view, checked analytically: rank N outputs are laid out dense over
      // padded rows (unit innermost stride, every outer stride the next one times its
      // extent), so they are [prod of the leading extents, last extent] with the row
      // stride. A layout that is not gets no view: every element then counts as a gap.
      const auto& d = t.desc;
      r.off = d.offset;
      const int64_t rank = d.rank();
      bool rows_dense = rank >= 1 && d.strides[static_cast<size_t>(rank - 1)] == 1;
      for (int64_t k = 0; rows_dense && k + 2 < rank; ++k)
        rows_dense = d.strides[static_cast<size_t>(k)] ==
                     d.strides[static_cast<size_t>(k + 1)] * std::max<int64_t>(d.shape[static_cast<size_t>(k + 1)], 1);
      if (rank == 1 || (rank >= 2 && rows_dense)) {
        const View2D v = view_of(d);  // the view the engine compares and hands to launchers
        r.rows = v.rows, r.cols = v.cols;
        r.ld = v.rows <= 1 ? std::max<int64_t>(v.cols, 1) : v.ld;
      }
    }
    p.regions[p.nregions++] = r;
    prev = r.byte_end;
  }
  add_bytes(prev, arena_bytes_);
  return p;
}

void poison_words(DType t, uint32_t (&words)[4]) {
  unsigned char pattern[sizeof words];
  const size_t width = dtype_size(t);
  for (size_t b = 0; b + width <= sizeof pattern; b += width) write_output_poison(t, pattern + b);
  std::memcpy(words, pattern, sizeof pattern);
}

Status Lane::check(const CheckParams& p, int k) {
  if (k < 0 || k >= kMaxChecks) return internal_error(fmt::format("check slot {} out of range", k));
  CUDA_CHECK(launch_check(p, dev_results_ + k, stream_));
  return ok_status();
}

Status Lane::fetch_results(int n) {
  CUDA_CHECK(cudaMemcpyAsync(host_results_, dev_results_, sizeof(CheckResult) * static_cast<size_t>(n),
                             cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

Status Lane::read_back(const void* dev, void* host, int64_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(host, dev, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

}  // namespace assay::gpu
