// The vendor column's share of a lane's time (--vendor-share): the column measures the
// vendor-relative ratio, not the kernel, and its host work (plans, graphs, heuristics) can cost
// far more than the case it is beside, so a campaign holds it to a share of its lanes.
// Two rules, both needed:
//   - per lane, its host time so far at or under `share` of the time since the lane's first case
//     (VendorClock): the long-run share;
//   - per process, at most share x lanes of them in the column at once, at least one
//     (VendorSlots): a library's first calls can take seconds (cuDNN's backward-filter
//     heuristics, lazily loaded kernels), and under the first rule alone every lane would open
//     with one, so that a short run would be all start-up.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>

namespace assay {

class VendorClock {
 public:
  /// Whether the column may run on this lane's case at time now_s (seconds, any origin); the
  /// first call starts the lane's clock (and is admitted: nothing spent yet).
  bool within(double share, double now_s) {
    if (!started_) started_ = true, t0_ = now_s;
    return spent_ <= share * (now_s - t0_);
  }
  void add(double seconds) { spent_ += seconds; }

 private:
  bool started_ = false;
  double t0_ = 0, spent_ = 0;
};

class VendorSlots {
 public:
  /// Counts a lane that has started its clock.
  void add_lane() { lanes_.fetch_add(1, std::memory_order_relaxed); }
  /// A slot in the column, or false while floor(share x lanes) (at least one) are taken.
  bool acquire(double share) {
    const int cap = std::max(1, static_cast<int>(std::floor(share * lanes_.load(std::memory_order_relaxed))));
    int cur = inflight_.load(std::memory_order_relaxed);
    while (cur < cap)
      if (inflight_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) return true;
    return false;
  }
  void release() { inflight_.fetch_sub(1, std::memory_order_acq_rel); }
  int inflight() const { return inflight_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> inflight_{0}, lanes_{0};
};

}  // namespace assay
