#include "harness/executor.h"

#include <map>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "harness/draw_ahead.h"
#include "harness/gpu/lane.h"
#include "harness/interrupt.h"
#include "harness/phase_time.h"

namespace assay {
namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  return x;
}

class InProcessExecutor final : public Executor {
 public:
  InProcessExecutor(const OpSpec& spec, const GenPlan& plan, int lanes, int device, const RunOptions& run)
      : spec_(spec), plan_(plan), lanes_(lanes), run_(run), jobs_([this](Job& j) { draw(j); }) {
    for (int i = 0; i < lanes; ++i) threads_.emplace_back([this, device] { work(device); });
  }
  ~InProcessExecutor() override {
    jobs_.stop();
    for (auto& t : threads_) t.join();
  }
  void submit(Job j) override {
    {
      std::lock_guard lk(mu_);
      ++outstanding_;
    }
    jobs_.push(std::move(j));
  }
  JobResult wait_until(Deadline deadline) override {
    std::unique_lock lk(mu_);
    // Wakes every 100 ms to see a stop request (a signal handler cannot notify).
    while (results_.empty()) {
      if (stop_signal() != 0 || std::chrono::steady_clock::now() >= deadline) {
        JobResult r;
        r.interrupted = true;
        return r;
      }
      const auto step = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      cv_results_.wait_until(lk, std::min(step, deadline));
    }
    JobResult r = std::move(results_.front());
    results_.pop_front();
    --outstanding_;
    return r;
  }
  int64_t outstanding() const override {
    std::lock_guard lk(mu_);
    return outstanding_;
  }
  int64_t capacity() const override { return 2 * lanes_; }
  std::string device() const override { return device_; }
  void set_device(std::string d) { device_ = std::move(d); }

 private:
  void draw(Job& j) const {
    if (!j.gen_index) return;
    j.c = generate_case(spec_, plan_, *j.gen_index);
    j.gen_index.reset();
  }

  void work(int device) {
    auto lane = gpu::Lane::create(device);
    if (lane.ok()) (*lane)->options = run_;
    for (;;) {
      std::optional<Job> next;
      {
        const PhaseTimer timer(Phase::kQueue);
        next = jobs_.pop();
      }
      if (!next) return;
      Job& j = *next;
      JobResult r;
      r.id = j.id;
      if (!lane.ok()) {
        r.status = lane.status();
      } else {
        const Case& c = j.c;
        auto v = spec_.run(c, j.variants, **lane);
        if (v.ok())
          r.verdicts = std::move(v).value();
        else
          r.status = v.status();
      }
      {
        std::lock_guard lk(mu_);
        results_.push_back(std::move(r));
      }
      cv_results_.notify_one();
    }
  }

  const OpSpec& spec_;
  GenPlan plan_;
  int lanes_;
  RunOptions run_;
  std::string device_;
  mutable std::mutex mu_;
  std::condition_variable cv_results_;
  std::deque<JobResult> results_;
  int64_t outstanding_ = 0;
  DrawAhead<Job> jobs_;  ///< submitted, their cases drawn ahead of the lanes
  std::vector<std::thread> threads_;
};

}  // namespace

Case generate_case(const OpSpec& spec, const GenPlan& plan, int64_t index) {
  // RapidCheck's gen::exec keeps its "current generation" in process-global
  // state, so generation is serialised (measured: concurrent calls abort
  // with "operator* is not allowed in this context"). It takes microseconds. The lane's
  // time here, waiting on the lock included, is the bench's "generate".
  const PhaseTimer timer(Phase::kGenerate);
  static std::mutex mu;
  std::lock_guard lk(mu);
  GenConfig cfg = plan.gen;
  if (!plan.targets.empty())
    cfg.target = plan.targets[static_cast<size_t>(index % static_cast<int64_t>(plan.targets.size()))];
  static const OpSpec* cached_spec = nullptr;
  static std::map<std::pair<int64_t, std::string>, rc::Gen<Case>> gens;
  if (cached_spec != &spec) gens.clear(), cached_spec = &spec;
  auto key = std::make_pair(cfg.max_dim, cfg.target);
  auto it = gens.find(key);
  if (it == gens.end()) it = gens.emplace(key, spec.generator(cfg)).first;
  return it->second(rc::Random(mix(plan.seed, static_cast<uint64_t>(index))), static_cast<int>(index % 100)).value();
}

StatusOr<std::unique_ptr<Executor>> make_in_process_executor(const OpSpec& spec, const GenPlan& plan, int lanes,
                                                             int device, const RunOptions& run) {
  ASSAY_ASSIGN_OR_RETURN(int n, gpu::device_count());
  if (device < 0 || device >= n) return invalid_argument("device index out of range");
  auto e = std::make_unique<InProcessExecutor>(spec, plan, lanes, device, run);
  e->set_device(gpu::describe_device(device));
  return std::unique_ptr<Executor>(std::move(e));
}

}  // namespace assay
