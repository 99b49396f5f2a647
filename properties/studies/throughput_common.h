// Shared pieces of assay throughput (properties/studies/throughput.cpp, properties/studies/throughput_gemm.cpp): device
// buffers, the gated median timing, and the problem / measurement records the report is built from.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "harness/dtype.h"
#include "harness/gpu/cuda_check.h"
#include "harness/status.h"
#include "properties/studies/throughput.h"
#include "properties/studies/throughput_kernels.h"

namespace assay::tput_detail {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// The gate ahead of each timed launch: long enough for cuDNN's host-side algorithm query.
constexpr uint64_t kGateNs = 2'000'000;

inline int dt_code(DType t) {
  return t == DType::kF16 ? 1 : t == DType::kBF16 ? 2 : t == DType::kI8 ? 3 : t == DType::kE4M3 ? 4 : 0;
}
inline cudaDataType_t cuda_type(DType t) {
  return t == DType::kF16 ? CUDA_R_16F : t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// A device allocation freed on scope exit.
class DevBuf {
 public:
  DevBuf() = default;
  ~DevBuf() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  Status alloc(size_t bytes) {
    CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(bytes, 1)));
    return ok_status();
  }
  void* get() const { return p_; }
  float* f32() const { return static_cast<float*>(p_); }

 private:
  void* p_ = nullptr;
};

/// Allocates `elems` of `t` and fills them with scale * N(0, 1).
inline Status alloc_normal(DevBuf& b, DType t, int64_t elems, uint64_t seed, cudaStream_t s, float scale = 1.0f) {
  ASSAY_RETURN_IF_ERROR(b.alloc(static_cast<size_t>(elems) * dtype_size(t)));
  CUDA_CHECK(tput::fill_normal(dt_code(t), b.get(), elems, seed, scale, s));
  return ok_status();
}

struct Timing {
  double ms = kNaN;     ///< median
  double min_ms = kNaN;
  int host_bound = 0;   ///< reps whose start event had completed before the launch was enqueued
};

/// Warm-up launches, then `reps` launches each between its own event pair behind a gate; median.
inline StatusOr<Timing> time_median(cudaStream_t s, int warmup, int reps, const std::function<Status()>& launch) {
  cudaEvent_t a = nullptr, b = nullptr;
  CUDA_CHECK(cudaEventCreate(&a));
  std::unique_ptr<CUevent_st, decltype(&cudaEventDestroy)> ga(a, cudaEventDestroy);
  CUDA_CHECK(cudaEventCreate(&b));
  std::unique_ptr<CUevent_st, decltype(&cudaEventDestroy)> gb(b, cudaEventDestroy);
  for (int w = 0; w < warmup; ++w) {
    Status st = launch();
    if (!st.ok()) {
      cudaStreamSynchronize(s);
      return st;
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  Timing t;
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CUDA_CHECK(tput::gate(kGateNs, s));
    CUDA_CHECK(cudaEventRecord(a, s));
    Status st = launch();
    if (cudaEventQuery(a) == cudaSuccess) ++t.host_bound;
    CUDA_CHECK(cudaEventRecord(b, s));
    if (!st.ok()) {
      cudaStreamSynchronize(s);
      return st;
    }
    CUDA_CHECK(cudaEventSynchronize(b));
    float e = 0;
    CUDA_CHECK(cudaEventElapsedTime(&e, a, b));
    ms.push_back(e);
  }
  CUDA_CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  t.ms = n % 2 == 1 ? ms[n / 2] : 0.5 * (static_cast<double>(ms[n / 2 - 1]) + ms[n / 2]);
  t.min_ms = ms.front();
  return t;
}

/// One timed thing: a kernel variant or a vendor configuration on one problem.
struct Measured {
  std::string name;  ///< "direct", "cuDNN FMA", "cuBLAS composite", ...
  std::string detail;  ///< the cuDNN algorithm, ...
  Timing t;
  std::string error;  ///< why it did not run (empty when it did)
};

/// A problem: its kernels and its vendor configurations, crossed into table rows.
struct Problem {
  std::string op, pass, shape, dtype;
  double macs = 0;
  std::vector<Measured> kernels, vendors;
};

inline Measured measure(std::string name, cudaStream_t s, const ThroughputOptions& o, const std::function<Status()>& launch,
                 std::string detail = {}) {
  Measured m;
  m.name = std::move(name);
  m.detail = std::move(detail);
  auto t = time_median(s, o.warmup, o.reps, launch);
  if (t.ok())
    m.t = *t;
  else
    m.error = t.status().message();
  return m;
}

inline Status cuda_launch(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ok_status();
  return internal_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

struct CublasHandle {
  cublasHandle_t h = nullptr;
  ~CublasHandle() {
    if (h != nullptr) cublasDestroy(h);
  }
};

/// The GEMM family's problems (properties/studies/throughput_gemm.cpp).
Status gemm_problems(const ThroughputOptions& o, cudaStream_t s, std::vector<Problem>& out);

}  // namespace assay::tput_detail
