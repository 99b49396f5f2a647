#include "harness/gpu/check_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "harness/device_output_tol.h"
#include "harness/gpu/div_cursor.h"
#include "harness/relation_core.h"

namespace assay::gpu {
namespace {

__device__ double load_elem(int dtype, const void* base, int64_t i) {
  switch (dtype) {
    case 0:
      return static_cast<const double*>(base)[i];
    case 1:
    case 2:
      return static_cast<double>(static_cast<const float*>(base)[i]);
    case 3:
      return static_cast<double>(__half2float(static_cast<const __half*>(base)[i]));
    case 4:
      return static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]));
    case 5: {
      __nv_fp8_e4m3 v;
      v.__x = static_cast<const unsigned char*>(base)[i];
      return static_cast<double>(static_cast<float>(v));
    }
    case 6: {
      __nv_fp8_e5m2 v;
      v.__x = static_cast<const unsigned char*>(base)[i];
      return static_cast<double>(static_cast<float>(v));
    }
    case 7:
      return static_cast<double>(static_cast<const int8_t*>(base)[i]);
    case 8:
      return static_cast<double>(static_cast<const int32_t*>(base)[i]);
  }
  return 0;
}

__device__ int elem_size_of(int dtype) {
  switch (dtype) {
    case 0:
      return 8;
    case 1:
    case 2:
    case 8:
      return 4;
    case 3:
    case 4:
      return 2;
    default:
      return 1;
  }
}

__device__ bool same_bits(const void* a, const void* b, int64_t i, int es) {
  switch (es) {
    case 8:
      return static_cast<const unsigned long long*>(a)[i] == static_cast<const unsigned long long*>(b)[i];
    case 4:
      return static_cast<const unsigned*>(a)[i] == static_cast<const unsigned*>(b)[i];
    case 2:
      return static_cast<const unsigned short*>(a)[i] == static_cast<const unsigned short*>(b)[i];
    default:
      return static_cast<const unsigned char*>(a)[i] == static_cast<const unsigned char*>(b)[i];
  }
}

// Counter + first index, aggregated per warp to keep atomics off the hot path: `hits` items of
// this lane counted, the first of them at `index`.
__device__ void note_count(unsigned hits, int64_t index, unsigned long long* count, unsigned long long* first) {
  const unsigned mask = __ballot_sync(0xffffffffu, hits != 0);
  if (mask == 0) return;
  const unsigned total = __reduce_add_sync(0xffffffffu, hits);
  // Smallest index among the warp's hits: indices rise with lane id in every
  // loop below, so the lowest set lane holds it.
  const int leader = __ffs(mask) - 1;
  const long long first_idx = __shfl_sync(0xffffffffu, static_cast<long long>(index), leader);
  if ((threadIdx.x & 31) == leader) {
    atomicAdd(count, static_cast<unsigned long long>(total));
    atomicMax(first, ~static_cast<unsigned long long>(first_idx));
  }
}

// One item per hit.
__device__ void note(bool hit, int64_t index, unsigned long long* count, unsigned long long* first) {
  note_count(hit ? 1u : 0u, index, count, first);
}

