// TensorDesc: extents, alignment, overlap and coverage of strided views.
// All sizes are in elements unless a name says bytes.
#include "harness/tensor.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace assay {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Saturating arithmetic for non-negative operands: a hostile case file may
// carry shapes whose products overflow int64. Saturating at INT64_MAX keeps a
// derived size "too big" instead of letting it wrap into something plausible.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kInt64Max : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kInt64Max : r;
}

/// Dims paired with their strides, rank-agreement tolerant (extra entries of
/// the longer vector are ignored; validate() reports the mismatch).
size_t paired_rank(const TensorDesc& t) {
  return std::min(t.shape.size(), t.strides.size());
}

/// "2^40" for powers of two (sizes near the limits read better that way), else decimal.
std::string count_str(int64_t v) {
  if (v > 0 && std::has_single_bit(static_cast<uint64_t>(v))) {
    return "2^" + std::to_string(std::countr_zero(static_cast<uint64_t>(v)));
  }
  return std::to_string(v);
}

/// Calls f(linear) for every multi-index of (shape, strides), starting at
/// `base`, last dim fastest. Nothing when some extent is <= 0.
template <typename F>
void for_each_linear(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t base, F&& f) {
  const size_t r = std::min(shape.size(), strides.size());
  for (size_t d = 0; d < r; ++d) {
    if (shape[d] <= 0) return;
  }
  if (r == 0) {
    f(base);
    return;
  }
  std::vector<int64_t> idx(r, 0);
  const int64_t n_inner = shape[r - 1], s_inner = strides[r - 1];
  int64_t lin = base;
  for (;;) {
    for (int64_t i = 0; i < n_inner; ++i) f(lin + i * s_inner);
    // Odometer carry over the outer dims.
    size_t d = r - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++idx[d] < shape[d]) {
        lin += strides[d];
        break;
      }
      lin -= (shape[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
}

// Limits of the exact fallback in has_overlap (see there): enumerating this
// many offsets (sort: 32 MiB) or marking this many positions (bitmap: 16 MiB).
constexpr int64_t kOverlapEnumerateCap = int64_t{1} << 22;
constexpr int64_t kOverlapBitmapCap = int64_t{1} << 27;

}  // namespace

TensorDesc TensorDesc::contiguous(DType dtype, std::vector<int64_t> shape) {
  TensorDesc t;
  t.dtype = dtype;
  t.strides.assign(shape.size(), 1);
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    t.strides[d] = s;
    // max(extent, 1) as in PyTorch: a zero extent must not zero the strides of
    // outer dims (they would then look like broadcasts).
    s = sat_mul(s, std::max<int64_t>(shape[d], 1));
  }
  t.shape = std::move(shape);
  return t;
}

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (int64_t e : shape) {
    if (e <= 0) return 0;  // negative extents are invalid; treat as empty
    n = sat_mul(n, e);
  }
  return n;
}

int64_t TensorDesc::extent() const {
  if (numel() == 0) return offset;
  int64_t last = offset;  // linear index of the element with every index at its max
  for (size_t d = 0; d < paired_rank(*this); ++d) {
    last = sat_add(last, sat_mul(shape[d] - 1, strides[d]));
  }
  return sat_add(last, 1);
}

int64_t TensorDesc::linear_index(const std::vector<int64_t>& idx) const {
  int64_t lin = offset;
  const size_t r = std::min(idx.size(), paired_rank(*this));
  for (size_t d = 0; d < r; ++d) lin += idx[d] * strides[d];
  return lin;
}

int64_t TensorDesc::byte_alignment() const {
  // Only the low 8 bits of the byte offset matter, and unsigned wrap-around
  // preserves them, so an overflowing product is harmless here.
  const uint64_t bytes = static_cast<uint64_t>(offset) * static_cast<uint64_t>(dtype_size(dtype));
  const uint64_t low = bytes & 255u;
  if (low == 0) return 256;
  return int64_t{1} << std::countr_zero(low);
}

