#include "harness/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <optional>
#include <algorithm>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "harness/draw_ahead.h"
#include "harness/gpu/lane.h"
#include "harness/interrupt.h"

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

}  // namespace

// Passing verdicts go back compact (most cases pass); failing ones whole. Every metric a
// campaign aggregates travels in both forms (tests/harness/vendor_relative_test.cpp round-trips
// the vendor-relative ones).
nlohmann::json wire_verdict(const Verdict& v) {
  if (!v.passed() || !v.not_applicable.empty()) return v.to_json();  // outside the contract: the rule travels
  nlohmann::json j = {{"v", v.variant},
                      {"r", v.metrics.max_ratio},
                      {"x", v.metrics.exact_tier},
                      {"d", v.metrics.reference == "device-f64"},
                      {"w", v.metrics.vendor_violations},
                      {"vr", v.metrics.vendor_max_ratio},
                      {"q", v.metrics.vendor_rel_ratio},
                      {"qw", v.metrics.vendor_rel_worst},
                      {"qe", v.metrics.vendor_rel_elements},
                      {"k", v.metrics.key},
                      {"n", v.metrics.not_run}};
  if (!v.metrics.accuracy_warning.empty()) j["a"] = v.metrics.accuracy_warning;
  return j;
}

Verdict unwire_verdict(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("v")) return Verdict::from_json(j);
  auto num = [&](const char* k, double d) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>() : d;
  };
  auto str = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto integer = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{0};
  };
  Verdict v;
  v.variant = str("v");
  v.metrics.max_ratio = num("r", 0.0);
  v.metrics.exact_tier = j.value("x", false);
  v.metrics.reference = j.value("d", false) ? "device-f64" : "host-f64";
  v.metrics.vendor_violations = integer("w");
  v.metrics.vendor_max_ratio = num("vr", -1.0);
  v.metrics.vendor_rel_ratio = num("q", -1.0);
  v.metrics.vendor_rel_worst = num("qw", -1.0);
  v.metrics.vendor_rel_elements = integer("qe");
  v.metrics.accuracy_warning = str("a");
  v.metrics.key = str("k");
  v.metrics.not_run = str("n");
  return v;
}

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

  std::atomic<bool> fatal{false};
  // The pipe's lines, a RUN line's case drawn ahead of the lanes (harness/draw_ahead.h).
  struct Line {
    std::string text;
    std::optional<Case> c;
  };
  DrawAhead<Line> lines([&](Line& l) {
    if (l.text.rfind("RUN ", 0) != 0 || fatal) return;
    std::istringstream in(l.text);
    std::string verb, id;
    int64_t index = 0;
    in >> verb >> id >> index;
    l.c = generate_case(*spec, cfg.plan, index);
  });
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
        std::optional<Line> job = lines.pop();
        if (!job) return;
        if (fatal) continue;
        const std::string& line = job->text;
        // RUN <id> <index> <variants> | CASE <id> <variants> <json>
        std::istringstream in(line);
        std::string verb, id, variants;
        in >> verb >> id;
        emit("START " + id);  // the parent's watchdog for this job starts now
        Case c;
        if (verb == "RUN") {
          int64_t index = 0;
          in >> index >> variants;
          if (!job->c) continue;  // not drawn: a fatal error came first
          c = std::move(*job->c);
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
      lines.push(Line{std::move(line), std::nullopt});
    }
  }
  lines.close();
  for (auto& t : threads) t.join();
  return fatal ? 3 : 0;
}

// ---- the parent side --------------------------------------------------------------
namespace {

/// Adds the wall time of its scope to `into`, on every return path.
class TimeInto {
 public:
  explicit TimeInto(double& into) : into_(into), t0_(Clock::now()) {}
  ~TimeInto() { into_ += std::chrono::duration<double>(Clock::now() - t0_).count(); }
  TimeInto(const TimeInto&) = delete;
  TimeInto& operator=(const TimeInto&) = delete;

