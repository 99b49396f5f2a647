#include "references/library/cublaslt_gemm.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace assay::vendor {
namespace {

bool is_fp8(DType t) {
  return t == DType::kE4M3 || t == DType::kE5M2;
}

/// A cuBLASLt status as a Status naming the call: NOT_SUPPORTED is "no algorithm" (unavailable).
Status lt_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return ok_status();
  const std::string m = fmt::format("cuBLASLt {}: {}", what, cublasLtGetStatusName(s));
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return unavailable(m);
  if (s == CUBLAS_STATUS_INVALID_VALUE) return invalid_argument(m);
  return internal_error(m);
}

#define LT_CHECK(call, what)                                \
  do {                                                      \
    ::assay::Status lt_status_ = lt_status((call), (what)); \
    if (!lt_status_.ok()) return lt_status_;                \
  } while (false)

struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d != nullptr) cublasLtMatmulDescDestroy(d);
  }
  template <typename T>
  Status set(cublasLtMatmulDescAttributes_t attr, const T& v, const char* what) {
    LT_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v), what);
    return ok_status();
  }
};

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
  }
  /// Column-major rows x cols with leading dimension ld, and the strided batch.
  Status create(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    LT_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
             "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      const int32_t count = static_cast<int32_t>(batch);
      LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
               "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
      LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
               "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET");
    }
    return ok_status();
  }
};

struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p != nullptr) cublasLtMatmulPreferenceDestroy(p);
  }
  template <typename T>
  Status set(cublasLtMatmulPreferenceAttributes_t attr, const T& v, const char* what) {
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v), what);
    return ok_status();
  }
};

struct Math {
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

StatusOr<Math> math_for(const LtGemm& g) {
  const DType a = g.a, b = g.b, o = g.out;
  const auto bad = [&] {
    return invalid_argument(fmt::format("cuBLASLt reference: no compute type for {} x {} -> {}", dtype_name(a),
                                        dtype_name(b), dtype_name(o)));
  };
  if (a == DType::kI8 || b == DType::kI8) {
    if (a != b || o != DType::kI32) return bad();
    return Math{CUBLAS_COMPUTE_32I, CUDA_R_32I};
  }
  if (is_fp8(a) || is_fp8(b)) {
    if (!is_fp8(a) || !is_fp8(b) || !(o == DType::kF32 || o == DType::kBF16 || o == DType::kF16)) return bad();
    return Math{CUBLAS_COMPUTE_32F, CUDA_R_32F};
  }
  if (a != b) return bad();
  switch (a) {
    case DType::kF32:
      if (o != DType::kF32) return bad();
      return Math{CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F};
    case DType::kTF32:
      if (o != DType::kF32 && o != DType::kTF32) return bad();
      return Math{CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F};
    case DType::kF16:
    case DType::kBF16:
      if (o != DType::kF32 && o != a) return bad();
      return Math{CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::kF64:
      if (o != DType::kF64) return bad();
      return Math{CUBLAS_COMPUTE_64F_PEDANTIC, CUDA_R_64F};
    default:
      return bad();
  }
}

}  // namespace

cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::kF64:
      return CUDA_R_64F;
    case DType::kF32:
    case DType::kTF32:
      return CUDA_R_32F;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kE4M3:
      return CUDA_R_8F_E4M3;
    case DType::kE5M2:
      return CUDA_R_8F_E5M2;
    case DType::kI8:
      return CUDA_R_8I;
    case DType::kI32:
      return CUDA_R_32I;
  }
  return CUDA_R_32F;
}

uint32_t lt_alignment(const void* p, int64_t batch, int64_t stride_elems, size_t elem_size) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p);
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elems) * elem_size;
  uint32_t a = 256;
  while (a > 1 && (bits & (a - 1)) != 0) a >>= 1;
  return a;
}

StatusOr<std::unique_ptr<CublasLt>> CublasLt::create(size_t workspace_bytes) {
  std::unique_ptr<CublasLt> lt(new CublasLt());
  LT_CHECK(cublasLtCreate(&lt->handle_), "cublasLtCreate");
  if (workspace_bytes > 0) {
    const cudaError_t e = cudaMalloc(&lt->workspace_, workspace_bytes);
    if (e != cudaSuccess)
      return internal_error(
          fmt::format("cuBLASLt workspace: cudaMalloc({}) failed: {}", workspace_bytes, cudaGetErrorName(e)));
    lt->workspace_bytes_ = workspace_bytes;
  }
  return lt;
}

