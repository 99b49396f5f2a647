#include "harness/exhaustive.h"

#include <algorithm>
#include <map>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/gpu/cuda_check.h"
#include "harness/values.h"

namespace assay {
namespace {

constexpr int64_t kPatterns = int64_t{1} << 16;
constexpr size_t kListed = 16;

double decode(DType t, uint16_t bits) {
  return t == DType::kF16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
}
uint16_t encode(DType t, double x) {
  uint16_t b = 0;
  store_as(t, x, &b);
  return b;
}

/// Every finite value of the dtype in ascending order, one zero (the ulp order of harness/bounds.h).
std::vector<double> finite_grid(DType t) {
  std::vector<double> v;
  for (int64_t b = 0; b < kPatterns; ++b) {
    const double x = decode(t, static_cast<uint16_t>(b));
    if (std::isfinite(x) && !(x == 0 && std::signbit(x))) v.push_back(x);
  }
  std::sort(v.begin(), v.end());
  return v;
}

/// Steps from RN(ref) to the farthest grid value within [ref - tol, ref + tol] on the side of `out`.
uint64_t budget_of(const std::vector<double>& grid, DType t, double ref, double tol, double out) {
  const double rn = decode(t, encode(t, ref));
  if (!std::isfinite(rn)) return 0;
  const auto idx = [&](double v) { return std::lower_bound(grid.begin(), grid.end(), v) - grid.begin(); };
  const int64_t r = idx(rn == 0 ? 0.0 : rn);
  if (out >= rn) {
    const int64_t hi = (std::upper_bound(grid.begin(), grid.end(), ref + tol) - grid.begin()) - 1;
    return hi > r ? static_cast<uint64_t>(hi - r) : 0;
  }
  const int64_t lo = idx(ref - tol);
  return r > lo ? static_cast<uint64_t>(r - lo) : 0;
}

std::string num(double v) {
  return fmt::format("{:.9g}", v);
}

}  // namespace

nlohmann::json ExhaustivePoint::to_json() const {
  auto finite_or_text = [](double v) -> nlohmann::json {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
  };
  return {{"bits", fmt::format("0x{:04x}", bits)},
          {"x", finite_or_text(x)},
          {"out", finite_or_text(out)},
          {"ref", finite_or_text(ref)},
          {"tol", finite_or_text(tol)},
          {"ulps", ulps == std::numeric_limits<uint64_t>::max() ? nlohmann::json("nan") : nlohmann::json(ulps)},
          {"budget", budget}};
}

std::string ExhaustivePoint::describe() const {
  const std::string u = ulps == std::numeric_limits<uint64_t>::max() ? "NaN vs number" : fmt::format("{} ulp", ulps);
  return fmt::format("x = {} (0x{:04x}): out {}, reference {}, tolerance {:.3g} ({}, budget {})", num(x), bits,
                     num(out), num(ref), tol, u, budget);
}

nlohmann::json ExhaustiveReport::to_json() const {
  nlohmann::json j = {
      {"name", name},
      {"dtype", std::string(dtype_name(dtype))},
      {"backward", backward},
      {"dy", dy},
      {"inputs", inputs},
      {"nan_inputs", nan_inputs},
      {"nan_refs", nan_refs},
      {"failures", failures},
      {"passed", passed()},
      {"max_ulps", max_ulps},
      {"histogram", {{"0", histogram[0]}, {"1", histogram[1]}, {"2", histogram[2]}, {">2", histogram[3]}}},
      {"worst", worst.to_json()},
      {"spurious_naninf", spurious_naninf},
      {"seconds", seconds}};
  j["spurious"] = nlohmann::json::array();
  for (const auto& p : spurious) j["spurious"].push_back(p.to_json());
  j["failing"] = nlohmann::json::array();
  for (const auto& p : failing) j["failing"].push_back(p.to_json());
  return j;
}

std::string ExhaustiveReport::text() const {
  std::string s = fmt::format("{}{}: {} inputs ({} NaN), {} failure(s), max {} ulp\n", name,
                              backward ? fmt::format(" (dy = {})", dy) : "", inputs, nan_inputs, failures, max_ulps);
  s += fmt::format("  ulp histogram (non-NaN references): 0: {}, 1: {}, 2: {}, >2: {}\n", histogram[0], histogram[1],
                   histogram[2], histogram[3]);
  s += "  worst: " + worst.describe() + "\n";
  if (spurious_naninf == 0) {
    s += "  NaN/Inf where the reference is finite: none\n";
  } else {
    s += fmt::format("  NaN/Inf where the reference is finite: {}\n", spurious_naninf);
    for (const auto& p : spurious) s += "    " + p.describe() + "\n";
  }
  if (!failing.empty()) {
    s += fmt::format("  first failures ({} of {}):\n", failing.size(), failures);
    for (const auto& p : failing) s += "    " + p.describe() + "\n";
  }
  return s;
}

ExhaustiveReport compare_exhaustive(const ExhaustiveSweep& sw, const std::vector<uint16_t>& out) {
  ExhaustiveReport r;
  r.name = sw.name;
  r.dtype = sw.dtype;
  r.backward = sw.backward;
  r.dy = sw.dy;
  r.inputs = kPatterns;
  const std::vector<double> grid = finite_grid(sw.dtype);
  const double mx = max_finite(sw.dtype);
  bool have_worst = false;
  for (int64_t b = 0; b < kPatterns && b < static_cast<int64_t>(out.size()); ++b) {
    ExhaustivePoint p;
    p.bits = static_cast<uint16_t>(b);
    p.x = decode(sw.dtype, p.bits);
    p.out = decode(sw.dtype, out[static_cast<size_t>(b)]);
    const ExhaustiveRef ref = sw.reference(p.x, sw.backward ? sw.dy : 0.0);
    p.ref = ref.ref;
    p.tol = ref.tol;
    if (std::isnan(p.x)) ++r.nan_inputs;
    bool fail = false, spurious = false;
    if (std::isnan(p.ref)) {
      ++r.nan_refs;
      fail = !std::isnan(p.out);
      p.ulps = ulp_distance(p.out, p.ref, sw.dtype);
    } else {
      p.ulps = ulp_distance(p.out, p.ref, sw.dtype);
      const bool free = std::isinf(p.tol) || std::isnan(p.tol);  // unchecked element: any NaN/Inf too
      if (std::isinf(p.ref)) {
        fail = !((std::isinf(p.out) && std::signbit(p.out) == std::signbit(p.ref)) || (free && std::isnan(p.out)));
        p.budget = fail ? 0 : p.ulps;
      } else if (std::isnan(p.out) || std::isinf(p.out)) {
        const bool overflow_ok =
            std::isinf(p.out) && std::fabs(p.ref) + p.tol > mx && std::signbit(p.out) == std::signbit(p.ref);
        fail = !(free || overflow_ok);
        spurious = fail;
        p.budget = fail ? 0 : p.ulps;
      } else {
        p.budget = budget_of(grid, sw.dtype, p.ref, p.tol, p.out);
        fail = !(std::fabs(p.out - p.ref) <= p.tol);
        if (std::isfinite(p.out)) r.max_ulps = std::max(r.max_ulps, p.ulps);
        if (!have_worst || p.ulps > r.worst.ulps) {
          r.worst = p;
          have_worst = true;
        }
      }
      ++r.histogram[std::min<uint64_t>(p.ulps, 3)];
    }
    if (spurious) {
      ++r.spurious_naninf;
      if (r.spurious.size() < kListed) r.spurious.push_back(p);
    }
    if (fail) {
      ++r.failures;
      if (r.failing.size() < kListed) r.failing.push_back(p);
    }
  }
  return r;
}

StatusOr<ExhaustiveReport> run_exhaustive(const ExhaustiveSweep& sw, int device) {
  if (sw.dtype != DType::kF16 && sw.dtype != DType::kBF16)
    return invalid_argument(
        fmt::format("{}: exhaustive sweeps take fp16 or bf16, not {}", sw.name, dtype_name(sw.dtype)));
  if (!sw.launch || !sw.reference) return invalid_argument(sw.name + ": sweep without launcher or reference");
  if (sw.backward && !(decode(sw.dtype, encode(sw.dtype, sw.dy)) == sw.dy))
    return invalid_argument(fmt::format("{}: dy = {} is not exact in {}", sw.name, sw.dy, dtype_name(sw.dtype)));
  const auto t0 = std::chrono::steady_clock::now();
  const size_t bytes = static_cast<size_t>(kPatterns) * sizeof(uint16_t);
  std::vector<uint16_t> x(static_cast<size_t>(kPatterns)), dy(static_cast<size_t>(kPatterns)),
      out(static_cast<size_t>(kPatterns));
  for (int64_t b = 0; b < kPatterns; ++b) x[static_cast<size_t>(b)] = static_cast<uint16_t>(b);
  std::fill(dy.begin(), dy.end(), encode(sw.dtype, sw.dy));
  CUDA_CHECK(cudaSetDevice(device));
  // Freed on every path; one allocation holds x, dy and out.
  struct DevBuf {
    unsigned char* p = nullptr;
    cudaStream_t s = nullptr;
    ~DevBuf() {
      if (s != nullptr) (void)cudaStreamDestroy(s);
      if (p != nullptr) (void)cudaFree(p);
    }
  } buf;
  CUDA_CHECK(cudaMalloc(&buf.p, 3 * bytes));
  CUDA_CHECK(cudaStreamCreateWithFlags(&buf.s, cudaStreamNonBlocking));
  unsigned char *dx = buf.p, *ddy = buf.p + bytes, *dout = buf.p + 2 * bytes;
  std::vector<uint16_t> poison(static_cast<size_t>(kPatterns));
  for (auto& p : poison) write_output_poison(sw.dtype, &p);  // an unwritten element reads as NaN: a failure
  CUDA_CHECK(cudaMemcpyAsync(dx, x.data(), bytes, cudaMemcpyHostToDevice, buf.s));
  CUDA_CHECK(cudaMemcpyAsync(ddy, dy.data(), bytes, cudaMemcpyHostToDevice, buf.s));
  CUDA_CHECK(cudaMemcpyAsync(dout, poison.data(), bytes, cudaMemcpyHostToDevice, buf.s));
  const cudaError_t launched = sw.launch(dx, sw.backward ? ddy : nullptr, dout, kPatterns, buf.s);
  if (launched != cudaSuccess)
    return internal_error(fmt::format("{}: launch failed: {}", sw.name, cudaGetErrorString(launched)));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpyAsync(out.data(), dout, bytes, cudaMemcpyDeviceToHost, buf.s));
  CUDA_CHECK(cudaStreamSynchronize(buf.s));
  ExhaustiveReport r = compare_exhaustive(sw, out);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

namespace {
std::map<std::string, ExhaustiveOp>& exhaustive_registry() {
  static std::map<std::string, ExhaustiveOp> r;
  return r;
}
}  // namespace

bool register_exhaustive_op(const std::string& op, ExhaustiveOp e) {
  exhaustive_registry()[op] = std::move(e);
  return true;
}
const ExhaustiveOp* find_exhaustive_op(const std::string& op) {
  auto it = exhaustive_registry().find(op);
  return it == exhaustive_registry().end() ? nullptr : &it->second;
}
std::vector<std::string> exhaustive_ops() {
  std::vector<std::string> v;
  for (const auto& [k, e] : exhaustive_registry()) v.push_back(k);
  return v;
}

}  // namespace assay
