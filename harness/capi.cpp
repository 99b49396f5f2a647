// The C ABI of harness/capi.h: ops declared as JSON with C callbacks, registered through the
// same register_op / add_variant as assay's own specs, and the campaign, shrinking, corpus and
// replay of the CLI behind plain C functions. Nothing here is Python-specific; the Python
// package (python/assay) is one host of it.
#include "harness/capi.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/executor.h"
#include "harness/gpu/lane.h"
#include "harness/op.h"
#include "harness/op_model.h"
#include "harness/shrink.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "harness/worker.h"

namespace assay {
namespace {

using nlohmann::json;

thread_local std::string g_error;

/// j[k] if present, else an empty JSON value: a reference, so that iterating over items()
/// never outlives a temporary.
const json& field(const json& j, const char* k) {
  static const json kEmpty;
  auto it = j.find(k);
  return it == j.end() ? kEmpty : *it;
}

int fail(const Status& s) {
  g_error = s.message();
  return s.code() == StatusCode::kOk ? 1 : static_cast<int>(s.code());
}
int fail(const std::string& m) {
  g_error = m;
  return 1;
}

char* dup_json(const json& j) {
  const std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// Runs `f` and turns exceptions (bad JSON, a missing field) into the last error.
template <typename F>
auto guarded(F&& f, decltype(f()) on_error) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    g_error = e.what();
    return on_error;
  }
}

StatusOr<Case> parse_case(const char* text) {
  if (text == nullptr) return invalid_argument("no case");
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("case is not valid JSON: ") + e.what());
  }
  if (j.contains("case") && j["case"].is_object()) j = j["case"];  // a whole corpus entry
  return Case::from_json(j, "case");
}

const OpSpec* spec_of(const std::string& op) {
  const OpSpec* s = find_spec(op);
  if (s == nullptr) g_error = fmt::format("unknown op '{}'", op);
  return s;
}

// ---- declarations from JSON ---------------------------------------------------------------------

StatusOr<DType> dtype_named(const std::string& n) {
  auto d = parse_dtype(n);
  if (!d) return invalid_argument(fmt::format("unknown dtype '{}'", n));
  return *d;
}

StatusOr<ParamDef> param_from(const json& j) {
  const std::string name = j.at("name").get<std::string>();
  const std::string kind = j.value("kind", "int");
  ParamDef p;
  if (kind == "int" || kind == "extent") {
    const int64_t lo = j.at("lo").get<int64_t>(), hi = j.at("hi").get<int64_t>();
    p = kind == "int" ? ParamDef::integer(name, lo, hi) : ParamDef::extent(name, lo, hi);
    if (j.contains("aim")) p.aim(j["aim"].get<std::vector<int64_t>>());
    if (j.contains("cap")) {
      // An element budget: hi <= budget / product of the named earlier params.
      const int64_t budget = j["cap"].at("budget").get<int64_t>();
      const auto over = j["cap"].at("over").get<std::vector<std::string>>();
      p.cap([budget, over](const Params& q) {
        int64_t prod = 1;
        for (const auto& o : over) prod *= std::max<int64_t>(q.i(o, 1), 1);
        return budget / prod;
      });
    }
  } else if (kind == "real") {
    p = ParamDef::real(name, j.at("values").get<std::vector<double>>());
  } else if (kind == "flag") {
    p = ParamDef::flag(name);
  } else if (kind == "choice") {
    p = ParamDef::choice(name, j.at("values").get<std::vector<std::string>>());
  } else if (kind == "dtype") {
    std::vector<DType> ds;
    for (const auto& n : j.at("values")) {
      ASSAY_ASSIGN_OR_RETURN(DType d, dtype_named(n.get<std::string>()));
      ds.push_back(d);
    }
    p = ParamDef::dtype(name, ds);
  } else {
    return invalid_argument(fmt::format("param {}: unknown kind '{}' (int, extent, real, flag, choice, dtype)", name,
                                        kind));
  }
  if (j.contains("weights")) p.weigh(j["weights"].get<std::vector<size_t>>());
  if (j.value("optional", 0) > 0) p.optional(j["optional"].get<int>());
  if (j.contains("doc")) p.describe(j["doc"].get<std::string>());
  return p;
}

