#include "references/library/cudnn.h"

#include <cudnn.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "harness/gpu/cuda_check.h"

namespace assay::vendor {

// ---- errors, versions ------------------------------------------------------------------------------

bool cudnn_built() {
  return true;
}

Status cudnn_not_built() {
  return unavailable("built without cuDNN (configure with -DASSAY_WITH_CUDNN=ON where cuDNN 9 is installed)");
}

size_t cudnn_compiled_version() {
  return CUDNN_VERSION;
}

Status cudnn_status(int status, const char* call, const char* file, int line) {
  const auto e = static_cast<cudnnStatus_t>(status);
  if (e == CUDNN_STATUS_SUCCESS) return ok_status();
  // cuDNN 9 keeps a per-thread message with the details (which parameter, which limit).
  char last[1024] = {};
  cudnnGetLastErrorString(last, sizeof last);
  std::string detail(last);
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  std::string msg = fmt::format("{} failed: {} ({})", call, cudnnGetErrorString(e), static_cast<int>(e));
  if (!detail.empty()) msg += fmt::format(" [{}]", detail);
  msg += fmt::format(" at {}:{}", file, line);
  if (CUDNN_STATUS_CATEGORY(e) == CUDNN_STATUS_NOT_SUPPORTED) return unavailable(std::move(msg));
  return internal_error(std::move(msg));
}

size_t cudnn_runtime_version() {
  return cudnnGetVersion();
}

int cudnn_version_major(size_t version) {
  return static_cast<int>(version >= 90000 ? version / 10000 : version / 1000);
}

std::string cudnn_version_string(size_t version) {
  if (version >= 90000) return fmt::format("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
  return fmt::format("{}.{}.{}", version / 1000, version % 1000 / 100, version % 100);
}

Status cudnn_check_major(size_t runtime, size_t compiled) {
  if (cudnn_version_major(runtime) == cudnn_version_major(compiled)) return ok_status();
  return unavailable(fmt::format("cuDNN runtime {} does not match the major version assay was compiled against ({})",
                                 cudnn_version_string(runtime), cudnn_version_string(compiled)));
}

std::string cudnn_describe() {
  return fmt::format("cuDNN {} (compiled against {}, its CUDA runtime {})", cudnn_version_string(cudnnGetVersion()),
                     cudnn_version_string(cudnn_compiled_version()), cudnnGetCudartVersion());
}

// ---- handle -------------------------------------------------------------------------------------------

StatusOr<std::unique_ptr<CudnnHandle>> CudnnHandle::create(cudaStream_t stream) {
  ASSAY_RETURN_IF_ERROR(cudnn_check_major());
  std::unique_ptr<CudnnHandle> h(new CudnnHandle());
  CUDNN_CHECK(cudnnCreate(&h->handle_));
  CUDNN_CHECK(cudnnSetStream(h->handle_, stream));
  h->stream_ = stream;
  return h;
}

CudnnHandle::~CudnnHandle() {
  // The stream the handle was last bound to may be gone by now (a vendor column's handle lives
  // in its thread's thread_local storage, which ends after the lane and its stream): wait for the
  // device instead, and unbind the stream before cudnnDestroy sees it.
  if (workspace_ != nullptr) {
    (void)cudaDeviceSynchronize();
    (void)cudaFree(workspace_);
  }
  if (handle_ != nullptr) {
    (void)cudnnSetStream(handle_, nullptr);
    (void)cudnnDestroy(handle_);
  }
}

Status CudnnHandle::set_stream(cudaStream_t stream) {
  // Work queued on the old stream may still use the workspace the new stream will reuse. The
  // device, not the old stream, is synchronised: a handle outlives the lanes whose streams it
  // served (one per thread and device), and synchronising a destroyed stream crashed the
  // process (a test's second lane on one thread, H100).
  if (stream != stream_ && workspace_ != nullptr) CUDA_CHECK(cudaDeviceSynchronize());
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  stream_ = stream;
  return ok_status();
}

StatusOr<void*> CudnnHandle::workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  if (workspace_ != nullptr) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // work queued on the old buffer finishes first
    CUDA_CHECK(cudaFree(workspace_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t want = (bytes + kMiB - 1) / kMiB * kMiB;
  CUDA_CHECK(cudaMalloc(&workspace_, want));
  workspace_bytes_ = want;
  return workspace_;
}

namespace {

// ---- helpers -------------------------------------------------------------------------------------------

/// A cuDNN descriptor, destroyed with its owner.
template <typename T, auto Create, auto Destroy>
class Owned {
 public:
  Owned() = default;
  ~Owned() {
    if (d_ != nullptr) (void)Destroy(d_);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Status create(const char* what) { return cudnn_status(Create(&d_), what, __FILE__, __LINE__); }
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};

using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using ActivationDesc =
    Owned<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

StatusOr<cudnnDataType_t> data_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDNN_DATA_FLOAT;
    case DType::kF16:
      return CUDNN_DATA_HALF;
    case DType::kBF16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return unavailable(fmt::format("cuDNN reference: dtype {} is not supported (fp32, fp16, bf16)", dtype_name(t)));
  }
}

bool fits_int(int64_t v) {
  return v >= 0 && v <= std::numeric_limits<int>::max();
}

int as_int(int64_t v) {
  return static_cast<int>(v);
}

/// A rows x n matrix with row stride ld (elements) as NCHW [rows, n, 1, 1], strides [ld, 1, 1, 1].
/// A stride cuDNN refuses comes back as `unavailable` naming it.
Status set_rows_desc(TensorDesc& d, cudnnDataType_t t, int64_t rows, int64_t n, int64_t ld, const char* op) {
  ASSAY_RETURN_IF_ERROR(d.create("cudnnCreateTensorDescriptor"));
  const cudnnStatus_t e = cudnnSetTensor4dDescriptorEx(d.get(), t, as_int(rows), as_int(n), 1, 1, as_int(ld), 1, 1, 1);
  if (e != CUDNN_STATUS_SUCCESS && ld != n) {
    return unavailable(fmt::format("cuDNN {}: row stride ld={} for n={} refused: {}", op, ld, n,
                                   cudnn_status(e, "cudnnSetTensor4dDescriptorEx", __FILE__, __LINE__).message()));
  }
  return cudnn_status(e, "cudnnSetTensor4dDescriptorEx", __FILE__, __LINE__);
}

/// Checks a rows x n problem; sets *ld to the effective row stride.
Status check_rows(int64_t rows, int64_t n, int64_t* ld, const char* op) {
  if (rows < 0 || n < 0) return invalid_argument(fmt::format("cuDNN {}: negative size {} x {}", op, rows, n));
  if (*ld == 0) *ld = n;
  if (*ld < n) return invalid_argument(fmt::format("cuDNN {}: row stride ld={} < n={}", op, *ld, n));
  if (!fits_int(rows) || !fits_int(n) || !fits_int(*ld))
    return invalid_argument(fmt::format("cuDNN {}: {} x {} (ld {}) exceeds cuDNN's int dimensions", op, rows, n, *ld));
  return ok_status();
}

/// A call on a strided layout that cuDNN refuses as a bad parameter or unsupported: `unavailable`
/// naming the stride; anything else as cudnn_status.
Status strided_call_status(cudnnStatus_t e, const char* call, int64_t n, int64_t ld) {
  Status s = cudnn_status(e, call, __FILE__, __LINE__);
  if (s.ok() || ld == n) return s;
  const int cat = CUDNN_STATUS_CATEGORY(e);
  if (cat == CUDNN_STATUS_BAD_PARAM || cat == CUDNN_STATUS_NOT_SUPPORTED)
    return unavailable(fmt::format("cuDNN refuses row stride ld={} for n={}: {}", ld, n, s.message()));
  return s;
}

cudnnSoftmaxAlgorithm_t softmax_algo(SoftmaxAlgo a) {
  return a == SoftmaxAlgo::kLog ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
}

}  // namespace

// ---- softmax ----------------------------------------------------------------------------------------

namespace {

/// Where the packed copies of a strided softmax call live: `count` rows x n buffers carved out
/// of the handle's workspace, each starting on a 256-byte boundary (cudaMalloc's alignment).
struct PackedRows {
  size_t row_bytes = 0;     ///< n * element size
  size_t buffer_bytes = 0;  ///< rows * row_bytes
  size_t stride = 0;        ///< buffer_bytes rounded up to 256
  char* base = nullptr;
  void* buffer(int i) const { return base + static_cast<size_t>(i) * stride; }
};

StatusOr<PackedRows> packed_rows(CudnnHandle& h, int64_t rows, int64_t n, DType t, int count, const char* op) {
  PackedRows pr;
  const size_t sz = dtype_size(t);
  const auto r = static_cast<size_t>(rows), c = static_cast<size_t>(n);
  // rows and n fit an int each; the workspace must fit a size_t with room for the rounding.
  constexpr size_t kAlign = 256;
  const size_t limit = (std::numeric_limits<size_t>::max() - kAlign) / static_cast<size_t>(count);
  if (c > limit / sz || r > limit / (c * sz))
    return invalid_argument(fmt::format("cuDNN {}: {} x {} too large to pack", op, rows, n));
  pr.row_bytes = c * sz;
  pr.buffer_bytes = r * pr.row_bytes;
  pr.stride = (pr.buffer_bytes + kAlign - 1) / kAlign * kAlign;
  ASSAY_ASSIGN_OR_RETURN(void* ws, h.workspace(pr.stride * static_cast<size_t>(count)));
  pr.base = static_cast<char*>(ws);
  return pr;
}

/// The rows x n view at `src` (row stride ld elements) into the packed buffer `dst`, on the
/// handle's stream.
Status pack(CudnnHandle& h, const PackedRows& pr, int64_t rows, int64_t ld, DType t, const void* src, void* dst) {
  CUDA_CHECK(cudaMemcpy2DAsync(dst, pr.row_bytes, src, static_cast<size_t>(ld) * dtype_size(t), pr.row_bytes,
                               static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, h.stream()));
  return ok_status();
}

/// The packed buffer `src` back into the rows x n view at `dst`, gaps untouched.
Status unpack(CudnnHandle& h, const PackedRows& pr, int64_t rows, int64_t ld, DType t, const void* src, void* dst) {
  CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(ld) * dtype_size(t), src, pr.row_bytes, pr.row_bytes,
                               static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, h.stream()));
  return ok_status();
}

}  // namespace

