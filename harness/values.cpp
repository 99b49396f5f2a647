#include "harness/values.h"

#include "harness/value_core_recipe.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace assay {

std::string_view value_class_name(ValueClass c) {
  switch (c) {
    case ValueClass::kNormal:
      return "normal";
    case ValueClass::kUniform:
      return "uniform";
    case ValueClass::kSameSign:
      return "same_sign";
    case ValueClass::kSmallInt:
      return "small_int";
    case ValueClass::kNaN:
      return "nan";
    case ValueClass::kLogUniform:
      return "log_uniform";
    case ValueClass::kPareto:
      return "pareto";
    case ValueClass::kMeanSpread:
      return "mean_spread";
    case ValueClass::kNearOverflow:
      return "near_overflow";
    case ValueClass::kSubnormal:
      return "subnormal";
    case ValueClass::kSignedZero:
      return "signed_zero";
    case ValueClass::kOneHot:
      return "one_hot";
    case ValueClass::kPermutation:
      return "permutation";
  }
  return "?";
}

std::optional<ValueClass> parse_value_class(std::string_view name) {
  for (ValueClass c : kAllValueClasses) {
    if (value_class_name(c) == name) return c;
  }
  return std::nullopt;
}

std::string_view special_name(uint8_t bit) {
  switch (bit) {
    case kSpecialNaN:
      return "nan";
    case kSpecialPosInf:
      return "+inf";
    case kSpecialNegInf:
      return "-inf";
    case kSpecialNegZero:
      return "-0";
  }
  return "?";
}

std::optional<uint8_t> parse_special(std::string_view name) {
  for (uint8_t b = 1; b <= kSpecialAll; b <<= 1)
    if (special_name(b) == name) return b;
  return std::nullopt;
}

std::string_view inject_at_name(uint8_t bit) {
  switch (bit) {
    case kAtFirst:
      return "first";
    case kAtLast:
      return "last";
    case kAtTile:
      return "tile";
  }
  return "?";
}

std::optional<uint8_t> parse_inject_at(std::string_view name) {
  for (uint8_t b = 1; b <= kAtAll; b <<= 1)
    if (inject_at_name(b) == name) return b;
  return std::nullopt;
}

Status validate_recipe(const ValueRecipe& r, const std::string& path) {
  auto bad = [&](const char* field, const std::string& what) {
    return invalid_argument(fmt::format("{}.{}: {}", path, field, what));
  };
  // Written as !(in range) so that NaN fails too.
  auto in = [](double x, double lo, double hi) { return x >= lo && x <= hi; };
  if (!in(r.scale, 0, 1e300)) return bad("scale", "must be finite and >= 0");
  if (r.int_range < 0 || r.int_range > (1 << 20))
    return bad("int_range", fmt::format("{} is out of range [0, {}]", r.int_range, 1 << 20));
  constexpr int64_t kExpLimit = 1100;  // beyond fp64's range either way
  if (r.exp_min < -kExpLimit || r.exp_min > kExpLimit)
    return bad("exp_min", fmt::format("{} is out of range [{}, {}]", r.exp_min, -kExpLimit, kExpLimit));
  if (r.exp_max < -kExpLimit || r.exp_max > kExpLimit)
    return bad("exp_max", fmt::format("{} is out of range [{}, {}]", r.exp_max, -kExpLimit, kExpLimit));
  if (r.exp_max < r.exp_min) return bad("exp_max", fmt::format("{} is below exp_min {}", r.exp_max, r.exp_min));
  if (!in(r.pareto_alpha, 0.05, 1000)) return bad("pareto_alpha", "must be in [0.05, 1000]");
  if (!in(r.mean, -1e300, 1e300)) return bad("mean", "must be finite, |mean| <= 1e300");
  if (!in(r.spread, 0, 1e300)) return bad("spread", "must be finite and >= 0");
  if (!in(r.overflow_factor, 1, 1e300)) return bad("overflow_factor", "must be finite and >= 1");
  const SpecialInjection& in_ = r.inject;
  if ((in_.kinds & ~kSpecialAll) != 0) return bad("inject.kinds", fmt::format("unknown bits {:#x}", in_.kinds));
  if ((in_.at & ~kAtAll) != 0) return bad("inject.at", fmt::format("unknown bits {:#x}", in_.at));
  if (!in(in_.rate, 0, 1)) return bad("inject.rate", "must be in [0, 1]");
  if (in_.tile < 0 || in_.tile > (int64_t{1} << 40))
    return bad("inject.tile", fmt::format("{} is out of range [0, 2^40]", in_.tile));
  if ((in_.at & kAtTile) != 0 && in_.tile < 1) return bad("inject.tile", "must be >= 1 when at has \"tile\"");
  // A half-specified injection would silently inject nothing: refuse it.
  if (in_.kinds == 0 && (in_.rate > 0 || in_.at != 0)) return bad("inject.kinds", "empty, but rate or at is set");
  if (in_.kinds != 0 && in_.rate == 0 && in_.at == 0) return bad("inject", "kinds set, but neither rate nor at");
  return ok_status();
}

