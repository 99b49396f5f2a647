// The op model's declarations and what the engine derives from them:
// parameter access, contracts, case building, generation inside a contract,
// validation, shrinking inside a contract, and the probes just outside it.
#include "harness/op_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "harness/generators.h"
#include "harness/shrink.h"

namespace assay {

// ---- Params ----------------------------------------------------------------------------------

int64_t Params::i(const std::string& k, int64_t dflt) const {
  auto it = j_.find(k);
  if (it == j_.end()) return dflt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_boolean()) return it->get<bool>() ? 1 : 0;
  return dflt;
}
double Params::r(const std::string& k, double dflt) const {
  auto it = j_.find(k);
  return it != j_.end() && it->is_number() ? it->get<double>() : dflt;
}
bool Params::b(const std::string& k, bool dflt) const {
  auto it = j_.find(k);
  if (it == j_.end()) return dflt;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_number_integer()) return it->get<int64_t>() != 0;
  return dflt;
}
std::string Params::s(const std::string& k, const std::string& dflt) const {
  auto it = j_.find(k);
  return it != j_.end() && it->is_string() ? it->get<std::string>() : dflt;
}
DType Params::dt(const std::string& k, DType dflt) const {
  auto it = j_.find(k);
  if (it == j_.end() || !it->is_string()) return dflt;
  auto d = parse_dtype(it->get<std::string>());
  return d ? *d : dflt;
}

// ---- ParamDef factories ------------------------------------------------------------------------

ParamDef ParamDef::integer(std::string name, int64_t lo, int64_t hi) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kInt;
  p.lo = lo;
  p.hi = hi;
  return p;
}
ParamDef ParamDef::extent(std::string name, int64_t lo, int64_t hi) {
  ParamDef p = integer(std::move(name), lo, hi);
  p.size = true;
  return p;
}
ParamDef ParamDef::real(std::string name, std::vector<double> values) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kReal;
  for (double v : values) p.values.emplace_back(v);
  return p;
}
ParamDef ParamDef::flag(std::string name) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kBool;
  p.values = {false, true};
  return p;
}
ParamDef ParamDef::choice(std::string name, std::vector<std::string> values) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kChoice;
  for (auto& v : values) p.values.emplace_back(v);
  return p;
}
ParamDef ParamDef::dtype(std::string name, std::vector<DType> values) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kDType;
  for (DType d : values) p.values.emplace_back(std::string(dtype_name(d)));
  return p;
}

std::string Arithmetic::describe() const {
  std::vector<std::string> parts;
  if (fast_math) parts.push_back("fast-math intrinsics");
  if (ftz) parts.push_back("flush-to-zero");
  for (const auto& [k, v] : tiles) parts.push_back(fmt::format("{} = {}", k, v));
  if (narrow_intermediates) parts.push_back("fp16/bf16 intermediates rounded to the storage type");
  return parts.empty() ? "IEEE" : fmt::format("{}", fmt::join(parts, ", "));
}

// ---- contracts ----------------------------------------------------------------------------------

std::string Rule::text() const {
  switch (kind) {
    case Kind::kMultiple:
      return fmt::format("{} % {} == 0", param, value);
    case Kind::kMin:
      return fmt::format("{} >= {}", param, value);
    case Kind::kMax:
      return fmt::format("{} <= {}", param, value);
    case Kind::kEqual:
      return fmt::format("{} == {}", param, other);
    case Kind::kOneOf: {
      std::vector<std::string> v;
      for (const auto& a : allowed) v.push_back(a.dump());
      return fmt::format("{} in {{{}}}", param, fmt::join(v, ", "));
    }
    case Kind::kContiguous:
      return "every tensor contiguous (no padded rows, no offset)";
    case Kind::kAligned:
      return fmt::format("every tensor {}-byte aligned (first element and row stride)", value);
  }
  return "?";
}

