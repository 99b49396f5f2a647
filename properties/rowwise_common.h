// Shared plumbing of the row-wise and elementwise specs (issue 8): an OpSpec
// over the generic tensor-op testbed (harness/testbeds/tensor_op.h) built
// from a few functions per op, the dtype mapping to the kernels' Dt, and the
// data-level shrinker (smaller integer params, no padding or offset, simple
// value classes, no relation, no masked rows).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "harness/bounds.h"
#include "harness/generators.h"
#include "harness/shrink.h"
#include "harness/spec.h"
#include "harness/testbeds/tensor_op.h"
#include "harness/values.h"
#include "properties/rowwise_values.h"
#include "kernels/rowwise/rowwise.h"

namespace assay::rowwise {

inline StatusOr<DType> param_dtype(const Case& c) {
  auto it = c.params.find("dtype");
  if (it == c.params.end() || !it->is_string())
    return invalid_argument(c.op + " case: params.dtype must be \"fp32\", \"fp16\" or \"bf16\"");
  auto d = parse_dtype(it->get<std::string>());
  if (!d || (*d != DType::kF32 && *d != DType::kF16 && *d != DType::kBF16))
    return invalid_argument(c.op + " case: params.dtype must be \"fp32\", \"fp16\" or \"bf16\"");
  return *d;
}

inline StatusOr<int64_t> param_int(const Case& c, const char* key, int64_t lo, int64_t hi) {
  auto it = c.params.find(key);
  if (it == c.params.end() || !it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    return invalid_argument(fmt::format("{} case: params.{} must be an integer in [{}, {}]", c.op, key, lo, hi));
  return it->get<int64_t>();
}

inline int64_t int_or(const Case& c, const char* key, int64_t dflt) {
  auto it = c.params.find(key);
  return it != c.params.end() && it->is_number_integer() ? it->get<int64_t>() : dflt;
}
inline double num_or(const Case& c, const char* key, double dflt) {
  auto it = c.params.find(key);
  return it != c.params.end() && it->is_number() ? it->get<double>() : dflt;
}
inline bool bool_or(const Case& c, const char* key, bool dflt) {
  auto it = c.params.find(key);
  return it != c.params.end() && it->is_boolean() ? it->get<bool>() : dflt;
}
inline std::string str_or(const Case& c, const char* key, const std::string& dflt) {
  auto it = c.params.find(key);
  return it != c.params.end() && it->is_string() ? it->get<std::string>() : dflt;
}

/// Pad (extra elements per row) and offset of the case's first tensor.
inline std::pair<int64_t, int64_t> pad_off(const Case& c) {
  const auto& d = c.tensors.front().desc;
  const int64_t pad = d.rank() == 2 ? d.strides[0] - std::max<int64_t>(d.shape[1], 1) : 0;
  return {pad, d.offset};
}

/// Recipes of the non-output tensors, in case order.
inline std::vector<ValueRecipe> input_recipes(const Case& c) {
  std::vector<ValueRecipe> r;
  for (const auto& t : c.tensors)
    if (t.role != Role::kOut) r.push_back(t.values);
  return r;
}

/// Rebuilds a case from its params, input recipes, pad and offset.
using BuildFn = std::function<Case(const nlohmann::json& params, const std::vector<ValueRecipe>& recipes, int64_t pad,
                                   int64_t off)>;

/// Everything an op of this family declares.
struct RowOpConfig {
  std::string name, description;
  TensorOpDef def;
  const std::vector<TensorOpVariant>* registry = nullptr;
  std::function<rc::Gen<Case>(const GenConfig&)> gen;
  BuildFn build;
  std::function<Status(const Case&)> validate;   ///< op params and tensor layout
  std::vector<std::pair<std::string, int64_t>> shrink_keys;  ///< integer params and their lower limits
  std::string self_check_note;
};

/// Simpler cases, most aggressive first; each rebuilt through `build`.
inline std::vector<Case> shrink_row_case(const RowOpConfig& cfg, const Case& c) {
  if (!cfg.validate(c).ok()) return {};
  std::vector<Case> out;
  const auto [pad, off] = pad_off(c);
  const auto rec = input_recipes(c);
  auto emit = [&](nlohmann::json p, std::vector<ValueRecipe> r, int64_t pd, int64_t of) {
    Case x = cfg.build(p, r, pd, of);
    x.variant = c.variant;
    if (cfg.validate(x).ok()) out.push_back(std::move(x));
  };
  for (const auto& [key, lo] : cfg.shrink_keys)
    if (c.params.contains(key))
      for (int64_t v : smaller_values(c.params[key].get<int64_t>(), lo)) {
        nlohmann::json p = c.params;
        p[key] = v;
        emit(p, rec, pad, off);
      }
  if (c.params.contains("relation")) {
    nlohmann::json p = c.params;
    p.erase("relation");
    emit(p, rec, pad, off);
  }
  if (int_or(c, "masked_every", 0) != 0) {
    nlohmann::json p = c.params;
    p["masked_every"] = 0;
    emit(p, rec, pad, off);
  }
  if (pad != 0) emit(c.params, rec, 0, off);
  if (off != 0) emit(c.params, rec, pad, 0);
  bool simple = true;
  std::vector<ValueRecipe> sr;
  for (const auto& r : rec) {
    if (r.inject.active()) {
      ValueRecipe x = r;
      x.inject = SpecialInjection{};
      sr.push_back(x);
      simple = false;
    } else {
      sr.push_back(r);
    }
  }
  if (!simple) emit(c.params, sr, pad, off);
  return out;
}

class RowOpSpec final : public OpSpec {
 public:
  explicit RowOpSpec(RowOpConfig cfg) : cfg_(std::move(cfg)) {}
  std::string name() const override { return cfg_.name; }
  std::string description() const override { return cfg_.description; }
  std::vector<VariantInfo> variants() const override {
    std::vector<VariantInfo> out;
    for (const auto& v : *cfg_.registry) out.push_back(v.info);
    return out;
  }
  rc::Gen<Case> generator(const GenConfig& config) const override { return cfg_.gen(config); }
  Status validate(const Case& c) const override { return cfg_.validate(c); }
  StatusOr<std::vector<Verdict>> run(const Case& c, const std::vector<std::string>& variants,
                                     gpu::Lane& lane) const override {
    ASSAY_RETURN_IF_ERROR(cfg_.validate(c));
    return run_tensor_op(cfg_.def, *cfg_.registry, c, variants, lane);
  }
  std::vector<Case> shrink(const Case& c) const override { return shrink_row_case(cfg_, c); }
  Status self_check(std::string& report) const override {
    report += cfg_.name + ": " + cfg_.self_check_note + "\n";
    return ok_status();
  }
  StatusOr<Case> with_param(const Case& c, const std::string& key, int64_t value) const override {
    for (const auto& [k, lo] : cfg_.shrink_keys)
      if (k == key) {
        if (value < lo) return invalid_argument(fmt::format("{}: {} must be >= {}", cfg_.name, key, lo));
        nlohmann::json p = c.params;
        p[key] = value;
        const auto [pad, off] = pad_off(c);
        Case x = cfg_.build(p, input_recipes(c), pad, off);
        x.variant = c.variant;
        ASSAY_RETURN_IF_ERROR(cfg_.validate(x));
        return x;
      }
    return unavailable(cfg_.name + " cannot vary " + key);
  }

 private:
  RowOpConfig cfg_;
};

/// Row lengths that reach the kernels' edges: below a warp, at and around the
/// warp and block widths and the 4-wide vector, then long rows.
inline rc::Gen<int64_t> gen_row_length(int64_t cap) {
  return gen_extent(cap, {4, 32, 128, 1024}, 1);
}

/// Value recipes for row-wise inputs in `dt`: every class that makes sense for
/// activations (mean-spread rows, near-overflow, subnormals, log-uniform,
/// small integers for exact shifts), with NaN/Inf injection when `specials`.
inline rc::Gen<ValueRecipe> gen_row_recipe(DType dt, uint8_t specials, std::vector<ValueClass> classes = {}) {
  RecipeOptions o;
  o.classes = classes.empty() ? std::vector<ValueClass>{ValueClass::kNormal,     ValueClass::kUniform,
                                                        ValueClass::kSameSign,   ValueClass::kSmallInt,
                                                        ValueClass::kLogUniform, ValueClass::kMeanSpread,
                                                        ValueClass::kNearOverflow, ValueClass::kSubnormal,
                                                        ValueClass::kSignedZero}
                              : classes;
  o.dtype = dt;
  o.specials = specials;
  o.tile = specials != 0 ? 32 : 0;
  o.inject_percent = specials != 0 ? 15 : 0;
  return gen_value_recipe(o);
}

}  // namespace assay::rowwise