Status cudnn_softmax_forward(CudnnHandle& h, const CudnnSoftmax& p, float alpha, const void* x, float beta, void* y) {
  int64_t ld = p.ld;
  ASSAY_RETURN_IF_ERROR(check_rows(p.rows, p.n, &ld, "softmax forward"));
  ASSAY_ASSIGN_OR_RETURN(const cudnnDataType_t t, data_type(p.dtype));
  if (p.rows == 0 || p.n == 0) return ok_status();
  if (x == nullptr || y == nullptr) return invalid_argument("cuDNN softmax forward: null x or y");
  // cuDNN always sees a packed tensor: with strides it writes the gaps (cudnn.h, CudnnSoftmax).
  TensorDesc d;
  ASSAY_RETURN_IF_ERROR(set_rows_desc(d, t, p.rows, p.n, p.n, "softmax forward"));
  const cudnnSoftmaxAlgorithm_t algo = softmax_algo(p.algo);
  if (ld == p.n) {
    CUDNN_CHECK(cudnnSoftmaxForward(h.get(), algo, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha, d.get(), x, &beta, d.get(), y));
    return ok_status();
  }
  ASSAY_ASSIGN_OR_RETURN(const PackedRows pr, packed_rows(h, p.rows, p.n, p.dtype, 2, "softmax forward"));
  void* px = pr.buffer(0);
  void* py = pr.buffer(1);
  ASSAY_RETURN_IF_ERROR(pack(h, pr, p.rows, ld, p.dtype, x, px));
  if (beta != 0) ASSAY_RETURN_IF_ERROR(pack(h, pr, p.rows, ld, p.dtype, y, py));  // cuDNN reads y only then
  CUDNN_CHECK(cudnnSoftmaxForward(h.get(), algo, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha, d.get(), px, &beta, d.get(), py));
  return unpack(h, pr, p.rows, ld, p.dtype, py, y);
}

Status cudnn_softmax_backward(CudnnHandle& h, const CudnnSoftmax& p, float alpha, const void* y, const void* dy,
                              float beta, void* dx) {
  int64_t ld = p.ld;
  ASSAY_RETURN_IF_ERROR(check_rows(p.rows, p.n, &ld, "softmax backward"));
  ASSAY_ASSIGN_OR_RETURN(const cudnnDataType_t t, data_type(p.dtype));
  if (p.rows == 0 || p.n == 0) return ok_status();
  if (y == nullptr || dy == nullptr || dx == nullptr)
    return invalid_argument("cuDNN softmax backward: null y, dy or dx");
  TensorDesc d;
  ASSAY_RETURN_IF_ERROR(set_rows_desc(d, t, p.rows, p.n, p.n, "softmax backward"));
  const cudnnSoftmaxAlgorithm_t algo = softmax_algo(p.algo);
  if (ld == p.n) {
    CUDNN_CHECK(cudnnSoftmaxBackward(h.get(), algo, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha, d.get(), y, d.get(), dy, &beta,
                                     d.get(), dx));
    return ok_status();
  }
  ASSAY_ASSIGN_OR_RETURN(const PackedRows pr, packed_rows(h, p.rows, p.n, p.dtype, 3, "softmax backward"));
  void* py = pr.buffer(0);
  void* pdy = pr.buffer(1);
  void* pdx = pr.buffer(2);
  ASSAY_RETURN_IF_ERROR(pack(h, pr, p.rows, ld, p.dtype, y, py));
  ASSAY_RETURN_IF_ERROR(pack(h, pr, p.rows, ld, p.dtype, dy, pdy));
  if (beta != 0) ASSAY_RETURN_IF_ERROR(pack(h, pr, p.rows, ld, p.dtype, dx, pdx));  // cuDNN reads dx only then
  CUDNN_CHECK(cudnnSoftmaxBackward(h.get(), algo, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha, d.get(), py, d.get(), pdy, &beta,
                                   d.get(), pdx));
  return unpack(h, pr, p.rows, ld, p.dtype, pdx, dx);
}

