#include "harness/values.h"

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

// Philox4x32-10, constants from Salmon, Moraes, Dror, Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC'11), identical to Random123 and cuRAND.
void Philox4x32::block(uint32_t ctr[4], const uint32_t key_in[2]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t key[2] = {key_in[0], key_in[1]};
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ ctr[1] ^ key[0];
    const uint32_t n2 = hi0 ^ ctr[3] ^ key[1];
    ctr[0] = n0;
    ctr[1] = lo1;
    ctr[2] = n2;
    ctr[3] = lo0;
    key[0] += kW0;
    key[1] += kW1;
  }
}

namespace {

// Uniform in (0, 1) with 53 random bits; never exactly 0 (Box-Muller takes a log).
double unit_open(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (uint64_t{hi} << 21) ^ (lo >> 11);  // 53 bits
  return (static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) + 0.5) * 0x1p-53;
}

// log and cos from +, -, *, / and frexp only: IEEE basic operations are
// correctly rounded everywhere, libm's transcendental functions are not (they
// differ by an ulp between glibc versions), and inputs must be bit-identical
// on every machine. Accuracy ~1e-13 relative, ample for test data.
double det_log(double x) {  // x > 0
  int e = 0;
  const double m = std::frexp(x, &e);      // x = m * 2^e, m in [0.5, 1)
  const double s = (m - 1.0) / (m + 1.0);  // log m = 2 atanh(s), |s| <= 1/3
  const double s2 = s * s;
  double term = s, sum = 0;
  for (int k = 1; k <= 27; k += 2) {
    sum += term / k;
    term *= s2;
  }
  return 2.0 * sum + e * 0.69314718055994530942;
}

// cos(2*pi*u) for u in [0, 1): quadrant from u, Taylor series on [0, pi/2).
double det_cos_2pi(double u) {
  const double t = u * 4.0;
  const int q = static_cast<int>(t);  // 0..3
  const double phi = (t - q) * 1.57079632679489661923;
  const double p2 = phi * phi;
  double c = 0, sn = 0, tc = 1, ts = phi;
  for (int k = 0; k < 12; ++k) {
    c += tc;
    sn += ts;
    tc *= -p2 / ((2 * k + 1) * (2 * k + 2));
    ts *= -p2 / ((2 * k + 2) * (2 * k + 3));
  }
  switch (q & 3) {
    case 0:
      return c;
    case 1:
      return -sn;
    case 2:
      return -c;
    default:
      return sn;
  }
}

constexpr double kLn2 = 0.69314718055994530942;

// 2^t, for the same reason as det_log: floor and ldexp are exact (they only
// move the exponent), and 2^f for f in [0, 1) is a Taylor series of
// exp(f ln 2) in +, * and / (22 terms: truncation < 1e-20 relative).
double det_exp2(double t) {
  if (std::isnan(t)) return t;
  t = std::clamp(t, -4096.0, 4096.0);  // 2^+-4096 is Inf or 0 in fp64 anyway
  const double k = std::floor(t);
  const double f = (t - k) * kLn2;  // t - k is exact
  double term = 1.0, sum = 1.0;
  for (int n = 1; n <= 22; ++n) {
    term *= f / n;
    sum += term;
  }
  return std::ldexp(sum, static_cast<int>(k));
}

double det_log2(double x) {
  return det_log(x) / kLn2;
}  // x > 0

// Philox block for a 64-bit key and two 64-bit counter words, as one array.
struct Block {
  uint32_t w[4];
  uint64_t u64(int i) const { return (uint64_t{w[i]} << 32) | w[i + 1]; }
};
Block philox(uint64_t key, uint64_t c0, uint64_t c1) {
  Block b{{static_cast<uint32_t>(c0), static_cast<uint32_t>(c0 >> 32), static_cast<uint32_t>(c1),
           static_cast<uint32_t>(c1 >> 32)}};
  const uint32_t k[2] = {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)};
  Philox4x32::block(b.w, k);
  return b;
}

// Key tweaks: the base value of element i uses key = seed; each other draw
// about element i (injection, hot column, permutation) uses seed ^ tweak, an
// independent Philox stream, so adding them never changed the base values.
constexpr uint64_t kInjectTweak = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kHotTweak = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPermTweak = 0x165667B19E3779F9ull;

