// cuDNN vendor references (references/library/cudnn.h) against the host references on the same
// rounded inputs, under the bounds of harness/bounds.h or bounds derived here:
//   softmax / log-softmax forward   softmax_bounds / log_softmax_bounds (fp32, fp16, bf16); softmax
//                                   fp16/bf16 with the rounded exponentials of cuDNN's narrow path
//                                   (harness/bounds.h narrow_softmax_tol)
//   softmax / log-softmax backward  gamma_{n+3}(2^-24) mag + u_out |ref| (derivation below)
//   activations forward             a per-function budget in ulps (derivation below)
//   activations backward (fp32)     the same from the saved output
//   convolution fwd / bwd-data / bwd-filter with CUDNN_FMA_MATH: the dot-product ceiling
//                                   gamma_K(2^-24) |w||x|, K the reduction length
// Every output starts as NaN (cuDNN with beta = 0 must not read it, and an element it never
// writes stays NaN and fails); strided rows must leave the gaps between them untouched.
//
// Suites with "Gpu" in their name skip with the reason without a GPU, and where this cuDNN
// (the GPU machines carry an older 9.x than the build machine) lacks a feature: a feature
// missing for the first case of a test skips it, missing after a case ran fails it.
// The CudnnVersion and CudnnStatus suites need the library, not a GPU.
//
// Built without cuDNN (ASSAY_HAVE_CUDNN undefined), only the CudnnNotBuilt suite is compiled: it
// checks that every wrapper then answers `unavailable`, and skips the GPU suite with the reason.
#include "references/library/cudnn.h"

#ifdef ASSAY_HAVE_CUDNN
#include <cudnn.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "harness/bounds.h"
#include "harness/dtype.h"
#include "harness/gpu/lane.h"
#include "references/host/backward.h"
#include "references/host/conv.h"
#include "references/host/softmax.h"
#include "tests/test_values.h"