// Bytes that must not change, counted in 4-byte words: 16 bytes a load where both sides are
// 16-byte aligned (the arena's tensors and guard bands are), the rest a word at a time. Inputs
// and guards are most of the bytes a check reads, and a word a load left it latency-bound.
// A constant region (guard bands and moats: the canary) is compared with its words, not read.
__device__ void check_bytes_equal(const unsigned char* a, const unsigned char* s, int64_t bytes, const DevRegion& r,
                                  RegionResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(s)) & 15) == 0;
  const int64_t quads = aligned ? bytes / 16 : 0;
  const int64_t qlimit = (quads + 31) / 32 * 32;  // whole warps stay in the loop for the ballot
  const uint4 pattern = make_uint4(r.poison[0], r.poison[1], r.poison[2], r.poison[3]);
  // Two quads a step, all their loads issued before the first compare: one quad's loads then
  // its compare leave each warp waiting on memory.
  for (int64_t q0 = tid; q0 < qlimit; q0 += 2 * stride) {
    const int64_t q1 = q0 + stride;  // in a whole warp too: stride and qlimit are multiples of 32
    uint4 x0 = pattern, y0 = pattern, x1 = pattern, y1 = pattern;
    if (q0 < quads) {
      x0 = __ldcs(reinterpret_cast<const uint4*>(a) + q0);
      if (!r.constant) y0 = __ldcs(reinterpret_cast<const uint4*>(s) + q0);
    }
    if (q1 < quads) {
      x1 = __ldcs(reinterpret_cast<const uint4*>(a) + q1);
      if (!r.constant) y1 = __ldcs(reinterpret_cast<const uint4*>(s) + q1);
    }
    const bool a0 = x0.x != y0.x, b0 = x0.y != y0.y, c0 = x0.z != y0.z, d0 = x0.w != y0.w;
    const bool a1 = x1.x != y1.x, b1 = x1.y != y1.y, c1 = x1.z != y1.z, d1 = x1.w != y1.w;
    const unsigned hits0 = a0 + b0 + c0 + d0, hits1 = a1 + b1 + c1 + d1;
    if (__any_sync(0xffffffffu, hits0 + hits1 != 0)) {
      note_count(hits0, 4 * q0 + (a0 ? 0 : b0 ? 1 : c0 ? 2 : 3), &out->changed, &out->changed_first);
      note_count(hits1, 4 * q1 + (a1 ? 0 : b1 ? 1 : c1 ? 2 : 3), &out->changed, &out->changed_first);
    }
  }
  const int64_t words = bytes / 4, w0 = quads * 4;
  const int64_t limit = w0 + (words - w0 + 31) / 32 * 32;
  for (int64_t w = w0 + tid; w < limit; w += stride) {
    const bool hit = w < words && reinterpret_cast<const unsigned*>(a)[w] !=
                                      (r.constant ? r.poison[w % 4] : reinterpret_cast<const unsigned*>(s)[w]);
    note(hit, w, &out->changed, &out->changed_first);
  }
}

// An output region's elements [from, n) one a step: element e covered where covered(e), which
// must differ from the snapshot (poison) where r.check_unwritten, and equal it elsewhere.
template <typename Covered>
__device__ void check_output_elements(const unsigned char* a, const unsigned char* s, const DevRegion& r, int64_t from,
                                      int64_t n, Covered covered, RegionResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t limit = from + (n - from + 31) / 32 * 32;
  for (int64_t e = from + tid; e < limit; e += stride) {
    bool unwritten = false, changed = false;
    if (e < n) {
      const bool same = same_bits(a, s, e, r.elem_size), cov = covered(e);
      unwritten = cov && same && r.check_unwritten;
      changed = !cov && !same;
    }
    if (__any_sync(0xffffffffu, unwritten || changed)) {
      note(unwritten, e, &out->unwritten, &out->unwritten_first);
      note(changed, e, &out->changed, &out->changed_first);
    }
  }
}