double with_sign(double mag, uint32_t bits) {
  return (bits & 1u) != 0 ? -mag : mag;
}

// A bijection of [0, n) keyed by `key`: a 4-round Feistel network on
// 2h-bit words (2^(2h) < 4n), cycle-walked until the result lands in [0, n)
// (Black and Rogaway, "Ciphers with arbitrary finite domains", CT-RSA 2002).
// Lets a permutation matrix give element (i, j) from i alone, no table.
uint64_t feistel_permute(uint64_t x, uint64_t n, const Block& key) {
  const int bits = n <= 1 ? 1 : std::bit_width(n - 1);
  const int h = (bits + 1) / 2;
  const uint64_t mask = (uint64_t{1} << h) - 1;
  const uint64_t k = key.u64(0);
  do {
    uint64_t l = x >> h, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = philox(k, r, key.u64(2) ^ round).u64(0) & mask;
      const uint64_t nl = r;
      r = l ^ f;
      l = nl;
    }
    x = (l << h) | r;
  } while (x >= n);
  return x;
}

// Expands a recipe over one tensor: the class's value, then injection.
// Keeps the hot column of the last row seen, so materialize() computes a
// one-hot or permutation row once, not once per element.
class Expander {
 public:
  Expander(const ValueRecipe& r, DType dtype, const std::vector<int64_t>& shape, uint64_t stream)
      : r_(r), dtype_(dtype), stream_(stream) {
    const size_t rank = shape.size();
    cols_ = rank >= 1 ? static_cast<uint64_t>(std::max<int64_t>(shape[rank - 1], 1)) : 1;
    rows_ = rank >= 2 ? static_cast<uint64_t>(std::max<int64_t>(shape[rank - 2], 1)) : 1;
    has_rows_ = rank >= 2;
    numel_ = 1;
    for (int64_t e : shape) {
      if (e <= 0) numel_ = 0;
      if (numel_ != 0 && __builtin_mul_overflow(numel_, static_cast<uint64_t>(e), &numel_)) numel_ = UINT64_MAX;
    }
  }

  double value(uint64_t index) {
    double v = base(index);
    if (r_.inject.active()) inject(index, v);
    return v;
  }

 private:
  double base(uint64_t index) {
    const Block b = philox(r_.seed, index, stream_);
    const uint32_t* ctr = b.w;
    switch (r_.cls) {
      case ValueClass::kNormal: {
        // Box-Muller, first output only: one element per counter keeps the
        // mapping element -> value independent of the tensor's size.
        const double u1 = unit_open(ctr[0], ctr[1]), u2 = unit_open(ctr[2], ctr[3]);
        return r_.scale * std::sqrt(-2.0 * det_log(u1)) * det_cos_2pi(u2);
      }
      case ValueClass::kUniform:
        return r_.scale * (2.0 * unit_open(ctr[0], ctr[1]) - 1.0);
      case ValueClass::kSameSign:
        return r_.scale * unit_open(ctr[0], ctr[1]);
      case ValueClass::kSmallInt: {
        const uint64_t span = 2 * static_cast<uint64_t>(r_.int_range) + 1;
        const uint64_t x = ((uint64_t{ctr[0]} << 32) | ctr[1]) % span;
        return static_cast<double>(static_cast<int64_t>(x) - r_.int_range);
      }
      case ValueClass::kNaN:
        return std::numeric_limits<double>::quiet_NaN();
      case ValueClass::kLogUniform: {
        const double u = unit_open(ctr[0], ctr[1]);
        const double e = static_cast<double>(r_.exp_min) + u * static_cast<double>(r_.exp_max - r_.exp_min);
        return with_sign(det_exp2(e), ctr[2]);
      }
      case ValueClass::kPareto: {
        // Inverse CDF: x = x_m * U^(-1/alpha) = x_m * 2^(-log2(U) / alpha).
        const double u = unit_open(ctr[0], ctr[1]);
        return with_sign(r_.scale * det_exp2(-det_log2(u) / r_.pareto_alpha), ctr[2]);
      }
      case ValueClass::kMeanSpread:
        return r_.mean + r_.spread * (2.0 * unit_open(ctr[0], ctr[1]) - 1.0);
      case ValueClass::kNearOverflow: {
        // Log-uniform in [max / f, max]; clamped, so that rounding in the
        // series can never step past max (and into Inf after rounding).
        const double mx = max_finite(dtype_), f = std::max(r_.overflow_factor, 1.0);
        const double mag = mx * det_exp2(-unit_open(ctr[0], ctr[1]) * det_log2(f));
        return with_sign(std::clamp(mag, mx / f, mx), ctr[2]);
      }
      case ValueClass::kSubnormal: {
        if (!dtype_is_float(dtype_)) return 0.0;
        // k * min_subnormal with 1 <= k < 2^bits: every subnormal. The bit
        // length of k is drawn first, so the tiny ones (k = 1, 2, 3...) are as
        // frequent as those next to min_normal. ldexp of an integer is exact.
        const int lo = std::ilogb(min_subnormal(dtype_));
        const int bits = std::ilogb(min_normal(dtype_)) - lo;
        const int len = 1 + static_cast<int>(ctr[2] % static_cast<uint32_t>(bits));
        const uint64_t k = (uint64_t{1} << (len - 1)) | (b.u64(0) & ((uint64_t{1} << (len - 1)) - 1));
        return with_sign(std::ldexp(static_cast<double>(k), lo), ctr[3]);
      }
      case ValueClass::kSignedZero:
        return with_sign(0.0, ctr[0]);
      case ValueClass::kOneHot:
      case ValueClass::kPermutation: {
        const uint64_t row = index / cols_;  // global row, batch included
        if (row != cached_row_) {
          cached_row_ = row;
          cached_hot_ = hot_column(row);
        }
        return index % cols_ == cached_hot_ ? 1.0 : 0.0;
      }
    }
    return 0;
  }

