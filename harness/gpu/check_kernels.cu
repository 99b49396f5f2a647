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
__device__ void check_bytes_equal(const unsigned char* a, const unsigned char* s, int64_t bytes, RegionResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(s)) & 15) == 0;
  const int64_t quads = aligned ? bytes / 16 : 0;
  const int64_t qlimit = (quads + 31) / 32 * 32;  // whole warps stay in the loop for the ballot
  for (int64_t q = tid; q < qlimit; q += stride) {
    unsigned hits = 0;
    int64_t first = 0;
    if (q < quads) {
      const uint4 x = __ldcs(reinterpret_cast<const uint4*>(a) + q), y = __ldcs(reinterpret_cast<const uint4*>(s) + q);
      const bool d0 = x.x != y.x, d1 = x.y != y.y, d2 = x.z != y.z, d3 = x.w != y.w;
      hits = d0 + d1 + d2 + d3;
      first = 4 * q + (d0 ? 0 : d1 ? 1 : d2 ? 2 : 3);
    }
    note_count(hits, first, &out->changed, &out->changed_first);
  }
  const int64_t words = bytes / 4, w0 = quads * 4;
  const int64_t limit = w0 + (words - w0 + 31) / 32 * 32;
  for (int64_t w = w0 + tid; w < limit; w += stride) {
    const bool hit = w < words && reinterpret_cast<const unsigned*>(a)[w] != reinterpret_cast<const unsigned*>(s)[w];
    note(hit, w, &out->changed, &out->changed_first);
  }
}

__device__ void check_region(const CheckParams& p, const DevRegion& r, RegionResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned char* a = p.arena + r.byte_begin;
  const unsigned char* s = p.snapshot + r.byte_begin;
  if (r.kind == DevRegion::kBytesEqual) {
    check_bytes_equal(a, s, r.byte_end - r.byte_begin, out);
    return;
  }
  const int64_t n = (r.byte_end - r.byte_begin) / r.elem_size;
  const int64_t limit = (n + 31) / 32 * 32;
  // Element e = q*ld + c of the allocation against the view's start off = off_q*ld + off_c.
  const int64_t ld = r.ld > 0 ? r.ld : 1, off_q = r.off / ld, off_c = r.off % ld;
  DivCursor at(tid, stride, ld);
  for (int64_t e = tid; e < limit; e += stride, at.advance()) {
    bool covered = false, same = true;
    if (e < n) {
      if (r.mask != nullptr) {
        covered = r.mask[e] != 0;
      } else if (r.ld > 0) {
        const bool borrow = at.r < off_c;
        const int64_t row = at.q - off_q - (borrow ? 1 : 0), col = at.r - off_c + (borrow ? ld : 0);
        covered = row >= 0 && row < r.rows && col < r.cols;
      }
      same = same_bits(a, s, e, r.elem_size);
    }
    note(e < n && covered && same && r.check_unwritten, e, &out->unwritten, &out->unwritten_first);
    note(e < n && !covered && !same, e, &out->changed, &out->changed_first);
  }
}

// bounds.h vendor_floor on the device: one ulp of the output at |r| plus half its smallest subnormal.
__device__ double vendor_floor_dev(const DevCompare& c, double r) {
  if (c.vr_bits == 0) return 1.0;
  double ax = fmin(fabs(r), c.vr_max);
  const double ulp = ax < c.vr_min_normal ? c.vr_min_sub : ldexp(1.0, ilogb(ax) - c.vr_bits + 1);
  return ulp + 0.5 * c.vr_min_sub;
}

__device__ void check_compare(const DevCompare& c, CompareResult* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = c.rows * c.cols;
  const int64_t limit = (n + 31) / 32 * 32;
  const int es = elem_size_of(c.out_dtype);
  unsigned long long worst = 0, vworst = 0, kmax = 0, vmax = 0;
  double max_abs = 0;
  DivCursor at(tid, stride, c.cols > 0 ? c.cols : 1);
  for (int64_t idx = tid; idx < limit; idx += stride, at.advance()) {
    bool bad_bound = false, bad_naninf = false, bad_exact = false, bad_det = false, over = false;
    const int64_t e = c.off + at.q * c.ld + at.r;
    if (idx < n && c.prev != nullptr) bad_det = !same_bits(c.out, c.prev, e, es);
    // The rerun's element with the first launch's bits: every test below is a function of them
    // and already ran on them, so the reference and bound stay unread (half the rerun's bytes).
    if (idx < n && (c.prev == nullptr || bad_det)) {
      const double o = load_elem(c.out_dtype, c.out, e);
      const double r = c.ref[idx];
      const double m = c.mag != nullptr ? c.mag[idx] : 0.0;
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
          max_abs = fmax(max_abs, err);
          const float ratio = static_cast<float>(tol > 0 ? err / tol : (err > 0 ? INFINITY : 0.0));
          const unsigned long long key = (static_cast<unsigned long long>(__float_as_uint(ratio)) << 32) |
                                         (~static_cast<unsigned>(idx) & 0xffffffffull);
          if (key > worst) worst = key;
          // The vendor-relative ratio: errors as fractions of the element's tolerance, so that an
          // element whose reference cancels (a large bound, few significant bits) weighs what its
          // bound says rather than its ulp count; the vendor's error counts at least one ulp.
          if (c.vendor != nullptr && isfinite(tol) && tol > 0) {
            const double v = load_elem(c.out_dtype, c.vendor, e);
            if (isfinite(v)) {
              const double f = vendor_floor_dev(c, r);
              const double a = err / tol, b = fmax(fabs(v - r), f) / tol, q = a / b;
              over = q > c.vr_alpha;
              const unsigned long long low = ~static_cast<unsigned>(idx) & 0xffffffffull;
              vworst = max(vworst, (static_cast<unsigned long long>(__float_as_uint(static_cast<float>(q))) << 32) | low);
              kmax = max(kmax, (static_cast<unsigned long long>(__float_as_uint(static_cast<float>(a))) << 32) | low);
              vmax = max(vmax, static_cast<unsigned long long>(__float_as_uint(static_cast<float>(b))));
            }
          }
        }
      }
    }
    note(bad_bound, idx, &out->bound, &out->bound_first);
    note(bad_naninf, idx, &out->naninf, &out->naninf_first);
    note(bad_exact, idx, &out->exact, &out->exact_first);
    note(bad_det, idx, &out->nondet, &out->nondet_first);
    note(over, idx, &out->vrel_over, &out->vrel_over_first);
  }
  // Non-negative floats and doubles order like their bit patterns.
  for (int o = 16; o > 0; o >>= 1) {
    worst = max(worst, __shfl_xor_sync(0xffffffffu, worst, o));
    vworst = max(vworst, __shfl_xor_sync(0xffffffffu, vworst, o));
    kmax = max(kmax, __shfl_xor_sync(0xffffffffu, kmax, o));
    vmax = max(vmax, __shfl_xor_sync(0xffffffffu, vmax, o));
    max_abs = fmax(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, o));
  }
  if ((threadIdx.x & 31) == 0) {
    if (worst != 0) atomicMax(&out->worst_key, worst);
    if (vworst != 0) atomicMax(&out->vrel_key, vworst);
    if (kmax != 0) atomicMax(&out->vrel_kernel, kmax);
    if (vmax != 0) atomicMax(&out->vrel_vendor, vmax);
    if (max_abs > 0) atomicMax(&out->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(max_abs)));
  }
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
