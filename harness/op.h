// The op model: one declarative entry per op (OpDef) and per kernel variant
// (VariantDef with its Contract). assay's own specs under properties/, outside
// C++ projects through find_package(assay), and the Python package all go
// through register_op / add_variant; the engine derives generation,
// validation, shrinking, contract checks, probing and triage from these
// declarations alone.
//
//   OpDef op;
//   op.name = "softmax";
//   op.params = {Param::size("rows", 1, 4096), Param::size("n", 1, 16384).aim({32, 128, 1024}),
//                Param::dtype("dtype", {DType::kF32, DType::kF16, DType::kBF16})};
//   op.tensors = {{.name = "X", .dims = {"rows", "n"}}, {.name = "Y", .role = Role::kOut, .dims = {"rows", "n"}}};
//   op.reference = ...; op.bound = ...;
//   register_op(std::move(op));
//   add_variant("softmax", {.name = "mine", .launch = ..., .contract = Contract().multiple_of("n", 32)});
//
// A case outside a variant's contract is "not applicable" for it, never a
// failure; the generator draws inside the contract by construction, and
// `assay fuzz --probe-contract` steps just outside each rule on purpose.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/dtype.h"
#include "harness/status.h"
#include "harness/values.h"
#include "harness/verdict.h"

namespace assay {

// ---- parameters ------------------------------------------------------------------------------

/// Read access to a case's params (a JSON object) with defaults; the model has already
/// type-checked every declared param before any op code sees it.
class Params {
 public:
  explicit Params(const nlohmann::json& j) : j_(j) {}
  bool has(const std::string& k) const { return j_.contains(k); }
  int64_t i(const std::string& k, int64_t dflt = 0) const;
  double r(const std::string& k, double dflt = 0) const;
  bool b(const std::string& k, bool dflt = false) const;
  std::string s(const std::string& k, const std::string& dflt = "") const;
  DType dt(const std::string& k, DType dflt = DType::kF32) const;
  /// Whether the variant under check declared convention `name` (the engine puts the
  /// variant's conventions in params.conventions; OpDef::conventions lists the op's).
  bool convention(const std::string& name) const;
  const nlohmann::json& json() const { return j_; }

 private:
  const nlohmann::json& j_;
};

enum class ParamKind : uint8_t { kInt, kReal, kBool, kChoice, kDType };

/// One typed parameter of an op. Ints are drawn edge-biased inside [lo, hi] (and inside
/// every contract rule), aiming at `edges` and their neighbours; other kinds pick one of
/// their values by weight, the first value being the simplest (shrinking goes there).
struct ParamDef {
  std::string name;
  ParamKind kind = ParamKind::kInt;
  int64_t lo = 0, hi = 0;                                ///< kInt: inclusive range
  bool size = false;                                     ///< kInt: an extent, capped by --max-dim
  std::function<int64_t(const Params&)> hi_of;           ///< kInt: tighter cap from earlier params (element budget)
  std::vector<int64_t> edges;                            ///< kInt: values the generator aims at (tile widths)
  int64_t step = 1;                                      ///< kInt: only multiples of step (an even extent)
  std::vector<nlohmann::json> values;                    ///< kReal / kBool / kChoice / kDType: simplest first;
                                                         ///< kInt (among): the values drawn, by weight, inside the range
  std::vector<size_t> weights;                           ///< per value (empty: uniform)
  std::function<bool(const Params&)> when;               ///< present only where this holds (earlier params)
  int absent_weight = 0;                                 ///< > 0: optional, absent with this weight against 1 present
  std::string tie;                                       ///< kInt: an earlier int param this one often equals
  size_t tie_weight = 0, free_weight = 1;                ///< equal to `tie` with tie_weight against free_weight
  std::string doc;

