#include "harness/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "harness/gpu/lane.h"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return true;
}

// Passing verdicts go back compact (most cases pass); failing ones whole.
nlohmann::json wire_verdict(const Verdict& v) {
  if (!v.passed()) return v.to_json();
  return {{"v", v.variant},
          {"r", v.metrics.max_ratio},
          {"x", v.metrics.exact_tier},
          {"d", v.metrics.reference == "device-f64"},
          {"w", v.metrics.vendor_violations},
          {"vr", v.metrics.vendor_max_ratio},
          {"k", v.metrics.key},
          {"n", v.metrics.not_run}};
}

Verdict unwire_verdict(const nlohmann::json& j) {
  if (!j.contains("v")) return Verdict::from_json(j);
  Verdict v;
  v.variant = j.value("v", "");
  v.metrics.max_ratio = j["r"].is_number() ? j["r"].get<double>() : 0.0;
  v.metrics.exact_tier = j.value("x", false);
  v.metrics.reference = j.value("d", false) ? "device-f64" : "host-f64";
  v.metrics.vendor_violations = j.value("w", int64_t{0});
  v.metrics.vendor_max_ratio = j["vr"].is_number() ? j["vr"].get<double>() : -1.0;
  v.metrics.key = j.value("k", "");
  v.metrics.not_run = j.value("n", "");
  return v;
}

}  // namespace

// ---- the worker side ------------------------------------------------------------