CublasLt::~CublasLt() {
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

Status CublasLt::matmul(const LtGemm& x, double alpha, const void* a, const void* b, double beta, void* c,
                        cudaStream_t stream) {
  const RowMajorGemm& g = x.g;
  if (g.m < 0 || g.n < 0 || g.k < 0 || x.batch < 1)
    return invalid_argument("cuBLASLt reference: negative extent or batch < 1");
  if (g.m == 0 || g.n == 0) return ok_status();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (g.m > kMax || g.n > kMax || g.k > kMax || x.batch > kMax)
    return invalid_argument("cuBLASLt reference: a dimension exceeds 2^31-1");
  // Stored (row-major) shapes: A is m x k or, transposed, k x m; B is k x n or n x k.
  const int64_t a_cols = g.trans_a ? g.m : g.k, b_cols = g.trans_b ? g.k : g.n;
  if (g.lda < std::max<int64_t>(a_cols, 1) || g.ldb < std::max<int64_t>(b_cols, 1) || g.ldc < std::max<int64_t>(g.n, 1))
    return invalid_argument(
        fmt::format("cuBLASLt reference: leading dimension too small (lda {} ldb {} ldc {})", g.lda, g.ldb, g.ldc));
  if ((x.scale_a != nullptr || x.scale_b != nullptr || x.fast_accum) && !(is_fp8(x.a) && is_fp8(x.b)))
    return invalid_argument("cuBLASLt reference: scales and fast accumulation are for fp8 inputs only");
  ASSAY_ASSIGN_OR_RETURN(const Math math, math_for(x));

  MatmulDesc desc;
  LT_CHECK(cublasLtMatmulDescCreate(&desc.d, math.compute, math.scale), "cublasLtMatmulDescCreate");
  // The descriptor's A is our B, its B our A (see the header).
  const int32_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_TRANSA, op_a, "CUBLASLT_MATMUL_DESC_TRANSA"));
  ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_TRANSB, op_b, "CUBLASLT_MATMUL_DESC_TRANSB"));
  if (x.epilogue != LtEpilogue::kNone) {
    if (x.bias == nullptr) return invalid_argument("cuBLASLt reference: a bias epilogue needs a bias pointer");
    const uint32_t epi = x.epilogue == LtEpilogue::kReluBias   ? CUBLASLT_EPILOGUE_RELU_BIAS
                         : x.epilogue == LtEpilogue::kGeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                               : CUBLASLT_EPILOGUE_BIAS;
    ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epi, "CUBLASLT_MATMUL_DESC_EPILOGUE"));
    const void* bp = x.bias;
    ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bp, "CUBLASLT_MATMUL_DESC_BIAS_POINTER"));
    const int32_t bt = cuda_data_type(x.out);
    ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bt, "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE"));
  }
  if (is_fp8(x.a)) {
    const int8_t fast = x.fast_accum ? 1 : 0;
    ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast, "CUBLASLT_MATMUL_DESC_FAST_ACCUM"));
    if (x.scale_b != nullptr) {
      const void* p = x.scale_b;
      ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p, "CUBLASLT_MATMUL_DESC_A_SCALE_POINTER"));
    }
    if (x.scale_a != nullptr) {
      const void* p = x.scale_a;
      ASSAY_RETURN_IF_ERROR(desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p, "CUBLASLT_MATMUL_DESC_B_SCALE_POINTER"));
    }
  }

  // Column-major layouts of what is stored: our row-major R x C with ld is column-major C x R.
  Layout la, lb, lc;
  ASSAY_RETURN_IF_ERROR(
      la.create(cuda_data_type(x.b), g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, x.batch, x.stride_b));
  ASSAY_RETURN_IF_ERROR(
      lb.create(cuda_data_type(x.a), g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, x.batch, x.stride_a));
  ASSAY_RETURN_IF_ERROR(lc.create(cuda_data_type(x.out), g.n, g.m, g.ldc, x.batch, x.stride_c));

  Preference pref;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref.p), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = workspace_bytes_;
  ASSAY_RETURN_IF_ERROR(
      pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws, "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES"));
  // A reference accumulates in its compute type: where the output is narrower, split-K
  // partials must not be reduced in the output buffer or type (INPLACE, OUTPUT_TYPE).
  if (x.out == DType::kF16 || x.out == DType::kBF16) {
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    ASSAY_RETURN_IF_ERROR(pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, mask, "REDUCTION_SCHEME_MASK"));
  }
  // The default (256 bytes) would let the heuristic pick kernels that offset pointers break.
  const uint32_t al_a = lt_alignment(b, x.batch, x.stride_b, dtype_size(x.b));
  const uint32_t al_b = lt_alignment(a, x.batch, x.stride_a, dtype_size(x.a));
  const uint32_t al_c = lt_alignment(c, x.batch, x.stride_c, dtype_size(x.out));
  ASSAY_RETURN_IF_ERROR(pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a, "MIN_ALIGNMENT_A_BYTES"));
  ASSAY_RETURN_IF_ERROR(pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b, "MIN_ALIGNMENT_B_BYTES"));
  ASSAY_RETURN_IF_ERROR(pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c, "MIN_ALIGNMENT_C_BYTES"));
  ASSAY_RETURN_IF_ERROR(pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c, "MIN_ALIGNMENT_D_BYTES"));

  constexpr int kAlgos = 8;
  cublasLtMatmulHeuristicResult_t result[kAlgos];
  std::memset(result, 0, sizeof result);
  int found = 0;
  LT_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc.d, la.l, lb.l, lc.l, lc.l, pref.p, kAlgos, result, &found),
           "cublasLtMatmulAlgoGetHeuristic");
  // What the library was asked, for the message of a declined case (our A, B, C; row-major).
  const auto what = [&] {
    const auto scale_al = [](const float* p) {
      return p == nullptr ? std::string("-") : std::to_string(lt_alignment(p, 1, 0, sizeof(float)));
    };
    return fmt::format(
        "{} x {} -> {}, row-major m {} n {} k {} trans_a {} trans_b {} lda {} ldb {} ldc {} batch {}, byte "
        "alignments A {} B {} C {}, scale pointers {}/{}, fast_accum {}",
        dtype_name(x.a), dtype_name(x.b), dtype_name(x.out), g.m, g.n, g.k, g.trans_a ? 1 : 0, g.trans_b ? 1 : 0, g.lda,
        g.ldb, g.ldc, x.batch, al_b, al_a, al_c, scale_al(x.scale_a), scale_al(x.scale_b), x.fast_accum ? 1 : 0);
  };
  int usable = 0;
  for (int i = 0; i < found; ++i)
    usable += result[i].state == CUBLAS_STATUS_SUCCESS && result[i].workspaceSize <= workspace_bytes_ ? 1 : 0;
  if (usable == 0) return unavailable(fmt::format("cuBLASLt: no algorithm for {}", what()));

  float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  int32_t alpha_i = 0, beta_i = 0;
  double alpha_d = alpha, beta_d = beta;
  const void *pa = &alpha_f, *pb = &beta_f;
  if (math.scale == CUDA_R_32I) {
    if (alpha != std::nearbyint(alpha) || beta != std::nearbyint(beta) || std::fabs(alpha) > 2147483647.0 ||
        std::fabs(beta) > 2147483647.0)
      return invalid_argument("cuBLASLt reference: int8 GEMM needs integer alpha and beta");
    alpha_i = static_cast<int32_t>(alpha);
    beta_i = static_cast<int32_t>(beta);
    pa = &alpha_i;
    pb = &beta_i;
  } else if (math.scale == CUDA_R_64F) {
    pa = &alpha_d;
    pb = &beta_d;
  }
  // The heuristic's algorithms in its order: the first the library runs. cublasLtMatmul can
  // still decline one (CUBLAS_STATUS_NOT_SUPPORTED) for what the heuristic does not see (the
  // pointers themselves): then the next is tried, as NVIDIA's samples advise.
  cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
  int tried = 0;
  for (int i = 0; i < found; ++i) {
    if (result[i].state != CUBLAS_STATUS_SUCCESS || result[i].workspaceSize > workspace_bytes_) continue;
    ++tried;
    last = cublasLtMatmul(handle_, desc.d, pa, b, la.l, a, lb.l, pb, c, lc.l, c, lc.l, &result[i].algo, workspace_,
                          result[i].workspaceSize, stream);
    if (last != CUBLAS_STATUS_NOT_SUPPORTED) break;
  }
  if (last == CUBLAS_STATUS_NOT_SUPPORTED)
    return unavailable(
        fmt::format("cuBLASLt cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED for each of the {} "
                    "algorithm(s) the heuristic gave ({})",
                    tried, what()));
  LT_CHECK(last, "cublasLtMatmul");
  return ok_status();
}

}  // namespace assay::vendor