  static ParamDef integer(std::string name, int64_t lo, int64_t hi);
  /// An extent (tensor dimension): kInt, capped by the campaign's --max-dim.
  static ParamDef extent(std::string name, int64_t lo, int64_t hi);
  static ParamDef real(std::string name, std::vector<double> values);
  static ParamDef flag(std::string name);
  static ParamDef choice(std::string name, std::vector<std::string> values);
  static ParamDef dtype(std::string name, std::vector<DType> values);
  ParamDef& aim(std::vector<int64_t> e) { edges = std::move(e); return *this; }
  ParamDef& multiple_of(int64_t s) { step = s; return *this; }
  /// kInt: draw one of these values (by .weigh(...), inside the range, the cap and the
  /// contract) instead of edge-biased extents; validation and shrinking keep the whole range.
  ParamDef& among(std::vector<int64_t> v) {
    values.assign(v.begin(), v.end());
    return *this;
  }
  ParamDef& cap(std::function<int64_t(const Params&)> f) { hi_of = std::move(f); return *this; }
  /// kInt: equal to the earlier int param `other` in `equal` of `equal + free` draws, where
  /// its range, cap and the contract allow (square problems: Sk = Sq); drawn freely otherwise.
  ParamDef& often_equal(std::string other, size_t equal, size_t free) {
    tie = std::move(other), tie_weight = equal, free_weight = free;
    return *this;
  }
  ParamDef& weigh(std::vector<size_t> w) { weights = std::move(w); return *this; }
  ParamDef& only_when(std::function<bool(const Params&)> f) { when = std::move(f); return *this; }
  ParamDef& optional(int absent = 3) { absent_weight = absent; return *this; }
  ParamDef& describe(std::string d) { doc = std::move(d); return *this; }
};

// ---- tensors ------------------------------------------------------------------------------------

/// How a tensor's values are drawn (see harness/generators.h gen_value_recipe).
struct ValueSpec {
  std::vector<ValueClass> classes;  ///< empty: every class that suits activations
  uint8_t specials = 0;             ///< OR of kSpecial*: NaN / Inf injection allowed
  int inject_percent = 15;
  double int_hi = 0;                ///< > 0 for integer tensors: values in [0, int_hi), with int_hi_param overriding
  std::string int_hi_param;         ///< integer tensors: the param giving the exclusive upper bound (e.g. "vocab")
  double max_abs = 0;               ///< > 0: class parameters keep the values below this magnitude (as a narrow
                                    ///< dtype's range does: scales, integer ranges, log-uniform exponents)
};

/// One tensor: rank-N, its extents named by params (or integer literals), its dtype a
/// dtype param or a fixed dtype name. Each tensor draws its own row padding and offset.
struct TensorDef {
  std::string name;
  Role role = Role::kIn;
  std::vector<std::string> dims;  ///< param names or integer literals, outermost first; empty: a scalar [1]
  /// Instead of dims: extents computed from the params (an output extent such as a
  /// convolution's (H + 2 pad - dil (R - 1) - 1) / stride + 1, a layout-dependent order).
  std::function<std::vector<int64_t>(const Params&)> shape;
  std::string dtype = "dtype";    ///< a kDType param, or a dtype name ("fp32", "i32")
  ValueSpec values;
  bool padded = true;             ///< may draw a padded row stride and an offset
  /// A flag param: where it is true, the two innermost dims are swapped (a tensor stored
  /// transposed, e.g. GEMM's A with trans_a: dims {"m", "k"} become [k, m]).
  std::string transposed_by;
};

// ---- host and device views ------------------------------------------------------------------------

/// A tensor as rows x cols, row stride ld (elements): rank 1 is 1 x n; rank >= 3 folds the
/// outer dims into rows (they are laid out densely over the padded rows).
struct View2D {
  int64_t rows = 0, cols = 0, ld = 0;
};
View2D view_of(const TensorDesc& d);

/// A tensor handed to a launcher: pointer at element [0, ..., 0], shape and strides (elements).
struct DevTensor {
  void* ptr = nullptr;
  DType dtype = DType::kF32;
  View2D v;
  std::vector<int64_t> shape, strides;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

/// A tensor decoded to double: element (i, j) at data[i * ld + j].
struct HostTensor {
  const double* data = nullptr;
  View2D v;
  double at(int64_t i, int64_t j) const { return data[i * v.ld + j]; }
};

/// The expected value of one output, dense rows x cols: `ref` from the reference, `tol` (the
/// hard ceiling; +Inf: unchecked, as the op documents) from the bound, `exact` for the exact
/// tier (bitwise comparison). `aux` carries per-element magnitudes from the reference to the
/// bound (e.g. sum |a||b|), so the bound need not recompute them.
struct OutputRef {
  std::vector<double> ref, tol;
  std::vector<double> expected;  ///< optional: the bound's expected (typical) level, for triage and detection studies
  std::vector<std::vector<double>> aux;
  bool exact = false;
  /// For a variant that accumulates into this output (Contract::accumulates) term by term in
  /// place (atomics): per element the number of terms k and the sum m of their magnitudes. The
  /// running value, prefill included, is rounded k times, so the engine adds gamma_k (|prefill|
  /// + m). Empty: the kernel adds its finished result to the prefill once.
  std::vector<int64_t> acc_terms;
  std::vector<double> acc_mag;
};

// ---- the kernel's declared arithmetic ---------------------------------------------------------------

/// What a variant's build does to the arithmetic the bound assumes. The defaults are IEEE
/// round-to-nearest with the CUDA libm accuracy of the CUDA C Programming Guide's table.
struct Arithmetic {
  bool fast_math = false;  ///< --use_fast_math: __expf, __logf, __tanhf, __fdividef (intrinsic table)
  bool ftz = false;        ///< subnormal inputs and results flushed to zero
  std::map<std::string, int64_t> tiles;  ///< tile sizes the error analysis depends on ("kv_tile" = 64)
  /// fp16/bf16 data: an intermediate is rounded to the storage type (the output's) before the
  /// operation that consumes it. What it means is the op's bound's to say: a GEMM rounds
  /// alpha*op(A)op(B) before adding beta*C (GemmBoundModel::product_to_out, as cuBLAS does for
  /// bf16/fp16 outputs); softmax rounds its exponentials before the sum and the division
  /// (narrow_softmax_tol, as cuDNN's fp16/bf16 softmax does). An op whose bound has no such
  /// model leaves it unused.
  bool narrow_intermediates = false;
  bool operator==(const Arithmetic&) const = default;
  int64_t tile(const std::string& k, int64_t dflt) const {
    auto it = tiles.find(k);
    return it == tiles.end() ? dflt : it->second;
  }
  std::string describe() const;
};

// ---- contracts -----------------------------------------------------------------------------------------

/// One rule of a contract; `text()` names it in one line ("n % 32 == 0").
struct Rule {
  enum class Kind : uint8_t { kMultiple, kMin, kMax, kEqual, kOneOf, kContiguous, kAligned };
  Kind kind = Kind::kMin;
  std::string param, other;          ///< param (and the other param of kEqual)
  int64_t value = 0;                 ///< multiple, bound or alignment in bytes
  std::vector<nlohmann::json> allowed;  ///< kOneOf
  std::string text() const;
};

/// What a kernel supports and how it behaves. Built fluently:
///   Contract().dtypes({DType::kF32}).multiple_of("m", 64).min("k", 8).aligned(16).reads_c_when_beta0()
class Contract {
 public:
  Contract& multiple_of(const std::string& p, int64_t m);
  Contract& min(const std::string& p, int64_t v);
  Contract& max(const std::string& p, int64_t v);
  Contract& equal(const std::string& p, const std::string& q);
  /// A param restricted to these values (choices, flags, reals, ints).
  Contract& only(const std::string& p, std::vector<nlohmann::json> values);
  Contract& dtypes(std::vector<DType> d, const std::string& param = "dtype");
  /// Every tensor dense: no padded rows, no offset.
  Contract& contiguous();
  /// Every tensor's first element and row stride a multiple of `bytes`.
  Contract& aligned(int64_t bytes);
  /// The kernel switches configuration at these values of `p` (a size-dependent tile
  /// choice): the generator aims at both sides of each.
  Contract& switches_at(const std::string& p, std::vector<int64_t> at);
  /// The kernel adds its result into `tensor` (+=) instead of overwriting it: the tensor
  /// is prefilled from its recipe and the expectation is prefill + reference.
  Contract& accumulates(const std::string& tensor);
  /// The kernel writes `tensor` only where `written(params, i, j)` holds (a triangle, a
  /// block); elsewhere the output must keep its poison (no element checked there).
  Contract& writes_only(const std::string& tensor, std::function<bool(const Params&, int64_t, int64_t)> written,
                        std::string what);
  /// A convention the op defines (OpDef::conventions), e.g. "reads_c_when_beta0".
  Contract& convention(const std::string& name);
  Contract& reads_c_when_beta0() { return convention("reads_c_when_beta0"); }
  Contract& fast_math() { arith_.fast_math = true; arith_.ftz = true; return *this; }
  Contract& ftz() { arith_.ftz = true; return *this; }
  Contract& tile(const std::string& name, int64_t v) { arith_.tiles[name] = v; return *this; }
  /// fp16/bf16: an intermediate rounded to the storage type (Arithmetic::narrow_intermediates).
  Contract& narrow_intermediates() { arith_.narrow_intermediates = true; return *this; }