// An output region covered by one run of elements [cb, ce) (a dense view, or nothing), 16 bytes
// a load as check_bytes_equal. A quad of covered elements alone needs no snapshot: with
// check_unwritten its elements are held against the poison (the snapshot's bytes there), and
// without it they are not checked at all. The output is read here besides the compare, so
// reading the snapshot too would be a third of a dense output's check traffic.
template <int ES>
__device__ void check_output_run(const unsigned char* a, const unsigned char* s, const DevRegion& r, int64_t n,
                                 int64_t cb, int64_t ce, RegionResult* out) {
  constexpr int kPer = 16 / ES;
  constexpr unsigned kMask = ES >= 4 ? 0xffffffffu : (1u << (8 * ES)) - 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t quads = n / kPer;
  const int64_t qlimit = (quads + 31) / 32 * 32;
  const uint4 poison = make_uint4(r.poison[0], r.poison[1], r.poison[2], r.poison[3]);
  // Quad q's loads: the output's 16 bytes, and the snapshot's where not all covered.
  auto load = [&](int64_t q, uint4& x, uint4& y) {
    const bool covered = q * kPer >= cb && (q + 1) * kPer <= ce;
    x = poison, y = poison;
    if (q < quads && (!covered || r.check_unwritten)) {
      x = __ldcs(reinterpret_cast<const uint4*>(a) + q);
      if (!covered) y = __ldcs(reinterpret_cast<const uint4*>(s) + q);
    }
  };
  auto judge_quad = [&](int64_t q, const uint4& x, const uint4& y, unsigned& unwritten, int64_t& first_u,
                        unsigned& changed, int64_t& first_c) {
    unwritten = changed = 0;
    first_u = first_c = 0;
    if (q >= quads) return;
    const unsigned d[4] = {x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w};
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      bool same;
      if constexpr (ES == 8)
        same = (d[2 * j] | d[2 * j + 1]) == 0;
      else
        same = ((d[j * ES / 4] >> (8 * (j * ES % 4))) & kMask) == 0;
      const int64_t e = q * kPer + j;
      const bool cov = e >= cb && e < ce;
      if (cov && same && r.check_unwritten) first_u = unwritten++ == 0 ? e : first_u;
      if (!cov && !same) first_c = changed++ == 0 ? e : first_c;
    }
  };
  // Two quads a step, both loaded before either is judged (as check_bytes_equal).
  for (int64_t q0 = tid; q0 < qlimit; q0 += 2 * stride) {
    const int64_t q1 = q0 + stride;
    uint4 x0, y0, x1, y1;
    load(q0, x0, y0);
    load(q1, x1, y1);
    unsigned u0, c0, u1, c1;
    int64_t fu0, fc0, fu1, fc1;
    judge_quad(q0, x0, y0, u0, fu0, c0, fc0);
    judge_quad(q1, x1, y1, u1, fu1, c1, fc1);
    if (__any_sync(0xffffffffu, (u0 | c0 | u1 | c1) != 0)) {
      note_count(u0, fu0, &out->unwritten, &out->unwritten_first);
      note_count(c0, fc0, &out->changed, &out->changed_first);
      note_count(u1, fu1, &out->unwritten, &out->unwritten_first);
      note_count(c1, fc1, &out->changed, &out->changed_first);
    }
  }
  check_output_elements(a, s, r, quads * kPer, n, [&](int64_t e) { return e >= cb && e < ce; }, out);
}

__device__ void check_region(const CheckParams& p, const DevRegion& r, RegionResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned char* a = p.arena + r.byte_begin;
  const unsigned char* s = p.snapshot + r.byte_begin;
  if (r.kind == DevRegion::kBytesEqual) {
    check_bytes_equal(a, s, r.byte_end - r.byte_begin, r, out);
    return;
  }
  const int64_t n = (r.byte_end - r.byte_begin) / r.elem_size;
  const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(s)) & 15) == 0;
  // Coverage as one run: no view, or a view whose rows follow each other (ld == cols, or one row).
  if (r.mask == nullptr && aligned && (r.ld <= 0 || r.ld == r.cols || r.rows <= 1)) {
    const int64_t cb = r.ld > 0 ? r.off : 0, ce = r.ld > 0 ? r.off + r.rows * r.cols : 0;
    switch (r.elem_size) {
      case 8:
        return check_output_run<8>(a, s, r, n, cb, ce, out);
      case 4:
        return check_output_run<4>(a, s, r, n, cb, ce, out);
      case 2:
        return check_output_run<2>(a, s, r, n, cb, ce, out);
      case 1:
        return check_output_run<1>(a, s, r, n, cb, ce, out);
    }
  }
  if (r.mask != nullptr || r.ld <= 0) {
    check_output_elements(a, s, r, 0, n, [&](int64_t e) { return r.mask != nullptr && r.mask[e] != 0; }, out);
    return;
  }
  // Element e = q*ld + c of the allocation against the view's start off = off_q*ld + off_c.
  const int64_t ld = r.ld, off_q = r.off / ld, off_c = r.off % ld;
  const int64_t limit = (n + 31) / 32 * 32;
  DivCursor at(tid, stride, ld);
  for (int64_t e = tid; e < limit; e += stride, at.advance()) {
    bool unwritten = false, changed = false;
    if (e < n) {
      const bool borrow = at.r < off_c;
      const int64_t row = at.q - off_q - (borrow ? 1 : 0), col = at.r - off_c + (borrow ? ld : 0);
      const bool covered = row >= 0 && row < r.rows && col < r.cols;
      const bool same = same_bits(a, s, e, r.elem_size);
      unwritten = covered && same && r.check_unwritten;
      changed = !covered && !same;
    }
    if (__any_sync(0xffffffffu, unwritten || changed)) {
      note(unwritten, e, &out->unwritten, &out->unwritten_first);
      note(changed, e, &out->changed, &out->changed_first);
    }
  }
}

