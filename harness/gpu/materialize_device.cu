// Device materialisation (see materialize_device.h): the generator arithmetic is
// harness/value_core.h, the same code the host expander runs; this file is compiled
// with -fmad=false (CMakeLists.txt) so that no multiply-add is contracted (the normal class's
// cheap evaluation fuses its own, explicitly, and stores only bits it proves to be the exact
// evaluation's: normal_bits). fp16 / bf16 values are rounded by harness/dtype_encode.h, the
// functions store_as runs on the host.
#include "harness/gpu/materialize_device_kernels.h"

#include <algorithm>

#include "harness/dtype_encode.h"
#include "harness/gpu/div_cursor.h"

namespace assay::gpu::detail {
namespace {

// write_output_poison (harness/values.cpp) of fp32, fp16, bf16, e4m3, e5m2, int8 and int32.
constexpr uint32_t kPoisonF32 = 0x7FC0DEADu, kPoisonI32 = 0xDEADBEEFu;  // int32: -0x21524111
constexpr uint16_t kPoisonF16 = 0x7E5Au, kPoisonBF16 = 0x7FDAu;
constexpr uint8_t kPoisonE4M3 = 0xFFu, kPoisonE5M2 = 0xFEu, kPoisonI8 = 0xADu;  // int8: -0x53

// Job blockIdx.y of the batch, grid-stride over its units.
__global__ void fill_batch_kernel(const __grid_constant__ FillBatch b) {
  const FillJob& j = b.job[blockIdx.y];
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = first; i < j.n; i += step) {
    if (j.width == 4)
      static_cast<uint32_t*>(j.dst)[i] = j.pattern;
    else if (j.width == 2)
      static_cast<uint16_t*>(j.dst)[i] = static_cast<uint16_t>(j.pattern);
    else
      static_cast<uint8_t*>(j.dst)[i] = static_cast<uint8_t>(j.pattern);
  }
}

// Job blockIdx.y of the batch, 16 bytes a step: a copy from the snapshot, or the pattern.
__global__ void restore_kernel(const __grid_constant__ RestoreBatch b) {
  const RestoreJob& j = b.job[blockIdx.y];
  auto* dst = static_cast<uint4*>(j.dst);
  const auto* src = static_cast<const uint4*>(j.src);
  const uint4 pattern = make_uint4(j.pattern[0], j.pattern[1], j.pattern[2], j.pattern[3]);
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = first; i < j.n16; i += step) dst[i] = src != nullptr ? __ldcs(src + i) : pattern;
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

// The host's (float)x keeps a quiet NaN's sign and payload (0x7FC00000 here); cvt.rn.f32.f64
// would give the canonical 0x7FFFFFFF.
__device__ float to_float(double x) {
  return isnan(x) ? __int_as_float(0x7FC00000) : __double2float_rn(x);
}

// Job blockIdx.y of the batch: one thread per logical element, grid-stride; `values` false
// writes the poison instead. Its row and column come from a running quotient (div_cursor.h), not
// a division per element. Four blocks a multiprocessor (64 registers) rather than three: the
// series are chains of dependent fp64 operations, and more warps hide more of their latency (the
// exact series drew the 4096^3 inputs 5% faster so).
__global__ void __launch_bounds__(256, 4) draw_batch_kernel(const __grid_constant__ DrawBatch b) {
  const DrawJob& job = b.job[blockIdx.y];
  void* const dst = job.dst;
  const DevView& v = job.v;
  const DevRecipe& r = job.r;
  const uint64_t stream = job.stream_id;
  const bool values = job.values != 0;
  auto* d32 = static_cast<uint32_t*>(dst);
  auto* d16 = static_cast<uint16_t*>(dst);
  auto* d8 = static_cast<uint8_t*>(dst);
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, step = int64_t{gridDim.x} * blockDim.x;
  DivCursor at(first, step, static_cast<int64_t>(v.cols));  // at.q: the global row, at.r: the column
  for (int64_t i = first; i < v.numel; i += step, at.advance()) {
    const int64_t lin = v.row_stride > 0 ? v.offset + at.q * v.row_stride + at.r : linear_of(v, i);
    uint32_t bits = 0;
    if (!values) {
      switch (v.elem) {
        case DevElem::kF32:
        case DevElem::kI32:
          bits = v.elem == DevElem::kF32 ? kPoisonF32 : kPoisonI32;
          break;
        case DevElem::kF16:
        case DevElem::kBF16:
          bits = v.elem == DevElem::kF16 ? kPoisonF16 : kPoisonBF16;
          break;
        default:
          bits = v.elem == DevElem::kE4M3 ? kPoisonE4M3 : v.elem == DevElem::kE5M2 ? kPoisonE5M2 : kPoisonI8;
      }
    } else {
      const value_core::Shape sh{v.rows, v.cols, static_cast<uint64_t>(v.numel), v.has_rows};
      const uint64_t idx = static_cast<uint64_t>(i);
      if (r.cls != value_core::kNormal || !normal_bits(r, stream, idx, v.elem, bits)) {
        const bool hot_class = r.cls == value_core::kOneHot || r.cls == value_core::kPermutation;
        const uint64_t hot = hot_class ? value_core::hot_column(r, sh, stream, static_cast<uint64_t>(at.q)) : 0;
        bits = stored_bits(v.elem, to_float(value_core::base_value(r, sh, stream, idx, hot)));
      }
      double special = 0;
      if (r.injects() && value_core::inject(r, sh, stream, idx, special)) bits = stored_bits(v.elem, to_float(special));
    }
    switch (v.elem) {
      case DevElem::kF32:
      case DevElem::kI32:
        if (!values || v.elem == DevElem::kF32) d32[lin] = bits;
        break;
      case DevElem::kF16:
      case DevElem::kBF16:
        d16[lin] = static_cast<uint16_t>(bits);
        break;
      default:
        d8[lin] = static_cast<uint8_t>(bits);
    }
  }
}

int grid_for(int64_t n) {
  constexpr int64_t kMaxBlocks = 132 * 16;  // grid-stride beyond a few waves
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, kMaxBlocks)));
}

// One launch for a batch: a block row per job, as many blocks across as its largest job needs.
template <typename Batch, typename Units>
cudaError_t launch_batch(void (*kernel)(const Batch), const Batch& b, Units units, cudaStream_t stream) {
  if (b.count <= 0) return cudaSuccess;
  int64_t most = 0;
  for (int i = 0; i < b.count; ++i) most = std::max<int64_t>(most, units(b.job[i]));
  kernel<<<dim3(grid_for(most), b.count), 256, 0, stream>>>(b);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_restore(const RestoreBatch& b, cudaStream_t stream) {
  return launch_batch(
      restore_kernel, b, [](const RestoreJob& j) { return j.n16; }, stream);
}

cudaError_t launch_fills(const FillBatch& b, cudaStream_t stream) {
  return launch_batch(
      fill_batch_kernel, b, [](const FillJob& j) { return j.n; }, stream);
}

cudaError_t launch_draws(const DrawBatch& b, cudaStream_t stream) {
  return launch_batch(
      draw_batch_kernel, b, [](const DrawJob& j) { return j.v.numel; }, stream);
}

}  // namespace assay::gpu::detail