namespace assay {
namespace {

using namespace test_values;

using vendor::CudnnActivationMode;
using vendor::SoftmaxAlgo;


// ---- CPU: versions and status mapping ---------------------------------------------------------

TEST(CudnnVersion, DecodesVersionNumbers) {
  EXPECT_EQ(vendor::cudnn_version_string(91400), "9.14.0");
  EXPECT_EQ(vendor::cudnn_version_string(91901), "9.19.1");
  EXPECT_EQ(vendor::cudnn_version_string(8907), "8.9.7");
  EXPECT_EQ(vendor::cudnn_version_major(91400), 9);
  EXPECT_EQ(vendor::cudnn_version_major(8907), 8);
  EXPECT_EQ(vendor::cudnn_version_major(100200), 10);
}

TEST(CudnnVersion, MajorCheckNamesBothVersions) {
  EXPECT_TRUE(vendor::cudnn_check_major(91400, 91900).ok());  // the GPU machines' 9.14 against 9.19 headers
  const Status old = vendor::cudnn_check_major(8907, 91900);
  EXPECT_EQ(old.code(), StatusCode::kUnavailable);
  EXPECT_NE(old.message().find("8.9.7"), std::string::npos) << old.message();
  EXPECT_NE(old.message().find("9.19.0"), std::string::npos) << old.message();
  EXPECT_EQ(old.message().find('\n'), std::string::npos);
  EXPECT_EQ(vendor::cudnn_check_major(100000, 91900).code(), StatusCode::kUnavailable);
}

TEST(CudnnVersion, DescribeNamesTheLoadedAndTheCompiledLibrary) {
  const std::string d = vendor::cudnn_describe();
  EXPECT_NE(d.find("cuDNN " + vendor::cudnn_version_string(vendor::cudnn_runtime_version())), std::string::npos) << d;
  EXPECT_NE(d.find(vendor::cudnn_version_string(CUDNN_VERSION)), std::string::npos) << d;
  std::cout << "[ cudnn    ] " << d << "\n";
}

TEST(CudnnStatus, MapsNotSupportedToUnavailableAndTheRestToInternal) {
  EXPECT_TRUE(vendor::cudnn_status(CUDNN_STATUS_SUCCESS, "call()", "f.cpp", 1).ok());
  const Status ns = vendor::cudnn_status(CUDNN_STATUS_NOT_SUPPORTED, "cudnnThing(a, b)", "f.cpp", 7);
  EXPECT_EQ(ns.code(), StatusCode::kUnavailable);
  EXPECT_NE(ns.message().find("cudnnThing(a, b) failed"), std::string::npos) << ns.message();
  EXPECT_NE(ns.message().find("f.cpp:7"), std::string::npos) << ns.message();
  EXPECT_EQ(vendor::cudnn_status(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, "c", "f", 1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(vendor::cudnn_status(CUDNN_STATUS_BAD_PARAM, "c", "f", 1).code(), StatusCode::kInternal);
  EXPECT_EQ(vendor::cudnn_status(CUDNN_STATUS_EXECUTION_FAILED, "c", "f", 1).code(), StatusCode::kInternal);
}

// ---- GPU helpers ---------------------------------------------------------------------------------

/// Values rounded to `t` and their bytes: what the device reads and what the host references read.
struct Encoded {
  std::vector<uint8_t> bytes;
  std::vector<double> values;  ///< exactly the stored values
};

Encoded encode(DType t, const std::vector<double>& v) {
  Encoded e;
  const size_t sz = dtype_size(t);
  e.bytes.resize(v.size() * sz);
  e.values.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    store_as(t, v[i], e.bytes.data() + i * sz);
    e.values[i] = load_as_double(t, e.bytes.data() + i * sz);
  }
  return e;
}

std::vector<double> decode(DType t, const std::vector<uint8_t>& bytes) {
  const size_t sz = dtype_size(t);
  std::vector<double> v(bytes.size() / sz);
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_double(t, bytes.data() + i * sz);
  return v;
}

/// `count` NaNs of type t: the poison every output starts as.
Encoded poison(DType t, size_t count) {
  return encode(t, std::vector<double>(count, std::nan("")));
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<uint8_t>& host) : bytes_(host.size()) {
    ok_ = cudaMalloc(&p_, std::max<size_t>(bytes_, 1)) == cudaSuccess &&
          cudaMemcpy(p_, host.data(), bytes_, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  bool ok() const { return ok_; }
  void* get() const { return p_; }
  /// The contents after the stream's work: empty on a CUDA error.
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> h(bytes_);
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(h.data(), p_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess)
      h.clear();
    return h;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
  bool ok_ = false;
};

std::vector<double> normals(size_t count, uint64_t seed, double sigma = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0, sigma);
  std::vector<double> v(count);
  for (double& x : v) x = d(rng);
  return v;
}

std::vector<double> uniforms(size_t count, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(count);
  for (double& x : v) x = d(rng);
  return v;
}

/// Compares got with ref element by element under tol; at most 5 failures are reported.
/// Returns the largest |got - ref| / tol (the accuracy ratio; NaN counts as +Inf).
double expect_within(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& tol,
                     const std::string& what) {
  EXPECT_EQ(got.size(), ref.size()) << what;
  double worst = 0;
  int reported = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    const double err = std::fabs(got[i] - ref[i]);
    const double ratio = err == 0 ? 0 : err / tol[i];
    worst = std::max(worst, std::isnan(ratio) ? INFINITY : ratio);
    if (!(err <= tol[i]) && reported++ < 5) {
      ADD_FAILURE() << what << ", element " << i << ": got " << got[i] << ", ref " << ref[i] << ", |err| " << err
                    << " > tol " << tol[i] << " (" << err / ulp_of(ref[i], DType::kF32) << " fp32 ulps)";
    }
  }
  return worst;
}

/// Status of a reference call: a feature this cuDNN lacks skips the test at its first case
/// (nothing ran yet) and fails it later (it ran for other cases: not a missing feature).
#define ASSAY_CUDNN_RUN(status_expr, cases_done)                                                                  \
  do {                                                                                                            \
    const ::assay::Status assay_run_ = (status_expr);                                                             \
    if (assay_run_.code() == ::assay::StatusCode::kUnavailable && (cases_done) == 0)                              \
      GTEST_SKIP() << "cuDNN " << ::assay::vendor::cudnn_version_string(::assay::vendor::cudnn_runtime_version()) \
                   << " lacks this: " << assay_run_.message();                                                    \
    ASSERT_TRUE(assay_run_.ok()) << assay_run_.to_string();                                                       \
  } while (false)

/// Skips without a GPU or a usable cuDNN; otherwise holds a handle on the default stream.
class CudnnGpuTest {
 protected:
  /// unavailable: no GPU, or a cuDNN whose major version differs (skip); another error: a
  /// failure (a cuDNN that is there but cannot make a handle must not pass as skipped).
  Status open() {
    auto n = gpu::device_count();
    if (!n.ok()) return unavailable("GPU test skipped: " + n.status().message());
    auto h = vendor::CudnnHandle::create();
    if (!h.ok()) return h.status();
    handle_ = std::move(h).value();
    return ok_status();
  }
  std::unique_ptr<vendor::CudnnHandle> handle_;
};

#define ASSAY_OPEN_CUDNN()                                                              \
  do {                                                                                  \
    const ::assay::Status why = open();                                                 \
    if (why.code() == ::assay::StatusCode::kUnavailable) GTEST_SKIP() << why.message(); \
    ASSERT_TRUE(why.ok()) << "cuDNN handle: " << why.to_string();                       \
  } while (false)

std::string dtype_param_name(DType t) {
  return std::string(dtype_name(t));
}

// ---- softmax ---------------------------------------------------------------------------------------

struct RowsShape {
  int64_t rows, n;
};

/// Short and long rows, a single element, a length past a warp and a block.
const std::vector<RowsShape> kSoftmaxShapes = {{1, 1}, {7, 5}, {4, 33}, {3, 257}, {2, 1000}, {3, 2048}};

/// Logits: N(0, 2), and in the last row a spread over [-40, 8] so that some outputs are tiny.
std::vector<double> logits(const RowsShape& s, int64_t ld, uint64_t seed) {
  std::vector<double> x(static_cast<size_t>(s.rows * ld), 0.0);
  const auto a = normals(x.size(), seed, 2), b = uniforms(x.size(), seed + 1, -40, 8);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t i = 0; i < s.n; ++i) x[r * ld + i] = (r == s.rows - 1 && s.rows > 1 ? b : a)[r * ld + i];
  return x;
}

class CudnnSoftmaxGpu : public CudnnGpuTest, public ::testing::TestWithParam<DType> {};

/// Forward, both algorithms: cuDNN on the rounded logits against the fp64 host reference under
/// softmax_bounds / log_softmax_bounds with fp32 accumulation (softmax fp16/bf16: widened by
/// narrow_softmax_tol). cuDNN does not document which exp it uses, so the model allows
/// __expf, __logf and __fdividef (fast_math): the wider ceiling.
void softmax_forward_case(vendor::CudnnHandle& h, DType t, SoftmaxAlgo algo, const RowsShape& s, int64_t ld,
                          uint64_t seed, double* worst, Status* st) {
  const Encoded x = encode(t, logits(s, ld, seed));
  const Encoded y0 = poison(t, x.values.size());
  DeviceBuffer dx(x.bytes), dy(y0.bytes);
  if (!dx.ok() || !dy.ok()) {
    *st = internal_error("cudaMalloc/cudaMemcpy failed");
    return;
  }
  vendor::CudnnSoftmax p;
  p.rows = s.rows, p.n = s.n, p.ld = ld, p.dtype = t, p.algo = algo;
  *st = vendor::cudnn_softmax_forward(h, p, 1.0f, dx.get(), 0.0f, dy.get());
  if (!st->ok()) return;
  const std::vector<uint8_t> bytes = dy.download();
  ASSERT_EQ(bytes.size(), y0.bytes.size()) << "CUDA error after cudnnSoftmaxForward";
  const std::vector<double> all = decode(t, bytes);
  std::vector<double> ref(static_cast<size_t>(s.rows * s.n)), mag(ref.size()), got(ref.size()), tol(ref.size());
  std::vector<ref::SoftmaxRowStats<double>> stats(static_cast<size_t>(s.rows));
  if (algo == SoftmaxAlgo::kAccurate)
    ref::softmax_reference<double>(x.values.data(), s.rows, s.n, ld, ref.data(), mag.data(), stats.data());
  else
    ref::log_softmax_reference<double>(x.values.data(), s.rows, s.n, ld, ref.data(), mag.data(), stats.data());
  SoftmaxModel m;
  m.in = t, m.acc = DType::kF32, m.out = t, m.n = s.n, m.fast_math = true;
  for (int64_t r = 0; r < s.rows; ++r) {
    SoftmaxRowMags rm;
    rm.weighted_dev = stats[r].weighted_dev;
    rm.log_sum_exp = stats[r].log_sum_exp;
    const ElementBound b = (algo == SoftmaxAlgo::kAccurate ? softmax_bounds(m, rm) : log_softmax_bounds(m, rm)).ceiling;
    for (int64_t i = 0; i < s.n; ++i) {
      got[r * s.n + i] = all[r * ld + i];
      const double ref_abs = std::fabs(ref[r * s.n + i]);
      tol[r * s.n + i] = b.tol(ref_abs, mag[r * s.n + i]);
      if (algo == SoftmaxAlgo::kAccurate)
        tol[r * s.n + i] = narrow_softmax_tol(tol[r * s.n + i], ref_abs, t, s.n);
    }
    // The gaps between strided rows stay as they were (poison, bit for bit).
    for (int64_t i = s.n; i < ld && r < s.rows; ++i) {
      const size_t off = static_cast<size_t>(r * ld + i) * dtype_size(t);
      EXPECT_EQ(std::memcmp(bytes.data() + off, y0.bytes.data() + off, dtype_size(t)), 0)
          << "row " << r << " gap column " << i << " was written";
    }
  }
  *worst = std::max(*worst, expect_within(got, ref, tol,
                                          std::string(algo == SoftmaxAlgo::kAccurate ? "softmax" : "log-softmax") +
                                              " " + std::string(dtype_name(t)) + " rows " + std::to_string(s.rows) +
                                              " n " + std::to_string(s.n) + " ld " + std::to_string(ld)));
}

TEST_P(CudnnSoftmaxGpu, ForwardAccurateMatchesTheHostUnderSoftmaxBounds) {
  ASSAY_OPEN_CUDNN();
  double worst = 0;
  int done = 0;
  for (const RowsShape& s : kSoftmaxShapes) {
    Status st;
    softmax_forward_case(*handle_, GetParam(), SoftmaxAlgo::kAccurate, s, s.n, 100 + done, &worst, &st);
    ASSAY_CUDNN_RUN(st, done);
    ++done;
  }
  std::cout << "[ ratio    ] softmax forward " << dtype_name(GetParam()) << ": max err/ceiling " << worst << "\n";
}

TEST_P(CudnnSoftmaxGpu, ForwardLogMatchesTheHostUnderLogSoftmaxBounds) {
  ASSAY_OPEN_CUDNN();
  double worst = 0;
  int done = 0;
  for (const RowsShape& s : kSoftmaxShapes) {
    Status st;
    softmax_forward_case(*handle_, GetParam(), SoftmaxAlgo::kLog, s, s.n, 200 + done, &worst, &st);
    ASSAY_CUDNN_RUN(st, done);
    ++done;
  }
  std::cout << "[ ratio    ] log-softmax forward " << dtype_name(GetParam()) << ": max err/ceiling " << worst << "\n";
}

TEST_P(CudnnSoftmaxGpu, ForwardOnStridedRowsLeavesTheGapsUntouched) {
  ASSAY_OPEN_CUDNN();
  double worst = 0;
  int done = 0;
  for (const RowsShape& s : {RowsShape{4, 50}, RowsShape{3, 257}}) {
    for (SoftmaxAlgo a : {SoftmaxAlgo::kAccurate, SoftmaxAlgo::kLog}) {
      Status st;
      softmax_forward_case(*handle_, GetParam(), a, s, s.n + 14, 300 + done, &worst, &st);
      ASSAY_CUDNN_RUN(st, done);
      ++done;
    }
  }
}

/// Backward bound. Softmax: dx_i = y_i (dy_i - s), s = sum_j y_j dy_j, in fp32 from inputs that
/// convert exactly. The n-term dot product errs by gamma_n sum_j y_j |dy_j| ([H] (3.5)); the
/// subtraction and the product by y_i add a rounding each, and y_i dy_i - y_i s (two products,
/// one subtraction) is no worse; one more rounding is allowed for the alpha scaling: so
/// |dx^_i - dx_i| <= gamma_{n+3}(u) y_i (|dy_i| + sum_j y_j |dy_j|) = gamma_{n+3}(u) mag_i
/// ([H] Lemma 3.3), mag_i as backward.h returns it. Log-softmax: dx_i = dz_i - exp(z_i) s,
/// s = sum_j dz_j (gamma_{n-1}); exp errs relatively by e(z) <= 5u + 2.346u |z| (expf 2 ulp,
/// or __expf 2 + 1.173|z| ulp [CUDA], plus its rounding); the product, the subtraction and
/// alpha one rounding each: |dx^_i - dx_i| <= ((1 + e(z_i))(1 + gamma_{n+3}(u)) - 1) mag_i,
/// mag_i = |dz_i| + exp(z_i) sum_j |dz_j|. Both then round to the output type (u_out |ref|, the
/// error itself scaled by 1 + u_out), and the fp64 reference adds its own gamma_{n+3}(2^-53) mag;
/// the floor covers flushed subnormal products in fp32 and the output's subnormal spacing.
std::vector<double> softmax_backward_tol(SoftmaxAlgo algo, DType out, int64_t n, const std::vector<double>& ref,
                                         const std::vector<double>& mag, const std::vector<double>& z) {
  const double uo = out == DType::kF32 ? 0 : unit_roundoff(out);
  const double g = gamma_n(n + 3, kU32), gr = gamma_n(n + 3, kU64);
  const double floor = static_cast<double>(2 * n + 6) * min_normal(DType::kF32) + min_subnormal(out);
  std::vector<double> tol(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const double rel =
        algo == SoftmaxAlgo::kAccurate ? g : (1 + 5 * kU32 + 2.346 * kU32 * std::fabs(z[i])) * (1 + g) - 1;
    tol[i] = rel * mag[i] * (1 + uo) + gr * mag[i] + uo * std::fabs(ref[i]) + floor;
  }
  return tol;
}

void softmax_backward_case(vendor::CudnnHandle& h, DType t, SoftmaxAlgo algo, const RowsShape& s, int64_t ld,
                           uint64_t seed, double* worst, Status* st) {
  // The saved forward output: the host's softmax (or log-softmax) of random logits, rounded to t.
  const std::vector<double> x = logits(s, ld, seed);
  std::vector<double> yv(x.size(), 0.0), tmp(static_cast<size_t>(s.rows * s.n));
  if (algo == SoftmaxAlgo::kAccurate)
    ref::softmax_reference<double>(x.data(), s.rows, s.n, ld, tmp.data(), static_cast<double*>(nullptr),
                                   static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
  else
    ref::log_softmax_reference<double>(x.data(), s.rows, s.n, ld, tmp.data(), static_cast<double*>(nullptr),
                                       static_cast<ref::SoftmaxRowStats<double>*>(nullptr));
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t i = 0; i < s.n; ++i) yv[r * ld + i] = tmp[r * s.n + i];
  const Encoded y = encode(t, yv), dy = encode(t, normals(x.size(), seed + 7));
  const Encoded dx0 = poison(t, x.size());
  DeviceBuffer by(y.bytes), bdy(dy.bytes), bdx(dx0.bytes);
  if (!by.ok() || !bdy.ok() || !bdx.ok()) {
    *st = internal_error("cudaMalloc/cudaMemcpy failed");
    return;
  }
  vendor::CudnnSoftmax p;
  p.rows = s.rows, p.n = s.n, p.ld = ld, p.dtype = t, p.algo = algo;
  *st = vendor::cudnn_softmax_backward(h, p, 1.0f, by.get(), bdy.get(), 0.0f, bdx.get());
  if (!st->ok()) return;
  const std::vector<uint8_t> bytes = bdx.download();
  ASSERT_EQ(bytes.size(), dx0.bytes.size()) << "CUDA error after cudnnSoftmaxBackward";
  const std::vector<double> all = decode(t, bytes);
  std::vector<double> ref(tmp.size()), mag(tmp.size()), got(tmp.size()), z(tmp.size());
  if (algo == SoftmaxAlgo::kAccurate)
    ref::softmax_backward<double>(y.values.data(), dy.values.data(), s.rows, s.n, ld, ref.data(), mag.data());
  else
    ref::log_softmax_backward<double>(y.values.data(), dy.values.data(), s.rows, s.n, ld, ref.data(), mag.data());
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int64_t i = 0; i < s.n; ++i) {
      got[r * s.n + i] = all[r * ld + i];
      z[r * s.n + i] = y.values[r * ld + i];
    }
    for (int64_t i = s.n; i < ld; ++i) {
      const size_t off = static_cast<size_t>(r * ld + i) * dtype_size(t);
      EXPECT_EQ(std::memcmp(bytes.data() + off, dx0.bytes.data() + off, dtype_size(t)), 0)
          << "row " << r << " gap column " << i << " was written";
    }
  }
  const auto tol = softmax_backward_tol(algo, t, s.n, ref, mag, z);
  *worst =
      std::max(*worst, expect_within(got, ref, tol,
                                     std::string(algo == SoftmaxAlgo::kAccurate ? "softmax" : "log-softmax") +
                                         " backward " + std::string(dtype_name(t)) + " rows " + std::to_string(s.rows) +
                                         " n " + std::to_string(s.n) + " ld " + std::to_string(ld)));
}

