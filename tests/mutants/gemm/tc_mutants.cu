// MUTANTS gemm_tc -- planted bugs, not kernels to use. Each instantiates a kernel of
// kernels/gemm/gemm_tc.cuh with one fault switch of tc::NoFault turned on.
//
// mma_bf16_acc: accumulator rounded to bf16 (8 bits) after every k-tile: a relative error up to
//   2^-9 per tile against a ceiling of ~(4k + 2) 2^-24 mag. Exposed by any k >= 1 with data whose
//   partial sums are not bf16-representable; caught by kBound (kExact on small integers past 256).
// wmma_f16_acc: the same with fp16 (11 bits) in the wmma kernel; near-overflow data also overflow
//   to Inf (kNanInf). Caught by kBound / kNanInf / kExact.
// mma_no_wait: no cp.async.wait_group before the barrier: a stage is read while its 16-byte
//   copies may be in flight (stale or uninitialised shared memory). Exposed only where an operand
//   takes the cp.async path (16-byte aligned pointer and leading dimension, chunks inside the
//   operand: offset 0, pad 0 or 8, k or m/n multiples of 8); caught by kBound / kExact / kNanInf
//   or kNondeterministic (a race: not every launch shows it, the campaign runs many).
// mma_ldmatrix_row: in the second k16 step of the first m16 tile the A fragment is loaded from
//   row r ^ 1 (untransposed A: rows of op(A) swapped in pairs; transposed A: k pairs swapped).
//   Exposed by k > 16 with m > 1 or distinct k values; caught by kBound / kExact.
// mma_k_tail / wmma_k_tail: the elements of the last k-tile past k are not zero-filled: they keep
//   what the stage held before (the tile kStages (mma) or one (wmma) iterations earlier, or
//   uninitialised shared memory), and those products join every sum. Exposed by k % 32 != 0
//   (and, in the mma kernel, elements on the scalar path); caught by kBound / kExact / kNanInf.
// wmma_missing_sync: no __syncthreads between the mma of a k-tile and the next tile's loads: a
//   fast warp overwrites the tile another warp still reads. Exposed by k > 32 (a race, not every
//   launch); caught by kBound / kExact / kNondeterministic.
// mma_beta0_reads_c: beta*C added also when beta == 0: 0 * NaN = NaN reaches D where C is the
//   NaN prefill; caught by kNanInf.
#include "kernels/gemm/gemm_tc.cuh"
#include "tests/mutants/gemm/tc_mutants.h"

namespace assay::mutants::tc {
namespace {

using kernels::tc::NoFault;

struct Bf16Acc : NoFault {
  static constexpr bool kRoundAccBf16 = true;
};
struct F16Acc : NoFault {
  static constexpr bool kRoundAccF16 = true;
};
struct NoWait : NoFault {
  static constexpr bool kNoCpAsyncWait = true;
};
struct LdmatrixRow : NoFault {
  static constexpr bool kSwapLdmatrixRow = true;
};
struct KTail : NoFault {
  static constexpr bool kNoKTailFill = true;
};
struct MissingSync : NoFault {
  static constexpr bool kNoSyncAfterCompute = true;
};
struct Beta0ReadsC : NoFault {
  static constexpr bool kBeta0ReadsC = true;
};

}  // namespace

cudaError_t gemm_tc_mma_bf16_acc(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_mma<Bf16Acc>(a, s);
}
cudaError_t gemm_tc_wmma_f16_acc(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_wmma<F16Acc>(a, s);
}
cudaError_t gemm_tc_mma_no_wait(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_mma<NoWait>(a, s);
}
cudaError_t gemm_tc_mma_ldmatrix_row(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_mma<LdmatrixRow>(a, s);
}
cudaError_t gemm_tc_mma_k_tail(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_mma<KTail>(a, s);
}
cudaError_t gemm_tc_wmma_k_tail(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_wmma<KTail>(a, s);
}
cudaError_t gemm_tc_wmma_missing_sync(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_wmma<MissingSync>(a, s);
}
cudaError_t gemm_tc_mma_beta0_reads_c(const GemmTcArgs& a, cudaStream_t s) {
  return kernels::tc::launch_mma<Beta0ReadsC>(a, s);
}

}  // namespace assay::mutants::tc
