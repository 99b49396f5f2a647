#include "harness/verdict.h"

#include <optional>

#include <fmt/format.h>

namespace assay {

std::string_view failure_kind_name(FailureKind k) {
  switch (k) {
    case FailureKind::kBound:
      return "bound";
    case FailureKind::kExact:
      return "exact";
    case FailureKind::kNanInf:
      return "nan-inf";
    case FailureKind::kGuard:
      return "guard";
    case FailureKind::kUnwritten:
      return "unwritten";
    case FailureKind::kGapWritten:
      return "gap-written";
    case FailureKind::kInputWritten:
      return "input-written";
    case FailureKind::kNondeterministic:
      return "nondeterministic";
    case FailureKind::kLaunchError:
      return "launch-error";
    case FailureKind::kRejected:
      return "rejected";
    case FailureKind::kCrash:
      return "crash";
    case FailureKind::kHang:
      return "hang";
    case FailureKind::kSanitizer:
      return "sanitizer";
    case FailureKind::kProperty:
      return "property";
    case FailureKind::kProjection:
      return "projection";
  }
  return "?";
}

std::string Verdict::summary() const {
  if (!not_applicable.empty()) return "not applicable: outside the contract, " + not_applicable;
  if (passed()) return fmt::format("pass (max error/bound {:.3g})", metrics.max_ratio);
  const auto& f = failures.front();
  std::string s = fmt::format("FAIL {}", failure_kind_name(f.kind));
  if (!f.tensor.empty()) s += fmt::format(" in {}", f.tensor);
  if (f.count > 0) s += fmt::format(" ({} elements)", f.count);
  if (!f.detail.empty()) s += ": " + f.detail;
  if (failures.size() > 1) s += fmt::format(" (+{} more failure kinds)", failures.size() - 1);
  return s;
}

std::optional<FailureKind> parse_failure_kind(std::string_view name) {
  for (int k = 0; k <= static_cast<int>(FailureKind::kProperty); ++k)
    if (failure_kind_name(static_cast<FailureKind>(k)) == name) return static_cast<FailureKind>(k);
  return std::nullopt;
}

Verdict Verdict::from_json(const nlohmann::json& j) {
  Verdict v;
  v.variant = j.value("variant", "");
  if (auto it = j.find("not_applicable"); it != j.end() && it->is_string()) v.not_applicable = it->get<std::string>();
  if (auto it = j.find("failures"); it != j.end() && it->is_array()) {
    for (const auto& f : *it) {
      auto kind = parse_failure_kind(f.value("kind", ""));
      v.failures.push_back(Failure{kind.value_or(FailureKind::kCrash), f.value("tensor", ""),
                                   f.value("count", int64_t{0}), f.value("first_index", int64_t{-1}),
                                   f.value("detail", "")});
    }
  }
  if (auto it = j.find("metrics"); it != j.end() && it->is_object()) {
    const auto& m = *it;
    auto num = [&](const char* k, double d) { return m.contains(k) && m[k].is_number() ? m[k].get<double>() : d; };
    v.metrics.max_ratio = num("max_ratio", 0);
    v.metrics.max_abs_err = num("max_abs_err", 0);
    v.metrics.worst_index = m.value("worst_index", int64_t{-1});
    v.metrics.vendor_max_ratio = num("vendor_max_ratio", -1);
    v.metrics.vendor_violations = m.value("vendor_violations", int64_t{0});
    v.metrics.exact_tier = m.value("exact_tier", false);
    v.metrics.reference = m.value("reference", "");
    v.metrics.key = m.value("key", "");
    v.metrics.not_run = m.value("not_run", "");
  }
  return v;
}

nlohmann::json Verdict::to_json() const {
  nlohmann::json j;
  j["variant"] = variant;
  j["passed"] = passed();
  if (!not_applicable.empty()) j["not_applicable"] = not_applicable;
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
                  {"reference", metrics.reference},
                  {"key", metrics.key}};
  if (!metrics.not_run.empty()) j["metrics"]["not_run"] = metrics.not_run;
  return j;
}

}  // namespace assay