// ---- activations ------------------------------------------------------------------------------------

namespace {

/// The activation descriptor for `m`; kGelu: unavailable (no such mode in the legacy API).
Status set_activation(ActivationDesc& a, CudnnActivationMode m) {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  switch (m) {
    case CudnnActivationMode::kRelu:
      mode = CUDNN_ACTIVATION_RELU;
      break;
    case CudnnActivationMode::kSigmoid:
      mode = CUDNN_ACTIVATION_SIGMOID;
      break;
    case CudnnActivationMode::kTanh:
      mode = CUDNN_ACTIVATION_TANH;
      break;
    case CudnnActivationMode::kSwish:
      mode = CUDNN_ACTIVATION_SWISH;
      break;
    case CudnnActivationMode::kGelu:
      return unavailable(
          "cuDNN's legacy activation API has no GELU mode (cudnnActivationMode_t: SIGMOID, RELU, TANH, CLIPPED_RELU, "
          "ELU, IDENTITY, SWISH)");
  }
  ASSAY_RETURN_IF_ERROR(a.create("cudnnCreateActivationDescriptor"));
  // coef is the clipping threshold (CLIPPED_RELU) or ELU's alpha; unused by the modes here.
  CUDNN_CHECK(
      cudnnSetActivationDescriptor(a.get(), mode, CUDNN_PROPAGATE_NAN, m == CudnnActivationMode::kSwish ? 1.0 : 0.0));
  if (m == CudnnActivationMode::kSwish) CUDNN_CHECK(cudnnSetActivationDescriptorSwishBeta(a.get(), 1.0));  // SiLU
  return ok_status();
}

}  // namespace

Status cudnn_activation_forward(CudnnHandle& h, const CudnnActivation& p, float alpha, const void* x, float beta,
                                void* y) {
  int64_t ld = p.ld;
  ASSAY_RETURN_IF_ERROR(check_rows(p.rows, p.n, &ld, "activation forward"));
  ASSAY_ASSIGN_OR_RETURN(const cudnnDataType_t t, data_type(p.dtype));
  ActivationDesc a;
  ASSAY_RETURN_IF_ERROR(set_activation(a, p.mode));
  if (p.rows == 0 || p.n == 0) return ok_status();
  if (x == nullptr || y == nullptr) return invalid_argument("cuDNN activation forward: null x or y");
  TensorDesc d;
  ASSAY_RETURN_IF_ERROR(set_rows_desc(d, t, p.rows, p.n, ld, "activation forward"));
  return strided_call_status(cudnnActivationForward(h.get(), a.get(), &alpha, d.get(), x, &beta, d.get(), y),
                             "cudnnActivationForward", p.n, ld);
}

Status cudnn_activation_backward(CudnnHandle& h, const CudnnActivation& p, float alpha, const void* y, const void* dy,
                                 const void* x, float beta, void* dx) {
  int64_t ld = p.ld;
  ASSAY_RETURN_IF_ERROR(check_rows(p.rows, p.n, &ld, "activation backward"));
  ASSAY_ASSIGN_OR_RETURN(const cudnnDataType_t t, data_type(p.dtype));
  ActivationDesc a;
  ASSAY_RETURN_IF_ERROR(set_activation(a, p.mode));
  if (p.rows == 0 || p.n == 0) return ok_status();
  if (y == nullptr || dy == nullptr || x == nullptr || dx == nullptr)
    return invalid_argument("cuDNN activation backward: null y, dy, x or dx");
  TensorDesc d;
  ASSAY_RETURN_IF_ERROR(set_rows_desc(d, t, p.rows, p.n, ld, "activation backward"));
  return strided_call_status(
      cudnnActivationBackward(h.get(), a.get(), &alpha, d.get(), y, d.get(), dy, d.get(), x, &beta, d.get(), dx),
      "cudnnActivationBackward", p.n, ld);
}

// ---- convolution ------------------------------------------------------------------------------------

namespace {

struct ConvDescs {
  TensorDesc x, y;  // y: the output (and dy) tensor
  FilterDesc w;
  ConvDesc conv;
};

std::string conv_problem(const CudnnConv& p) {
  const ref::Conv2dGeometry& g = p.geom;
  return fmt::format("{} {} N={} C={} H={} W={} K={} R={} S={} pad={}x{} stride={}x{} dil={}x{} groups={}",
                     dtype_name(p.dtype), g.layout == ref::ConvLayout::kNCHW ? "NCHW" : "NHWC", g.n, g.c, g.h, g.w, g.k,
                     g.r, g.s, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w, g.groups);
}

Status make_conv_descs(const CudnnConv& p, ConvDescs& d) {
  const ref::Conv2dGeometry& g = p.geom;
  if (!g.valid()) return invalid_argument("cuDNN convolution: invalid geometry: " + conv_problem(p));
  for (int64_t v : {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w,
                    g.x_elems(), g.w_elems(), g.y_elems()}) {
    if (!fits_int(v)) return invalid_argument("cuDNN convolution: a size exceeds cuDNN's int: " + conv_problem(p));
  }
  ASSAY_ASSIGN_OR_RETURN(const cudnnDataType_t t, data_type(p.dtype));
  const cudnnTensorFormat_t f = g.layout == ref::ConvLayout::kNCHW ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
  const int P = as_int(g.out_h()), Q = as_int(g.out_w());
  ASSAY_RETURN_IF_ERROR(d.x.create("cudnnCreateTensorDescriptor"));
  ASSAY_RETURN_IF_ERROR(d.y.create("cudnnCreateTensorDescriptor"));
  ASSAY_RETURN_IF_ERROR(d.w.create("cudnnCreateFilterDescriptor"));
  ASSAY_RETURN_IF_ERROR(d.conv.create("cudnnCreateConvolutionDescriptor"));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x.get(), f, t, as_int(g.n), as_int(g.c), as_int(g.h), as_int(g.w)));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.y.get(), f, t, as_int(g.n), as_int(g.k), P, Q));
  // NCHW: KCRS; NHWC: KRSC. The filter's C is the channels of one group.
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(d.w.get(), t, f, as_int(g.k), as_int(g.cg()), as_int(g.r), as_int(g.s)));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d.conv.get(), as_int(g.pad_h), as_int(g.pad_w), as_int(g.stride_h),
                                              as_int(g.stride_w), as_int(g.dil_h), as_int(g.dil_w),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv.get(), as_int(g.groups)));
  CUDNN_CHECK(
      cudnnSetConvolutionMathType(d.conv.get(), p.math == ConvMath::kFma ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
  int on = 0, ok = 0, op = 0, oq = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d.conv.get(), d.x.get(), d.w.get(), &on, &ok, &op, &oq));
  if (on != g.n || ok != g.k || op != P || oq != Q) {
    return internal_error(fmt::format("cuDNN convolution: cuDNN's output {}x{}x{}x{} differs from {}x{}x{}x{} for {}",
                                      on, ok, op, oq, g.n, g.k, P, Q, conv_problem(p)));
  }
  return ok_status();
}