Contract& Contract::multiple_of(const std::string& p, int64_t m) {
  rules_.push_back({Rule::Kind::kMultiple, p, "", m, {}});
  return *this;
}
Contract& Contract::min(const std::string& p, int64_t v) {
  rules_.push_back({Rule::Kind::kMin, p, "", v, {}});
  return *this;
}
Contract& Contract::max(const std::string& p, int64_t v) {
  rules_.push_back({Rule::Kind::kMax, p, "", v, {}});
  return *this;
}
Contract& Contract::equal(const std::string& p, const std::string& q) {
  rules_.push_back({Rule::Kind::kEqual, p, q, 0, {}});
  return *this;
}
Contract& Contract::only(const std::string& p, std::vector<nlohmann::json> values) {
  rules_.push_back({Rule::Kind::kOneOf, p, "", 0, std::move(values)});
  return *this;
}
Contract& Contract::dtypes(std::vector<DType> d, const std::string& param) {
  std::vector<nlohmann::json> v;
  for (DType t : d) v.emplace_back(std::string(dtype_name(t)));
  return only(param, std::move(v));
}
Contract& Contract::contiguous() {
  rules_.push_back({Rule::Kind::kContiguous, "", "", 0, {}});
  return *this;
}
Contract& Contract::aligned(int64_t bytes) {
  rules_.push_back({Rule::Kind::kAligned, "", "", bytes, {}});
  return *this;
}
Contract& Contract::switches_at(const std::string& p, std::vector<int64_t> at) {
  auto& s = switches_[p];
  s.insert(s.end(), at.begin(), at.end());
  return *this;
}
Contract& Contract::accumulates(const std::string& tensor) {
  accumulates_.push_back(tensor);
  return *this;
}
Contract& Contract::writes_only(const std::string& tensor, std::function<bool(const Params&, int64_t, int64_t)> written,
                                std::string what) {
  partial_.push_back({tensor, std::move(what), std::move(written)});
  return *this;
}
Contract& Contract::convention(const std::string& name) {
  conventions_.push_back(name);
  return *this;
}
bool Params::convention(const std::string& name) const {
  if (!j_.contains("conventions") || !j_["conventions"].is_array()) return false;
  for (const auto& c : j_["conventions"])
    if (c.is_string() && c.get<std::string>() == name) return true;
  return false;
}

bool Contract::has_convention(const std::string& n) const {
  return std::find(conventions_.begin(), conventions_.end(), n) != conventions_.end();
}
bool Contract::empty() const {
  return rules_.empty() && switches_.empty() && accumulates_.empty() && conventions_.empty() && partial_.empty() &&
         arith_ == Arithmetic{};
}
std::vector<std::string> Contract::describe() const {
  std::vector<std::string> out;
  for (const auto& r : rules_) out.push_back(r.text());
  for (const auto& [p, at] : switches_) out.push_back(fmt::format("configuration switches at {} = {}", p, fmt::join(at, ", ")));
  for (const auto& t : accumulates_) out.push_back(fmt::format("accumulates into {} (+=)", t));
  for (const auto& w : partial_) out.push_back(fmt::format("writes only {} of {}", w.what, w.tensor));
  for (const auto& c : conventions_) out.push_back(fmt::format("convention: {}", c));
  if (!(arith_ == Arithmetic{})) out.push_back(fmt::format("arithmetic: {}", arith_.describe()));
  return out;
}

namespace {

bool tensor_aligned(const TensorDesc& d, int64_t bytes) {
  const int64_t es = static_cast<int64_t>(dtype_size(d.dtype));
  if ((d.offset * es) % bytes != 0) return false;
  for (size_t k = 0; k + 1 < d.strides.size(); ++k)
    if (d.shape[k] > 1 && (d.strides[k] * es) % bytes != 0) return false;
  return true;
}

bool tensor_dense(const TensorDesc& d) {
  if (d.offset != 0) return false;
  int64_t want = 1;
  for (size_t k = d.shape.size(); k-- > 0;) {
    if (d.shape[k] > 1 && d.strides[k] != want) return false;
    want *= std::max<int64_t>(d.shape[k], 1);
  }
  return true;
}

}  // namespace

