#include "harness/interrupt.h"

#include <signal.h>

#include <atomic>

namespace assay {
namespace {

std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (!g_stop.compare_exchange_strong(expected, sig) && expected == sig) {
    // Asked twice: the person means it. Default action, now.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking poll or wait returns EINTR and sees the flag
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() {
  return g_stop.load();
}

void request_stop(int sig) {
  g_stop.store(sig);
}

}  // namespace assay
