// cuDNN as a vendor reference, through its legacy C API (cudnn_ops.h, cudnn_cnn.h): softmax and
// log-softmax over rows, pointwise activations, and 2-D convolution forward, backward-data and
// backward-filter. Every call is of the form out = alpha * op(inputs) + beta * out (cuDNN's
// scaling convention: with beta == 0 the output is not read), runs on the handle's stream and
// does not synchronise. Data types fp32, fp16 and bf16; cuDNN computes them in fp32 (for the
// convolutions the compute type is set to CUDNN_DATA_FLOAT), and alpha and beta are fp32.
//
// The GPU machines may carry an older cuDNN 9 than the build machine: CudnnHandle::create checks
// that the runtime's major version is the one compiled against, and a feature the runtime lacks
// comes back as an `unavailable` Status (CUDNN_STATUS_NOT_SUPPORTED*), never as a crash.
//
// cuDNN is optional (CMake: ASSAY_WITH_CUDNN). This header does not include <cudnn.h>, so that
// whoever includes it builds either way; built without cuDNN, cudnn_built() is false and every
// call returns `unavailable` ("built without cuDNN"), which callers report as a skip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "harness/dtype.h"
#include "harness/status.h"
#include "references/host/conv.h"

struct cudnnContext;  // cudnnHandle_t is cudnnContext* (cudnn_graph.h)

namespace assay::vendor {

/// True when assay was built with cuDNN; false: every call below returns `unavailable`.
bool cudnn_built();
/// `unavailable`: "built without cuDNN (...)", what every call returns when cudnn_built() is false.
Status cudnn_not_built();

// ---- errors, versions ------------------------------------------------------------------------------

/// Status for a cuDNN result: ok; `unavailable` for the CUDNN_STATUS_NOT_SUPPORTED category (a
/// feature this cuDNN, GPU or problem lacks); `internal` otherwise. The message names the call,
/// cudnnGetErrorString, cuDNN's own last error message where it has one, and file:line.
/// `e` is a cudnnStatus_t.
Status cudnn_status(int e, const char* call, const char* file, int line);

/// cudnnGetVersion() of the library loaded at run time (9.14.0 is 91400).
size_t cudnn_runtime_version();
/// CUDNN_VERSION of the headers this was compiled against (0 when built without cuDNN).
size_t cudnn_compiled_version();
/// Major version of a cudnnGetVersion() number: v / 10000 from cuDNN 9 on (9.14.0 = 91400),
/// v / 1000 before (8.9.7 = 8907).
int cudnn_version_major(size_t version);
/// "9.14.0" for 91400, "8.9.7" for 8907.
std::string cudnn_version_string(size_t version);
/// ok when both versions have the same major version; otherwise `unavailable` with a one-line
/// reason naming both. The defaults check the loaded library against the headers.
Status cudnn_check_major(size_t runtime = cudnn_runtime_version(), size_t compiled = cudnn_compiled_version());
/// "cuDNN 9.14.0 (compiled against 9.19.0, its CUDA runtime 12090)", one line.
std::string cudnn_describe();

// ---- handle -------------------------------------------------------------------------------------------

/// A cuDNN handle bound to one stream, with the device workspace the convolutions use (grown on
/// demand, kept until the handle goes). Not thread-safe: one handle per host thread.
class CudnnHandle {
 public:
  /// Checks the runtime's major version (cudnn_check_major), creates the handle on the current
  /// device and binds it to `stream` (nullptr: the legacy default stream).
  static StatusOr<std::unique_ptr<CudnnHandle>> create(cudaStream_t stream = nullptr);
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;

  cudnnContext* get() const { return handle_; }
  cudaStream_t stream() const { return stream_; }
  /// Rebinds the handle (and its workspace: the old stream is synchronised first).
  Status set_stream(cudaStream_t stream);

  /// Device workspace of at least `bytes` (nullptr for 0). Growing it synchronises the stream,
  /// frees the old buffer and allocates the new one; the pointer stays valid until the next
  /// call that grows it.
  StatusOr<void*> workspace(size_t bytes);
  size_t workspace_bytes() const { return workspace_bytes_; }
  /// Largest workspace a convolution algorithm may ask for; larger ones are passed over.
  size_t workspace_limit = size_t{1} << 30;