  const std::vector<Rule>& rules() const { return rules_; }
  const std::map<std::string, std::vector<int64_t>>& switches() const { return switches_; }
  const std::vector<std::string>& accumulated() const { return accumulates_; }
  const std::vector<std::string>& conventions() const { return conventions_; }
  const Arithmetic& arithmetic() const { return arith_; }
  struct Partial {
    std::string tensor, what;
    std::function<bool(const Params&, int64_t, int64_t)> written;
  };
  const std::vector<Partial>& partial() const { return partial_; }
  bool has_convention(const std::string& n) const;
  bool empty() const;
  /// Every rule and convention, one per line, for `assay list`.
  std::vector<std::string> describe() const;

 private:
  std::vector<Rule> rules_;
  std::map<std::string, std::vector<int64_t>> switches_;
  std::vector<std::string> accumulates_, conventions_;
  std::vector<Partial> partial_;
  Arithmetic arith_;
};

/// The first rule of `contract` that case `c` breaks, as a line; nullopt inside.
std::optional<std::string> outside_contract(const Contract& contract, const Case& c);

// ---- ops and variants -------------------------------------------------------------------------------------

/// A launcher: runs the kernel on the case's tensors (in OpDef order) on `stream`. A
/// non-success return on a case inside the contract is a launch-error failure; outside it
/// (probing), a clean rejection.
using Launch = std::function<cudaError_t(const Params&, const std::vector<DevTensor>&, cudaStream_t)>;

struct VariantDef {
  std::string name;
  std::string description;
  Launch launch;
  Contract contract;
  bool deterministic = true;  ///< false: a second launch may differ bitwise (atomics)
  bool mutant = false;        ///< a planted bug (tests/mutants): fuzzed only when named
  /// The op's vendor library (OpDef::vendor) bound as a variant by register_op: fuzzed only
  /// when named, judged under its declared contract like any kernel.
  bool vendor = false;
  std::string source;         ///< kernel source, relative to its project (hashed by the build)
};

using HostFn = std::function<Status(const Case&, const std::vector<HostTensor>&, std::vector<OutputRef>&)>;
using BoundFn =
    std::function<Status(const Case&, const Arithmetic&, const std::vector<HostTensor>&, std::vector<OutputRef>&)>;

/// One output of a device reference (OpDef::device_reference): dense rows x cols fp64
/// buffers the engine owns. `ref` receives the reference; `mag` a per-element magnitude
/// such that the hard ceiling is tol = rel_out * |ref| + rel_mag * mag + floor (fill
/// `mag` with the tolerance itself and leave rel_out = 0, rel_mag = 1, floor = 0 for a
/// bound computed outright). Elements whose mag reaches `overflow_mag` may overflow in the
/// kernel: Inf/NaN there is accepted (finite outputs are still held to the bound).
struct DeviceOutput {
  double* ref = nullptr;
  double* mag = nullptr;
  int64_t rows = 0, cols = 0;
  double rel_out = 0, rel_mag = 1, floor = 0;
  double overflow_mag = INFINITY;
  bool exact = false;  ///< the exact tier: bitwise comparison
  /// Optional: the bound's expected level as the same affine form (NaN: none), for triage.
  double expected_rel_out = NAN, expected_rel_mag = NAN, expected_floor = NAN;
};

/// What a device reference may use: the lane's stream, its cuBLAS handle (a
/// cublasHandle_t) and `scratch_bytes` of device scratch (DeviceReference::scratch).
struct DeviceContext {
  cudaStream_t stream = nullptr;
  void* cublas = nullptr;
  unsigned char* scratch = nullptr;
  int64_t scratch_bytes = 0;
};

/// An fp64 reference computed on the device, for cases where the host reference would make
/// the CPU the bottleneck. For a case where `when` holds, the engine draws the inputs
/// straight into device memory (materialize_device.h: fp32, fp16, bf16 tensors, see each
/// DevTensor's dtype; the host path's values, only determinism is promised), skips the host
/// reference, bound and OpDef::prepare (`prepare` stands in for it), and calls `compute` with
/// the inputs (DevTensors on the pristine snapshot, in OpDef order; outputs hold their poison)
/// and one DeviceOutput per output. A metamorphic relation's transform runs on host copies of
/// the prepared snapshot, and `compute` again on the transformed inputs. A variant with an
/// accumulated (Contract::accumulates) or partially written (Contract::writes_only) output takes
/// the host path.
/// What a device reference's properties hook reads, all in device memory (DeviceReference::properties).
struct DevicePropertiesIn {
  std::vector<DevTensor> inputs;    ///< the pristine snapshot, in OpDef order (outputs hold their poison)
  std::vector<DevTensor> outputs;   ///< the kernel's first launch, one per output
  /// The reference's outputs as compute left them (aux included), each overflow_mag resolved to
  /// the limit the element check uses (never 0: the output dtype's largest finite value there).
  std::vector<DeviceOutput> refs;
};

struct DeviceReference {
  std::function<bool(const Params&)> when;
  std::function<int64_t(const Case&)> scratch;  ///< device scratch bytes (null: none)
  /// Optional: what OpDef::prepare does to the host images, done to the drawn snapshot on the
  /// device (inputs as compute gets them), once per draw and before compute: every launch
  /// restores from the prepared snapshot, a relation's transform reads it back, and compute may
  /// run more than once on it (the transformed inputs, `assay bench`'s timing), so compute
  /// itself must leave the inputs as they are. It may leave results in the scratch for compute.
  std::function<Status(const Case&, const std::vector<DevTensor>&, const DeviceContext&)> prepare;
  std::function<Status(const Case&, const Arithmetic&, const std::vector<DevTensor>&, std::vector<DeviceOutput>&,
                       const DeviceContext&)>
      compute;
  /// Optional: the op's properties of a relation case on this path, evaluated on the device from
  /// what compute left in its scratch (the same DeviceContext). Where set it replaces
  /// OpDef::properties here: the engine copies neither the snapshot, the outputs nor the
  /// references back for them (conv's gradcheck: six sums come back, properties/conv.cpp).
  std::function<Status(const Case&, const DevicePropertiesIn&, const DeviceContext&, std::vector<Failure>&)>
      properties;
  std::string name = "device-f64";
};

/// The vendor library's implementation of the op (cuBLAS for GEMM, cuDNN for softmax and
/// convolution). The engine runs it once per distinct setup, on the same inputs as the variants,
/// and holds it to the same reference and bound: its worst error/bound is
/// Metrics::vendor_max_ratio, the elements where it breaks the bound (or the NaN/Inf pattern)
/// Metrics::vendor_violations, a disagreement that points at the reference or the bound rather
/// than at the variant. Its output is kept, and every variant's output is compared with it
/// element by element on the device, each error as a fraction of the element's bound tol:
///   ratio = max |out - ref| / tol  over  max max(|vendor - ref|, vendor_floor(|ref|)) / tol
/// (Metrics::vendor_rel_ratio; the element-wise |out - ref| / max(|vendor - ref|, floor) of
/// harness/bounds.h is Metrics::vendor_rel_worst). A passing case whose ratio exceeds
/// `warn_ratio` carries an accuracy warning (Metrics::accuracy_warning), never a failure.
struct VendorDef {
  std::string name;  ///< "cublas-pedantic"
  Launch launch;     ///< runs on the setup of the variants it is compared with
  /// Instead of `launch`: a launcher whose error says why the library cannot take this case
  /// (a layout, a dtype, a cuDNN without the feature); the column then says "not run: <why>".
  std::function<Status(const Params&, const std::vector<DevTensor>&, cudaStream_t)> run;
  /// The outputs the library computes (names); empty: every output. Others get no vendor column.
  std::vector<std::string> outputs;
  /// Accuracy warning above this vendor-relative ratio (4: the detection study's alpha).
  double warn_ratio = 4;
  /// What the library does, declared as a kernel's contract is: its arithmetic (an exp it does
  /// not document is fast-math; fp16/bf16 intermediates), the conventions it follows (BLAS's
  /// alpha = 0) and what it takes. register_op also binds the library as a variant of the op
  /// under `name` (VariantDef::vendor), so that `assay fuzz OP --variant NAME` holds it to the
  /// op's ceiling under this contract: a correct library outside it is a false alarm of the
  /// bound. The column's own disagreement count (Metrics::vendor_violations) is kept only on
  /// setups whose arithmetic and conventions are the vendor's: under another variant's they
  /// judge the library by a contract it never made.
  Contract contract;
  bool deterministic = true;  ///< false: its determinism rerun may differ (atomics, split reductions)
  bool defined() const { return static_cast<bool>(launch) || static_cast<bool>(run); }
  /// True where the library computes output `tensor` (`outputs` empty: every output).
  bool computes(const std::string& tensor) const {
    return defined() && (outputs.empty() || std::find(outputs.begin(), outputs.end(), tensor) != outputs.end());
  }
};

/// Where an element of a metamorphic launch's output comes from in the original launch.
struct RelatedElement {
  int64_t from_i = 0, from_j = 0;
  double scale = 1;
};
/// Where element (i, j) of output o of the transformed launch comes from in the original one
/// (`from` arrives as {i, j, 1}); false: the element is not related (skipped).
using RelateElement = std::function<bool(size_t o, int64_t i, int64_t j, RelatedElement& from)>;


struct OpDef {
  std::string name;
  std::string description;
  std::vector<ParamDef> params;
  std::vector<TensorDef> tensors;
  /// Conventions a variant may declare (name -> what it means); the op's hooks read them
  /// from the case's "conventions" param, which the engine sets per variant.
  std::map<std::string, std::string> conventions;
  /// Cross-param checks the declarations cannot express (one line naming the rule).
  std::function<Status(const Params&)> check;
  /// Edits input host images after materialisation (mask rows, place indices): a pure
  /// function of the case. images[t] is tensor t's allocation in its dtype.
  std::function<void(const Case&, std::vector<unsigned char*>& images)> prepare;
  /// fp64 reference of every output (kOut and kInOut, in order): fills ref (and aux);
  /// kInOut tensors arrive holding their prefill.
  HostFn reference;
  /// The hard ceiling of every output under the variant's declared arithmetic: fills tol
  /// (and exact). May be empty only if `reference` fills tol itself. An accumulated output
  /// (Contract::accumulates) is zero-filled for `reference` but holds its prefill here, for
  /// a bound whose kernel rounds the prefill along with the sum; the engine then adds one
  /// rounding of prefill + result.
  BoundFn bound;
  std::string bound_name = "ceiling";
  /// Host-side properties of the outputs for case param "relation" (appends kProperty).
  std::function<void(const Case&, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                     const std::vector<OutputRef>&, std::vector<Failure>&)>
      properties;
  /// Metamorphic transform of the inputs for case param "relation"; false: none.
  std::function<bool(const Case&, std::vector<unsigned char*>& images)> transform;
  /// How the transformed launch's outputs correspond to the original ones (moved, scaled): the
  /// per-element map of one case, built once per case (the relation's compare runs it on every
  /// output element, so it reads no params itself).
  std::function<RelateElement(const Case&)> relate;
  /// CPU self-check of the host reference (no GPU); appends lines to `report`.
  std::function<Status(std::string& report)> self_check;
  std::string backward;  ///< the backward op's name, if any