// bounds.h vendor_floor on the device: one ulp of the output at |r| plus half its smallest subnormal.
__device__ double vendor_floor_dev(const DevCompare& c, double r) {
  if (c.vr_bits == 0) return 1.0;
  double ax = fmin(fabs(r), c.vr_max);
  const double ulp = ax < c.vr_min_normal ? c.vr_min_sub : ldexp(1.0, ilogb(ax) - c.vr_bits + 1);
  return ulp + 0.5 * c.vr_min_sub;
}

// A thread's running maxima of a compare (check_compare): the worst element as a key (its
// error / tolerance ratio as float bits, then ~index: the lowest index wins a tie) and that
// ratio, and the vendor-relative ones.
struct CompareAcc {
  unsigned long long worst = 0, vworst = 0, kmax = 0, vmax = 0;
  double worst_ratio = 0, max_abs = 0;
};

// One element of a compare: o the output, r and m its reference and magnitude, read where
// `judged`; bad_det: on a rerun, bits unlike the first launch's.
struct Loaded {
  bool judged = false, bad_det = false;
  double o = 0, r = 0, m = 0;
};

// The rerun's rule, for both compare paths: an element is judged where it is in range and, on a
// rerun, only where its bits differ from the first launch's. An element with the first launch's
// bits had every test already, so its reference and bound stay unread (half the rerun's bytes).
__device__ __forceinline__ Loaded gate(bool in, bool rerun, bool differs) {
  Loaded l;
  l.bad_det = in && rerun && differs;
  l.judged = in && (!rerun || differs);
  return l;
}