TEST_P(CudnnSoftmaxGpu, BackwardAccurateMatchesTheHostUnderTheDerivedBound) {
  ASSAY_OPEN_CUDNN();
  double worst = 0;
  int done = 0;
  for (const RowsShape& s : kSoftmaxShapes) {
    Status st;
    softmax_backward_case(*handle_, GetParam(), SoftmaxAlgo::kAccurate, s, s.n, 400 + done, &worst, &st);
    ASSAY_CUDNN_RUN(st, done);
    ++done;
  }
  std::cout << "[ ratio    ] softmax backward " << dtype_name(GetParam()) << ": max err/bound " << worst << "\n";
}

TEST_P(CudnnSoftmaxGpu, BackwardLogMatchesTheHostUnderTheDerivedBound) {
  ASSAY_OPEN_CUDNN();
  double worst = 0;
  int done = 0;
  for (const RowsShape& s : kSoftmaxShapes) {
    Status st;
    softmax_backward_case(*handle_, GetParam(), SoftmaxAlgo::kLog, s, s.n, 500 + done, &worst, &st);
    ASSAY_CUDNN_RUN(st, done);
    ++done;
  }
  std::cout << "[ ratio    ] log-softmax backward " << dtype_name(GetParam()) << ": max err/bound " << worst << "\n";
}