// The three directions, for select_and_run.
struct FwdDir {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr const char* kWhat = "forward";
  static constexpr const char* kCall = "cudnnConvolutionForward";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); }
  static cudnnStatus_t get(cudnnHandle_t h, const ConvDescs& d, int want, int* got, Perf* perf) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), want, got, perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), a, bytes);
  }
  // Four deterministic dot-product algorithms: which one is cuDNN's to say.
  static constexpr std::optional<Algo> kOnlyDeterministicDotProduct = std::nullopt;
  static bool dot_product(Algo a) {
    return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
  }
  static std::string name(Algo a) {
    static constexpr const char* kNames[] = {
        "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
        "WINOGRAD",      "WINOGRAD_NONFUSED"};
    const int i = static_cast<int>(a);
    return i >= 0 && i < 8 ? kNames[i] : fmt::format("algo {}", i);
  }
};

struct BwdDataDir {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr const char* kWhat = "backward-data";
  static constexpr const char* kCall = "cudnnConvolutionBackwardData";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t get(cudnnHandle_t h, const ConvDescs& d, int want, int* got, Perf* perf) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), want, got,
                                                       perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), a, bytes);
  }
  // ALGO_0 sums with atomics (cuDNN's documentation: non-deterministic).
  static constexpr std::optional<Algo> kOnlyDeterministicDotProduct = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  static bool dot_product(Algo a) {
    return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  }
  static std::string name(Algo a) {
    static constexpr const char* kNames[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    const int i = static_cast<int>(a);
    return i >= 0 && i < 6 ? kNames[i] : fmt::format("algo {}", i);
  }
};

struct BwdFilterDir {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr const char* kWhat = "backward-filter";
  static constexpr const char* kCall = "cudnnConvolutionBackwardFilter";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t get(cudnnHandle_t h, const ConvDescs& d, int want, int* got, Perf* perf) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), want, got,
                                                         perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), a, bytes);
  }
  // ALGO_0 and ALGO_3 sum with atomics (cuDNN's documentation: non-deterministic).
  static constexpr std::optional<Algo> kOnlyDeterministicDotProduct = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  static bool dot_product(Algo a) {
    return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  }
  static std::string name(Algo a) {
    static constexpr const char* kNames[] = {"ALGO_0",    "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED",
                                             "FFT_TILING"};
    const int i = static_cast<int>(a);
    return i >= 0 && i < 7 ? kNames[i] : fmt::format("algo {}", i);
  }
};

