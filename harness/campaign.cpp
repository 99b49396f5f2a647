#include "harness/campaign.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "harness/interrupt.h"
#include "harness/op_model.h"
#include "harness/shrink.h"
#include "harness/worker.h"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

nlohmann::json found_json(const FoundFailure& f, const std::string& device, const OpSpec& spec,
                          const CampaignOptions& opts) {
  std::string source;
  for (const auto& v : spec.variants())
    if (v.name == f.variant) source = v.source;
  // RapidCheck's own reproduce string does not apply: assay drives the
  // generator itself, and (seed, case index, max dim) regenerate the
  // original case; the stored (shrunk) case needs no generator at all.
  return {{"variant", f.variant},
          {"verdict", f.verdict.to_json()},
          {"kernel_source", {{"path", source}, {"sha256", source.empty() ? "" : source_hash(source.c_str())}}},
          {"assay_version", ASSAY_VERSION},
          {"device", device},
          {"campaign",
           {{"seed", opts.seed},
            {"case_index", f.case_index},
            {"max_dim", opts.gen.max_dim},
            {"original_id", f.original.id()},
            {"regenerate", fmt::format("{} fuzz {} --variant {} --seed {} --max-dim {} (case #{})", program_name(), spec.name(),
                                       f.variant, opts.seed, opts.gen.max_dim, f.case_index)}}},
          {"shrink", {{"steps", f.shrink_steps}, {"evaluations", f.shrink_evals}, {"state", f.shrink_state}}}};
}

