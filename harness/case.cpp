#include "harness/case.h"

#include <cstdio>
#include <sstream>

#include <fmt/format.h>

#include "harness/json_file.h"

namespace assay {

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kIn:
      return "in";
    case Role::kOut:
      return "out";
    case Role::kInOut:
      return "inout";
  }
  return "?";
}

const TensorSpec* Case::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}
TensorSpec* Case::find(const std::string& name) {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

// Fields added after format 1 are written only when they differ from their
// defaults: a case that does not use them keeps its bytes, hence its id.
void add_recipe_extras(const ValueRecipe& v, nlohmann::json& jv) {
  const ValueRecipe d;
  if (v.exp_min != d.exp_min) jv["exp_min"] = v.exp_min;
  if (v.exp_max != d.exp_max) jv["exp_max"] = v.exp_max;
  if (v.pareto_alpha != d.pareto_alpha) jv["pareto_alpha"] = v.pareto_alpha;
  if (v.mean != d.mean) jv["mean"] = v.mean;
  if (v.spread != d.spread) jv["spread"] = v.spread;
  if (v.overflow_factor != d.overflow_factor) jv["overflow_factor"] = v.overflow_factor;
  if (v.inject != d.inject) {
    nlohmann::json ji = nlohmann::json::object();
    auto names = [](uint8_t bits, uint8_t all, std::string_view (*name)(uint8_t)) {
      nlohmann::json a = nlohmann::json::array();
      for (uint8_t b = 1; b != 0 && b <= all; b = static_cast<uint8_t>(b << 1))
        if ((bits & b) != 0) a.push_back(name(b));
      return a;
    };
    ji["kinds"] = names(v.inject.kinds, kSpecialAll, special_name);
    if (v.inject.rate != d.inject.rate) ji["rate"] = v.inject.rate;
    if (v.inject.at != d.inject.at) ji["at"] = names(v.inject.at, kAtAll, inject_at_name);
    if (v.inject.tile != d.inject.tile) ji["tile"] = v.inject.tile;
    jv["inject"] = std::move(ji);
  }
}

}  // namespace

nlohmann::json Case::to_json() const {
  nlohmann::json j;
  j["format"] = kCaseFormat;
  j["op"] = op;
  j["variant"] = variant;
  j["params"] = params.is_null() ? nlohmann::json::object() : params;
  auto& ts = j["tensors"] = nlohmann::json::array();
  for (const auto& t : tensors) {
    nlohmann::json jt;
    jt["name"] = t.name;
    jt["role"] = role_name(t.role);
    jt["dtype"] = dtype_name(t.desc.dtype);
    jt["shape"] = t.desc.shape;
    jt["strides"] = t.desc.strides;
    jt["offset"] = t.desc.offset;
    if (t.role != Role::kOut) {
      jt["values"] = {{"class", value_class_name(t.values.cls)},
                      {"seed", fmt::format("{:#018x}", t.values.seed)},
                      {"scale", t.values.scale},
                      {"int_range", t.values.int_range}};
      add_recipe_extras(t.values, jt["values"]);
    }
    ts.push_back(std::move(jt));
  }
  return j;
}

