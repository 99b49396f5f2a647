// One device pass that checks a whole case's arena after a launch: guard
// bands and inputs against their snapshot, outputs for poison left behind
// (unwritten) and gaps changed, and each output against its reference under
// the per-element bound, the NaN/Inf pattern, the exact tier and a previous
// launch (determinism). Results are a few counters copied back once. The same
// pass compares a metamorphic relation's transformed launch with the original.
// Plain structs so both nvcc and g++ translation units can use them.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace assay::gpu {

inline constexpr int kMaxRegions = 24;
inline constexpr int kMaxCompares = 4;

/// A byte range of the arena and how it may change during a launch.
struct DevRegion {
  int64_t byte_begin = 0;  ///< in the arena
  int64_t byte_end = 0;
  int32_t kind = 0;             ///< kBytesEqual or kOutput
  int32_t elem_size = 4;        ///< for kOutput
  int32_t check_unwritten = 0;  ///< kOutput: covered elements must differ from the snapshot (poison)
  int32_t constant = 0;         ///< kBytesEqual: the snapshot is `poison` repeated (guard bands, moats): not read
  /// kOutput with check_unwritten: 16 bytes of the dtype's output poison, the snapshot's every
  /// covered element (harness/values.h write_output_poison), so that a dense output's covered
  /// elements are compared with it rather than read twice. kBytesEqual with `constant`: the
  /// canary words.
  uint32_t poison[4] = {0, 0, 0, 0};
  // kOutput coverage: a dense 2-D view (row stride ld, column stride 1) or,
  // when mask != nullptr, one byte per element (1 = covered).
  int64_t off = 0, rows = 0, cols = 0, ld = 0;
  const uint8_t* mask = nullptr;
  static constexpr int32_t kBytesEqual = 0;
  static constexpr int32_t kOutput = 1;
};

/// The original launch a metamorphic relation's compare reads (DevCompare::related): its saved
/// output in the compared output's layout, the element each dense index comes from and its
/// scale, and the original inputs' reference in the affine form of harness/device_output_tol.h.
struct DevRelated {
  const void* first = nullptr;    ///< null: the compare is not a relation's
  const int64_t* from = nullptr;  ///< per dense index: the original's dense index, -1 unrelated; null: itself
  const double* scale = nullptr;  ///< per dense index; null: 1
  const double* ref = nullptr;
  const double* mag = nullptr;
  double rel_out = 0, rel_mag = 0, floor = 0, limit = 0;
};

/// An output compared with its fp64 reference: out[off + i*ld + j] vs ref[i*cols + j]. With
/// `related.first` set it is a relation's compare instead: out is the transformed launch's
/// output, ref/mag the transformed inputs' reference, and only `relation` is counted.
struct DevCompare {
  int32_t out_dtype = 0;  ///< harness DType as int (kF64=0, kF32=1, kTF32=2, kF16=3, kBF16=4, ...)
  int32_t exact = 0;      ///< exact tier: bitwise equality with the reference value (+0 == -0)
  int32_t check_bound = 1;
  int32_t pad_ = 0;
  const void* out = nullptr;
  int64_t off = 0, rows = 0, cols = 0, ld = 0;
  const double* ref = nullptr;
  const double* mag = nullptr;
  double rel_out = 0, rel_mag = 0, floor = 0;
  double out_max = 0;          ///< largest finite value of the output dtype (overflow zone)
  double overflow_mag = 0;     ///< mag at or above which intermediates may overflow (0: use out_max)
  const void* prev = nullptr;  ///< a previous launch's output (same view) for determinism; or null
  /// The vendor library's output (same view) for the vendor-relative ratio, or null. Over elements
  /// where out, vendor and ref are finite and the tolerance tol is finite and positive, with
  /// f = ulp_out(|ref|) + vr_min_sub / 2 (bounds.h vendor_floor): a = |out - ref| / tol and
  /// b = max(|vendor - ref|, f) / tol, the errors as fractions of the bound; the check keeps
  /// max a, max b and max a / b (= |out - ref| / max(|vendor - ref|, f), the element-wise rule).
  const void* vendor = nullptr;
  int32_t vr_bits = 0;  ///< precision bits of the output dtype (0: an integer dtype, one unit)
  int32_t pad2_ = 0;
  double vr_min_normal = 0, vr_min_sub = 0, vr_max = 0;  ///< of the output dtype
  double vr_alpha = 0;  ///< elements above this ratio are counted (vrel_over)
  DevRelated related;
};

struct CheckParams {
  const unsigned char* arena = nullptr;
  const unsigned char* snapshot = nullptr;
  int32_t nregions = 0;
  int32_t ncompares = 0;
  DevRegion regions[kMaxRegions];
  DevCompare compares[kMaxCompares];
};
// Passed by value as the check kernel's parameter, which must stay within the 4 KiB that every
// CUDA version takes.
static_assert(sizeof(CheckParams) <= 4096);

/// Counters. "first" fields hold ~index via atomicMax so that a zero-filled
/// struct is the neutral value; decode with first_index().
struct RegionResult {
  unsigned long long changed = 0;  ///< kBytesEqual: changed 4-byte words; kOutput: gap elements changed
  unsigned long long changed_first = 0;
  unsigned long long unwritten = 0;  ///< kOutput: covered elements still equal to the snapshot
  unsigned long long unwritten_first = 0;
};

struct CompareResult {
  unsigned long long bound = 0, bound_first = 0;
  unsigned long long naninf = 0, naninf_first = 0;
  unsigned long long exact = 0, exact_first = 0;
  unsigned long long nondet = 0, nondet_first = 0;
  unsigned long long worst_key = 0;     ///< (float bits of ratio << 32) | ~index32
  unsigned long long max_abs_bits = 0;  ///< double bits of max |out-ref| (finite elements)
  unsigned long long vrel_key = 0;      ///< (float bits of max a / b << 32) | ~index32 (DevCompare::vendor)
  unsigned long long vrel_kernel = 0;   ///< (float bits of max a << 32) | ~index32
  unsigned long long vrel_vendor = 0;   ///< float bits of max b
  unsigned long long vrel_over = 0, vrel_over_first = 0;  ///< elements with a / b > vr_alpha
  unsigned long long relation = 0, relation_first = 0;    ///< elements breaking the relation (DevCompare::related)
};

struct CheckResult {
  RegionResult regions[kMaxRegions];
  CompareResult compares[kMaxCompares];
};

/// Index encoded in a *_first field, or -1 when the counter is zero.
inline int64_t first_index(unsigned long long count, unsigned long long enc) {
  return count == 0 ? -1 : static_cast<int64_t>(~enc);
}

/// Zeroes `result` and launches the check on `stream`.
cudaError_t launch_check(const CheckParams& params, CheckResult* result, cudaStream_t stream);

}  // namespace assay::gpu