// One element of a compare. Every lane of the warp calls it, in or out of range (the ballots).
template <bool kVendor>
__device__ __forceinline__ void judge(const DevCompare& c, int64_t idx, int64_t e, const Loaded& l, CompareAcc& acc,
                                      CompareResult* out) {
  const double o = l.o, r = l.r, m = l.m;
  const bool bad_det = l.bad_det;
  bool bad_bound = false, bad_naninf = false, bad_exact = false, over = false;
  if (l.judged) {
    const double tol = c.rel_out * fabs(r) + c.rel_mag * m + c.floor;
    // Partial sums are bounded by the magnitude term; where it can pass the
    // largest finite output (or is itself Inf/NaN), a correct kernel may
    // overflow in the middle of its reduction in some order: Inf, or
    // Inf - Inf = NaN, also where the exact result is an Inf of one sign.
    const double limit = c.overflow_mag > 0 ? c.overflow_mag : c.out_max;
    const bool may_overflow = !(m * (1.0 + c.rel_mag) + c.floor < limit);
    if (isnan(r)) {
      bad_naninf = !isnan(o);
    } else if (isinf(r)) {
      bad_naninf = !((isinf(o) && signbit(o) == signbit(r)) || (isnan(o) && may_overflow));
    } else {
      if ((isnan(o) || isinf(o)) && may_overflow) {
        // accepted; finite outputs are still held to the bound below
      } else if (isnan(o)) {
        bad_naninf = true;
      } else if (isinf(o)) {
        // Overflow is correct only where the exact result may round past the
        // largest finite value, and only with the reference's sign.
        bad_naninf = !(fabs(r) + tol > c.out_max && signbit(o) == signbit(r));
      } else {
        const double err = fabs(o - r);
        if (c.check_bound) bad_bound = err > tol;
        if (c.exact) bad_exact = o != r;
        acc.max_abs = fmax(acc.max_abs, err);
        // The ratio (a division) only where it may beat the thread's worst: err <= worst * tol,
        // shrunk by more than that product's rounding, means err / tol < worst, so its float is
        // at most worst's and its index later: no new key.
        if (acc.worst == 0 || !(err <= acc.worst_ratio * tol * (1.0 - 0x1p-50))) {
          const float ratio = static_cast<float>(tol > 0 ? err / tol : (err > 0 ? INFINITY : 0.0));
          const unsigned long long key = (static_cast<unsigned long long>(__float_as_uint(ratio)) << 32) |
                                         (~static_cast<unsigned>(idx) & 0xffffffffull);
          if (key > acc.worst) acc.worst = key, acc.worst_ratio = ratio;
        }
        // The vendor-relative ratio: errors as fractions of the element's tolerance, so that an
        // element whose reference cancels (a large bound, few significant bits) weighs what its
        // bound says rather than its ulp count; the vendor's error counts at least one ulp.
        if constexpr (kVendor) {
          if (isfinite(tol) && tol > 0) {
            const double v = load_elem(c.out_dtype, c.vendor, e);
            if (isfinite(v)) {
              const double f = vendor_floor_dev(c, r);
              const double a = err / tol, b = fmax(fabs(v - r), f) / tol, q = a / b;
              over = q > c.vr_alpha;
              const unsigned long long low = ~static_cast<unsigned>(idx) & 0xffffffffull;
              acc.vworst =
                  max(acc.vworst, (static_cast<unsigned long long>(__float_as_uint(static_cast<float>(q))) << 32) | low);
              acc.kmax =
                  max(acc.kmax, (static_cast<unsigned long long>(__float_as_uint(static_cast<float>(a))) << 32) | low);
              acc.vmax = max(acc.vmax, static_cast<unsigned long long>(__float_as_uint(static_cast<float>(b))));
            }
          }
        }
      }
    }
  }
  // One ballot for the common case, no failure in the warp.
  if (__any_sync(0xffffffffu, bad_bound || bad_naninf || bad_exact || bad_det || over)) {
    note(bad_bound, idx, &out->bound, &out->bound_first);
    note(bad_naninf, idx, &out->naninf, &out->naninf_first);
    note(bad_exact, idx, &out->exact, &out->exact_first);
    note(bad_det, idx, &out->nondet, &out->nondet_first);
    note(over, idx, &out->vrel_over, &out->vrel_over_first);
  }
}

// A warp's maxima into the result. Non-negative floats and doubles order like their bit patterns.
template <bool kVendor>
__device__ void finish_compare(CompareAcc& acc, CompareResult* out) {
  for (int o = 16; o > 0; o >>= 1) {
    acc.worst = max(acc.worst, __shfl_xor_sync(0xffffffffu, acc.worst, o));
    acc.max_abs = fmax(acc.max_abs, __shfl_xor_sync(0xffffffffu, acc.max_abs, o));
    if constexpr (kVendor) {
      acc.vworst = max(acc.vworst, __shfl_xor_sync(0xffffffffu, acc.vworst, o));
      acc.kmax = max(acc.kmax, __shfl_xor_sync(0xffffffffu, acc.kmax, o));
      acc.vmax = max(acc.vmax, __shfl_xor_sync(0xffffffffu, acc.vmax, o));
    }
  }
  if ((threadIdx.x & 31) == 0) {
    if (acc.worst != 0) atomicMax(&out->worst_key, acc.worst);
    if (acc.vworst != 0) atomicMax(&out->vrel_key, acc.vworst);
    if (acc.kmax != 0) atomicMax(&out->vrel_kernel, acc.kmax);
    if (acc.vmax != 0) atomicMax(&out->vrel_vendor, acc.vmax);
    if (acc.max_abs > 0)
      atomicMax(&out->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(acc.max_abs)));
  }
}

