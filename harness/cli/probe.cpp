#include "harness/cli/probe.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "harness/corpus.h"
#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/worker.h"

namespace assay {

std::string RuleBehaviour::verdict() const {
  if (crashed > 0) return "crashes";
  if (corrupted > 0) return "corrupts silently";
  if (rejected == probes) return "rejects cleanly";
  if (correct == probes) return "computes correctly";
  return "mixed";
}

std::vector<std::string> contract_lines(const OpSpec& spec, const std::string& variant) {
  const Contract* k = spec.contract(variant);
  if (k == nullptr || k->empty()) return {"(no contract: any case of the op)"};
  return k->describe();
}

StatusOr<std::vector<RuleBehaviour>> probe_contracts(const OpSpec& spec, const ProbeOptions& o) {
  std::vector<std::string> variants = o.variants;
  if (variants.empty())
    for (const auto& v : spec.default_variants())
      if (const Contract* k = spec.contract(v); k != nullptr && !k->rules().empty()) variants.push_back(v);
  for (const auto& v : variants)
    if (!spec.has_variant(v)) return not_found(fmt::format("op '{}' has no variant '{}'", spec.name(), v));
  ASSAY_ASSIGN_OR_RETURN(int ndev, gpu::device_count());
  if (o.device < 0 || o.device >= ndev) return invalid_argument(fmt::format("device {} does not exist", o.device));
  RunOptions run;
  run.probe = true;
  std::unique_ptr<Executor> exec;
  if (o.worker_binary.empty()) {
    ASSAY_ASSIGN_OR_RETURN(exec, make_in_process_executor(spec, GenPlan{}, 1, o.device, run));
  } else {
    ProcessOptions po;
    po.binary = o.worker_binary;
    po.devices = {o.device};
    po.lanes = 1;
    po.case_timeout_s = o.case_timeout_s;
    po.run = run;
    ASSAY_ASSIGN_OR_RETURN(exec, make_process_executor(spec.name(), GenPlan{}, po));
  }
  std::vector<RuleBehaviour> out;
  for (const auto& v : variants) {
    // Probes derived from cases drawn inside the contract, so only the probed rule is broken.
    GenPlan plan{o.seed, GenConfig{o.max_dim, v}, {v}};
    std::map<std::string, RuleBehaviour> by_rule;
    std::vector<std::string> order;
    std::vector<Probe> probes;
    for (int64_t i = 0; i < o.per_rule; ++i) {
      Case inside = generate_case(spec, plan, i);
      inside.variant = v;
      for (auto& p : spec.probes(v, inside)) probes.push_back(std::move(p));
    }
    std::set<std::string> seen;
    for (const auto& p : probes) {
      const std::string key = p.rule + "\n" + p.c.id();
      if (!seen.insert(key).second) continue;
      exec->submit({0, std::nullopt, p.c, {v}});
      JobResult r = exec->wait();
      if (!r.status.ok()) return r.status;
      auto [it, fresh] = by_rule.try_emplace(p.rule);
      RuleBehaviour& b = it->second;
      if (fresh) order.push_back(p.rule), b.variant = v, b.rule = p.rule;
      ++b.probes;
      const Verdict& vd = r.verdicts.front();
      bool crash = false, reject = false;
      for (const auto& f : vd.failures) {
        crash = crash || f.kind == FailureKind::kCrash || f.kind == FailureKind::kHang ||
                f.kind == FailureKind::kSanitizer;
        reject = reject || f.kind == FailureKind::kRejected;
      }
      if (vd.passed()) {
        ++b.correct;
      } else if (crash) {
        ++b.crashed;
        if (b.example.empty()) b.example = p.how;
      } else if (reject && vd.failures.size() == 1) {
        ++b.rejected;
      } else {
        ++b.corrupted;
        if (b.example.empty()) b.example = p.how + ": " + vd.summary();
        for (const auto& f : vd.failures) {
          const std::string k(failure_kind_name(f.kind));
          if (std::find(b.kinds.begin(), b.kinds.end(), k) == b.kinds.end()) b.kinds.push_back(k);
        }
      }
    }
    for (const auto& rule : order) out.push_back(by_rule[rule]);
    if (order.empty())
      fmt::print("{} [{}]: no rule could be stepped outside of (no contract rule, or none reachable)\n", spec.name(),
                 v);
  }
  for (const auto& b : out) {
    fmt::print("{} [{}] outside '{}': {} ({} probes: {} rejected, {} correct, {} corrupted, {} crashed){}\n",
               spec.name(), b.variant, b.rule, b.verdict(), b.probes, b.rejected, b.correct, b.corrupted, b.crashed,
               b.kinds.empty() ? "" : fmt::format(" [{}]", fmt::join(b.kinds, ", ")));
    if (!b.example.empty()) fmt::print("    e.g. {}\n", b.example);
    if (b.corrupted > 0 || b.crashed > 0)
      fmt::print("    -> the launcher must refuse cases breaking '{}' (return an error) or the kernel must handle them\n",
                 b.rule);
  }
  if (!o.json.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& b : out)
      j.push_back({{"variant", b.variant}, {"rule", b.rule}, {"behaviour", b.verdict()}, {"probes", b.probes},
                   {"rejected", b.rejected}, {"correct", b.correct}, {"corrupted", b.corrupted},
                   {"crashed", b.crashed}, {"failure_kinds", b.kinds}, {"example", b.example}});
    ASSAY_RETURN_IF_ERROR(write_file_atomic(o.json, nlohmann::json{{"op", spec.name()}, {"probes", j}}.dump(2) + "\n"));
  }
  return out;
}

}  // namespace assay
