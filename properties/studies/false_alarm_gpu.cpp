// assay false-alarm, GPU part: the cuBLAS / cuBLASLt backend and the command's driver.
// One stream, one cuBLAS handle, one cuBLASLt handle with its workspace, one device image
// and pinned host buffers grown on demand (two slots, so that the host lays out and judges
// one batch while the device works on the other): a batch is one H2D copy of its region and
// problem descriptors (a few hundred bytes per case; no input crosses PCIe), the inputs drawn
// in one launch (false_alarm_draw.h), the fp64 reference of every case in one launch, the
// vendor calls back to back, D2H copies of the outputs and of ref and mag, one event to wait
// for. One backend per GPU; run_false_alarm shards over them.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "harness/corpus.h"
#include "properties/studies/false_alarm.h"
#include "properties/studies/false_alarm_draw.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "harness/scratch.h"
#include "references/library/cublas_gemm.h"
#include "references/library/cublaslt_gemm.h"
#include "references/device/gemm_f64_batch.h"

namespace assay {
namespace {

/// Pinned host or device memory grown on demand (its contents are not kept).
struct Grown {
  explicit Grown(bool host) : pinned(host) {}
  Grown(const Grown&) = delete;
  Grown& operator=(const Grown&) = delete;
  ~Grown() { release(); }
  Status ensure(size_t bytes) {
    if (bytes <= cap) return ok_status();
    release();
    const size_t want = bytes + bytes / 4;
    void* q = nullptr;
    if (pinned) {
      CUDA_CHECK(cudaMallocHost(&q, want));
    } else {
      CUDA_CHECK(cudaMalloc(&q, want));
    }
    p = static_cast<unsigned char*>(q);
    cap = want;
    return ok_status();
  }
  void release() {
    if (p != nullptr) {
      if (pinned) {
        cudaFreeHost(p);
      } else {
        cudaFree(p);
      }
    }
    p = nullptr;
    cap = 0;
  }
  bool pinned;
  unsigned char* p = nullptr;
  size_t cap = 0;
};

/// Enqueues the drawing of `batch` into `image` (device, batch.bytes) on `stream`: its
/// regions and their first blocks through the pinned `host` buffer into `dev`. With
/// FaPlant::kDeviceInputs, every A is drawn from another key than the host's.
Status enqueue_draw(const FaBatch& batch, FaPlant plant, std::vector<FaRegion>& regions, Grown& host, Grown& dev,
                    unsigned char* image, cudaStream_t stream) {
  ASSAY_RETURN_IF_ERROR(fa_batch_regions(batch, regions));
  if (plant == FaPlant::kDeviceInputs)
    for (size_t r = 0; r < regions.size(); r += 5) regions[r].gen.key ^= 1;  // A: the first of each case's five
  const size_t region_bytes = scratch_round_up(regions.size() * sizeof(FaRegion));
  const size_t bytes = region_bytes + (regions.size() + 1) * sizeof(uint32_t);
  ASSAY_RETURN_IF_ERROR(host.ensure(bytes));
  ASSAY_RETURN_IF_ERROR(dev.ensure(bytes));
  std::memcpy(host.p, regions.data(), regions.size() * sizeof(FaRegion));
  auto* begin = reinterpret_cast<uint32_t*>(host.p + region_bytes);
  uint64_t blocks = 0;
  for (size_t r = 0; r < regions.size(); ++r) {
    begin[r] = static_cast<uint32_t>(blocks);
    blocks += fa_draw_blocks(regions[r]);
    if (blocks > 0x7fffffffu) return invalid_argument("false-alarm: a batch too large for one drawing launch");
  }
  begin[regions.size()] = static_cast<uint32_t>(blocks);
  CUDA_CHECK(cudaMemcpyAsync(dev.p, host.p, bytes, cudaMemcpyHostToDevice, stream));
  return fa_draw_regions(reinterpret_cast<const FaRegion*>(dev.p),
                         reinterpret_cast<const uint32_t*>(dev.p + region_bytes),
                         static_cast<int64_t>(regions.size()), static_cast<uint32_t>(blocks), image, stream);
}

class GpuBackend : public FaBackend {
 public:
  static StatusOr<std::unique_ptr<FaBackend>> create(int device, FaPlant plant, bool device_reference) {
    std::unique_ptr<GpuBackend> b(new GpuBackend());
    b->device_ = device;
    b->plant_ = plant;
    b->device_ref_ = device_reference;
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
    for (Slot& s : b->slots_)
      for (cudaEvent_t* e : {&s.start, &s.inputs_done, &s.ref_done, &s.vendor_done, &s.end})
        CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDefault));
    CUBLAS_CHECK(cublasCreate(&b->cublas_));
    CUBLAS_CHECK(cublasSetStream(b->cublas_, b->stream_));
    // fp32 accumulation is what the fp16/bf16-output configs promise: by default cuBLAS may
    // reduce split-K partials in the output type (the cuBLASLt wrapper masks those schemes).
    CUBLAS_CHECK(cublasSetMathMode(
        b->cublas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    ASSAY_ASSIGN_OR_RETURN(b->lt_, vendor::CublasLt::create());
    b->description_ = gpu::describe_device(device) + fmt::format(", cuBLASLt {}", cublasLtGetVersion());
    return std::unique_ptr<FaBackend>(std::move(b));
  }

  ~GpuBackend() override {
    cudaSetDevice(device_);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    lt_.reset();
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    for (Slot& s : slots_)
      for (cudaEvent_t e : {s.start, s.inputs_done, s.ref_done, s.vendor_done, s.end})
        if (e != nullptr) cudaEventDestroy(e);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status reserve(FaBatch& batch) override {
    CUDA_CHECK(cudaSetDevice(device_));
    Slot& s = slots_[batch.slot & 1];
    const size_t refs = device_ref_ ? batch.ref_elements * sizeof(double) : 0;
    ASSAY_RETURN_IF_ERROR(s.result.ensure(std::max<size_t>(batch.bytes - batch.out_begin, 1)));
    ASSAY_RETURN_IF_ERROR(s.ref.ensure(std::max<size_t>(2 * refs, 1)));
    batch.result = s.result.p;
    batch.ref = device_ref_ ? reinterpret_cast<double*>(s.ref.p) : nullptr;
    batch.mag = device_ref_ ? reinterpret_cast<double*>(s.ref.p + refs) : nullptr;
    return ok_status();
  }

  Status run(FaBatch& batch) override {
    ASSAY_RETURN_IF_ERROR(launch(batch));
    return wait(batch);
  }

  // One stream: the descriptors in, the inputs drawn, the reference (it reads C before the
  // vendor overwrites it), the vendor calls, the copies out. The device buffers serve every
  // batch: the stream orders a batch's drawing after the previous batch's copies out.
  Status launch(FaBatch& batch) override {
    CUDA_CHECK(cudaSetDevice(device_));
    Slot& slot = slots_[batch.slot & 1];
    ASSAY_RETURN_IF_ERROR(dev_.ensure(batch.bytes));
    const size_t refs = batch.ref_elements * sizeof(double);
    size_t problems_bytes = 0, tiles_bytes = 0;
    if (device_ref_) {
      fa_device_problems(batch, problems_, tiles_);
      problems_bytes = scratch_round_up(problems_.size() * sizeof(device_ref::F64GemmProblem));
      tiles_bytes = tiles_.size() * sizeof(device_ref::F64GemmTile);
      ASSAY_RETURN_IF_ERROR(slot.work.ensure(problems_bytes + tiles_bytes + 1));
      std::memcpy(slot.work.p, problems_.data(), problems_.size() * sizeof(device_ref::F64GemmProblem));
      std::memcpy(slot.work.p + problems_bytes, tiles_.data(), tiles_bytes);
      ASSAY_RETURN_IF_ERROR(dev_work_.ensure(problems_bytes + tiles_bytes + 1));
      ASSAY_RETURN_IF_ERROR(dev_ref_.ensure(2 * refs + 1));
    }
    CUDA_CHECK(cudaEventRecord(slot.start, stream_));
    ASSAY_RETURN_IF_ERROR(enqueue_draw(batch, plant_, regions_, slot.draw, dev_draw_, dev_.p, stream_));
    CUDA_CHECK(cudaEventRecord(slot.inputs_done, stream_));
    if (device_ref_) {
      CUDA_CHECK(cudaMemcpyAsync(dev_work_.p, slot.work.p, problems_bytes + tiles_bytes, cudaMemcpyHostToDevice,
                                 stream_));
      ASSAY_RETURN_IF_ERROR(device_ref::gemm_f64_batch(
          reinterpret_cast<const device_ref::F64GemmProblem*>(dev_work_.p),
          reinterpret_cast<const device_ref::F64GemmTile*>(dev_work_.p + problems_bytes),
          static_cast<int64_t>(tiles_.size()), dev_.p, reinterpret_cast<double*>(dev_ref_.p),
          reinterpret_cast<double*>(dev_ref_.p + refs), stream_));
    }
    CUDA_CHECK(cudaEventRecord(slot.ref_done, stream_));
    for (size_t i = 0; i < batch.cases.size(); ++i) {
      const FaCase& c = batch.cases[i];
      const FaConfig& cfg = c.cfg();
      const FaSlot& s = batch.slots[i];
      unsigned char* a = dev_.p + s.a + static_cast<size_t>(c.off_a) * dtype_size(cfg.a);
      unsigned char* b = dev_.p + s.b + static_cast<size_t>(c.off_b) * dtype_size(cfg.b);
      unsigned char* d = dev_.p + s.c + static_cast<size_t>(c.off_c) * dtype_size(cfg.out);
      // Each scale in its own 256-byte slot (fa_layout), so no scale pointer is less aligned
      // than the matrices. (On the H200 run cuBLASLt's cublasLtMatmul declined every fp8 case,
      // layouts within the documented rules included, while scale_b sat 4 bytes after scale_a.)
      const auto* scale_a = reinterpret_cast<const float*>(dev_.p + s.scale_a);
      const auto* scale_b = reinterpret_cast<const float*>(dev_.p + s.scale_b);
      vendor::RowMajorGemm g{c.m, c.n, c.k, c.trans_a, c.trans_b, c.lda, c.ldb, c.ldc};
      Status st;
      if (cfg.library == FaLibrary::kCublas) {
        if (c.batch != 1) return internal_error("false-alarm: a cuBLAS config got a batched case");
        cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
        if (cfg.acc == DType::kI32) {
          compute = CUBLAS_COMPUTE_32I;
        } else if (cfg.a == DType::kF32) {
          compute = CUBLAS_COMPUTE_32F_PEDANTIC;
        } else if (cfg.a == DType::kTF32) {
          compute = CUBLAS_COMPUTE_32F_FAST_TF32;
        }
        // Planted (tests): fp16 accumulation where the config promises fp32.
        if (plant_ == FaPlant::kF16Accumulate && cfg.a == DType::kF16 && cfg.out == DType::kF16)
          compute = CUBLAS_COMPUTE_16F;
        st = vendor::cublas_gemm_ex(cublas_, g, cfg.a, cfg.out, compute, c.alpha, a, b, c.beta, d);
      } else {
        vendor::LtGemm lg;
        lg.g = g;
        lg.a = cfg.a;
        lg.b = cfg.b;
        lg.out = cfg.out;
        lg.batch = c.batch;
        lg.stride_a = c.stride_a;
        lg.stride_b = c.stride_b;
        lg.stride_c = c.stride_c;
        lg.fast_accum = cfg.fast_accum;
        if (cfg.scaled) {
          lg.scale_a = scale_a;
          lg.scale_b = scale_b;
        }
        st = lt_->matmul(lg, c.alpha, a, b, c.beta, d, stream_);
      }
      // The library declining a case (no algorithm, a layout it rejects) is recorded and
      // reported; any other failure stops the campaign.
      if (!st.ok() && st.code() != StatusCode::kUnavailable && st.code() != StatusCode::kInvalidArgument) return st;
      batch.status[i] = st;
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(slot.vendor_done, stream_));
    CUDA_CHECK(cudaMemcpyAsync(batch.result, dev_.p + batch.out_begin, batch.bytes - batch.out_begin,
                               cudaMemcpyDeviceToHost, stream_));
    if (device_ref_ && refs > 0) {
      CUDA_CHECK(cudaMemcpyAsync(batch.ref, dev_ref_.p, refs, cudaMemcpyDeviceToHost, stream_));
      CUDA_CHECK(cudaMemcpyAsync(batch.mag, dev_ref_.p + refs, refs, cudaMemcpyDeviceToHost, stream_));
    }
    CUDA_CHECK(cudaEventRecord(slot.end, stream_));
    return ok_status();
  }

  Status wait(FaBatch& batch) override {
    CUDA_CHECK(cudaSetDevice(device_));
    Slot& slot = slots_[batch.slot & 1];
    CUDA_CHECK(cudaEventSynchronize(slot.end));
    float inputs_ms = 0, ref_ms = 0, vendor_ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&inputs_ms, slot.start, slot.inputs_done));
    CUDA_CHECK(cudaEventElapsedTime(&ref_ms, slot.inputs_done, slot.ref_done));
    CUDA_CHECK(cudaEventElapsedTime(&vendor_ms, slot.ref_done, slot.vendor_done));
    batch.device_seconds_inputs = inputs_ms * 1e-3;
    batch.device_seconds_reference = ref_ms * 1e-3;
    batch.device_seconds_vendor = vendor_ms * 1e-3;
    return ok_status();
  }

