#include "harness/spec.h"

#include <algorithm>
#include <map>

namespace assay {
namespace {

std::map<std::string, std::unique_ptr<OpSpec>>& registry() {
  static std::map<std::string, std::unique_ptr<OpSpec>> r;  // construct on first use: static-init order safe
  return r;
}

std::string& program() {
  static std::string p = "assay";
  return p;
}

}  // namespace

const std::string& program_name() {
  return program();
}
void set_program_name(std::string name) {
  if (!name.empty()) program() = std::move(name);
}

std::vector<std::string> OpSpec::default_variants() const {
  std::vector<std::string> out;
  for (const auto& v : variants())
    if (!v.mutant && !v.vendor) out.push_back(v.name);
  return out;
}

bool OpSpec::has_variant(const std::string& name) const {
  const auto vs = variants();
  return std::any_of(vs.begin(), vs.end(), [&](const VariantInfo& v) { return v.name == name; });
}

bool register_spec(std::unique_ptr<OpSpec> spec) {
  const std::string name = spec->name();
  registry()[name] = std::move(spec);
  return true;
}

const OpSpec* find_spec(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second.get();
}

std::vector<const OpSpec*> all_specs() {
  std::vector<const OpSpec*> out;
  for (const auto& [name, spec] : registry()) out.push_back(spec.get());
  return out;
}

std::vector<Probe> OpSpec::probes(const std::string& variant, const Case& inside) const {
  (void)variant;
  (void)inside;
  return {};
}

}  // namespace assay
