// assay false-alarm (bound models measured, not assumed): a campaign that fuzzes
// the vendor GEMMs (cuBLAS fp32 pedantic, tf32, fp16, bf16; cuBLASLt fp8 e4m3
// and e5m2 with and without fast accumulation and with per-tensor scales;
// int8 -> int32) against the host fp64 reference (references/host/gemm.h) on
// the same rounded inputs, and judges every element with the HARD CEILING of
// harness/bounds.h under the bound model of its configuration. A correct vendor
// library must never exceed a ceiling: one that does is a false alarm of the
// bound model, whose derivation is then wrong (fix the derivation, never
// loosen a number). The expected level is reported beside it (exceedances are
// warnings, not failures).
//
// Split so that everything but the vendor call is host code and CPU-testable:
// cases (pure data, a function of seed and index), their bound models, the
// batch layout, the reference, the element judge, the per (config, value
// class) table and its Markdown / JSON; the vendor runs behind FaBackend (the
// GPU one here, an emulated one in tests/harness/false_alarm_test.cpp).
//
// A campaign of many small GEMMs is bound by whatever the host does per input element, so
// neither the inputs nor the fp64 reference are made on the host: the backend draws each
// batch's inputs where the vendor reads them (false_alarm_values.h, the functions the host
// runs, compiled for both, so the same bytes) and computes ref and mag there
// (references/device/gemm_f64_batch.h: the host reference's order, so the same bits). The
// host draws the inputs of a sample of the cases itself, computes their reference and stops
// the campaign if the two disagree: a device input or reference that differs from the host's
// cannot go unnoticed. Campaigns shard over several backends (one per GPU), each taking case
// indices from one shared counter, and merge their tables, which do not depend on the number
// of shards, threads or batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bounds.h"
#include "harness/dtype.h"
#include "harness/status.h"
#include "harness/tensor.h"
#include "harness/values.h"
#include "properties/studies/false_alarm_values.h"
#include "references/device/gemm_f64_batch_core.h"