static_assert(static_cast<int32_t>(ValueClass::kPermutation) == value_core::kPermutation &&
              static_cast<int32_t>(ValueClass::kOneHot) == value_core::kOneHot &&
              static_cast<int32_t>(ValueClass::kNormal) == value_core::kNormal &&
              static_cast<int32_t>(ValueClass::kSubnormal) == value_core::kSubnormal);
static_assert(kSpecialNaN == value_core::kSpecialNaN && kSpecialPosInf == value_core::kSpecialPosInf &&
              kSpecialNegInf == value_core::kSpecialNegInf && kAtFirst == value_core::kAtFirst &&
              kAtLast == value_core::kAtLast && kAtTile == value_core::kAtTile);

value_core::Recipe core_recipe(const ValueRecipe& recipe, DType dtype) {
  value_core::Recipe r;
  r.cls = static_cast<int32_t>(recipe.cls);
  r.seed = recipe.seed;
  r.scale = recipe.scale;
  r.mean = recipe.mean;
  r.spread = recipe.spread;
  r.pareto_alpha = recipe.pareto_alpha;
  r.overflow_factor = recipe.overflow_factor;
  r.int_range = recipe.int_range;
  r.exp_min = recipe.exp_min;
  r.exp_max = recipe.exp_max;
  r.inject_kinds = recipe.inject.kinds;
  r.inject_at = recipe.inject.at;
  r.inject_rate = recipe.inject.rate;
  r.inject_tile = recipe.inject.tile;
  r.max_finite = max_finite(dtype);
  if (dtype_is_float(dtype)) {
    r.sub_lo = std::ilogb(min_subnormal(dtype));
    r.sub_bits = std::ilogb(min_normal(dtype)) - r.sub_lo;
  }
  return r;
}

// Philox4x32-10 (harness/value_core.h, the one copy host and device share).
void Philox4x32::block(uint32_t ctr[4], const uint32_t key_in[2]) {
  value_core::philox_rounds(ctr, key_in);
}

