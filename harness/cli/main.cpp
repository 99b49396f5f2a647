// assay command-line tool. Exit codes: 0 all passed, 1 failures found,
// 2 usage or input error, 3 infrastructure error (no GPU where required,
// CUDA failure), 130 / 143 a campaign stopped by SIGINT / SIGTERM (what it
// found is stored and reported).
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "harness/baseline.h"
#include "harness/build_info.h"
#include "harness/campaign.h"
#include "harness/cli/probe.h"
#include "harness/op.h"
#include "harness/phase_time.h"
#include "harness/check_report.h"
#include "harness/cli/list.h"
#include "harness/cli/reports.h"
#include "harness/cli/options.h"
#include "harness/interrupt.h"
#include "harness/json_file.h"
#include "harness/corpus.h"
#include "properties/studies/false_alarm.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/triage.h"
#include "properties/studies/detection.h"
#include "properties/studies/throughput.h"
#include "harness/exhaustive.h"
#include "properties/studies/vendor_survey.h"
#include "harness/worker.h"
#include "references/library/cudnn.h"

namespace {

using namespace assay;

constexpr int kExitPass = 0, kExitFail = 1, kExitUsage = 2, kExitInfra = 3;

int exit_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return kExitPass;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss:
      return kExitUsage;
    default:
      return kExitInfra;
  }
}

// Messages may quote file contents: one printable line, whatever they hold.
void print_error(const std::string& message) {
  fmt::print(stderr, "assay: error: {}\n", printable(message, 2000));
}

int error(const Status& s) {
  print_error(s.message());
  return exit_for(s);
}

int self_check(const std::vector<const OpSpec*>& specs) {
  int rc = kExitPass;
  for (const OpSpec* spec : specs) {
    std::string report;
    const Status s = spec->self_check(report);
    fmt::print("{}", cli::without_source_paths(report));
    if (!s.ok()) {
      fmt::print(stderr, "assay: self-check of {} failed: {}\n", spec->name(), s.message());
      rc = kExitFail;
    }
  }
  return rc;
}

struct FuzzArgs {
  std::string op;
  std::vector<std::string> variants;
  int64_t cases = 0;
  double seconds = 0;
  uint64_t seed = 1;
  int64_t max_dim = 2048;
  // One worker process per GPU of 16 lanes: its lanes' streams share one CUDA context, which the
  // GPU runs concurrently, where two processes' contexts take turns on it. On a 16-core H100
  // host it gave 1.1x to 1.36x the small-case rate of two workers of 8 on the ops with the most
  // device work (attention, conv2d, conv2d_bwd_data, gemm_bwd, gemm_int8), and 0.74x to 0.95x on
  // host-bound ones (the row-wise backward passes, cross_entropy, the norms), whose case
  // generation (serialised in a process) then sets the pace; all 22 ops above 10,000 cases/s
  // stayed above 12,000. Three workers of 6 and four of 4 gave less than either
  // (docs/results.md).
  int lanes = 16;
  std::vector<int> devices;  // empty: all visible
  int workers_per_gpu = 1;
  std::string shard = "0/1";
  std::string sanitize;
  double case_timeout = 60;
  double shrink_time = 120;
  int repeat = 1;
  double vendor_share = kCampaignVendorShare;
  bool in_process = false;
  std::string corpus = "corpora";
  bool keep_going = false;
  bool require_gpu = false;
  std::string json;
  std::string junit;
  bool probe_contract = false;
  std::string worker_binary;  // hidden: run this instead of `assay worker` (tests drive a fake worker without a GPU)
};

// Path of this executable: workers are started from it.
std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "assay";
  buf[n] = 0;
  return buf;
}

// One campaign of `a.op` (fuzz, or one backward op of a gradcheck): prints it and appends it to
// `rep`, which the caller writes (--json, --junit); without a GPU, `rep` becomes a skipped suite.
int run_fuzz(const FuzzArgs& a, const std::string& command, bool prefix_op, CheckReport& rep) {
  const OpSpec* spec = find_spec(a.op);
  if (spec == nullptr) return error(not_found(fmt::format("unknown op '{}' (see 'assay list')", a.op)));
  for (const auto& v : a.variants)
    if (!spec->has_variant(v)) return error(not_found(fmt::format("op '{}' has no variant '{}'", a.op, v)));
  int shard_i = 0, shard_n = 1;
  if (Status s = cli::parse_shard(a.shard, shard_i, shard_n); !s.ok()) return error(s);
  auto ndev = gpu::device_count();
  if (a.probe_contract) {
    if (!ndev.ok()) return error(ndev.status());
    ProbeOptions po;
    po.variants = a.variants;
    po.seed = a.seed;
    po.max_dim = std::min<int64_t>(a.max_dim, 512);
    po.device = a.devices.empty() ? 0 : a.devices.front();
    po.case_timeout_s = a.case_timeout;
    po.json = a.json;
    if (!a.in_process) po.worker_binary = self_path();
    auto r = probe_contracts(*spec, po);
    return r.ok() ? kExitPass : error(r.status());
  }
  if (!ndev.ok() && a.worker_binary.empty()) {
    fmt::print(stderr, "assay: {}\n", ndev.status().message());
    rep = cli::skipped_report(command, a.op, ndev.status().message());
    rep.seed = a.seed;
    if (a.require_gpu) return kExitInfra;
    fmt::print(stderr, "assay: running the CPU self-checks of the {} references instead (no kernel was run)\n", a.op);
    return self_check({spec});
  }
  CampaignOptions o;
  o.variants = a.variants;
  o.max_cases = a.cases;
  o.max_seconds = a.seconds;
  o.seed = a.seed;
  o.lanes = a.lanes;
  o.devices = a.devices;
  // Under CTest resource allocation (RESOURCE_GROUPS "gpus:1"), CTest names
  // the GPU this test may use: CTEST_RESOURCE_GROUP_0_GPUS="id:<n>,slots:1".
  if (o.devices.empty()) {
    if (const char* rg = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS"); rg != nullptr) {
      int id = -1;
      if (std::sscanf(rg, "id:%d", &id) == 1 && id >= 0) o.devices.push_back(id);
    }
  }
  if (o.devices.empty())
    for (int d = 0; d < (ndev.ok() ? *ndev : 1); ++d) o.devices.push_back(d);
  if (!a.in_process) {
    std::vector<int> per_worker;
    for (int d : o.devices) per_worker.insert(per_worker.end(), static_cast<size_t>(a.workers_per_gpu), d);
    o.devices = std::move(per_worker);
  }
  o.shard_index = shard_i;
  o.shard_count = shard_n;
  o.sanitize = a.sanitize;
  o.case_timeout_s = a.case_timeout;
  o.max_shrink_seconds = a.shrink_time;
  o.run.repeat = a.repeat;
  o.run.vendor_share = a.vendor_share;
  if (!a.in_process) o.worker_binary = a.worker_binary.empty() ? self_path() : a.worker_binary;
  if (a.in_process && o.devices.size() > 1)
    return error(invalid_argument("--in-process runs on one device; drop --in-process to use several"));
  o.gen.max_dim = a.max_dim;
  o.corpus_dir = a.corpus;
  o.keep_going = a.keep_going;
  const bool tty = isatty(STDERR_FILENO) != 0;
  double last_line = -1e9;
  o.progress = [&](const CampaignProgress& p) {
    const std::string line = fmt::format(
        "{}: {} cases, {} failures, {:.0f} cases/s, {:.0f} s{}{}", a.op, p.cases, p.failures,
        p.elapsed_s > 0 ? static_cast<double>(p.cases) / p.elapsed_s : 0.0, p.elapsed_s,
        p.time_left_s >= 0 ? fmt::format(", {:.0f} s left", p.time_left_s) : "", p.shrinking ? ", shrinking" : "");
    if (tty) {
      fmt::print(stderr, "\r{:<100}", line);
    } else if (p.elapsed_s - last_line >= 10) {
      fmt::print(stderr, "{}\n", line);
      last_line = p.elapsed_s;
    }
  };
  install_stop_handlers();  // SIGINT / SIGTERM: stop, store, report, exit 130 / 143
  auto campaign = run_campaign(*spec, o);
  if (tty) fmt::print(stderr, "\n");
  if (!campaign.ok()) return error(campaign.status());
  const CampaignReport& r = *campaign;
  if (!r.infra.ok()) print_error(r.infra.message());
  if (r.interrupted != 0)
    fmt::print(stderr, "assay: stopped by {} after {} cases; failures found so far are stored and reported\n",
               r.interrupted == SIGINT ? "SIGINT" : r.interrupted == SIGTERM ? "SIGTERM" : "a signal", r.cases);
  fmt::print("{}", cli::campaign_summary(r, a.seed));
  for (const auto& f : r.failures) {
    fmt::print("FAIL {}: {}\n  first failing case #{} after {:.2f} s; shrunk in {} steps ({} runs, {:.2f} s) to: {}\n",
               f.variant, f.verdict.summary(), f.case_index, f.seconds_to_find, f.shrink_steps, f.shrink_evals,
               f.seconds_to_shrink, f.shrunk.summary());
    if (f.shrink_state != "done") fmt::print("  shrinking {} (shrink state '{}')\n",
                                             f.shrink_state == "limit" ? "stopped at its time or evaluation limit"
                                                                       : "not finished",
                                             f.shrink_state);
    if (!f.path.empty()) fmt::print("  stored: {}\n  replay: {} replay {}\n", f.path, program_name(), f.path);
  }
  rep = cli::campaign_report(command, r, *spec, o, prefix_op);
  if (r.interrupted != 0) return 128 + r.interrupted;
  // Accuracy regressions against the accepted baseline (corpus/baselines/<op>.json).
  bool regressed = false;
  if (!a.corpus.empty() && r.infra.ok()) {
    auto b = load_baseline(a.corpus, a.op);
    if (!b.ok()) return error(b.status());
    if (b->has_value()) {
      for (const auto& g : find_regressions(**b, r.ratios)) {
        fmt::print("ACCURACY REGRESSION {} {}: error/bound {:.4g}, baseline {:.4g} (more than 2x), bound still held\n",
                   g.variant, g.key, g.ratio, g.baseline);
        regressed = true;
        for (auto& t : rep.cases)
          if (t.name == (prefix_op ? a.op + "/" + g.variant : g.variant) && t.failure.empty())
            t.failure = fmt::format("accuracy regression {}: error/bound {:.4g}, baseline {:.4g}", g.key, g.ratio,
                                    g.baseline);
      }
      if (!regressed) fmt::print("accuracy: within 2x of the baseline {}\n", baseline_path(a.corpus, a.op));
    }
  }
  if (regressed && r.failures.empty()) return kExitFail;
  return r.failures.empty() ? kExitPass : kExitFail;
}