namespace assay {

enum class FaLibrary : uint8_t { kCublas, kCublasLt };

/// The layouts a configuration's cases are drawn from: the library's documented requirements
/// for that path (cases outside them would only be declined, and fuzz nothing). Row-major
/// terms: our m and n are cuBLAS's n and m (C^T = B^T A^T, see references/library/cublas_gemm.h).
/// All multiples are in elements; 1 everywhere is "any layout".
struct FaLayoutRule {
  bool tn = false;                          ///< trans_a = false, trans_b = true (the library's "TN")
  int64_t m = 1, n = 1, k = 1;              ///< extents: multiples
  int64_t ld_a = 1, ld_b = 1, ld_c = 1;     ///< leading dimensions: multiples
  int64_t ptr_a = 1, ptr_b = 1, ptr_c = 1;  ///< offsets from a 256-byte base and batch strides: multiples
  std::string_view source;                  ///< the documented requirement these numbers implement
};

/// One vendor GEMM configuration and the bound model it is judged by.
struct FaConfig {
  std::string_view name;
  FaLibrary library = FaLibrary::kCublas;
  DType a = DType::kF32, b = DType::kF32;  ///< row-major A and B (kTF32: fp32 storage of tf32 values)
  DType out = DType::kF32;                 ///< C and D
  bool fast_accum = false;                 ///< fp8: CUBLASLT_MATMUL_DESC_FAST_ACCUM
  bool scaled = false;                     ///< fp8: random per-tensor scales (powers of two and not)
  bool batched = false;                    ///< strided batches
  FaLayoutRule layout;                     ///< the layouts its cases are drawn from
  // The bound model (see fa_ceiling_model):
  DType acc = DType::kF32;
  Accumulation accumulation = Accumulation::kRoundNearest;
  int64_t block = 1;
  int block_bits = 0;
  int64_t expected_promote_every = 0;  ///< promotion interval of the expected level only (0: none)
  std::string_view model_note;         ///< where the model's numbers come from
};

/// Every configuration, in report order.
std::span<const FaConfig> fa_configs();
/// The layout rule in words ("TN; k % 16, n % 4, ...; pointers 16-byte aligned"), for the report.
std::string fa_layout_text(const FaConfig& cfg);
/// Index into fa_configs() by name; -1 if absent.
int find_fa_config(std::string_view name);

/// Value classes of A and B (C, when read, is normal or small-int).
enum class FaClass : uint8_t {
  kNormal,        ///< N(0,1)
  kUniform,       ///< U(-1,1)
  kSameSign,      ///< U(0,1): no cancellation; 1 case in 10 has k = max_k (e.g. 8192)
  kLogUniform,    ///< |x| = 2^U[e0,e1) within the dtype's normal range, random sign
  kSubnormal,     ///< nonzero subnormals of the dtype
  kNearOverflow,  ///< |x| within a factor 4 of the dtype's largest finite value
  kSmallInt,      ///< integers: the exact tier where gemm_exact_tier_holds says so
  kNanInf,        ///< N(0,1) with NaN, +-Inf and -0 injected
};
inline constexpr int kFaClasses = 8;
std::string_view fa_class_name(FaClass c);

/// One campaign case: pure data; the inputs are materialised from the recipes.
struct FaCase {
  int64_t index = 0;  ///< campaign case index
  int config = 0;     ///< into fa_configs()
  FaClass cls = FaClass::kNormal;
  int64_t m = 1, n = 1, k = 1, batch = 1;
  bool trans_a = false, trans_b = false;
  int64_t lda = 1, ldb = 1, ldc = 1;                 ///< row-major leading dimensions (elements)
  int64_t off_a = 0, off_b = 0, off_c = 0;           ///< elements from a 256-byte aligned base
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  ///< batch strides (elements)
  double alpha = 1, beta = 0;                        ///< exactly representable in the scale type
  double scale_a = 1, scale_b = 1;                   ///< fp8 dequantisation scales (fp32 values), else 1
  ValueRecipe ra, rb, rc;                            ///< A, B, C (read only when beta != 0): see fa_value
  const FaConfig& cfg() const { return fa_configs()[static_cast<size_t>(config)]; }
};

/// Stored views, [batch, rows, cols] with strides [stride, ld, 1] and the element offset:
/// A is m x k (k x m transposed), B is k x n (n x k transposed), C is m x n.
TensorDesc fa_desc_a(const FaCase& c);
TensorDesc fa_desc_b(const FaCase& c);
TensorDesc fa_desc_c(const FaCase& c);

/// Test hooks that plant an error the campaign must report.
enum class FaPlant : uint8_t {
  kNone,
  kPerturb,        ///< host side, after the vendor: one element per case moved by 4 ceilings
  kF16Accumulate,  ///< GPU backend: fp16-output cuBLAS configs run CUBLAS_COMPUTE_16F (fp32 promised)
  kDeviceInputs,   ///< GPU backend: A drawn on the device from another key than the host's
};

struct FaOptions {
  uint64_t seed = 1;
  bool seed_rotated = false;  ///< the seed was drawn from the clock (fa_rotating_seed), not given
  int64_t cases = 120000;
  /// Wall-clock budget (0: none): past it no new case is taken, the cases already taken are
  /// finished and the report is written with the count that ran. A SIGINT/SIGTERM (the stop
  /// handlers of harness/interrupt.h) stops the same way.
  double max_seconds = 0;
  int64_t first_case = 0;                    ///< run case indices [first_case, first_case + cases)
  int64_t max_k = 8192;                      ///< largest reduction length
  int64_t max_mn = 64;                       ///< largest m and n
  std::vector<std::string> configs;          ///< names; empty: all. Cases go round-robin over these.
  int threads = 0;                           ///< host threads (sampled references, judge); 0: all cores (split between shards)
  int64_t check_every = 64;  ///< with a device reference: cases whose index is a multiple also get the host's (0: none)
  int64_t batch_bytes = int64_t{256} << 20;  ///< device image per batch (inputs and outputs)
  int64_t batch_cases = 2048;                ///< most cases per batch
  int max_print = 20;                        ///< failure lines printed (all go to the JSON, up to 1000)
  FaPlant plant = FaPlant::kNone;
  bool quiet = false;  ///< no progress or failure lines on stdout
};

/// A fresh seed from the clock (and the process id), below 2^53 so that JSON readers keep it
/// exact: what `--seed rotate` (and no --seed) runs, so that repeated runs cover new cases.
uint64_t fa_rotating_seed();

/// Config indices selected by `o.configs` (all when empty); an unknown name is an error.
StatusOr<std::vector<int>> fa_select(const FaOptions& o);

/// The case with campaign index `index`: a pure function of (o.seed, index, the config
/// that index % configs.size() selects, o.max_k, o.max_mn).
FaCase fa_make_case(const FaOptions& o, const std::vector<int>& configs, int64_t index);

/// The hard ceiling's model: the config's accumulation, k, |alpha|, fp8 scales, output; a
/// truncating block may split k in any way (any_split). fa_expected_model: the same with
/// the config's expected promotion interval and no split.
GemmBoundModel fa_ceiling_model(const FaCase& c);
GemmBoundModel fa_expected_model(const FaCase& c);
/// ceiling from fa_ceiling_model, expected from fa_expected_model (capped by the ceiling).
BoundPair fa_bounds(const FaCase& c);
/// Compared bit for bit: int8 always; small-int when gemm_exact_tier_holds (for the
/// model of each input type) says every partial sum is exact.
bool fa_exact(const FaCase& c);
/// mag at or above which a correct kernel's intermediates may overflow (+Inf for integer
/// accumulation): the smaller of
///  - the accumulator's range, seen through |alpha| and the scales, and
///  - the largest finite value of the OUTPUT type (mag already holds |alpha|, the scales and
///    |beta||C|), as the device check (harness/gpu/check_kernels.cu, check_compare) has it.
/// The second is measured behaviour, not an assumption: cuBLASLt's fp16-output path
/// (lt_fp16_out_fp16, cuBLASLt 13.1 on an H200) returned -Inf where the exact result was
/// +250368 (past fp16's 65504) with mag 2.0e13: an intermediate (a split-K partial or the
/// epilogue's alpha * acc) is held in the output type and overflowed with its own sign, even
/// with CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE requested. So wherever mag can pass the
/// output's range, a correct library may return Inf of either sign or NaN.
double fa_overflow_limit(const FaCase& c);

/// One element against the reference (the rules of harness/gpu/check_kernels.cu's compare):
/// where ref is NaN the output must be NaN; where ref is +-Inf, the same Inf (or NaN in the
/// overflow zone); a NaN or Inf (either sign) output where ref is finite only in the overflow
/// zone (mag past min(overflow_limit, out_max)), an Inf also where |ref| + ceiling passes
/// out_max with ref's sign.
struct FaJudgement {
  bool compared = false;        ///< finite output and reference, error measured
  bool above_ceiling = false;   ///< error > ceiling
  bool above_expected = false;  ///< error > expected level
  bool naninf = false;          ///< NaN/Inf pattern differs
  bool not_exact = false;       ///< exact tier: output != reference
  double err = 0, ceiling = 0, ratio = 0, ratio_expected = 0;
};
FaJudgement fa_judge(double out, double ref, double mag, const BoundPair& b, bool exact, double out_max,
                     double overflow_limit);

/// Counts of one (config, value class).
struct FaRow {
  int64_t cases = 0;    ///< cases run
  int64_t not_run = 0;  ///< the library declined (no algorithm / unsupported)
  int64_t exact_cases = 0;
  int64_t elements = 0;  ///< output elements judged
  int64_t compared = 0;  ///< of which finite on both sides (error measured)
  int64_t ceiling_failures = 0, naninf_failures = 0, exact_failures = 0, gap_writes = 0;
  int64_t expected_exceedances = 0;
  double max_ratio = 0;           ///< max error / ceiling
  double max_ratio_expected = 0;  ///< max error / expected level
  int64_t worst_case = -1;        ///< case index of max_ratio
  int64_t failures() const { return ceiling_failures + naninf_failures + exact_failures + gap_writes; }
  void merge(const FaRow& o);
};

/// One failing element, enough to find and replay it.
struct FaFailure {
  std::string kind;  ///< "ceiling", "naninf", "exact", "gap"
  FaCase c;
  int64_t batch = 0, i = 0, j = 0;  ///< element (gap: linear index in C's allocation)
  double value = 0, ref = 0, mag = 0, bound = 0;
};

/// The table: rows[config * kFaClasses + class].
struct FaTable {
  std::vector<FaRow> rows = std::vector<FaRow>(fa_configs().size() * kFaClasses);
  FaRow& at(int config, FaClass c) { return rows[static_cast<size_t>(config) * kFaClasses + static_cast<size_t>(c)]; }
  const FaRow& at(int config, FaClass c) const {
    return rows[static_cast<size_t>(config) * kFaClasses + static_cast<size_t>(c)];
  }
  FaRow config_total(int config) const;
  FaRow total() const;
  void merge(const FaTable& o);
};

/// Seconds per phase of a campaign or of one shard (host phases: wall of the shard's host
/// thread, inputs being the batch layout and buffers, reference the sampled cases' inputs and
/// references; inputs_device, reference_device and vendor: device time from events where the
/// backend has them, else vendor is the wall of launch; launch: the host enqueuing a batch's
/// device work). A report sums its shards'.
struct FaPhaseSeconds {
  double seconds_inputs = 0, seconds_inputs_device = 0, seconds_reference = 0, seconds_reference_device = 0,
         seconds_vendor = 0, seconds_judge = 0, seconds_wait = 0, seconds_launch = 0;
  void add(const FaPhaseSeconds& o);
  nlohmann::json json() const;  ///< {"inputs": ..., "inputs_device": ..., ...}
};

/// One shard of a campaign (one backend, one GPU): its share and its times.
struct FaShard : FaPhaseSeconds {
  std::string device;
  int64_t cases = 0;  ///< cases it ran (the library declined none of them)
  double seconds = 0;
  bool device_reference = false;  ///< ref and mag from the device; the host computed a sample
};

/// The host reference against the device's, on the sampled cases (FaOptions::check_every).
struct FaRefCheck {
  int64_t cases = 0, elements = 0;
  int64_t identical = 0;  ///< elements whose ref and mag are the same bits (NaN: both NaN)
  double max_diff = 0;    ///< max |ref_dev - ref_host| / (2^-53 mag), finite elements
};

struct FaReport : FaPhaseSeconds {
  FaTable table;
  std::vector<FaFailure> failures;          ///< sorted by case index, at most 1000
  std::vector<std::string> not_run_reason;  ///< per config: the first reason a case did not run
  std::vector<int64_t> not_run_case;        ///< per config: that case's index (-1: none)
  std::vector<int> configs;                 ///< the selected configs
  int64_t cases = 0, planted = 0;
  double seconds = 0;  ///< wall; the phases (FaPhaseSeconds) are summed over the shards
  std::string device;
  /// Why the run stopped before `cases` ("" when it ran them all): the time budget or a signal.
  std::string stopped;
  std::vector<FaShard> shards;
  FaRefCheck ref_check;
  /// Folds a shard's report in (tables, failures, first not-run reasons by case index, times).
  void merge(const FaReport& o);
};

/// "ceiling config=... class=... case=... m= n= k= ... element=(b,i,j) value= ref= mag= bound= ratio=
/// replay: assay false-alarm --seed S --first-case I --cases 1 --configs NAME".
std::string fa_failure_line(const FaFailure& f, const FaOptions& o);
std::string fa_markdown(const FaReport& r, const FaOptions& o);
nlohmann::json fa_json(const FaReport& r, const FaOptions& o);

// ---- the batch image and the vendor -------------------------------------------------------------

/// Byte offsets of one case in a batch image [inputs | outputs] (each region 256-aligned;
/// the views' element offsets are inside). The two fp8 scales (one fp32 each) have a
/// 256-byte slot each: cuBLASLt is given no scale pointer less aligned than its matrices.
struct FaSlot {
  size_t a = 0, b = 0, scale_a = 0, scale_b = 0, c = 0;
};

struct FaBatch {
  std::vector<FaCase> cases;
  std::vector<FaSlot> slots;
  size_t out_begin = 0;  ///< outputs (C of every case) are [out_begin, bytes)
  size_t bytes = 0;
  std::vector<uint64_t> ref_at;  ///< per case: its first element in ref and mag (batch * m * n elements)
  size_t ref_elements = 0;
  int slot = 0;                     ///< buffer slot, 0 or 1: two batches are in flight, each in its own buffers
  unsigned char* result = nullptr;  ///< host, bytes - out_begin: the outputs after the run
  double* ref = nullptr;            ///< host, ref_elements: the device reference (device_reference() only)
  double* mag = nullptr;
  std::vector<Status> status;  ///< per case: ok, or why the library declined it
  /// Device seconds of drawing the inputs, of the reference and of the vendor calls, measured
  /// by the backend (-1: not).
  double device_seconds_inputs = -1, device_seconds_reference = -1, device_seconds_vendor = -1;
};

/// Lays out `cases` (fills slots, out_begin, bytes, ref_at, ref_elements).
void fa_layout(FaBatch& batch);

/// Whether the campaign's generator (false_alarm_values.h) draws recipe r: every class but
/// Pareto, mean-spread, one-hot and permutation, no tile injection. fa_make_case draws only
/// such recipes, so every case can be drawn on the device.
bool fa_gen_supports(const ValueRecipe& r);
/// r expanded for fa_gen_value over a tensor of `numel` elements of `t`, stream `stream`.
FaGen fa_gen(const ValueRecipe& r, DType t, uint64_t stream, uint64_t numel);
/// Case i's image as regions (false_alarm_values.h), appended to `regions`: A, B, scale_a,
/// scale_b (fp32 constants), C; each the gap canary of harness/values.h around the view, and
/// in it fa_value() rounded to the dtype (as store_as rounds), the scale, or (C where
/// beta == 0) the output poison. An error for a recipe fa_gen_supports declines.
Status fa_case_regions(const FaBatch& batch, size_t i, std::vector<FaRegion>& regions);
/// Every case's regions, in case order (what a device backend draws the batch from).
Status fa_batch_regions(const FaBatch& batch, std::vector<FaRegion>& regions);
/// Writes case i's regions into `image` (a buffer of batch.bytes laid out by fa_layout) on the
/// host, element by element with fa_region_element: the bytes a device backend writes.
Status fa_materialize(const FaBatch& batch, size_t i, unsigned char* image);

/// The value (before rounding to `t`) of logical element `index` (row-major over the view's
/// [batch, rows, cols]) of stream `stream` (A 1, B 2, C 3) under `r`, for a tensor of `numel`
/// elements. The campaign's own expansion of a recipe: the classes and parameters of
/// harness/values.h (kNormal, kUniform, kSameSign, kSmallInt, kLogUniform, kNearOverflow,
/// kSubnormal, kSignedZero, kNaN, and kAtFirst / kAtLast / rate injection), with the same
/// distributions but cheaper arithmetic than recipe_value (splitmix64 counters instead of
/// Philox; Box-Muller from one hash per pair of elements, log, sin, cos and 2^x as
/// fixed polynomials): a pure function of its arguments, only IEEE basic operations and
/// sqrt (false_alarm_values.h, shared with the device). Classes fa_gen_supports declines
/// fall back to recipe_value (host only; the campaign never draws them).
double fa_value(const ValueRecipe& r, DType t, uint64_t stream, uint64_t numel, uint64_t index);

/// The batch's cases as problems of the batched fp64 reference (references/device/
/// gemm_f64_batch.h), byte offsets into the batch image (fa_layout), ref and mag at
/// batch.ref_at; and their 16 x 16 output tiles. A device backend launches these; tests run
/// them on the host.
void fa_device_problems(const FaBatch& batch, std::vector<device_ref::F64GemmProblem>& problems,
                        std::vector<device_ref::F64GemmTile>& tiles);

/// The host reference (ref_h, mag_h) and the device's (ref_d, mag_d) of one element of a
/// case with reduction length k: both NaN, the same Inf, or (finite) within the fp64
/// summation error of two evaluation orders, 2 gamma_{k+4}(2^-53) mag [Higham (3.5)]; on the
/// exact tier (integers, every partial sum exact) equal.
bool fa_reference_agrees(double ref_d, double mag_d, double ref_h, double mag_h, int64_t k, bool exact);

/// ref and mag of one batch entry, exactly as ref::gemm_reference computes them (the same
/// operations in the same order per element, so bit for bit), four columns at a time: A is
/// m x k and Bt n x k (k contiguous), C m x n (read when beta != 0).
void fa_reference(int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* bt, double beta,
                  const double* c, double* ref, double* mag);

/// Runs the vendor on a batch.
class FaBackend {
 public:
  virtual ~FaBackend() = default;
  /// Host buffers of slot batch.slot (pinned for a GPU), kept until that slot is reserved
  /// again: batch.result (batch.bytes - out_begin) and, with device_reference(), batch.ref and
  /// batch.mag (batch.ref_elements doubles each).
  virtual Status reserve(FaBatch& batch) = 0;
  /// Runs every case of the batch: draws the batch image (fa_batch_regions; the bytes
  /// fa_materialize writes) in its own memory, runs the library on it, writes batch.result
  /// (the image's output part, as the library left it), sets batch.status[i] to kUnavailable
  /// or kInvalidArgument where the library declined a case. Another error stops the campaign.
  /// With device_reference(), also writes batch.ref and batch.mag (fa_device_problems).
  virtual Status run(FaBatch& batch) = 0;
  /// run() in two halves, so that the host lays out the next batch and judges the one before
  /// meanwhile: launch may return before the work is done (at most one batch per slot in
  /// flight); wait finishes it.
  virtual Status launch(FaBatch& batch) { return run(batch); }
  virtual Status wait(FaBatch& /*batch*/) { return ok_status(); }
  /// Whether run / launch compute ref and mag (the host then computes a sample only).
  virtual bool device_reference() const { return false; }
  virtual std::string describe() const = 0;
};

/// cuBLAS / cuBLASLt on `device`, one stream, one device image reused across batches, drawn
/// on the device; with `device_reference`, the fp64 reference on the device too (before the
/// vendor overwrites C).
StatusOr<std::unique_ptr<FaBackend>> make_fa_gpu_backend(int device, FaPlant plant, bool device_reference = true);

/// Draws `batch` (laid out by fa_layout) on GPU `device` with the backend's kernel and returns
/// the whole image (batch.bytes, zero where no region lies): for tests, against fa_materialize.
StatusOr<std::vector<unsigned char>> fa_draw_on_device(const FaBatch& batch, int device);

/// The campaign: batches of cases, drawn and run by the backend; the host's fp64 references
/// (all, or a sample with a device reference) on a pool of host threads while the backend
/// runs the batch; then the judge. Returns
/// the report (also for failures); an error only for an infrastructure failure, among them a
/// device reference that disagrees with the host's.
StatusOr<FaReport> run_false_alarm(const FaOptions& o, FaBackend& backend);

/// The same campaign over several backends (shards), one host thread each with o.threads /
/// shards pool threads: they take case indices from one counter, and their reports merge
/// into one whose table does not depend on the number of shards.
StatusOr<FaReport> run_false_alarm(const FaOptions& o, std::span<FaBackend* const> backends);

/// "all" (every GPU), "N" (the first N) or a list "0,2,3" against `present` GPUs.
StatusOr<std::vector<int>> fa_parse_devices(std::string_view spec, int present);

/// Runs the campaign on GPUs `devices` (one shard each) and writes false-alarm.md /
/// false-alarm.json under `out_dir` (if not empty).
StatusOr<FaReport> false_alarm(const FaOptions& o, const std::vector<int>& devices, const std::string& out_dir,
                               bool device_reference = true);

}  // namespace assay
