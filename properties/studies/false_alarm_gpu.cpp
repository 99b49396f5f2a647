// assay false-alarm, GPU part: the cuBLAS / cuBLASLt backend and the command's driver.
// One stream, one cuBLAS handle, one cuBLASLt handle with its workspace, one device image
// and pinned host buffers grown on demand and reused across batches: a batch is one H2D
// copy, the vendor calls back to back, one D2H copy of the outputs, one synchronisation.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "harness/corpus.h"
#include "properties/studies/false_alarm.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "references/library/cublas_gemm.h"
#include "references/library/cublaslt_gemm.h"

namespace assay {
namespace {

class GpuBackend : public FaBackend {
 public:
  static StatusOr<std::unique_ptr<FaBackend>> create(int device, FaPlant plant) {
    std::unique_ptr<GpuBackend> b(new GpuBackend());
    b->device_ = device;
    b->plant_ = plant;
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
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
    lt_.reset();
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (dev_ != nullptr) cudaFree(dev_);
    if (image_ != nullptr) cudaFreeHost(image_);
    if (result_ != nullptr) cudaFreeHost(result_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status reserve(size_t image_bytes, size_t result_bytes, unsigned char** image, unsigned char** result) override {
    CUDA_CHECK(cudaSetDevice(device_));
    if (image_bytes > image_cap_) {
      if (image_ != nullptr) CUDA_CHECK(cudaFreeHost(image_));
      image_ = nullptr;
      if (dev_ != nullptr) CUDA_CHECK(cudaFree(dev_));
      dev_ = nullptr;
      image_cap_ = 0;
      const size_t cap = image_bytes + image_bytes / 4;
      CUDA_CHECK(cudaMallocHost(&image_, cap));
      CUDA_CHECK(cudaMalloc(&dev_, cap));
      image_cap_ = cap;
    }
    if (result_bytes > result_cap_) {
      if (result_ != nullptr) CUDA_CHECK(cudaFreeHost(result_));
      result_ = nullptr;
      result_cap_ = 0;
      const size_t cap = result_bytes + result_bytes / 4;
      CUDA_CHECK(cudaMallocHost(&result_, cap));
      result_cap_ = cap;
    }
    *image = image_;
    *result = result_;
    return ok_status();
  }

  Status run(FaBatch& batch) override {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemcpyAsync(dev_, batch.image, batch.bytes, cudaMemcpyHostToDevice, stream_));
    for (size_t i = 0; i < batch.cases.size(); ++i) {
      const FaCase& c = batch.cases[i];
      const FaConfig& cfg = c.cfg();
      const FaSlot& s = batch.slots[i];
      unsigned char* a = dev_ + s.a + static_cast<size_t>(c.off_a) * dtype_size(cfg.a);
      unsigned char* b = dev_ + s.b + static_cast<size_t>(c.off_b) * dtype_size(cfg.b);
      unsigned char* d = dev_ + s.c + static_cast<size_t>(c.off_c) * dtype_size(cfg.out);
      // Each scale in its own 256-byte slot (fa_layout), so no scale pointer is less aligned
      // than the matrices. (On the H200 run cuBLASLt's cublasLtMatmul declined every fp8 case,
      // layouts within the documented rules included, while scale_b sat 4 bytes after scale_a.)
      const auto* scale_a = reinterpret_cast<const float*>(dev_ + s.scale_a);
      const auto* scale_b = reinterpret_cast<const float*>(dev_ + s.scale_b);
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
    CUDA_CHECK(cudaMemcpyAsync(batch.result, dev_ + batch.out_begin, batch.bytes - batch.out_begin,
                               cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return ok_status();
  }

  std::string describe() const override { return description_; }

 private:
  GpuBackend() = default;
  int device_ = 0;
  FaPlant plant_ = FaPlant::kNone;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<vendor::CublasLt> lt_;
  unsigned char* dev_ = nullptr;
  unsigned char *image_ = nullptr, *result_ = nullptr;
  size_t image_cap_ = 0, result_cap_ = 0;
  std::string description_;
};

}  // namespace

StatusOr<std::unique_ptr<FaBackend>> make_fa_gpu_backend(int device, FaPlant plant) {
  return GpuBackend::create(device, plant);
}

StatusOr<FaReport> false_alarm(const FaOptions& o, int device, const std::string& out_dir) {
  ASSAY_ASSIGN_OR_RETURN(const int ndev, gpu::device_count());
  if (device < 0 || device >= ndev)
    return invalid_argument(fmt::format("--device {}: {} CUDA device(s) present", device, ndev));
  ASSAY_ASSIGN_OR_RETURN(std::unique_ptr<FaBackend> backend, make_fa_gpu_backend(device, o.plant));
  ASSAY_ASSIGN_OR_RETURN(FaReport report, run_false_alarm(o, *backend));
  if (!out_dir.empty()) {
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/false-alarm.md", fa_markdown(report, o)));
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/false-alarm.json", fa_json(report, o).dump(2) + "\n"));
  }
  return report;
}

}  // namespace assay