int write_or_error(const CheckReport& rep, const cli::ReportPaths& p, int rc) {
  if (auto s = write_reports(rep, p.json, p.junit); !s.ok()) return error(s);
  return rc;
}

int cmd_fuzz(const FuzzArgs& a) {
  CheckReport rep;
  const int rc = run_fuzz(a, "fuzz", false, rep);
  if (rep.command.empty()) return rc;  // an error before anything ran (printed)
  return write_or_error(rep, {a.json, a.junit}, rc);
}

// gradcheck <op>: the backward ops of <op> (or <op> itself when it is one), each a campaign.
int cmd_gradcheck(FuzzArgs a) {
  auto ops = cli::gradcheck_ops(a.op);
  if (!ops.ok()) return error(ops.status());
  CheckReport rep;
  int rc = kExitPass;
  for (const auto& op : *ops) {
    a.op = op;
    CheckReport part;
    const int r = run_fuzz(a, "gradcheck", ops->size() > 1, part);
    if (part.command.empty()) return r;  // usage error: nothing ran
    if (!part.skipped.empty()) {
      rep = part;
      rep.target = fmt::format("{}", fmt::join(*ops, ","));
      rc = r;
      break;
    }
    if (ops->size() == 1)
      rep = std::move(part);
    else
      cli::merge_campaign(rep, part);
    rc = std::max(rc, r);
  }
  return write_or_error(rep, {a.json, a.junit}, rc);
}

int cmd_replay(std::vector<std::string> paths, int device, bool require_gpu, bool in_process,
               const cli::ReportPaths& reports, const std::vector<std::string>& override_variants) {
  if (paths.empty()) paths.push_back("corpora");
  std::vector<std::string> problems;
  auto files = list_entries(paths, &problems);
  if (!files.ok()) return error(files.status());
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  // The report: one test per entry and variant (an unreadable entry is a failing test).
  CheckReport rep;
  rep.command = "replay";
  rep.target = fmt::format("{}", fmt::join(paths, ","));
  auto add_case = [&](std::string name, double secs, std::string failure, std::string skipped, std::string out) {
    CheckCase t;
    t.name = std::move(name);
    t.seconds = secs;
    t.cases = failure.empty() && skipped.empty() ? 1 : 0;
    t.failure = std::move(failure);
    t.skipped = std::move(skipped);
    t.output = std::move(out);
    rep.cases.push_back(std::move(t));
  };
  for (const auto& p : problems) print_error(p);
  auto ndev = gpu::device_count();
  if (!ndev.ok()) {
    fmt::print(stderr, "assay: {}: entries are read and validated, not run\n", ndev.status().message());
    rep.skipped = ndev.status().message();
  } else {
    rep.device = gpu::describe_device(device);
  }
  // One executor per op, started on first use; worker processes by default so
  // a stored crash replays as a crash instead of ending the replay.
  std::map<std::string, std::unique_ptr<Executor>> execs;
  auto executor_for = [&](const OpSpec& spec) -> StatusOr<Executor*> {
    auto it = execs.find(spec.name());
    if (it != execs.end()) return it->second.get();
    std::unique_ptr<Executor> e;
    if (in_process) {
      ASSAY_ASSIGN_OR_RETURN(e, make_in_process_executor(spec, GenPlan{}, 1, device, RunOptions{}));
    } else {
      ProcessOptions po;
      po.binary = self_path();
      po.devices = {device};
      po.lanes = 1;
      ASSAY_ASSIGN_OR_RETURN(e, make_process_executor(spec.name(), GenPlan{}, po));
    }
    return (execs[spec.name()] = std::move(e)).get();
  };
  int bad = static_cast<int>(problems.size()), failing = 0, fixed = 0, passed = 0, outside = 0;
  // Baselines by (corpus root, op), read once per replay.
  std::map<std::pair<std::string, std::string>, std::optional<Baseline>> baselines;
  for (const auto& path : *files) {
    const auto t_entry = Clock::now();
    auto e = read_entry(path);
    if (!e.ok()) {
      print_error(e.status().message());
      add_case(path, seconds_since(t_entry), "unreadable: " + e.status().message(), "", "");
      ++bad;
      continue;
    }
    const OpSpec* spec = find_spec(e->c.op);
    if (spec == nullptr) {
      print_error(fmt::format("{}: $.case.op: unknown op '{}'", path, e->c.op));
      add_case(path, seconds_since(t_entry), fmt::format("unreadable: $.case.op: unknown op '{}'", e->c.op), "", "");
      ++bad;
      continue;
    }
    if (auto s = validate_case(*spec, e->c, path); !s.ok()) {
      print_error(s.message());
      add_case(path, seconds_since(t_entry), "unreadable: " + s.message(), "", "");
      ++bad;
      continue;
    }
    // --variant: these kernels instead of the stored one (a case found from Python names a
    // launcher that lives in a Python process; the CLI replays it on the op's own kernels).
    std::vector<std::string> variants = !override_variants.empty() ? override_variants
                                        : e->c.variant.empty()      ? spec->default_variants()
                                                                    : std::vector<std::string>{e->c.variant};
    if (override_variants.size() == 1 && override_variants[0] == "all") variants = spec->default_variants();
    for (const auto& v : variants)
      if (!spec->has_variant(v)) {
        print_error(fmt::format("{}: $.case.variant: op '{}' has no variant '{}'", path, e->c.op, v));
        add_case(path, 0, fmt::format("unreadable: $.case.variant: op '{}' has no variant '{}'", e->c.op, v), "", "");
        ++bad;
        variants.clear();
        break;
      }
    if (!e->c.variant.empty() && !variants.empty())
      if (auto rule = spec->outside(e->c, e->c.variant)) {
        const std::string why = fmt::format("outside the contract of {} [{}]: {} (not a kernel failure)", e->c.op,
                                            e->c.variant, *rule);
        fmt::print(stderr, "assay: error: {}: {}\n", path, why);
        add_case(fmt::format("{} [{}]", path, e->c.variant), 0, "", why, "");
        ++outside;
        continue;
      }
    if (variants.empty()) continue;
    if (!ndev.ok()) {
      for (const auto& v : variants) add_case(fmt::format("{} [{}]", path, v), 0, "", rep.skipped, "");
      continue;
    }
    auto ex = executor_for(*spec);
    if (!ex.ok()) return error(ex.status());
    (*ex)->submit({0, std::nullopt, e->c, variants});
    JobResult r = (*ex)->wait();
    if (!r.status.ok()) return error(r.status);
    const double per_variant_s = seconds_since(t_entry) / static_cast<double>(std::max<size_t>(1, r.verdicts.size()));
    const bool was_failure = e->stored_failure;
    for (const auto& v : r.verdicts) {
      if (!v.not_applicable.empty()) {
        fmt::print("n/a {} [{}]: {}\n", path, v.variant, v.summary());
        continue;
      }
      const std::string name = fmt::format("{} [{}]", path, v.variant);
      if (!v.passed()) {
        ++failing;
        fmt::print("FAIL {} [{}]: {}\n", path, v.variant, v.summary());
        add_case(name, per_variant_s, v.summary(), "", "");
        rep.cases.back().detail = fmt::format("{}\nreplay: {} replay {}", v.summary(), program_name(), path);
      } else if (was_failure) {
        ++fixed;
        fmt::print("fixed {} [{}]: the stored failure now passes (kept as a regression case)\n", path, v.variant);
        add_case(name, per_variant_s, "", "", "fixed: the stored failure now passes");
      } else {
        ++passed;
        fmt::print("pass {} [{}]\n", path, v.variant);
        add_case(name, per_variant_s, "", "", "pass");
      }
      if (v.passed() && !v.metrics.accuracy_warning.empty()) {
        fmt::print("  accuracy warning: {}\n", v.metrics.accuracy_warning);
        rep.cases.back().output += "; accuracy warning: " + v.metrics.accuracy_warning;
      }
      if (v.passed() && !v.metrics.key.empty()) {
        // The corpus root is the folder above <op>/ (entries live in <root>/<op>/<id>.json).
        const std::string root = std::filesystem::path(path).parent_path().parent_path().string();
        auto it = baselines.find({root, e->c.op});
        if (it == baselines.end()) {
          auto b = load_baseline(root, e->c.op);
          if (!b.ok()) {
            print_error(b.status().message());
            ++bad;
          }
          it = baselines.emplace(std::make_pair(root, e->c.op), b.ok() ? *b : std::nullopt).first;
        }
        if (it->second) {
          RatioTable now;
          now[v.variant][v.metrics.key] = v.metrics.max_ratio;
          for (const auto& g : find_regressions(*it->second, now)) {
            fmt::print("ACCURACY REGRESSION {} [{}] {}: error/bound {:.4g}, baseline {:.4g}\n", path, g.variant, g.key,
                       g.ratio, g.baseline);
            ++failing;
            rep.cases.back().failure = fmt::format("accuracy regression {}: error/bound {:.4g}, baseline {:.4g}",
                                                   g.key, g.ratio, g.baseline);
          }
        }
      }
    }
  }
  fmt::print("replay: {} entries: {} failing, {} fixed, {} passing, {} unreadable{}{}\n", files->size(), failing, fixed,
             passed, bad, outside > 0 ? fmt::format(", {} outside their variant's contract", outside) : "",
             ndev.ok() ? "" : " (not run: no GPU)");
  rep.seconds = seconds_since(t_start);
  rep.fields = {{"entries", files->size()}, {"failing", failing}, {"fixed", fixed}, {"passing", passed},
                {"unreadable", bad}, {"outside_contract", outside}};
  int rc = kExitPass;
  if (bad > 0 || outside > 0)
    rc = kExitUsage;
  else if (failing > 0)
    rc = kExitFail;
  else if (!ndev.ok() && require_gpu)
    rc = kExitInfra;
  return write_or_error(rep, reports, rc);
}