namespace {

// The software-transcendental classes (normal, log-uniform, Pareto, near-overflow) four
// elements at a time. Each lane runs value_core::base_value's IEEE operations in its order, and
// a vector lane rounds as a scalar does, so the bits are base_value's
// (ValueClass.FourAtATimeIsTheScalarBitForBit). The series' divisions, most of such an element's
// time, then go two (SSE2) or four (AVX2, chosen at load time) to an instruction. On the CI
// machine's AVX2 core, ns an element: normal 84 -> 43, log-uniform 62 -> 43, Pareto 98 -> 58,
// near-overflow 96 -> 48. The AVX2 clone leaves out FMA, so no multiply-add is contracted.
using Double4 = double __attribute__((vector_size(32)));


// Per lane, value_core's det_log, det_cos_2pi and det_exp2: the lane-wise steps (frexp, the
// quadrant, clamp, floor, ldexp) here, the series through value_core's templates.

/// value_core::det_log per lane (x > 0).
[[gnu::always_inline]] inline void log4(const Double4& x, Double4& out) {
  Double4 m, e;
  for (int k = 0; k < 4; ++k) {
    int ek = 0;
    m[k] = std::frexp(x[k], &ek);
    e[k] = ek;
  }
  value_core::log_series(m, e, out);
}

/// value_core::det_cos_2pi per lane (u in [0, 1)).
[[gnu::always_inline]] inline void cos2pi4(const Double4& u, Double4& out) {
  const Double4 t = u * 4.0;
  int q[4];
  Double4 qd, c, sn;
  for (int k = 0; k < 4; ++k) q[k] = static_cast<int>(t[k]), qd[k] = q[k];
  const Double4 phi = (t - qd) * 1.57079632679489661923;
  value_core::cos_sin_series(phi, c, sn);
  for (int k = 0; k < 4; ++k) out[k] = (q[k] & 3) == 0 ? c[k] : (q[k] & 3) == 1 ? -sn[k] : (q[k] & 3) == 2 ? -c[k] : sn[k];
}

/// value_core::det_exp2 per lane.
[[gnu::always_inline]] inline void exp2_4(const Double4& in, Double4& out) {
  Double4 t = in, kk;
  for (int k = 0; k < 4; ++k) {
    if (t[k] != t[k]) t[k] = 0;  // NaN: returned as given below
    t[k] = value_core::clamp(t[k], -4096.0, 4096.0);
    kk[k] = std::floor(t[k]);
  }
  const Double4 f = (t - kk) * value_core::kLn2;
  Double4 sum;
  value_core::exp_series(f, sum);
  for (int k = 0; k < 4; ++k) out[k] = in[k] != in[k] ? in[k] : std::ldexp(sum[k], static_cast<int>(kk[k]));
}

/// True for the classes draw4 takes.
bool draws_four(int32_t cls) {
  return cls == value_core::kNormal || cls == value_core::kLogUniform || cls == value_core::kPareto ||
         cls == value_core::kNearOverflow;
}

/// base_value of the elements first .. first + 3 of a draws_four class.
__attribute__((target_clones("avx2", "default"))) void draw4(const value_core::Recipe& r, uint64_t stream,
                                                            uint64_t first, double out[4]) {
  Double4 u1, u2;
  uint32_t sign[4];
  for (int k = 0; k < 4; ++k) {
    const value_core::Block b = value_core::philox(r.seed, first + static_cast<uint64_t>(k), stream);
    u1[k] = value_core::unit_open(b.w[0], b.w[1]);
    u2[k] = value_core::unit_open(b.w[2], b.w[3]);
    sign[k] = b.w[2];
  }
  Double4 v, w;
  switch (r.cls) {
    case value_core::kNormal:
      log4(u1, v);
      cos2pi4(u2, w);
      for (int k = 0; k < 4; ++k) out[k] = r.scale * std::sqrt(-2.0 * v[k]) * w[k];
      return;
    case value_core::kLogUniform:
      exp2_4(static_cast<double>(r.exp_min) + u1 * static_cast<double>(r.exp_max - r.exp_min), v);
      for (int k = 0; k < 4; ++k) out[k] = value_core::with_sign(v[k], sign[k]);
      return;
    case value_core::kPareto:
      log4(u1, w);
      exp2_4(-(w / value_core::kLn2) / r.pareto_alpha, v);
      for (int k = 0; k < 4; ++k) out[k] = value_core::with_sign(r.scale * v[k], sign[k]);
      return;
    default: {  // kNearOverflow
      const double mx = r.max_finite, f = r.overflow_factor < 1.0 ? 1.0 : r.overflow_factor;
      exp2_4(-u1 * value_core::det_log2(f), v);
      for (int k = 0; k < 4; ++k) out[k] = value_core::with_sign(value_core::clamp(mx * v[k], mx / f, mx), sign[k]);
      return;
    }
  }
}

// Expands a recipe over one tensor through harness/value_core.h (the arithmetic the device
// materialiser shares): the class's value, then injection. Keeps the hot column of the last row
// seen, so materialize() computes a one-hot or permutation row once, not once per element.
class Expander {
 public:
  Expander(const ValueRecipe& r, DType dtype, const std::vector<int64_t>& shape, uint64_t stream)
      : r_(core_recipe(r, dtype)), stream_(stream) {
    const size_t rank = shape.size();
    s_.cols = rank >= 1 ? static_cast<uint64_t>(std::max<int64_t>(shape[rank - 1], 1)) : 1;
    s_.rows = rank >= 2 ? static_cast<uint64_t>(std::max<int64_t>(shape[rank - 2], 1)) : 1;
    s_.has_rows = rank >= 2;
    s_.numel = 1;
    for (int64_t e : shape) {
      if (e <= 0) s_.numel = 0;
      if (s_.numel != 0 && __builtin_mul_overflow(s_.numel, static_cast<uint64_t>(e), &s_.numel))
        s_.numel = UINT64_MAX;
    }
  }