  bool device_reference() const override { return device_ref_; }
  std::string describe() const override { return description_; }

 private:
  /// A slot: the host side of one batch in flight (pinned), and its events.
  struct Slot {
    Grown result{true}, ref{true}, work{true}, draw{true};
    cudaEvent_t start = nullptr, inputs_done = nullptr, ref_done = nullptr, vendor_done = nullptr, end = nullptr;
  };
  GpuBackend() = default;
  int device_ = 0;
  FaPlant plant_ = FaPlant::kNone;
  bool device_ref_ = true;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<vendor::CublasLt> lt_;
  Slot slots_[2];
  Grown dev_{false}, dev_ref_{false}, dev_work_{false}, dev_draw_{false};
  std::vector<FaRegion> regions_;
  std::vector<device_ref::F64GemmProblem> problems_;
  std::vector<device_ref::F64GemmTile> tiles_;
  std::string description_;
};

}  // namespace

StatusOr<std::unique_ptr<FaBackend>> make_fa_gpu_backend(int device, FaPlant plant, bool device_reference) {
  return GpuBackend::create(device, plant, device_reference);
}

StatusOr<std::vector<unsigned char>> fa_draw_on_device(const FaBatch& batch, int device) {
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Grown host(true), dev(false), image(false);
  std::vector<FaRegion> regions;
  std::vector<unsigned char> out(batch.bytes);
  const auto draw = [&]() -> Status {
    ASSAY_RETURN_IF_ERROR(image.ensure(std::max<size_t>(batch.bytes, 1)));
    CUDA_CHECK(cudaMemsetAsync(image.p, 0, batch.bytes, stream));
    ASSAY_RETURN_IF_ERROR(enqueue_draw(batch, FaPlant::kNone, regions, host, dev, image.p, stream));
    CUDA_CHECK(cudaMemcpyAsync(out.data(), image.p, batch.bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return ok_status();
  };
  const Status st = draw();
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (!st.ok()) return st;
  return out;
}

StatusOr<FaReport> false_alarm(const FaOptions& o, const std::vector<int>& devices, const std::string& out_dir,
                               bool device_reference) {
  ASSAY_ASSIGN_OR_RETURN(const int ndev, gpu::device_count());
  if (devices.empty()) return invalid_argument("false-alarm: no device");
  for (int d : devices)
    if (d < 0 || d >= ndev) return invalid_argument(fmt::format("--device {}: {} CUDA device(s) present", d, ndev));
  std::vector<std::unique_ptr<FaBackend>> owned;
  std::vector<FaBackend*> backends;
  for (int d : devices) {
    ASSAY_ASSIGN_OR_RETURN(std::unique_ptr<FaBackend> b, make_fa_gpu_backend(d, o.plant, device_reference));
    backends.push_back(b.get());
    owned.push_back(std::move(b));
  }
  ASSAY_ASSIGN_OR_RETURN(FaReport report, run_false_alarm(o, std::span<FaBackend* const>(backends)));
  if (!out_dir.empty()) {
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/false-alarm.md", fa_markdown(report, o)));
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/false-alarm.json", fa_json(report, o).dump(2) + "\n"));
  }
  return report;
}

}  // namespace assay