StatusOr<TensorDef> tensor_from(const json& j) {
  TensorDef t;
  t.name = j.at("name").get<std::string>();
  const std::string role = j.value("role", "in");
  if (role == "in")
    t.role = Role::kIn;
  else if (role == "out")
    t.role = Role::kOut;
  else if (role == "inout")
    t.role = Role::kInOut;
  else
    return invalid_argument(fmt::format("tensor {}: role '{}' is none of in, out, inout", t.name, role));
  for (const auto& d : field(j, "dims"))
    t.dims.push_back(d.is_number_integer() ? std::to_string(d.get<int64_t>()) : d.get<std::string>());
  t.dtype = j.value("dtype", "dtype");
  t.padded = j.value("padded", true);
  if (j.contains("values")) {
    const json& v = j["values"];
    for (const auto& c : field(v, "classes")) {
      auto vc = parse_value_class(c.get<std::string>());
      if (!vc) return invalid_argument(fmt::format("tensor {}: unknown value class '{}'", t.name, c.get<std::string>()));
      t.values.classes.push_back(*vc);
    }
    for (const auto& s : field(v, "specials")) {
      const std::string n = s.get<std::string>();
      if (n == "nan") t.values.specials |= kSpecialNaN;
      else if (n == "+inf") t.values.specials |= kSpecialPosInf;
      else if (n == "-inf") t.values.specials |= kSpecialNegInf;
      else if (n == "-0") t.values.specials |= kSpecialNegZero;
      else if (n == "all") t.values.specials |= kSpecialAll;
      else return invalid_argument(fmt::format("tensor {}: unknown special '{}' (nan, +inf, -inf, -0, all)", t.name, n));
    }
    t.values.inject_percent = v.value("inject_percent", 15);
    t.values.int_hi = v.value("int_hi", 0.0);
    t.values.int_hi_param = v.value("int_hi_param", "");
  }
  return t;
}

/// The dtype a tensor has in a case.
DType dtype_in_case(const Case& c, size_t t) {
  return c.tensors[t].desc.dtype;
}

std::vector<size_t> output_indices(const Case& c) {
  std::vector<size_t> o;
  for (size_t t = 0; t < c.tensors.size(); ++t)
    if (c.tensors[t].role != Role::kIn) o.push_back(t);
  return o;
}

std::string arith_json(const Arithmetic& a) {
  return json{{"fast_math", a.fast_math}, {"ftz", a.ftz}, {"tiles", a.tiles}}.dump();
}

/// Host views of a case's tensors as assay_tensor (names and dtype strings kept alive here).
struct TensorViews {
  std::vector<std::string> names, dtypes;
  std::vector<std::vector<int64_t>> shapes, strides;
  std::vector<assay_tensor> t;
  void build(const Case& c, const std::vector<void*>& data) {
    const size_t n = c.tensors.size();
    names.resize(n), dtypes.resize(n), shapes.resize(n), strides.resize(n), t.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const auto& ts = c.tensors[i];
      names[i] = ts.name;
      dtypes[i] = std::string(dtype_name(ts.desc.dtype));
      shapes[i] = ts.desc.shape;
      strides[i] = ts.desc.strides;
      t[i] = {names[i].c_str(), dtypes[i].c_str(), static_cast<int>(ts.role), static_cast<int>(ts.desc.rank()),
              shapes[i].data(), strides[i].data(), data[i]};
    }
  }
};

/// A bound model of bounds.h chosen by name in the declaration.
struct BoundModel {
  std::string model;     ///< ulp, dot, sum, exact, callback
  double ulps = 1;       ///< ulp: ulps of `compute` (vs the correctly rounded result)
  DType compute = DType::kF32;
  DType acc = DType::kF32;
  std::string length;    ///< dot: the reduction length param (k); sum: n
};

StatusOr<BoundModel> bound_from(const json& j0) {
  const json j = j0.is_object() ? j0 : json::object();
  BoundModel b;
  b.model = j.value("model", "callback");
  b.ulps = j.value("ulps", 1.0);
  if (j.contains("compute")) {
    ASSAY_ASSIGN_OR_RETURN(b.compute, dtype_named(j["compute"].get<std::string>()));
  }
  if (j.contains("acc")) {
    ASSAY_ASSIGN_OR_RETURN(b.acc, dtype_named(j["acc"].get<std::string>()));
  }
  b.length = j.value("length", "");
  if (b.model != "ulp" && b.model != "dot" && b.model != "sum" && b.model != "exact" && b.model != "callback")
    return invalid_argument(fmt::format("bound model '{}' is none of ulp, dot, sum, exact, callback", b.model));
  if ((b.model == "dot" || b.model == "sum") && b.length.empty())
    return invalid_argument(fmt::format("bound model '{}' needs 'length': the param of the reduction length", b.model));
  return b;
}

double model_tol_finite(const BoundModel& b, const Arithmetic& a, DType in, DType out, int64_t len, double r,
                        double mag);