  double value(uint64_t index) {
    uint64_t hot = 0;
    if (r_.cls == value_core::kOneHot || r_.cls == value_core::kPermutation) {
      const uint64_t row = index / s_.cols;  // global row, batch included
      if (row != cached_row_) {
        cached_row_ = row;
        cached_hot_ = value_core::hot_column(r_, s_, stream_, row);
      }
      hot = cached_hot_;
    }
    double v = value_core::base_value(r_, s_, stream_, index, hot);
    if (r_.injects()) value_core::inject(r_, s_, stream_, index, v);
    return v;
  }

  /// True where values() is faster than value() one element at a time (a draws_four class).
  bool in_fours() const { return draws_four(r_.cls); }

  /// value() of the elements [first, first + n) into out.
  void values(uint64_t first, int64_t n, double* out) {
    int64_t i = 0;
    if (draws_four(r_.cls)) {
      for (; i + 4 <= n; i += 4) draw4(r_, stream_, first + static_cast<uint64_t>(i), out + i);
      if (r_.injects())
        for (int64_t k = 0; k < i; ++k) value_core::inject(r_, s_, stream_, first + static_cast<uint64_t>(k), out[k]);
    }
    for (; i < n; ++i) out[i] = value(first + static_cast<uint64_t>(i));
  }

 private:
  value_core::Recipe r_;
  uint64_t stream_;
  value_core::Shape s_;
  uint64_t cached_row_ = UINT64_MAX, cached_hot_ = 0;
};

}  // namespace

double recipe_value(const ValueRecipe& r, const TensorDesc& desc, uint64_t stream, uint64_t index) {
  return Expander(r, desc.dtype, desc.shape, stream).value(index);
}

double recipe_value(const ValueRecipe& r, DType dtype, uint64_t stream, uint64_t index) {
  static const std::vector<int64_t> kUnbounded = {int64_t{1} << 62};
  return Expander(r, dtype, kUnbounded, stream).value(index);
}

double recipe_value(const ValueRecipe& r, uint64_t stream, uint64_t index) {
  return recipe_value(r, DType::kF32, stream, index);
}

namespace {

template <typename T>
void put(void* dst, T v) {
  std::memcpy(dst, &v, sizeof v);
}

}  // namespace

// Payloads: gap canary "6A70" ("gap"), output poison "DEAD". Both quiet NaNs,
// so arithmetic on them never traps and yields NaN.
void write_gap_canary(DType t, void* dst) {
  switch (t) {
    case DType::kF64:
      put<uint64_t>(dst, 0x7FF86A706A706A70ull);
      break;
    case DType::kF32:
    case DType::kTF32:
      put<uint32_t>(dst, 0x7FC06A70u);
      break;
    case DType::kF16:
      put<uint16_t>(dst, 0x7E6Au);
      break;
    case DType::kBF16:
      put<uint16_t>(dst, 0x7FCAu);
      break;
    case DType::kE4M3:
      put<uint8_t>(dst, 0x7Fu);
      break;
    case DType::kE5M2:
      put<uint8_t>(dst, 0x7Du);
      break;
    case DType::kI8:
      put<int8_t>(dst, int8_t{-0x6B});
      break;
    case DType::kI32:
      put<int32_t>(dst, int32_t{-0x6A706A70});
      break;
  }
}

void write_output_poison(DType t, void* dst) {
  switch (t) {
    case DType::kF64:
      put<uint64_t>(dst, 0x7FF8DEADDEADDEADull);
      break;
    case DType::kF32:
    case DType::kTF32:
      put<uint32_t>(dst, 0x7FC0DEADu);
      break;
    case DType::kF16:
      put<uint16_t>(dst, 0x7E5Au);
      break;
    case DType::kBF16:
      put<uint16_t>(dst, 0x7FDAu);
      break;
    case DType::kE4M3:
      put<uint8_t>(dst, 0xFFu);
      break;
    case DType::kE5M2:
      put<uint8_t>(dst, 0xFEu);
      break;
    case DType::kI8:
      put<int8_t>(dst, int8_t{-0x53});
      break;
    case DType::kI32:
      put<int32_t>(dst, int32_t{-0x21524111});
      break;
  }
}