namespace {

// Field readers: each failure is one line naming the file and the JSON path.
struct Reader {
  const std::string& where;
  Status err(const std::string& path, const std::string& what) const {
    // `what` may quote the file's strings: escaped, so the error stays one printable line.
    return invalid_argument(fmt::format("{}: {}: {}", where, path, printable(what, 300)));
  }
  StatusOr<const nlohmann::json*> field(const nlohmann::json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) return err(path + "." + key, "missing");
    return &*it;
  }
  StatusOr<std::string> str(const nlohmann::json& v, const std::string& path, size_t max_len = 256) const {
    if (!v.is_string()) return err(path, fmt::format("expected a string, got {}", v.type_name()));
    auto s = v.get<std::string>();
    if (s.size() > max_len) return err(path, fmt::format("string longer than {} characters", max_len));
    return s;
  }
  StatusOr<int64_t> int_in(const nlohmann::json& v, const std::string& path, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) return err(path, fmt::format("expected an integer, got {}", v.type_name()));
    int64_t x;
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return err(path, fmt::format("{} is out of range [{}, {}]", u, lo, hi));
      x = static_cast<int64_t>(u);
    } else {
      x = v.get<int64_t>();
    }
    if (x < lo || x > hi) return err(path, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
    return x;
  }
  StatusOr<double> num(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_number()) return err(path, fmt::format("expected a number, got {}", v.type_name()));
    return v.get<double>();
  }
  /// An array of names, each mapped to a bit by `parse`, OR-ed together.
  StatusOr<uint8_t> flag_list(const nlohmann::json& v, const std::string& path,
                              std::optional<uint8_t> (*parse)(std::string_view), const char* choices) const {
    if (!v.is_array()) return err(path, fmt::format("expected an array, got {}", v.type_name()));
    if (v.size() > 8) return err(path, "more than 8 entries");
    uint8_t bits = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string p = fmt::format("{}[{}]", path, i);
      ASSAY_ASSIGN_OR_RETURN(std::string name, str(v[i], p, 16));
      auto b = parse(name);
      if (!b) return err(p, fmt::format("unknown name '{}' ({})", name, choices));
      bits |= *b;
    }
    return bits;
  }
  StatusOr<std::vector<int64_t>> int_list(const nlohmann::json& v, const std::string& path, int64_t hi) const {
    if (!v.is_array()) return err(path, fmt::format("expected an array, got {}", v.type_name()));
    if (v.size() > 8) return err(path, "more than 8 dimensions");
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      ASSAY_ASSIGN_OR_RETURN(int64_t x, int_in(v[i], fmt::format("{}[{}]", path, i), 0, hi));
      out.push_back(x);
    }
    return out;
  }
};

bool is_safe_name(const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char ch : s) {
    const bool ok =
        (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

// The optional recipe fields (see add_recipe_extras); ranges are checked by
// validate_recipe, which names the field in the same one-line form.
Status read_recipe_extras(const Reader& r, const nlohmann::json& vv, const std::string& vp, ValueRecipe& v) {
  if (auto it = vv.find("exp_min"); it != vv.end()) {
    ASSAY_ASSIGN_OR_RETURN(v.exp_min, r.int_in(*it, vp + ".exp_min", -1100, 1100));
  }
  if (auto it = vv.find("exp_max"); it != vv.end()) {
    ASSAY_ASSIGN_OR_RETURN(v.exp_max, r.int_in(*it, vp + ".exp_max", -1100, 1100));
  }
  for (auto [key, field] :
       {std::pair{"pareto_alpha", &ValueRecipe::pareto_alpha}, std::pair{"mean", &ValueRecipe::mean},
        std::pair{"spread", &ValueRecipe::spread}, std::pair{"overflow_factor", &ValueRecipe::overflow_factor}}) {
    if (auto it = vv.find(key); it != vv.end()) {
      ASSAY_ASSIGN_OR_RETURN(v.*field, r.num(*it, vp + "." + key));
    }
  }
  if (auto it = vv.find("inject"); it != vv.end()) {
    const std::string ip = vp + ".inject";
    if (!it->is_object()) return r.err(ip, fmt::format("expected an object, got {}", it->type_name()));
    ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* kv, r.field(*it, ip, "kinds"));
    ASSAY_ASSIGN_OR_RETURN(v.inject.kinds, r.flag_list(*kv, ip + ".kinds", parse_special, "nan, +inf, -inf, -0"));
    if (auto jt = it->find("rate"); jt != it->end()) {
      ASSAY_ASSIGN_OR_RETURN(v.inject.rate, r.num(*jt, ip + ".rate"));
    }
    if (auto jt = it->find("at"); jt != it->end()) {
      ASSAY_ASSIGN_OR_RETURN(v.inject.at, r.flag_list(*jt, ip + ".at", parse_inject_at, "first, last, tile"));
    }
    if (auto jt = it->find("tile"); jt != it->end()) {
      ASSAY_ASSIGN_OR_RETURN(v.inject.tile, r.int_in(*jt, ip + ".tile", 0, int64_t{1} << 40));
    }
  }
  return validate_recipe(v, fmt::format("{}: {}", r.where, vp));
}

}  // namespace

