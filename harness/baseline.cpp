#include "harness/baseline.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "harness/corpus.h"

namespace assay {

std::string baseline_path(const std::string& corpus_root, const std::string& op) {
  return (std::filesystem::path(corpus_root) / "baselines" / (op + ".json")).string();
}

StatusOr<std::optional<Baseline>> load_baseline(const std::string& corpus_root, const std::string& op) {
  const std::string path = baseline_path(corpus_root, op);
  std::ifstream in(path);
  if (!in) return std::optional<Baseline>{};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    return data_loss(fmt::format("{}: not valid JSON (byte {})", path, e.byte));
  }
  if (!j.is_object() || !j.contains("ratios") || !j["ratios"].is_object())
    return data_loss(fmt::format("{}: $.ratios: missing or not an object", path));
  Baseline b;
  b.op = j.value("op", op);
  for (const auto& [variant, keys] : j["ratios"].items()) {
    if (!keys.is_object()) return data_loss(fmt::format("{}: $.ratios.{}: not an object", path, variant));
    for (const auto& [key, v] : keys.items()) {
      if (!v.is_number()) return data_loss(fmt::format("{}: $.ratios.{}.{}: not a number", path, variant, key));
      b.ratios[variant][key] = v.get<double>();
    }
  }
  if (j.contains("accepted")) b.accepted = j["accepted"];
  return std::optional<Baseline>{std::move(b)};
}

Status save_baseline(const std::string& corpus_root, const Baseline& b) {
  nlohmann::json j;
  j["format"] = 1;
  j["op"] = b.op;
  j["ratios"] = nlohmann::json::object();
  for (const auto& [variant, keys] : b.ratios)
    for (const auto& [key, v] : keys) j["ratios"][variant][key] = v;
  j["accepted"] = b.accepted;
  return write_file_atomic(baseline_path(corpus_root, b.op), j.dump(2) + "\n");
}

std::vector<Regression> find_regressions(const Baseline& b, const RatioTable& now, double factor, double noise) {
  std::vector<Regression> out;
  for (const auto& [variant, keys] : now) {
    auto bv = b.ratios.find(variant);
    if (bv == b.ratios.end()) continue;
    for (const auto& [key, ratio] : keys) {
      auto bk = bv->second.find(key);
      if (bk == bv->second.end()) continue;
      if (ratio > noise && ratio > factor * bk->second) out.push_back({variant, key, ratio, bk->second});
    }
  }
  return out;
}

}  // namespace assay