std::optional<std::string> outside_contract(const Contract& contract, const Case& c) {
  const Params p(c.params);
  for (const auto& r : contract.rules()) {
    const bool has = p.has(r.param);
    bool ok = true;
    switch (r.kind) {
      case Rule::Kind::kMultiple:
        ok = !has || p.i(r.param) % r.value == 0;
        break;
      case Rule::Kind::kMin:
        ok = !has || p.i(r.param) >= r.value;
        break;
      case Rule::Kind::kMax:
        ok = !has || p.i(r.param) <= r.value;
        break;
      case Rule::Kind::kEqual:
        ok = !has || !p.has(r.other) || c.params[r.param] == c.params[r.other];
        break;
      case Rule::Kind::kOneOf: {
        // An absent optional param counts as its simplest value (false, the first choice).
        const nlohmann::json v = has ? c.params[r.param] : nlohmann::json(false);
        ok = std::any_of(r.allowed.begin(), r.allowed.end(), [&](const nlohmann::json& a) {
          return a == v || (a.is_number() && v.is_number() && a.get<double>() == v.get<double>());
        });
        if (!has && !ok) ok = true;  // the op's default, which the contract cannot be about
        break;
      }
      case Rule::Kind::kContiguous:
        ok = std::all_of(c.tensors.begin(), c.tensors.end(), [](const TensorSpec& t) { return tensor_dense(t.desc); });
        break;
      case Rule::Kind::kAligned:
        ok = std::all_of(c.tensors.begin(), c.tensors.end(),
                         [&](const TensorSpec& t) { return tensor_aligned(t.desc, r.value); });
        break;
    }
    if (!ok) {
      if (r.kind == Rule::Kind::kContiguous || r.kind == Rule::Kind::kAligned) return r.text();
      return fmt::format("{} (here {} = {})", r.text(), r.param, c.params[r.param].dump());
    }
  }
  return std::nullopt;
}

// ---- case building --------------------------------------------------------------------------------

