// The checking commands' reports (harness/check_report.h) built from what each command measured,
// and the --json / --junit options they share.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "harness/campaign.h"
#include "harness/check_report.h"
#include "harness/spec.h"

namespace assay::cli {

/// --json FILE and --junit FILE of one command.
struct ReportPaths {
  std::string json, junit;
  bool any() const { return !json.empty() || !junit.empty(); }
};

/// Adds --json and --junit to `cmd`.
void add_report_options(CLI::App* cmd, ReportPaths& p);

/// A fuzz or gradcheck campaign as a report: one case per variant (named "<op>/<variant>" when
/// `prefix_op`), its own share of the time, its failure with the shrunk case and the replay
/// command; the JSON keeps the campaign's fields (op, lanes, cases, variants, failures, ...).
CheckReport campaign_report(const std::string& command, const CampaignReport& r, const OpSpec& spec,
                            const CampaignOptions& o, bool prefix_op = false);

/// The summary a campaign prints: a header line (device, rate, exact tier, device reference, the
/// vendor column and its warning ratio, or "no vendor counterpart"), one row per variant (cases,
/// failures, worst error/bound, worst vendor-relative ratio, accuracy warnings, cases outside the
/// contract) and one WARN line per variant with accuracy warnings (the first one's detail).
std::string campaign_summary(const CampaignReport& r, uint64_t seed);

/// A variant's vendor-relative fields for the JSON report: {"max_ratio", "cases",
/// "accuracy_warnings", "warn_ratio", "first_warning"?, "not_run"?}, or the string
/// "no vendor counterpart".
nlohmann::json vendor_json(const CampaignReport& r, const VariantStats& st);

/// Appends a campaign's cases and fields to `into` (gradcheck of an op with several backward ops).
void merge_campaign(CheckReport& into, const CheckReport& part);

/// A report of a command that ran nothing: an empty suite marked skipped, with the reason.
CheckReport skipped_report(const std::string& command, const std::string& target, const std::string& reason);

/// Writes the campaign's report; callable from an interrupt handler's path with `interrupted`
/// set, so a stopped campaign still leaves what it ran. Returns the write's status.
Status write_campaign_reports(const std::string& command, const CampaignReport& r, const OpSpec& spec,
                              const CampaignOptions& o, const ReportPaths& p, bool interrupted = false);

}  // namespace assay::cli
