#include "harness/check_report.h"

#include <fmt/format.h>

#include "harness/build_info.h"
#include "harness/corpus.h"

namespace assay {

int CheckReport::failures() const {
  int n = 0;
  for (const auto& c : cases) n += c.failure.empty() ? 0 : 1;
  return n;
}

int CheckReport::skips() const {
  int n = 0;
  for (const auto& c : cases) n += c.failure.empty() && !c.skipped.empty() ? 1 : 0;
  return n;
}

namespace {

std::string status_of(const CheckReport& r) {
  if (r.failures() > 0) return "failed";
  if (r.interrupted) return "interrupted";
  if (!r.skipped.empty()) return "skipped";
  return "passed";
}

std::string suite_name(const CheckReport& r) {
  std::string cmd = r.command;
  for (char& c : cmd)
    if (c == ' ') c = '_';
  return r.target.empty() ? "assay." + cmd : fmt::format("assay.{}.{}", cmd, r.target);
}

}  // namespace

nlohmann::json report_json(const CheckReport& r) {
  nlohmann::json j = r.fields.is_object() ? r.fields : nlohmann::json::object();
  j["command"] = r.command;
  j["target"] = r.target;
  j["assay_version"] = std::string(version());
  j["git_revision"] = std::string(git_revision());
  j["device"] = r.device;
  j["seed"] = r.seed ? nlohmann::json(*r.seed) : nlohmann::json(nullptr);
  j["seconds"] = r.seconds;
  j["status"] = status_of(r);
  j["interrupted"] = r.interrupted;
  j["skip_reason"] = r.skipped;
  j["tests"] = nlohmann::json::array();
  for (const auto& c : r.cases) {
    nlohmann::json t = c.fields.is_object() ? c.fields : nlohmann::json::object();
    t["name"] = c.name;
    t["status"] = !c.failure.empty() ? "failed" : !c.skipped.empty() ? "skipped" : "passed";
    t["seconds"] = c.seconds;
    t["cases"] = c.cases;
    t["message"] = !c.failure.empty() ? c.failure : c.skipped;
    j["tests"].push_back(std::move(t));
  }
  return j;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? ' ' : c;
    }
  }
  return o;
}

std::string report_junit(const CheckReport& r) {
  std::vector<CheckCase> cases = r.cases;
  if (cases.empty() && !r.skipped.empty()) {
    CheckCase c;
    c.name = r.command;
    c.skipped = r.skipped;
    cases.push_back(std::move(c));
  }
  int failures = 0, skipped = 0;
  for (const auto& c : cases) {
    failures += c.failure.empty() ? 0 : 1;
    skipped += c.failure.empty() && !c.skipped.empty() ? 1 : 0;
  }
  const std::string suite = xml_escape(suite_name(r));
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"assay\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   cases.size(), failures, skipped, r.seconds);
  x += fmt::format("<testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   suite, cases.size(), failures, skipped, r.seconds);
  x += "  <properties>\n";
  auto prop = [&](const std::string& k, const std::string& v) {
    x += fmt::format("    <property name=\"{}\" value=\"{}\"/>\n", k, xml_escape(v));
  };
  prop("command", r.command);
  prop("target", r.target);
  prop("device", r.device.empty() ? "none" : r.device);
  if (r.seed) prop("seed", std::to_string(*r.seed));
  prop("assay_version", std::string(version()));
  prop("git_revision", std::string(git_revision()));
  prop("status", status_of(r));
  if (!r.skipped.empty()) prop("skip_reason", r.skipped);
  x += "  </properties>\n";
  for (const auto& c : cases) {
    x += fmt::format("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\">", suite, xml_escape(c.name),
                     c.seconds);
    if (!c.failure.empty()) {
      x += fmt::format("\n    <failure message=\"{}\">{}</failure>", xml_escape(c.failure),
                       xml_escape(c.detail.empty() ? c.failure : c.detail));
    } else if (!c.skipped.empty()) {
      x += fmt::format("\n    <skipped message=\"{}\"/>", xml_escape(c.skipped));
    }
    if (!c.output.empty()) x += fmt::format("\n    <system-out>{}</system-out>", xml_escape(c.output));
    x += c.failure.empty() && c.skipped.empty() && c.output.empty() ? "</testcase>\n" : "\n  </testcase>\n";
  }
  x += "</testsuite>\n</testsuites>\n";
  return x;
}

Status write_reports(const CheckReport& r, const std::string& json_path, const std::string& junit_path) {
  if (!json_path.empty()) ASSAY_RETURN_IF_ERROR(write_file_atomic(json_path, report_json(r).dump(2) + "\n"));
  if (!junit_path.empty()) ASSAY_RETURN_IF_ERROR(write_file_atomic(junit_path, report_junit(r)));
  return ok_status();
}

}  // namespace assay