namespace {

std::optional<int64_t> literal(const std::string& s) {
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

std::optional<DType> fixed_dtype(const std::string& s) {
  return parse_dtype(s);
}

}  // namespace

int64_t Layout::pad_of(const TensorDesc& d) {
  const int64_t r = d.rank();
  return r >= 2 ? d.strides[static_cast<size_t>(r - 2)] - std::max<int64_t>(d.shape[static_cast<size_t>(r - 1)], 1) : 0;
}

StatusOr<TensorDesc> tensor_desc(const OpDef& op, const TensorDef& t, const nlohmann::json& params, const Layout& l) {
  const Params p(params);
  TensorDesc d;
  if (auto f = fixed_dtype(t.dtype))
    d.dtype = *f;
  else if (p.has(t.dtype))
    d.dtype = p.dt(t.dtype);
  else
    return invalid_argument(fmt::format("{} case: params.{} (the dtype of {}) is missing", op.name, t.dtype, t.name));
  if (t.shape) d.shape = t.shape(p);
  for (const auto& dim : t.dims) {
    if (t.shape) break;
    if (auto v = literal(dim)) {
      d.shape.push_back(*v);
    } else if (p.has(dim) && params[dim].is_number_integer()) {
      d.shape.push_back(params[dim].get<int64_t>());
    } else {
      return invalid_argument(fmt::format("{} case: params.{} (an extent of {}) must be an integer", op.name, dim, t.name));
    }
  }
  if (d.shape.empty()) d.shape = {1};
  if (!t.transposed_by.empty() && p.b(t.transposed_by) && d.shape.size() >= 2)
    std::swap(d.shape[d.shape.size() - 1], d.shape[d.shape.size() - 2]);
  // Strides: dense over padded rows; the pad widens the second-innermost stride only.
  const size_t r = d.shape.size();
  d.strides.assign(r, 1);
  if (r >= 2) {
    d.strides[r - 2] = std::max<int64_t>(d.shape[r - 1], 1) + l.pad;
    for (size_t k = r - 2; k-- > 0;) d.strides[k] = d.strides[k + 1] * std::max<int64_t>(d.shape[k + 1], 1);
  }
  d.offset = l.offset;
  return d;
}

StatusOr<Case> build_case(const OpDef& op, const nlohmann::json& params, const std::vector<ValueRecipe>& recipes,
                          const std::vector<Layout>& layouts) {
  Case c;
  c.op = op.name;
  c.params = params;
  size_t ri = 0;
  for (size_t t = 0; t < op.tensors.size(); ++t) {
    const TensorDef& td = op.tensors[t];
    TensorSpec s;
    s.name = td.name;
    s.role = td.role;
    ASSAY_ASSIGN_OR_RETURN(s.desc, tensor_desc(op, td, params, t < layouts.size() ? layouts[t] : Layout{}));
    if (td.role != Role::kOut) {
      if (ri < recipes.size()) s.values = recipes[ri];
      ++ri;
    }
    c.tensors.push_back(std::move(s));
  }
  return c;
}

std::vector<ValueRecipe> input_recipes(const Case& c) {
  std::vector<ValueRecipe> r;
  for (const auto& t : c.tensors)
    if (t.role != Role::kOut) r.push_back(t.values);
  return r;
}

std::vector<Layout> layouts_of(const Case& c) {
  std::vector<Layout> l;
  for (const auto& t : c.tensors) l.push_back({Layout::pad_of(t.desc), t.desc.offset});
  return l;
}

// ---- validation ------------------------------------------------------------------------------------

namespace {

bool param_present(const ParamDef& d, const Params& p) {
  return !d.when || d.when(p);
}

Status check_param(const OpDef& op, const ParamDef& d, const nlohmann::json& v, const Params& p) {
  auto bad = [&](const std::string& what) {
    return invalid_argument(fmt::format("{} case: params.{} must be {}", op.name, d.name, what));
  };
  switch (d.kind) {
    case ParamKind::kInt: {
      int64_t hi = d.hi;
      if (d.hi_of) hi = std::min(hi, d.hi_of(p));
      if (!v.is_number_integer() || v.get<int64_t>() < d.lo || v.get<int64_t>() > hi)
        return bad(fmt::format("an integer in [{}, {}]", d.lo, hi));
      if (d.step > 1 && v.get<int64_t>() % d.step != 0)
        return bad(fmt::format("a multiple of {} in [{}, {}]", d.step, d.lo, hi));
      return ok_status();
    }
    case ParamKind::kReal:
      if (!v.is_number() || !std::isfinite(v.get<double>())) return bad("a finite number");
      return ok_status();
    case ParamKind::kBool:
      if (!v.is_boolean()) return bad("true or false");
      return ok_status();
    case ParamKind::kChoice:
    case ParamKind::kDType: {
      std::vector<std::string> names;
      for (const auto& a : d.values) names.push_back(a.get<std::string>());
      if (!v.is_string() || std::find(names.begin(), names.end(), v.get<std::string>()) == names.end())
        return bad(fmt::format("one of \"{}\"", fmt::join(names, "\", \"")));
      return ok_status();
    }
  }
  return ok_status();
}

}  // namespace

Status validate_params(const OpDef& op, const nlohmann::json& params) {
  if (!params.is_object()) return invalid_argument(op.name + " case: params must be an object");
  const Params p(params);
  std::set<std::string> known = {"conventions"};
  for (const auto& d : op.params) {
    known.insert(d.name);
    const bool present = param_present(d, p);
    if (!params.contains(d.name)) {
      if (present && d.absent_weight == 0 && !d.when)
        return invalid_argument(fmt::format("{} case: params.{} is missing", op.name, d.name));
      continue;
    }
    if (!present)
      return invalid_argument(fmt::format("{} case: params.{} does not apply here", op.name, d.name));
    ASSAY_RETURN_IF_ERROR(check_param(op, d, params[d.name], p));
  }
  for (const auto& [k, v] : params.items())
    if (!known.count(k)) return invalid_argument(fmt::format("{} case: unknown param '{}'", op.name, k));
  if (op.check) ASSAY_RETURN_IF_ERROR(op.check(p));
  return ok_status();
}

Status validate_case(const OpDef& op, const Case& c) {
  ASSAY_RETURN_IF_ERROR(validate_params(op, c.params));
  if (c.tensors.size() != op.tensors.size())
    return invalid_argument(fmt::format("{} case: {} tensors, expected {}", op.name, c.tensors.size(), op.tensors.size()));
  for (size_t t = 0; t < op.tensors.size(); ++t) {
    const TensorDef& td = op.tensors[t];
    const TensorSpec& ts = c.tensors[t];
    if (ts.name != td.name)
      return invalid_argument(fmt::format("{} case: tensor {} must be '{}'", op.name, t, td.name));
    if (ts.role != td.role)
      return invalid_argument(fmt::format("{} case: tensor {} must have role {}", op.name, td.name, role_name(td.role)));
    const int64_t pad = Layout::pad_of(ts.desc);
    if (pad < 0 || ts.desc.offset < 0)
      return invalid_argument(fmt::format("{} case: tensor {} has a negative pad or offset", op.name, td.name));
    if (!td.padded && (pad != 0 || ts.desc.offset != 0))
      return invalid_argument(fmt::format("{} case: tensor {} must be contiguous", op.name, td.name));
    ASSAY_ASSIGN_OR_RETURN(TensorDesc want, tensor_desc(op, td, c.params, {pad, ts.desc.offset}));
    if (want.dtype != ts.desc.dtype || want.shape != ts.desc.shape || want.strides != ts.desc.strides)
      return invalid_argument(fmt::format("{} case: tensor {} must be {} [{}] (dense rows, padded row stride)", op.name,
                                          td.name, dtype_name(want.dtype), fmt::join(want.shape, ", ")));
    ASSAY_RETURN_IF_ERROR(ts.desc.validate(op.name + " case: tensor " + td.name, int64_t{1} << 28));
    if (td.role != Role::kOut) ASSAY_RETURN_IF_ERROR(validate_recipe(ts.values, op.name + " case: tensor " + td.name));
  }
  return ok_status();
}

// ---- generation ------------------------------------------------------------------------------------

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

/// The integer range and step a contract leaves for `d`, given the params drawn so far.
struct IntDomain {
  int64_t lo = 0, hi = 0, step = 1;
  std::optional<nlohmann::json> fixed;  ///< an equality with an earlier param
  std::vector<int64_t> allowed;         ///< a kOneOf rule
};

IntDomain int_domain(const OpDef& op, const ParamDef& d, const Params& p, const Contract* k, const GenConfig& cfg,
                     bool in_contract) {
  IntDomain r;
  r.lo = d.lo;
  r.hi = d.hi;
  r.step = std::max<int64_t>(d.step, 1);
  if (d.hi_of) r.hi = std::min(r.hi, d.hi_of(p));
  if (d.size) r.hi = std::min(r.hi, std::max(cfg.max_dim, r.lo));
  if (k == nullptr || !in_contract) return r;
  // Params tied to this one by equalities share its rules and its range.
  std::set<std::string> group = {d.name};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& rule : k->rules())
      if (rule.kind == Rule::Kind::kEqual && (group.count(rule.param) != group.count(rule.other)))
        grew = group.insert(group.count(rule.param) ? rule.other : rule.param).second || grew;
  }
  for (const auto& other : op.params)
    if (other.name != d.name && group.count(other.name) && other.kind == ParamKind::kInt) {
      if (p.has(other.name)) r.fixed = p.json()[other.name];
      r.lo = std::max(r.lo, other.lo);
      r.hi = std::min(r.hi, other.hi);
    }
  for (const auto& rule : k->rules()) {
    if (!group.count(rule.param)) continue;
    if (rule.kind == Rule::Kind::kMin) r.lo = std::max(r.lo, rule.value);
    if (rule.kind == Rule::Kind::kMax) r.hi = std::min(r.hi, rule.value);
    if (rule.kind == Rule::Kind::kMultiple) r.step = std::lcm(r.step, rule.value);
    if (rule.kind == Rule::Kind::kOneOf && rule.param == d.name)
      for (const auto& a : rule.allowed)
        if (a.is_number_integer()) r.allowed.push_back(a.get<int64_t>());
  }
  // A max_dim below the contract's minimum: the contract wins (the case stays applicable).
  if (r.hi < r.lo) r.hi = std::min<int64_t>(d.hi, r.lo + 16 * r.step);
  return r;
}