// A 4- or 2-byte output element's value from its bits (load_elem's cases of those widths).
__device__ __forceinline__ double decode_bits(int dtype, uint32_t b) {
  if (dtype == 8) return static_cast<double>(static_cast<int32_t>(b));
  return static_cast<double>(__uint_as_float(b));
}
__device__ __forceinline__ double decode_bits(int dtype, uint16_t b) {
  if (dtype == 3) return static_cast<double>(__half2float(__ushort_as_half(b)));
  return static_cast<double>(__bfloat162float(__ushort_as_bfloat16(b)));
}

// A dense output of 4- or 2-byte elements, two a step, every load of both (the output, and the
// reference and bound, or on a rerun the first launch's output) issued before either is judged:
// behind a per-element dtype switch the compiler keeps each element's loads with its compare,
// and the warps wait on memory.
template <bool kVendor, typename U>
__device__ void compare_dense(const DevCompare& c, CompareResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = c.rows * c.cols;
  const int64_t limit = (n + 31) / 32 * 32;
  const U* ob = static_cast<const U*>(c.out) + c.off;
  const U* pb = c.prev != nullptr ? static_cast<const U*>(c.prev) + c.off : nullptr;
  CompareAcc acc;
  // i1 = i0 + stride lies in a whole warp too: stride and limit are multiples of 32.
  for (int64_t i0 = tid; i0 < limit; i0 += 2 * stride) {
    const int64_t i1 = i0 + stride;
    const bool in0 = i0 < n, in1 = i1 < n;
    U o0 = 0, o1 = 0;
    Loaded l0, l1;
    // Two copies of the loads, so that on a first launch the reference's loads do not wait on
    // the output's (the gate depends on the output's bits only on a rerun).
    if (pb != nullptr) {
      U p0 = 0, p1 = 0;
      if (in0) o0 = ob[i0], p0 = pb[i0];
      if (in1) o1 = ob[i1], p1 = pb[i1];
      l0 = gate(in0, true, o0 != p0);
      l1 = gate(in1, true, o1 != p1);
      if (l0.judged) l0.r = c.ref[i0], l0.m = c.mag != nullptr ? c.mag[i0] : 0.0;
      if (l1.judged) l1.r = c.ref[i1], l1.m = c.mag != nullptr ? c.mag[i1] : 0.0;
    } else {
      l0 = gate(in0, false, false);
      l1 = gate(in1, false, false);
      if (in0) o0 = ob[i0], l0.r = c.ref[i0];
      if (in1) o1 = ob[i1], l1.r = c.ref[i1];
      if (c.mag != nullptr) {
        if (in0) l0.m = c.mag[i0];
        if (in1) l1.m = c.mag[i1];
      }
    }
    l0.o = decode_bits(c.out_dtype, o0);
    l1.o = decode_bits(c.out_dtype, o1);
    judge<kVendor>(c, i0, c.off + i0, l0, acc, out);
    judge<kVendor>(c, i1, c.off + i1, l1, acc, out);
  }
  finish_compare<kVendor>(acc, out);
}

// Element idx (at e in the output) where it is judged: its output, reference and magnitude.
__device__ __forceinline__ Loaded load_compared(const DevCompare& c, int es, bool in, int64_t idx, int64_t e) {
  const bool rerun = c.prev != nullptr;
  Loaded l = gate(in, rerun, in && rerun && !same_bits(c.out, c.prev, e, es));
  if (l.judged) {
    l.o = load_elem(c.out_dtype, c.out, e);
    l.r = c.ref[idx];
    l.m = c.mag != nullptr ? c.mag[idx] : 0.0;
  }
  return l;
}

// Every element of the output against its reference, one a step (outputs compare_dense does not
// take: rows apart, or 8- and 1-byte elements). The vendor-relative part is compiled only where
// the vendor's output is read, so the common path keeps its registers.
template <bool kVendor>
__device__ void compare_all(const DevCompare& c, CompareResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = c.rows * c.cols;
  const int64_t limit = (n + 31) / 32 * 32;
  const int es = elem_size_of(c.out_dtype);
  CompareAcc acc;
  DivCursor at(tid, stride, c.cols > 0 ? c.cols : 1);
  for (int64_t idx = tid; idx < limit; idx += stride, at.advance()) {
    const int64_t e = c.off + at.q * c.ld + at.r;
    judge<kVendor>(c, idx, e, load_compared(c, es, idx < n, idx, e), acc, out);
  }
  finish_compare<kVendor>(acc, out);
}