/// cuDNN's first `want` algorithms for direction Dir, in its order, asked under the problem's own
/// math type (a tried entry sets the descriptor's: the list must not depend on what was tried).
template <typename Dir>
StatusOr<std::vector<typename Dir::Perf>> heuristics(CudnnHandle& h, const CudnnConv& p, const ConvDescs& d, int want) {
  CUDNN_CHECK(
      cudnnSetConvolutionMathType(d.conv.get(), p.math == ConvMath::kFma ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
  std::vector<typename Dir::Perf> perf(static_cast<size_t>(want));
  int returned = 0;
  CUDNN_CHECK(Dir::get(h.get(), d, want, &returned, perf.data()));
  perf.resize(static_cast<size_t>(std::clamp(returned, 0, want)));
  return perf;
}

/// Walks cuDNN's list of algorithms for direction Dir in its order and runs the first one that
/// qualifies (cudnn.h, before cudnn_conv_forward); run(algo, workspace, bytes) makes the call.
///
/// cuDNN's top choice is asked for alone first: for some fp16/bf16 NCHW filter gradients on an
/// H200 the query for the top choice took 2.0 to 2.8 s and for the rest of the list 1.3 to 1.4 s
/// more, a lane stalled for each new shape. The whole list is asked for
/// only when the top choice does not qualify; the choice is the same either way, the first
/// qualifying entry of cuDNN's order (CudnnConvChoiceGpu checks that the top choice alone is the
/// whole list's head).
///
/// Where FMA math and the dot-product policy leave one algorithm that can qualify (backward data
/// and backward filter: ALGO_1, the one deterministic dot-product algorithm of each), the list's
/// first qualifying entry can only be it, so it runs without asking. cuDNN does not cache the
/// query: the same fp16 1x1 filter-gradient problem asked twice took 1.9 s and 1.2 s, against
/// 0.4 s at most for ALGO_1's workspace query and run together on a new problem
/// (CudnnConvChoiceGpu checks that the choice is the list's first qualifying entry).
template <typename Dir, typename Run>
StatusOr<ConvAlgoUsed> select_and_run(CudnnHandle& h, const CudnnConv& p, const ConvDescs& d, Run&& run) {
  const bool fma = p.math == ConvMath::kFma;
  std::vector<std::string> passed;
  // Sets the math type, sizes the workspace and runs: nullopt where the entry is passed over
  // (its reason in `passed`).
  auto try_entry = [&](typename Dir::Algo algo, cudnnMathType_t math) -> std::optional<StatusOr<ConvAlgoUsed>> {
    const std::string name = Dir::name(algo);
    // cuDNN runs an algorithm with the descriptor's math type: set the one the list reports.
    if (auto s = cudnn_status(cudnnSetConvolutionMathType(d.conv.get(), math), "cudnnSetConvolutionMathType", __FILE__,
                              __LINE__);
        !s.ok())
      return StatusOr<ConvAlgoUsed>(s);
    size_t bytes = 0;
    const cudnnStatus_t we = Dir::workspace(h.get(), d, algo, &bytes);
    if (we != CUDNN_STATUS_SUCCESS) {
      passed.push_back(name + ": workspace query " + cudnnGetErrorString(we));
      return std::nullopt;
    }
    if (bytes > h.workspace_limit) {
      passed.push_back(fmt::format("{}: workspace {} B over the limit {} B", name, bytes, h.workspace_limit));
      return std::nullopt;
    }
    StatusOr<void*> ws = h.workspace(bytes);
    if (!ws.ok()) return StatusOr<ConvAlgoUsed>(ws.status());
    const cudnnStatus_t e = run(algo, *ws, bytes);
    if (CUDNN_STATUS_CATEGORY(e) == CUDNN_STATUS_NOT_SUPPORTED) {
      passed.push_back(name + ": " + cudnn_status(e, Dir::kCall, __FILE__, __LINE__).message());
      return std::nullopt;
    }
    if (auto s = cudnn_status(e, Dir::kCall, __FILE__, __LINE__); !s.ok()) return StatusOr<ConvAlgoUsed>(s);
    ConvAlgoUsed used;
    used.algo = static_cast<int>(algo);
    used.name = name;
    used.workspace = bytes;
    used.math_type = static_cast<int>(math);
    used.passed_over = static_cast<int>(passed.size());
    return StatusOr<ConvAlgoUsed>(used);
  };
  // The entries tried so far (the top choice), so the whole list does not try them again.
  std::vector<std::pair<typename Dir::Algo, cudnnMathType_t>> tried;
  // Tries the entries of `perf` in order: the first that qualifies and runs is the answer.
  auto walk = [&](const std::vector<typename Dir::Perf>& perf) -> std::optional<StatusOr<ConvAlgoUsed>> {
    for (const typename Dir::Perf& pr : perf) {
      const std::pair<typename Dir::Algo, cudnnMathType_t> key{pr.algo, pr.mathType};
      if (std::find(tried.begin(), tried.end(), key) != tried.end()) continue;
      tried.push_back(key);
      const std::string name = Dir::name(pr.algo);
      if (pr.status != CUDNN_STATUS_SUCCESS) {
        passed.push_back(name + ": " + cudnnGetErrorString(pr.status));
        continue;
      }
      if (pr.determinism != CUDNN_DETERMINISTIC) {
        passed.push_back(name + ": non-deterministic");
        continue;
      }
      if (p.algos == ConvAlgoPolicy::kDotProduct && !Dir::dot_product(pr.algo)) {
        passed.push_back(name + ": not a dot-product algorithm");
        continue;
      }
      // kFma: FMA kernels only. kDefault: what cuDNN's heuristics pick under default math, tensor
      // cores included, but never the down-converting TENSOR_OP_MATH_ALLOW_CONVERSION.
      const bool math_ok =
          fma ? pr.mathType == CUDNN_FMA_MATH : pr.mathType == CUDNN_DEFAULT_MATH || pr.mathType == CUDNN_TENSOR_OP_MATH;
      if (!math_ok) {
        passed.push_back(fmt::format("{}: math type {}", name, static_cast<int>(pr.mathType)));
        continue;
      }
      if (auto found = try_entry(pr.algo, pr.mathType)) return found;
    }
    return std::nullopt;
  };
  const auto none = [&]() -> StatusOr<ConvAlgoUsed> {
    std::string why;
    for (const std::string& s : passed) why += (why.empty() ? "" : "; ") + s;
    return unavailable(fmt::format("cuDNN convolution {}: no deterministic {} algorithm for {} ({})", Dir::kWhat,
                                   fma ? "FMA-math" : "default-math", conv_problem(p),
                                   why.empty() ? "cuDNN listed none" : why));
  };
  if (fma && p.algos == ConvAlgoPolicy::kDotProduct && Dir::kOnlyDeterministicDotProduct) {
    if (auto found = try_entry(*Dir::kOnlyDeterministicDotProduct, CUDNN_FMA_MATH)) return *std::move(found);
    return none();
  }
  int max_count = 0;
  CUDNN_CHECK(Dir::max_count(h.get(), &max_count));
  for (const int want : {1, std::max(max_count, 1)}) {
    ASSAY_ASSIGN_OR_RETURN(const std::vector<typename Dir::Perf> perf, heuristics<Dir>(h, p, d, want));
    if (auto found = walk(perf)) return *std::move(found);
    if (want >= max_count) break;
  }
  return none();
}

}  // namespace

StatusOr<ConvAlgoUsed> cudnn_conv_forward(CudnnHandle& h, const CudnnConv& p, float alpha, const void* x, const void* w,
                                          float beta, void* y) {
  ConvDescs d;
  ASSAY_RETURN_IF_ERROR(make_conv_descs(p, d));
  if (x == nullptr || w == nullptr || y == nullptr)
    return invalid_argument("cuDNN convolution forward: null x, w or y");
  return select_and_run<FwdDir>(h, p, d, [&](cudnnConvolutionFwdAlgo_t a, void* ws, size_t bytes) {
    return cudnnConvolutionForward(h.get(), &alpha, d.x.get(), x, d.w.get(), w, d.conv.get(), a, ws, bytes, &beta,
                                   d.y.get(), y);
  });
}

StatusOr<ConvAlgoUsed> cudnn_conv_backward_data(CudnnHandle& h, const CudnnConv& p, float alpha, const void* w,
                                                const void* dy, float beta, void* dx) {
  ConvDescs d;
  ASSAY_RETURN_IF_ERROR(make_conv_descs(p, d));
  if (w == nullptr || dy == nullptr || dx == nullptr)
    return invalid_argument("cuDNN convolution backward-data: null w, dy or dx");
  return select_and_run<BwdDataDir>(h, p, d, [&](cudnnConvolutionBwdDataAlgo_t a, void* ws, size_t bytes) {
    return cudnnConvolutionBackwardData(h.get(), &alpha, d.w.get(), w, d.y.get(), dy, d.conv.get(), a, ws, bytes, &beta,
                                        d.x.get(), dx);
  });
}

StatusOr<ConvAlgoUsed> cudnn_conv_backward_filter(CudnnHandle& h, const CudnnConv& p, float alpha, const void* x,
                                                  const void* dy, float beta, void* dw) {
  ConvDescs d;
  ASSAY_RETURN_IF_ERROR(make_conv_descs(p, d));
  if (x == nullptr || dy == nullptr || dw == nullptr)
    return invalid_argument("cuDNN convolution backward-filter: null x, dy or dw");
  return select_and_run<BwdFilterDir>(h, p, d, [&](cudnnConvolutionBwdFilterAlgo_t a, void* ws, size_t bytes) {
    return cudnnConvolutionBackwardFilter(h.get(), &alpha, d.x.get(), x, d.y.get(), dy, d.conv.get(), a, ws, bytes,
                                          &beta, d.w.get(), dw);
  });
}

namespace {

template <typename Dir>
StatusOr<std::vector<ConvAlgoListed>> list_algorithms(CudnnHandle& h, const CudnnConv& p, int want) {
  ConvDescs d;
  ASSAY_RETURN_IF_ERROR(make_conv_descs(p, d));
  if (want <= 0) CUDNN_CHECK(Dir::max_count(h.get(), &want));
  ASSAY_ASSIGN_OR_RETURN(const std::vector<typename Dir::Perf> perf, heuristics<Dir>(h, p, d, std::max(want, 1)));
  std::vector<ConvAlgoListed> out;
  for (const typename Dir::Perf& pr : perf)
    out.push_back({static_cast<int>(pr.algo), Dir::name(pr.algo), static_cast<int>(pr.mathType),
                   pr.status == CUDNN_STATUS_SUCCESS, pr.determinism == CUDNN_DETERMINISTIC});
  return out;
}

}  // namespace

StatusOr<std::vector<ConvAlgoListed>> cudnn_conv_algorithms(CudnnHandle& h, const CudnnConv& p, ConvDirection dir,
                                                            int want) {
  switch (dir) {
    case ConvDirection::kForward:
      return list_algorithms<FwdDir>(h, p, want);
    case ConvDirection::kBackwardData:
      return list_algorithms<BwdDataDir>(h, p, want);
    case ConvDirection::kBackwardFilter:
      return list_algorithms<BwdFilterDir>(h, p, want);
  }
  return invalid_argument("cuDNN convolution: unknown direction");
}

// ---- fused attention (SDPA) ------------------------------------------------------------------------

namespace {

/// A backend descriptor (cudnn_graph.h), destroyed with its owner.
class BackendDesc {
 public:
  BackendDesc() = default;
  ~BackendDesc() {
    if (d_ != nullptr) (void)cudnnBackendDestroyDescriptor(d_);
  }
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  Status create(cudnnBackendDescriptorType_t t, const std::string& what) {
    return cudnn_status(cudnnBackendCreateDescriptor(t, &d_), ("cudnnBackendCreateDescriptor(" + what + ")").c_str(),
                        __FILE__, __LINE__);
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

/// cudnn_status of a backend call at step `what` (so an unsupported step is named).
#define SDPA_CHECK(call, what)                                                                                       \
  do {                                                                                                               \
    const std::string sdpa_what_ = std::string(#call).substr(0, std::string(#call).find('(')) + " (" + (what) + ")"; \
    ::assay::Status sdpa_s_ = ::assay::vendor::cudnn_status((call), sdpa_what_.c_str(), __FILE__, __LINE__);         \
    if (!sdpa_s_.ok()) return sdpa_s_;                                                                               \
  } while (false)

Status set_attr(BackendDesc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                const void* value, const std::string& what) {
  SDPA_CHECK(cudnnBackendSetAttribute(d.get(), name, type, count, value), what);
  return ok_status();
}

Status set_desc(BackendDesc& d, cudnnBackendAttributeName_t name, const BackendDesc& v, const std::string& what) {
  cudnnBackendDescriptor_t x = v.get();
  return set_attr(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
}

Status finalize(BackendDesc& d, const std::string& what) {
  SDPA_CHECK(cudnnBackendFinalize(d.get()), what);
  return ok_status();
}

/// The descriptors of one SDPA graph; each lives as long as the graph that refers to it.
struct SdpaGraph {
  std::vector<std::unique_ptr<BackendDesc>> keep;  // tensors, op descriptors, ops
  std::vector<cudnnBackendDescriptor_t> ops;       // the operation nodes, in graph order
  int64_t next_virtual_uid = 100;

  StatusOr<BackendDesc*> make(cudnnBackendDescriptorType_t t, const std::string& what) {
    keep.push_back(std::make_unique<BackendDesc>());
    ASSAY_RETURN_IF_ERROR(keep.back()->create(t, what));
    return keep.back().get();
  }

  /// A 4-D tensor: dims, strides (elements), uid, data type; virtual tensors are intermediates
  /// (no memory), by-value ones are host scalars passed in the variant pack.
  StatusOr<BackendDesc*> tensor(const std::string& name, cudnnDataType_t t, const int64_t dims[4],
                                const int64_t strides[4], int64_t uid, bool is_virtual, bool by_value = false) {
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * d, make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name));
    const std::string w = "tensor " + name;
    const int64_t align = 16;
    ASSAY_RETURN_IF_ERROR(set_attr(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t, w + " data type"));
    ASSAY_RETURN_IF_ERROR(set_attr(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, w + " dimensions"));
    ASSAY_RETURN_IF_ERROR(set_attr(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, w + " strides"));
    ASSAY_RETURN_IF_ERROR(set_attr(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, w + " uid"));
    ASSAY_RETURN_IF_ERROR(
        set_attr(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, w + " byte alignment"));
    if (is_virtual) {
      const bool yes = true;
      ASSAY_RETURN_IF_ERROR(set_attr(*d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, w + " virtual"));
    }
    if (by_value) {
      const bool yes = true;
      ASSAY_RETURN_IF_ERROR(set_attr(*d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, w + " by value"));
    }
    ASSAY_RETURN_IF_ERROR(finalize(*d, w));
    return d;
  }

  StatusOr<BackendDesc*> virt(const std::string& name, cudnnDataType_t t, const int64_t dims[4],
                              const int64_t strides[4]) {
    return tensor(name, t, dims, strides, next_virtual_uid++, true);
  }

  Status add_op(BackendDesc* op, const std::string& what) {
    ASSAY_RETURN_IF_ERROR(finalize(*op, what));
    ops.push_back(op->get());
    return ok_status();
  }

  /// y = mode(x[, b[, t]]) computed in `prec`; axis for GEN_INDEX.
  Status pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t prec, const BackendDesc* x,
                   const BackendDesc* b, const BackendDesc* t, const BackendDesc* y, int64_t axis = -1) {
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * pw, make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise " + name));
    const std::string w = "pointwise " + name;
    ASSAY_RETURN_IF_ERROR(set_attr(*pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, w + " mode"));
    ASSAY_RETURN_IF_ERROR(
        set_attr(*pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, w + " math precision"));
    if (axis >= 0)
      ASSAY_RETURN_IF_ERROR(set_attr(*pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, w + " axis"));
    ASSAY_RETURN_IF_ERROR(finalize(*pw, w));
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * op,
                           make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "operation pointwise " + name));
    const std::string wo = "operation pointwise " + name;
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw, wo + " descriptor"));
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x, wo + " x"));
    if (b != nullptr) ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b, wo + " b"));
    if (t != nullptr) ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t, wo + " t"));
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y, wo + " y"));
    return add_op(op, wo);
  }

  /// c = a b (batched over the two leading dimensions), fp32 compute.
  Status matmul(const std::string& name, const BackendDesc* a, const BackendDesc* b, const BackendDesc* c) {
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * mm, make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul " + name));
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    ASSAY_RETURN_IF_ERROR(
        set_attr(*mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul " + name + " compute type"));
    ASSAY_RETURN_IF_ERROR(finalize(*mm, "matmul " + name));
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * op,
                           make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "operation matmul " + name));
    const std::string wo = "operation matmul " + name;
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a, wo + " a"));
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b, wo + " b"));
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c, wo + " c"));
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_MATMUL_DESC, *mm, wo + " descriptor"));
    return add_op(op, wo);
  }

  /// y = reduce(x) over the dimensions where y has extent 1, fp32 compute.
  Status reduction(const std::string& name, cudnnReduceTensorOp_t red, const BackendDesc* x, const BackendDesc* y) {
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * rd, make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction " + name));
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    ASSAY_RETURN_IF_ERROR(set_attr(*rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red,
                                   "reduction " + name + " operator"));
    ASSAY_RETURN_IF_ERROR(
        set_attr(*rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "reduction " + name + " compute"));
    ASSAY_RETURN_IF_ERROR(finalize(*rd, "reduction " + name));
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * op,
                           make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "operation reduction " + name));
    const std::string wo = "operation reduction " + name;
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x, wo + " x"));
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y, wo + " y"));
    ASSAY_RETURN_IF_ERROR(set_desc(*op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, *rd, wo + " descriptor"));
    return add_op(op, wo);
  }
};