rc::Gen<int64_t> gen_int(const IntDomain& dom, std::vector<int64_t> aims) {
  if (!dom.allowed.empty()) return gen_element(dom.allowed);
  const int64_t s = dom.step;
  const int64_t qlo = ceil_div(dom.lo, s), qhi = std::max(qlo, floor_div(dom.hi, s));
  // Edges in quotient space: each aim's multiples just below, at and above it, and the
  // generic edge extents (0, 1, 2, primes, 2^k +- 1, the last ones).
  std::vector<int64_t> tiles;
  for (int64_t a : aims)
    if (a > 0) tiles.push_back(std::max<int64_t>(1, a / s));
  std::vector<int64_t> edges = edge_extents(qhi, tiles, std::max<int64_t>(qlo, 0));
  for (int64_t a : aims)
    for (int64_t q : {floor_div(a, s) - 1, floor_div(a, s), ceil_div(a, s), ceil_div(a, s) + 1})
      if (q >= qlo && q <= qhi) edges.push_back(q);
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  if (edges.empty()) edges.push_back(qlo);
  const int64_t small_hi = std::min(qhi, qlo + 64 / s + 2);
  return rc::gen::map(rc::gen::mapcat(gen_weighted_index({6, 3, 1}),
                                      [edges, qlo, qhi, small_hi](size_t i) -> rc::Gen<int64_t> {
                                        if (i == 0) return gen_element(edges);
                                        if (i == 1) return gen_int_uniform(qlo, small_hi);
                                        return gen_int_uniform(qlo, qhi);
                                      }),
                      [s](int64_t q) { return q * s; });
}

