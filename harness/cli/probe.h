// assay fuzz --probe-contract: cases just outside each rule of a variant's
// contract, run on purpose, and what the kernel does there.
#pragma once

#include <string>
#include <vector>

#include "harness/spec.h"
#include "harness/status.h"

namespace assay {

struct ProbeOptions {
  std::vector<std::string> variants;  ///< empty: every non-mutant variant with a contract
  uint64_t seed = 1;
  int64_t per_rule = 8;               ///< inside cases each probe is derived from
  int64_t max_dim = 512;
  int device = 0;
  double case_timeout_s = 60;
  std::string worker_binary;          ///< empty: in this process
  std::string json;                   ///< write the report here too
};

/// What a kernel did on the probes of one rule.
struct RuleBehaviour {
  std::string variant, rule, example;
  int64_t probes = 0, rejected = 0, correct = 0, corrupted = 0, crashed = 0;
  std::vector<std::string> kinds;  ///< failure kinds seen where it corrupted
  std::string verdict() const;     ///< the one-word summary an author acts on
};

/// Runs the probes; the report goes to stdout. Errors: unknown variant, no GPU, infrastructure.
StatusOr<std::vector<RuleBehaviour>> probe_contracts(const OpSpec& spec, const ProbeOptions& o);

/// The contract lines of `variant` ("(no contract: any case of the op)" when empty).
std::vector<std::string> contract_lines(const OpSpec& spec, const std::string& variant);

}  // namespace assay
