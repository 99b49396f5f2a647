// register_op / add_variant, and ModelOp: the one OpSpec implementation,
// which serves every op declared through the op model.
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "harness/gpu/lane.h"
#include "harness/op_model.h"

namespace assay {
namespace {

class ModelOp final : public OpSpec {
 public:
  explicit ModelOp(OpDef def) : def_(std::move(def)) {}
  const OpDef& def() const { return def_; }
  std::deque<VariantDef>& variant_defs() { return variants_; }
  const VariantDef* variant(const std::string& name) const {
    for (const auto& v : variants_)
      if (v.name == name) return &v;
    return nullptr;
  }

  std::string name() const override { return def_.name; }
  std::string description() const override { return def_.description; }
  std::vector<VariantInfo> variants() const override {
    std::vector<VariantInfo> out;
    for (const auto& v : variants_) out.push_back({v.name, v.description, v.mutant, v.deterministic, v.source, v.vendor});
    return out;
  }
  rc::Gen<Case> generator(const GenConfig& config) const override {
    const VariantDef* v = config.target.empty() ? nullptr : variant(config.target);
    return model_generator(def_, v != nullptr ? &v->contract : nullptr, config);
  }
  Status validate(const Case& c) const override { return validate_case(def_, c); }
  StatusOr<std::vector<Verdict>> run(const Case& c, const std::vector<std::string>& names,
                                     gpu::Lane& lane) const override {
    ASSAY_RETURN_IF_ERROR(validate_case(def_, c));
    std::vector<const VariantDef*> vs;
    for (const auto& n : names) {
      const VariantDef* v = variant(n);
      if (v == nullptr) return not_found(fmt::format("op '{}' has no variant '{}'", def_.name, n));
      vs.push_back(v);
    }
    return run_model(def_, vs, c, lane, lane.options.probe);
  }
  std::vector<Case> shrink(const Case& c) const override {
    const VariantDef* v = c.variant.empty() ? nullptr : variant(c.variant);
    return model_shrink(def_, v != nullptr ? &v->contract : nullptr, c);
  }
  Status self_check(std::string& report) const override {
    if (!def_.self_check) {
      report += def_.name + ": no host self-check declared\n";
      return ok_status();
    }
    return def_.self_check(report);
  }
  StatusOr<Inspection> inspect(const Case& c, const std::string& name, gpu::Lane& lane) const override {
    ASSAY_RETURN_IF_ERROR(validate_case(def_, c));
    const VariantDef* v = variant(name);
    if (v == nullptr) return not_found(fmt::format("op '{}' has no variant '{}'", def_.name, name));
    return inspect_model(def_, *v, c, lane);
  }
  StatusOr<Case> with_param(const Case& c, const std::string& key, int64_t value) const override {
    for (const auto& d : def_.params)
      if (d.name == key && d.kind == ParamKind::kInt) {
        nlohmann::json p = c.params;
        p[key] = value;
        ASSAY_RETURN_IF_ERROR(validate_params(def_, p));
        ASSAY_ASSIGN_OR_RETURN(Case x, build_case(def_, p, input_recipes(c), layouts_of(c)));
        x.variant = c.variant;
        ASSAY_RETURN_IF_ERROR(validate_case(def_, x));
        return x;
      }
    return unavailable(fmt::format("{} has no integer param '{}'", def_.name, key));
  }
  StatusOr<nlohmann::json> time_large(const std::string& name, gpu::Lane& lane) const override {
    const VariantDef* v = variant(name);
    if (v == nullptr) return not_found(fmt::format("op '{}' has no variant '{}'", def_.name, name));
    if (def_.large.is_null()) return unavailable(def_.name + " has no large-case timing");
    return time_model(def_, *v, lane);
  }
  const Contract* contract(const std::string& name) const override {
    const VariantDef* v = variant(name);
    return v != nullptr ? &v->contract : nullptr;
  }
  std::vector<Probe> probes(const std::string& name, const Case& inside) const override {
    const VariantDef* v = variant(name);
    return v != nullptr ? contract_probes(def_, v->contract, inside) : std::vector<Probe>{};
  }

