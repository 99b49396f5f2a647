// FAULT mutants for the campaign runner -- planted bugs, not kernels to use.
// Each computes a correct naive GEMM except on cases with k % 7 == its
// trigger, where it fails the way real kernels do in production:
//   fault_trap        (k % 7 == 3): __trap(), an illegal instruction; the
//                     context is lost (cudaErrorLaunchFailure).
//   fault_far_write   (k % 7 == 4): a store 2^40 bytes past C: an illegal
//                     address that poisons the context.
//   fault_spin        (k % 7 == 5): spins forever on a flag nothing sets; only
//                     the watchdog ends it (kind hang).
//   fault_misaligned  (k % 7 == 6): a 16-byte vector load from an address that
//                     is only 4-byte aligned: misaligned address, sticky.
// The campaign must store each as a crash (or hang) failure with its case
// and complete its other cases.
#include <cstdint>

#include "tests/mutants/gemm/mutants.h"

namespace assay::mutants {
namespace {

using kernels::GemmF32Args;

enum class Fault { kTrap, kFarWrite, kSpin, kMisaligned };

__global__ void fault_kernel(GemmF32Args g, Fault fault, bool trigger, volatile int* never_set) {
  const int64_t i = int64_t{blockIdx.y} * blockDim.y + threadIdx.y;
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= g.m || j >= g.n) return;
  if (trigger && i == 0 && j == 0) {
    switch (fault) {
      case Fault::kTrap:
        __trap();
        break;
      case Fault::kFarWrite:
        g.c[int64_t{1} << 38] = 1.0f;
        break;
      case Fault::kSpin:
        while (*never_set == 0) {
        }
        break;
      case Fault::kMisaligned: {
        // A 16-byte vector load from an address = 4 mod 16, whatever C's
        // offset; inline PTX so the compiler cannot split it into scalars.
        const uintptr_t at = (reinterpret_cast<uintptr_t>(g.c) & ~uintptr_t{15}) + 4;
        float x, y, z, w;
        asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(x), "=f"(y), "=f"(z), "=f"(w) : "l"(at));
        if (x + y + z + w == 12345.0f) *never_set = 1;  // keeps the load alive
        break;
      }
    }
  }
  float acc = 0.0f;
  for (int64_t p = 0; p < g.k; ++p) {
    const float av = g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
    const float bv = g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
    acc = fmaf(av, bv, acc);
  }
  float* pc = g.c + i * g.ldc + j;
  *pc = g.beta == 0.0f ? g.alpha * acc : fmaf(g.beta, *pc, g.alpha * acc);
}

int* zero_flag() {
  // A device int that stays 0 for the life of the process.
  static int* flag = [] {
    int* p = nullptr;
    if (cudaMalloc(&p, sizeof(int)) != cudaSuccess) return static_cast<int*>(nullptr);
    cudaMemset(p, 0, sizeof(int));
    cudaDeviceSynchronize();
    return p;
  }();
  return flag;
}

cudaError_t launch(const GemmF32Args& g, cudaStream_t s, Fault fault, int64_t trigger_mod) {
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  const bool trigger = g.k % 7 == trigger_mod;
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((g.n + 31) / 32), static_cast<unsigned>((g.m + 7) / 8));
  fault_kernel<<<grid, block, 0, s>>>(g, fault, trigger, zero_flag());
  return cudaGetLastError();
}

}  // namespace

cudaError_t gemm_f32_fault_trap(const GemmF32Args& g, cudaStream_t s) {
  return launch(g, s, Fault::kTrap, 3);
}
cudaError_t gemm_f32_fault_far_write(const GemmF32Args& g, cudaStream_t s) {
  return launch(g, s, Fault::kFarWrite, 4);
}
cudaError_t gemm_f32_fault_spin(const GemmF32Args& g, cudaStream_t s) {
  return launch(g, s, Fault::kSpin, 5);
}
cudaError_t gemm_f32_fault_misaligned(const GemmF32Args& g, cudaStream_t s) {
  return launch(g, s, Fault::kMisaligned, 6);
}

}  // namespace assay::mutants
