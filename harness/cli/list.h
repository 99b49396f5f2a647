// `assay list` and the op-name questions the other commands ask (which backward ops a gradcheck
// runs). Kept apart from main.cpp, which the stock tool and every consumer's tool compile.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/status.h"

namespace assay::cli {

struct ListOptions {
  bool json = false;
  bool mutants = false;     ///< --mutants / --all: show the planted-bug variants too
  bool no_mutants = false;  ///< --no-mutants: the default, stated explicitly (wins over --mutants)
  std::vector<std::string> ops;  ///< --op: only these ops (default: all)
};

/// Adds `list` with its options to `app`.
CLI::App* add_list_command(CLI::App& app, ListOptions& o);

/// Prints the ops and variants (text, or JSON with --json). Exit 2 for an unknown --op.
int run_list(const ListOptions& o);

/// The backward ops a `gradcheck <name>` checks: `name` itself when it is a backward op (its name
/// has "_bwd"), else the ops named <name>_bwd or <name>_bwd_* (conv2d: conv2d_bwd_data and
/// conv2d_bwd_filter). not_found, listing the ops that have a backward, when there is none.
StatusOr<std::vector<std::string>> gradcheck_ops(const std::string& name);

/// A self-check report for users of an installed tool: pointers into assay's source tree
/// ("checked in tests/references/x_test.cpp") become "assay's test suite".
std::string without_source_paths(const std::string& report);

}  // namespace assay::cli