TEST_P(CudnnSoftmaxGpu, BackwardOnStridedRowsLeavesTheGapsUntouched) {
  ASSAY_OPEN_CUDNN();
  double worst = 0;
  int done = 0;
  for (SoftmaxAlgo a : {SoftmaxAlgo::kAccurate, SoftmaxAlgo::kLog}) {
    Status st;
    softmax_backward_case(*handle_, GetParam(), a, RowsShape{5, 40}, 48, 600 + done, &worst, &st);
    ASSAY_CUDNN_RUN(st, done);
    ++done;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudnnSoftmaxGpu, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return dtype_param_name(info.param); });

// ---- activations -----------------------------------------------------------------------------------

/// Relative error of exp(x) in fp32: expf 2 ulp, __expf 2 + floor(1.173|x|) ulp [CUDA], plus the
/// rounding of the result: (2.5 + 1.173|x|) ulp <= 5u + 2.346u|x| (an fp32 ulp at y is <= 2u|y|).
double exp_rel(double x) {
  return 5 * kU32 + 2.346 * kU32 * std::fabs(x);
}

/// Relative error of sigmoid(x) = 1/(1 + e^-x) in fp32: e^-x errs by exp_rel(x), which moves
/// 1 + e^-x by the fraction e^-x/(1 + e^-x) = 1 - s of it; the sum rounds (u) and the division
/// (x/y 0 ulp, __fdividef 2 ulp: at most 5u); 3u more cover second-order terms: 9u in all.
double sigmoid_rel(double x, double s) {
  return (1 - s) * exp_rel(x) + 9 * kU32;
}

/// The allowed |y^ - y| of cuDNN's activation at x, y exact, computed in fp32 and stored in `out`.
/// cuDNN does not document its formulas, so each budget covers the usual ones:
///   ReLU     exact (0).
///   sigmoid  sigmoid_rel |y|.
///   tanh     tanhf (2 ulp + rounding: 5u |y|), or 1 - 2/(e^{2|x|} + 1) with its sign, whose
///            q = 2/(E + 1) errs relatively by exp_rel(2x) + 6u, i.e. (1 - |y|)(exp_rel(2x) + 6u)
///            absolutely, or 2 sigmoid(2x) - 1 (2 s sigmoid_rel <= the same + 6u): the larger of
///            5u|y| and (1 - |y|)(exp_rel(2x) + 12u) + 2u|y|.
///   swish    x sigmoid(x) or x / (1 + e^-x): (sigmoid_rel + u) |y|.
/// A narrower output adds its rounding: u_out (|y| + budget) + its subnormal spacing.
double activation_budget(CudnnActivationMode m, double x, double y, DType out) {
  double b = 0;
  switch (m) {
    case CudnnActivationMode::kRelu:
      b = 0;
      break;
    case CudnnActivationMode::kSigmoid:
      b = sigmoid_rel(x, y) * std::fabs(y);
      break;
    case CudnnActivationMode::kTanh:
      b = std::max(5 * kU32 * std::fabs(y),
                   (1 - std::fabs(y)) * (exp_rel(2 * x) + 12 * kU32) + 2 * kU32 * std::fabs(y));
      break;
    case CudnnActivationMode::kSwish: {
      const double s = 1 / (1 + std::exp(-x));
      b = (sigmoid_rel(x, s) + kU32) * std::fabs(y);
      break;
    }
    case CudnnActivationMode::kGelu:
      b = INFINITY;
      break;
  }
  // Flush-to-zero of a subnormal fp32 result (sigmoid(-100) ~ 4e-44).
  b += min_normal(DType::kF32);
  if (out != DType::kF32) {
    const double uo = unit_roundoff(out);
    b = b * (1 + uo) + uo * std::fabs(y) + min_subnormal(out);
  }
  return b;
}

double activation_exact(CudnnActivationMode m, double x) {
  switch (m) {
    case CudnnActivationMode::kRelu:
      return ref::activation(ref::Activation::kRelu, x);
    case CudnnActivationMode::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case CudnnActivationMode::kTanh:
      return std::tanh(x);
    case CudnnActivationMode::kSwish:
      return ref::activation(ref::Activation::kSilu, x);
    case CudnnActivationMode::kGelu:
      return ref::activation(ref::Activation::kGeluErf, x);
  }
  return NAN;
}

const char* mode_name(CudnnActivationMode m) {
  switch (m) {
    case CudnnActivationMode::kRelu:
      return "relu";
    case CudnnActivationMode::kSigmoid:
      return "sigmoid";
    case CudnnActivationMode::kTanh:
      return "tanh";
    case CudnnActivationMode::kSwish:
      return "swish";
    case CudnnActivationMode::kGelu:
      return "gelu";
  }
  return "?";
}