/// tol of one element under a named model; mag from the reference (dot: sum |a||b|, sum: sum |x|).
double model_tol(const BoundModel& b, const Arithmetic& a, DType in, DType out, int64_t len, double ref, double mag) {
  if (!std::isfinite(ref)) return 0;  // NaN / Inf must match the reference's pattern
  const double r = std::fabs(ref);
  const double t = model_tol_finite(b, a, in, out, len, r, mag);
  // A result within its tolerance of the output's largest finite value may round to Inf: no bound.
  return r + t >= max_finite(out) ? INFINITY : t;
}

double model_tol_finite(const BoundModel& b, const Arithmetic& a, DType in, DType out, int64_t len, double r,
                        double mag) {
  if (b.model == "ulp") {
    // ulps of the computing type at |ref|, + half an ulp of a narrower output (the store), +
    // the smallest normal of the computing type under flush-to-zero ([CUDA] ulp tables).
    double t = b.ulps * ulp_of(r, b.compute);
    if (unit_roundoff(out) > unit_roundoff(b.compute)) t += 0.5 * ulp_of(r, out) * (1 + unit_roundoff(out));
    if (a.ftz || a.fast_math) t += min_normal(b.compute);
    return t;
  }
  if (b.model == "dot") {
    GemmBoundModel m;
    m.in = in, m.acc = b.acc, m.out = out, m.k = len;
    return gemm_bounds(m).ceiling.tol(r, mag);
  }
  ReductionModel m;
  m.in = in, m.acc = b.acc, m.out = out, m.n = len;
  return sum_bounds(m).ceiling.tol(r, mag);
}

Status op_from_json(const json& j, assay_reference_fn ref_fn, assay_bound_fn bound_fn, void* user) {
  OpDef op;
  op.name = j.at("name").get<std::string>();
  op.description = j.value("description", "");
  for (const auto& p : field(j, "params")) {
    ASSAY_ASSIGN_OR_RETURN(ParamDef d, param_from(p));
    op.params.push_back(std::move(d));
  }
  for (const auto& t : field(j, "tensors")) {
    ASSAY_ASSIGN_OR_RETURN(TensorDef d, tensor_from(t));
    op.tensors.push_back(std::move(d));
  }
  for (const auto& [k, v] : field(j, "conventions").items()) op.conventions[k] = v.get<std::string>();
  ASSAY_ASSIGN_OR_RETURN(BoundModel bm, bound_from(field(j, "bound")));
  if (bm.model == "callback" && bound_fn == nullptr)
    return invalid_argument(fmt::format("register_op({}): bound 'callback' without a bound callback", op.name));
  if (ref_fn == nullptr) return invalid_argument(fmt::format("register_op({}): no reference callback", op.name));
  op.bound_name = j.value("bound_name", bm.model == "callback" ? std::string("bound") : bm.model + " bound");

  op.reference = [ref_fn, user](const Case& c, const std::vector<HostTensor>& hv, std::vector<OutputRef>& outs) {
    std::vector<void*> data;
    for (const auto& h : hv) data.push_back(const_cast<double*>(h.data));
    TensorViews tv;
    tv.build(c, data);
    const auto oi = output_indices(c);
    outs.assign(oi.size(), {});
    std::vector<double*> refp, magp;
    for (size_t o = 0; o < oi.size(); ++o) {
      const size_t n = static_cast<size_t>(hv[oi[o]].v.rows * hv[oi[o]].v.cols);
      outs[o].ref.assign(n, std::nan(""));
      outs[o].aux.assign(1, std::vector<double>(n, 0.0));
      refp.push_back(outs[o].ref.data());
      magp.push_back(outs[o].aux[0].data());
    }
    g_error.clear();
    const std::string params = c.params.dump();
    if (ref_fn(user, params.c_str(), static_cast<int>(tv.t.size()), tv.t.data(), refp.data(), magp.data()) != 0)
      return internal_error(fmt::format("{}: the reference callback failed{}", c.op, g_error.empty() ? "" : ": " + g_error));
    return ok_status();
  };
  op.bound = [bm, bound_fn, user](const Case& c, const Arithmetic& a, const std::vector<HostTensor>& hv,
                                  std::vector<OutputRef>& outs) {
    const auto oi = output_indices(c);
    for (auto& o : outs) o.tol.assign(o.ref.size(), 0.0);
    if (bm.model == "callback") {
      std::vector<void*> data;
      for (const auto& h : hv) data.push_back(const_cast<double*>(h.data));
      TensorViews tv;
      tv.build(c, data);
      std::vector<const double*> refp, magp;
      std::vector<double*> tolp;
      for (auto& o : outs) refp.push_back(o.ref.data()), magp.push_back(o.aux[0].data()), tolp.push_back(o.tol.data());
      g_error.clear();
      const std::string params = c.params.dump(), arith = arith_json(a);
      if (bound_fn(user, params.c_str(), arith.c_str(), static_cast<int>(tv.t.size()), tv.t.data(), refp.data(),
                   magp.data(), tolp.data()) != 0)
        return internal_error(fmt::format("{}: the bound callback failed{}", c.op, g_error.empty() ? "" : ": " + g_error));
      return ok_status();
    }
    const DType in = c.tensors.empty() ? DType::kF32 : dtype_in_case(c, 0);
    const int64_t len = bm.length.empty() ? 0 : Params(c.params).i(bm.length);
    for (size_t o = 0; o < outs.size(); ++o) {
      auto& r = outs[o];
      if (bm.model == "exact") {
        r.exact = true;
        continue;
      }
      const DType out = dtype_in_case(c, oi[o]);
      for (size_t l = 0; l < r.ref.size(); ++l) r.tol[l] = model_tol(bm, a, in, out, len, r.ref[l], r.aux[0][l]);
    }
    return ok_status();
  };
  return register_op(std::move(op));
}

