// The arithmetic of the batched mixed-input fp64 GEMM reference, one copy for the host (CPU
// tests, the emulated vendor) and the device (references/device/gemm_f64_batch.cu): the
// element decoders of every stored input type and the per-element reference, in the order of
// ref::gemm_reference (references/host/gemm.h): acc += a*b and s += |a||b| over q = 0..k-1,
// then r = alpha*acc (+ beta*c) and mag = |alpha|*s (+ |beta||c|). Every product and sum is
// an explicitly rounded fp64 operation (no contraction into an FMA on either side), so the
// device gives the host's bits: the inputs (scale * stored value) are exact in fp64, and so
// each step rounds exactly as the host's does. Plain C++17, no harness headers.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ASSAY_F64B_HD __host__ __device__
#else
#define ASSAY_F64B_HD
#endif

namespace assay::device_ref {

/// Stored element types the reference decodes (kF32 also holds tf32 values).
enum F64Input : int32_t { kInF32, kInF16, kInBF16, kInE4M3, kInE5M2, kInI8, kInI32 };

/// Bytes per element of a stored type.
ASSAY_F64B_HD inline int64_t f64_input_size(int32_t t) {
  switch (t) {
    case kInF16:
    case kInBF16:
      return 2;
    case kInE4M3:
    case kInE5M2:
    case kInI8:
      return 1;
    default:
      return 4;
  }
}

/// One GEMM of a batch (all of its strided entries): row-major A (m x k, or k x m with
/// trans_a), B (k x n, or n x k with trans_b), C (m x n, read only when beta != 0), element
/// strides (leading dimensions and batch strides) and byte offsets into one image. ref and
/// mag get batch * m * n doubles from element `out`, row-major per entry.
struct F64GemmProblem {
  int32_t a_type = kInF32, b_type = kInF32, c_type = kInF32;
  int32_t trans_a = 0, trans_b = 0;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  uint64_t a = 0, b = 0, c = 0;  ///< bytes from the image's start to element 0 of entry 0
  double alpha = 1, beta = 0;
  double scale_a = 1, scale_b = 1;  ///< each stored A and B value is multiplied by its scale
  uint64_t out = 0;                 ///< first element of this problem in ref and mag
};

/// A 16 x 16 block of one entry's output: what one thread block of the device kernel computes.
struct F64GemmTile {
  int32_t problem = 0, entry = 0, i0 = 0, j0 = 0;
};
inline constexpr int kF64TileRows = 16, kF64TileCols = 16;

ASSAY_F64B_HD inline double f64b_from_bits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

/// 2^e for e in the normal range of fp64 (exact).
ASSAY_F64B_HD inline double f64b_pow2(int e) {
  return f64b_from_bits(static_cast<uint64_t>(e + 1023) << 52);
}

/// A binary minifloat's magnitude field (exponent and mantissa bits, no sign), IEEE-style
/// subnormals; the caller handles Inf and NaN encodings.
ASSAY_F64B_HD inline double f64b_minifloat(uint32_t mag, int mbits, int bias) {
  const uint32_t e = mag >> mbits, mant = mag & ((1u << mbits) - 1u);
  const double sig = static_cast<double>(e == 0 ? mant : (mant | (1u << mbits)));
  return sig * f64b_pow2((e == 0 ? 1 : static_cast<int>(e)) - bias - mbits);  // exact: sig < 2^11
}

ASSAY_F64B_HD inline double f64b_nan() {
  return f64b_from_bits(0x7FF8000000000000ull);
}

ASSAY_F64B_HD inline double f64b_signed(double v, bool negative) {
  return negative ? -v : v;
}

/// A naturally aligned element (the staging image places every element at a multiple of its
/// size): one load on the device, where memcpy of unknown alignment would be byte loads.
template <typename T>
ASSAY_F64B_HD inline T f64b_load(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const T*>(p);
#else
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

/// The value of the stored element at p, exactly (harness/dtype.h load_as_double, NaN payloads
/// aside: every NaN encoding gives a NaN).
ASSAY_F64B_HD inline double f64_decode(int32_t t, const unsigned char* p) {
  switch (t) {
    case kInF16: {
      const uint16_t h = f64b_load<uint16_t>(p);
      const uint32_t mag = h & 0x7FFFu;
      if (mag > 0x7C00u) return f64b_nan();
      const double v = mag == 0x7C00u ? f64b_from_bits(0x7FF0000000000000ull) : f64b_minifloat(mag, 10, 15);
      return f64b_signed(v, (h & 0x8000u) != 0);
    }
    case kInBF16: {
      const uint32_t u = static_cast<uint32_t>(f64b_load<uint16_t>(p)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return static_cast<double>(f);
    }
    case kInE4M3: {
      const uint32_t mag = p[0] & 0x7Fu;
      if (mag == 0x7Fu) return f64b_nan();  // e4m3 (fn): no Inf, one NaN per sign
      return f64b_signed(f64b_minifloat(mag, 3, 7), (p[0] & 0x80u) != 0);
    }
    case kInE5M2: {
      const uint32_t mag = p[0] & 0x7Fu;
      if (mag > 0x7Cu) return f64b_nan();
      const double v = mag == 0x7Cu ? f64b_from_bits(0x7FF0000000000000ull) : f64b_minifloat(mag, 2, 15);
      return f64b_signed(v, (p[0] & 0x80u) != 0);
    }
    case kInI8:
      return static_cast<double>(static_cast<int8_t>(p[0]));
    case kInI32:
      return static_cast<double>(f64b_load<int32_t>(p));
    default:
      return static_cast<double>(f64b_load<float>(p));
  }
}

// Explicitly rounded operations: a contracted a*b + c would round once where the host rounds
// twice (the products of scaled fp8 values carry up to 56 bits, so a*b itself can round).
ASSAY_F64B_HD inline double f64b_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
ASSAY_F64B_HD inline double f64b_add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
ASSAY_F64B_HD inline double f64b_abs(double a) {
  uint64_t u;
  std::memcpy(&u, &a, 8);
  return f64b_from_bits(u & 0x7FFFFFFFFFFFFFFFull);
}

/// The sums of element (i, j) of entry `e` of problem p over q = q0, q0 + step, ... < k, in that
/// order: acc = sum a*b and s = sum |a||b| (the caller starts both at 0).
ASSAY_F64B_HD inline void f64_gemm_sums(const F64GemmProblem& p, const unsigned char* image, int64_t e, int64_t i,
                                        int64_t j, int64_t q0, int64_t step, double& acc, double& s) {
  const int64_t sa = f64_input_size(p.a_type), sb = f64_input_size(p.b_type);
  const unsigned char* A = image + p.a + static_cast<uint64_t>(e * p.stride_a * sa);
  const unsigned char* B = image + p.b + static_cast<uint64_t>(e * p.stride_b * sb);
  // Element q of A's row i and of B's column j: the step between consecutive q in bytes.
  const int64_t da = (p.trans_a ? p.lda : 1) * sa, db = (p.trans_b ? 1 : p.ldb) * sb;
  const unsigned char* a = A + (p.trans_a ? i : i * p.lda) * sa + q0 * da;
  const unsigned char* b = B + (p.trans_b ? j * p.ldb : j) * sb + q0 * db;
  for (int64_t q = q0; q < p.k; q += step, a += step * da, b += step * db) {
    const double av = f64b_mul(p.scale_a, f64_decode(p.a_type, a));
    const double bv = f64b_mul(p.scale_b, f64_decode(p.b_type, b));
    acc = f64b_add(acc, f64b_mul(av, bv));
    s = f64b_add(s, f64b_mul(f64b_abs(av), f64b_abs(bv)));
  }
}

/// alpha, beta and C applied to the sums of element (i, j) of entry `e`, written at
/// ref[p.out + (e * m + i) * n + j] (and mag alike).
ASSAY_F64B_HD inline void f64_gemm_finish(const F64GemmProblem& p, const unsigned char* image, int64_t e, int64_t i,
                                          int64_t j, double acc, double s, double* ref, double* mag) {
  double r = f64b_mul(p.alpha, acc);
  double sm = f64b_mul(f64b_abs(p.alpha), s);
  if (p.beta != 0) {
    const int64_t sc = f64_input_size(p.c_type);
    const double cv =
        f64_decode(p.c_type, image + p.c + static_cast<uint64_t>((e * p.stride_c + i * p.ldc + j) * sc));
    r = f64b_add(r, f64b_mul(p.beta, cv));
    sm = f64b_add(sm, f64b_mul(f64b_abs(p.beta), f64b_abs(cv)));
  }
  const uint64_t at = p.out + static_cast<uint64_t>((e * p.m + i) * p.n + j);
  ref[at] = r;
  mag[at] = sm;
}

/// ref and mag of element (i, j) of entry `e` of problem p: the sums in the host's order
/// q = 0, 1, ..., k - 1, then alpha, beta and C.
ASSAY_F64B_HD inline void f64_gemm_element(const F64GemmProblem& p, const unsigned char* image, int64_t e, int64_t i,
                                           int64_t j, double* ref, double* mag) {
  double acc = 0, s = 0;
  f64_gemm_sums(p, image, e, i, j, 0, 1, acc, s);
  f64_gemm_finish(p, image, e, i, j, acc, s, ref, mag);
}

/// True when every partial sum of p's products is exact in fp64, so that any order of the k
/// terms gives the host's bits: int8 and e4m3 inputs at unit scales with k < 2^17 (e4m3 values
/// are multiples of 2^-9 below 2^9, so products are multiples of 2^-18 below 2^18 and sums of
/// fewer than 2^17 of them stay below 2^35: 53 bits; int8 products are integers of at most
/// 2^14). NaN stays NaN in any order. The device may then split k across a warp.
ASSAY_F64B_HD inline bool f64_gemm_sums_exact(const F64GemmProblem& p) {
  auto exact_type = [](int32_t t) { return t == kInI8 || t == kInE4M3; };
  return exact_type(p.a_type) && exact_type(p.b_type) && p.scale_a == 1 && p.scale_b == 1 && p.k < (int64_t{1} << 17);
}

/// Number of tiles problem p needs (every entry, 16 x 16 blocks of its output).
inline int64_t f64_gemm_tile_count(const F64GemmProblem& p) {
  return p.batch * ((p.m + kF64TileRows - 1) / kF64TileRows) * ((p.n + kF64TileCols - 1) / kF64TileCols);
}

/// Appends problem `index`'s tiles to `tiles` (a container of F64GemmTile).
template <typename Tiles>
void f64_gemm_append_tiles(const F64GemmProblem& p, int32_t index, Tiles& tiles) {
  for (int64_t e = 0; e < p.batch; ++e)
    for (int64_t i0 = 0; i0 < p.m; i0 += kF64TileRows)
      for (int64_t j0 = 0; j0 < p.n; j0 += kF64TileCols)
        tiles.push_back(F64GemmTile{index, static_cast<int32_t>(e), static_cast<int32_t>(i0), static_cast<int32_t>(j0)});
}

/// What the device kernel computes, on the host: every element of every tile.
template <typename Problems, typename Tiles>
void f64_gemm_batch_host(const Problems& problems, const Tiles& tiles, const unsigned char* image, double* ref,
                         double* mag) {
  for (const F64GemmTile& t : tiles) {
    const F64GemmProblem& p = problems[static_cast<size_t>(t.problem)];
    for (int64_t i = t.i0; i < p.m && i < t.i0 + kF64TileRows; ++i)
      for (int64_t j = t.j0; j < p.n && j < t.j0 + kF64TileCols; ++j) f64_gemm_element(p, image, t.entry, i, j, ref, mag);
  }
}

}  // namespace assay::device_ref
