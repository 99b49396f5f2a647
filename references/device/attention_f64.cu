// Compiled with -fmad=false (CMakeLists.txt): the sums must round like the host's.
// The phases and their order are attention_f64_row.h's; this file adds only the
// block layout: phases over j or c strided across the threads, serial phases on
// thread 0, a barrier after each.
#include "references/device/attention_f64.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 128;  // >= kAttentionF64MaxD: thread c owns O's column c
static_assert(kThreads >= kAttentionF64MaxD);

__global__ void __launch_bounds__(kThreads) attention_fwd_f64(AttentionF64Problem p, AttentionF64Io io) {
  extern __shared__ double sh[];
  __shared__ double row_mx, row_Z, row_E, row_PE, row_Dw;
  __shared__ unsigned long long vmax_bits;  // non-negative doubles order like their bits
  __shared__ double rbv[5];                 // the row's AttnRowBound (a __shared__ variable takes no constructor)
  const int tid = static_cast<int>(threadIdx.x);
  const AttnRowCtx x = attn_row_ctx(p, blockIdx.x);
  AttnRowState st;
  st.s = sh, st.P = sh + p.Sk, st.mg = sh + 2 * p.Sk;
  // Every thread carries the row's scalars in its own AttnRowState; a serial phase's results
  // go through shared memory to the others.
  auto load = [&] { st.mx = row_mx, st.Z = row_Z, st.E = row_E, st.PE = row_PE, st.Dw = row_Dw; };
  auto store = [&] { row_mx = st.mx, row_Z = st.Z, row_E = st.E, row_PE = st.PE, row_Dw = st.Dw; };

  for (int64_t j = tid; j < p.Sk; j += kThreads) attn_phase_score(p, io, x, st, j);
  __syncthreads();
  if (tid == 0) {
    attn_phase_max(p, st);
    st.Z = st.E = st.PE = st.Dw = 0;
    store();
    vmax_bits = 0;
  }
  __syncthreads();
  load();
  if (st.mx == -HUGE_VAL) {  // fully masked: every thread leaves here, no barrier follows
    for (int64_t c = tid; c < p.D; c += kThreads) attn_phase_masked(p, io, x, c);
    return;
  }
  for (int64_t j = tid; j < p.Sk; j += kThreads) attn_phase_exp(st, j);
  __syncthreads();
  if (tid == 0) attn_phase_z(p, st), store();
  __syncthreads();
  load();
  for (int64_t j = tid; j < p.Sk; j += kThreads) attn_phase_normalise(st, j);
  __syncthreads();
  if (tid == 0) attn_phase_e(p, x, st), store();
  __syncthreads();
  load();
  for (int64_t j = tid; j < p.Sk; j += kThreads) attn_phase_tol_p(x, st, j);
  __syncthreads();
  if (tid == 0) attn_phase_dw(p, st), store();  // thread 0 reads it back itself below
  ref::AttnOSums a;
  if (tid < p.D) {
    double vmax = 0;
    a = attn_phase_o(p, io, x, st, tid, vmax);
    atomicMax(&vmax_bits, static_cast<unsigned long long>(__double_as_longlong(vmax)));
  }
  __syncthreads();
  if (tid == 0) {
    const ref::AttnRowBound b = attn_phase_row(p, io, x, st, __longlong_as_double(static_cast<long long>(vmax_bits)));
    rbv[0] = b.sb.rel_out, rbv[1] = b.sb.rel_mag, rbv[2] = b.sb.floor, rbv[3] = b.gO, rbv[4] = b.floor;
  }
  __syncthreads();
  if (tid < p.D) {
    ref::AttnRowBound b;
    b.sb.rel_out = rbv[0], b.sb.rel_mag = rbv[1], b.sb.floor = rbv[2], b.gO = rbv[3], b.floor = rbv[4];
    attn_phase_o_out(p, io, x, b, a, tid);
  }
}

__global__ void mask_rows_kernel(float* mask, int64_t rows, int64_t cols, int64_t ld, int64_t every) {
  const int64_t masked = (rows + every - 1) / every;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < masked * cols; e += stride)
    mask[(e / cols) * every * ld + e % cols] = -HUGE_VALF;
}

}  // namespace

Status attention_mask_rows(float* mask, int64_t rows, int64_t cols, int64_t ld, int64_t every, cudaStream_t stream) {
  if (every <= 0 || rows <= 0 || cols <= 0) return ok_status();
  const int64_t n = (rows + every - 1) / every * cols;
  mask_rows_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096)), 256, 0, stream>>>(mask, rows, cols,
                                                                                                       ld, every);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status attention_fwd_f64_reference(const AttentionF64Problem& p, const AttentionF64Io& io, cudaStream_t stream) {
  if (p.D < 1 || p.D > kAttentionF64MaxD || p.Sk < 1 || p.Sk > kAttentionF64MaxSk || p.Hkv < 1 || p.H % p.Hkv != 0)
    return invalid_argument("attention device reference: needs 1 <= D <= 128, 1 <= Sk <= 8192 and Hkv | H");
  const int64_t rows = p.B * p.H * p.Sq;
  if (rows <= 0) return ok_status();
  if (rows > int64_t{0x7fffffff}) return invalid_argument("attention device reference: too many query rows");
  const size_t smem = sizeof(double) * 3 * static_cast<size_t>(p.Sk);
  // The opt-in above 48 KiB is set once per device, for the largest row: set per launch, it
  // raced between lanes (one lane's smaller cap before another's launch), and a threshold on
  // the dynamic size alone missed the kernel's static shared memory (Sk = 2048 is exactly
  // 48 KiB dynamic, and failed with "invalid argument").
  static std::once_flag opted_in[64];
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64) return invalid_argument("attention device reference: device index above 63");
  cudaError_t opt = cudaSuccess;
  std::call_once(opted_in[dev], [&] {
    opt = cudaFuncSetAttribute(attention_fwd_f64, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(sizeof(double) * 3 * kAttentionF64MaxSk));
  });
  if (opt != cudaSuccess)
    return internal_error(std::string("attention device reference: shared memory opt-in: ") + cudaGetErrorString(opt));
  attention_fwd_f64<<<static_cast<unsigned>(rows), kThreads, smem, stream>>>(p, io);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
