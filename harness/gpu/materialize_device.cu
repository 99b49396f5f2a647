// Device port of harness/values.cpp's Expander (see materialize_device.h).
// Every expression keeps the host's operation order; this file is compiled
// with -fmad=false (CMakeLists.txt) so that no multiply-add is contracted.
#include "harness/gpu/materialize_device_kernels.h"

#include <algorithm>

namespace assay::gpu::detail {
namespace {

constexpr uint32_t kPoisonF32 = 0x7FC0DEADu;  // write_output_poison(kF32)
// kSpecial* and kAt* bits of harness/values.h.
constexpr uint32_t kSpecialNaN = 1, kSpecialPosInf = 2, kSpecialNegInf = 4;
constexpr uint32_t kAtFirst = 1, kAtLast = 2, kAtTile = 4;

struct Block {
  uint32_t w[4];
  __device__ uint64_t u64(int i) const { return (uint64_t{w[i]} << 32) | w[i + 1]; }
};

__device__ Block philox(uint64_t key64, uint64_t c0, uint64_t c1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t ctr[4] = {static_cast<uint32_t>(c0), static_cast<uint32_t>(c0 >> 32), static_cast<uint32_t>(c1),
                     static_cast<uint32_t>(c1 >> 32)};
  uint32_t key[2] = {static_cast<uint32_t>(key64), static_cast<uint32_t>(key64 >> 32)};
#pragma unroll
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
  return Block{{ctr[0], ctr[1], ctr[2], ctr[3]}};
}

__device__ double unit_open(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (uint64_t{hi} << 21) ^ (lo >> 11);
  return (static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) + 0.5) * 0x1p-53;
}

__device__ double det_log(double x) {
  int e = 0;
  const double m = frexp(x, &e);
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double term = s, sum = 0;
  for (int k = 1; k <= 27; k += 2) {
    sum += term / k;
    term *= s2;
  }
  return 2.0 * sum + e * 0.69314718055994530942;
}

__device__ double det_cos_2pi(double u) {
  const double t = u * 4.0;
  const int q = static_cast<int>(t);
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

// std::clamp(v, lo, hi) as the host evaluates it (v < lo ? lo : hi < v ? hi : v).
__device__ double clamp_as_std(double v, double lo, double hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

__device__ double det_exp2(double t) {
  if (isnan(t)) return t;
  t = clamp_as_std(t, -4096.0, 4096.0);
  const double k = floor(t);
  const double f = (t - k) * kLn2;
  double term = 1.0, sum = 1.0;
  for (int n = 1; n <= 22; ++n) {
    term *= f / n;
    sum += term;
  }
  return ldexp(sum, static_cast<int>(k));
}

__device__ double det_log2(double x) {
  return det_log(x) / kLn2;
}

constexpr uint64_t kInjectTweak = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kHotTweak = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPermTweak = 0x165667B19E3779F9ull;

__device__ double with_sign(double mag, uint32_t bits) {
  return (bits & 1u) != 0 ? -mag : mag;
}

__device__ uint64_t feistel_permute(uint64_t x, uint64_t n, const Block& key) {
  const int bits = n <= 1 ? 1 : 64 - __clzll(static_cast<long long>(n - 1));
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

// ValueClass numbering (values.h; part of the case format).
enum : int32_t {
  kNormal,
  kUniform,
  kSameSign,
  kSmallInt,
  kNaN,
  kLogUniform,
  kPareto,
  kMeanSpread,
  kNearOverflow,
  kSubnormal,
  kSignedZero,
  kOneHot,
  kPermutation
};

__device__ double base_value(const DevRecipe& r, const DevView& v, uint64_t stream, uint64_t index) {
  const Block b = philox(r.seed, index, stream);
  const uint32_t* ctr = b.w;
  switch (r.cls) {
    case kNormal: {
      const double u1 = unit_open(ctr[0], ctr[1]), u2 = unit_open(ctr[2], ctr[3]);
      return r.scale * sqrt(-2.0 * det_log(u1)) * det_cos_2pi(u2);
    }
    case kUniform:
      return r.scale * (2.0 * unit_open(ctr[0], ctr[1]) - 1.0);
    case kSameSign:
      return r.scale * unit_open(ctr[0], ctr[1]);
    case kSmallInt: {
      const uint64_t span = 2 * static_cast<uint64_t>(r.int_range) + 1;
      const uint64_t x = ((uint64_t{ctr[0]} << 32) | ctr[1]) % span;
      return static_cast<double>(static_cast<int64_t>(x) - r.int_range);
    }
    case kNaN:
      return __longlong_as_double(0x7FF8000000000000ll);
    case kLogUniform: {
      const double u = unit_open(ctr[0], ctr[1]);
      const double e = static_cast<double>(r.exp_min) + u * static_cast<double>(r.exp_max - r.exp_min);
      return with_sign(det_exp2(e), ctr[2]);
    }
    case kPareto: {
      const double u = unit_open(ctr[0], ctr[1]);
      return with_sign(r.scale * det_exp2(-det_log2(u) / r.pareto_alpha), ctr[2]);
    }
    case kMeanSpread:
      return r.mean + r.spread * (2.0 * unit_open(ctr[0], ctr[1]) - 1.0);
    case kNearOverflow: {
      const double mx = r.max_finite, f = r.overflow_factor < 1.0 ? 1.0 : r.overflow_factor;
      const double mag = mx * det_exp2(-unit_open(ctr[0], ctr[1]) * det_log2(f));
      return with_sign(clamp_as_std(mag, mx / f, mx), ctr[2]);
    }
    case kSubnormal: {
      const int len = 1 + static_cast<int>(ctr[2] % static_cast<uint32_t>(r.sub_bits));
      const uint64_t k = (uint64_t{1} << (len - 1)) | (b.u64(0) & ((uint64_t{1} << (len - 1)) - 1));
      return with_sign(ldexp(static_cast<double>(k), r.sub_lo), ctr[3]);
    }
    case kSignedZero:
      return with_sign(0.0, ctr[0]);
    case kOneHot:
    case kPermutation: {
      const uint64_t row = index / v.cols;
      uint64_t hot;
      if (r.cls == kOneHot) {
        hot = philox(r.seed ^ kHotTweak, row, stream).u64(0) % v.cols;
      } else {
        const uint64_t batch = row / v.rows, i = row % v.rows;
        hot = feistel_permute(i, v.rows > v.cols ? v.rows : v.cols, philox(r.seed ^ kPermTweak, batch, stream));
      }
      return index % v.cols == hot ? 1.0 : 0.0;
    }
  }
  return 0;
}

__device__ void inject(const DevRecipe& r, const DevView& v, uint64_t stream, uint64_t index, double& x) {
  const uint64_t col = index % v.cols, row = (index / v.cols) % v.rows;
  const uint64_t t = static_cast<uint64_t>(r.inject_tile);
  auto edge = [t](uint64_t i) { return i % t == 0 || i % t == t - 1; };
  const bool structured = ((r.inject_at & kAtFirst) != 0 && index == 0) ||
                          ((r.inject_at & kAtLast) != 0 && v.numel != 0 && index == static_cast<uint64_t>(v.numel) - 1) ||
                          ((r.inject_at & kAtTile) != 0 && r.inject_tile >= 1 && (edge(col) || (v.has_rows && edge(row))));
  const Block b = philox(r.seed ^ kInjectTweak, index, stream);
  if (!structured && !(unit_open(b.w[0], b.w[1]) < r.inject_rate)) return;
  const int n = __popc(static_cast<unsigned>(r.inject_kinds));
  int k = static_cast<int>(b.w[2] % static_cast<uint32_t>(n));
  uint32_t bit = 1;
  for (;; bit <<= 1) {
    if ((r.inject_kinds & bit) != 0 && k-- == 0) break;
  }
  switch (bit) {
    case kSpecialNaN:
      x = __longlong_as_double(0x7FF8000000000000ll);
      break;
    case kSpecialPosInf:
      x = __longlong_as_double(0x7FF0000000000000ll);
      break;
    case kSpecialNegInf:
      x = __longlong_as_double(static_cast<long long>(0xFFF0000000000000ull));
      break;
    default:
      x = -0.0;
      break;
  }
}

__global__ void fill_words_kernel(uint32_t* dst, uint32_t word, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = word;
}

// Linear element of logical (row-major) index `logical` of the view.
__device__ int64_t linear_of(const DevView& v, int64_t logical) {
  int64_t lin = v.offset;
  for (int d = v.rank - 1; d >= 0; --d) {
    lin += (logical % v.shape[d]) * v.strides[d];
    logical /= v.shape[d];
  }
  return lin;
}

// One thread per logical element; `values` false writes the poison instead.
__global__ void materialize_kernel(float* dst, DevView v, DevRecipe r, uint64_t stream, bool values) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < v.numel; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t lin = linear_of(v, i);
    if (!values) {
      reinterpret_cast<uint32_t*>(dst)[lin] = kPoisonF32;
      continue;
    }
    double x = base_value(r, v, stream, static_cast<uint64_t>(i));
    if (r.inject_kinds != 0 && (r.inject_rate > 0 || r.inject_at != 0)) inject(r, v, stream, static_cast<uint64_t>(i), x);
    // The host's (float)x keeps a quiet NaN's sign and payload (0x7FC00000
    // here); cvt.rn.f32.f64 would give the canonical 0x7FFFFFFF.
    dst[lin] = isnan(x) ? __int_as_float(0x7FC00000) : __double2float_rn(x);
  }
}

int grid_for(int64_t n) {
  constexpr int64_t kMaxBlocks = 132 * 16;  // grid-stride beyond a few waves
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, kMaxBlocks)));
}

}  // namespace

cudaError_t launch_materialize(float* dst, const DevView& v, const DevRecipe& r, uint64_t stream_id, bool values,
                               cudaStream_t stream) {
  if (v.numel <= 0) return cudaSuccess;
  materialize_kernel<<<grid_for(v.numel), 256, 0, stream>>>(dst, v, r, stream_id, values);
  return cudaGetLastError();
}

cudaError_t launch_fill_words(void* dst, uint32_t word, int64_t n_words, cudaStream_t stream) {
  if (n_words <= 0) return cudaSuccess;
  fill_words_kernel<<<grid_for(n_words), 256, 0, stream>>>(static_cast<uint32_t*>(dst), word, n_words);
  return cudaGetLastError();
}

}  // namespace assay::gpu::detail
