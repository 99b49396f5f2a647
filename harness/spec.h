// OpSpec: what properties/<op>.cpp provides to the harness. Specs register
// themselves at static-initialisation time (they are linked as an OBJECT
// library, so the linker keeps them); adding an op touches no harness file.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "harness/case.h"
#include "harness/status.h"
#include "harness/verdict.h"

namespace assay {

namespace gpu {
class Lane;
}
class Contract;
struct Probe;

struct VariantInfo {
  std::string name;
  std::string description;
  bool mutant = false;        ///< a planted bug (tests/mutants): fuzzed only when named
  bool deterministic = true;  ///< false: the determinism rerun is not a failure
  std::string source;         ///< kernel source file, relative to the project (its hash goes in corpus entries)
};

/// SHA-256 of a kernel source recorded at build time ("" if unknown).
const char* source_hash(const char* path);

/// Per-run knobs a lane carries to the testbed.
struct RunOptions {
  bool probe = false;  ///< run variants on cases outside their contracts (--probe-contract)
  int repeat = 1;  ///< launches of each variant before the checked pair (>= 1): a kernel that degrades after N calls
};

/// Knobs every generator honours.
struct GenConfig {
  int64_t max_dim = 2048;  ///< largest extent of any dimension (inclusive)
  /// The variant whose contract the generator draws inside (empty: the op's whole domain).
  std::string target;
};

/// One output of a case, element by element, for triage: the variant's
/// values, the fp64 reference, the per-element bound, the vendor library's
/// values, and which elements were never written.
struct Inspection {
  std::string tensor;
  int64_t rows = 0, cols = 0;
  std::vector<double> out, ref, tol, vendor;  ///< rows*cols each (vendor may be empty)
  std::vector<double> tol_expected;           ///< the bound's expected level, rows*cols (may be empty)
  bool exact_tier = false;                    ///< the case is in the exact tier: out must equal ref bitwise
  std::vector<uint8_t> unwritten;             ///< rows*cols, or empty
  std::vector<uint8_t> touches_special;       ///< rows*cols, or empty: 1 where a NaN/Inf input feeds the element
  std::string reference;                      ///< "host-f64" / "device-f64"
  /// The inputs that feed element (i, j), one line (e.g. a row of A and a column of B).
  std::function<std::string(int64_t, int64_t)> inputs;
};

class OpSpec {
 public:
  virtual ~OpSpec() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual std::vector<VariantInfo> variants() const = 0;
  /// Shrinkable generator of valid cases (variant left empty).
  virtual rc::Gen<Case> generator(const GenConfig& config) const = 0;
  /// Checks that a case (e.g. read from a corpus file) is well-formed for
  /// this op; one-line error naming the field.
  virtual Status validate(const Case& c) const = 0;
  /// Runs `c` through each named variant on `lane`: one verdict per variant.
  /// A non-ok Status is an infrastructure failure (the case itself may be fine).
  virtual StatusOr<std::vector<Verdict>> run(const Case& c, const std::vector<std::string>& variants,
                                             gpu::Lane& lane) const = 0;
  /// Simpler cases than `c`, most aggressive first (smaller shapes, simpler
  /// layouts, simpler scalars and values). The campaign keeps the first that
  /// still fails and asks again, so a stored case is locally minimal. Works on
  /// the case data alone: no generator, no RapidCheck state.
  virtual std::vector<Case> shrink(const Case& c) const = 0;
  /// CPU-only self-check of this op's host references (no GPU); appends
  /// human-readable lines to `report`.
  virtual Status self_check(std::string& report) const = 0;

  /// Times the op's canonical large case for `variant` on `lane`: the whole
  /// checked run against its parts (kernel alone, fp64 reference alone), as a
  /// JSON object of milliseconds. Unavailable for ops without one.
  virtual StatusOr<nlohmann::json> time_large(const std::string& variant, gpu::Lane& lane) const {
    (void)variant;
    (void)lane;
    return unavailable(name() + " has no large-case timing");
  }

  /// Runs `variant` once on `c` and returns its main output element by
  /// element (triage). Unavailable for ops without one.
  virtual StatusOr<Inspection> inspect(const Case& c, const std::string& variant, gpu::Lane& lane) const {
    (void)c;
    (void)variant;
    (void)lane;
    return unavailable(name() + " has no inspection");
  }
  /// `c` with integer parameter `key` set to `value` (shapes follow), for
  /// the dimension sweep of triage; an error if the op has no such knob.
  virtual StatusOr<Case> with_param(const Case& c, const std::string& key, int64_t value) const {
    (void)c;
    (void)value;
    return unavailable(name() + " cannot vary " + key);
  }

  /// The contract of `variant` (nullptr: unknown variant).
  virtual const Contract* contract(const std::string& variant) const {
    (void)variant;
    return nullptr;
  }
  /// The first rule of `variant`'s contract that `c` breaks, as one line; nullopt inside.
  std::optional<std::string> outside(const Case& c, const std::string& variant) const;
  /// Cases just outside each rule of `variant`'s contract, derived from `inside`.
  virtual std::vector<Probe> probes(const std::string& variant, const Case& inside) const;

  /// Names of the variants that a plain campaign fuzzes (all but mutants).
  std::vector<std::string> default_variants() const;
  bool has_variant(const std::string& v) const;
};

/// Registers a spec; returns true so it can initialise a static.
bool register_spec(std::unique_ptr<OpSpec> spec);
const OpSpec* find_spec(const std::string& name);
std::vector<const OpSpec*> all_specs();

}  // namespace assay

#define ASSAY_CONCAT2_(a, b) a##b
#define ASSAY_CONCAT1_(a, b) ASSAY_CONCAT2_(a, b)
/// In properties/<op>.cpp: ASSAY_REGISTER_SPEC(GemmSpec);
#define ASSAY_REGISTER_SPEC(Type)                                                       \
  [[maybe_unused]] static const bool ASSAY_CONCAT1_(assay_spec_registered_, __LINE__) = \
      ::assay::register_spec(std::make_unique<Type>())
