#include "harness/case.h"

#include <cstdio>
#include <sstream>

#include <fmt/format.h>

namespace assay {

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kIn: return "in";
    case Role::kOut: return "out";
    case Role::kInOut: return "inout";
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
    return invalid_argument(fmt::format("{}: {}: {}", where, path, what));
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
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                    ch == '-';
    if (!ok) return false;
  }
  return true;
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
    if (role == "in") t.role = Role::kIn;
    else if (role == "out") t.role = Role::kOut;
    else if (role == "inout") t.role = Role::kInOut;
    else return r.err(p + ".role", fmt::format("unknown role '{}' (in, out, inout)", role));
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