 private:
  double& into_;
  Clock::time_point t0_;
};

struct Worker {
  pid_t pid = -1;
  int to = -1, from = -1;
  int device = 0;
  std::string buf;
  std::map<int64_t, Job> inflight;
  std::map<int64_t, Clock::time_point> started;  // in-flight jobs a lane has begun (START), and when
  Clock::time_point last_progress;
  std::string fatal;          // FATAL message, if any
  std::string sanitizer_log;  // sanitizer lines since the last DONE
  bool dead = false;
  bool lost = false;  // no worker could be started on this device again: it takes no more jobs
};

class ProcessExecutor final : public Executor {
 public:
  ProcessExecutor(std::string op, GenPlan plan, ProcessOptions opts)
      : op_(std::move(op)), plan_(std::move(plan)), opts_(std::move(opts)) {
    if (!opts_.sanitize.empty()) opts_.lanes = 1;  // one case at a time: reports attribute to it
  }
  ~ProcessExecutor() override {
    for (auto& w : workers_) stop(w);
    reap(true);
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

  JobResult wait_until(Deadline deadline) override {
    for (;;) {
      // Results first: verdicts found before an infrastructure failure (such as
      // a kernel that left the GPU unusable) must reach the campaign.
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
      if (!infra_.ok()) {
        JobResult r;
        r.status = infra_;
        return r;
      }
      if (stop_signal() != 0 || Clock::now() >= deadline) {
        JobResult r;
        r.interrupted = true;
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
  Recovery recovery() const override { return recovery_; }

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
                             std::to_string(w.device), "--repeat", std::to_string(opts_.run.repeat),
                             "--vendor-share", fmt::format("{}", opts_.run.vendor_share)});
    if (!plan_.targets.empty()) {
      std::string t;
      for (const auto& v : plan_.targets) t += (t.empty() ? "" : ",") + v;
      args.insert(args.end(), {"--targets", t});
    }
    if (opts_.run.probe) args.push_back("--probe");
    const pid_t parent = ::getpid();
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
      // Its own process group, so one kill reaches the worker and anything it
      // starts (compute-sanitizer's target), and a terminal's Ctrl-C reaches only
      // the parent, which stops the campaign in order. It dies with the parent;
      // the parent may already be gone before prctl took effect, hence getppid.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(128 + SIGKILL);
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
    ::setpgid(pid, pid);  // also here: no window in which a kill of the group misses it
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
    w.started.clear();
    // Wait for READY (or the reason it never comes).
    const auto t0 = Clock::now();
    for (;;) {
      std::string line;
      const double left = opts_.start_timeout_s - std::chrono::duration<double>(Clock::now() - t0).count();
      if (left <= 0 || !read_line(w, line, left)) {
        stop(w);
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
        stop(w);
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

  // Blocking read of one line with a timeout; false on EOF (then *eof is set), timeout or a stop.
  bool read_line(Worker& w, std::string& line, double timeout_s, bool* eof = nullptr) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      if (size_t pos = w.buf.find('\n'); pos != std::string::npos) {
        line = w.buf.substr(0, pos);
        w.buf.erase(0, pos + 1);
        return true;
      }
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      if (left <= 0 || stop_signal() != 0) return false;
      pollfd p{w.from, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min(left * 1000, 1000.0)) + 1);
      if (r < 0 && errno != EINTR) return false;
      if (r > 0) {
        char chunk[65536];
        const ssize_t n = ::read(w.from, chunk, sizeof chunk);
        if (n <= 0) {
          if (eof != nullptr) *eof = true;
          return false;
        }
        w.buf.append(chunk, static_cast<size_t>(n));
      }
    }
  }

  // Kills a worker and closes its pipes without waiting for it to exit: a process whose CUDA
  // context a kernel poisoned can take a second or more to exit while the driver tears the
  // context down, and neither its replacement nor the next job needs to wait for that.
  // reap() collects it later; the destructor waits for every one.
  void stop(Worker& w) {
    if (w.pid <= 0) return;
    kill_group(w.pid);
    dying_.push_back(w.pid);
    close_pipes(w);
    w.pid = -1;
    reap(false);
  }

  // Pipes are marked closed (-1), so that a slot whose process is gone can be discarded again
  // without closing a descriptor number another worker's pipe may have taken since.
  static void close_pipes(Worker& w) {
    if (w.to >= 0) ::close(w.to);
    if (w.from >= 0) ::close(w.from);
    w.to = w.from = -1;
  }

  // Ends what is left of a slot's process: its in-flight jobs are dropped, a live process is
  // stopped, and one that death_reason already reaped leaves only its pipes to close.
  void discard(Worker& w) {
    w.inflight.clear();
    w.started.clear();
    if (w.pid > 0)
      stop(w);
    else
      close_pipes(w);
  }

  void reap(bool block) {
    dying_.erase(std::remove_if(dying_.begin(), dying_.end(),
                                [&](pid_t p) {
                                  int status = 0;
                                  return ::waitpid(p, &status, block ? 0 : WNOHANG) != 0;  // reaped, or not ours
                                }),
                 dying_.end());
  }

  static void kill_group(pid_t pid) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);  // in case it had not joined its group yet
  }

