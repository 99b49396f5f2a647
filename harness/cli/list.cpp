#include "harness/cli/list.h"
#include "harness/op.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/op_model.h"
#include "harness/spec.h"

namespace assay::cli {

CLI::App* add_list_command(CLI::App& app, ListOptions& o) {
  auto* list = app.add_subcommand("list", "List ops and their kernel variants (planted-bug mutants: --mutants)");
  list->add_flag("--json", o.json, "Print JSON: [{op, description, params, tensors, variants: [{name, mutant, description, source, contract}]}]");
  list->add_option("--op", o.ops, "Only these ops, with their params and tensors (what a launcher receives)")->delimiter(',');
  list->add_flag("--mutants,--all", o.mutants, "Also the planted-bug variants (tests/mutants), marked [mutant]");
  list->add_flag("--no-mutants", o.no_mutants, "Leave the planted-bug variants out (the default)");
  return list;
}

namespace {

// What a launcher receives: the op's params (t[...] in tensor order below, p.i / p.r / p.b / p.s).
std::vector<std::string> describe_params(const OpDef& op) {
  std::vector<std::string> out;
  for (const auto& d : op.params) {
    std::string what;
    if (d.kind == ParamKind::kInt && d.values.empty())
      what = fmt::format("int in [{}, {}]{}", d.lo, d.hi, d.size ? ", an extent" : "");
    else if (d.kind == ParamKind::kBool)
      what = "flag";
    else
      what = fmt::format("one of {}", nlohmann::json(d.values).dump());
    if (d.absent_weight > 0 || d.when) what += ", optional";
    out.push_back(fmt::format("{}: {}{}", d.name, what, d.doc.empty() ? "" : " (" + d.doc + ")"));
  }
  return out;
}

std::vector<std::string> describe_tensors(const OpDef& op) {
  std::vector<std::string> out;
  int i = 0;
  for (const auto& t : op.tensors) {
    const char* role = t.role == Role::kIn ? "in" : t.role == Role::kOut ? "out" : "in/out";
    const std::string dims = t.shape ? std::string("[derived from the params]")
                                     : fmt::format("[{}]", fmt::join(t.dims, ", "));
    out.push_back(fmt::format("t[{}] {} {} {} ({}){}", i++, t.name, dims, role, t.dtype,
                              t.transposed_by.empty() ? "" : ", last two dims swapped where " + t.transposed_by));
  }
  return out;
}

}  // namespace

int run_list(const ListOptions& o) {
  std::vector<const OpSpec*> specs;
  if (o.ops.empty()) specs = all_specs();
  for (const auto& name : o.ops) {
    const OpSpec* s = find_spec(name);
    if (s == nullptr) {
      fmt::print(stderr, "assay: error: unknown op '{}' (see 'assay list')\n", name);
      return 2;
    }
    specs.push_back(s);
  }
  const bool mutants = o.mutants && !o.no_mutants;
  nlohmann::json j = nlohmann::json::array();
  int hidden = 0;
  for (const OpSpec* s : specs) {
    nlohmann::json jo = {{"op", s->name()}, {"description", s->description()}, {"variants", nlohmann::json::array()}};
    if (!o.json) fmt::print("{}: {}\n", s->name(), s->description());
    // The op's signature, as a launcher sees it: with --op in text, always in JSON.
    if (const OpDef* def = find_op(s->name()); def != nullptr) {
      const auto params = describe_params(*def), tensors = describe_tensors(*def);
      jo["params"] = params;
      jo["tensors"] = tensors;
      const std::string vendor = def->vendor.defined()
                                     ? fmt::format("{} (accuracy warning above {:g}x its error)", def->vendor.name,
                                                   def->vendor.warn_ratio)
                                     : std::string("no vendor counterpart");
      jo["vendor"] = def->vendor.defined() ? def->vendor.name : "no vendor counterpart";
      if (!o.json && !o.ops.empty()) {
        for (const auto& line : params) fmt::print("  param   {}\n", line);
        for (const auto& line : tensors) fmt::print("  tensor  {}\n", line);
        fmt::print("  vendor  {}\n", vendor);
      }
    }
    for (const auto& v : s->variants()) {
      if (v.mutant && !mutants) {
        ++hidden;
        continue;
      }
      const Contract* k = s->contract(v.name);
      const std::vector<std::string> contract =
          k != nullptr && !k->empty() ? k->describe() : std::vector<std::string>{};
      if (o.json) {
        jo["variants"].push_back({{"name", v.name},
                                  {"mutant", v.mutant},
                                  {"vendor", v.vendor},
                                  {"description", v.description},
                                  {"source", v.source},
                                  {"contract", contract}});
      } else {
        fmt::print("  {:<26} {}{}\n", v.name, v.mutant ? "[mutant] " : v.vendor ? "[vendor] " : "", v.description);
        for (const auto& line : contract) fmt::print("  {:<26}   contract: {}\n", "", line);
      }
    }
    j.push_back(std::move(jo));
  }
  if (o.json)
    fmt::print("{}\n", j.dump(2));
  else if (hidden > 0)
    fmt::print("({} planted-bug mutant variants not shown: assay list --mutants)\n", hidden);
  return 0;
}

StatusOr<std::vector<std::string>> gradcheck_ops(const std::string& name) {
  std::vector<std::string> backward, found;
  for (const OpSpec* s : all_specs()) {
    const std::string n = s->name();
    if (n.find("_bwd") != std::string::npos) backward.push_back(n);
  }
  if (std::find(backward.begin(), backward.end(), name) != backward.end()) return std::vector<std::string>{name};
  for (const auto& b : backward)
    if (b == name + "_bwd" || b.rfind(name + "_bwd_", 0) == 0) found.push_back(b);
  if (!found.empty()) return found;
  std::vector<std::string> forward;
  for (const auto& b : backward) forward.push_back(b.substr(0, b.find("_bwd")));
  std::sort(forward.begin(), forward.end());
  forward.erase(std::unique(forward.begin(), forward.end()), forward.end());
  return not_found(fmt::format("no backward op for '{}': gradcheck takes an op with a backward ({}) or the backward "
                               "op itself ({})",
                               name, fmt::join(forward, ", "), fmt::join(backward, ", ")));
}

std::string without_source_paths(const std::string& report) {
  static const std::regex kTestPath(R"(tests/[A-Za-z0-9_./-]+\.(cpp|h|cu))");
  return std::regex_replace(report, kTestPath, "assay's test suite");
}

}  // namespace assay::cli
