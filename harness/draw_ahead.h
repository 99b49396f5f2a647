// A queue with one thread that draws each item's case before the lanes take it. Case
// generation is serialised within a process (generate_case: RapidCheck's generator state is
// process-global), so lanes that drew their own cases would wait their turn for the lock; one
// drawing thread keeps them fed instead. The in-process executor queues jobs, a worker process
// the lines of its pipe; both go through this.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace assay {

template <typename T>
class DrawAhead {
 public:
  /// `draw` completes an item (draws its case) on the drawing thread, in queue order.
  explicit DrawAhead(std::function<void(T&)> draw) : draw_(std::move(draw)), thread_([this] { loop(); }) {}
  ~DrawAhead() {
    stop();
    thread_.join();
  }
  DrawAhead(const DrawAhead&) = delete;
  DrawAhead& operator=(const DrawAhead&) = delete;

  void push(T item) {
    {
      std::lock_guard lk(mu_);
      in_.push_back(std::move(item));
    }
    cv_in_.notify_one();
  }
  /// No more items: pop() hands out what is queued, then nullopt.
  void close() {
    {
      std::lock_guard lk(mu_);
      closed_ = true;
    }
    cv_in_.notify_all();
  }
  /// Drops what is queued: every pop() returns nullopt from now on.
  void stop() {
    {
      std::lock_guard lk(mu_);
      stopped_ = true;
    }
    cv_in_.notify_all();
    cv_out_.notify_all();
  }
  /// The next drawn item, blocking; nullopt once stopped, or closed and drained.
  std::optional<T> pop() {
    std::unique_lock lk(mu_);
    cv_out_.wait(lk, [&] { return stopped_ || drained_ || !out_.empty(); });
    if (stopped_ || out_.empty()) return std::nullopt;
    T item = std::move(out_.front());
    out_.pop_front();
    return item;
  }

 private:
  void loop() {
    for (;;) {
      T item;
      {
        std::unique_lock lk(mu_);
        cv_in_.wait(lk, [&] { return stopped_ || closed_ || !in_.empty(); });
        if (stopped_) return;
        if (in_.empty()) {  // closed, everything drawn
          drained_ = true;
          cv_out_.notify_all();
          return;
        }
        item = std::move(in_.front());
        in_.pop_front();
      }
      draw_(item);
      {
        std::lock_guard lk(mu_);
        out_.push_back(std::move(item));
      }
      cv_out_.notify_one();
    }
  }

  std::function<void(T&)> draw_;
  std::mutex mu_;
  std::condition_variable cv_in_, cv_out_;
  std::deque<T> in_, out_;  ///< queued; drawn, for the lanes
  bool closed_ = false, stopped_ = false, drained_ = false;
  std::thread thread_;  ///< last: it starts once the members it reads exist
};

}  // namespace assay
