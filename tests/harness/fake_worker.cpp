// A stand-in for `assay worker` that needs no GPU: it speaks the worker pipe
// protocol (harness/worker.h) and fails, crashes, hangs or "corrupts the GPU"
// on demand, so the campaign's crash safety is tested on CPU-only machines
// (tests/harness/campaign_signal_test.cpp runs `assay fuzz --worker-binary`
// with it). Behaviour comes from the environment:
//   FAKE_FAIL_VARIANT   variant that fails (kind bound)          default: tiled
//   FAKE_FAIL_FROM      RUN jobs below this index pass            default: 0
//   FAKE_DELAY_MS       sleep per job                             default: 0
//   FAKE_SHRINK_DELAY_MS  sleep per CASE job (shrink candidates)  default: FAKE_DELAY_MS
//   FAKE_CRASH_INDEX    RUN index whose failing variant aborts the worker
//   FAKE_HANG_INDEX     RUN index whose failing variant never returns (one lane)
//   FAKE_FATAL_INDEX    RUN index whose failing variant sends FATAL and stops its lane,
//                       the worker staying alive on its input, as `assay worker` does
//                       after a CUDA error that poisons its context
//   FAKE_CONTEXT_INDEX  RUN index whose failing variant aborts and leaves the
//                       "GPU" unusable: FAKE_CONTEXT_FILE is created, and a
//                       worker that finds it at start reports FATAL
//   FAKE_PID_DIR        each worker writes an empty file named by its pid here
//   FAKE_CASE_FAILS     0: CASE jobs (shrink candidates) always pass, so a crash
//                       or hang is stored as found                default: 1
// Otherwise CASE jobs fail for the failing variant while any tensor has more
// than one element, so shrinking takes many steps.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

std::string env(const char* k, const std::string& d = "") {
  const char* v = std::getenv(k);
  return v != nullptr ? v : d;
}
long long env_int(const char* k, long long d) {
  const std::string v = env(k);
  return v.empty() ? d : std::atoll(v.c_str());
}

std::mutex out_mu;
void emit(const std::string& line) {
  std::lock_guard lk(out_mu);
  const std::string s = line + "\n";
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(STDOUT_FILENO, s.data() + done, s.size() - done);
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, ','))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

nlohmann::json verdict(const std::string& variant, bool fail) {
  if (!fail)
    return {{"v", variant}, {"r", 0.25}, {"x", false}, {"d", false}, {"w", 0}, {"vr", -1}, {"k", "fp32/fake"}, {"n", ""}};
  return {{"variant", variant},
          {"passed", false},
          {"failures", {{{"kind", "bound"}, {"tensor", "C"}, {"count", 1}, {"first_index", 0}, {"detail", "fake"}}}},
          {"metrics", {{"max_ratio", 9.0}, {"key", "fp32/fake"}}}};
}

bool case_fails(const std::string& json) {
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object() || !j.contains("tensors") || !j["tensors"].is_array()) return false;
  for (const auto& t : j["tensors"]) {
    long long n = 1;
    if (!t.contains("shape") || !t["shape"].is_array()) continue;
    for (const auto& d : t["shape"]) n *= d.is_number_integer() ? d.get<long long>() : 1;
    if (n > 1) return true;
  }
  return false;
}

int run(int lanes) {
  const std::string fail_variant = env("FAKE_FAIL_VARIANT", "tiled");
  const long long fail_from = env_int("FAKE_FAIL_FROM", 0);
  const long long delay_ms = env_int("FAKE_DELAY_MS", 0);
  const long long shrink_delay_ms = env_int("FAKE_SHRINK_DELAY_MS", delay_ms);
  const long long crash_index = env_int("FAKE_CRASH_INDEX", -1);
  const long long hang_index = env_int("FAKE_HANG_INDEX", -1);
  const long long fatal_index = env_int("FAKE_FATAL_INDEX", -1);
  const long long context_index = env_int("FAKE_CONTEXT_INDEX", -1);
  const std::string context_file = env("FAKE_CONTEXT_FILE");
  const bool case_can_fail = env_int("FAKE_CASE_FAILS", 1) != 0;
  if (const std::string d = env("FAKE_PID_DIR"); !d.empty()) std::ofstream(d + "/" + std::to_string(::getpid()));
  if (!context_file.empty() && ::access(context_file.c_str(), F_OK) == 0) {
    emit("FATAL 0 cudaSetDevice: the device is unusable (fake)");
    return 3;
  }
  emit("READY fake device (no GPU)");
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> queue;
  bool closed = false;
  std::vector<std::thread> threads;
  for (int i = 0; i < lanes; ++i) {
    threads.emplace_back([&] {
      for (;;) {
        std::string line;
        {
          std::unique_lock lk(mu);
          cv.wait(lk, [&] { return closed || !queue.empty(); });
          if (queue.empty()) return;
          line = std::move(queue.front());
          queue.pop_front();
        }
        std::istringstream in(line);
        std::string verb, id, variants;
        in >> verb >> id;
        emit("START " + id);
        long long index = -1;
        std::string json;
        if (verb == "RUN") {
          in >> index >> variants;
        } else {
          in >> variants;
          std::getline(in, json);
        }
        const long long d = verb == "RUN" ? delay_ms : shrink_delay_ms;
        if (d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
        nlohmann::json arr = nlohmann::json::array();
        bool fatal = false;
        for (const auto& v : split(variants)) {
          const bool target = v == fail_variant;
          if (target && index >= 0 && index == fatal_index) {
            emit("FATAL " + id + " cudaStreamSynchronize failed: unspecified launch failure (fake)");
            fatal = true;
            break;
          }
          if (target && index >= 0 && index == crash_index) std::abort();
          if (target && index >= 0 && index == context_index) {
            std::ofstream(context_file) << "lost\n";
            std::abort();
          }
          if (target && index >= 0 && index == hang_index)
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
          const bool fail = target && (verb == "RUN" ? index >= fail_from : case_can_fail && case_fails(json));
          arr.push_back(verdict(v, fail));
        }
        if (fatal) return;
        emit("DONE " + id + " " + arr.dump());
      }
    });
  }
  std::string buf;
  char chunk[65536];
  bool quit = false;
  while (!quit) {
    const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
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
  // A hung lane never joins: leave without waiting, as a killed worker would.
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "worker") {
    emit("FATAL 0 usage: assay_fake_worker worker --lanes N ...");
    return 2;
  }
  int lanes = 1;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--lanes") lanes = std::max(1, std::atoi(argv[i + 1]));
  return run(lanes);
}
