#include "harness/verdict.h"

#include <fmt/format.h>

namespace assay {

std::string_view failure_kind_name(FailureKind k) {
  switch (k) {
    case FailureKind::kBound: return "bound";
    case FailureKind::kExact: return "exact";
    case FailureKind::kNanInf: return "nan-inf";
    case FailureKind::kGuard: return "guard";
    case FailureKind::kUnwritten: return "unwritten";
    case FailureKind::kGapWritten: return "gap-written";
    case FailureKind::kInputWritten: return "input-written";
    case FailureKind::kNondeterministic: return "nondeterministic";
    case FailureKind::kLaunchError: return "launch-error";
    case FailureKind::kRejected: return "rejected";
    case FailureKind::kCrash: return "crash";
    case FailureKind::kHang: return "hang";
  }
  return "?";
}

std::string Verdict::summary() const {
  if (passed()) return fmt::format("pass (max error/bound {:.3g})", metrics.max_ratio);
  const auto& f = failures.front();
  std::string s = fmt::format("FAIL {}", failure_kind_name(f.kind));
  if (!f.tensor.empty()) s += fmt::format(" in {}", f.tensor);
  if (f.count > 0) s += fmt::format(" ({} elements)", f.count);
  if (!f.detail.empty()) s += ": " + f.detail;
  if (failures.size() > 1) s += fmt::format(" (+{} more failure kinds)", failures.size() - 1);
  return s;
}

nlohmann::json Verdict::to_json() const {
  nlohmann::json j;
  j["variant"] = variant;
  j["passed"] = passed();
  auto& fs = j["failures"] = nlohmann::json::array();
  for (const auto& f : failures) {
    fs.push_back({{"kind", failure_kind_name(f.kind)},
                  {"tensor", f.tensor},
                  {"count", f.count},
                  {"first_index", f.first_index},
                  {"detail", f.detail}});
  }
  j["metrics"] = {{"max_ratio", metrics.max_ratio},
                  {"max_abs_err", metrics.max_abs_err},
                  {"worst_index", metrics.worst_index},
                  {"vendor_max_ratio", metrics.vendor_max_ratio},
                  {"vendor_violations", metrics.vendor_violations},
                  {"exact_tier", metrics.exact_tier},
                  {"reference", metrics.reference}};
  return j;
}

}  // namespace assay