StatusOr<Contract> contract_from(const json& j0) {
  const json j = j0.is_object() ? j0 : json::object();
  Contract k;
  for (const auto& [p, v] : field(j, "multiple_of").items()) k.multiple_of(p, v.get<int64_t>());
  for (const auto& [p, v] : field(j, "min").items()) k.min(p, v.get<int64_t>());
  for (const auto& [p, v] : field(j, "max").items()) k.max(p, v.get<int64_t>());
  for (const auto& e : field(j, "equal")) k.equal(e.at(0).get<std::string>(), e.at(1).get<std::string>());
  for (const auto& [p, v] : field(j, "only").items()) k.only(p, v.get<std::vector<json>>());
  if (j.contains("dtypes")) {
    std::vector<DType> ds;
    for (const auto& n : j["dtypes"]) {
      ASSAY_ASSIGN_OR_RETURN(DType d, dtype_named(n.get<std::string>()));
      ds.push_back(d);
    }
    k.dtypes(ds, j.value("dtype_param", "dtype"));
  }
  if (j.value("contiguous", false)) k.contiguous();
  if (j.value("aligned", 0) > 0) k.aligned(j["aligned"].get<int64_t>());
  for (const auto& [p, v] : field(j, "switches_at").items())
    k.switches_at(p, v.get<std::vector<int64_t>>());
  for (const auto& t : field(j, "accumulates")) k.accumulates(t.get<std::string>());
  for (const auto& c : field(j, "conventions")) k.convention(c.get<std::string>());
  if (j.value("fast_math", false)) k.fast_math();
  if (j.value("ftz", false)) k.ftz();
  for (const auto& [n, v] : field(j, "tiles").items()) k.tile(n, v.get<int64_t>());
  return k;
}

Status variant_from_json(const std::string& op_name, const json& j, assay_launch_fn launch, void* user) {
  const OpDef* op = find_op(op_name);
  if (op == nullptr) return not_found(fmt::format("unknown op '{}'", op_name));
  if (launch == nullptr) return invalid_argument("add_variant: no launch callback");
  VariantDef v;
  v.name = j.at("name").get<std::string>();
  v.description = j.value("description", "");
  v.deterministic = j.value("deterministic", true);
  v.mutant = j.value("mutant", false);
  v.source = j.value("source", "");
  ASSAY_ASSIGN_OR_RETURN(v.contract, contract_from(field(j, "contract")));
  std::vector<std::string> names;
  for (const auto& t : op->tensors) names.push_back(t.name);
  v.launch = [launch, user, names](const Params& p, const std::vector<DevTensor>& t, cudaStream_t s) -> cudaError_t {
    std::vector<std::string> dtypes(t.size());
    std::vector<assay_tensor> at(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      dtypes[i] = std::string(dtype_name(t[i].dtype));
      at[i] = {i < names.size() ? names[i].c_str() : "", dtypes[i].c_str(), 0, static_cast<int>(t[i].shape.size()),
               t[i].shape.data(), t[i].strides.data(), t[i].ptr};
    }
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) device = 0;
    const std::string params = p.json().dump();
    return static_cast<cudaError_t>(
        launch(user, params.c_str(), static_cast<int>(at.size()), at.data(), static_cast<void*>(s), device));
  };
  return add_variant(op_name, std::move(v));
}

json param_json(const ParamDef& p) {
  static const char* kinds[] = {"int", "real", "flag", "choice", "dtype"};
  json j{{"name", p.name}, {"kind", p.size ? "extent" : kinds[static_cast<int>(p.kind)]}, {"doc", p.doc}};
  if (p.kind == ParamKind::kInt) j["lo"] = p.lo, j["hi"] = p.hi, j["aim"] = p.edges;
  else j["values"] = p.values;
  j["optional"] = p.absent_weight > 0;
  return j;
}