enum SdpaUid : int64_t { kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidStats = 5, kUidScale = 6, kUidNegInf = 7 };

void packed_bhsd(int64_t H, int64_t S, int64_t D, int64_t out[4]) {
  out[0] = H * S * D, out[1] = S * D, out[2] = D, out[3] = 1;
}

void strides_or_packed(const int64_t in[4], int64_t H, int64_t S, int64_t D, int64_t out[4]) {
  if (in[0] == 0 && in[1] == 0 && in[2] == 0 && in[3] == 0) {
    packed_bhsd(H, S, D, out);
  } else {
    for (int i = 0; i < 4; ++i) out[i] = in[i];
  }
}

/// The heuristics' engine configs for the finalized graph (mode A, then fallback where A gives none).
Status heuristic_configs(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, const char* mode_name,
                         std::vector<std::unique_ptr<BackendDesc>>& cfgs) {
  BackendDesc heur;
  const std::string w = std::string("engine heuristics ") + mode_name;
  ASSAY_RETURN_IF_ERROR(heur.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, w));
  ASSAY_RETURN_IF_ERROR(set_attr(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
                                 w + " operation graph"));
  ASSAY_RETURN_IF_ERROR(set_attr(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, w + " mode"));
  ASSAY_RETURN_IF_ERROR(finalize(heur, w));
  int64_t count = 0;
  SDPA_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                      &count, nullptr),
             w + " result count");
  if (count <= 0) return ok_status();
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.push_back(std::make_unique<BackendDesc>());
    ASSAY_RETURN_IF_ERROR(cfgs.back()->create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, w + " engine config"));
    raw.push_back(cfgs.back()->get());
  }
  int64_t got = 0;
  SDPA_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                      &got, raw.data()),
             w + " results");
  cfgs.resize(static_cast<size_t>(std::max<int64_t>(0, std::min(got, count))));
  return ok_status();
}