/// Inputs: N(0, 3), tiny and large values of both signs, zeros, a strided layout.
std::vector<double> activation_inputs(int64_t rows, int64_t ld, uint64_t seed) {
  std::vector<double> x = normals(static_cast<size_t>(rows * ld), seed, 3);
  const double specials[] = {0.0, -0.0, 1e-3, -1e-3, 1e-20, -1e-20, 0.5, -0.5, 9, -9, 20, -20, 60, -60, 100, -100};
  for (size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[i] = specials[i];
  return x;
}

class CudnnActivationGpu : public CudnnGpuTest,
                           public ::testing::TestWithParam<std::tuple<CudnnActivationMode, DType>> {};

TEST_P(CudnnActivationGpu, ForwardMatchesTheHostWithinItsUlpBudget) {
  ASSAY_OPEN_CUDNN();
  const auto [mode, t] = GetParam();
  const int64_t rows = 37, n = 61, ld = 64;  // a strided layout: the gaps must stay untouched
  const Encoded x = encode(t, activation_inputs(rows, ld, 11));
  const Encoded y0 = poison(t, x.values.size());
  DeviceBuffer bx(x.bytes), by(y0.bytes);
  ASSERT_TRUE(bx.ok() && by.ok());
  vendor::CudnnActivation p;
  p.rows = rows, p.n = n, p.ld = ld, p.dtype = t, p.mode = mode;
  ASSAY_CUDNN_RUN(vendor::cudnn_activation_forward(*handle_, p, 1.0f, bx.get(), 0.0f, by.get()), 0);
  const std::vector<uint8_t> bytes = by.download();
  ASSERT_EQ(bytes.size(), y0.bytes.size()) << "CUDA error after cudnnActivationForward";
  const std::vector<double> all = decode(t, bytes);
  std::vector<double> got, ref, tol;
  double worst_ulps = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < ld; ++i) {
      const size_t k = static_cast<size_t>(r * ld + i);
      if (i >= n) {
        EXPECT_EQ(std::memcmp(bytes.data() + k * dtype_size(t), y0.bytes.data() + k * dtype_size(t), dtype_size(t)), 0)
            << "gap element " << k << " was written";
        continue;
      }
      const double y = activation_exact(mode, x.values[k]);
      got.push_back(all[k]);
      ref.push_back(y);
      tol.push_back(activation_budget(mode, x.values[k], y, t));
      worst_ulps = std::max(worst_ulps, std::fabs(all[k] - y) / ulp_of(y, t));
    }
  }
  expect_within(got, ref, tol, std::string(mode_name(mode)) + " forward " + std::string(dtype_name(t)));
  std::cout << "[ ulps     ] " << mode_name(mode) << " " << dtype_name(t) << ": max |err| " << worst_ulps
            << " ulps of the output type\n";
}

/// Backward from the saved output y (and x for swish), fp32: the reference reads the same y.
///   ReLU     dy where x > 0, else 0: exact (x == 0 is not checked: y > 0 and x > 0 differ there).
///   sigmoid  dy y (1 - y) or dy (y - y^2): three roundings, at most 4u |dy| y (|1 - y| + y)
///            = gamma_4 |dy| y for y in [0, 1].
///   tanh     dy (1 - y^2): gamma_4 |dy| (1 + y^2).
///   swish    dy (s + x s (1 - s)), s = sigmoid(x) recomputed (sigmoid_rel) or read back from y:
///            the error of s moves both terms by at most s (1 + |x|) its relative error; the
///            roundings of the products and sums add gamma_8 of the same magnitude.
class CudnnActivationBackwardGpu : public CudnnGpuTest, public ::testing::TestWithParam<CudnnActivationMode> {};

TEST_P(CudnnActivationBackwardGpu, Fp32MatchesTheHostFromTheSavedOutput) {
  ASSAY_OPEN_CUDNN();
  const CudnnActivationMode mode = GetParam();
  const DType t = DType::kF32;
  const int64_t rows = 23, n = 50;
  const std::vector<double> xv = activation_inputs(rows, n, 13);
  std::vector<double> yv(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) yv[i] = activation_exact(mode, xv[i]);
  const Encoded x = encode(t, xv), y = encode(t, yv), dy = encode(t, normals(xv.size(), 14));
  const Encoded dx0 = poison(t, xv.size());
  DeviceBuffer bx(x.bytes), by(y.bytes), bdy(dy.bytes), bdx(dx0.bytes);
  ASSERT_TRUE(bx.ok() && by.ok() && bdy.ok() && bdx.ok());
  vendor::CudnnActivation p;
  p.rows = rows, p.n = n, p.dtype = t, p.mode = mode;
  ASSAY_CUDNN_RUN(vendor::cudnn_activation_backward(*handle_, p, 1.0f, by.get(), bdy.get(), bx.get(), 0.0f, bdx.get()),
                  0);
  const std::vector<uint8_t> bytes = bdx.download();
  ASSERT_EQ(bytes.size(), dx0.bytes.size()) << "CUDA error after cudnnActivationBackward";
  const std::vector<double> all = decode(t, bytes);
  std::vector<double> got, ref, tol;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double xi = x.values[i], yi = y.values[i], gi = dy.values[i];
    double r = 0, b = 0;
    switch (mode) {
      case CudnnActivationMode::kRelu:
        if (xi == 0) continue;
        r = xi > 0 ? gi : 0;
        break;
      case CudnnActivationMode::kSigmoid:
        r = gi * yi * (1 - yi);
        b = gamma_n(4, kU32) * std::fabs(gi) * std::fabs(yi);
        break;
      case CudnnActivationMode::kTanh:
        r = gi * (1 - yi * yi);
        b = gamma_n(4, kU32) * std::fabs(gi) * (1 + yi * yi);
        break;
      case CudnnActivationMode::kSwish: {
        const double s = 1 / (1 + std::exp(-xi));
        r = gi * (s + xi * s * (1 - s));
        b = std::fabs(gi) * s * (1 + std::fabs(xi)) * (sigmoid_rel(xi, s) + kU32 + gamma_n(8, kU32));
        break;
      }
      case CudnnActivationMode::kGelu:
        r = NAN;
        break;
    }
    got.push_back(all[i]);
    ref.push_back(r);
    tol.push_back(b + min_normal(DType::kF32));
  }
  expect_within(got, ref, tol, std::string(mode_name(mode)) + " backward fp32");
}