std::vector<nlohmann::json> allowed_values(const ParamDef& d, const Contract* k, bool in_contract) {
  std::vector<nlohmann::json> v = d.values;
  if (k == nullptr || !in_contract) return v;
  for (const auto& rule : k->rules())
    if (rule.param == d.name && rule.kind == Rule::Kind::kOneOf) {
      std::vector<nlohmann::json> keep;
      for (const auto& x : v)
        for (const auto& a : rule.allowed)
          if (a == x || (a.is_number() && x.is_number() && a.get<double>() == x.get<double>())) keep.push_back(x);
      v = keep;
    }
  return v;
}

RecipeOptions recipe_options(const ValueSpec& vs, DType dt) {
  RecipeOptions o;
  o.classes = vs.classes.empty() ? std::vector<ValueClass>{ValueClass::kNormal,       ValueClass::kUniform,
                                                           ValueClass::kSameSign,     ValueClass::kSmallInt,
                                                           ValueClass::kLogUniform,   ValueClass::kMeanSpread,
                                                           ValueClass::kNearOverflow, ValueClass::kSubnormal,
                                                           ValueClass::kSignedZero}
                                 : vs.classes;
  if (!dtype_is_float(dt)) o.classes = {ValueClass::kSameSign};
  o.dtype = dt;
  o.max_abs = vs.max_abs;
  o.specials = vs.specials;
  o.tile = vs.specials != 0 ? 32 : 0;
  o.inject_percent = vs.specials != 0 ? vs.inject_percent : 0;
  return o;
}

}  // namespace

rc::Gen<Case> model_generator(const OpDef& op, const Contract* contract, const GenConfig& cfg) {
  return rc::gen::exec([&op, contract, cfg]() -> Case {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& d : op.params) {
      const Params p(j);
      if (d.when && !d.when(p)) continue;
      if (d.absent_weight > 0 && *gen_weighted_index({static_cast<size_t>(d.absent_weight), 1}) == 0) continue;
      if (d.kind == ParamKind::kInt) {
        const IntDomain dom = int_domain(op, d, p, contract, cfg, true);
        if (dom.fixed) {
          j[d.name] = *dom.fixed;
          continue;
        }
        if (!d.tie.empty() && p.has(d.tie) && d.tie_weight > 0) {
          const int64_t x = p.i(d.tie);
          const bool allowed = dom.allowed.empty() || std::find(dom.allowed.begin(), dom.allowed.end(), x) != dom.allowed.end();
          if (x >= dom.lo && x <= dom.hi && x % dom.step == 0 && allowed &&
              *gen_weighted_index({d.tie_weight, d.free_weight}) == 0) {
            j[d.name] = x;
            continue;
          }
        }
        std::vector<int64_t> aims = d.edges;
        if (contract != nullptr)
          if (auto it = contract->switches().find(d.name); it != contract->switches().end())
            aims.insert(aims.end(), it->second.begin(), it->second.end());
        if (!d.values.empty() && dom.allowed.empty()) {  // among(...): weighted values inside the domain
          std::vector<int64_t> in;
          std::vector<size_t> w;
          for (size_t k = 0; k < d.values.size(); ++k) {
            const int64_t x = d.values[k].get<int64_t>();
            if (x < dom.lo || x > dom.hi || x % dom.step != 0) continue;
            in.push_back(x);
            w.push_back(k < d.weights.size() ? d.weights[k] : 1);
          }
          if (!in.empty()) {
            j[d.name] = in[*gen_weighted_index(w)];
            continue;
          }
        }
        j[d.name] = *gen_int(dom, aims);
        continue;
      }
      const auto vals = allowed_values(d, contract, true);
      if (vals.empty()) continue;  // the contract excludes every value: the case is not applicable
      std::vector<size_t> w;
      for (size_t i = 0; i < vals.size(); ++i) {
        size_t wi = 1;
        for (size_t k = 0; k < d.values.size(); ++k)
          if (d.values[k] == vals[i] && k < d.weights.size()) wi = d.weights[k];
        w.push_back(wi);
      }
      j[d.name] = vals[*gen_weighted_index(w)];
    }
    // Each tensor draws its own layout, so a kernel that uses one tensor's leading
    // dimension for another's is caught.
    bool contiguous = false;
    int64_t align = 0;
    if (contract != nullptr)
      for (const auto& r : contract->rules()) {
        if (r.kind == Rule::Kind::kContiguous) contiguous = true;
        if (r.kind == Rule::Kind::kAligned) align = std::max(align, r.value);
      }
    std::vector<Layout> layouts;
    std::vector<ValueRecipe> recipes;
    const Params p(j);
    for (const auto& t : op.tensors) {
      Layout l;
      DType dt = DType::kF32;
      if (auto f = fixed_dtype(t.dtype)) dt = *f;
      else dt = p.dt(t.dtype);
      if (t.padded && !contiguous) {
        l.pad = *gen_element<int64_t>({0, 0, 0, 1, 3, 8});
        l.offset = *gen_element<int64_t>({0, 0, 0, 1, 2});
        if (align > 0) {
          const int64_t per = std::max<int64_t>(1, align / static_cast<int64_t>(dtype_size(dt)));
          l.offset = l.offset * per;
          // Pad the row so that the row stride in bytes stays a multiple of `align`.
          int64_t cols = 1;
          if (t.shape) {
            const auto sh = t.shape(p);
            if (sh.size() >= 2) cols = sh.back();
          } else if (t.dims.size() >= 2) {
            const bool swapped = !t.transposed_by.empty() && p.b(t.transposed_by);
            const auto& last = swapped ? t.dims[t.dims.size() - 2] : t.dims.back();
            cols = literal(last) ? *literal(last) : p.i(last, 1);
          }
          const int64_t w = std::max<int64_t>(cols, 1);
          l.pad = (ceil_div(w, per) * per - w) + (l.pad > 0 ? per : 0);
        }
      }
      layouts.push_back(l);
      if (t.role == Role::kOut) continue;
      RecipeOptions o = recipe_options(t.values, dt);
      ValueRecipe r = *gen_value_recipe(o);
      if (!dtype_is_float(dt)) {
        const double hi = !t.values.int_hi_param.empty() ? static_cast<double>(p.i(t.values.int_hi_param, 1))
                                                         : t.values.int_hi;
        if (hi > 0) r.scale = hi;
      }
      recipes.push_back(r);
    }
    if (op.couple) op.couple(j, recipes);
    auto c = build_case(op, j, recipes, layouts);
    if (!c.ok()) throw rc::GenerationFailure(c.status().message());
    return std::move(c).value();
  });
}