StatusOr<Case> Case::from_json(const nlohmann::json& j, const std::string& where) {
  Reader r{where};
  if (!j.is_object()) return r.err("$", fmt::format("expected an object, got {}", j.type_name()));
  Case c;
  ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* fmtv, r.field(j, "$", "format"));
  ASSAY_ASSIGN_OR_RETURN(int64_t format, r.int_in(*fmtv, "$.format", 1, 1 << 20));
  if (format > kCaseFormat)
    return r.err("$.format", fmt::format("format {} is newer than this assay reads ({})", format, kCaseFormat));
  ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* opv, r.field(j, "$", "op"));
  ASSAY_ASSIGN_OR_RETURN(c.op, r.str(*opv, "$.op", 64));
  if (!is_safe_name(c.op, 64)) return r.err("$.op", "must be letters, digits, '_' or '-'");
  if (auto it = j.find("variant"); it != j.end()) {
    ASSAY_ASSIGN_OR_RETURN(c.variant, r.str(*it, "$.variant", 64));
    if (!c.variant.empty() && !is_safe_name(c.variant, 64))
      return r.err("$.variant", "must be letters, digits, '_' or '-'");
  }
  if (auto it = j.find("params"); it != j.end()) {
    if (!it->is_object()) return r.err("$.params", fmt::format("expected an object, got {}", it->type_name()));
    // Op parameters are scalars; each op's validator checks names and ranges.
    if (it->size() > 64) return r.err("$.params", "more than 64 parameters");
    for (const auto& [key, v] : it->items()) {
      if (!is_safe_name(key, 64)) return r.err("$.params", "parameter names must be letters, digits, '_' or '-'");
      if (v.is_string()) {
        ASSAY_RETURN_IF_ERROR(r.str(v, "$.params." + key, 256).status());
      } else if (!v.is_number() && !v.is_boolean()) {
        return r.err("$.params." + key, fmt::format("expected a number, boolean or string, got {}", v.type_name()));
      }
    }
    c.params = *it;
  } else {
    c.params = nlohmann::json::object();
  }
  ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* tsv, r.field(j, "$", "tensors"));
  if (!tsv->is_array()) return r.err("$.tensors", fmt::format("expected an array, got {}", tsv->type_name()));
  if (tsv->size() > 64) return r.err("$.tensors", "more than 64 tensors");
  constexpr int64_t kMaxDim = int64_t{1} << 40;
  for (size_t i = 0; i < tsv->size(); ++i) {
    const auto& jt = (*tsv)[i];
    const std::string p = fmt::format("$.tensors[{}]", i);
    if (!jt.is_object()) return r.err(p, fmt::format("expected an object, got {}", jt.type_name()));
    TensorSpec t;
    ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* nv, r.field(jt, p, "name"));
    ASSAY_ASSIGN_OR_RETURN(t.name, r.str(*nv, p + ".name", 32));
    if (!is_safe_name(t.name, 32)) return r.err(p + ".name", "must be letters, digits, '_' or '-'");
    if (c.find(t.name)) return r.err(p + ".name", fmt::format("duplicate tensor name '{}'", t.name));
    ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* rv, r.field(jt, p, "role"));
    ASSAY_ASSIGN_OR_RETURN(std::string role, r.str(*rv, p + ".role", 8));
    if (role == "in")
      t.role = Role::kIn;
    else if (role == "out")
      t.role = Role::kOut;
    else if (role == "inout")
      t.role = Role::kInOut;
    else
      return r.err(p + ".role", fmt::format("unknown role '{}' (in, out, inout)", role));
    ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* dv, r.field(jt, p, "dtype"));
    ASSAY_ASSIGN_OR_RETURN(std::string dt, r.str(*dv, p + ".dtype", 16));
    auto dtype = parse_dtype(dt);
    if (!dtype) return r.err(p + ".dtype", fmt::format("unknown dtype '{}'", dt));
    t.desc.dtype = *dtype;
    ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* sv, r.field(jt, p, "shape"));
    ASSAY_ASSIGN_OR_RETURN(t.desc.shape, r.int_list(*sv, p + ".shape", kMaxDim));
    ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* stv, r.field(jt, p, "strides"));
    ASSAY_ASSIGN_OR_RETURN(t.desc.strides, r.int_list(*stv, p + ".strides", kMaxDim));
    ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* ov, r.field(jt, p, "offset"));
    ASSAY_ASSIGN_OR_RETURN(t.desc.offset, r.int_in(*ov, p + ".offset", 0, kMaxDim));
    ASSAY_RETURN_IF_ERROR(t.desc.validate(fmt::format("{}: {} ({})", where, p, t.name)));
    if (t.role != Role::kOut) {
      ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* vv, r.field(jt, p, "values"));
      const std::string vp = p + ".values";
      if (!vv->is_object()) return r.err(vp, fmt::format("expected an object, got {}", vv->type_name()));
      ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* cv, r.field(*vv, vp, "class"));
      ASSAY_ASSIGN_OR_RETURN(std::string cls, r.str(*cv, vp + ".class", 32));
      auto vc = parse_value_class(cls);
      if (!vc) return r.err(vp + ".class", fmt::format("unknown value class '{}'", cls));
      t.values.cls = *vc;
      ASSAY_ASSIGN_OR_RETURN(const nlohmann::json* seedv, r.field(*vv, vp, "seed"));
      ASSAY_ASSIGN_OR_RETURN(std::string seed, r.str(*seedv, vp + ".seed", 18));
      char* end = nullptr;
      if (seed.size() < 3 || seed.substr(0, 2) != "0x")
        return r.err(vp + ".seed", "expected a hex string such as \"0x00000000000000ff\"");
      t.values.seed = std::strtoull(seed.c_str() + 2, &end, 16);
      if (end == nullptr || *end != '\0') return r.err(vp + ".seed", fmt::format("'{}' is not hexadecimal", seed));
      if (auto it = vv->find("scale"); it != vv->end()) {
        if (!it->is_number()) return r.err(vp + ".scale", fmt::format("expected a number, got {}", it->type_name()));
        t.values.scale = it->get<double>();
        if (!(t.values.scale >= 0 && t.values.scale < 1e300)) return r.err(vp + ".scale", "must be finite and >= 0");
      }
      if (auto it = vv->find("int_range"); it != vv->end()) {
        ASSAY_ASSIGN_OR_RETURN(t.values.int_range, r.int_in(*it, vp + ".int_range", 0, 1 << 20));
      }
      ASSAY_RETURN_IF_ERROR(read_recipe_extras(r, *vv, vp, t.values));
    }
    c.tensors.push_back(std::move(t));
  }
  return c;
}

std::string Case::id() const {
  const std::string canon = to_json().dump();
  return fmt::format("{:016x}", fnv1a64(canon.data(), canon.size()));
}

std::string Case::summary() const {
  std::string s = op;
  if (!variant.empty()) s += "[" + variant + "]";
  for (const auto& [k, v] : params.items()) s += fmt::format(" {}={}", k, v.dump());
  for (const auto& t : tensors) {
    s += fmt::format(" {}:{}", t.name, dtype_name(t.desc.dtype));
    if (t.role != Role::kOut) s += fmt::format("/{}", value_class_name(t.values.cls));
  }
  return s;
}

}  // namespace assay