  Worker& least_loaded() {
    Worker* best = nullptr;
    for (auto& w : workers_)
      if (!w.lost && (best == nullptr || w.inflight.size() < best->inflight.size())) best = &w;
    return best != nullptr ? *best : workers_.front();  // all lost: infra_ is set, the job is never sent
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
    Worker& w = least_loaded();
    if (w.lost) {
      JobResult r;
      r.id = j.id;
      r.status = infra_.ok() ? internal_error("no worker left") : infra_;
      ready_.push_back(std::move(r));
      return;
    }
    send(w, std::move(j));
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

  double job_limit(const Job& j) const {
    return opts_.case_timeout_s * (opts_.sanitize.empty() ? 1 : 20) *
           static_cast<double>(std::max<size_t>(1, j.variants.size()));
  }

  void poll_once() {
    reap(false);
    std::vector<pollfd> fds;
    for (auto& w : workers_) fds.push_back({w.lost ? -1 : w.from, POLLIN, 0});
    const int r = ::poll(fds.data(), fds.size(), 100);
    if (r < 0 && errno != EINTR) return;
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = workers_[i];
      if (w.lost) continue;
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
      // Watchdog per job: from the moment a lane starts it, case_timeout_s per
      // variant; one hung lane is caught while the others go on returning results.
      const auto now = Clock::now();
      std::string hung;
      for (const auto& [id, t0] : w.started) {
        auto it = w.inflight.find(id);
        if (it == w.inflight.end()) continue;
        const double limit = job_limit(it->second);
        if (std::chrono::duration<double>(now - t0).count() > limit) {
          hung = fmt::format("no result within {:.3g} s (watchdog); worker killed", limit);
          break;
        }
      }
      // A worker that starts nothing at all (or an older one that never says START).
      const double idle = std::chrono::duration<double>(now - w.last_progress).count();
      const double limit = opts_.case_timeout_s * (opts_.sanitize.empty() ? 1 : 20);
      if (hung.empty() && w.started.empty() && !w.inflight.empty() && idle > limit)
        hung = fmt::format("no result within {:.3g} s (watchdog); worker killed", limit);
      if (!w.dead && !hung.empty()) {
        kill_group(w.pid);
        recover(w, FailureKind::kHang, hung);
      } else if (w.dead || !w.fatal.empty()) {
        recover(w, FailureKind::kCrash, death_reason(w));
      }
    }
    if (!opts_.sanitize.empty()) pump();
  }