// assay bench: throughput per size class, time to detect each mutant, and the
// large-case breakdown. A benchmark, not a test: it writes what it measured.
struct BenchArgs {
  std::vector<std::string> ops;
  double seconds = 10;
  int lanes = 16;  // as `assay fuzz`
  int64_t mutant_cases = 20000;
  std::string out = "bench-results";
  bool per_variant = false;  ///< each correct variant alone per size class, beside all together
  bool skip_mutants = false;
  bool skip_large = false;
  /// A peer command (python/peers/peer_bench.py): run per op on the small class as
  /// `PEER --op OP --mode {hypothesis,loop} --seconds S --max-dim 64`, one JSON line back.
  std::string peer;
  bool split = false;  ///< the small class once more in-process, its lane time split by phase
  /// Worker processes on GPU 0, each with its own lanes (host threads) and generator lock (1:
  /// as `assay fuzz`; more for ops whose case generation, not the GPU, sets the rate).
  int workers_per_gpu = 1;
  double vendor_share = kCampaignVendorShare;
};

/// One peer measurement: its JSON line (with "skipped" when it could not run, and why).
nlohmann::json run_peer(const std::string& peer, const std::string& op, const std::string& mode, double seconds) {
  const std::string cmd = fmt::format("{} --op {} --mode {} --seconds {} --max-dim 64 2>&1", peer, op, mode, seconds);
  nlohmann::json j = {{"op", op}, {"mode", mode}, {"command", cmd}};
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    j["skipped"] = fmt::format("could not start '{}'", peer);
    return j;
  }
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
  const int rc = pclose(f);
  // The last line that parses as a JSON object is the peer's answer; anything else is its log.
  nlohmann::json answer;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (auto parsed = nlohmann::json::parse(line, nullptr, false); !parsed.is_discarded() && parsed.is_object())
      answer = std::move(parsed);
  if (answer.is_object()) {
    answer["command"] = cmd;
    return answer;
  }
  j["skipped"] = fmt::format("exit {}, no JSON line: {}", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1,
                             out.substr(out.size() > 300 ? out.size() - 300 : 0));
  return j;
}

