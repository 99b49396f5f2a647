// Lane: one stream of work on one GPU with its reused buffers. A campaign
// runs several lanes per GPU from parallel host threads; each lane keeps one
// device allocation (working arena, pristine snapshot, uploaded references,
// scratch, check results) and one pinned staging buffer, grown on demand and
// never freed between cases, so a small case costs a few copies and launches.
//
// Arena layout (bytes): [moat][tensor 0, padded to 256][guard][tensor 1]...[moat].
// Guards and moats hold a NaN-ish canary; the snapshot is the image as
// uploaded, so a check compares every byte of the arena against what it must
// still be. The device allocation is [snapshot][extra][scratch][arena]: the
// working arena comes last, behind moats of max(64 KiB, 1/8 of the arena), so
// a runaway write past a tensor lands in a checked moat (or past the
// allocation), never in the snapshot or the references.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "harness/case.h"
#include "harness/gpu/check_kernels.h"
#include "harness/gpu/materialize_device.h"
#include "harness/scratch.h"
#include "harness/spec.h"
#include "harness/status.h"

namespace assay::gpu {

inline constexpr int64_t kGuardBytes = 1024;         ///< guard band before and after each tensor
inline constexpr uint32_t kGuardWord = 0x7FF5A5A5u;  ///< canary (a NaN as fp32)
inline constexpr unsigned char kPadByte = 0xA5;      ///< a tensor's padding up to its 256-byte slot
inline constexpr int kMaxChecks = 16;                ///< check results per case

/// Asks the CUDA driver for a hardware work queue per stream, up to its 32, where the
/// environment does not set CUDA_DEVICE_MAX_CONNECTIONS itself (default 8). The lanes' streams of
/// one process otherwise share 8 queues, and a lane's kernel waiting on its own predecessor holds
/// up the other lanes' work queued behind it; with 32, attention_bwd's small cases ran 1.37x and
/// conv2d_bwd_filter's 1.85x the rate on an H200 (docs/results.md). The driver reads it when the
/// process creates its CUDA context: call it before any CUDA call (a worker inherits it). The
/// price is on crashes: a trapped kernel's worker takes longer to report and restart (the
/// planted-trap campaign test: 51 s against 30 s), well inside the default case timeout.
void prefer_queue_per_stream();

/// How many CUDA devices are usable; an error says why none are.
StatusOr<int> device_count();
/// "NVIDIA H100 80GB HBM3 (sm_90), driver 13.0, runtime 13.0, cuBLAS 130100"
std::string describe_device(int device);

struct ArenaTensor {
  TensorDesc desc;
  Role role = Role::kIn;
  bool check_unwritten = false;  ///< covered elements start as poison and must be overwritten
};

/// t's output poison repeated over 16 bytes (t at most 16 bytes wide): DevRegion::poison.
void poison_words(DType t, uint32_t (&words)[4]);

class Lane {
 public:
  static StatusOr<std::unique_ptr<Lane>> create(int device);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  int device() const { return device_; }
  /// Knobs for the testbeds (launch repeats); set by the executor.
  RunOptions options;
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }

  /// Lays out the arena for `tensors`, plus `extra_bytes` uploaded beside it
  /// (references) and `scratch_bytes` of device-only scratch. Grows buffers if
  /// needed. Fills guards in the host image; tensor bytes are the caller's.
  Status layout(const std::vector<ArenaTensor>& tensors, int64_t extra_bytes, int64_t scratch_bytes);
  /// The same for a case whose tensors are written on the device, straight
  /// into the snapshot (dev_snapshot_tensor): no host image is reserved or
  /// filled and no extra is uploaded; the fills of the guards and padding in
  /// the snapshot are queued on `draw` (its stream is stream()), for the
  /// caller to launch with the tensors' own. host_tensor() and upload() must
  /// not be used until the next layout().
  Status layout_on_device(const std::vector<ArenaTensor>& tensors, int64_t scratch_bytes, DeviceDraw& draw);

  unsigned char* host_tensor(int i) { return host_ + offsets_[i]; }
  unsigned char* host_extra() { return host_ + arena_bytes_; }
  unsigned char* dev_tensor(int i) { return dev_arena() + offsets_[i]; }
  unsigned char* dev_snapshot_tensor(int i) { return dev_snapshot() + offsets_[i]; }
  unsigned char* dev_extra() { return dev_ + arena_bytes_; }
  unsigned char* dev_scratch() { return dev_extra() + scratch_round_up(extra_bytes_); }
  int64_t tensor_bytes(int i) const { return sizes_[i]; }

  /// One H2D copy: host image + extra -> snapshot + extra.
  Status upload();
  /// Resets the working arena to the snapshot: one D2D copy, or for a large arena one launch
  /// that copies the inputs and writes the guards', moats' and dense outputs' known patterns.
  Status restore();
  /// Region table for the check kernel (guards, inputs, outputs).
  CheckParams check_params();
  /// Launches the check into result slot `k`.
  Status check(const CheckParams& p, int k);
  /// Copies the first `n` result slots to the host and waits for the stream.
  Status fetch_results(int n);
  const CheckResult& result(int k) const { return host_results_[k]; }

  /// Copies `bytes` from device to a host buffer synchronously (failure details).
  Status read_back(const void* dev, void* host, int64_t bytes);

 private:
  Lane() = default;
  unsigned char* dev_snapshot() { return dev_; }
  unsigned char* dev_arena() { return dev_scratch() + scratch_round_up(scratch_bytes_); }
  Status reserve(int64_t device_bytes, int64_t host_bytes);
  /// Offsets and sizes of `tensors`; sets arena_bytes_.
  Status place(const std::vector<ArenaTensor>& tensors);
  void plan_restore();

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  unsigned char* dev_ = nullptr;   // [snapshot][extra][scratch][arena]
  unsigned char* host_ = nullptr;  // pinned [image][extra]
  int64_t dev_cap_ = 0, host_cap_ = 0;
  CheckResult* dev_results_ = nullptr;
  CheckResult* host_results_ = nullptr;
  std::vector<ArenaTensor> tensors_;
  std::vector<int64_t> offsets_, sizes_;
  /// restore() of a large arena, span by span: copied from the snapshot, or (guards, moats, a
  /// dense poisoned output, padding) set to their pattern without reading it. Empty: one copy.
  struct RestoreSpan {
    int64_t begin = 0, end = 0;
    bool copy = true;
    uint32_t pattern[4] = {0, 0, 0, 0};
  };
  std::vector<RestoreSpan> restore_spans_;
  int64_t arena_bytes_ = 0, extra_bytes_ = 0, scratch_bytes_ = 0;
};

}  // namespace assay::gpu