StatusOr<CampaignReport> run_campaign(const OpSpec& spec, const CampaignOptions& opts_in) {
  CampaignOptions opts = opts_in;
  if (opts.variants.empty()) opts.variants = spec.default_variants();
  for (const auto& v : opts.variants)
    if (!spec.has_variant(v)) return not_found(fmt::format("op '{}' has no variant '{}'", spec.name(), v));
  if (opts.max_cases == 0 && opts.max_seconds == 0) opts.max_cases = 1000;
  if (opts.lanes < 1) return invalid_argument("--lanes must be at least 1");
  if (opts.shard_count < 1 || opts.shard_index < 0 || opts.shard_index >= opts.shard_count)
    return invalid_argument(
        fmt::format("--shard {}/{} is not of the form i/N with 0 <= i < N", opts.shard_index, opts.shard_count));
  if (opts.devices.empty()) return invalid_argument("no devices to run on");
  // Worker processes check their own device: the parent needs no GPU then. A forked worker
  // must not inherit a CUDA context, so the parent does not touch CUDA at all.
  if (!opts.fork_worker) {
    if (auto ndev = gpu::device_count(); ndev.ok()) {
      for (int d : opts.devices)
        if (d < 0 || d >= *ndev)
          return invalid_argument(fmt::format("device {} does not exist ({} visible)", d, *ndev));
    } else if (opts.worker_binary.empty()) {
      return ndev.status();
    }
  }
  if (!opts.corpus_dir.empty()) clean_stale_temps(opts.corpus_dir);

  const GenPlan plan{opts.seed, opts.gen, opts.variants};
  std::unique_ptr<Executor> exec;
  if (opts.worker_binary.empty() && !opts.fork_worker) {
    if (!opts.sanitize.empty()) return invalid_argument("--sanitize needs worker processes");
    ASSAY_ASSIGN_OR_RETURN(exec, make_in_process_executor(spec, plan, opts.lanes, opts.devices.front(), opts.run));
  } else {
    ProcessOptions po;
    po.binary = opts.worker_binary;
    po.devices = opts.devices;
    po.lanes = opts.lanes;
    po.case_timeout_s = opts.case_timeout_s;
    po.sanitize = opts.sanitize;
    po.run = opts.run;
    po.fork_worker = opts.fork_worker;
    ASSAY_ASSIGN_OR_RETURN(exec, make_process_executor(spec.name(), plan, po));
  }

  CampaignReport report;
  report.op = spec.name();
  report.device = exec->device();
  report.lanes = opts.lanes;
  if (const OpDef* def = find_op(spec.name()); def != nullptr && def->vendor.defined()) {
    report.vendor = def->vendor.name;
    report.vendor_warn_ratio = def->vendor.warn_ratio;
  }
  const auto t0 = Clock::now();
  auto last_progress = t0;
  // Per-variant time: the wall time between two fuzzing results is split among the variants of
  // the later one, and a variant's shrinking is its own; the shares add up to the campaign's time.
  double last_result_s = 0;

  std::vector<std::string> active = opts.variants;
  struct ToShrink {
    int64_t index;
    std::string variant;
    Verdict verdict;
    double found_at;
    std::string path;  // its unshrunk entry, stored when found
  };
  std::vector<ToShrink> to_shrink;
  int64_t next_local = 0;  // k-th case of this shard: global index shard_index + k*shard_count
  Status infra;
  auto global_index = [&](int64_t local) { return opts.shard_index + local * opts.shard_count; };

  auto budget_left = [&] {
    if (stop_signal() != 0) return false;
    if (opts.max_cases > 0 && next_local >= opts.max_cases) return false;
    if (opts.max_seconds > 0 && since(t0) >= opts.max_seconds) return false;
    return true;
  };
  // Shrinking ends at --shrink-time per failure and at --time for the campaign.
  auto shrink_deadline = [&](Clock::time_point start) {
    auto d = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.max_shrink_seconds));
    if (opts.max_seconds > 0)
      d = std::min(d, t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.max_seconds)));
    return d;
  };
  Clock::time_point current_deadline = Clock::time_point::max();
  auto report_progress = [&](bool shrinking) {
    if (!opts.progress || since(last_progress) < 1.0) return;
    last_progress = Clock::now();
    CampaignProgress p;
    p.cases = report.cases;
    p.failures = static_cast<int64_t>(report.failures.size() + to_shrink.size());
    p.elapsed_s = since(t0);
    p.time_left_s = opts.max_seconds > 0 ? std::max(0.0, opts.max_seconds - p.elapsed_s) : -1;
    p.shrinking = shrinking;
    opts.progress(p);
  };

  // Runs `cases` for one variant; index of the first failing one. Job ids of
  // shrink runs are negative so they never meet fuzzing ids.
  int64_t next_shrink_id = -1;
  auto first_failing = [&](const std::vector<Case>& cases, const std::string& variant,
                           std::vector<Verdict>& verdicts) -> std::optional<size_t> {
    std::map<int64_t, size_t> slot;
    for (size_t i = 0; i < cases.size(); ++i) {
      const int64_t id = next_shrink_id--;
      slot[id] = i;
      exec->submit({id, std::nullopt, cases[i], {variant}});
    }
    std::vector<std::optional<Verdict>> got(cases.size());
    bool cut = false;
    for (size_t pending = cases.size(); pending > 0;) {
      JobResult r = exec->wait_until(current_deadline);
      if (r.interrupted) {
        // Out of shrink time, or a stop: judge nothing more in this batch.
        // The jobs still out come back later and are dropped (negative ids).
        cut = true;
        break;
      }
      auto it = slot.find(r.id);
      if (it == slot.end()) {
        if (r.status.ok()) continue;  // a job cut off from an earlier batch
        if (infra.ok()) infra = r.status;
        break;
      }
      --pending;
      if (!r.status.ok()) {
        if (infra.ok()) infra = r.status;
        continue;
      }
      if (!r.verdicts.empty()) got[it->second] = r.verdicts.front();
    }
    verdicts.clear();
    for (auto& g : got) verdicts.push_back(g ? *g : Verdict{});
    // First failing in order, and only if every earlier candidate was judged:
    // the result must not depend on which jobs came back before a cut.
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!got[i]) {
        if (cut) return std::nullopt;
        continue;
      }
      if (!got[i]->passed()) return i;
    }
    return std::nullopt;
  };

  auto store = [&](FoundFailure& f, const std::string& old_path) {
    if (opts.corpus_dir.empty()) return;
    auto path = replace_entry(opts.corpus_dir, old_path, f.shrunk, found_json(f, report.device, spec, opts));
    if (path.ok())
      f.path = *path;
    else if (infra.ok())
      infra = path.status();
  };

  auto base_failure = [&](const ToShrink& item) {
    FoundFailure f;
    f.variant = item.variant;
    f.original = generate_case(spec, plan, item.index);
    f.original.variant = item.variant;
    f.shrunk = f.original;
    f.verdict = item.verdict;
    f.case_index = item.index;
    f.seconds_to_find = item.found_at;
    return f;
  };

  // Stored at once, unshrunk: a campaign killed while shrinking loses nothing.
  auto store_found = [&](ToShrink& item) {
    if (opts.corpus_dir.empty()) return;
    FoundFailure f = base_failure(item);
    f.shrink_state = "pending";
    // An entry of this very case that another shard or campaign stored is theirs:
    // kept, and not removed when the shrunk case is stored.
    std::error_code ec;
    const bool theirs = std::filesystem::exists(entry_path(opts.corpus_dir, f.shrunk), ec);
    store(f, "");
    if (!theirs) item.path = f.path;
  };

  auto shrink = [&](ToShrink& item) {
    FoundFailure f = base_failure(item);
    Verdict cur_verdict = item.verdict;
    const auto ts = Clock::now();
    std::vector<Verdict> last_verdicts;
    BatchJudge judge = [&](const std::vector<Case>& batch) -> std::optional<size_t> {
      report_progress(true);
      if (!infra.ok() || stop_signal() != 0) return std::nullopt;
      return first_failing(batch, item.variant, last_verdicts);
    };
    // A crash or hang costs a worker restart per candidate: shrink those less.
    // After a context failure the GPU is gone: nothing can be judged.
    const auto has = [&](FailureKind k) {
      return std::any_of(item.verdict.failures.begin(), item.verdict.failures.end(),
                         [&](const Failure& x) { return x.kind == k; });
    };
    const bool costly = has(FailureKind::kCrash) || has(FailureKind::kHang) || has(FailureKind::kSanitizer);
    const bool skip = has(FailureKind::kContext) || !infra.ok() || stop_signal() != 0;
    current_deadline = shrink_deadline(ts);
    ShrinkLimits limits{costly ? std::min(opts.max_shrink_evals, 60) : opts.max_shrink_evals,
                        std::chrono::duration<double>(current_deadline - ts).count(),
                        static_cast<size_t>(std::max<int64_t>(1, exec->capacity() / 3))};
    if (skip) {
      f.shrink_state = stop_signal() != 0 ? "interrupted" : "skipped";
    } else {
      ShrinkOutcome so = shrink_case(spec, f.original, judge, limits,
                                     [&](const Case&, size_t hit) { cur_verdict = last_verdicts[hit]; });
      f.shrunk = so.minimal;
      f.shrunk.variant = item.variant;
      f.shrink_steps = so.steps;
      f.shrink_evals = so.evals;
      f.verdict = cur_verdict;
      f.shrink_state = stop_signal() != 0 ? "interrupted" : (so.stopped_by_limit || Clock::now() >= current_deadline)
                                                               ? "limit"
                                                               : "done";
    }
    current_deadline = Clock::time_point::max();
    f.seconds_to_shrink = since(ts);
    report.per_variant[item.variant].seconds += f.seconds_to_shrink;
    store(f, item.path);
    report.failures.push_back(std::move(f));
  };

  while (infra.ok()) {
    // A failure pauses new cases so the executor drains and shrinking starts at once.
    while (to_shrink.empty() && exec->outstanding() < exec->capacity() && !active.empty() && budget_left()) {
      const int64_t index = global_index(next_local++);
      exec->submit({index, index, Case{}, active});
    }
    if (exec->outstanding() == 0 || stop_signal() != 0) break;
    JobResult r = exec->wait();
    if (r.interrupted) break;  // a stop: outstanding jobs are abandoned, the workers killed
    if (r.id < 0) continue;    // a shrink candidate cut off by its deadline
    if (!r.status.ok()) {
      infra = r.status;
      break;
    }
    ++report.cases;
    const double now_s = since(t0);
    const double share_s = r.verdicts.empty() ? 0 : (now_s - last_result_s) / static_cast<double>(r.verdicts.size());
    last_result_s = now_s;
    bool first = true;
    for (const auto& v : r.verdicts) {
      auto& st = report.per_variant[v.variant];
      if (!v.not_applicable.empty()) {  // outside this variant's contract: neither pass nor failure
        ++st.not_applicable;
        continue;
      }
      ++st.cases;
      st.seconds += share_s;
      if (first) {
        report.exact_cases += v.metrics.exact_tier ? 1 : 0;
        report.device_ref_cases += v.metrics.reference == "device-f64" ? 1 : 0;
        report.vendor_disagreements += v.metrics.vendor_violations > 0 ? 1 : 0;
        first = false;
      }
      tally_vendor(st, v);
      if (v.passed()) {
        st.max_ratio = std::max(st.max_ratio, v.metrics.max_ratio);
        if (!v.metrics.key.empty()) {
          double& worst = report.ratios[v.variant][v.metrics.key];
          worst = std::max(worst, v.metrics.max_ratio);
        }
        continue;
      }
      ++st.failures;
      const bool still_active = std::find(active.begin(), active.end(), v.variant) != active.end();
      const bool queued =
          std::any_of(to_shrink.begin(), to_shrink.end(), [&](const ToShrink& t) { return t.variant == v.variant; });
      if ((still_active || opts.keep_going) && !queued) {
        to_shrink.push_back({r.id, v.variant, v, since(t0), ""});
        store_found(to_shrink.back());
        if (!opts.keep_going) active.erase(std::remove(active.begin(), active.end(), v.variant), active.end());
      }
    }
    report_progress(false);
    // Shrink once the executor has drained, so shrink batches own every lane.
    if (exec->outstanding() == 0 && !to_shrink.empty()) {
      for (auto& item : to_shrink) shrink(item);
      to_shrink.clear();
      last_result_s = since(t0);  // the shrinking was charged to its variants
    }
  }
  // Failures not yet shrunk (a stop, an infrastructure error): kept as found.
  for (auto& item : to_shrink) shrink(item);
  report.seconds = since(t0);
  report.recovery = exec->recovery();
  report.interrupted = stop_signal();
  if (!infra.ok()) {
    if (report.failures.empty()) return infra;
    report.infra = infra;
  }
  return report;
}