int cmd_bench(const BenchArgs& a) {
  auto ndev = gpu::device_count();
  if (!ndev.ok()) {
    fmt::print(stderr, "assay: {}: nothing to benchmark\n", ndev.status().message());
    return kExitInfra;
  }
  std::vector<const OpSpec*> specs;
  if (a.ops.empty()) specs = all_specs();
  for (const auto& name : a.ops) {
    const OpSpec* s = find_spec(name);
    if (s == nullptr) return error(not_found(fmt::format("unknown op '{}'", name)));
    specs.push_back(s);
  }
  nlohmann::json j;
  j["device"] = gpu::describe_device(0);
  j["lanes"] = a.lanes;
  j["workers_per_gpu"] = a.workers_per_gpu;
  j["vendor_share"] = a.vendor_share;
  std::string md =
      fmt::format("# assay bench\n\nDevice: {}. Lanes: {}. Vendor column: at most {:.0f}% of a lane's time. Command: "
                  "`assay bench{}{} --seconds {} --lanes {}{}{}{}{}{} --vendor-share {}`.\n\n",
                  gpu::describe_device(0), a.lanes, 100 * std::min(a.vendor_share, 1.0), a.ops.empty() ? "" : " --ops ",
                  fmt::join(a.ops, ","), a.seconds, a.lanes, a.per_variant ? " --per-variant" : "",
                  a.skip_mutants ? " --skip-mutants" : "", a.skip_large ? " --skip-large" : "",
                  fmt::format(" --workers-per-gpu {}", a.workers_per_gpu),
                  a.split ? " --split" : "", a.vendor_share) +
      (a.peer.empty() ? "" : fmt::format("Peer: `{}`.\n\n", a.peer));
  for (const OpSpec* spec : specs) {
    auto& jo = j["ops"][spec->name()];
    md += fmt::format(
        "## {}\n\n| variants | size class | max dim | cases | seconds | cases/s | failures |\n"
        "|---|---|---:|---:|---:|---:|---:|\n",
        spec->name());
    // All correct variants together (each case runs through every one of them), then, with
    // --per-variant, each alone: a case then costs one kernel's two launches and checks.
    // Without it the first variant alone still gets its small class: the one-variant rate is
    // what the checking-rate targets are stated in.
    std::vector<std::vector<std::string>> groups = {{}};
    const bool several = spec->default_variants().size() > 1;
    if (several)
      for (const auto& v : spec->default_variants()) {
        groups.push_back({v});
        if (!a.per_variant) break;
      }
    for (const auto& group : groups) {
      const std::string label = group.empty() ? "all" : group.front();
      for (const auto& [cls, dim] :
           std::vector<std::pair<std::string, int64_t>>{{"small", 64}, {"medium", 512}, {"large", 2048}}) {
        if (!group.empty() && !a.per_variant && cls != "small") continue;
        CampaignOptions o;
        o.variants = group;
        o.max_seconds = a.seconds;
        o.lanes = a.lanes;
        o.gen.max_dim = dim;
        o.corpus_dir = "";
        o.worker_binary = self_path();
        o.devices.assign(static_cast<size_t>(a.workers_per_gpu), 0);
        o.run.vendor_share = a.vendor_share;
        auto r = run_campaign(*spec, o);
        if (!r.ok()) return error(r.status());
        nlohmann::json row = {{"max_dim", dim},
                              {"cases", r->cases},
                              {"seconds", r->seconds},
                              {"cases_per_second", r->cases_per_second()},
                              {"failures", r->failures.size()}};
        if (group.empty())
          jo["throughput"][cls] = row;
        else
          jo["per_variant"][label][cls] = row;
        md += fmt::format("| {} | {} | {} | {} | {:.1f} | {:.0f} | {} |\n", label, cls, dim, r->cases, r->seconds,
                          r->cases_per_second(), r->failures.size());
      }
    }
    if (a.split) {
      // In-process lanes (worker processes keep their clocks to themselves), one variant.
      CampaignOptions o;
      if (!spec->default_variants().empty()) o.variants = {spec->default_variants().front()};
      o.max_seconds = a.seconds;
      o.lanes = a.lanes;
      o.run.vendor_share = a.vendor_share;
      o.gen.max_dim = 64;
      o.corpus_dir = "";
      reset_phase_times();
      auto r = run_campaign(*spec, o);
      if (!r.ok()) return error(r.status());
      const auto secs = phase_seconds();
      const double lane_s = r->seconds * a.lanes, per = r->cases > 0 ? 1e3 / static_cast<double>(r->cases) : 0;
      md += fmt::format(
          "\nWhere the lanes' time goes (small, {}, in-process, {} cases in {:.1f} s, {:.0f} cases/s; lane-ms per "
          "case and share of {} lanes x {:.1f} s):\n\n| phase | lane-ms per case | share |\n|---|---:|---:|\n",
          o.variants.empty() ? "all variants" : o.variants.front(), r->cases, r->seconds, r->cases_per_second(), a.lanes,
          r->seconds);
      double accounted = 0;
      nlohmann::json js = {{"variant", o.variants.empty() ? "" : o.variants.front()},
                           {"cases", r->cases},
                           {"seconds", r->seconds},
                           {"lanes", a.lanes}};
      for (size_t i = 0; i < secs.size(); ++i) {
        accounted += secs[i];
        const std::string name(phase_name(static_cast<Phase>(i)));
        js["lane_seconds"][name] = secs[i];
        md += fmt::format("| {} | {:.3f} | {:.0f}% |\n", name, secs[i] * per, lane_s > 0 ? 100 * secs[i] / lane_s : 0);
      }
      const double rest = std::max(0.0, lane_s - accounted);
      js["lane_seconds"]["other (queue, verdicts, shrinking)"] = rest;
      md += fmt::format("| other (queue, verdicts, shrinking) | {:.3f} | {:.0f}% |\n", rest * per,
                        lane_s > 0 ? 100 * rest / lane_s : 0);
      jo["split"] = js;
    }
    if (!a.peer.empty()) {
      // The same small shapes through the peers, right after assay's own runs on this GPU.
      // Against the first variant alone when each was measured alone (the peer runs one kernel too).
      double ours = jo["throughput"]["small"].value("cases_per_second", 0.0);
      std::string against = "all variants";
      const auto defaults = spec->default_variants();
      if (!defaults.empty() && jo.contains("per_variant") && jo["per_variant"].contains(defaults.front())) {
        against = defaults.front();
        ours = jo["per_variant"][against]["small"].value("cases_per_second", 0.0);
      }
      md += fmt::format("\n| peer (small, max dim 64) | cases/s | assay ({}) / peer |\n|---|---:|---:|\n", against);
      for (const char* mode : {"hypothesis", "loop"}) {
        nlohmann::json pj = run_peer(a.peer, spec->name(), mode, a.seconds);
        const double theirs = pj.value("cases_per_second", 0.0);
        if (pj.contains("skipped") || theirs <= 0) {
          md += fmt::format("| {} | skipped: {} | |\n", mode, pj.value("skipped", std::string("no rate")));
        } else {
          pj["assay_ratio"] = ours / theirs;
          md += fmt::format("| {} | {:.0f} | {:.1f}x |\n", mode, theirs, ours / theirs);
        }
        jo["peers"][mode] = pj;
      }
    }
    if (!a.skip_mutants)
      md +=
          "\n| mutant | cases to catch | seconds to catch | shrink steps | shrink seconds | shrunk case "
          "|\n|---|---:|---:|---:|---:|---|\n";
    const std::string tmp = a.out + "/mutant-corpus";
    for (const auto& v : spec->variants()) {
      if (a.skip_mutants) break;
      if (!v.mutant || v.name.rfind("fault_", 0) == 0 || v.name == "mutant_degrades") continue;
      CampaignOptions o;
      o.variants = {v.name};
      o.max_cases = a.mutant_cases;
      o.lanes = a.lanes;
      o.gen.max_dim = 256;
      o.corpus_dir = tmp;
      o.worker_binary = self_path();
      auto r = run_campaign(*spec, o);
      if (!r.ok()) return error(r.status());
      if (r->failures.empty()) {
        // A mutant inside its ceiling (mutant_softmax_fast_exp) is caught by accuracy warnings alone.
        const auto it = r->per_variant.find(v.name);
        const int64_t warned = it == r->per_variant.end() ? 0 : it->second.accuracy_warnings;
        jo["mutants"][v.name] = {{"caught", warned > 0}, {"cases", r->cases}, {"accuracy_warnings", warned}};
        md += warned > 0 ? fmt::format("| {} | accuracy warnings in {} of {} | | | | |\n", v.name, warned, r->cases)
                         : fmt::format("| {} | not caught in {} | | | | |\n", v.name, r->cases);
        continue;
      }
      const auto& f = r->failures.front();
      jo["mutants"][v.name] = {{"caught", true},
                               {"case_index", f.case_index},
                               {"seconds_to_find", f.seconds_to_find},
                               {"shrink_steps", f.shrink_steps},
                               {"seconds_to_shrink", f.seconds_to_shrink},
                               {"shrunk", f.shrunk.summary()},
                               {"verdict", f.verdict.summary()}};
      md += fmt::format("| {} | #{} | {:.3f} | {} | {:.2f} | {} |\n", v.name, f.case_index, f.seconds_to_find,
                        f.shrink_steps, f.seconds_to_shrink, f.shrunk.summary());
    }
    auto lane = gpu::Lane::create(0);
    if (!lane.ok()) return error(lane.status());
    const auto defaults = spec->default_variants();
    if (!defaults.empty() && !a.skip_large) {
      auto t = spec->time_large(defaults.back(), **lane);
      if (t.ok()) {
        jo["large"] = *t;
        md += fmt::format("\nLarge case ({}): {}\n", defaults.back(), t->dump());
      } else {
        md += fmt::format("\nLarge case: {}\n", t.status().message());
      }
    }
    md += "\n";
  }
  if (auto s = write_file_atomic(a.out + "/bench.json", j.dump(2) + "\n"); !s.ok()) return error(s);
  if (auto s = write_file_atomic(a.out + "/bench.md", md); !s.ok()) return error(s);
  fmt::print("{}", md);
  return kExitPass;
}

int cmd_triage(const std::string& path, const std::string& variant, int device, bool no_sweep,
               const std::vector<std::string>& sweep) {
  // A corpus entry ({"assay_entry": ..., "case": ...}) or a bare case file.
  auto j = read_json_file(path);
  if (!j.ok()) return error(j.status());
  Case c;
  if (j->is_object() && j->contains("assay_entry")) {
    StatusOr<CorpusEntry> e = read_entry(path);
    if (!e.ok()) return error(e.status());
    c = e->c;
  } else {
    auto parsed = Case::from_json(*j, path);
    if (!parsed.ok()) return error(parsed.status());
    c = std::move(parsed).value();
  }
  const OpSpec* spec = find_spec(c.op);
  if (spec == nullptr) return error(not_found(fmt::format("{}: unknown op '{}'", path, c.op)));
  if (Status s = validate_case(*spec, c, path); !s.ok()) return error(s);
  if (const std::string v = variant.empty() ? c.variant : variant; !v.empty() && !spec->has_variant(v))
    return error(not_found(fmt::format("{}: op '{}' has no variant '{}'", path, c.op, v)));
  if (const std::string tv = variant.empty() ? c.variant : variant; !tv.empty())
    if (auto rule = spec->outside(c, tv))
      return error(invalid_argument(
          fmt::format("{}: outside the contract of {} [{}]: {} (not a kernel failure)", path, c.op, tv, *rule)));
  auto ndev = gpu::device_count();
  if (!ndev.ok()) return error(ndev.status());
  ProcessOptions po;
  po.binary = self_path();
  po.devices = {device};
  po.lanes = 1;
  auto exec = make_process_executor(spec->name(), GenPlan{}, po);
  if (!exec.ok()) return error(exec.status());
  auto lane = gpu::Lane::create(device);
  if (!lane.ok()) return error(lane.status());
  TriageOptions o;
  o.variant = variant;
  o.sweep_enabled = !no_sweep;
  o.sweep = sweep;
  std::string stem = path;
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".json") stem.resize(stem.size() - 5);
  o.html_path = stem + ".triage.html";
  o.svg_path = stem + ".triage.svg";
  auto r = triage(*spec, c, **exec, **lane, o);
  if (!r.ok()) return error(r.status());
  fmt::print("{}", r->text);
  return r->failing ? kExitFail : kExitPass;
}