// ---- host evaluation ---------------------------------------------------------------------------------

Status host_evaluate(const Case& c0, const std::string& variant, assay_array_fn sink, void* user) {
  const OpDef* op = find_op(c0.op);
  if (op == nullptr) return not_found(fmt::format("unknown op '{}' (or not declared through the op model)", c0.op));
  const VariantDef* v = variant.empty() ? nullptr : find_variant(c0.op, variant);
  if (!variant.empty() && v == nullptr) return not_found(fmt::format("op '{}' has no variant '{}'", c0.op, variant));
  ASSAY_RETURN_IF_ERROR(validate_case(*op, c0));
  const Contract none;
  const Contract& k = v != nullptr ? v->contract : none;
  Case c = c0;
  if (!k.conventions().empty()) c.params["conventions"] = k.conventions();
  const size_t nt = c.tensors.size();
  std::vector<std::vector<unsigned char>> images(nt);
  std::vector<unsigned char*> img(nt);
  std::vector<View2D> views(nt);
  for (size_t t = 0; t < nt; ++t) {
    const auto& T = c.tensors[t];
    images[t].assign(static_cast<size_t>(T.desc.extent()) * dtype_size(T.desc.dtype), 0);
    img[t] = images[t].data();
    views[t] = view_of(T.desc);
    const uint64_t stream = fnv1a64(T.name.data(), T.name.size());
    if (T.role == Role::kOut)
      materialize_output(T.desc, img[t]);
    else
      materialize(T.desc, T.values, stream, img[t]);
  }
  if (op->prepare) op->prepare(c, img);
  std::vector<std::vector<double>> host(nt);
  std::vector<HostTensor> hv;
  for (size_t t = 0; t < nt; ++t) {
    const auto& d = c.tensors[t].desc;
    host[t].resize(static_cast<size_t>(d.extent()));
    for (int64_t i = 0; i < d.extent(); ++i)
      host[t][static_cast<size_t>(i)] = load_as_double(d.dtype, img[t] + static_cast<size_t>(i) * dtype_size(d.dtype));
    hv.push_back({host[t].data() + d.offset, views[t]});
  }
  // Inputs, dense: what a kernel reads.
  for (size_t t = 0; t < nt; ++t) {
    const View2D& w = views[t];
    std::vector<double> dense(static_cast<size_t>(w.rows * w.cols));
    for (int64_t i = 0; i < w.rows; ++i)
      for (int64_t j = 0; j < w.cols; ++j) dense[static_cast<size_t>(i * w.cols + j)] = hv[t].at(i, j);
    sink(user, "input", static_cast<int>(t), static_cast<int64_t>(dense.size()), dense.data());
  }
  std::vector<OutputRef> refs;
  ASSAY_RETURN_IF_ERROR(op->reference(c, hv, refs));
  if (op->bound) ASSAY_RETURN_IF_ERROR(op->bound(c, k.arithmetic(), hv, refs));
  for (size_t o = 0; o < refs.size(); ++o) {
    for (double& t : refs[o].tol)
      if (std::isnan(t)) t = INFINITY;
    sink(user, "ref", static_cast<int>(o), static_cast<int64_t>(refs[o].ref.size()), refs[o].ref.data());
    sink(user, "tol", static_cast<int>(o), static_cast<int64_t>(refs[o].tol.size()), refs[o].tol.data());
    const double ex = refs[o].exact ? 1 : 0;
    sink(user, "exact", static_cast<int>(o), 1, &ex);
  }
  return ok_status();
}

// ---- campaigns and workers -----------------------------------------------------------------------------

std::function<pid_t(int, int, int, const std::vector<int>&)> fork_hook(assay_fork_fn fork_fn, void* user) {
  if (fork_fn == nullptr) return {};
  return [fork_fn, user](int device, int in_fd, int out_fd, const std::vector<int>& close_fds) -> pid_t {
    return static_cast<pid_t>(fork_fn(user, device, in_fd, out_fd, static_cast<int>(close_fds.size()), close_fds.data()));
  };
}

json failure_json(const FoundFailure& f, const CampaignReport& r, const OpSpec& spec, const CampaignOptions& o) {
  json j = found_json(f, r.device, spec, o);
  j["summary"] = f.verdict.summary();
  j["shrunk"] = f.shrunk.to_json();
  j["shrunk_summary"] = f.shrunk.summary();
  j["original"] = f.original.to_json();
  j["seconds_to_find"] = f.seconds_to_find;
  j["seconds_to_shrink"] = f.seconds_to_shrink;
  j["path"] = f.path;
  return j;
}

}  // namespace
}  // namespace assay