// ---- shrinking ---------------------------------------------------------------------------------------

std::vector<Case> model_shrink(const OpDef& op, const Contract* contract, const Case& c) {
  std::vector<Case> out;
  if (!validate_case(op, c).ok()) return out;
  const auto rec = input_recipes(c);
  const auto lay = layouts_of(c);
  auto emit = [&](const nlohmann::json& p, const std::vector<ValueRecipe>& r, const std::vector<Layout>& l) {
    auto x = build_case(op, p, r, l);
    if (!x.ok()) return;
    x->variant = c.variant;
    if (!validate_case(op, *x).ok()) return;
    if (contract != nullptr && outside_contract(*contract, *x)) return;
    if (x->to_json() == c.to_json()) return;
    out.push_back(std::move(x).value());
  };
  // Smaller integers (equal params move together), then simpler values of the other kinds.
  for (const auto& d : op.params) {
    if (!c.params.contains(d.name)) continue;
    const auto& v = c.params[d.name];
    if (d.kind == ParamKind::kInt && v.is_number_integer()) {
      int64_t step = std::max<int64_t>(d.step, 1), lo = d.lo;
      std::vector<std::string> tied;
      if (contract != nullptr)
        for (const auto& r : contract->rules()) {
          if (r.param == d.name && r.kind == Rule::Kind::kMultiple) step = std::lcm(step, r.value);
          if (r.param == d.name && r.kind == Rule::Kind::kMin) lo = std::max(lo, r.value);
          if (r.kind == Rule::Kind::kEqual && (r.param == d.name || r.other == d.name))
            tied.push_back(r.param == d.name ? r.other : r.param);
        }
      const int64_t x = v.get<int64_t>();
      for (int64_t q : smaller_values(x / step, ceil_div(lo, step))) {
        nlohmann::json p = c.params;
        p[d.name] = q * step;
        for (const auto& t : tied)
          if (p.contains(t)) p[t] = q * step;
        emit(p, rec, lay);
      }
    } else if (d.absent_weight > 0) {
      nlohmann::json p = c.params;
      p.erase(d.name);
      emit(p, rec, lay);
    } else if (!d.values.empty() && v != d.values.front()) {
      nlohmann::json p = c.params;
      p[d.name] = d.values.front();
      emit(p, rec, lay);
    }
  }
  std::vector<Layout> plain(lay.size());
  if (std::any_of(lay.begin(), lay.end(), [](const Layout& l) { return l.pad != 0 || l.offset != 0; })) {
    emit(c.params, rec, plain);
    // One tensor at a time, so a failure that needs one padded tensor loses the others' layouts.
    for (size_t t = 0; t < lay.size(); ++t)
      if (lay[t].pad != 0 || lay[t].offset != 0) {
        std::vector<Layout> l = lay;
        l[t] = Layout{};
        emit(c.params, rec, l);
      }
  }
  std::vector<ValueRecipe> simple = rec;
  bool changed = false;
  for (auto& r : simple)
    if (r.inject.active()) r.inject = SpecialInjection{}, changed = true;
  if (changed) emit(c.params, simple, lay);
  return out;
}