__device__ void check_compare(const DevCompare& c, CompareResult* out) {
  const bool dense = c.ld == c.cols || c.rows <= 1;
  const int es = elem_size_of(c.out_dtype);
  if (dense && (es == 4 || es == 2)) {
    if (c.vendor != nullptr) {
      if (es == 4)
        compare_dense<true, uint32_t>(c, out);
      else
        compare_dense<true, uint16_t>(c, out);
    } else if (es == 4) {
      compare_dense<false, uint32_t>(c, out);
    } else {
      compare_dense<false, uint16_t>(c, out);
    }
    return;
  }
  if (c.vendor != nullptr)
    compare_all<true>(c, out);
  else
    compare_all<false>(c, out);
}

// A metamorphic relation: every element of the transformed launch's output against the original
// launch's related element (harness/relation_core.h).
__device__ void check_relation(const DevCompare& c, CompareResult* out) {
  const DevRelated& r = c.related;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = c.rows * c.cols, cols = c.cols > 0 ? c.cols : 1;
  const int64_t limit = (n + 31) / 32 * 32;
  const double limit2 = c.overflow_mag > 0 ? c.overflow_mag : c.out_max;
  DivCursor at(tid, stride, cols);
  for (int64_t idx = tid; idx < limit; idx += stride, at.advance()) {
    bool broken = false;
    const int64_t l1 = idx < n ? (r.from != nullptr ? r.from[idx] : idx) : -1;
    if (l1 >= 0) {
      const double y1 = load_elem(c.out_dtype, r.first, c.off + l1 / cols * c.ld + l1 % cols);
      const double y2 = load_elem(c.out_dtype, c.out, c.off + at.q * c.ld + at.r);
      const double t1 = device_output_tol(r.ref[l1], r.mag[l1], r.rel_out, r.rel_mag, r.floor, r.limit);
      const double t2 = device_output_tol(c.ref[idx], c.mag[idx], c.rel_out, c.rel_mag, c.floor, limit2);
      broken = relation_element(r.scale != nullptr ? r.scale[idx] : 1.0, r.ref[l1], t1, y1, c.ref[idx], t2, y2,
                                c.out_max)
                   .broken;
    }
    note(broken, idx, &out->relation, &out->relation_first);
  }
}

// Four blocks a multiprocessor (64 registers; 77 unbounded allowed three): the check streams
// memory, and more resident warps keep more loads in flight.
__global__ void __launch_bounds__(256, 4) check_kernel(const CheckParams p, CheckResult* result) {
  const int task = static_cast<int>(blockIdx.y);
  if (task < p.nregions) {
    check_region(p, p.regions[task], &result->regions[task]);
  } else if (task - p.nregions < p.ncompares) {
    const int c = task - p.nregions;
    if (p.compares[c].related.first != nullptr)
      check_relation(p.compares[c], &result->compares[c]);
    else
      check_compare(p.compares[c], &result->compares[c]);
  }
}

}  // namespace

cudaError_t launch_check(const CheckParams& params, CheckResult* result, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(result, 0, sizeof(CheckResult), stream);
  if (e != cudaSuccess) return e;
  const int tasks = params.nregions + params.ncompares;
  if (tasks == 0) return cudaSuccess;
  int64_t largest = 1;
  for (int i = 0; i < params.nregions; ++i)
    largest = std::max(largest, (params.regions[i].byte_end - params.regions[i].byte_begin) / 4);
  for (int i = 0; i < params.ncompares; ++i)
    largest = std::max(largest, params.compares[i].rows * params.compares[i].cols);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((largest + threads - 1) / threads, 1024);
  check_kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(tasks)), threads, 0, stream>>>(params,
                                                                                                          result);
  return cudaGetLastError();
}

}  // namespace assay::gpu
