#include "harness/baseline.h"

#include <filesystem>

#include <fmt/format.h>

#include "harness/corpus.h"
#include "harness/json_file.h"

namespace assay {

std::string baseline_path(const std::string& corpus_root, const std::string& op) {
  return (std::filesystem::path(corpus_root) / "baselines" / (op + ".json")).string();
}

StatusOr<std::optional<Baseline>> load_baseline(const std::string& corpus_root, const std::string& op) {
  const std::string path = baseline_path(corpus_root, op);
  auto read = read_json_file(path);
  if (!read.ok()) {
    if (read.status().code() == StatusCode::kNotFound) return std::optional<Baseline>{};
    return read.status();
  }
  return baseline_from_json(*read, path, op);
}

StatusOr<std::optional<Baseline>> baseline_from_json(const nlohmann::json& j, const std::string& path,
                                                     const std::string& op) {
  if (!j.is_object()) return data_loss(fmt::format("{}: $: expected an object, got {}", path, j.type_name()));
  auto rt = j.find("ratios");
  if (rt == j.end() || !rt->is_object())
    return data_loss(fmt::format("{}: $.ratios: missing or not an object", path));
  Baseline b;
  b.op = op;
  if (auto it = j.find("op"); it != j.end()) {
    if (!it->is_string()) return data_loss(fmt::format("{}: $.op: expected a string, got {}", path, it->type_name()));
    b.op = it->get<std::string>();
  }
  for (const auto& [variant, keys] : rt->items()) {
    const std::string vp = "$.ratios" + json_path_key(variant);
    if (!keys.is_object()) return data_loss(fmt::format("{}: {}: expected an object, got {}", path, vp, keys.type_name()));
    for (const auto& [key, v] : keys.items()) {
      const std::string kp = vp + json_path_key(key);
      if (!v.is_number()) return data_loss(fmt::format("{}: {}: expected a number, got {}", path, kp, v.type_name()));
      const double r = v.get<double>();
      if (!(r >= 0)) return data_loss(fmt::format("{}: {}: a ratio must be 0 or more, got {}", path, kp, v.dump()));
      b.ratios[variant][key] = r;
    }
  }
  if (auto it = j.find("accepted"); it != j.end()) {
    if (!it->is_object())
      return data_loss(fmt::format("{}: $.accepted: expected an object, got {}", path, it->type_name()));
    // `assay baseline check` re-runs the accepted campaign from these.
    for (const char* k : {"cases", "seed", "max_dim"}) {
      auto f = it->find(k);
      if (f == it->end()) continue;
      if (!f->is_number_integer() || (!f->is_number_unsigned() && f->get<int64_t>() < 0))
        return data_loss(fmt::format("{}: $.accepted.{}: expected an integer of 0 or more, got {}", path, k,
                                     printable(f->dump(), 40)));
    }
    b.accepted = *it;
  }
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
