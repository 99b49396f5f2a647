// Triage reports (host only, no GPU): where the errors of a failing case sit,
// as a one-line "error locator" verdict, an SVG heatmap of error / bound, and
// a self-contained HTML page with the case, the metrics and the heatmap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/status.h"

namespace assay {

/// Per-element error of a 2-D output, row-major. An element is bad when it
/// is unwritten, or its ratio is NaN or > 1.
struct ErrorMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> ratio;       ///< rows * cols: |err| / bound (>= 0, may be Inf); NaN = NaN mismatch
  std::vector<uint8_t> unwritten;  ///< empty, or rows * cols: 1 = never written (output poison survived)

  /// rows x cols, every ratio 0, every element written.
  static ErrorMatrix zeros(int64_t rows, int64_t cols);
  double& at(int64_t r, int64_t c) { return ratio[static_cast<size_t>(r * cols + c)]; }
  double at(int64_t r, int64_t c) const { return ratio[static_cast<size_t>(r * cols + c)]; }
  bool is_unwritten(int64_t r, int64_t c) const {
    return !unwritten.empty() && unwritten[static_cast<size_t>(r * cols + c)] != 0;
  }
  void mark_unwritten(int64_t r, int64_t c);
  bool bad(int64_t r, int64_t c) const { return is_unwritten(r, c) || !(at(r, c) <= 1.0); }
  /// Sizes agree, rows/cols >= 0, rows * cols <= 2^32; one-line error.
  Status validate() const;
};

enum class ErrorPattern : uint8_t {
  kNone,             ///< no bad element
  kEverywhere,       ///< at least half of all elements, in >= 90% of rows and of columns
  kLastRows,         ///< only rows [first_row, rows), each of them hit, >= 25% of that block bad
  kLastCols,         ///< the same for columns [first_col, cols)
  kLastRowsAndCols,  ///< only in a dense suffix of rows and a dense suffix of columns
  // The next two: bad elements on dense lines (rows / columns at least half
  // bad), except for at most max(2, 1%) strays, which the description lists.
  kTile,       ///< some dense lines i have i % tile in one or two residues (tails may come with them)
  kLines,      ///< dense lines without a period (a tail with other lines, or a few unrelated lines)
  kIsolated,   ///< at most 64 bad elements and at most 10% of all
  kScattered,  ///< none of the above
};

/// "none", "everywhere", "last rows", "last columns", "last rows and columns",
/// "tile", "lines", "isolated", "scattered".
std::string_view error_pattern_name(ErrorPattern p);

struct ErrorLocation {
  ErrorPattern pattern = ErrorPattern::kNone;
  int64_t bad = 0, over_bound = 0, nan = 0, unwritten = 0;  ///< element counts (unwritten counted apart)
  double max_ratio = 0;                             ///< largest finite-or-Inf ratio over written, non-NaN elements
  int64_t first_row = -1;                           ///< kLastRows / kLastRowsAndCols: first row of the tail
  int64_t first_col = -1;                           ///< kLastCols / kLastRowsAndCols: first column of the tail
  int64_t tile = 0;                                 ///< kTile: the period
  std::vector<int64_t> row_residues, col_residues;  ///< kTile: i % tile of the bad rows / columns
  std::string description;  ///< one line, e.g. "errors only in the last 3 rows (61..63 of 64): ..."
};

/// Classifies where the bad elements of `m` sit (see ErrorPattern, checked
/// in declaration order; a combination of tails and lines is described
/// part by part, e.g. "errors only on the last 4 rows (66..69 of 70) and
/// columns with col % 32 == 31 (tile 32), plus 1 isolated elements, e.g. (5, 5)").
StatusOr<ErrorLocation> locate_errors(const ErrorMatrix& m);

struct HeatmapOptions {
  int64_t max_cells = 512;  ///< per axis; larger matrices are max-pooled down to this
  std::string title;        ///< drawn above the map; empty for none
};

/// SVG heatmap of m: ratio <= 1 in a blue log scale (1e-6 .. 1), ratio > 1
/// in a red log scale (1 .. 1e6), NaN mismatches black, unwritten elements
/// magenta. Blocks of a pooled map show their worst element (unwritten >
/// NaN > largest ratio). Axes are labelled with row and column indices of m.
StatusOr<std::string> heatmap_svg(const ErrorMatrix& m, const HeatmapOptions& opt = {});

struct Metric {
  std::string key, value;
};

struct TriageReport {
  std::string summary;       ///< Case::summary() or any one line
  nlohmann::json case_json;  ///< Case::to_json(), shown verbatim
  std::string replay;        ///< command that replays the case; empty for none
  std::vector<Metric> metrics;
  ErrorMatrix errors;
};

/// A report for `c`: its summary and JSON, with these metrics and errors.
TriageReport make_triage_report(const Case& c, std::vector<Metric> metrics, ErrorMatrix errors);

/// The self-contained HTML page (inline SVG and CSS, no scripts, no links).
StatusOr<std::string> html_report(const TriageReport& r, const HeatmapOptions& opt = {});

/// Writes the HTML page to `html_path` and, unless `svg_path` is empty, the
/// bare SVG beside it; both atomically (write_file_atomic).
Status write_triage_report(const TriageReport& r, const std::string& html_path, const std::string& svg_path = "");

/// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(std::string_view s);

}  // namespace assay
