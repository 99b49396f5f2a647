// Command-line checks kept out of main.cpp: strict numeric validators (no
// NaN, infinities, negatives where a count is meant, or trailing text), the
// shard syntax, unknown-command suggestions, and readable CLI11 messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/status.h"

namespace assay::cli {

/// A finite decimal number >= `lo` (> `lo` when `open_low`); "nan", "inf", "1e999" and "5s" fail.
CLI::Validator finite_number(double lo, bool open_low = false);
/// A decimal integer in [lo, hi] (inclusive), nothing else on the line: "-5" fails for lo = 0, "3x" always.
CLI::Validator integer_in(int64_t lo, int64_t hi);
/// A decimal integer in [0, 2^64 - 1] (a seed): no sign, no wrap-around.
CLI::Validator unsigned_integer();

/// "i/N" with 0 <= i < N <= 2^20, nothing else.
Status parse_shard(const std::string& text, int& index, int& count);

/// The first word of the command line when it is not one of `app`'s
/// subcommands: "unknown command 'fuz' (did you mean 'fuzz'?)". nullopt when fine.
std::optional<std::string> unknown_command(const CLI::App& app, int argc, const char* const* argv);

/// Nearest of `choices` to `word` by edit distance, if near enough to be a likely typo.
std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& choices);

/// `msg` with every run of more than 24 digits (DBL_MAX printed in full by CLI11)
/// rewritten in %g form, and made printable on one line.
std::string readable(const std::string& msg);

}  // namespace assay::cli