// ---- probes just outside a contract ------------------------------------------------------------------

std::vector<Probe> contract_probes(const OpDef& op, const Contract& contract, const Case& inside) {
  std::vector<Probe> out;
  const auto rec = input_recipes(inside);
  const auto lay = layouts_of(inside);
  auto emit = [&](const Rule& r, const std::string& how, const nlohmann::json& p, const std::vector<Layout>& l) {
    auto x = build_case(op, p, rec, l);
    if (!x.ok() || !validate_case(op, *x).ok()) return;
    const auto broken = outside_contract(contract, *x);
    if (!broken) return;  // still inside (the rule cannot be broken from here)
    x->variant = inside.variant;
    out.push_back({r.text(), how, std::move(x).value()});
  };
  const ParamDef* def_of = nullptr;
  for (const auto& r : contract.rules()) {
    def_of = nullptr;
    for (const auto& d : op.params)
      if (d.name == r.param) def_of = &d;
    nlohmann::json p = inside.params;
    switch (r.kind) {
      case Rule::Kind::kMultiple: {
        if (!p.contains(r.param)) break;
        const int64_t x = p[r.param].get<int64_t>();
        for (int64_t y : {x + 1, x - 1, x + r.value / 2}) {
          nlohmann::json q = p;
          q[r.param] = y;
          emit(r, fmt::format("{} = {}, the next non-multiple", r.param, y), q, lay);
        }
        break;
      }
      case Rule::Kind::kMin:
        p[r.param] = r.value - 1;
        emit(r, fmt::format("{} = {}, one below the minimum", r.param, r.value - 1), p, lay);
        break;
      case Rule::Kind::kMax:
        p[r.param] = r.value + 1;
        emit(r, fmt::format("{} = {}, one past the maximum", r.param, r.value + 1), p, lay);
        break;
      case Rule::Kind::kEqual:
        if (!p.contains(r.other) || !p[r.other].is_number_integer()) break;
        for (int64_t dlt : {1, -1}) {
          nlohmann::json q = p;
          q[r.param] = p[r.other].get<int64_t>() + dlt;
          emit(r, fmt::format("{} = {} + {}", r.param, r.other, dlt), q, lay);
        }
        break;
      case Rule::Kind::kOneOf:
        if (def_of == nullptr) break;
        for (const auto& v : def_of->values) {
          nlohmann::json q = p;
          q[r.param] = v;
          emit(r, fmt::format("{} = {}", r.param, v.dump()), q, lay);
        }
        break;
      case Rule::Kind::kContiguous:
        for (size_t t = 0; t < lay.size(); ++t) {
          if (!op.tensors[t].padded) continue;
          std::vector<Layout> l = lay;
          l[t].pad += 1;
          emit(r, fmt::format("{} with a padded row stride", op.tensors[t].name), p, l);
          l = lay;
          l[t].offset += 1;
          emit(r, fmt::format("{} offset by one element", op.tensors[t].name), p, l);
        }
        break;
      case Rule::Kind::kAligned:
        for (size_t t = 0; t < lay.size(); ++t) {
          if (!op.tensors[t].padded) continue;
          std::vector<Layout> l = lay;
          l[t].offset += 1;
          emit(r, fmt::format("{} offset by one element", op.tensors[t].name), p, l);
        }
        break;
    }
  }
  return out;
}

}  // namespace assay