/// CUDNN_ATTR_ENGINE_GLOBAL_INDEX of a config's engine, -1 where cuDNN does not say.
int64_t engine_index(cudnnBackendDescriptor_t cfg) {
  BackendDesc eng;
  if (!eng.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine").ok()) return -1;
  cudnnBackendDescriptor_t e = eng.get();
  int64_t n = 0, idx = -1;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  return idx;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

StatusOr<SdpaEngineUsed> cudnn_sdpa_forward(CudnnHandle& h, const CudnnSdpa& p, const void* q, const void* k,
                                            const void* v, void* o, float* stats) {
  if (p.dtype != DType::kF16 && p.dtype != DType::kBF16)
    return unavailable(fmt::format("cuDNN SDPA: dtype {} is not supported (fp16, bf16)", dtype_name(p.dtype)));
  if (p.batch < 1 || p.heads < 1 || p.sq < 1 || p.sk < 1 || p.d < 1)
    return invalid_argument(
        fmt::format("cuDNN SDPA: sizes B={} H={} Sq={} Sk={} D={} must be >= 1", p.batch, p.heads, p.sq, p.sk, p.d));
  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr || stats == nullptr)
    return invalid_argument("cuDNN SDPA: null q, k, v, o or stats");
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(o) || !aligned16(stats))
    return invalid_argument("cuDNN SDPA: q, k, v, o and stats must be 16-byte aligned");
  ASSAY_ASSIGN_OR_RETURN(const cudnnDataType_t io, data_type(p.dtype));
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, boolean = CUDNN_DATA_BOOLEAN;
  const int64_t B = p.batch, H = p.heads, Sq = p.sq, Sk = p.sk, D = p.d;

  SdpaGraph g;
  // Inputs and outputs. K enters the first matmul transposed: dims [B, H, D, Sk], its strides
  // swapped in the last two dimensions (no copy).
  int64_t qs[4], ks[4], vs[4], os[4];
  strides_or_packed(p.q_stride, H, Sq, D, qs);
  strides_or_packed(p.k_stride, H, Sk, D, ks);
  strides_or_packed(p.v_stride, H, Sk, D, vs);
  strides_or_packed(p.o_stride, H, Sq, D, os);
  for (const int64_t* s : {qs, ks, vs, os})
    if (s[3] != 1) return unavailable("cuDNN SDPA: the head dimension D must have stride 1");
  const int64_t qd[4] = {B, H, Sq, D}, kd[4] = {B, H, Sk, D};
  const int64_t ktd[4] = {B, H, D, Sk}, kts[4] = {ks[0], ks[1], ks[3], ks[2]};
  const int64_t sd[4] = {B, H, Sq, Sk}, ss[4] = {H * Sq * Sk, Sq * Sk, Sk, 1};
  const int64_t rd[4] = {B, H, Sq, 1}, rs[4] = {H * Sq, Sq, 1, 1};
  const int64_t one[4] = {1, 1, 1, 1};
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * tq, g.tensor("Q", io, qd, qs, kUidQ, false));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * tkt, g.tensor("K^T", io, ktd, kts, kUidK, false));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * tv, g.tensor("V", io, kd, vs, kUidV, false));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * to, g.tensor("O", io, qd, os, kUidO, false));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * tstats, g.tensor("Stats", f32, rd, rs, kUidStats, false));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * tscale, g.tensor("attn_scale", f32, one, one, kUidScale, false, true));

  // S = Q K^T; S *= scale.
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * s0, g.virt("S", f32, sd, ss));
  ASSAY_RETURN_IF_ERROR(g.matmul("bmm1 Q*K^T", tq, tkt, s0));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * s1, g.virt("S*scale", f32, sd, ss));
  ASSAY_RETURN_IF_ERROR(g.pointwise("attn_scale MUL", CUDNN_POINTWISE_MUL, f32, s0, tscale, nullptr, s1));
  BackendDesc* s = s1;
  float neg = std::numeric_limits<float>::lowest();  // cudnn-frontend's causal fill value
  if (p.causal) {
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * tneg, g.tensor("causal fill", f32, one, one, kUidNegInf, false, true));
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * row, g.virt("row index", i32, sd, ss));
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * col, g.virt("col index", i32, sd, ss));
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * keep, g.virt("row >= col", boolean, sd, ss));
    ASSAY_ASSIGN_OR_RETURN(BackendDesc * s2, g.virt("S masked", f32, sd, ss));
    ASSAY_RETURN_IF_ERROR(
        g.pointwise("gen_row_index GEN_INDEX axis 2", CUDNN_POINTWISE_GEN_INDEX, i32, s, nullptr, nullptr, row, 2));
    ASSAY_RETURN_IF_ERROR(
        g.pointwise("gen_col_index GEN_INDEX axis 3", CUDNN_POINTWISE_GEN_INDEX, i32, s, nullptr, nullptr, col, 3));
    ASSAY_RETURN_IF_ERROR(
        g.pointwise("row_greater_than_col CMP_GE", CUDNN_POINTWISE_CMP_GE, boolean, row, col, nullptr, keep));
    ASSAY_RETURN_IF_ERROR(g.pointwise("causal BINARY_SELECT", CUDNN_POINTWISE_BINARY_SELECT, f32, s, tneg, keep, s2));
    s = s2;
  }
  // Softmax with stats.
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * mx, g.virt("row max", f32, rd, rs));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * sub, g.virt("S - max", f32, sd, ss));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * ex, g.virt("exp", f32, sd, ss));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * sum, g.virt("row sum", f32, rd, rs));
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * lg, g.virt("log sum", f32, rd, rs));
  // P enters the second matmul in the storage type (cudnn-frontend, CompositeSDPANode::expand_node:
  // "Requirement by cudnn backend to take in bmm2 aType as i/o type"); the DIV still computes in fp32.
  ASSAY_ASSIGN_OR_RETURN(BackendDesc * pr, g.virt("P", io, sd, ss));
  ASSAY_RETURN_IF_ERROR(g.reduction("softmax max", CUDNN_REDUCE_TENSOR_MAX, s, mx));
  ASSAY_RETURN_IF_ERROR(g.pointwise("softmax SUB", CUDNN_POINTWISE_SUB, f32, s, mx, nullptr, sub));
  ASSAY_RETURN_IF_ERROR(g.pointwise("softmax EXP", CUDNN_POINTWISE_EXP, f32, sub, nullptr, nullptr, ex));
  ASSAY_RETURN_IF_ERROR(g.reduction("softmax sum", CUDNN_REDUCE_TENSOR_ADD, ex, sum));
  ASSAY_RETURN_IF_ERROR(g.pointwise("softmax stats LOG", CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, lg));
  ASSAY_RETURN_IF_ERROR(g.pointwise("softmax stats ADD", CUDNN_POINTWISE_ADD, f32, mx, lg, nullptr, tstats));
  ASSAY_RETURN_IF_ERROR(g.pointwise("softmax DIV", CUDNN_POINTWISE_DIV, f32, ex, sum, nullptr, pr));
  // O = P V.
  ASSAY_RETURN_IF_ERROR(g.matmul("bmm2 P*V", pr, tv, to));

  // Operation graph.
  BackendDesc graph;
  ASSAY_RETURN_IF_ERROR(graph.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph"));
  cudnnHandle_t hh = h.get();
  ASSAY_RETURN_IF_ERROR(
      set_attr(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &hh, "operation graph handle"));
  ASSAY_RETURN_IF_ERROR(set_attr(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 static_cast<int64_t>(g.ops.size()), g.ops.data(), "operation graph ops"));
  ASSAY_RETURN_IF_ERROR(finalize(graph, "operation graph (SDPA forward, " + std::to_string(g.ops.size()) + " ops)"));

  // Engine configs from the heuristics.
  std::vector<std::unique_ptr<BackendDesc>> cfgs;
  ASSAY_RETURN_IF_ERROR(heuristic_configs(graph.get(), CUDNN_HEUR_MODE_A, "CUDNN_HEUR_MODE_A", cfgs));
  const char* heur_used = "CUDNN_HEUR_MODE_A";
  if (cfgs.empty()) {
    ASSAY_RETURN_IF_ERROR(heuristic_configs(graph.get(), CUDNN_HEUR_MODE_FALLBACK, "CUDNN_HEUR_MODE_FALLBACK", cfgs));
    heur_used = "CUDNN_HEUR_MODE_A and CUDNN_HEUR_MODE_FALLBACK";
  }
  if (cfgs.empty())
    return unavailable(
        fmt::format("cuDNN SDPA: engine heuristics ({}) returned no engine config for the graph", heur_used));

  // The first config whose execution plan finalizes.
  SdpaEngineUsed used;
  std::string refused;
  for (size_t i = 0; i < cfgs.size(); ++i) {
    BackendDesc plan;
    ASSAY_RETURN_IF_ERROR(plan.create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan"));
    ASSAY_RETURN_IF_ERROR(set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &hh, "plan handle"));
    cudnnBackendDescriptor_t cfg = cfgs[i]->get();
    ASSAY_RETURN_IF_ERROR(set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                   &cfg, "plan engine config"));
    const Status fin = finalize(plan, fmt::format("execution plan, engine config {} of {}", i + 1, cfgs.size()));
    if (!fin.ok()) {
      if (fin.code() != StatusCode::kUnavailable) return fin;
      refused += (refused.empty() ? "" : "; ") + fin.message();
      ++used.passed_over;
      continue;
    }
    int64_t ws = 0, n = 0;
    SDPA_CHECK(
        cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws),
        "plan workspace size");
    ASSAY_ASSIGN_OR_RETURN(void* wsp, h.workspace(static_cast<size_t>(std::max<int64_t>(ws, 0))));
    float scale = p.scale;
    std::vector<int64_t> uids = {kUidQ, kUidK, kUidV, kUidO, kUidStats, kUidScale};
    std::vector<void*> ptrs = {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o, stats, &scale};
    if (p.causal) {
      uids.push_back(kUidNegInf);
      ptrs.push_back(&neg);
    }
    BackendDesc pack;
    ASSAY_RETURN_IF_ERROR(pack.create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack"));
    ASSAY_RETURN_IF_ERROR(set_attr(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                   static_cast<int64_t>(uids.size()), uids.data(), "variant pack uids"));
    ASSAY_RETURN_IF_ERROR(set_attr(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                   static_cast<int64_t>(ptrs.size()), ptrs.data(), "variant pack pointers"));
    ASSAY_RETURN_IF_ERROR(
        set_attr(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp, "variant pack workspace"));
    ASSAY_RETURN_IF_ERROR(finalize(pack, "variant pack"));
    SDPA_CHECK(cudnnBackendExecute(hh, plan.get(), pack.get()), "execute SDPA plan");
    used.engine_index = engine_index(cfg);
    used.workspace = static_cast<size_t>(std::max<int64_t>(ws, 0));
    return used;
  }
  return unavailable(fmt::format("cuDNN SDPA: no execution plan of the {} engine configs from {} finalized: {}",
                                 cfgs.size(), heur_used, refused));
}

#undef SDPA_CHECK

}  // namespace assay::vendor