 private:
  OpDef def_;
  std::deque<VariantDef> variants_;  // a deque: generators keep pointers to contracts
};

struct Registry {
  std::mutex mu;
  std::map<std::string, ModelOp*> ops;
  std::multimap<std::string, VariantDef> pending;  // variants added before their op registered
  std::vector<std::string> errors;
};

Registry& reg() {
  static Registry r;  // construct on first use: static-init order safe
  return r;
}

Status check_op(const OpDef& op) {
  if (op.name.empty()) return invalid_argument("register_op: an op needs a name");
  if (!op.reference) return invalid_argument(fmt::format("register_op({}): no reference", op.name));
  std::map<std::string, const ParamDef*> params;
  for (const auto& p : op.params) {
    if (params.count(p.name)) return invalid_argument(fmt::format("register_op({}): param '{}' twice", op.name, p.name));
    if (p.kind == ParamKind::kInt && p.lo > p.hi)
      return invalid_argument(fmt::format("register_op({}): param '{}' has lo > hi", op.name, p.name));
    if (p.kind != ParamKind::kInt && p.values.empty())
      return invalid_argument(fmt::format("register_op({}): param '{}' has no values", op.name, p.name));
    params[p.name] = &p;
  }
  std::set<std::string> names;
  bool any_out = false;
  for (const auto& t : op.tensors) {
    if (!names.insert(t.name).second)
      return invalid_argument(fmt::format("register_op({}): tensor '{}' twice", op.name, t.name));
    any_out = any_out || t.role != Role::kIn;
    for (const auto& d : t.dims) {
      const bool lit = !d.empty() && d.find_first_not_of("0123456789") == std::string::npos;
      if (!lit && (!params.count(d) || params[d]->kind != ParamKind::kInt))
        return invalid_argument(
            fmt::format("register_op({}): tensor {} names '{}', which is no integer param", op.name, t.name, d));
    }
    if (!t.transposed_by.empty() && (!params.count(t.transposed_by) || params[t.transposed_by]->kind != ParamKind::kBool))
      return invalid_argument(
          fmt::format("register_op({}): tensor {} is transposed_by '{}', which is no flag param", op.name, t.name,
                      t.transposed_by));
    if (!parse_dtype(t.dtype) && (!params.count(t.dtype) || params[t.dtype]->kind != ParamKind::kDType))
      return invalid_argument(
          fmt::format("register_op({}): tensor {} has dtype '{}', neither a dtype nor a dtype param", op.name, t.name,
                      t.dtype));
  }
  if (!any_out) return invalid_argument(fmt::format("register_op({}): no output tensor", op.name));
  if (op.device_reference.when && !op.device_reference.compute)
    return invalid_argument(fmt::format("register_op({}): device_reference.when without compute", op.name));
  if (!op.vendor.name.empty() && !op.vendor.defined())
    return invalid_argument(fmt::format("register_op({}): vendor {} without a launcher", op.name, op.vendor.name));
  if (op.vendor.defined() && !(op.vendor.warn_ratio >= 1))
    return invalid_argument(fmt::format("register_op({}): vendor {} warn_ratio {} below 1", op.name, op.vendor.name,
                                        op.vendor.warn_ratio));
  for (const auto& o : op.vendor.outputs)
    if (std::none_of(op.tensors.begin(), op.tensors.end(),
                     [&](const TensorDef& t) { return t.name == o && t.role != Role::kIn; }))
      return invalid_argument(fmt::format("register_op({}): vendor {} names '{}', which is no output", op.name,
                                          op.vendor.name, o));
  return ok_status();
}

Status check_variant(const ModelOp& op, const VariantDef& v) {
  const OpDef& d = op.def();
  if (v.name.empty()) return invalid_argument(fmt::format("add_variant({}): a variant needs a name", d.name));
  if (!v.launch) return invalid_argument(fmt::format("add_variant({}, {}): no launcher", d.name, v.name));
  if (op.variant(v.name) != nullptr)
    return invalid_argument(fmt::format("add_variant({}, {}): the op has this variant already", d.name, v.name));
  auto has_param = [&](const std::string& n) {
    return std::any_of(d.params.begin(), d.params.end(), [&](const ParamDef& p) { return p.name == n; });
  };
  auto has_tensor = [&](const std::string& n) {
    return std::any_of(d.tensors.begin(), d.tensors.end(), [&](const TensorDef& t) { return t.name == n; });
  };
  for (const auto& r : v.contract.rules()) {
    if (!r.param.empty() && !has_param(r.param))
      return invalid_argument(
          fmt::format("add_variant({}, {}): contract rule '{}' names no param of the op", d.name, v.name, r.text()));
    if (!r.other.empty() && !has_param(r.other))
      return invalid_argument(
          fmt::format("add_variant({}, {}): contract rule '{}' names no param of the op", d.name, v.name, r.text()));
  }
  for (const auto& t : v.contract.accumulated())
    if (!has_tensor(t))
      return invalid_argument(fmt::format("add_variant({}, {}): accumulates into unknown tensor {}", d.name, v.name, t));
  for (const auto& p : v.contract.partial())
    if (!has_tensor(p.tensor))
      return invalid_argument(fmt::format("add_variant({}, {}): writes_only names unknown tensor {}", d.name, v.name,
                                          p.tensor));
  for (const auto& c : v.contract.conventions())
    if (!d.conventions.count(c))
      return invalid_argument(fmt::format("add_variant({}, {}): the op knows no convention '{}'", d.name, v.name, c));
  return ok_status();
}

/// The op's vendor library as a variant under its declared contract. A launcher that answers
/// `unavailable` (the library declines the case) returns cudaErrorNotSupported, which the
/// engine reports as outside the vendor's support (not applicable); any other error is a
/// launch error.
VariantDef vendor_variant(const OpDef& op) {
  const VendorDef& vd = op.vendor;
  VariantDef v;
  v.name = vd.name;
  v.description = fmt::format("the vendor library {} under its declared contract (fuzzed only when named)", vd.name);
  v.contract = vd.contract;
  // Outputs the library does not compute (VendorDef::outputs) keep their poison, unchecked.
  for (const auto& t : op.tensors)
    if (t.role != Role::kIn && !vd.computes(t.name))
      v.contract.writes_only(t.name, [](const Params&, int64_t, int64_t) { return false; },
                             fmt::format("no element ({} does not compute it)", vd.name));
  v.deterministic = vd.deterministic;
  v.vendor = true;
  if (vd.launch) {
    v.launch = vd.launch;
  } else {
    v.launch = [run = vd.run](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) {
      const Status st = run(p, t, s);
      // The status says how the call went; the last error holds only what the library's
      // dropped tries left behind (see the engine's call_vendor), cleared here.
      (void)cudaGetLastError();
      if (st.ok()) return cudaSuccess;
      return st.code() == StatusCode::kUnavailable ? cudaErrorNotSupported : cudaErrorUnknown;
    };
  }
  return v;
}

std::map<std::string, std::string>& consumer_hashes() {
  static std::map<std::string, std::string> h;  // construct on first use: static-init order safe
  return h;
}

}  // namespace

// Beside the generated built-in table (assay_gpu), so a link that needs one has both.
bool register_source_hashes(std::vector<std::pair<std::string, std::string>> table) {
  for (auto& [path, hash] : table) consumer_hashes()[path] = hash;
  return true;
}

const char* source_hash(const char* path) {
  auto it = consumer_hashes().find(path);
  return it != consumer_hashes().end() ? it->second.c_str() : builtin_source_hash(path);
}

Status register_op(OpDef op) {
  ASSAY_RETURN_IF_ERROR(check_op(op));
  auto& r = reg();
  std::lock_guard lk(r.mu);
  if (r.ops.count(op.name) || find_spec(op.name) != nullptr)
    return invalid_argument(fmt::format("register_op({}): an op of this name exists", op.name));
  const std::string name = op.name;
  auto spec = std::make_unique<ModelOp>(std::move(op));
  ModelOp* raw = spec.get();
  if (raw->def().vendor.defined()) {
    VariantDef v = vendor_variant(raw->def());
    ASSAY_RETURN_IF_ERROR(check_variant(*raw, v));
    raw->variant_defs().push_back(std::move(v));
  }
  register_spec(std::move(spec));
  r.ops[name] = raw;
  auto [b, e] = r.pending.equal_range(name);
  for (auto it = b; it != e; ++it) {
    if (Status s = check_variant(*raw, it->second); !s.ok())
      r.errors.push_back(s.message());
    else
      raw->variant_defs().push_back(std::move(it->second));
  }
  r.pending.erase(b, e);
  return ok_status();
}

Status add_variant(const std::string& op, VariantDef v) {
  auto& r = reg();
  std::lock_guard lk(r.mu);
  auto it = r.ops.find(op);
  if (it == r.ops.end()) {
    // Static registration order across files is unspecified: keep it until the op comes.
    r.pending.emplace(op, std::move(v));
    return ok_status();
  }
  ASSAY_RETURN_IF_ERROR(check_variant(*it->second, v));
  it->second->variant_defs().push_back(std::move(v));
  return ok_status();
}

bool registered(const Status& s, const char* what) {
  if (!s.ok()) {
    auto& r = reg();
    std::lock_guard lk(r.mu);
    r.errors.push_back(fmt::format("{} ({})", s.message(), what));
  }
  return s.ok();
}

std::vector<std::string> registration_errors() {
  auto& r = reg();
  std::lock_guard lk(r.mu);
  std::vector<std::string> out = r.errors;
  for (const auto& [op, v] : r.pending)
    out.push_back(fmt::format("add_variant({}, {}): no op '{}' was registered", op, v.name, op));
  return out;
}

const OpDef* find_op(const std::string& name) {
  auto& r = reg();
  std::lock_guard lk(r.mu);
  auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : &it->second->def();
}

const VariantDef* find_variant(const std::string& op, const std::string& variant) {
  auto& r = reg();
  std::lock_guard lk(r.mu);
  auto it = r.ops.find(op);
  return it == r.ops.end() ? nullptr : it->second->variant(variant);
}

std::optional<std::string> OpSpec::outside(const Case& c, const std::string& variant) const {
  const Contract* k = contract(variant);
  return k != nullptr ? outside_contract(*k, c) : std::nullopt;
}


}  // namespace assay