void tally_vendor(VariantStats& st, const Verdict& v) {
  if (st.vendor_not_run.empty()) {
    // The engine's note: "vendor column (NAME) not run: why" or "... discarded: why".
    const std::string& nr = v.metrics.not_run;
    if (const size_t at = nr.find("vendor column"); at != std::string::npos) {
      const size_t end = nr.find("; ", at);
      st.vendor_not_run = nr.substr(at, end == std::string::npos ? std::string::npos : end - at);
    }
  }
  if (!v.passed() || v.metrics.vendor_rel_ratio < 0) return;
  ++st.vendor_rel_cases;
  st.vendor_rel_max = std::max(st.vendor_rel_max, v.metrics.vendor_rel_ratio);
  st.vendor_rel_worst = std::max(st.vendor_rel_worst, v.metrics.vendor_rel_worst);
  if (v.metrics.accuracy_warning.empty()) return;
  if (st.accuracy_warnings++ == 0) st.first_warning = v.metrics.accuracy_warning;
}

std::string vendor_cell(const CampaignReport& r, const VariantStats& st) {
  if (r.vendor.empty()) return "no vendor counterpart";
  if (st.vendor_rel_cases == 0) return "not run";
  return fmt::format("{:.4g}", st.vendor_rel_max);
}

}  // namespace assay