  void handle_line(Worker& w, const std::string& line) {
    if (line.rfind("START ", 0) == 0) {
      const int64_t id = std::strtoll(line.c_str() + 6, nullptr, 10);
      if (w.inflight.count(id) != 0) w.started[id] = Clock::now();
      w.last_progress = Clock::now();
    } else if (line.rfind("DONE ", 0) == 0) {
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
      w.started.erase(id);
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
    kill_group(w.pid);  // no-op once it has exited
    ::waitpid(w.pid, &status, 0);
    close_pipes(w);
    w.pid = -1;
  }

  std::string death_reason(Worker& w) {
    // A worker that sent FATAL is alive, blocked on its input until it is killed: its message
    // is the reason, and waiting for an exit status would only spend the wait below.
    if (!w.fatal.empty() && !w.dead) return w.fatal;
    int status = 0;
    std::string why;
    // Its output closes a moment before it can be reaped: wait a little for the
    // exit status, which says how it died (a signal, an exit code).
    pid_t got = 0;
    for (int i = 0; w.pid > 0 && i < 200 && (got = ::waitpid(w.pid, &status, WNOHANG)) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (w.pid > 0 && got == w.pid) {
      w.pid = -1;
      if (WIFSIGNALED(status))
        why = fmt::format("worker killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
      else if (WIFEXITED(status))
        why = fmt::format("worker exited with status {}", WEXITSTATUS(status));
    }
    if (!w.fatal.empty()) why = (why.empty() ? "" : why + ": ") + w.fatal;
    return why.empty() ? "worker died" : why;
  }

  // Starts a replacement worker after a crash. A GPU that a kernel left
  // unusable may take a moment to come back once the dead process is reaped,
  // so a few tries, a second or two apart.
  Status respawn(Worker& w) {
    ++recovery_.worker_starts;
    const TimeInto charge(recovery_.start_seconds);
    Status s;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (attempt > 0) {
        for (int ms = 0; ms < 1000 * attempt && stop_signal() == 0; ms += 100)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      s = spawn(w);
      if (s.ok() || stop_signal() != 0) return s;
    }
    return s;
  }

  // The device is gone for good: this worker takes no more jobs; with no
  // worker left the executor fails (an infrastructure error).
  void mark_lost(Worker& w, const Status& why) {
    w.lost = true;
    if (std::all_of(workers_.begin(), workers_.end(), [](const Worker& x) { return x.lost; })) infra_ = why;
  }

  // A worker died or hung: replace it, then re-run each of its in-flight
  // (case, variant) alone in fresh workers to find the one that kills it. If
  // no worker can start after a (case, variant) killed one, that kernel left
  // the GPU unusable: its verdict becomes a failure of kind context. If that
  // happens before the culprit is isolated, every job a lane had started is a
  // suspect and gets the context verdict (the detail says so): a found failure
  // is never dropped. Jobs not yet started come back as infrastructure errors,
  // never as passes (or go to another device's worker, if one is left).
  void recover(Worker& w, FailureKind kind, const std::string& reason) {
    const TimeInto charge(recovery_.seconds);
    std::map<int64_t, Job> suspects = std::move(w.inflight);
    std::map<int64_t, Clock::time_point> started = std::move(w.started);
    discard(w);
    const bool single = suspects.size() == 1 && suspects.begin()->second.variants.size() == 1;
    std::map<int64_t, JobResult> results;
    std::optional<std::pair<int64_t, size_t>> last_killer;  // (job, verdict) that last killed a worker
    Status lost;
    auto ensure_worker = [&]() -> bool {
      if (!lost.ok()) return false;
      if (w.pid > 0) return true;
      Status s = respawn(w);
      if (s.ok()) return true;
      if (stop_signal() == 0) lost = s;  // a start cut short by a stop says nothing about the GPU
      return false;
    };
    for (auto& [id, job] : suspects) {
      JobResult& r = results[id];
      r.id = id;
      for (const auto& variant : job.variants) {
        if (single) {
          r.verdicts.push_back(crash_verdict(variant, kind, reason));
          last_killer = {id, r.verdicts.size() - 1};
          continue;
        }
        if (stop_signal() != 0 || !ensure_worker()) break;
        Job alone = job;
        alone.variants = {variant};
        auto v = run_alone(w, alone);
        if (!v) break;
        r.verdicts.push_back(std::move(*v));
        const auto& fs = r.verdicts.back().failures;
        if (!fs.empty() && (fs.front().kind == FailureKind::kCrash || fs.front().kind == FailureKind::kHang))
          last_killer = {id, r.verdicts.size() - 1};
      }
    }
    if (stop_signal() == 0) ensure_worker();
    if (!lost.ok()) {
      const std::string after = fmt::format("afterwards no worker could start on device {}: {}", w.device, lost.message());
      if (last_killer) {
        Failure& f = results[last_killer->first].verdicts[last_killer->second].failures.front();
        f.kind = FailureKind::kContext;
        f.detail = fmt::format("{}; {}", f.detail, after);
      } else {
        for (auto& [id, r] : results) {
          if (started.count(id) == 0) continue;
          const Job& job = suspects[id];
          for (size_t k = r.verdicts.size(); k < job.variants.size(); ++k)
            r.verdicts.push_back(crash_verdict(
                job.variants[k], FailureKind::kContext,
                fmt::format("{} while this case was one of {} started on its lanes; {}", reason, started.size(), after)));
        }
      }
      mark_lost(w, lost);
    }
    for (auto& [id, r] : results) {
      const bool complete = r.verdicts.size() == suspects[id].variants.size();
      if (!complete && r.verdicts.empty() && !lost.ok() && infra_.ok()) {
        dispatch(std::move(suspects[id]));  // another device's worker is left: run it there
        continue;
      }
      // Verdicts found stay results even if other variants of the job could not
      // run: a found failure must reach the campaign before any error does.
      if (!complete && r.verdicts.empty())
        r.status = !lost.ok() ? lost : internal_error("interrupted while isolating a crash");
      ready_.push_back(std::move(r));
    }
  }

  static Verdict crash_verdict(const std::string& variant, FailureKind kind, const std::string& reason) {
    Verdict v;
    v.variant = variant;
    v.failures.push_back({kind, "", 0, -1, reason});
    return v;
  }

  // nullopt: a stop was requested before the job finished.
  std::optional<Verdict> run_alone(Worker& w, const Job& job) {
    send(w, job);
    const double limit = job_limit(job);
    std::string line;
    for (;;) {
      bool eof = false;
      if (!read_line(w, line, limit, &eof)) {
        if (stop_signal() != 0) {
          discard(w);
          return std::nullopt;
        }
        const bool hung = !eof;  // silence until the watchdog; a closed pipe is a death
        const std::string reason =
            hung ? fmt::format("no result within {:.3g} s (watchdog); worker killed", limit) : death_reason(w);
        discard(w);
        return crash_verdict(job.variants.front(), hung ? FailureKind::kHang : FailureKind::kCrash, reason);
      }
      if (line.rfind("DONE ", 0) == 0 || line.rfind("FATAL ", 0) == 0) {
        handle_line(w, line);
        if (!w.fatal.empty()) {
          const std::string reason = "worker failed: " + w.fatal;
          discard(w);
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
  Recovery recovery_;
  std::vector<pid_t> dying_;  // killed workers not yet reaped
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
