// The gradcheck relation's sums on the device, from J u and its error that the device
// reference evaluated beside itself, in its scratch (DeviceReference::properties): the forward
// at u for a forward linear in the operand (conv's backward passes), central differences of
// the fp64 forward otherwise (attention_bwd, references/device/attention_fd_f64.h). The
// relation (properties/gradcheck_relation.h) compares
//   sum_i v_i (J u)_i   against   sum_l u_l g_l
// within a tolerance built from |v| . err, |u| . tol and the two contractions' absolute sums.
// Those six sums are all it needs, so on the device path they are reduced where the data
// lies and only they come back: neither the snapshot, the kernel's gradient nor the
// reference crosses to the host. The reduction has a fixed shape (per-block partials, then
// one block over them in order), so a case gives the same sums on every run; any order of
// an fp64 sum stays inside gamma_{n+m}(2^-53) of the absolute sums, the term the tolerance
// carries for the host's own sequential sums.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "harness/status.h"
#include "references/device/input_rows.h"

namespace assay {

/// The sums one projection check compares, from the host or the device.
struct GradSums {
  double fd_val = 0, fd_abs = 0, fd_err = 0;  ///< sum v (J u), sum |v (J u)|, sum |v| err
  double kern = 0, kern_abs = 0, ceil = 0;    ///< sum u g, sum |u g|, sum |u| tol
  int64_t n = 0, m = 0;                       ///< gradient elements, forward outputs
  /// A non-finite gradient, tolerance, upstream element, J u or its error: the relation
  /// skips the case (the element checks own it).
  bool skip = false;
};

namespace device_ref {

/// One differentiated operand on the device. The gradient g (the kernel's first launch) as rows x
/// cols of an InputRows; the direction per element, dense (u.at(r cols + c)); the tolerance per
/// element from the reference's DeviceOutput form: rel_out |ref| + rel_mag mag + floor, +Inf
/// where that is NaN or mag (1 + rel_mag) + floor reaches `limit` (the engine's
/// read_device_refs rule), plus |ref - exact| where `exact` is given (a declared deviation of
/// the spec's gradient from the exact J^T v, dense).
struct GradTermIn {
  InputRows grad;
  int64_t rows = 0, cols = 0;
  InputRows u;
  const double* ref = nullptr;
  const double* mag = nullptr;
  double rel_out = 0, rel_mag = 1, floor = 0, limit = HUGE_VAL;
  const double* exact = nullptr;
};

/// What the relation reads on the device: the operands (in the order the direction packs them),
/// the upstream v as up_rows x up_cols, J u and its error per forward output, dense.
struct GradSumsIn {
  static constexpr int kMaxTerms = 3;
  GradTermIn terms[kMaxTerms];
  int n_terms = 0;
  InputRows upstream;
  int64_t up_rows = 0, up_cols = 0;
  const double* jvp = nullptr;
  const double* err = nullptr;  ///< m = up_rows x up_cols each
};

/// Device scratch the reduction needs (partial sums per block), in bytes.
int64_t grad_sums_scratch();

/// The sums of `in` into *out: two launches on `stream`, then a wait for the 8 words that come
/// back. `scratch`: grad_sums_scratch() bytes of device memory.
Status grad_sums(const GradSumsIn& in, unsigned char* scratch, GradSums* out, cudaStream_t stream);

}  // namespace device_ref
}  // namespace assay