// assay baseline update|check <op>: accept the current accuracy ratios, or
// re-run the accepted campaign and compare.
int cmd_baseline(const std::string& action, const std::string& op, int64_t cases, uint64_t seed, int64_t max_dim,
                 const std::string& corpus, const cli::ReportPaths& reports) {
  const OpSpec* spec = find_spec(op);
  if (spec == nullptr) return error(not_found(fmt::format("unknown op '{}'", op)));
  const std::string command = "baseline " + action;
  // The baseline first: a broken file is exit 2 with or without a GPU.
  auto existing = load_baseline(corpus, op);
  if (!existing.ok()) return error(existing.status());
  auto ndev = gpu::device_count();
  if (!ndev.ok()) {
    const int rc = error(ndev.status());
    return write_or_error(cli::skipped_report(command, op, ndev.status().message()), reports, rc);
  }
  if (action == "check") {
    if (!existing->has_value())
      return error(
          not_found(fmt::format("no baseline at {} (run 'assay baseline update {}')", baseline_path(corpus, op), op)));
    const auto& acc = (*existing)->accepted;
    cases = acc.value("cases", cases);
    seed = acc.value("seed", seed);
    max_dim = acc.value("max_dim", max_dim);
  }
  CampaignOptions o;
  o.max_cases = cases;
  o.seed = seed;
  o.gen.max_dim = max_dim;
  o.corpus_dir = "";
  o.worker_binary = self_path();
  auto r = run_campaign(*spec, o);
  if (!r.ok()) return error(r.status());
  CheckReport rep = cli::campaign_report(command, *r, *spec, o);
  if (!r->failures.empty()) {
    for (const auto& f : r->failures) fmt::print("FAIL {}: {}\n", f.variant, f.verdict.summary());
    fmt::print("baseline {}: the campaign found failures; fix them first\n", action);
    return write_or_error(rep, reports, kExitFail);
  }
  if (action == "update") {
    Baseline b;
    b.op = op;
    b.ratios = r->ratios;
    b.accepted = {{"cases", cases},
                  {"seed", seed},
                  {"max_dim", max_dim},
                  {"device", r->device},
                  {"assay_version", ASSAY_VERSION}};
    if (auto s = save_baseline(corpus, b); !s.ok()) return error(s);
    for (const auto& [variant, keys] : b.ratios)
      for (const auto& [key, v] : keys) fmt::print("{} {} {:.4g}\n", variant, key, v);
    fmt::print("baseline written: {}\n", baseline_path(corpus, op));
    return write_or_error(rep, reports, kExitPass);
  }
  const auto regs = find_regressions(**existing, r->ratios);
  for (const auto& g : regs) {
    fmt::print("ACCURACY REGRESSION {} {}: error/bound {:.4g}, baseline {:.4g}\n", g.variant, g.key, g.ratio,
               g.baseline);
    for (auto& t : rep.cases)
      if (t.name == g.variant) {
        const std::string line =
            fmt::format("accuracy regression {}: error/bound {:.4g}, baseline {:.4g}", g.key, g.ratio, g.baseline);
        if (t.failure.empty()) t.failure = line;
        t.detail += line + "\n";
      }
  }
  fmt::print("baseline check: {} regression(s) over {} cases\n", regs.size(), r->cases);
  rep.fields["regressions"] = regs.size();
  rep.fields["baseline"] = baseline_path(corpus, op);
  return write_or_error(rep, reports, regs.empty() ? kExitPass : kExitFail);
}

// assay exhaustive <op> --dtype bf16|fp16: every 16-bit input through one launch of an
// elementwise kernel, each output against the fp64 reference in ulps (harness/exhaustive.h).
struct ExhaustiveArgs {
  std::string op, dtype, act, variant = "elementwise", json, junit;
  bool backward = false;
  int device = 0;
};

int cmd_exhaustive(const ExhaustiveArgs& a) {
  const std::string op = a.backward && a.op == "activation" ? "activation_bwd" : a.op;
  const ExhaustiveOp* ex = find_exhaustive_op(op);
  if (ex == nullptr) {
    std::string names;
    for (const auto& n : exhaustive_ops()) names += (names.empty() ? "" : ", ") + n;
    return error(invalid_argument(fmt::format("no exhaustive sweep for op '{}' (sweeps exist for: {})", a.op, names)));
  }
  const std::optional<DType> dt = parse_dtype(a.dtype);
  if (!dt || (*dt != DType::kF16 && *dt != DType::kBF16))
    return error(invalid_argument(fmt::format("--dtype '{}': exhaustive sweeps take fp16 or bf16", a.dtype)));
  std::vector<std::string> fns = ex->functions;
  if (!a.act.empty()) {
    if (std::find(fns.begin(), fns.end(), a.act) == fns.end())
      return error(invalid_argument(fmt::format("--act '{}': not a function of {}", a.act, op)));
    fns = {a.act};
  }
  if (!ex->has_variant(a.variant))
    return error(not_found(fmt::format("op '{}' has no variant '{}' (see 'assay list')", op, a.variant)));
  const cli::ReportPaths reports{a.json, a.junit};
  const std::string target = fmt::format("{}.{}.{}", op, a.variant, a.dtype);
  auto ndev = gpu::device_count();
  if (!ndev.ok()) {
    const int rc = error(ndev.status());
    return write_or_error(cli::skipped_report("exhaustive", target, ndev.status().message()), reports, rc);
  }
  if (a.device >= *ndev)
    return error(invalid_argument(fmt::format("--device {}: only {} CUDA device(s) visible", a.device, *ndev)));
  CheckReport rep;
  rep.command = "exhaustive";
  rep.target = target;
  rep.device = gpu::describe_device(a.device);
  rep.fields = {{"sweeps", nlohmann::json::array()}};
  int64_t failures = 0;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  for (const std::string& fn : fns) {
    const auto ts = Clock::now();
    auto r = ex->run(a.variant, fn, *dt, a.device);
    if (!r.ok()) return error(r.status());
    fmt::print("{}", r->text());
    failures += r->failures;
    rep.fields["sweeps"].push_back(r->to_json());
    CheckCase t;
    t.name = fn;
    t.seconds = std::chrono::duration<double>(Clock::now() - ts).count();
    t.cases = 1;
    if (r->failures > 0) {
      t.failure = fmt::format("{} element(s) beyond the ulp budget", r->failures);
      t.detail = r->text();
    }
    t.fields = r->to_json();
    rep.cases.push_back(std::move(t));
  }
  rep.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  rep.fields["failures"] = failures;
  fmt::print("exhaustive {} [{}] {}: {} sweep(s), {} element(s) beyond their budget\n", op, a.variant, a.dtype,
             fns.size(), failures);
  return write_or_error(rep, reports, failures == 0 ? kExitPass : kExitFail);
}

}  // namespace