using namespace assay;
using nlohmann::json;

extern "C" {

const char* assay_version(void) {
  return ASSAY_VERSION;
}
const char* assay_last_error(void) {
  return g_error.c_str();
}
void assay_set_error(const char* message) {
  g_error = message != nullptr ? message : "";
}
void assay_free(char* p) {
  std::free(p);
}

int assay_register_op(const char* decl_json, assay_reference_fn reference, assay_bound_fn bound, void* user) {
  return guarded(
      [&] {
        const Status s = op_from_json(json::parse(decl_json), reference, bound, user);
        return s.ok() ? 0 : fail(s);
      },
      1);
}

int assay_add_variant(const char* op, const char* decl_json, assay_launch_fn launch, void* user) {
  return guarded(
      [&] {
        const Status s = variant_from_json(op, json::parse(decl_json), launch, user);
        return s.ok() ? 0 : fail(s);
      },
      1);
}

char* assay_list_ops(void) {
  json names = json::array();
  for (const OpSpec* s : all_specs()) names.push_back(s->name());
  return dup_json({{"ops", names}});
}

char* assay_describe_op(const char* op) {
  return guarded(
      [&]() -> char* {
        const OpSpec* spec = spec_of(op);
        if (spec == nullptr) return nullptr;
        json j{{"name", spec->name()}, {"description", spec->description()}};
        if (const OpDef* d = find_op(op)) {
          for (const auto& p : d->params) j["params"].push_back(param_json(p));
          for (const auto& t : d->tensors)
            j["tensors"].push_back({{"name", t.name}, {"role", std::string(role_name(t.role))}, {"dims", t.dims},
                                    {"dtype", t.dtype}});
          j["bound_name"] = d->bound_name;
        }
        for (const auto& v : spec->variants()) {
          json jv{{"name", v.name}, {"description", v.description}, {"mutant", v.mutant},
                  {"deterministic", v.deterministic}, {"source", v.source}};
          if (const Contract* k = spec->contract(v.name)) jv["contract"] = k->describe();
          j["variants"].push_back(jv);
        }
        return dup_json(j);
      },
      nullptr);
}

char* assay_generate(const char* op, const char* variant, uint64_t seed, int64_t index, int64_t max_dim) {
  return guarded(
      [&]() -> char* {
        const OpSpec* spec = spec_of(op);
        if (spec == nullptr) return nullptr;
        const std::string v = variant != nullptr ? variant : "";
        if (!v.empty() && !spec->has_variant(v)) {
          fail(fmt::format("op '{}' has no variant '{}'", op, v));
          return nullptr;
        }
        GenPlan plan{seed, GenConfig{max_dim, v}};
        Case c = generate_case(*spec, plan, index);
        c.variant = v;
        return dup_json(c.to_json());
      },
      nullptr);
}

int assay_validate(const char* case_json) {
  auto c = parse_case(case_json);
  if (!c.ok()) return fail(c.status());
  const OpSpec* spec = spec_of(c->op);
  if (spec == nullptr) return 1;
  const Status s = spec->validate(*c);
  return s.ok() ? 0 : fail(s);
}

char* assay_outside_contract(const char* case_json, const char* variant) {
  auto c = parse_case(case_json);
  if (!c.ok()) return fail(c.status()), nullptr;
  const OpSpec* spec = spec_of(c->op);
  if (spec == nullptr) return nullptr;
  if (!spec->has_variant(variant)) return fail(fmt::format("op '{}' has no variant '{}'", c->op, variant)), nullptr;
  auto o = spec->outside(*c, variant);
  return dup_json({{"outside", o ? json(*o) : json(nullptr)}});
}

char* assay_shrink_candidates(const char* case_json) {
  auto c = parse_case(case_json);
  if (!c.ok()) return fail(c.status()), nullptr;
  const OpSpec* spec = spec_of(c->op);
  if (spec == nullptr) return nullptr;
  json arr = json::array();
  for (const auto& x : spec->shrink(*c)) arr.push_back(x.to_json());
  return dup_json(arr);
}

char* assay_shrink(const char* case_json, assay_judge_fn judge, void* user, int max_evals) {
  return guarded(
      [&]() -> char* {
        auto c = parse_case(case_json);
        if (!c.ok()) return fail(c.status()), nullptr;
        const OpSpec* spec = spec_of(c->op);
        if (spec == nullptr) return nullptr;
        bool stopped = false;
        BatchJudge j = [&](const std::vector<Case>& batch) -> std::optional<size_t> {
          if (stopped) return std::nullopt;
          json arr = json::array();
          for (const auto& x : batch) arr.push_back(x.to_json());
          const int r = judge(user, arr.dump().c_str());
          if (r == -2) stopped = true;
          if (r < 0 || static_cast<size_t>(r) >= batch.size()) return std::nullopt;
          return static_cast<size_t>(r);
        };
        ShrinkLimits limits;
        limits.max_evals = max_evals > 0 ? max_evals : 4000;
        ShrinkOutcome so = shrink_case(*spec, *c, j, limits);
        so.minimal.variant = c->variant;
        return dup_json({{"minimal", so.minimal.to_json()},
                         {"summary", so.minimal.summary()},
                         {"steps", so.steps},
                         {"evals", so.evals},
                         {"stopped", stopped || so.stopped_by_limit}});
      },
      nullptr);
}

int assay_host_evaluate(const char* case_json, const char* variant, assay_array_fn sink, void* user) {
  return guarded(
      [&] {
        auto c = parse_case(case_json);
        if (!c.ok()) return fail(c.status());
        const Status s = host_evaluate(*c, variant != nullptr ? variant : "", sink, user);
        return s.ok() ? 0 : fail(s);
      },
      1);
}

char* assay_write_entry(const char* root, const char* case_json, const char* found_json) {
  return guarded(
      [&]() -> char* {
        auto c = parse_case(case_json);
        if (!c.ok()) return fail(c.status()), nullptr;
        const json found = found_json != nullptr && *found_json ? json::parse(found_json) : json::object();
        auto p = write_entry(root, *c, found);
        if (!p.ok()) return fail(p.status()), nullptr;
        return dup_json({{"path", *p}});
      },
      nullptr);
}

char* assay_read_entry(const char* path) {
  return guarded(
      [&]() -> char* {
        auto e = read_entry(path);
        if (!e.ok()) return fail(e.status()), nullptr;
        return dup_json({{"case", e->c.to_json()},
                         {"id", e->c.id()},
                         {"summary", e->c.summary()},
                         {"found", e->found},
                         {"replay", e->replay},
                         {"path", e->path}});
      },
      nullptr);
}

char* assay_list_entries(const char* paths_json) {
  return guarded(
      [&]() -> char* {
        auto files = list_entries(json::parse(paths_json).get<std::vector<std::string>>());
        if (!files.ok()) return fail(files.status()), nullptr;
        return dup_json(*files);
      },
      nullptr);
}

int assay_device_count(void) {
  // In a child: this process must not initialise CUDA before it forks its workers.
  int fds[2];
  if (::pipe(fds) != 0) return fail(std::string("pipe: ") + std::strerror(errno)), -1;
  const pid_t pid = ::fork();
  if (pid < 0) return fail(std::string("fork: ") + std::strerror(errno)), -1;
  if (pid == 0) {
    ::close(fds[0]);
    auto n = gpu::device_count();
    const std::string msg = n.ok() ? std::to_string(*n) : "-1 " + n.status().message();
    (void)!::write(fds[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t r; (r = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (out.empty()) return fail("the CUDA probe process died"), -1;
  if (out.rfind("-1", 0) == 0) return fail(out.size() > 3 ? out.substr(3) : "no CUDA device"), -1;
  return std::atoi(out.c_str());
}

char* assay_run_campaign(const char* op, const char* options_json, assay_fork_fn fork_fn, void* fork_user,
                         assay_progress_fn progress, void* progress_user) {
  gpu::prefer_queue_per_stream();  // in effect where this process has no CUDA context yet, and in its workers
  return guarded(
      [&]() -> char* {
        const OpSpec* spec = spec_of(op);
        if (spec == nullptr) return nullptr;
        const json j = json::parse(options_json != nullptr && *options_json ? options_json : "{}");
        CampaignOptions o;
        o.variants = j.value("variants", std::vector<std::string>{});
        o.max_cases = j.value("cases", int64_t{0});
        o.max_seconds = j.value("seconds", 0.0);
        o.seed = j.value("seed", uint64_t{1});
        o.lanes = j.value("lanes", 2);
        o.devices = j.value("devices", std::vector<int>{0});
        o.gen.max_dim = j.value("max_dim", int64_t{2048});
        o.gen.target = j.value("target", std::string());
        o.corpus_dir = j.value("corpus", std::string("corpora"));
        o.keep_going = j.value("keep_going", false);
        o.case_timeout_s = j.value("case_timeout", 60.0);
        o.run.repeat = j.value("repeat", 1);
        o.run.vendor_share = j.value("vendor_share", RunOptions{}.vendor_share);
        o.max_shrink_evals = j.value("max_shrink_evals", 4000);
        o.max_shrink_seconds = j.value("max_shrink_seconds", 120.0);
        o.fork_worker = fork_hook(fork_fn, fork_user);
        if (progress != nullptr)
          o.progress = [progress, progress_user](const CampaignProgress& p) {
            const std::string s = json{{"cases", p.cases},
                                       {"failures", p.failures},
                                       {"elapsed_s", p.elapsed_s},
                                       {"time_left_s", p.time_left_s},
                                       {"shrinking", p.shrinking}}
                                      .dump();
            progress(progress_user, s.c_str());
          };
        auto rep = run_campaign(*spec, o);
        if (!rep.ok()) return fail(rep.status()), nullptr;
        const CampaignReport& r = *rep;
        json out{{"op", r.op},
                 {"device", r.device},
                 {"lanes", r.lanes},
                 {"seed", o.seed},
                 {"cases", r.cases},
                 {"seconds", r.seconds},
                 {"cases_per_second", r.cases_per_second()},
                 {"exact_cases", r.exact_cases}};
        out["variants"] = json::object();
        for (const auto& [name, st] : r.per_variant)
          out["variants"][name] = {{"cases", st.cases}, {"failures", st.failures}, {"max_ratio", st.max_ratio}};
        out["failures"] = json::array();
        for (const auto& f : r.failures) out["failures"].push_back(failure_json(f, r, *spec, o));
        return dup_json(out);
      },
      nullptr);
}

char* assay_run_case(const char* case_json, const char* variants_json, const char* options_json, assay_fork_fn fork_fn,
                     void* fork_user) {
  return guarded(
      [&]() -> char* {
        auto c = parse_case(case_json);
        if (!c.ok()) return fail(c.status()), nullptr;
        const OpSpec* spec = spec_of(c->op);
        if (spec == nullptr) return nullptr;
        if (Status s = spec->validate(*c); !s.ok()) return fail(s), nullptr;
        std::vector<std::string> variants =
            json::parse(variants_json != nullptr && *variants_json ? variants_json : "[]").get<std::vector<std::string>>();
        if (variants.empty())
          variants = c->variant.empty() ? spec->default_variants() : std::vector<std::string>{c->variant};
        for (const auto& v : variants)
          if (!spec->has_variant(v)) return fail(fmt::format("op '{}' has no variant '{}'", c->op, v)), nullptr;
        const json j = json::parse(options_json != nullptr && *options_json ? options_json : "{}");
        const int device = j.value("device", 0);
        std::unique_ptr<Executor> exec;
        if (fork_fn == nullptr) {
          auto e = make_in_process_executor(*spec, GenPlan{}, 1, device, RunOptions{});
          if (!e.ok()) return fail(e.status()), nullptr;
          exec = std::move(e).value();
        } else {
          ProcessOptions po;
          po.devices = {device};
          po.lanes = 1;
          po.case_timeout_s = j.value("case_timeout", 60.0);
          po.fork_worker = fork_hook(fork_fn, fork_user);
          auto e = make_process_executor(spec->name(), GenPlan{}, po);
          if (!e.ok()) return fail(e.status()), nullptr;
          exec = std::move(e).value();
        }
        exec->submit({0, std::nullopt, *c, variants});
        JobResult r = exec->wait();
        if (!r.status.ok()) return fail(r.status), nullptr;
        json out{{"device", exec->device()}, {"verdicts", json::array()}};
        for (const auto& v : r.verdicts) {
          json jv = v.to_json();
          jv["summary"] = v.summary();
          jv["passed"] = v.passed();
          out["verdicts"].push_back(jv);
        }
        return dup_json(out);
      },
      nullptr);
}

int assay_worker_serve(const char* op, const char* plan_json, int device, int in_fd, int out_fd) {
  gpu::prefer_queue_per_stream();
  return guarded(
      [&] {
        const json j = json::parse(plan_json != nullptr && *plan_json ? plan_json : "{}");
        WorkerConfig cfg;
        cfg.op = op;
        cfg.plan.seed = j.value("seed", uint64_t{1});
        cfg.plan.gen.max_dim = j.value("max_dim", int64_t{2048});
        cfg.plan.gen.target = j.value("target", std::string());
        // As run_campaign plans it: the named variants, else the op's default ones.
        cfg.plan.targets = j.value("targets", std::vector<std::string>{});
        if (const OpSpec* spec = find_spec(op); cfg.plan.targets.empty() && spec != nullptr)
          cfg.plan.targets = spec->default_variants();
        cfg.lanes = j.value("lanes", 2);
        cfg.run.repeat = j.value("repeat", 1);
        cfg.run.vendor_share = j.value("vendor_share", RunOptions{}.vendor_share);
        cfg.device = device;
        cfg.in_fd = in_fd;
        cfg.out_fd = out_fd;
        return run_worker(cfg);
      },
      3);
}

}  // extern "C"