bool TensorDesc::has_overlap() const {
  if (numel() == 0) return false;  // no elements, so no two indices collide
  struct Dim {
    int64_t n, s;
  };
  std::vector<Dim> dims;
  for (size_t d = 0; d < paired_rank(*this); ++d) {
    if (shape[d] == 1) continue;  // a single index: its stride is irrelevant
    // |stride|: flipping a dim's direction does not change collisions (negative
    // strides are invalid anyway; this keeps the answer defined).
    const int64_t s = strides[d] == std::numeric_limits<int64_t>::min() ? kInt64Max
                      : strides[d] < 0                                  ? -strides[d]
                                                                        : strides[d];
    if (s == 0) return true;  // broadcast over >= 2 indices
    dims.push_back({shape[d], s});
  }
  if (dims.size() <= 1) return false;

  // Collisions are sum_d c_d*s_d == 0 with |c_d| < n_d, not all zero: invariant
  // under dividing every stride by their gcd, which shrinks the spans below.
  int64_t g = 0;
  for (const Dim& d : dims) g = std::gcd(g, d.s);
  for (Dim& d : dims) d.s /= g;
  std::sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.s < b.s; });

  // max_below[i]: largest offset reachable by dims [0, i).
  std::vector<int64_t> max_below(dims.size() + 1, 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    max_below[i + 1] = sat_add(max_below[i], sat_mul(dims[i].n - 1, dims[i].s));
  }
  // Peel from the top: when the largest stride exceeds the largest offset of
  // all other dims, its copies of the rest are disjoint intervals, so the view
  // overlaps iff the rest does. Peeling everything is the classic sufficient
  // test "each stride > span of the smaller-stride dims" (PyTorch's
  // is_non_overlapping_and_dense idea); that test alone is not exact: shape
  // [3, 2] strides [2, 3] gives {0,2,4,3,5,7}, no collision, yet 3 <= 4.
  size_t r = dims.size();
  while (r > 1 && dims[r - 1].s > max_below[r - 1]) --r;
  if (r <= 1) return false;
  dims.resize(r);

  // Pigeonhole: more indices than positions in [0, max offset] must collide.
  int64_t count = 1;
  for (const Dim& d : dims) count = sat_mul(count, d.n);
  const int64_t positions = sat_add(max_below[r], 1);
  if (count > positions) return true;

  // What remains is a bounded subset-sum question (NP-hard in general), so
  // decide it by enumeration within a memory budget. Innermost = smallest stride.
  std::vector<int64_t> sh(r), st(r);
  for (size_t i = 0; i < r; ++i) {
    sh[i] = dims[r - 1 - i].n;
    st[i] = dims[r - 1 - i].s;
  }
  if (count <= kOverlapEnumerateCap) {
    std::vector<int64_t> offs;
    offs.reserve(static_cast<size_t>(count));
    for_each_linear(sh, st, 0, [&](int64_t lin) { offs.push_back(lin); });
    std::sort(offs.begin(), offs.end());
    return std::adjacent_find(offs.begin(), offs.end()) != offs.end();
  }
  if (positions <= kOverlapBitmapCap) {
    std::vector<uint64_t> seen(static_cast<size_t>(positions / 64 + 1), 0);
    bool collided = false;
    for_each_linear(sh, st, 0, [&](int64_t lin) {
      uint64_t& w = seen[static_cast<size_t>(lin / 64)];
      const uint64_t bit = uint64_t{1} << (lin % 64);
      collided = collided || (w & bit) != 0;
      w |= bit;
    });
    return collided;
  }
  // Undecided within budget: report an overlap. The only use is refusing to
  // write through the view, so a false positive is safe and a false negative not.
  return true;
}

Status TensorDesc::validate(const std::string& name, int64_t max_extent) const {
  const std::string who = "tensor " + name + ": ";
  if (strides.size() != shape.size()) {
    return invalid_argument(who + "strides has " + std::to_string(strides.size()) + " entries, shape has " +
                            std::to_string(shape.size()));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      return invalid_argument(who + "negative shape extent " + std::to_string(shape[d]) + " at dim " +
                              std::to_string(d));
    }
  }
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] < 0) {
      return invalid_argument(who + "negative stride " + std::to_string(strides[d]) + " at dim " + std::to_string(d));
    }
  }
  if (offset < 0) return invalid_argument(who + "negative offset " + std::to_string(offset));

  // Element count too: a broadcast (stride 0) view has a small extent but is
  // still iterated element by element, and numel() must not overflow.
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t n = empty ? 0 : 1;
  bool n_overflow = false;
  for (size_t d = 0; d < shape.size() && !empty && !n_overflow; ++d) {
    n_overflow = __builtin_mul_overflow(n, shape[d], &n);
  }
  if (n_overflow) {
    return invalid_argument(who + "shape has more than 2^63 elements, exceeds limit " + count_str(max_extent));
  }
  if (n > max_extent) {
    return invalid_argument(who + "shape has " + count_str(n) + " elements, exceeds limit " + count_str(max_extent));
  }

  // Extent with checked arithmetic: offset + sum (n_d - 1) * s_d + 1.
  int64_t ext = offset;
  bool overflow = false;
  if (!empty) {
    for (size_t d = 0; d < shape.size() && !overflow; ++d) {
      int64_t span = 0;
      overflow = __builtin_mul_overflow(shape[d] - 1, strides[d], &span) || __builtin_add_overflow(ext, span, &ext);
    }
    overflow = overflow || __builtin_add_overflow(ext, 1, &ext);
  }
  if (overflow) {
    return invalid_argument(who + "extent overflows int64 (more than 2^63 elements), exceeds limit " +
                            count_str(max_extent));
  }
  if (ext > max_extent) {
    return invalid_argument(who + "extent " + count_str(ext) + " elements exceeds limit " + count_str(max_extent));
  }
  return ok_status();
}

std::vector<uint8_t> TensorDesc::coverage_mask() const {
  const int64_t n = std::max<int64_t>(extent(), 0);
  std::vector<uint8_t> mask(static_cast<size_t>(n), 0);
  // The bounds check only matters for invalid (negative-stride) descs.
  for_each_linear(shape, strides, offset, [&](int64_t lin) {
    if (lin >= 0 && lin < n) mask[static_cast<size_t>(lin)] = 1;
  });
  return mask;
}

}  // namespace assay