  // ---- optional hooks (empty: not used) ----
  /// A kInOut tensor that the kernel must not read for this case (BLAS: C when beta == 0
  /// unless the variant declares "reads_c_when_beta0"): it is laid out and poisoned like an
  /// output (a NaN that must neither reach the result nor survive: unwritten elements are
  /// reported), and the reference sees the poison. Params carry the variant's conventions.
  std::function<bool(const Params&, const std::string& tensor)> overwrites;
  /// Called by the generator after every param and input recipe is drawn (in rc::gen::exec:
  /// it may draw with *rc::gen::...), where values and params must agree (GEMM's exact
  /// tier: integer inputs with integer scalars). recipes: kIn and kInOut tensors, in order.
  std::function<void(nlohmann::json& params, std::vector<ValueRecipe>& recipes)> couple;
  /// fp64 reference on the device above a work threshold (see DeviceReference).
  DeviceReference device_reference;
  /// The vendor column (see VendorDef); Metrics::vendor_max_ratio and vendor_rel_ratio stay -1
  /// without one.
  VendorDef vendor;
  /// False for a case whose determinism rerun and vendor column are sampled out (a pure
  /// function of the case, for very large hand-made cases); null: every check everywhere.
  std::function<bool(const Case&)> every_check;
  /// Params of the large case `assay bench` times (OpSpec::time_large); null: none.
  nlohmann::json large;
};

/// Registers an op; an error if the name is taken or the declaration is inconsistent
/// (a tensor naming an unknown param, a dtype param of the wrong kind).
Status register_op(OpDef op);
/// Adds a kernel variant to a registered op; an error if the op is unknown, the name is
/// taken, or the contract names an unknown param, tensor or convention.
Status add_variant(const std::string& op, VariantDef v);

/// For static registration: records `s` if it is an error (a broken declaration); the
/// CLI reports every recorded error on start-up and exits 2 before any campaign runs.
bool registered(const Status& s, const char* what);
/// Errors recorded by registered(), and variants added to an op nobody registered.
std::vector<std::string> registration_errors();

}  // namespace assay

#define ASSAY_OP_CONCAT2_(a, b) a##b
#define ASSAY_OP_CONCAT1_(a, b) ASSAY_OP_CONCAT2_(a, b)
/// In a spec file: ASSAY_REGISTER(register_op(make_softmax()));
#define ASSAY_REGISTER(expr)                                                              \
  [[maybe_unused]] static const bool ASSAY_OP_CONCAT1_(assay_registered_, __LINE__) = \
      ::assay::registered((expr), #expr)
