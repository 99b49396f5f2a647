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
    case FailureKind::kContext:
      return "context";
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
  for (int k = 0; k <= static_cast<int>(FailureKind::kContext); ++k)
    if (failure_kind_name(static_cast<FailureKind>(k)) == name) return static_cast<FailureKind>(k);
  return std::nullopt;
}

Verdict Verdict::from_json(const nlohmann::json& j) {
  // Total: whatever `j` holds (it may come from a file or a dying worker),
  // wrongly typed fields take their defaults; nothing throws.
  auto str = [](const nlohmann::json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto num = [](const nlohmann::json& o, const char* k, double d) {
    auto it = o.find(k);
    return it != o.end() && it->is_number() ? it->get<double>() : d;
  };
  auto integer = [](const nlohmann::json& o, const char* k, int64_t d) {
    auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : d;
  };
  Verdict v;
  if (!j.is_object()) {
    v.failures.push_back(Failure{FailureKind::kCrash, "", 0, -1, "unreadable verdict"});
    return v;
  }
  v.variant = str(j, "variant");
  if (auto it = j.find("not_applicable"); it != j.end() && it->is_string()) v.not_applicable = it->get<std::string>();
  if (auto it = j.find("failures"); it != j.end() && it->is_array()) {
    for (const auto& f : *it) {
      if (!f.is_object()) continue;
      auto kind = parse_failure_kind(str(f, "kind"));
      v.failures.push_back(Failure{kind.value_or(FailureKind::kCrash), str(f, "tensor"), integer(f, "count", 0),
                                   integer(f, "first_index", -1), str(f, "detail")});
    }
  }
  if (auto it = j.find("metrics"); it != j.end() && it->is_object()) {
    const auto& m = *it;
    v.metrics.max_ratio = num(m, "max_ratio", 0);
    v.metrics.max_abs_err = num(m, "max_abs_err", 0);
    v.metrics.worst_index = integer(m, "worst_index", -1);
    v.metrics.vendor_max_ratio = num(m, "vendor_max_ratio", -1);
    v.metrics.vendor_violations = integer(m, "vendor_violations", 0);
    v.metrics.vendor_rel_ratio = num(m, "vendor_rel_ratio", -1);
    v.metrics.vendor_rel_worst = num(m, "vendor_rel_worst", -1);
    v.metrics.vendor_rel_elements = integer(m, "vendor_rel_elements", 0);
    v.metrics.accuracy_warning = str(m, "accuracy_warning");
    auto et = m.find("exact_tier");
    v.metrics.exact_tier = et != m.end() && et->is_boolean() && et->get<bool>();
    v.metrics.reference = str(m, "reference");
    v.metrics.key = str(m, "key");
    v.metrics.not_run = str(m, "not_run");
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
                  {"vendor_rel_ratio", metrics.vendor_rel_ratio},
                  {"vendor_rel_worst", metrics.vendor_rel_worst},
                  {"vendor_rel_elements", metrics.vendor_rel_elements},
                  {"exact_tier", metrics.exact_tier},
                  {"reference", metrics.reference},
                  {"key", metrics.key}};
  if (!metrics.not_run.empty()) j["metrics"]["not_run"] = metrics.not_run;
  if (!metrics.accuracy_warning.empty()) j["metrics"]["accuracy_warning"] = metrics.accuracy_warning;
  return j;
}

}  // namespace assay
