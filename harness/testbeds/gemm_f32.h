// Testbed for fp32 GEMM kernels (C = alpha*op(A)op(B) + beta*C, row-major
// with leading dimensions; kernels/gemm/gemm.h states the conventions). One
// testbed serves every variant and mutant: a spec binds launchers to it.
//
// Per case: inputs are materialised once, the reference (host fp64 for small
// shapes, device fp64 above `kDeviceRefWork`) once, everything uploaded in
// one copy; then each variant is launched twice from the pristine snapshot
// and checked on the GPU (guards, inputs, poison, gaps, bound, NaN/Inf
// pattern, exact tier, determinism); cuBLAS pedantic runs once for the
// vendor column. One small download per case carries every verdict.
//
// Large cases (m*n*max(k,1) > kDeviceRefWork) draw their values on the
// device (harness/gpu/materialize_device.h): same classes and parameters,
// same Philox keys, written straight into the lane's snapshot, so neither a
// host image nor an upload exists for them. The device generator is a port
// of the host one and meant to give the same bits, but is promised only to
// be deterministic: a stored large case replays the same values because the
// host/device choice is a pure function of the case (gemm_inputs_on_device).
//
// Sampling policy (gemm_runs_every_check): for very large cases,
// m*n*max(k,1) > kSampledChecksWork, the determinism rerun (the second,
// bitwise-compared launch) and the cuBLAS vendor column run only on a
// deterministic quarter of the cases (content hash of the case, variant left
// out, % 4 == 0). Every other check runs on every case. Verdicts of
// sampled-out cases say so in Metrics::not_run and carry vendor_max_ratio -1.
// The generator caps cases at 2^31 multiply-adds, so fuzzed cases always get
// every check; kSampledChecksWork only touches hand-made and bench cases.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "harness/bounds.h"
#include "harness/case.h"
#include "harness/spec.h"
#include "harness/status.h"
#include "harness/verdict.h"

namespace assay {

namespace gpu {
class Lane;
}

/// The problem a launcher receives (device pointers into the lane's arena).
struct GemmF32Problem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
};

/// Launches a variant; returns the launch error, never synchronises.
using GemmF32Launch = std::function<cudaError_t(const GemmF32Problem&, cudaStream_t)>;

struct GemmF32Variant {
  VariantInfo info;
  GemmF32Launch launch;
};

/// Adds a variant to the "gemm" op (called from properties/ and tests/mutants/
/// at static-initialisation time); returns true.
bool register_gemm_f32_variant(GemmF32Variant v);
const std::vector<GemmF32Variant>& gemm_f32_variants();

/// Metamorphic relations a GEMM case may name in params.relation. Each is run
/// after the ordinary checks, per variant, as one more launch of the variant:
///   "transpose":    the swapped problem C'^T = op(B)^T op(A)^T + beta C^T (A and B
///                   swap roles, transposes flip, C' is n x m, dense, prefilled
///                   with C^T); C'[j][i] is held against C[i][j];
///   "alpha2":       alpha and the C prefill doubled; C2[i][j] against 2 C[i][j];
///   "permute_rows": rows of op(A) and of C permuted by a permutation seeded from
///                   A's recipe (gemm_relation_permutation); C2[i][j] against
///                   C[perm[i]][j].
/// The exact results of the two problems are related exactly, so element by
/// element |y2 - s*y1| <= |s|*tol1 + tol2 (both ceilings, tol2 that of the
/// related problem); elements whose reference is non-finite or could overflow
/// are left out. A violation is FailureKind::kProperty naming the relation.
inline constexpr const char* kGemmRelations[] = {"transpose", "alpha2", "permute_rows"};

/// Scalars of a GEMM case, read from Case::params and checked against the tensors.
struct GemmParams {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  std::string relation;  ///< one of kGemmRelations, or empty
};

