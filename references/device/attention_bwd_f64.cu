// Compiled with -fmad=false (CMakeLists.txt): the sums must round like the host's. The
// phases are attention_bwd_f64_phases.h's; this file adds only the launches, one thread per
// row, pair or element, in the order each phase needs (one stream: each launch sees the
// previous one's writes).
#include "references/device/attention_bwd_f64.h"

#include <type_traits>

#include "harness/gpu/cuda_check.h"

namespace assay::device_ref {
namespace {

constexpr int kThreads = 256;

enum class Phase { kRow, kPair, kDq, kDkv };

/// Thread e of phase P (attention_bwd_f64_phases.h): query row, (row, key) pair, or output element.
template <Phase P>
__global__ void __launch_bounds__(kThreads) bwd_phase(AttentionBwdF64Problem p, AttentionBwdF64Io io, int64_t n) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= n) return;
  if constexpr (P == Phase::kRow)
    attn_bwd_phase_row(p, io, e);
  else if constexpr (P == Phase::kPair)
    attn_bwd_phase_pair(p, io, e);
  else if constexpr (P == Phase::kDq)
    attn_bwd_phase_dq(p, io, e);
  else
    attn_bwd_phase_dkv(p, io, e);
}

__global__ void __launch_bounds__(kThreads) bwd_prepare(AttentionBwdPrepareIo io, int64_t n) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e < n) attn_bwd_prepare_phase(io, e);
}

/// Blocks for n threads; 0 when n is 0 (no launch).
unsigned blocks(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

constexpr int64_t kMaxThreads = int64_t{kThreads} * 0x7fffffff;

}  // namespace

Status attention_bwd_f64_reference(const AttentionBwdF64Problem& p, const AttentionBwdF64Io& io, cudaStream_t stream) {
  if (p.D < 1 || p.D > kAttentionBwdF64MaxD || p.Sk < 1 || p.Sk > kAttentionBwdF64MaxSk || p.Hkv < 1 ||
      p.H % p.Hkv != 0)
    return invalid_argument("attention_bwd device reference: needs 1 <= D <= 128, 1 <= Sk <= 8192 and Hkv | H");
  const int64_t rows = p.rows(), pairs = p.pairs(), nq = rows * p.D, nk = p.kv_rows() * p.D;
  if (pairs > kMaxThreads || nq > kMaxThreads || nk > kMaxThreads)
    return invalid_argument("attention_bwd device reference: problem too large for one launch");
  auto launch = [&](auto phase, int64_t n) -> Status {
    if (n <= 0) return ok_status();
    bwd_phase<decltype(phase)::value><<<blocks(n), kThreads, 0, stream>>>(p, io, n);
    CUDA_CHECK(cudaGetLastError());
    return ok_status();
  };
  ASSAY_RETURN_IF_ERROR(launch(std::integral_constant<Phase, Phase::kRow>{}, rows));
  ASSAY_RETURN_IF_ERROR(launch(std::integral_constant<Phase, Phase::kPair>{}, pairs));
  ASSAY_RETURN_IF_ERROR(launch(std::integral_constant<Phase, Phase::kDq>{}, nq));
  ASSAY_RETURN_IF_ERROR(launch(std::integral_constant<Phase, Phase::kDkv>{}, nk));
  return ok_status();
}

Status attention_bwd_f64_prepare(const AttentionBwdPrepareIo& io, cudaStream_t stream) {
  const int64_t n = io.rows * io.D;
  if (n <= 0) return ok_status();
  if (n > kMaxThreads) return invalid_argument("attention_bwd device prepare: problem too large for one launch");
  bwd_prepare<<<blocks(n), kThreads, 0, stream>>>(io, n);
  CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace assay::device_ref
