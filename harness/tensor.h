// TensorDesc: a strided view into a flat allocation, described in elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/dtype.h"
#include "harness/status.h"

namespace assay {

struct TensorDesc {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;    ///< extents, each >= 0
  std::vector<int64_t> strides;  ///< in elements, each >= 0 (0 = broadcast)
  int64_t offset = 0;            ///< element offset of [0,...,0] from the allocation start

  /// Row-major contiguous strides for `shape`.
  static TensorDesc contiguous(DType dtype, std::vector<int64_t> shape);

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Number of logical elements (product of shape; 1 for rank 0).
  int64_t numel() const;
  /// Elements the allocation must hold: offset + max linear index + 1, or
  /// `offset` when numel() == 0.
  int64_t extent() const;
  /// Linear element index (offset included) of a multi-index.
  int64_t linear_index(const std::vector<int64_t>& idx) const;
  /// Largest power of two (<= 256) that divides the byte address of element
  /// [0,...,0], given an allocation aligned to 256 bytes.
  int64_t byte_alignment() const;
  /// True when two distinct multi-indices map to the same element (stride 0
  /// or overlapping strides); such a view must not be written.
  bool has_overlap() const;
  /// Checks rank agreement, non-negative shape/strides/offset and a bounded
  /// extent and element count (both <= max_extent, overflow-safe); `name`
  /// appears in the one-line error.
  Status validate(const std::string& name, int64_t max_extent = int64_t{1} << 34) const;
  /// Per element of the allocation [0, extent()): 1 if some multi-index maps to it.
  std::vector<uint8_t> coverage_mask() const;
};

}  // namespace assay