/// false-alarm --ops: each named op's vendor library (OpDef::vendor, bound as a variant by
/// register_op) fuzzed under its declared contract for `seconds`, in worker processes on `gpus`;
/// one CheckCase per op in `rep`, a Markdown table on stdout and in OUT/vendor-ops.md. Returns the
/// exit code of its part (kExitFail where a library was outside a ceiling).
StatusOr<int> vendor_ops_campaigns(const std::string& list, double seconds, uint64_t seed, const std::vector<int>& gpus,
                                   const std::string& out, CheckReport& rep) {
  std::vector<std::string> names;
  if (list == "all") {
    for (const OpSpec* s : all_specs())
      if (const OpDef* d = find_op(s->name()); d != nullptr && d->vendor.defined()) names.push_back(s->name());
  } else {
    std::stringstream ss(list);
    for (std::string n; std::getline(ss, n, ',');)
      if (!n.empty()) names.push_back(n);
  }
  int rc = kExitPass;
  std::string md = fmt::format(
      "\n## Vendor libraries under their declared contracts ({:.0f} s each, seed {})\n\n"
      "| op | library | contract | cases | not applicable | failures | max error/ceiling | first failure |\n"
      "|---|---|---|---:|---:|---:|---:|---|\n",
      seconds, seed);
  for (const std::string& name : names) {
    const OpDef* d = find_op(name);
    const OpSpec* spec = find_spec(name);
    if (d == nullptr || spec == nullptr) return invalid_argument(fmt::format("--ops: no op '{}'", name));
    if (!d->vendor.defined()) return invalid_argument(fmt::format("--ops: op '{}' has no vendor library", name));
    CampaignOptions o;
    o.variants = {d->vendor.name};
    o.max_seconds = seconds;
    o.seed = seed;
    o.lanes = 8;
    o.devices = gpus;
    o.worker_binary = self_path();
    o.keep_going = true;
    o.max_shrink_seconds = std::min(10.0, seconds / 4);
    o.corpus_dir = out.empty() ? "" : out + "/corpus";
    ASSAY_ASSIGN_OR_RETURN(CampaignReport r, run_campaign(*spec, o));
    const auto it = r.per_variant.find(d->vendor.name);
    const VariantStats st = it == r.per_variant.end() ? VariantStats{} : it->second;
    std::string contract = fmt::format("{}", fmt::join(d->vendor.contract.describe(), "; "));
    if (contract.empty()) contract = "IEEE";
    const std::string first = r.failures.empty() ? "" : r.failures.front().shrunk.summary() + ": " +
                                                            r.failures.front().verdict.summary();
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.4g} | {} |\n", name, d->vendor.name, contract, st.cases,
                      st.not_applicable, st.failures, st.max_ratio, first.substr(0, 300));
    CheckCase c;
    c.name = fmt::format("{}:{}", name, d->vendor.name);
    c.cases = st.cases;
    c.seconds = r.seconds;
    c.output = fmt::format("{} cases under its contract ({}), max error/ceiling {:.4g}", st.cases, contract, st.max_ratio);
    if (st.failures > 0) {
      c.failure = fmt::format("{} case(s) outside the ceiling", st.failures);
      for (const auto& f : r.failures) c.detail += f.shrunk.summary() + ": " + f.verdict.summary() + "\n";
      rc = kExitFail;
    } else if (!r.infra.ok()) {
      c.failure = r.infra.message();
      if (rc == kExitPass) rc = kExitInfra;
    }
    rep.cases.push_back(std::move(c));
    rep.fields["vendor_ops"][name] = {{"library", d->vendor.name}, {"contract", contract}, {"cases", st.cases},
                                      {"not_applicable", st.not_applicable}, {"failures", st.failures},
                                      {"max_ratio", st.max_ratio}, {"first_failure", first}};
    if (stop_signal() != 0) break;
  }
  fmt::print("{}", md);
  if (!out.empty()) ASSAY_RETURN_IF_ERROR(write_file_atomic(out + "/vendor-ops.md", md));
  return rc;
}

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // Every case allocates and frees host vectors of its size on each of 16 lanes. glibc's defaults
  // hand such blocks back to the kernel (mmap above a threshold, trimming the heap's top), so the
  // next case faults the pages in again, under the process's one mmap lock. Keeping blocks up to
  // 64 MiB in the heap, and 256 MiB of free top, cut attention_bwd's gradcheck host time by 40%
  // on one thread, and raised its campaign rate on an H100 by 3-4% (docs/results.md). Where the
  // tool links tcmalloc (cmake/assayAllocator.cmake), these calls reach its no-op mallopt.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  gpu::prefer_queue_per_stream();  // before this process (or a worker it starts) touches CUDA
  CLI::App app{"assay: proves or disproves the numerical correctness of custom GPU kernels"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", fmt::format("assay {} (git {}, {}, CUDA architectures {}, {})", version(),
                                                git_revision(), build_type(), cuda_architectures(),
                                                vendor::cudnn_built() ? "with cuDNN" : "built without cuDNN"));

  cli::ListOptions list_opts;
  auto* list = cli::add_list_command(app, list_opts);

  FuzzArgs fa;
  auto* fuzz = app.add_subcommand("fuzz", "Fuzz an op's kernel variants against references; shrink and store failures");
  fuzz->add_option("op", fa.op, "Op to fuzz (see 'assay list')")->required();
  fuzz->add_option("--variant", fa.variants, "Variant(s) to fuzz (default: all but mutants)");
  fuzz->add_option("--cases", fa.cases, "Stop after this many cases")
      ->check(cli::integer_in(0, std::numeric_limits<int64_t>::max()));
  fuzz->add_option("--time", fa.seconds, "Stop after this many seconds (shrinking included)")
      ->check(cli::finite_number(0));
  fuzz->add_option("--shrink-time", fa.shrink_time, "Seconds spent shrinking each failure at most")
      ->check(cli::finite_number(0));
  fuzz->add_option("--seed", fa.seed, "Campaign seed (the same seed replays the same cases)")
      ->check(cli::unsigned_integer());
  fuzz->add_option("--max-dim", fa.max_dim, "Largest extent of any dimension")
      ->check(cli::integer_in(1, int64_t{1} << 20));
  fuzz->add_option("--lanes", fa.lanes, "Concurrent lanes (host threads + streams) per worker process")
      ->check(cli::integer_in(1, 64));
  fuzz->add_option("--devices", fa.devices, "CUDA devices (default: all visible), --workers-per-gpu workers each")
      ->check(cli::integer_in(0, 1023));
  fuzz->add_option("--workers-per-gpu", fa.workers_per_gpu,
                   "Worker processes per GPU, each with --lanes lanes (default 1; --in-process: one)")
      ->check(CLI::Range(1, 16));
  fuzz->add_option("--shard", fa.shard, "Run shard i of N (i/N): case indices k with k % N == i");
  fuzz->add_option("--sanitize", fa.sanitize, "Run workers under compute-sanitizer with this tool")
      ->check(CLI::IsMember({"memcheck", "racecheck", "initcheck", "synccheck"}));
  fuzz->add_option("--case-timeout", fa.case_timeout,
                   "Seconds per variant a case may run on a lane before its worker counts as hung")
      ->check(cli::finite_number(0, true));
  fuzz->add_option("--repeat", fa.repeat, "Launch each variant N times before the checked launches")
      ->check(cli::integer_in(1, 100000));
  fuzz->add_option("--vendor-share", fa.vendor_share,
                   fmt::format("Most of a lane's time the vendor column (the vendor-relative ratio) may take; 0: "
                               "never, 1: every case (default {})",
                               kCampaignVendorShare))
      ->check(cli::finite_number(0, false));
  fuzz->add_flag("--in-process", fa.in_process,
                 "Run lanes in this process (faster start; a kernel fault ends the run)");
  fuzz->add_option("--junit", fa.junit, "Write a JUnit XML report to this file (also when nothing could run)");
  fuzz->add_option("--corpus", fa.corpus, "Folder for shrunk failing cases (empty: do not store)");
  fuzz->add_flag("--keep-going", fa.keep_going, "Keep fuzzing a variant after its first failure");
  fuzz->add_flag("--require-gpu", fa.require_gpu, "Exit 3 instead of self-checking when no GPU is present");
  fuzz->add_option("--json", fa.json, "Write the campaign report as JSON to this file (also when nothing could run)");
  fuzz->add_flag("--probe-contract", fa.probe_contract,
                 "Run cases just outside each rule of the variants' contracts and report what the kernel does there");
  fuzz->add_option("--worker-binary", fa.worker_binary, "Internal: worker executable")->group("");

  std::vector<std::string> replay_paths;
  int replay_device = 0;
  bool replay_require_gpu = false;
  auto* replay = app.add_subcommand("replay", "Replay stored cases (files or folders; default: corpora)");
  replay->add_option("paths", replay_paths, "Corpus entries or folders");
  replay->add_option("--device", replay_device, "CUDA device index")->check(cli::integer_in(0, 1023));
  replay->add_flag("--require-gpu", replay_require_gpu, "Exit 3 when no GPU is present");
  bool replay_in_process = false;
  replay->add_flag("--in-process", replay_in_process, "Run in this process (a kernel fault ends the replay)");
  cli::ReportPaths replay_reports;
  cli::add_report_options(replay, replay_reports);
  std::vector<std::string> replay_variants;
  replay->add_option("--variant", replay_variants,
                     "Run this variant instead of the stored one (repeatable; 'all': the op's non-mutant variants)")
      ->expected(1)
      ->allow_extra_args(false);

  auto* selfcheck = app.add_subcommand("selfcheck", "CPU-only self-check of every op's host references");

  FuzzArgs ga;
  auto* gradcheck = app.add_subcommand(
      "gradcheck",
      "Fuzz an op's backward kernels (<op>_bwd*): bounds against fp64 backward references, <v, J u> "
      "against finite differences of the fp64 forward, accumulate semantics; failures go to the corpus");
  gradcheck->add_option("op", ga.op, "Op or backward op to check (gemm, gemm_bwd, conv2d: both conv2d_bwd_*)")
      ->required();
  gradcheck->add_option("--variant", ga.variants, "Backward variant(s) (default: all but mutants)");
  gradcheck->add_option("--cases", ga.cases, "Stop after this many cases")
      ->check(cli::integer_in(0, std::numeric_limits<int64_t>::max()));
  gradcheck->add_option("--time", ga.seconds, "Stop after this many seconds")->check(cli::finite_number(0));
  gradcheck->add_option("--shrink-time", ga.shrink_time, "Seconds spent shrinking each failure at most")
      ->check(cli::finite_number(0));
  gradcheck->add_option("--seed", ga.seed, "Campaign seed")->check(cli::unsigned_integer());
  gradcheck->add_option("--lanes", ga.lanes, "Lanes per GPU")->check(CLI::Range(1, 64));
  gradcheck->add_option("--corpus", ga.corpus, "Folder for shrunk failing cases");
  gradcheck->add_option("--json", ga.json, "Write the report as JSON to this file (also when nothing could run)");
  gradcheck->add_option("--junit", ga.junit, "Write a JUnit XML report to this file (also when nothing could run)");
  gradcheck->add_flag("--require-gpu", ga.require_gpu, "Exit 3 when no GPU is present");

  std::string survey_out = "survey-results";
  int64_t survey_mn = 64;
  int survey_reps = 3;
  auto* survey = app.add_subcommand("vendor-survey",
                                    "Measure cuBLAS per dtype against the fp64 reference on the same rounded inputs");
  survey->add_option("--out", survey_out, "Folder for vendor-survey.md/.json");
  survey->add_option("--mn", survey_mn, "Rows and columns of C")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  survey->add_option("--reps", survey_reps, "Repetitions per row")->check(CLI::Range(1, 1000));

  std::string det_out = "detection-results";
  int det_device = 0;
  auto* detection = app.add_subcommand(
      "detection-table",
      "Measure which check (ceiling, expected level, exact tier, vendor-relative, structural) catches each planted "
      "GEMM bug and the one-pass variance, on fixed probes");
  detection->add_option("--out", det_out, "Folder for detection.md/.json");
  detection->add_option("--device", det_device, "CUDA device index")->check(CLI::NonNegativeNumber);

  ThroughputOptions tpo;
  std::string tp_out = "throughput-results";
  auto* throughput_cmd = app.add_subcommand(
      "throughput",
      "Time the convolution, attention and GEMM-family kernels against cuDNN, cuBLAS / cuBLASLt and a cuBLAS composite (median of cudaEvent-timed "
      "launches, TFLOP/s)");
  throughput_cmd->add_option("--ops", tpo.ops, "Comma-separated: conv, attention, gemm")->delimiter(',');
  throughput_cmd->add_option("--reps", tpo.reps, "Timed launches per measurement (median)")->check(CLI::Range(1, 10000));
  throughput_cmd->add_option("--warmup", tpo.warmup, "Untimed launches first")->check(CLI::Range(0, 1000));
  throughput_cmd->add_option("--out", tp_out, "Folder for throughput.md/.json (empty: none)");
  throughput_cmd->add_option("--device", tpo.device, "CUDA device index")->check(CLI::NonNegativeNumber);

  ExhaustiveArgs xa;
  auto* exhaustive = app.add_subcommand(
      "exhaustive",
      "Every fp16/bf16 bit pattern through one launch of an elementwise kernel, each output against the fp64 "
      "reference in ulps of the dtype (budget from the spec's tolerance); exit 1 if any element exceeds it");
  exhaustive->add_option("op", xa.op, "Op: activation (or activation_bwd, same as --backward)")->required();
  exhaustive->add_option("--dtype", xa.dtype, "fp16 or bf16")->required()->check(CLI::IsMember({"fp16", "bf16"}));
  exhaustive->add_option("--act", xa.act, "gelu_erf, gelu_tanh or silu (default: all three)")
      ->check(CLI::IsMember({"gelu_erf", "gelu_tanh", "silu"}));
  exhaustive->add_option("--variant", xa.variant, "Kernel variant or mutant (default: elementwise)");
  exhaustive->add_flag("--backward", xa.backward, "Sweep the backward: dx = dy act'(x) with dy = 1");
  exhaustive->add_option("--device", xa.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  cli::ReportPaths xa_reports;
  cli::add_report_options(exhaustive, xa_reports);
  FaOptions fao;
  std::string fa_out = "false-alarm-results";
  int fa_device = 0;
  std::string fa_devices, fa_seed = "rotate", fa_ops;
  int fa_shards_per_device = 4;
  double fa_ops_seconds = 30;
  bool fa_host_reference = false;
  int64_t fa_batch_mb = 256;
  auto* false_alarm_cmd = app.add_subcommand(
      "false-alarm",
      "Fuzz the vendor GEMMs (cuBLAS, cuBLASLt: fp32, tf32, fp16, bf16, fp8, int8) against the fp64 reference "
      "(on the device, the host's on a sample beside it) under the hard ceilings of harness/bounds.h; exit 1 if "
      "any element exceeds its ceiling");
  false_alarm_cmd->add_option("--cases", fao.cases, "Cases to run")->check(CLI::NonNegativeNumber);
  false_alarm_cmd->add_option("--time", fao.max_seconds,
                              "Seconds (0: none): past them no new case starts, and the report covers the cases that "
                              "ran (SIGINT/SIGTERM stop the same way, then exit 130/143)")
      ->check(CLI::NonNegativeNumber);
  false_alarm_cmd->add_option("--seed", fa_seed,
                              "Campaign seed (a case is a function of seed and index), or 'rotate' (the default): a "
                              "fresh seed from the clock, printed and recorded in the report and every replay line");
  false_alarm_cmd->add_option("--first-case", fao.first_case, "First case index (replay: --first-case I --cases 1)")
      ->check(CLI::NonNegativeNumber);
  false_alarm_cmd->add_option("--max-k", fao.max_k, "Largest reduction length k")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  false_alarm_cmd->add_option("--max-mn", fao.max_mn, "Largest m and n")->check(CLI::Range(int64_t{1}, int64_t{1024}));
  false_alarm_cmd->add_option("--configs", fao.configs, "Configurations (default: all; see the report's table)")
      ->delimiter(',');
  false_alarm_cmd->add_option("--threads", fao.threads, "Host threads for the sampled references and the judge (0: all cores)")
      ->check(CLI::Range(0, 1024));
  false_alarm_cmd->add_option("--batch-mb", fa_batch_mb, "Device image per batch (inputs and outputs), MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  false_alarm_cmd->add_option("--max-print", fao.max_print, "Failure lines printed")->check(CLI::NonNegativeNumber);
  false_alarm_cmd->add_option("--device", fa_device, "CUDA device index")->check(CLI::NonNegativeNumber);
  false_alarm_cmd->add_option("--devices", fa_devices,
                              "Shard over several GPUs: 'all', a count N (the first N) or a list 0,2 (one shard "
                              "each, the host threads split between them; overrides --device)");
  false_alarm_cmd->add_option("--shards-per-device", fa_shards_per_device,
                              "Shards on each GPU (each its own stream, handles and host thread): one host thread "
                              "cannot enqueue the small vendor calls as fast as a GPU runs them")
      ->check(CLI::Range(1, 64));
  false_alarm_cmd->add_option("--ops", fa_ops,
                              "Also fuzz these ops' vendor libraries (a list, or 'all': every op with one: cuDNN "
                              "softmax, convolution, SiLU and SDPA, cuBLASLt's epilogues, batched and tc GEMMs) as "
                              "variants under their declared contracts, in worker processes; shrunk failures go to "
                              "OUT/corpus");
  false_alarm_cmd->add_option("--ops-seconds", fa_ops_seconds, "Seconds per op of --ops")
      ->check(CLI::PositiveNumber);
  false_alarm_cmd->add_option("--check-every", fao.check_every,
                              "Host fp64 reference beside the device's for every case whose index is a multiple of "
                              "this (0: none); a disagreement stops the campaign")
      ->check(CLI::NonNegativeNumber);
  false_alarm_cmd->add_flag("--host-reference", fa_host_reference,
                            "fp64 reference of every case on the host (the device computes none)");
  false_alarm_cmd->add_option("--out", fa_out, "Folder for false-alarm.md/.json (empty: none)");
  cli::ReportPaths fa_reports;
  cli::add_report_options(false_alarm_cmd, fa_reports);

  std::string triage_path, triage_variant;
  int triage_device = 0;
  bool triage_no_sweep = false;
  std::vector<std::string> triage_sweep;
  auto* triage_cmd =
      app.add_subcommand("triage", "Re-run a stored case and explain it (writes <case>.triage.html/.svg)");
  triage_cmd->add_option("case", triage_path, "Corpus entry or case file")->required();
  triage_cmd->add_option("--variant", triage_variant, "Variant to triage (default: the case's)");
  triage_cmd->add_option("--device", triage_device, "CUDA device index")->check(cli::integer_in(0, 1023));
  triage_cmd->add_flag("--no-sweep", triage_no_sweep, "Skip the dimension sweep");
  triage_cmd->add_option("--sweep", triage_sweep, "Integer params to sweep (default: the op's extents)")
      ->delimiter(',');

  std::string bl_action, bl_op, bl_corpus = "corpora";
  int64_t bl_cases = 20000, bl_max_dim = 512;
  uint64_t bl_seed = 1;
  auto* baseline = app.add_subcommand("baseline", "Accept (update) or re-check (check) accuracy baselines of an op");
  baseline->add_option("action", bl_action, "update or check")->required()->check(CLI::IsMember({"update", "check"}));
  baseline->add_option("op", bl_op, "Op")->required();
  baseline->add_option("--cases", bl_cases, "Cases of the measuring campaign (update)")->check(CLI::PositiveNumber);
  baseline->add_option("--seed", bl_seed, "Seed of the measuring campaign (update)");
  baseline->add_option("--max-dim", bl_max_dim, "Largest extent (update)")->check(CLI::PositiveNumber);
  baseline->add_option("--corpus", bl_corpus, "Corpus folder holding baselines/");
  cli::ReportPaths bl_reports;
  cli::add_report_options(baseline, bl_reports);

  BenchArgs ba;
  auto* bench = app.add_subcommand("bench", "Benchmark: cases/s per size class, time to catch each mutant, large case");
  bench->add_option("--ops", ba.ops, "Ops to benchmark (default: all)")->delimiter(',');
  bench->add_option("--seconds", ba.seconds, "Seconds per throughput run")->check(CLI::PositiveNumber);
  bench->add_option("--lanes", ba.lanes, "Lanes per GPU")->check(CLI::Range(1, 64));
  bench->add_option("--mutant-cases", ba.mutant_cases, "Case budget per mutant")->check(CLI::PositiveNumber);
  bench->add_option("--out", ba.out, "Folder for bench.json and bench.md");
  bench->add_flag("--per-variant", ba.per_variant, "Also each correct variant alone, per size class");
  bench->add_flag("--skip-mutants", ba.skip_mutants, "No time-to-detect runs of the planted mutants");
  bench->add_flag("--skip-large", ba.skip_large, "No large-case breakdown");
  bench->add_option("--workers-per-gpu", ba.workers_per_gpu, "Worker processes on the GPU (throughput runs; default 1)")
      ->check(CLI::Range(1, 16));
  bench->add_option("--vendor-share", ba.vendor_share,
                    fmt::format("Most of a lane's time the vendor column (the vendor-relative ratio) may take; 0: "
                               "never, 1: every case (default {})",
                               kCampaignVendorShare))
      ->check(cli::finite_number(0, false));
  bench->add_flag("--split", ba.split,
                  "Run the small class once more in-process and split the lanes' time by phase (generate, host "
                  "inputs, reference, bound, device reference, upload, vendor column, launch + check, wait, "
                  "properties, queue)");
  bench->add_option("--peer", ba.peer,
                    "Peer command run per op on the small class, e.g. 'python3 python/peers/peer_bench.py' "
                    "(Hypothesis + PyTorch and a plain PyTorch loop; skipped where torch is absent)");

  WorkerConfig wc;
  auto* worker = app.add_subcommand("worker", "Internal: a campaign's worker process (speaks the pipe protocol)");
  worker->group("");  // hidden from --help
  worker->add_option("--op", wc.op)->required();
  worker->add_option("--seed", wc.plan.seed);
  worker->add_option("--max-dim", wc.plan.gen.max_dim);
  worker->add_option("--lanes", wc.lanes);
  worker->add_option("--device", wc.device);
  worker->add_option("--repeat", wc.run.repeat);
  worker->add_option("--vendor-share", wc.run.vendor_share);
  std::string worker_targets;
  worker->add_option("--targets", worker_targets);
  worker->add_flag("--probe", wc.run.probe);

  if (auto unknown = cli::unknown_command(app, argc, argv)) {
    fmt::print(stderr, "assay: usage error: {} (see 'assay --help')\n", *unknown);
    return kExitUsage;
  }
  if (argc > 0) set_program_name(argv[0]);
  // A broken op or variant declaration is found before any command runs.
  if (const auto errs = registration_errors(); !errs.empty()) {
    for (const auto& e : errs) fmt::print(stderr, "assay: error: {}\n", e);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "assay: usage error: {} (see 'assay --help')\n", cli::readable(e.what()));
    return kExitUsage;
  }

  if (list->parsed()) return cli::run_list(list_opts);
  if (fuzz->parsed()) return cmd_fuzz(fa);
  if (gradcheck->parsed()) {
    ga.max_dim = 96;
    return cmd_gradcheck(ga);
  }
  if (replay->parsed())
    return cmd_replay(replay_paths, replay_device, replay_require_gpu, replay_in_process, replay_reports,
                      replay_variants);
  if (selfcheck->parsed()) return self_check(all_specs());
  if (worker->parsed()) {
    for (size_t b = 0; !worker_targets.empty() && b <= worker_targets.size();) {
      const size_t e = std::min(worker_targets.find(',', b), worker_targets.size());
      wc.plan.targets.push_back(worker_targets.substr(b, e - b));
      b = e + 1;
    }
    return run_worker(wc);
  }
  if (bench->parsed()) return cmd_bench(ba);
  if (survey->parsed()) {
    auto ndev = gpu::device_count();
    if (!ndev.ok()) return error(ndev.status());
    auto md = vendor_survey(0, survey_out, survey_mn, survey_reps);
    if (!md.ok()) return error(md.status());
    fmt::print("{}", *md);
    return kExitPass;
  }
  if (exhaustive->parsed()) {
    xa.json = xa_reports.json;
    xa.junit = xa_reports.junit;
    return cmd_exhaustive(xa);
  }
  if (detection->parsed()) {
    auto ndev = gpu::device_count();
    if (!ndev.ok()) return error(ndev.status());
    auto md = detection_table(det_device, det_out);
    if (!md.ok()) return error(md.status());
    fmt::print("{}", *md);
    return kExitPass;
  }
  if (throughput_cmd->parsed()) {
    if (auto s = select_throughput_ops(tpo); !s.ok()) return error(s);
    auto ndev = gpu::device_count();
    if (!ndev.ok()) return error(ndev.status());
    auto md = throughput(tpo, tp_out);
    if (!md.ok()) return error(md.status());
    fmt::print("{}", *md);
    return kExitPass;
  }
  if (false_alarm_cmd->parsed()) {
    fao.batch_bytes = fa_batch_mb << 20;
    if (fa_seed == "rotate") {
      fao.seed = fa_rotating_seed();
      fao.seed_rotated = true;
    } else {
      uint64_t v = 0;
      const auto [end, ec] = std::from_chars(fa_seed.data(), fa_seed.data() + fa_seed.size(), v);
      if (ec != std::errc() || end != fa_seed.data() + fa_seed.size())
        return error(invalid_argument(fmt::format("--seed '{}': expected a number or 'rotate'", fa_seed)));
      fao.seed = v;
    }
    if (fao.seed_rotated)
      fmt::print("false-alarm: seed {} (rotating, from the clock; --seed {} replays this campaign)\n", fao.seed,
                 fao.seed);
    // Unknown configs are a usage error even where no GPU is present.
    if (auto sel = fa_select(fao); !sel.ok()) return error(sel.status());
    auto ndev = gpu::device_count();
    if (!ndev.ok()) {
      const int rc = error(ndev.status());
      CheckReport skipped = cli::skipped_report("false-alarm", "vendor_gemms", ndev.status().message());
      skipped.seed = fao.seed;
      return write_or_error(skipped, fa_reports, rc);
    }
    std::vector<int> devices = {fa_device};
    if (!fa_devices.empty()) {
      auto parsed = fa_parse_devices(fa_devices, *ndev);
      if (!parsed.ok()) return error(parsed.status());
      devices = *parsed;
    }
    std::vector<int> shards;
    for (int d : devices)
      for (int i = 0; i < fa_shards_per_device; ++i) shards.push_back(d);
    devices = shards;
    install_stop_handlers();  // SIGINT / SIGTERM: finish the cases taken, write the report
    auto report = false_alarm(fao, devices, fa_out, !fa_host_reference);
    if (!report.ok()) return error(report.status());
    fmt::print("{}", fa_markdown(*report, fao));
    if (!report->stopped.empty()) fmt::print(stderr, "assay: false-alarm: {}\n", report->stopped);
    // The report: one test per vendor configuration. The configurations run interleaved in
    // batches, so each one's time is the campaign's time in proportion to its cases.
    CheckReport rep;
    rep.command = "false-alarm";
    rep.target = "vendor_gemms";
    rep.device = report->device;
    rep.seed = fao.seed;
    rep.seconds = report->seconds;
    rep.fields = fa_json(*report, fao);
    int rc = kExitPass;
    for (int ci : report->configs) {
      const FaRow t = report->table.config_total(ci);
      CheckCase c;
      c.name = fa_configs()[ci].name;
      c.cases = t.cases;
      c.seconds = report->cases > 0 ? report->seconds * static_cast<double>(t.cases) / static_cast<double>(report->cases) : 0;
      c.output = fmt::format("{} cases, max error/ceiling {:.4g}, not run {}", t.cases, t.max_ratio, t.not_run);
      if (t.failures() > 0) {
        c.failure = fmt::format("{} element(s) beyond the ceiling (ceiling {}, NaN/Inf {}, exact {}, gap writes {})",
                                t.failures(), t.ceiling_failures, t.naninf_failures, t.exact_failures, t.gap_writes);
        for (const auto& f : report->failures)
          if (f.c.config == ci) c.detail += fa_failure_line(f, fao) + "\n";
        rc = kExitFail;
      } else if (t.cases == 0 && t.not_run > 0) {
        c.skipped = report->not_run_reason[static_cast<size_t>(ci)];
        fmt::print(stderr, "assay: false-alarm: config {} ran no case ({})\n", fa_configs()[ci].name, c.skipped);
        if (rc == kExitPass) rc = kExitInfra;
      }
      rep.cases.push_back(std::move(c));
    }
    if (!fa_ops.empty() && stop_signal() == 0) {
      std::vector<int> gpus = devices;
      std::sort(gpus.begin(), gpus.end());
      gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
      auto section = vendor_ops_campaigns(fa_ops, fa_ops_seconds, fao.seed, gpus, fa_out, rep);
      if (!section.ok()) return error(section.status());
      if (*section != kExitPass && rc == kExitPass) rc = *section;
    }
    if (stop_signal() != 0 && rc == kExitPass) rc = 128 + stop_signal();
    return write_or_error(rep, fa_reports, rc);
  }
  if (baseline->parsed())
    return cmd_baseline(bl_action, bl_op, bl_cases, bl_seed, bl_max_dim, bl_corpus, bl_reports);
  if (triage_cmd->parsed())
    return cmd_triage(triage_path, triage_variant, triage_device, triage_no_sweep, triage_sweep);
  return kExitUsage;
}
