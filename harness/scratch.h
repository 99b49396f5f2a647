// Device scratch carved into arrays in order, each starting on a 256-byte boundary (cudaMalloc's
// own alignment, so that any element type or vector load may start there). One layout function
// written over a ScratchCarver serves both the size a DeviceReference::scratch reports (a carver
// without a base only counts) and the carving its compute does, so the two cannot drift apart.
#pragma once

#include <cstdint>

namespace assay {

/// `bytes` rounded up to the next multiple of 256 (any integer type: device and host sizes).
template <typename I>
constexpr I scratch_round_up(I bytes) {
  return (bytes + 255) / 256 * 256;
}

class ScratchCarver {
 public:
  /// base == nullptr: count only (take returns nullptr).
  explicit ScratchCarver(unsigned char* base = nullptr) : base_(base) {}
  /// The next array of `count` T.
  template <typename T>
  T* take(int64_t count) {
    T* at = base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + used_);
    used_ += scratch_round_up(count * static_cast<int64_t>(sizeof(T)));
    return at;
  }
  /// Bytes taken so far, rounded.
  int64_t bytes() const { return used_; }

 private:
  unsigned char* base_ = nullptr;
  int64_t used_ = 0;
};

}  // namespace assay
