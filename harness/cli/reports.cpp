#include "harness/cli/reports.h"

#include <fmt/format.h>

namespace assay::cli {

void add_report_options(CLI::App* cmd, ReportPaths& p) {
  cmd->add_option("--json", p.json, "Write the report as JSON to this file (also when nothing could run)");
  cmd->add_option("--junit", p.junit, "Write a JUnit XML report to this file (also when nothing could run)");
}

CheckReport campaign_report(const std::string& command, const CampaignReport& r, const OpSpec& spec,
                            const CampaignOptions& o, bool prefix_op) {
  CheckReport c;
  c.command = command;
  c.target = r.op;
  c.device = r.device;
  c.seed = o.seed;
  c.seconds = r.seconds;
  nlohmann::json& j = c.fields;
  j["op"] = r.op;
  j["lanes"] = r.lanes;
  j["cases"] = r.cases;
  j["cases_per_second"] = r.cases_per_second();
  j["exact_cases"] = r.exact_cases;
  j["device_ref_cases"] = r.device_ref_cases;
  j["vendor_disagreements"] = r.vendor_disagreements;
  j["vendor"] = r.vendor.empty() ? nlohmann::json("no vendor counterpart") : nlohmann::json(r.vendor);
  j["shard"] = fmt::format("{}/{}", o.shard_index, o.shard_count);
  j["worker_restarts"] = r.recovery.worker_starts;
  j["worker_start_seconds"] = r.recovery.start_seconds;
  j["crash_recovery_seconds"] = r.recovery.seconds;
  if (r.interrupted != 0) j["interrupted_by_signal"] = r.interrupted;
  if (!r.infra.ok()) j["infrastructure_error"] = r.infra.message();
  j["variants"] = nlohmann::json::object();
  j["failures"] = nlohmann::json::array();
  for (const auto& [name, st] : r.per_variant) {
    j["variants"][name] = {{"cases", st.cases},
                           {"failures", st.failures},
                           {"max_ratio", st.max_ratio},
                           {"seconds", st.seconds},
                           {"not_applicable", st.not_applicable},
                           {"vendor_relative", vendor_json(r, st)},
                           {"accuracy_warnings", st.accuracy_warnings}};
    CheckCase t;
    t.name = prefix_op ? r.op + "/" + name : name;
    t.seconds = st.seconds;
    t.cases = st.cases;
    t.output = fmt::format(
        "{} cases, max error/bound {:.4g}, vendor-relative {}, {} accuracy warnings, {} not applicable (outside the "
        "contract){}",
        st.cases, st.max_ratio, vendor_cell(r, st), st.accuracy_warnings, st.not_applicable,
        st.first_warning.empty() ? "" : "; first: " + st.first_warning);
    t.fields = {{"op", r.op},
                {"variant", name},
                {"max_ratio", st.max_ratio},
                {"failures", st.failures},
                {"vendor_relative", vendor_json(r, st)},
                {"accuracy_warnings", st.accuracy_warnings}};
    for (const auto& f : r.failures) {
      if (f.variant != name) continue;
      if (t.failure.empty()) t.failure = f.verdict.summary();
      t.detail += fmt::format("{}\nshrunk: {}\n", f.verdict.summary(), f.shrunk.summary());
      if (!f.path.empty()) t.detail += fmt::format("replay: {} replay {}\n", program_name(), f.path);
    }
    if (!t.failure.empty() && t.detail.empty()) t.detail = t.failure;
    if (st.failures > 0 && t.failure.empty()) t.failure = fmt::format("{} failing cases", st.failures);
    c.cases.push_back(std::move(t));
  }
  for (const auto& f : r.failures) {
    nlohmann::json jf = found_json(f, r.device, spec, o);
    jf["seconds_to_find"] = f.seconds_to_find;
    jf["seconds_to_shrink"] = f.seconds_to_shrink;
    jf["shrunk"] = f.shrunk.to_json();
    jf["path"] = f.path;
    jf["shrink_state"] = f.shrink_state;
    j["failures"].push_back(std::move(jf));
  }
  return c;
}

nlohmann::json vendor_json(const CampaignReport& r, const VariantStats& st) {
  if (r.vendor.empty()) return "no vendor counterpart";
  nlohmann::json j = {{"vendor", r.vendor},
                      {"max_ratio", st.vendor_rel_max},
                      {"max_elementwise", st.vendor_rel_worst},
                      {"cases", st.vendor_rel_cases},
                      {"accuracy_warnings", st.accuracy_warnings},
                      {"warn_ratio", r.vendor_warn_ratio}};
  if (!st.first_warning.empty()) j["first_warning"] = st.first_warning;
  if (!st.vendor_not_run.empty()) j["not_run"] = st.vendor_not_run;
  return j;
}

std::string campaign_summary(const CampaignReport& r, uint64_t seed) {
  std::string out = fmt::format(
      "{} on {}, {} lanes, seed {}: {} cases in {:.1f} s ({:.0f} cases/s); exact tier {}, device fp64 reference {}, "
      "{}\n",
      r.op, r.device, r.lanes, seed, r.cases, r.seconds, r.cases_per_second(), r.exact_cases, r.device_ref_cases,
      r.vendor.empty() ? std::string("no vendor counterpart")
                       : fmt::format("vendor {} (outside the bound in {} cases; accuracy warning above {:g}x its error)",
                                     r.vendor, r.vendor_disagreements, r.vendor_warn_ratio));
  out += fmt::format("{:<28} {:>10} {:>9} {:>16} {:>21} {:>12} {:>14}\n", "variant", "cases", "failures",
                     "max err/bound", "max err/vendor err", "acc. warns", "not applicable");
  for (const auto& [name, st] : r.per_variant)
    out += fmt::format("{:<28} {:>10} {:>9} {:>16.4g} {:>21} {:>12} {:>14}\n", name, st.cases, st.failures,
                       st.max_ratio, vendor_cell(r, st), st.accuracy_warnings, st.not_applicable);
  if (r.recovery.worker_starts > 0 || r.recovery.seconds > 0)
    out += fmt::format("crashes and hangs: {} worker restarts ({:.1f} s starting them); {:.1f} s of the {:.1f} s spent "
                       "replacing workers and re-running their cases alone\n",
                       r.recovery.worker_starts, r.recovery.start_seconds, r.recovery.seconds, r.seconds);
  for (const auto& [name, st] : r.per_variant) {
    if (st.accuracy_warnings > 0)
      out += fmt::format("WARN {}: {} of {} passing cases far less accurate than {} (worst {:.4g}x its error); first: "
                         "{}\n",
                         name, st.accuracy_warnings, st.vendor_rel_cases, r.vendor, st.vendor_rel_max,
                         st.first_warning);
    else if (!r.vendor.empty() && st.vendor_rel_cases == 0 && st.cases > 0)
      out += fmt::format("note {}: {}\n", name,
                         st.vendor_not_run.empty() ? "vendor column not run (sampled out)" : st.vendor_not_run);
  }
  return out;
}

void merge_campaign(CheckReport& into, const CheckReport& part) {
  if (into.command.empty()) {
    into = part;
    into.fields = {{"campaigns", nlohmann::json::array({part.fields})}};
    return;
  }
  into.target += "," + part.target;
  into.seconds += part.seconds;
  into.interrupted = into.interrupted || part.interrupted;
  if (into.device.empty()) into.device = part.device;
  for (const auto& t : part.cases) into.cases.push_back(t);
  into.fields["campaigns"].push_back(part.fields);
}

CheckReport skipped_report(const std::string& command, const std::string& target, const std::string& reason) {
  CheckReport c;
  c.command = command;
  c.target = target;
  c.skipped = reason;
  return c;
}

Status write_campaign_reports(const std::string& command, const CampaignReport& r, const OpSpec& spec,
                              const CampaignOptions& o, const ReportPaths& p, bool interrupted) {
  if (!p.any()) return ok_status();
  CheckReport c = campaign_report(command, r, spec, o);
  c.interrupted = interrupted;
  return write_reports(c, p.json, p.junit);
}

}  // namespace assay::cli
