#include "harness/campaign.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "harness/shrink.h"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Job {
  int64_t id = 0;
  Case c;
  std::vector<std::string> variants;
};

struct Result {
  int64_t id = 0;
  Status status;
  std::vector<Verdict> verdicts;
};

// Lanes as worker threads; each owns a gpu::Lane created on its own thread.
class Pool {
 public:
  Pool(const OpSpec& spec, int lanes, int device) : spec_(spec) {
    for (int i = 0; i < lanes; ++i) threads_.emplace_back([this, device] { work(device); });
  }
  ~Pool() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_jobs_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void submit(Job j) {
    {
      std::lock_guard lk(mu_);
      jobs_.push_back(std::move(j));
    }
    cv_jobs_.notify_one();
  }
  Result wait() {
    std::unique_lock lk(mu_);
    cv_results_.wait(lk, [&] { return !results_.empty(); });
    Result r = std::move(results_.front());
    results_.pop_front();
    return r;
  }

 private:
  void work(int device) {
    auto lane = gpu::Lane::create(device);
    for (;;) {
      Job j;
      {
        std::unique_lock lk(mu_);
        cv_jobs_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        j = std::move(jobs_.front());
        jobs_.pop_front();
      }
      Result r;
      r.id = j.id;
      if (!lane.ok()) {
        r.status = lane.status();
      } else {
        auto v = spec_.run(j.c, j.variants, **lane);
        if (v.ok()) r.verdicts = std::move(v).value();
        else r.status = v.status();
      }
      {
        std::lock_guard lk(mu_);
        results_.push_back(std::move(r));
      }
      cv_results_.notify_one();
    }
  }

  const OpSpec& spec_;
  std::mutex mu_;
  std::condition_variable cv_jobs_, cv_results_;
  std::deque<Job> jobs_;
  std::deque<Result> results_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  return x;
}

}  // namespace

nlohmann::json found_json(const FoundFailure& f, const std::string& device, uint64_t seed) {
  return {{"variant", f.variant},
          {"verdict", f.verdict.to_json()},
          {"device", device},
          {"campaign", {{"seed", seed}, {"case_index", f.case_index}, {"original_id", f.original.id()}}},
          {"shrink", {{"steps", f.shrink_steps}, {"evaluations", f.shrink_evals}}},
          {"assay_version", "0.1.0"}};
}

