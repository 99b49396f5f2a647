// Verdict: pass, or a list of failures with their kind, metrics and location.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace assay {

enum class FailureKind : uint8_t {
  kBound,             ///< |out - ref| above the rounding-error ceiling
  kExact,             ///< exact-tier case not bit-identical to the reference
  kNanInf,            ///< NaN / Inf pattern differs from the reference's
  kGuard,             ///< a guard band around an allocation was overwritten
  kUnwritten,         ///< an output element still holds the poison
  kGapWritten,        ///< an element between the rows of a strided output changed
  kInputWritten,      ///< an input differs from its snapshot after the launch
  kNondeterministic,  ///< a second launch gave different bits
  kLaunchError,       ///< the launch or a later CUDA call failed
  kRejected,          ///< the kernel refused a case its spec declares valid
  kCrash,             ///< the worker died (fault, trap, abort)
  kHang,              ///< the worker outlived its watchdog
  kSanitizer,         ///< compute-sanitizer reported an error during the case
  kProjection,        ///< <v, J u> from the kernel's backward disagrees with finite differences of the fp64 forward
  kProperty,          ///< a metamorphic or structural property of the op failed (shift invariance, rows sum to 1, ...)
  kContext,           ///< the kernel left the GPU unusable: no fresh worker could start on it afterwards
};

std::string_view failure_kind_name(FailureKind k);

struct Failure {
  FailureKind kind;
  std::string tensor;        ///< which tensor ("C"), or empty
  int64_t count = 0;         ///< offending elements (or bytes for guards)
  int64_t first_index = -1;  ///< first offending element index in the allocation
  std::string detail;        ///< one line: values, position (row, col), bound
};

struct Metrics {
  double max_ratio = 0;  ///< max over elements of |out-ref| / tol (<= 1 passes)
  double max_abs_err = 0;
  int64_t worst_index = -1;       ///< element (row-major logical index) of max_ratio
  double vendor_max_ratio = -1;   ///< the vendor library's own max ratio (-1: not run)
  /// Elements where the vendor itself broke the bound (a reference disagreement); -1: not judged
  /// (this setup's arithmetic or conventions are not the vendor's declared ones, VendorDef::contract).
  int64_t vendor_violations = 0;
  /// The vendor-relative ratio (OpDef::vendor): max over elements of |out - ref| / tol divided by
  /// max over elements of max(|vendor - ref|, f) / tol, tol the element's bound and f one ulp of
  /// the output at |ref| (bounds.h vendor_floor), i.e. how many times the variant's worst
  /// error/bound is the vendor's. -1: not measured (no vendor column, the column not run, or
  /// sampled out).
  double vendor_rel_ratio = -1;
  /// The element-wise form, max over elements of |out - ref| / max(|vendor - ref|, f) (bounds.h
  /// vendor_relative_ok's rule); >= vendor_rel_ratio, and heavy-tailed for long reductions (where
  /// the vendor's error at one element may fall to the floor by chance: up to 872x for correct
  /// convolutions on an H100). Reported, not warned on. -1: not measured.
  double vendor_rel_worst = -1;
  int64_t vendor_rel_elements = 0;  ///< elements whose element-wise ratio is above the op's warning ratio
  /// Non-empty: the case is far less accurate than the vendor library (vendor_rel_ratio above
  /// OpDef::vendor.warn_ratio); one line naming the worst element. A warning, never a failure.
  std::string accuracy_warning;
  bool exact_tier = false;
  std::string reference;  ///< "host-f64", "device-f64"
  std::string key;        ///< baseline key: dtype and value class, e.g. "fp32/normal"
  /// Checks sampled out on this case (empty: every check ran), e.g.
  /// "determinism not rerun, vendor column not run (sampled)".
  std::string not_run;
};

struct Verdict {
  std::string variant;
  /// Non-empty: the case is outside this variant's contract (the rule it breaks); the
  /// variant did not run and this is neither a pass nor a failure.
  std::string not_applicable;
  std::vector<Failure> failures;
  Metrics metrics;
  bool passed() const { return failures.empty(); }
  /// "pass" or the first failure's kind and detail, one line.
  std::string summary() const;
  nlohmann::json to_json() const;
  /// Inverse of to_json (lenient and total: missing or wrongly typed fields take defaults).
  static Verdict from_json(const nlohmann::json& j);
};

}  // namespace assay
