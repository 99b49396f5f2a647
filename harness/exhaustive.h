// Exhaustive sweeps of elementwise kernels over a 16-bit dtype: every one of the 2^16 bit
// patterns of fp16 or bf16 (NaNs, infinities, subnormals and both zeros included) goes through
// one launch on a contiguous buffer, and each output is compared with its fp64 reference in
// ulps of the dtype. The op supplies the launcher and, per input, the reference value and the
// absolute tolerance its spec uses, so the sweep and the fuzzer hold a kernel to one bound.
//
// Per element, with r = ref, t = tol (the same rules as the device check of the testbeds):
//   r NaN: the output must be NaN;  r +-Inf: the output must be the same Inf;
//   r finite: a finite output must lie in [r - t, r + t]; an Inf output is allowed only where
//   |r| + t passes the dtype's largest finite value (with r's sign); NaN is a failure.
// Ulp error = ulp_distance(out, r, dtype) (harness/bounds.h). The budget of an element is the
// number of representable steps from RN(r) to the farthest value of the dtype still within
// [r - t, r + t] on the output's side: ceil(t / ulp_of(r)) away from binade edges, one more at
// an edge below r where the spacing halves. Where RN(r) is itself within the tolerance (as every
// tolerance that includes the output's half-ulp rounding ensures), a finite output fails exactly
// when its ulp error exceeds its budget.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "harness/dtype.h"
#include "harness/status.h"

namespace assay {

/// Reference value and absolute tolerance of one output element.
struct ExhaustiveRef {
  double ref = 0;
  double tol = 0;
};

struct ExhaustiveSweep {
  std::string name;            ///< e.g. "activation[elementwise] gelu_erf bf16"
  DType dtype = DType::kBF16;  ///< fp16 or bf16
  bool backward = false;       ///< the kernel takes a second input dy (every element = `dy`)
  double dy = 1;               ///< upstream gradient of a backward sweep (must be exact in dtype)
  /// Launches on n contiguous elements of `dtype`: x, dy (null unless backward), out. Must not sync.
  std::function<cudaError_t(const void* x, const void* dy, void* out, int64_t n, cudaStream_t)> launch;
  /// Reference and tolerance of the output at input x (and dy), from the op's spec.
  std::function<ExhaustiveRef(double x, double dy)> reference;
};

/// One element of a sweep, for the report.
struct ExhaustivePoint {
  uint16_t bits = 0;  ///< the input's bit pattern
  double x = 0, out = 0, ref = 0, tol = 0;
  uint64_t ulps = 0;    ///< ulp_distance(out, ref); UINT64_MAX for a NaN against a number
  uint64_t budget = 0;  ///< see the header
  nlohmann::json to_json() const;
  std::string describe() const;  ///< one line
};

struct ExhaustiveReport {
  std::string name;
  DType dtype = DType::kBF16;
  bool backward = false;
  double dy = 1;
  int64_t inputs = 0;      ///< 65536
  int64_t nan_inputs = 0;  ///< inputs that are NaN (their reference is NaN)
  int64_t nan_refs = 0;    ///< elements whose reference is NaN (NaN inputs and e.g. act(-inf))
  int64_t failures = 0;    ///< elements beyond their budget or with the wrong NaN/Inf pattern
  uint64_t max_ulps = 0;   ///< largest ulp error over elements with a non-NaN reference and finite output
  /// Elements with a non-NaN reference at 0, 1, 2 and more than 2 ulps (NaN/Inf outputs where the
  /// reference is finite count as more than 2).
  std::array<int64_t, 4> histogram{};
  ExhaustivePoint worst;        ///< largest ulp error (first in bit order on ties)
  int64_t spurious_naninf = 0;  ///< NaN or Inf outputs where the reference is finite (not an allowed overflow)
  std::vector<ExhaustivePoint> spurious;  ///< the first 16 of them
  std::vector<ExhaustivePoint> failing;   ///< the first 16 failures
  double seconds = 0;                     ///< launch, copies and comparison

  bool passed() const { return failures == 0; }
  nlohmann::json to_json() const;
  /// A few lines: counts, histogram, worst input, spurious NaN/Inf, first failures.
  std::string text() const;
};

/// Runs the sweep on `device`. Errors: invalid arguments (dtype, missing callbacks), CUDA
/// failures (internal); a kernel that returns a launch error is an internal error too.
StatusOr<ExhaustiveReport> run_exhaustive(const ExhaustiveSweep& sweep, int device);

/// The comparison alone (host, no GPU): the report for outputs `out` (2^16 elements in the
/// dtype's bit patterns, index = input bits), as run_exhaustive builds it.
ExhaustiveReport compare_exhaustive(const ExhaustiveSweep& sweep, const std::vector<uint16_t>& out);

/// An op that offers exhaustive sweeps (registered by its spec, so the CLI needs no op's
/// header): its functions (e.g. "gelu_erf"), a variant check, and the sweep itself.
struct ExhaustiveOp {
  std::vector<std::string> functions;
  std::function<bool(const std::string& variant)> has_variant;
  std::function<StatusOr<ExhaustiveReport>(const std::string& variant, const std::string& function, DType dt,
                                           int device)>
      run;
};
bool register_exhaustive_op(const std::string& op, ExhaustiveOp e);
/// nullptr when `op` has no sweeps.
const ExhaustiveOp* find_exhaustive_op(const std::string& op);
/// Names of the ops with sweeps, sorted.
std::vector<std::string> exhaustive_ops();

}  // namespace assay