StatusOr<CampaignReport> run_campaign(const OpSpec& spec, const CampaignOptions& opts_in) {
  CampaignOptions opts = opts_in;
  if (opts.variants.empty()) opts.variants = spec.default_variants();
  for (const auto& v : opts.variants)
    if (!spec.has_variant(v)) return not_found(fmt::format("op '{}' has no variant '{}'", spec.name(), v));
  if (opts.max_cases == 0 && opts.max_seconds == 0) opts.max_cases = 1000;
  if (opts.lanes < 1) return invalid_argument("--lanes must be at least 1");
  ASSAY_ASSIGN_OR_RETURN(int ndev, gpu::device_count());
  if (opts.device < 0 || opts.device >= ndev)
    return invalid_argument(fmt::format("--device {} does not exist ({} visible)", opts.device, ndev));

  CampaignReport report;
  report.op = spec.name();
  report.device = gpu::describe_device(opts.device);
  report.lanes = opts.lanes;
  const auto gen = spec.generator(opts.gen);
  Pool pool(spec, opts.lanes, opts.device);
  const auto t0 = Clock::now();
  auto last_progress = t0;

  std::vector<std::string> active = opts.variants;
  std::map<int64_t, Case> pending;  // generated, not yet judged
  struct ToShrink {
    int64_t index;
    std::string variant;
    Case c;
    Verdict verdict;
  };
  std::vector<ToShrink> to_shrink;
  int64_t next_index = 0;
  int64_t inflight = 0;
  const int64_t max_inflight = 2 * opts.lanes;
  Status infra;

  auto budget_left = [&] {
    if (opts.max_cases > 0 && next_index >= opts.max_cases) return false;
    if (opts.max_seconds > 0 && since(t0) >= opts.max_seconds) return false;
    return true;
  };
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

  // Runs `cases` for one variant in parallel; returns index of the first failing one.
  auto first_failing = [&](const std::vector<Case>& cases, const std::string& variant,
                           std::vector<Verdict>& verdicts) -> std::optional<size_t> {
    for (size_t i = 0; i < cases.size(); ++i) pool.submit({static_cast<int64_t>(i), cases[i], {variant}});
    std::vector<std::optional<Verdict>> got(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      Result r = pool.wait();
      if (r.status.ok() && !r.verdicts.empty()) got[static_cast<size_t>(r.id)] = r.verdicts.front();
      else if (!r.status.ok() && infra.ok()) infra = r.status;
    }
    verdicts.clear();
    for (auto& g : got) verdicts.push_back(g ? *g : Verdict{});
    for (size_t i = 0; i < cases.size(); ++i)
      if (got[i] && !got[i]->passed()) return i;
    return std::nullopt;
  };

  auto shrink = [&](ToShrink& item) {
    FoundFailure f;
    f.variant = item.variant;
    f.original = item.c;
    f.original.variant = item.variant;
    f.case_index = item.index;
    f.seconds_to_find = since(t0);
    Verdict cur_verdict = item.verdict;
    const auto ts = Clock::now();
    std::vector<Verdict> last_verdicts;
    BatchJudge judge = [&](const std::vector<Case>& batch) -> std::optional<size_t> {
      report_progress(true);
      if (!infra.ok()) return std::nullopt;
      return first_failing(batch, item.variant, last_verdicts);
    };
    ShrinkLimits limits{opts.max_shrink_evals, opts.max_shrink_seconds, static_cast<size_t>(opts.lanes)};
    ShrinkOutcome so = shrink_case(spec, f.original, judge, limits,
                                   [&](const Case&, size_t hit) { cur_verdict = last_verdicts[hit]; });
    Case cur = so.minimal;
    f.shrink_steps = so.steps;
    f.shrink_evals = so.evals;
    f.shrunk = cur;
    f.shrunk.variant = item.variant;
    f.verdict = cur_verdict;
    f.seconds_to_shrink = since(ts);
    if (!opts.corpus_dir.empty()) {
      auto path = write_entry(opts.corpus_dir, f.shrunk, found_json(f, report.device, opts.seed));
      if (path.ok()) f.path = *path;
      else if (infra.ok()) infra = path.status();
    }
    report.failures.push_back(std::move(f));
  };

  while (infra.ok()) {
    while (inflight < max_inflight && !active.empty() && budget_left()) {
      const int64_t i = next_index++;
      // Size ramps like RapidCheck's (0..99) so early cases are small.
      Case c = gen(rc::Random(mix(opts.seed, static_cast<uint64_t>(i))), static_cast<int>(i % 100)).value();
      pool.submit({i, c, active});
      pending.emplace(i, std::move(c));
      ++inflight;
    }
    if (inflight == 0) break;
    Result r = pool.wait();
    --inflight;
    auto it = pending.find(r.id);
    if (!r.status.ok()) {
      // The case may have killed the context: keep it as a crash entry.
      if (it != pending.end() && !opts.corpus_dir.empty()) {
        FoundFailure f;
        f.original = f.shrunk = it->second;
        f.case_index = r.id;
        f.verdict.failures.push_back({FailureKind::kCrash, "", 0, -1, r.status.message()});
        auto path = write_entry(opts.corpus_dir, f.shrunk, found_json(f, report.device, opts.seed));
        if (path.ok()) f.path = *path;
        report.failures.push_back(std::move(f));
      }
      infra = r.status;
      break;
    }
    ++report.cases;
    for (const auto& v : r.verdicts) {
      auto& st = report.per_variant[v.variant];
      ++st.cases;
      if (v.metrics.exact_tier && &v == &r.verdicts.front()) ++report.exact_cases;
      if (v.metrics.reference == "device-f64" && &v == &r.verdicts.front()) ++report.device_ref_cases;
      if (v.metrics.vendor_violations > 0 && &v == &r.verdicts.front()) ++report.vendor_disagreements;
      if (v.passed()) {
        st.max_ratio = std::max(st.max_ratio, v.metrics.max_ratio);
        continue;
      }
      ++st.failures;
      const bool still_active = std::find(active.begin(), active.end(), v.variant) != active.end();
      const bool queued = std::any_of(to_shrink.begin(), to_shrink.end(),
                                      [&](const ToShrink& t) { return t.variant == v.variant; });
      if ((still_active || opts.keep_going) && !queued && it != pending.end()) {
        to_shrink.push_back({r.id, v.variant, it->second, v});
        if (!opts.keep_going) active.erase(std::remove(active.begin(), active.end(), v.variant), active.end());
      }
    }
    if (it != pending.end()) pending.erase(it);
    report_progress(false);
    // Shrink once the pool has drained, so shrink batches own every lane.
    if (inflight == 0 && !to_shrink.empty()) {
      for (auto& item : to_shrink) shrink(item);
      to_shrink.clear();
    }
    if (inflight == 0 && (active.empty() || !budget_left())) break;
  }
  for (auto& item : to_shrink) shrink(item);
  report.seconds = since(t0);
  if (!infra.ok()) return infra;
  return report;
}

}  // namespace assay