  // Column holding the 1 of global row `row` (may be >= cols_: no 1).
  uint64_t hot_column(uint64_t row) const {
    if (r_.cls == ValueClass::kOneHot) return philox(r_.seed ^ kHotTweak, row, stream_).u64(0) % cols_;
    // Permutation: pi(i) over [0, max(rows, cols)), one key per matrix of the
    // batch. rows <= cols: one 1 per row; rows > cols: one per column.
    const uint64_t batch = row / rows_, i = row % rows_;
    return feistel_permute(i, std::max(rows_, cols_), philox(r_.seed ^ kPermTweak, batch, stream_));
  }

  void inject(uint64_t index, double& v) const {
    const SpecialInjection& in = r_.inject;
    const uint64_t col = index % cols_, row = (index / cols_) % rows_;
    auto edge = [&](uint64_t i) {
      const uint64_t t = static_cast<uint64_t>(in.tile);
      return i % t == 0 || i % t == t - 1;
    };
    const bool structured = ((in.at & kAtFirst) != 0 && index == 0) ||
                            ((in.at & kAtLast) != 0 && numel_ != 0 && index == numel_ - 1) ||
                            ((in.at & kAtTile) != 0 && in.tile >= 1 && (edge(col) || (has_rows_ && edge(row))));
    const Block b = philox(r_.seed ^ kInjectTweak, index, stream_);
    if (!structured && !(unit_open(b.w[0], b.w[1]) < in.rate)) return;
    // The k-th set bit of kinds, k uniform.
    const int n = std::popcount(static_cast<unsigned>(in.kinds));
    int k = static_cast<int>(b.w[2] % static_cast<uint32_t>(n));
    uint8_t bit = 1;
    for (;; bit <<= 1) {
      if ((in.kinds & bit) != 0 && k-- == 0) break;
    }
    switch (bit) {
      case kSpecialNaN:
        v = std::numeric_limits<double>::quiet_NaN();
        break;
      case kSpecialPosInf:
        v = std::numeric_limits<double>::infinity();
        break;
      case kSpecialNegInf:
        v = -std::numeric_limits<double>::infinity();
        break;
      default:
        v = -0.0;
        break;
    }
  }

  const ValueRecipe& r_;
  DType dtype_;
  uint64_t stream_;
  uint64_t rows_ = 1, cols_ = 1, numel_ = 1;
  bool has_rows_ = false;
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
  const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), 32);
  if (n < (int64_t{1} << 20) || threads <= 1) {
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
    walk_view(desc, b, e, [&](int64_t logical, int64_t lin) {
      store_as(desc.dtype, values.value(static_cast<uint64_t>(logical)), bytes + lin * es);
    });
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