bool is_output_poison(DType t, const void* p) {
  unsigned char poison[8];
  write_output_poison(t, poison);
  return std::memcmp(p, poison, dtype_size(t)) == 0;
}

namespace {

// Calls visit(logical, linear) for logical elements [l0, l1) of `desc`, in
// row-major logical order; `linear` is the element index in the allocation.
template <typename Visit>
void walk_view(const TensorDesc& desc, int64_t l0, int64_t l1, Visit visit) {
  if (l0 >= l1) return;  // also keeps a zero extent out of the index decomposition
  std::vector<int64_t> idx(desc.shape.size(), 0);
  int64_t lin = desc.offset;
  int64_t rest = l0;
  for (int64_t d = desc.rank() - 1; d >= 0; --d) {
    idx[d] = rest % desc.shape[d];
    rest /= desc.shape[d];
    lin += idx[d] * desc.strides[d];
  }
  for (int64_t logical = l0; logical < l1; ++logical) {
    visit(logical, lin);
    for (int64_t d = desc.rank() - 1; d >= 0; --d) {
      if (++idx[d] < desc.shape[d]) {
        lin += desc.strides[d];
        break;
      }
      lin -= (desc.shape[d] - 1) * desc.strides[d];
      idx[d] = 0;
    }
  }
}

// Runs body(begin, end) over [0, n) in up to hardware_concurrency threads
// when n is large; the split never changes a value (each element is a pure
// function of its index).
template <typename Body>
void parallel_ranges(int64_t n, Body body) {
  if (n < (int64_t{1} << 20)) {
    body(int64_t{0}, n);
    return;
  }
  // Asked once: glibc reads /sys for it (three system calls, ~6 us), and small tensors are
  // materialised by the thousand per second.
  static const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), 32);
  if (threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back(body, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
}

}  // namespace

namespace {

// Gap canary over the whole allocation, in parallel for large ones.
void fill_gap_canary(const TensorDesc& desc, unsigned char* bytes) {
  const size_t es = dtype_size(desc.dtype);
  unsigned char canary[8];
  write_gap_canary(desc.dtype, canary);
  parallel_ranges(desc.extent(), [&](int64_t b, int64_t e) {
    for (int64_t x = b; x < e; ++x) std::memcpy(bytes + x * es, canary, es);
  });
}

}  // namespace

void materialize(const TensorDesc& desc, const ValueRecipe& recipe, uint64_t stream, void* dst) {
  const size_t es = dtype_size(desc.dtype);
  auto* bytes = static_cast<unsigned char*>(dst);
  fill_gap_canary(desc, bytes);
  const int64_t n = desc.numel();
  if (n == 0) return;
  // The value depends on the logical index only, so one logical tensor gets
  // the same values in every layout. Views whose indices overlap (stride 0)
  // are written in order by one thread: the last write wins, reproducibly.
  auto range = [&](int64_t b, int64_t e) {
    Expander values(recipe, desc.dtype, desc.shape, stream);
    if (!values.in_fours()) {  // the chunk's copy would cost the cheap classes 5-7%
      walk_view(desc, b, e, [&](int64_t logical, int64_t lin) {
        store_as(desc.dtype, values.value(static_cast<uint64_t>(logical)), bytes + lin * es);
      });
      return;
    }
    constexpr int64_t kChunk = 256;
    double chunk[kChunk];
    for (int64_t c0 = b; c0 < e; c0 += kChunk) {
      const int64_t c1 = std::min(e, c0 + kChunk);
      values.values(static_cast<uint64_t>(c0), c1 - c0, chunk);
      walk_view(desc, c0, c1, [&](int64_t logical, int64_t lin) {
        store_as(desc.dtype, chunk[logical - c0], bytes + lin * es);
      });
    }
  };
  if (desc.has_overlap()) {
    range(0, n);
    return;
  }
  parallel_ranges(n, range);
}

void materialize_output(const TensorDesc& desc, void* dst) {
  const size_t es = dtype_size(desc.dtype);
  auto* bytes = static_cast<unsigned char*>(dst);
  fill_gap_canary(desc, bytes);
  unsigned char poison[8];
  write_output_poison(desc.dtype, poison);
  parallel_ranges(desc.numel(), [&](int64_t b, int64_t e) {
    walk_view(desc, b, e, [&](int64_t, int64_t lin) { std::memcpy(bytes + lin * es, poison, es); });
  });
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace assay