/// The relation rule for one element, whose exact results are r2 = scale*r1:
/// true when |y2 - scale*y1| > |scale|*b1.tol(|r1|, mag1) + b2.tol(|scale*r1|, |scale|*mag1)
/// (a NaN on one side only counts). False when the element is left out: r1 or
/// mag1 non-finite, or mag1 > `top` (overflow possible in either launch).
bool gemm_relation_breaks(double y1, double y2, double r1, double mag1, double scale, const ElementBound& b1,
                          const ElementBound& b2, double top);

/// The "permute_rows" permutation of m rows for a case whose A recipe has seed
/// `seed`: Fisher-Yates on SplitMix64, a pure function of (m, seed).
std::vector<int64_t> gemm_relation_permutation(int64_t m, uint64_t seed);

/// Validates a GEMM case (params and tensors A, B, C agree); one-line errors.
StatusOr<GemmParams> parse_gemm_case(const Case& c);

/// Builds a GEMM case. Leading dimensions are cols + pad; offsets in elements.
/// C's values are ignored when beta == 0 (it is filled with poison).
Case make_gemm_case(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, double alpha, double beta,
                    int64_t pad_a, int64_t pad_b, int64_t pad_c, int64_t off_a, int64_t off_b, int64_t off_c,
                    ValueClass cls, uint64_t seed);

/// Shrink candidates of a GEMM case, most aggressive first: each of m, n, k
/// toward 0, 1, half, minus one; transposes off; pads and offsets to 0;
/// alpha to 1 and beta to 0 or 1; values to small integers, then seed 0.
std::vector<Case> shrink_gemm_case(const Case& c);

/// Same, with a full value recipe per input (A, B, C).
Case make_gemm_case(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, double alpha, double beta,
                    int64_t pad_a, int64_t pad_b, int64_t pad_c, int64_t off_a, int64_t off_b, int64_t off_c,
                    const ValueRecipe& ra, const ValueRecipe& rb, const ValueRecipe& rc);

/// m*n*k above which the fp64 reference runs on the GPU instead of the host.
inline constexpr int64_t kDeviceRefWork = int64_t{1} << 22;
/// True when the case's inputs are drawn on the device and its reference is
/// the device fp64 one: m*n*max(k,1) > kDeviceRefWork. A pure function of the shape.
bool gemm_inputs_on_device(const GemmParams& g);

/// m*n*max(k,1) above which the determinism rerun and the vendor column are
/// sampled (see the policy at the top of this file).
inline constexpr int64_t kSampledChecksWork = int64_t{1} << 32;
/// True when every check, the determinism rerun and the vendor column
/// included, runs on `c`: always at or below kSampledChecksWork, else for a
/// deterministic quarter of the cases (hash of the case without its variant).
bool gemm_runs_every_check(const Case& c);

/// Runs `c` through the named variants (gemm_f32_variants()) on `lane`.
StatusOr<std::vector<Verdict>> run_gemm_f32(const Case& c, const std::vector<std::string>& variants, gpu::Lane& lane);

/// Times an m x m x m fp32 GEMM case for `variant`: the whole checked run with
/// every check (full_run_ms: inputs drawn on the device, device reference, two
/// launches, checks, cuBLAS) and sampled out (sampled_run_ms: one launch, no
/// cuBLAS), input preparation alone (prepare_ms: device generation + device
/// reference), one launch alone and the device fp64 reference alone (CUDA
/// events, median of 3); ratio = full_run_ms / (kernel_ms + reference_ms),
/// ratio_sampled the same for sampled_run_ms. Milliseconds, as JSON.
StatusOr<nlohmann::json> gemm_time_large(const std::string& variant, gpu::Lane& lane, int64_t m = 4096);

/// Element-by-element view of C for triage (one launch of `variant`, cuBLAS once).
StatusOr<Inspection> gemm_inspect(const Case& c, const std::string& variant, gpu::Lane& lane);
/// `c` with m, n or k changed (tensors follow); other knobs kept.
StatusOr<Case> gemm_with_param(const Case& c, const std::string& key, int64_t value);

/// CPU self-check: the fp64 host reference against Boost.Multiprecision on
/// `cases` random small problems; appends a summary line to `report`.
Status gemm_host_self_check(int cases, std::string& report);

}  // namespace assay
