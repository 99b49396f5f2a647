// Accuracy baselines: per op, variant and key (dtype and value class), the
// worst error/bound of the last accepted run. A later ratio more than
// `factor` times its baseline is an accuracy regression even while the bound
// holds (a kernel that got 10x less accurate still "passes" a loose bound).
// Stored as <corpus>/baselines/<op>.json, written atomically.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"

namespace assay {

using RatioTable = std::map<std::string, std::map<std::string, double>>;  ///< variant -> key -> ratio

struct Baseline {
  std::string op;
  RatioTable ratios;
  nlohmann::json accepted;  ///< when, where and how it was measured (seed, cases, max_dim, device)
};

struct Regression {
  std::string variant, key;
  double ratio = 0, baseline = 0;
};

std::string baseline_path(const std::string& corpus_root, const std::string& op);
/// nullopt when no baseline exists; an error names the file and field.
StatusOr<std::optional<Baseline>> load_baseline(const std::string& corpus_root, const std::string& op);
/// The checks of load_baseline on a parsed document; `path` prefixes errors.
StatusOr<std::optional<Baseline>> baseline_from_json(const nlohmann::json& j, const std::string& path,
                                                     const std::string& op);
Status save_baseline(const std::string& corpus_root, const Baseline& b);

/// Ratios above factor * baseline (and above `noise`, below which ratios are
/// rounding noise of exact or nearly exact results); keys the baseline lacks
/// are new, not regressions.
std::vector<Regression> find_regressions(const Baseline& b, const RatioTable& now, double factor = 2.0,
                                         double noise = 1e-3);

}  // namespace assay