int run_worker(const WorkerConfig& cfg) {
  const OpSpec* spec = find_spec(cfg.op);
  std::mutex out_mu;
  auto emit = [&](const std::string& line) {
    std::lock_guard lk(out_mu);
    write_all(cfg.out_fd, line + "\n");
  };
  if (spec == nullptr) {
    emit(fmt::format("FATAL 0 unknown op '{}'", cfg.op));
    return 3;
  }
  std::vector<std::unique_ptr<gpu::Lane>> lanes;
  for (int i = 0; i < cfg.lanes; ++i) {
    auto lane = gpu::Lane::create(cfg.device);
    if (!lane.ok()) {
      emit("FATAL 0 " + lane.status().message());
      return 3;
    }
    (*lane)->options = cfg.run;
    lanes.push_back(std::move(lane).value());
  }
  emit("READY " + gpu::describe_device(cfg.device));

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> queue;
  bool closed = false;
  std::atomic<bool> fatal{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < cfg.lanes; ++i) {
    threads.emplace_back([&, i] {
      gpu::Lane& lane = *lanes[i];
      // The current device is per host thread and starts at 0: a lane made on
      // the main thread for device d must select d here too.
      if (cudaSetDevice(lane.device()) != cudaSuccess) {
        emit("FATAL 0 cudaSetDevice failed on a lane thread");
        fatal = true;
        return;
      }
      for (;;) {
        std::string line;
        {
          std::unique_lock lk(mu);
          cv.wait(lk, [&] { return closed || !queue.empty(); });
          if (queue.empty()) return;
          line = std::move(queue.front());
          queue.pop_front();
        }
        if (fatal) continue;
        // RUN <id> <index> <variants> | CASE <id> <variants> <json>
        std::istringstream in(line);
        std::string verb, id, variants;
        in >> verb >> id;
        Case c;
        if (verb == "RUN") {
          int64_t index = 0;
          in >> index >> variants;
          c = generate_case(*spec, cfg.plan, index);
        } else {
          in >> variants;
          std::string json;
          std::getline(in, json);
          try {
            auto parsed = Case::from_json(nlohmann::json::parse(json), "job " + id);
            if (!parsed.ok()) {
              emit(fmt::format("FATAL {} {}", id, parsed.status().message()));
              fatal = true;
              continue;
            }
            c = std::move(parsed).value();
          } catch (const std::exception& e) {
            emit(fmt::format("FATAL {} job is not valid JSON: {}", id, e.what()));
            fatal = true;
            continue;
          }
        }
        auto verdicts = spec->run(c, split(variants, ','), lane);
        if (!verdicts.ok()) {
          // A CUDA error that poisons the context: nothing more can run here.
          emit(fmt::format("FATAL {} {}", id, verdicts.status().message()));
          fatal = true;
          continue;
        }
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& v : *verdicts) arr.push_back(wire_verdict(v));
        emit(fmt::format("DONE {} {}", id, arr.dump()));
      }
    });
  }
  // Reader: stdin lines into the queue, until QUIT or end of input.
  std::string buf;
  char chunk[65536];
  bool quit = false;
  while (!quit && !fatal) {
    const ssize_t n = ::read(cfg.in_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    size_t pos;
    while ((pos = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, pos);
      buf.erase(0, pos + 1);
      if (line == "QUIT") {
        quit = true;
        break;
      }
      {
        std::lock_guard lk(mu);
        queue.push_back(std::move(line));
      }
      cv.notify_one();
    }
  }
  {
    std::lock_guard lk(mu);
    closed = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  return fatal ? 3 : 0;
}

// ---- the parent side --------------------------------------------------------------
namespace {

struct Worker {
  pid_t pid = -1;
  int to = -1, from = -1;
  int device = 0;
  std::string buf;
  std::map<int64_t, Job> inflight;
  Clock::time_point last_progress;
  std::string fatal;          // FATAL message, if any
  std::string sanitizer_log;  // sanitizer lines since the last DONE
  bool dead = false;
};

class ProcessExecutor final : public Executor {
 public:
  ProcessExecutor(std::string op, GenPlan plan, ProcessOptions opts)
      : op_(std::move(op)), plan_(std::move(plan)), opts_(std::move(opts)) {
    if (!opts_.sanitize.empty()) opts_.lanes = 1;  // one case at a time: reports attribute to it
  }
  ~ProcessExecutor() override {
    for (auto& w : workers_) stop(w, true);
  }

  Status start() {
    ::signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill the parent on write
    for (int d : opts_.devices) {
      Worker w;
      w.device = d;
      ASSAY_RETURN_IF_ERROR(spawn(w));
      workers_.push_back(std::move(w));
    }
    return ok_status();
  }

  void submit(Job j) override {
    ++outstanding_;
    if (!opts_.sanitize.empty() && j.variants.size() > 1) {
      // Under a sanitizer each job runs one variant, so a report names it.
      split_jobs_[j.id] = {j.variants.size(), {}};
      for (size_t i = 0; i < j.variants.size(); ++i) {
        Job part = j;
        part.variants = {j.variants[i]};
        part.id = next_split_id_--;
        split_parent_[part.id] = j.id;
        dispatch(std::move(part));
      }
      return;
    }
    dispatch(std::move(j));
  }

  JobResult wait() override {
    for (;;) {
      if (!infra_.ok()) {
        JobResult r;
        r.status = infra_;
        return r;
      }
      if (!ready_.empty()) {
        JobResult r = std::move(ready_.front());
        ready_.pop_front();
        if (auto it = split_parent_.find(r.id); it != split_parent_.end()) {
          const int64_t parent = it->second;
          split_parent_.erase(it);
          auto& acc = split_jobs_[parent];
          acc.second.push_back(std::move(r));
          if (acc.second.size() < acc.first) continue;
          JobResult merged;
          merged.id = parent;
          for (auto& part : acc.second) {
            if (!part.status.ok()) merged.status = part.status;
            for (auto& v : part.verdicts) merged.verdicts.push_back(std::move(v));
          }
          split_jobs_.erase(parent);
          --outstanding_;
          return merged;
        }
        --outstanding_;
        return r;
      }
      poll_once();
    }
  }

  int64_t outstanding() const override { return outstanding_; }
  int64_t capacity() const override {
    return opts_.sanitize.empty() ? static_cast<int64_t>(workers_.size()) * opts_.lanes * 3 : 1;
  }
  std::string device() const override { return device_; }

 private:
  Status spawn(Worker& w) {
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
      return internal_error(fmt::format("cannot create pipes for a worker: {}", std::strerror(errno)));
    std::vector<std::string> args;
    if (!opts_.sanitize.empty()) {
      args = {opts_.sanitizer, "--tool", opts_.sanitize, "--print-limit", "20"};
      if (opts_.sanitize == "memcheck") args.insert(args.end(), {"--leak-check", "no"});
    }
    args.insert(args.end(), {opts_.binary, "worker", "--op", op_, "--seed", std::to_string(plan_.seed), "--max-dim",
                             std::to_string(plan_.gen.max_dim), "--lanes", std::to_string(opts_.lanes), "--device",
                             std::to_string(w.device), "--repeat", std::to_string(opts_.run.repeat)});
    pid_t pid = -1;
    if (opts_.fork_worker) {
      std::vector<int> parent_fds = {to[1], from[0]};
      for (const auto& o : workers_)
        if (o.pid > 0) parent_fds.insert(parent_fds.end(), {o.to, o.from});
      pid = opts_.fork_worker(w.device, to[0], from[1], parent_fds);
    } else {
      pid = ::fork();
    }
    if (pid < 0) return internal_error(fmt::format("cannot fork a worker: {}", std::strerror(errno)));
    if (pid == 0 && !opts_.fork_worker) {
      ::dup2(to[0], STDIN_FILENO);
      ::dup2(from[1], STDOUT_FILENO);
      if (!opts_.sanitize.empty()) ::dup2(from[1], STDERR_FILENO);  // reports in order with DONE lines
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      const std::string msg = fmt::format("FATAL 0 cannot start {}: {}\n", argv[0], std::strerror(errno));
      write_all(STDOUT_FILENO, msg);
      ::_exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    w.pid = pid;
    w.to = to[1];
    w.from = from[0];
    w.buf.clear();
    w.fatal.clear();
    w.sanitizer_log.clear();
    w.dead = false;
    w.inflight.clear();
    // Wait for READY (or the reason it never comes).
    const auto t0 = Clock::now();
    for (;;) {
      std::string line;
      const double left = opts_.start_timeout_s - std::chrono::duration<double>(Clock::now() - t0).count();
      if (left <= 0 || !read_line(w, line, left)) {
        stop(w, true);
        return internal_error(
            fmt::format("worker for device {} did not start{}", w.device, w.fatal.empty() ? "" : ": " + w.fatal));
      }
      if (line.rfind("READY ", 0) == 0) {
        const std::string d = fmt::format("[{}] {}", w.device, line.substr(6));
        if (device_.find(fmt::format("[{}] ", w.device)) == std::string::npos)
          device_ += (device_.empty() ? "" : "; ") + d;
        break;
      }
      if (line.rfind("FATAL ", 0) == 0) {
        stop(w, true);
        return internal_error(fmt::format("worker for device {} failed to start: {}", w.device, strip_id(line)));
      }
      // Anything else before READY (the sanitizer's banner) is ignored.
    }
    w.last_progress = Clock::now();
    return ok_status();
  }

  static std::string strip_id(const std::string& line) {  // "FATAL <id> msg" -> "msg"
    const size_t a = line.find(' ');
    const size_t b = a == std::string::npos ? a : line.find(' ', a + 1);
    return b == std::string::npos ? line : line.substr(b + 1);
  }

  // Blocking read of one line with a timeout; false on EOF or timeout.
  bool read_line(Worker& w, std::string& line, double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      if (size_t pos = w.buf.find('\n'); pos != std::string::npos) {
        line = w.buf.substr(0, pos);
        w.buf.erase(0, pos + 1);
        return true;
      }
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{w.from, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min(left * 1000, 1000.0)) + 1);
      if (r < 0 && errno != EINTR) return false;
      if (r > 0) {
        char chunk[65536];
        const ssize_t n = ::read(w.from, chunk, sizeof chunk);
        if (n <= 0) return false;
        w.buf.append(chunk, static_cast<size_t>(n));
      }
    }
  }

  void stop(Worker& w, bool kill_it) {
    if (w.pid <= 0) return;
    if (!kill_it) write_all(w.to, "QUIT\n");
    if (kill_it) ::kill(w.pid, SIGKILL);
    int status = 0;
    ::waitpid(w.pid, &status, 0);
    ::close(w.to);
    ::close(w.from);
    w.pid = -1;
  }

  Worker& least_loaded() {
    Worker* best = &workers_.front();
    for (auto& w : workers_)
      if (w.inflight.size() < best->inflight.size()) best = &w;
    return *best;
  }

  void send(Worker& w, Job j) {
    std::string line = j.gen_index ? fmt::format("RUN {} {} {}\n", j.id, *j.gen_index, join(j.variants))
                                   : fmt::format("CASE {} {} {}\n", j.id, join(j.variants), j.c.to_json().dump());
    if (w.inflight.empty()) w.last_progress = Clock::now();
    w.inflight.emplace(j.id, std::move(j));
    if (!write_all(w.to, line)) w.dead = true;  // handled by the next poll
  }

  void dispatch(Job j) {
    if (!opts_.sanitize.empty()) {
      pending_.push_back(std::move(j));  // one at a time per worker
      pump();
      return;
    }
    send(least_loaded(), std::move(j));
  }

  void pump() {  // sanitize mode: at most one job in flight per worker
    for (auto& w : workers_) {
      if (pending_.empty()) return;
      if (w.inflight.empty()) {
        Job j = std::move(pending_.front());
        pending_.pop_front();
        send(w, std::move(j));
      }
    }
  }

  void poll_once() {
    std::vector<pollfd> fds;
    for (auto& w : workers_) fds.push_back({w.from, POLLIN, 0});
    const int r = ::poll(fds.data(), fds.size(), 100);
    if (r < 0 && errno != EINTR) return;
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = workers_[i];
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char chunk[65536];
        const ssize_t n = ::read(w.from, chunk, sizeof chunk);
        if (n <= 0) {
          w.dead = true;
        } else {
          w.buf.append(chunk, static_cast<size_t>(n));
          size_t pos;
          while ((pos = w.buf.find('\n')) != std::string::npos) {
            std::string line = w.buf.substr(0, pos);
            w.buf.erase(0, pos + 1);
            handle_line(w, line);
          }
        }
      }
      const double idle = std::chrono::duration<double>(Clock::now() - w.last_progress).count();
      const double limit = opts_.case_timeout_s * (opts_.sanitize.empty() ? 1 : 20);
      if (!w.dead && !w.inflight.empty() && idle > limit) {
        ::kill(w.pid, SIGKILL);
        recover(w, FailureKind::kHang, fmt::format("no result within {:.0f} s (watchdog); worker killed", limit));
      } else if (w.dead || !w.fatal.empty()) {
        recover(w, FailureKind::kCrash, death_reason(w));
      }
    }
    if (!opts_.sanitize.empty()) pump();
  }

  void handle_line(Worker& w, const std::string& line) {
    if (line.rfind("DONE ", 0) == 0) {
      std::istringstream in(line.substr(5));
      int64_t id = 0;
      in >> id;
      std::string json;
      std::getline(in, json);
      auto it = w.inflight.find(id);
      if (it == w.inflight.end()) return;
      JobResult r;
      r.id = id;
      try {
        for (const auto& jv : nlohmann::json::parse(json)) r.verdicts.push_back(unwire_verdict(jv));
      } catch (const std::exception& e) {
        r.status = internal_error(fmt::format("unreadable worker result: {}", e.what()));
      }
      if (!opts_.sanitize.empty()) finish_sanitized_worker(w);
      if (!w.sanitizer_log.empty()) {
        for (auto& v : r.verdicts)
          v.failures.push_back({FailureKind::kSanitizer, "", 1, -1,
                                fmt::format("compute-sanitizer --tool {}: {}", opts_.sanitize, w.sanitizer_log)});
        w.sanitizer_log.clear();
      }
      w.inflight.erase(it);
      w.last_progress = Clock::now();
      ready_.push_back(std::move(r));
      if (!opts_.sanitize.empty() && w.pid <= 0) {
        if (Status s = spawn(w); !s.ok()) infra_ = s;
      }
    } else if (line.rfind("FATAL ", 0) == 0) {
      w.fatal = strip_id(line);
    } else if (!opts_.sanitize.empty() && line.rfind("=========", 0) == 0) {
      // Error lines of compute-sanitizer; its banner and summary are not errors.
      const std::string text = line.substr(9);
      const bool noise = text.find("COMPUTE-SANITIZER") != std::string::npos ||
                         text.find("ERROR SUMMARY: 0 errors") != std::string::npos ||
                         text.find("RACECHECK SUMMARY: 0 hazards") != std::string::npos;
      const bool error = text.find("Invalid") != std::string::npos || text.find("Error") != std::string::npos ||
                         text.find("ERROR SUMMARY") != std::string::npos || text.find("Race") != std::string::npos ||
                         text.find("Uninitialized") != std::string::npos || text.find("Barrier") != std::string::npos ||
                         text.find("hazard") != std::string::npos;
      if (!noise && error && w.sanitizer_log.size() < 2000) {
        size_t a = text.find_first_not_of(' ');
        w.sanitizer_log += (w.sanitizer_log.empty() ? "" : " | ") + text.substr(a == std::string::npos ? 0 : a);
      }
    }
  }

  // compute-sanitizer buffers its reports when writing to a pipe and flushes
  // them at exit, so under a sanitizer each job gets its own worker process:
  // after its DONE the worker is told to quit and everything it prints up to
  // its exit (reports, the error summary) belongs to that job.
  void finish_sanitized_worker(Worker& w) {
    write_all(w.to, "QUIT\n");
    std::string line;
    const double limit = opts_.case_timeout_s * 20;
    while (read_line(w, line, limit)) {
      if (line.rfind("=========", 0) == 0) handle_line(w, line);
    }
    int status = 0;
    ::kill(w.pid, SIGKILL);  // no-op once it has exited
    ::waitpid(w.pid, &status, 0);
    ::close(w.to);
    ::close(w.from);
    w.pid = -1;
  }

  std::string death_reason(Worker& w) {
    int status = 0;
    std::string why;
    if (w.pid > 0 && ::waitpid(w.pid, &status, WNOHANG) == w.pid) {
      w.pid = -1;
      if (WIFSIGNALED(status))
        why = fmt::format("worker killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
      else if (WIFEXITED(status))
        why = fmt::format("worker exited with status {}", WEXITSTATUS(status));
    }
    if (!w.fatal.empty()) why = (why.empty() ? "" : why + ": ") + w.fatal;
    return why.empty() ? "worker died" : why;
  }

  // A worker died or hung: replace it, then re-run each of its in-flight
  // (case, variant) alone in fresh workers to find the one that kills it.
  void recover(Worker& w, FailureKind kind, const std::string& reason) {
    std::map<int64_t, Job> suspects = std::move(w.inflight);
    w.inflight.clear();
    if (w.pid > 0)
      stop(w, true);
    else {
      ::close(w.to);
      ::close(w.from);
    }
    const bool single = suspects.size() == 1 && suspects.begin()->second.variants.size() == 1;
    for (auto& [id, job] : suspects) {
      JobResult r;
      r.id = id;
      for (const auto& variant : job.variants) {
        if (single) {
          r.verdicts.push_back(crash_verdict(variant, kind, reason));
          continue;
        }
        Job alone = job;
        alone.variants = {variant};
        r.verdicts.push_back(run_alone(w, alone));
      }
      ready_.push_back(std::move(r));
    }
    if (w.pid <= 0) {
      if (Status s = spawn(w); !s.ok()) infra_ = s;
    }
  }

  static Verdict crash_verdict(const std::string& variant, FailureKind kind, const std::string& reason) {
    Verdict v;
    v.variant = variant;
    v.failures.push_back({kind, "", 0, -1, reason});
    return v;
  }

  Verdict run_alone(Worker& w, const Job& job) {
    if (w.pid <= 0) {
      if (Status s = spawn(w); !s.ok()) return crash_verdict(job.variants.front(), FailureKind::kCrash, s.message());
    }
    send(w, job);
    const double limit = opts_.case_timeout_s * (opts_.sanitize.empty() ? 1 : 20);
    std::string line;
    for (;;) {
      if (!read_line(w, line, limit)) {
        const bool hung = ::waitpid(w.pid, nullptr, WNOHANG) == 0;
        const std::string reason =
            hung ? fmt::format("no result within {:.0f} s (watchdog); worker killed", limit) : death_reason(w);
        w.inflight.clear();
        if (w.pid > 0) stop(w, true);
        return crash_verdict(job.variants.front(), hung ? FailureKind::kHang : FailureKind::kCrash, reason);
      }
      if (line.rfind("DONE ", 0) == 0 || line.rfind("FATAL ", 0) == 0) {
        handle_line(w, line);
        if (!w.fatal.empty()) {
          const std::string reason = "worker failed: " + w.fatal;
          w.inflight.clear();
          stop(w, true);
          return crash_verdict(job.variants.front(), FailureKind::kCrash, reason);
        }
        JobResult r = std::move(ready_.back());
        ready_.pop_back();
        return r.verdicts.empty() ? crash_verdict(job.variants.front(), FailureKind::kCrash, "empty result")
                                  : r.verdicts.front();
      }
      handle_line(w, line);
    }
  }

  std::string op_;
  GenPlan plan_;
  ProcessOptions opts_;
  std::vector<Worker> workers_;
  std::deque<JobResult> ready_;
  std::deque<Job> pending_;
  std::map<int64_t, std::pair<size_t, std::vector<JobResult>>> split_jobs_;
  std::map<int64_t, int64_t> split_parent_;
  int64_t next_split_id_ = -(int64_t{1} << 40);
  int64_t outstanding_ = 0;
  std::string device_;
  Status infra_;
};

}  // namespace

StatusOr<std::unique_ptr<Executor>> make_process_executor(const std::string& op, const GenPlan& plan,
                                                          const ProcessOptions& opts) {
  if (opts.binary.empty() && !opts.fork_worker) return invalid_argument("worker binary not set");
  if (opts.devices.empty()) return invalid_argument("no devices given");
  auto e = std::make_unique<ProcessExecutor>(op, plan, opts);
  ASSAY_RETURN_IF_ERROR(e->start());
  return std::unique_ptr<Executor>(std::move(e));
}

}  // namespace assay