INSTANTIATE_TEST_SUITE_P(Modes, CudnnActivationBackwardGpu,
                         ::testing::Values(CudnnActivationMode::kRelu, CudnnActivationMode::kSigmoid,
                                           CudnnActivationMode::kTanh, CudnnActivationMode::kSwish),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(ModesAndDtypes, CudnnActivationGpu,
                         ::testing::Combine(::testing::Values(CudnnActivationMode::kRelu, CudnnActivationMode::kSigmoid,
                                                              CudnnActivationMode::kTanh, CudnnActivationMode::kSwish),
                                            ::testing::Values(DType::kF32, DType::kF16, DType::kBF16)),
                         [](const auto& info) {
                           return std::string(mode_name(std::get<0>(info.param))) + "_" +
                                  dtype_param_name(std::get<1>(info.param));
                         });

class CudnnActivationGeluGpu : public CudnnGpuTest, public ::testing::Test {};

TEST_F(CudnnActivationGeluGpu, IsUnavailableWithTheReason) {
  ASSAY_OPEN_CUDNN();
  vendor::CudnnActivation p;
  p.rows = 1, p.n = 1, p.mode = CudnnActivationMode::kGelu;
  const Status s = vendor::cudnn_activation_forward(*handle_, p, 1.0f, nullptr, 0.0f, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_NE(s.message().find("GELU"), std::string::npos) << s.message();
}

// ---- convolution -----------------------------------------------------------------------------------

using ref::Conv2dGeometry;
using ref::ConvLayout;

Conv2dGeometry geom(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t pad = 0,
                    int64_t stride = 1, int64_t dil = 1, int64_t groups = 1, ConvLayout layout = ConvLayout::kNCHW) {
  Conv2dGeometry g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
  g.pad_h = g.pad_w = pad;
  g.stride_h = g.stride_w = stride;
  g.dil_h = g.dil_w = dil;
  g.groups = groups;
  g.layout = layout;
  return g;
}

std::string describe(const Conv2dGeometry& g) {
  return fmt::format("N{} C{} H{} W{} K{} R{} S{} pad{}x{} stride{}x{} dil{}x{} g{} {}", g.n, g.c, g.h, g.w, g.k, g.r,
                     g.s, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w, g.groups,
                     g.layout == ConvLayout::kNCHW ? "NCHW" : "NHWC");
}

/// 1x1, a kernel larger than the input (padded), odd sizes, stride 2, dilation 2, grouped,
/// depthwise, a longer reduction; in `layout`.
std::vector<Conv2dGeometry> conv_shapes(ConvLayout layout) {
  std::vector<Conv2dGeometry> v = {
      geom(2, 8, 6, 5, 16, 1, 1),                // 1x1
      geom(1, 3, 2, 3, 4, 5, 5, 2),              // kernel larger than the input, padded
      geom(3, 5, 7, 9, 7, 3, 3, 1),              // odd sizes
      geom(2, 4, 11, 10, 6, 3, 3, 1, 2),         // stride 2
      geom(2, 3, 9, 9, 5, 3, 3, 2, 1, 2),        // dilation 2
      geom(1, 8, 6, 6, 12, 3, 3, 1, 1, 1, 4),    // 4 groups
      geom(2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 16),  // depthwise
      geom(1, 64, 6, 6, 8, 3, 3, 1),             // K = 576
  };
  for (Conv2dGeometry& g : v) g.layout = layout;
  return v;
}

using ConvDir = vendor::ConvDirection;

const char* dir_name(ConvDir d) {
  return d == ConvDir::kForward ? "forward" : d == ConvDir::kBackwardData ? "backward-data" : "backward-filter";
}

/// Dot-product ceiling ([H] (3.5)): an output that is a dot product of at most K terms computed
/// in fp32 in any order, FMA or not, errs by at most gamma_K(2^-24) sum|a||b| (= mag); alpha != 1
/// and beta != 0 add one rounding each (gamma_{K+2}, as gemm_ceiling). Products of fp16 and bf16
/// values are exact in fp32. The fp64 reference adds gamma_K(2^-53) mag; the floor covers
/// flushed subnormal products and sums (< min_normal each). A narrower output rounds once more:
/// u_out (|ref| + err) plus its subnormal spacing.
double conv_tol(int64_t k_len, bool scaled, double mag, double ref_abs, DType out) {
  const int64_t k = k_len + (scaled ? 2 : 0);
  double tol = gamma_n(k, kU32) * mag + gamma_n(k, kU64) * mag + static_cast<double>(2 * k) * min_normal(DType::kF32);
  if (out != DType::kF32) {
    const double uo = unit_roundoff(out);
    tol = tol * (1 + uo) + uo * ref_abs + min_subnormal(out);
  }
  return tol;
}

/// One case: runs direction `dir` twice (a DETERMINISTIC algorithm must repeat bit for bit) and
/// compares with the host reference. alpha/beta: out = alpha op + beta out0 (out0 random when
/// beta != 0, NaN otherwise). same_sign: data in [0, 1) (no cancellation; the error grows with K).
struct ConvCase {
  Conv2dGeometry g;
  DType t = DType::kF32;
  ConvDir dir = ConvDir::kForward;
  float alpha = 1, beta = 0;
  bool same_sign = false;
  uint64_t seed = 1;
};

void run_conv_case(vendor::CudnnHandle& h, const ConvCase& c, double* worst, std::string* algo, Status* st) {
  const Conv2dGeometry& g = c.g;
  const DType t = c.t;
  auto data = [&](int64_t count, uint64_t seed) {
    return c.same_sign ? uniforms(static_cast<size_t>(count), seed, 0, 1) : normals(static_cast<size_t>(count), seed);
  };
  const Encoded x = encode(t, data(g.x_elems(), c.seed)), w = encode(t, data(g.w_elems(), c.seed + 1)),
                dy = encode(t, data(g.y_elems(), c.seed + 2));
  const int64_t out_elems = c.dir == ConvDir::kForward        ? g.y_elems()
                            : c.dir == ConvDir::kBackwardData ? g.x_elems()
                                                              : g.w_elems();
  const Encoded out0 = c.beta != 0 ? encode(t, normals(static_cast<size_t>(out_elems), c.seed + 3))
                                   : poison(t, static_cast<size_t>(out_elems));
  DeviceBuffer bx(x.bytes), bw(w.bytes), bdy(dy.bytes), bout(out0.bytes), bout2(out0.bytes);
  if (!bx.ok() || !bw.ok() || !bdy.ok() || !bout.ok() || !bout2.ok()) {
    *st = internal_error("cudaMalloc/cudaMemcpy failed");
    return;
  }
  vendor::CudnnConv p;
  p.geom = g, p.dtype = t, p.math = vendor::ConvMath::kFma;
  auto run = [&](void* out) -> StatusOr<vendor::ConvAlgoUsed> {
    switch (c.dir) {
      case ConvDir::kForward:
        return vendor::cudnn_conv_forward(h, p, c.alpha, bx.get(), bw.get(), c.beta, out);
      case ConvDir::kBackwardData:
        return vendor::cudnn_conv_backward_data(h, p, c.alpha, bw.get(), bdy.get(), c.beta, out);
      case ConvDir::kBackwardFilter:
        return vendor::cudnn_conv_backward_filter(h, p, c.alpha, bx.get(), bdy.get(), c.beta, out);
    }
    return internal_error("unknown direction");
  };
  const auto used = run(bout.get());
  if (!used.ok()) {
    *st = used.status();
    return;
  }
  *algo = used->name;
  const auto again = run(bout2.get());
  if (!again.ok()) {
    *st = again.status();
    return;
  }
  const std::vector<uint8_t> b1 = bout.download(), b2 = bout2.download();
  ASSERT_EQ(b1.size(), out0.bytes.size()) << "CUDA error after the convolution";
  EXPECT_EQ(b1, b2) << dir_name(c.dir) << " " << describe(g) << ": the deterministic algorithm " << used->name
                    << " did not repeat bit for bit";
  const std::vector<double> got = decode(t, b1);
  std::vector<double> ref(static_cast<size_t>(out_elems)), mag(ref.size());
  int64_t k_len = 0;
  switch (c.dir) {
    case ConvDir::kForward:
      ref::conv2d_forward<double>(g, x.values.data(), w.values.data(), ref.data(), mag.data());
      k_len = g.fwd_reduction();
      break;
    case ConvDir::kBackwardData:
      ref::conv2d_backward_data<double>(g, dy.values.data(), w.values.data(), ref.data(), mag.data());
      k_len = g.bwd_data_reduction();
      break;
    case ConvDir::kBackwardFilter:
      ref::conv2d_backward_filter<double>(g, x.values.data(), dy.values.data(), ref.data(), mag.data());
      k_len = g.bwd_filter_reduction();
      break;
  }
  const bool scaled = c.alpha != 1 || c.beta != 0;
  std::vector<double> tol(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ref[i] = c.alpha * ref[i] + (c.beta != 0 ? c.beta * out0.values[i] : 0.0);
    mag[i] = std::fabs(c.alpha) * mag[i] + (c.beta != 0 ? std::fabs(c.beta * out0.values[i]) : 0.0);
    tol[i] = conv_tol(k_len, scaled, mag[i], std::fabs(ref[i]), t);
  }
  *worst = std::max(*worst, expect_within(got, ref, tol,
                                          std::string(dir_name(c.dir)) + " " + std::string(dtype_name(t)) + " " +
                                              describe(g) + (c.same_sign ? " same-sign" : "") + " algo " + used->name));
}

/// By direction and layout, so that a layout this cuDNN lacks skips alone.
class CudnnConvGpu : public CudnnGpuTest, public ::testing::TestWithParam<std::tuple<ConvDir, ConvLayout>> {};

TEST_P(CudnnConvGpu, FmaFp32MatchesTheHostUnderTheDotProductCeiling) {
  ASSAY_OPEN_CUDNN();
  const auto [dir, layout] = GetParam();
  double worst = 0;
  int done = 0;
  std::string algos;
  for (const Conv2dGeometry& g : conv_shapes(layout)) {
    for (bool same_sign : {false, true}) {
      ConvCase c;
      c.g = g, c.dir = dir, c.same_sign = same_sign, c.seed = 1000 + 10 * static_cast<uint64_t>(done);
      std::string algo;
      Status st;
      run_conv_case(*handle_, c, &worst, &algo, &st);
      ASSAY_CUDNN_RUN(st, done);
      if (algos.find(algo) == std::string::npos) algos += " " + algo;
      ++done;
    }
  }
  std::cout << "[ ratio    ] conv " << dir_name(dir) << (layout == ConvLayout::kNCHW ? " NCHW" : " NHWC")
            << " fp32 FMA: max err/ceiling " << worst << ", algorithms:" << algos << "\n";
}

TEST_P(CudnnConvGpu, AlphaBetaScaleTheResultAndTheOldOutput) {
  ASSAY_OPEN_CUDNN();
  const auto [dir, layout] = GetParam();
  double worst = 0;
  int done = 0;
  for (const Conv2dGeometry& g :
       {geom(2, 4, 7, 6, 6, 3, 3, 1, 1, 1, 1, layout), geom(1, 6, 5, 5, 6, 3, 3, 1, 2, 1, 3, layout)}) {
    ConvCase c;
    c.g = g, c.dir = dir, c.alpha = -1.5f, c.beta = 0.25f, c.seed = 2000 + static_cast<uint64_t>(done);
    std::string algo;
    Status st;
    run_conv_case(*handle_, c, &worst, &algo, &st);
    ASSAY_CUDNN_RUN(st, done);
    ++done;
  }
}

std::string dir_param_name(ConvDir d) {
  return d == ConvDir::kForward ? "forward" : d == ConvDir::kBackwardData ? "backward_data" : "backward_filter";
}

INSTANTIATE_TEST_SUITE_P(DirectionsAndLayouts, CudnnConvGpu,
                         ::testing::Combine(::testing::Values(ConvDir::kForward, ConvDir::kBackwardData,
                                                              ConvDir::kBackwardFilter),
                                            ::testing::Values(ConvLayout::kNCHW, ConvLayout::kNHWC)),
                         [](const auto& info) {
                           return dir_param_name(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == ConvLayout::kNCHW ? "_nchw" : "_nhwc");
                         });

/// fp16 and bf16 data (NCHW) with FMA math and an fp32 compute type: exact products, fp32 sums,
/// one rounding to the output type. Where this cuDNN has no FMA kernel for the type, it skips.
class CudnnConvNarrowGpu : public CudnnGpuTest, public ::testing::TestWithParam<std::tuple<ConvDir, DType>> {};

TEST_P(CudnnConvNarrowGpu, FmaMathAccumulatesInFp32) {
  ASSAY_OPEN_CUDNN();
  const auto [dir, t] = GetParam();
  double worst = 0;
  int done = 0;
  for (const Conv2dGeometry& g :
       {geom(2, 8, 7, 7, 8, 3, 3, 1), geom(1, 16, 6, 6, 16, 3, 3, 1, 1, 1, 16), geom(2, 8, 9, 8, 4, 3, 3, 1, 2)}) {
    ConvCase c;
    c.g = g, c.t = t, c.dir = dir, c.seed = 3000 + static_cast<uint64_t>(done);
    std::string algo;
    Status st;
    run_conv_case(*handle_, c, &worst, &algo, &st);
    ASSAY_CUDNN_RUN(st, done);
    ++done;
  }
  std::cout << "[ ratio    ] conv " << dir_name(dir) << " " << dtype_name(t) << " FMA: max err/bound " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(DirectionsAndDtypes, CudnnConvNarrowGpu,
                         ::testing::Combine(::testing::Values(ConvDir::kForward, ConvDir::kBackwardData,
                                                              ConvDir::kBackwardFilter),
                                            ::testing::Values(DType::kF16, DType::kBF16)),
                         [](const auto& info) {
                           return dir_param_name(std::get<0>(info.param)) + "_" +
                                  dtype_param_name(std::get<1>(info.param));
                         });

/// The wrappers ask cuDNN for its top choice alone and for the whole list only when the top choice
/// does not qualify (cudnn.cpp, select_and_run): the answer is the same as walking the whole list
/// only if the top choice alone is the whole list's head. It is checked here for every direction,
/// layout, storage type and math type on the shapes above and on two where the whole list took
/// seconds (1x1 filter gradients in fp16/bf16 NCHW, found in campaigns).
class CudnnConvChoiceGpu : public CudnnGpuTest, public ::testing::Test {};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// The two filter-gradient problems whose query took seconds in campaigns (1x1, NCHW).
std::vector<std::pair<Conv2dGeometry, DType>> stall_problems() {
  Conv2dGeometry slow1 = geom(4, 3, 15, 16, 63, 1, 1, 3), slow2 = geom(1, 16, 38, 15, 15, 1, 1, 1);
  slow1.pad_w = slow2.pad_w = 0;
  return {{slow1, DType::kBF16}, {slow2, DType::kF16}};
}

TEST_F(CudnnConvChoiceGpu, TopChoiceAloneIsTheHeadOfTheWholeList) {
  ASSAY_OPEN_CUDNN();
  // The two slow shapes first, each timed alone: top choice, then the whole list.
  for (const auto& [g, t] : stall_problems()) {
    vendor::CudnnConv p;
    p.geom = g, p.dtype = t, p.math = vendor::ConvMath::kFma;
    const auto t0 = Clock::now();
    const auto top = vendor::cudnn_conv_algorithms(*handle_, p, ConvDir::kBackwardFilter, 1);
    const double top_s = seconds_since(t0);
    ASSAY_CUDNN_RUN(top.status(), 0);
    const auto t1 = Clock::now();
    const auto all = vendor::cudnn_conv_algorithms(*handle_, p, ConvDir::kBackwardFilter, 0);
    const double all_s = seconds_since(t1);
    ASSERT_TRUE(all.ok()) << all.status().to_string();
    ASSERT_FALSE(top->empty());
    ASSERT_FALSE(all->empty());
    EXPECT_EQ(top->front().name, all->front().name) << describe(g);
    EXPECT_EQ(top->front().math_type, all->front().math_type) << describe(g);
    std::cout << "[ measured ] backward-filter " << dtype_name(t) << " " << describe(g) << ": top choice "
              << top->front().name << " in " << top_s << " s; the whole list (" << all->size() << ") in " << all_s
              << " s\n";
  }
  int compared = 0;
  for (const ConvLayout layout : {ConvLayout::kNCHW, ConvLayout::kNHWC})
    for (const Conv2dGeometry& g : conv_shapes(layout))
      for (const DType t : {DType::kF32, DType::kF16, DType::kBF16})
        for (const vendor::ConvMath m : {vendor::ConvMath::kFma, vendor::ConvMath::kDefault})
          for (const ConvDir dir : {ConvDir::kForward, ConvDir::kBackwardData, ConvDir::kBackwardFilter}) {
            vendor::CudnnConv p;
            p.geom = g, p.dtype = t, p.math = m;
            const auto top = vendor::cudnn_conv_algorithms(*handle_, p, dir, 1);
            const auto all = vendor::cudnn_conv_algorithms(*handle_, p, dir, 0);
            if (!top.ok() && top.status().code() == StatusCode::kUnavailable) continue;  // a type this cuDNN lacks
            ASSERT_TRUE(top.ok()) << top.status().to_string();
            ASSERT_TRUE(all.ok()) << all.status().to_string();
            if (top->empty()) {
              EXPECT_TRUE(all->empty()) << describe(g);
              continue;
            }
            ASSERT_FALSE(all->empty()) << describe(g);
            EXPECT_EQ(top->front().name, all->front().name) << describe(g) << " " << dtype_name(t);
            EXPECT_EQ(top->front().math_type, all->front().math_type) << describe(g) << " " << dtype_name(t);
            EXPECT_EQ(top->front().deterministic, all->front().deterministic) << describe(g) << " " << dtype_name(t);
            ++compared;
          }
  EXPECT_GT(compared, 100);
  std::cout << "[ measured ] " << compared << " problems: the top choice alone is the whole list's head\n";
}

// Under FMA math and the dot-product policy the backward directions run ALGO_1 without asking
// cuDNN's heuristics (cudnn.cpp, select_and_run). The premise: the whole list's first qualifying
// entry is ALGO_1 under FMA math, or there is none and the call is unavailable. Checked on the
// problems above, both layouts, three types, and on the two problems whose query stalled lanes.
TEST_F(CudnnConvChoiceGpu, OneCandidateRunsWithoutTheQueryAndIsTheListsChoice) {
  ASSAY_OPEN_CUDNN();
  std::vector<std::pair<Conv2dGeometry, DType>> problems = stall_problems();
  for (const ConvLayout layout : {ConvLayout::kNCHW, ConvLayout::kNHWC})
    for (const Conv2dGeometry& g : conv_shapes(layout))
      for (const DType t : {DType::kF32, DType::kF16, DType::kBF16}) problems.emplace_back(g, t);
  int compared = 0, none = 0;
  for (const auto& [g, t] : problems)
    for (const ConvDir dir : {ConvDir::kBackwardData, ConvDir::kBackwardFilter}) {
      vendor::CudnnConv p;
      p.geom = g, p.dtype = t, p.math = vendor::ConvMath::kFma, p.algos = vendor::ConvAlgoPolicy::kDotProduct;
      const auto t0 = Clock::now();
      const auto all = vendor::cudnn_conv_algorithms(*handle_, p, dir, 0);
      const double list_s = seconds_since(t0);
      if (!all.ok() && all.status().code() == StatusCode::kUnavailable) continue;  // a type this cuDNN lacks
      ASSERT_TRUE(all.ok()) << all.status().to_string();
      const vendor::ConvAlgoListed* want = nullptr;
      for (const vendor::ConvAlgoListed& e : *all)
        if (e.ok && e.deterministic && e.math_type == CUDNN_FMA_MATH &&
            (e.name == "ALGO_0" || e.name == "ALGO_1" || e.name == "ALGO_3")) {
          want = &e;
          break;
        }
      const size_t in_elems = static_cast<size_t>(dir == ConvDir::kBackwardData ? g.w_elems() : g.x_elems());
      const Encoded a = encode(t, normals(in_elems, 1)), dy = encode(t, normals(static_cast<size_t>(g.y_elems()), 2));
      const Encoded out0 = poison(t, static_cast<size_t>(dir == ConvDir::kBackwardData ? g.x_elems() : g.w_elems()));
      DeviceBuffer ba(a.bytes), bdy(dy.bytes), bout(out0.bytes);
      ASSERT_TRUE(ba.ok() && bdy.ok() && bout.ok());
      const auto t1 = Clock::now();
      const auto used =
          dir == ConvDir::kBackwardData
              ? vendor::cudnn_conv_backward_data(*handle_, p, 1.0f, ba.get(), bdy.get(), 0.0f, bout.get())
              : vendor::cudnn_conv_backward_filter(*handle_, p, 1.0f, ba.get(), bdy.get(), 0.0f, bout.get());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const double run_s = seconds_since(t1);
      const std::string what = fmt::format("{} {} {}", dir_name(dir), dtype_name(t), describe(g));
      if (want == nullptr) {
        EXPECT_EQ(used.status().code(), StatusCode::kUnavailable) << what << ": the list has no candidate";
        ++none;
        continue;
      }
      ASSERT_TRUE(used.ok()) << what << ": " << used.status().to_string();
      EXPECT_EQ(used->name, want->name) << what;
      EXPECT_EQ(used->math_type, want->math_type) << what;
      ++compared;
      if (compared <= 4)
        std::cout << "[ measured ] " << what << ": the whole list in " << list_s << " s; " << used->name
                  << " run without it in " << run_s << " s\n";
    }
  EXPECT_GT(compared, 50);
  std::cout << "[ measured ] " << compared << " problems ran the list's first qualifying entry without the query; "
            << none << " had none and were unavailable\n";
}

class CudnnConvArgsGpu : public CudnnGpuTest, public ::testing::Test {};

TEST_F(CudnnConvArgsGpu, BadProblemsAreStatusesNotCrashes) {
  ASSAY_OPEN_CUDNN();
  vendor::CudnnConv p;
  p.geom = geom(1, 3, 4, 4, 4, 3, 3, 0, 1, 1, 2);  // groups do not divide C
  int dummy = 0;
  auto r = vendor::cudnn_conv_forward(*handle_, p, 1.0f, &dummy, &dummy, 0.0f, &dummy);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  p.geom = geom(1, 4, 4, 4, 4, 3, 3, 1);
  p.dtype = DType::kE4M3;
  r = vendor::cudnn_conv_forward(*handle_, p, 1.0f, &dummy, &dummy, 0.0f, &dummy);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  vendor::CudnnSoftmax s;
  s.rows = 2, s.n = 8, s.ld = 4;  // ld < n
  EXPECT_EQ(vendor::cudnn_softmax_forward(*handle_, s, 1.0f, &dummy, 0.0f, &dummy).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace assay

#else  // built without cuDNN

#include <gtest/gtest.h>

namespace assay {
namespace {

TEST(CudnnNotBuilt, EveryWrapperAnswersUnavailable) {
  EXPECT_FALSE(vendor::cudnn_built());
  auto h = vendor::CudnnHandle::create();
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(h.status().message().find("built without cuDNN"), std::string::npos) << h.status().message();
  EXPECT_EQ(vendor::cudnn_check_major().code(), StatusCode::kUnavailable);
  EXPECT_NE(vendor::cudnn_describe().find("built without cuDNN"), std::string::npos);
}

TEST(CudnnRefGpu, SkippedBuiltWithoutCudnn) {
  GTEST_SKIP() << vendor::cudnn_not_built().message();
}

}  // namespace
}  // namespace assay

#endif  // ASSAY_HAVE_CUDNN
