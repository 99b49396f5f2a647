// The engine side of the op model (harness/op.h): what it derives from an
// OpDef and a variant's Contract, and the one OpSpec implementation every op
// runs through.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "harness/op.h"
#include "harness/spec.h"

namespace assay {

/// A tensor's drawn layout: extra elements per row (on the second-innermost stride) and
/// the element offset of its first element.
struct Layout {
  int64_t pad = 0, offset = 0;
  static int64_t pad_of(const TensorDesc& d);
};

/// The TensorDesc of tensor `t` for these params and layout.
StatusOr<TensorDesc> tensor_desc(const OpDef& op, const TensorDef& t, const nlohmann::json& params, const Layout& l);
/// A case from params, the input recipes (kIn and kInOut tensors, in order) and one layout per tensor.
StatusOr<Case> build_case(const OpDef& op, const nlohmann::json& params, const std::vector<ValueRecipe>& recipes,
                          const std::vector<Layout>& layouts);
std::vector<ValueRecipe> input_recipes(const Case& c);
std::vector<Layout> layouts_of(const Case& c);

/// Every declared param present with its kind and range, no unknown param, then the op's own
/// check: before anything computes shapes from the params (a conv stride of 0 divides by zero).
Status validate_params(const OpDef& op, const nlohmann::json& params);
/// validate_params, then every tensor as the params say. One line naming the field.
Status validate_case(const OpDef& op, const Case& c);

/// Cases of `op` drawn inside `contract` (nullptr: the op's whole domain) by construction.
rc::Gen<Case> model_generator(const OpDef& op, const Contract* contract, const GenConfig& cfg);

/// Simpler cases than `c`, most aggressive first, each valid and inside `contract`.
std::vector<Case> model_shrink(const OpDef& op, const Contract* contract, const Case& c);

/// A case just outside one rule of a contract.
/// For each rule of `contract`, cases that break it (and only it, where the op allows),
/// derived from a case inside the contract.
std::vector<Probe> contract_probes(const OpDef& op, const Contract& contract, const Case& inside);

/// Runs `c` through `variants` of `op` on `lane`: per variant, a case outside its contract
/// gives a not-applicable verdict (unless `probe`), else two checked launches.
StatusOr<std::vector<Verdict>> run_model(const OpDef& op, const std::vector<const VariantDef*>& variants, const Case& c,
                                         gpu::Lane& lane, bool probe);

/// Element-by-element view of the first output of `variant` on `c` (triage).
StatusOr<Inspection> inspect_model(const OpDef& op, const VariantDef& variant, const Case& c, gpu::Lane& lane);

/// Times `variant` on the op's large case (OpDef::large): the whole checked run (first and
/// warm), one launch alone and the reference alone (median of 3, CUDA events), as JSON (ms).
StatusOr<nlohmann::json> time_model(const OpDef& op, const VariantDef& variant, gpu::Lane& lane);

/// The registered op definitions (for tools that need more than OpSpec shows).
const OpDef* find_op(const std::string& name);
const VariantDef* find_variant(const std::string& op, const std::string& variant);

}  // namespace assay