 private:
  CudnnHandle() = default;
  cudnnContext* handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// ---- softmax ----------------------------------------------------------------------------------------

/// cudnnSoftmaxAlgorithm_t: CUDNN_SOFTMAX_ACCURATE (max subtracted first) or CUDNN_SOFTMAX_LOG.
enum class SoftmaxAlgo : uint8_t { kAccurate, kLog };

/// Softmax over each row of a rows x n matrix, row r at data + r*ld elements; every tensor of one
/// call has this layout. Described to cuDNN as a packed NCHW [rows, n, 1, 1] tensor with
/// CUDNN_SOFTMAX_MODE_INSTANCE. Only the rows x n elements of each view are read or written.
///
/// Strided rows (ld > n) are not handed to cuDNN: measured on cuDNN 9.14, H200: strided rows get
/// their gaps written (an NCHW [rows, n, 1, 1] descriptor with strides [ld, 1, 1, 1] is accepted,
/// and cudnnSoftmaxForward / cudnnSoftmaxBackward then write the columns n..ld-1 of the output
/// too). So when ld != n the wrapper packs the inputs into the handle's workspace
/// (cudaMemcpy2DAsync on the handle's stream; also the old output when beta != 0, as cuDNN reads
/// it), runs cuDNN on the packed buffers and copies the packed output back into the output view
/// with cudaMemcpy2DAsync. This costs 2 (forward) or 3 (backward) rows x n buffers of workspace
/// (CudnnHandle::workspace, which may grow and so synchronise the stream) and the copies; the
/// results are those of cuDNN on the packed problem. ld == n runs cuDNN on the caller's buffers.
///
/// Precision (measured on cuDNN 9.14, H200): fp16 and bf16 CUDNN_SOFTMAX_ACCURATE forward exceed
/// the bound of fp32 computation with one rounding at the store (fp16, n = 1000: errors of 1.24
/// and 1.29 u_out relative, 1.6-1.7 half-ulps, where that bound allows 1.15 and 1.18 u_out): the
/// reduced-precision path rounds an intermediate to the storage type.
/// tests/references/cudnn_ref_gpu_test.cpp (cudnn_narrow_softmax_tol) derives the bound it is
/// checked under: the exponentials rounded to the storage type.
struct CudnnSoftmax {
  int64_t rows = 0, n = 0;
  int64_t ld = 0;  ///< row stride in elements, >= n; 0 means n
  DType dtype = DType::kF32;
  SoftmaxAlgo algo = SoftmaxAlgo::kAccurate;
};

/// y = alpha softmax(x) + beta y (kLog: log_softmax). x and y may be the same buffer (when ld != n
/// the packed input is copied before the output is written back, so in place stays in place).
Status cudnn_softmax_forward(CudnnHandle& h, const CudnnSoftmax& p, float alpha, const void* x, float beta, void* y);
/// dx = alpha J^T dy + beta dx from the forward's output y: softmax dx_i = y_i (dy_i - sum_j y_j dy_j);
/// kLog (y = log-softmax) dx_i = dy_i - exp(y_i) sum_j dy_j.
Status cudnn_softmax_backward(CudnnHandle& h, const CudnnSoftmax& p, float alpha, const void* y, const void* dy,
                              float beta, void* dx);

// ---- activations ------------------------------------------------------------------------------------

/// cudnnActivationMode_t modes that matter here. kSwish is SiLU (swish beta 1). kGelu has no
/// mode in cuDNN's legacy activation API (cuDNN 9: SIGMOID, RELU, TANH, CLIPPED_RELU, ELU,
/// IDENTITY, SWISH): it is always `unavailable`, kept so a caller can ask and skip with the reason.
enum class CudnnActivationMode : uint8_t { kRelu, kSigmoid, kTanh, kSwish, kGelu };

/// Pointwise activation on a rows x n matrix (row stride ld, as CudnnSoftmax). ReLU propagates
/// NaN (CUDNN_PROPAGATE_NAN), as PyTorch.
struct CudnnActivation {
  int64_t rows = 0, n = 0;
  int64_t ld = 0;  ///< row stride in elements, >= n; 0 means n
  DType dtype = DType::kF32;
  CudnnActivationMode mode = CudnnActivationMode::kRelu;
};

/// y = alpha act(x) + beta y.
Status cudnn_activation_forward(CudnnHandle& h, const CudnnActivation& p, float alpha, const void* x, float beta,
                                void* y);
/// dx = alpha act'(x) dy + beta dx; y = act(x) is the forward output (cuDNN reads y for ReLU,
/// sigmoid and tanh, x for swish: pass both).
Status cudnn_activation_backward(CudnnHandle& h, const CudnnActivation& p, float alpha, const void* y, const void* dy,
                                 const void* x, float beta, void* dx);

// ---- convolution ------------------------------------------------------------------------------------

/// cudnnMathType_t: kFma (CUDNN_FMA_MATH) keeps to CUDA-core FMA kernels, the fp32 reference
/// (no tf32, no tensor cores); kDefault (CUDNN_DEFAULT_MATH) lets cuDNN pick, which on Ampere and
/// later includes tf32 tensor cores for fp32 data and tensor cores for fp16/bf16.
enum class ConvMath : uint8_t { kFma, kDefault };

/// Which deterministic algorithms may run. kDotProduct: the GEMM-like ones (fwd IMPLICIT_GEMM,
/// IMPLICIT_PRECOMP_GEMM, GEMM, DIRECT; bwd-data ALGO_0/1; bwd-filter ALGO_0/1/3, of which only
/// ALGO_1 is deterministic), whose every output is a dot product summed in some order, so the
/// dot-product bound gamma_K(u) |w||x| holds ([H] (3.5)). kAnyDeterministic adds FFT and
/// Winograd, whose transforms err by other rules.
enum class ConvAlgoPolicy : uint8_t { kDotProduct, kAnyDeterministic };

/// One 2-D convolution (cross-correlation, CUDNN_CROSS_CORRELATION) in the geometry and packed
/// layouts of references/host/conv.h: NCHW with a KCRS filter or NHWC with a KRSC filter.
struct CudnnConv {
  ref::Conv2dGeometry geom;
  DType dtype = DType::kF32;  ///< x, w, y and their gradients
  ConvMath math = ConvMath::kFma;
  ConvAlgoPolicy algos = ConvAlgoPolicy::kDotProduct;
};

/// The algorithm that ran, for reports.
struct ConvAlgoUsed {
  int algo = -1;         ///< the cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t value
  std::string name;      ///< "IMPLICIT_PRECOMP_GEMM", "ALGO_1", ...
  size_t workspace = 0;  ///< bytes it was given
  int math_type = 0;     ///< the cudnnMathType_t it ran with
  int passed_over = 0;   ///< algorithms cuDNN listed before it that were not taken
};

/// Algorithms come from cudnnGetConvolution*Algorithm_v7 in cuDNN's order of preference; the
/// first one with status success, CUDNN_DETERMINISTIC, the requested math type (kFma: exactly
/// CUDNN_FMA_MATH), allowed by the policy and whose workspace is within h.workspace_limit runs;
/// one that then reports CUDNN_STATUS_NOT_SUPPORTED* is passed over too. None left: `unavailable`
/// naming what was passed over and why. Under kFma and kDotProduct the backward directions have
/// one candidate, ALGO_1 (the other dot-product algorithms sum with atomics), which runs without
/// the query: the list's first qualifying entry could only be it.

/// y = alpha conv(x, w) + beta y.
StatusOr<ConvAlgoUsed> cudnn_conv_forward(CudnnHandle& h, const CudnnConv& p, float alpha, const void* x, const void* w,
                                          float beta, void* y);
/// dx = alpha conv^T(dy, w) + beta dx (the gradient of the forward in x).
StatusOr<ConvAlgoUsed> cudnn_conv_backward_data(CudnnHandle& h, const CudnnConv& p, float alpha, const void* w,
                                                const void* dy, float beta, void* dx);
/// dw = alpha dconv/dw(x, dy) + beta dw (the gradient of the forward in w).
StatusOr<ConvAlgoUsed> cudnn_conv_backward_filter(CudnnHandle& h, const CudnnConv& p, float alpha, const void* x,
                                                  const void* dy, float beta, void* dw);

enum class ConvDirection { kForward, kBackwardData, kBackwardFilter };

/// One entry of cuDNN's heuristic list.
struct ConvAlgoListed {
  int algo = -1;
  std::string name;
  int math_type = 0;
  bool ok = false;             ///< listed with status success
  bool deterministic = false;  ///< CUDNN_DETERMINISTIC
};

/// cuDNN's first `want` algorithms for `dir` (0: as many as it has), in its order of preference,
/// as cudnnGetConvolution*Algorithm_v7 lists them under p.math: what the calls above choose from.
StatusOr<std::vector<ConvAlgoListed>> cudnn_conv_algorithms(CudnnHandle& h, const CudnnConv& p, ConvDirection dir,
                                                            int want);

// ---- fused attention (SDPA) ------------------------------------------------------------------------

/// One scaled dot-product attention forward for cuDNN's fused flash-attention engines, built as a
/// graph with the backend C API (cudnn_graph.h: cudnnBackendCreateDescriptor / SetAttribute /
/// Finalize), the pattern of cudnn-frontend's SDPA forward node:
///   S = Q K^T (matmul, fp32 compute)  ->  S * scale (pointwise MUL, scale a by-value fp32 scalar)
///   [causal: row = GEN_INDEX(S, axis 2), col = GEN_INDEX(S, axis 3), keep = CMP_GE(row, col),
///    S = BINARY_SELECT(S, lowest float, keep)]
///   m = REDUCE_MAX over keys, e = EXP(S - m), z = REDUCE_ADD(e),
///   stats = m + LOG(z) (the LSE, fp32 [B, H, Sq, 1]), P = e / z, O = P V (matmul).
/// Every virtual tensor is fp32 except P, which the backend requires in the storage type (the
/// second matmul's A operand: cudnn-frontend's SDPA node does the same); cuDNN fuses the graph
/// into one flash-attention kernel (tensor cores, P rounded to the storage type before the second
/// matmul: see the GPU test's bound). Preconditions (cudnn-frontend's support surface): D a
/// multiple of 8 and at most 256, sm_80 or newer, stats packed [B, H, Sq, 1].
/// Q, O: [B, H, Sq, D]; K, V: [B, H, Sk, D], each with explicit element strides (innermost 1);
/// causal is top-left aligned (key j visible to query i iff j <= i), as kernels/attention.
/// Engines come from CUDNN_HEUR_MODE_A (then CUDNN_HEUR_MODE_FALLBACK); the first whose execution
/// plan finalizes runs. Where this cuDNN or GPU has no engine for the graph (heuristics return
/// none, or every plan / the graph finalize reports CUDNN_STATUS_NOT_SUPPORTED*) the Status is
/// `unavailable` and names the step. Runs on the handle's stream with the handle's workspace
/// (which may grow and so synchronise the stream); does not synchronise otherwise.
struct CudnnSdpa {
  int64_t batch = 1, heads = 1, sq = 1, sk = 1, d = 64;
  DType dtype = DType::kF16;  ///< Q, K, V, O: kF16 or kBF16
  float scale = 0.125f;       ///< multiplies q.k (1/sqrt(D) by convention)
  bool causal = false;
  /// Element strides of the [B, H, S, D] dimensions; all zero means packed ([H*S*D, S*D, D, 1]).
  int64_t q_stride[4] = {0, 0, 0, 0}, k_stride[4] = {0, 0, 0, 0}, v_stride[4] = {0, 0, 0, 0},
          o_stride[4] = {0, 0, 0, 0};
};

/// What ran, for reports.
struct SdpaEngineUsed {
  int64_t engine_index = -1;  ///< CUDNN_ATTR_ENGINE_GLOBAL_INDEX of the engine that ran
  int passed_over = 0;        ///< heuristic configs before it whose plan did not finalize
  size_t workspace = 0;       ///< bytes
};

/// O (p.dtype) and stats (fp32 [B*H*Sq], row (b*H + h)*Sq + i: max + log sum exp of the scaled,
/// masked scores). All device pointers 16-byte aligned.
StatusOr<SdpaEngineUsed> cudnn_sdpa_forward(CudnnHandle& h, const CudnnSdpa& p, const void* q, const void* k,
                                            const void* v, void* o, float* stats);

}  // namespace assay::vendor

/// Returns the Status of a failed cuDNN call from the enclosing function (cudnn_status).
#define CUDNN_CHECK(call)                                                                                   \
  do {                                                                                                      \
    ::assay::Status assay_cudnn_status_ = ::assay::vendor::cudnn_status((call), #call, __FILE__, __LINE__); \
    if (!assay_cudnn_status_.ok()) return assay_cudnn_status_;                                              \
  } while (false)
