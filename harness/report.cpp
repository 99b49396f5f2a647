#include "harness/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "harness/corpus.h"

namespace assay {

ErrorMatrix ErrorMatrix::zeros(int64_t rows, int64_t cols) {
  ErrorMatrix m;
  m.rows = std::max<int64_t>(rows, 0);
  m.cols = std::max<int64_t>(cols, 0);
  m.ratio.assign(static_cast<size_t>(m.rows * m.cols), 0.0);
  return m;
}

void ErrorMatrix::mark_unwritten(int64_t r, int64_t c) {
  if (unwritten.empty()) unwritten.assign(ratio.size(), 0);
  unwritten[static_cast<size_t>(r * cols + c)] = 1;
}

Status ErrorMatrix::validate() const {
  if (rows < 0 || cols < 0) return invalid_argument(fmt::format("error matrix: negative size {} x {}", rows, cols));
  if (rows > (int64_t{1} << 32) || cols > (int64_t{1} << 32) || rows * cols > (int64_t{1} << 32))
    return invalid_argument(fmt::format("error matrix: {} x {} is more than 2^32 elements", rows, cols));
  const auto n = static_cast<size_t>(rows * cols);
  if (ratio.size() != n)
    return invalid_argument(
        fmt::format("error matrix: ratio has {} entries, {} x {} needs {}", ratio.size(), rows, cols, n));
  if (!unwritten.empty() && unwritten.size() != n)
    return invalid_argument(
        fmt::format("error matrix: unwritten mask has {} entries, {} x {} needs {}", unwritten.size(), rows, cols, n));
  return ok_status();
}

std::string_view error_pattern_name(ErrorPattern p) {
  switch (p) {
    case ErrorPattern::kNone:
      return "none";
    case ErrorPattern::kEverywhere:
      return "everywhere";
    case ErrorPattern::kLastRows:
      return "last rows";
    case ErrorPattern::kLastCols:
      return "last columns";
    case ErrorPattern::kLastRowsAndCols:
      return "last rows and columns";
    case ErrorPattern::kTile:
      return "tile";
    case ErrorPattern::kLines:
      return "lines";
    case ErrorPattern::kIsolated:
      return "isolated";
    case ErrorPattern::kScattered:
      return "scattered";
  }
  return "?";
}

namespace {

// A period of the sorted index set `s` inside [0, n): the tile T and its one
// or two residues such that every index of s has i % T in them, s covers at
// least 3/4 of the indices in [0, n) with those residues, and s touches at
// least two tiles. Fewest residues win, then the smallest T: every 32nd
// column is T = 32 with one residue (T = 16 covers only half of its residue
// class, T = 64 needs two residues); tile edges 31, 32, 63, 64, ... are T = 32
// with residues {0, 31}.
struct Period {
  int64_t tile = 0;
  std::vector<int64_t> residues;
};

Period find_period(const std::vector<int64_t>& s, int64_t n) {
  Period best;
  if (s.size() < 2) return best;
  for (int64_t t = 2; t <= n; ++t) {
    if (s.front() / t == s.back() / t) continue;  // all in one tile: no evidence of a period
    std::vector<int64_t> res;
    bool ok = true;
    for (int64_t i : s) {
      const int64_t r = i % t;
      if (std::find(res.begin(), res.end(), r) != res.end()) continue;
      if (res.size() == 2) {
        ok = false;
        break;
      }
      res.push_back(r);
    }
    if (!ok) continue;
    int64_t expected = 0;
    for (int64_t r : res) expected += r < n ? (n - 1 - r) / t + 1 : 0;
    if (4 * static_cast<int64_t>(s.size()) < 3 * expected) continue;
    // Two lines fit many periods; claim one only for a power-of-two tile.
    if (s.size() == 2 && (t & (t - 1)) != 0) continue;
    if (best.tile == 0 || res.size() < best.residues.size()) {
      std::sort(res.begin(), res.end());
      best = {t, res};
    }
  }
  return best;
}

std::string list_ints(const std::vector<int64_t>& v, size_t max_items = 8) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max_items; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > max_items) s += fmt::format(", ... ({} in all)", v.size());
  return s;
}

// "the last 3 rows (61..63 of 64)", "the last column (36 of 37)".
std::string tail_text(int64_t first, int64_t n, const char* noun) {
  if (first == n - 1) return fmt::format("the last {} ({} of {})", noun, first, n);
  return fmt::format("the last {} {}s ({}..{} of {})", n - first, noun, first, n - 1, n);
}

std::string residue_text(const char* axis, int64_t tile, const std::vector<int64_t>& res) {
  std::vector<std::string> parts;
  for (int64_t r : res) parts.push_back(fmt::format("{} % {} == {}", axis, tile, r));
  return fmt::format("{}", fmt::join(parts, " or "));
}

}  // namespace

StatusOr<ErrorLocation> locate_errors(const ErrorMatrix& m) {
  ASSAY_RETURN_IF_ERROR(m.validate());
  ErrorLocation loc;
  const int64_t rows = m.rows, cols = m.cols, total = rows * cols;
  std::vector<int64_t> row_bad(static_cast<size_t>(rows), 0), col_bad(static_cast<size_t>(cols), 0);
  std::vector<std::pair<int64_t, int64_t>> first_bad;  // up to 8, for kIsolated
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double x = m.at(r, c);
      if (m.is_unwritten(r, c)) {
        ++loc.unwritten;
      } else if (std::isnan(x)) {
        ++loc.nan;
      } else {
        loc.max_ratio = std::max(loc.max_ratio, x);
        if (x > 1.0) ++loc.over_bound;
      }
      if (!m.bad(r, c)) continue;
      ++loc.bad;
      ++row_bad[static_cast<size_t>(r)];
      ++col_bad[static_cast<size_t>(c)];
      if (first_bad.size() < 8) first_bad.emplace_back(r, c);
    }
  }
  // The common tail of every description: how many, of which kind.
  std::vector<std::string> kinds;
  if (loc.over_bound) kinds.push_back(fmt::format("{} over bound", loc.over_bound));
  if (loc.nan) kinds.push_back(fmt::format("{} NaN", loc.nan));
  if (loc.unwritten) kinds.push_back(fmt::format("{} unwritten", loc.unwritten));
  const std::string counts = fmt::format("{} of {} elements bad ({}; max ratio {:.3g})", loc.bad, total,
                                         fmt::join(kinds, ", "), loc.max_ratio);
  auto finish = [&](ErrorPattern p, std::string head) {
    loc.pattern = p;
    loc.description = p == ErrorPattern::kNone ? head : head + ": " + counts;
    return loc;
  };
  if (loc.bad == 0)
    return finish(ErrorPattern::kNone,
                  fmt::format("no errors in {} x {} elements (max ratio {:.3g})", rows, cols, loc.max_ratio));

  auto hit = [](const std::vector<int64_t>& v) {
    return static_cast<int64_t>(std::count_if(v.begin(), v.end(), [](int64_t x) { return x > 0; }));
  };
  const int64_t rows_hit = hit(row_bad), cols_hit = hit(col_bad);
  if (2 * loc.bad >= total && 10 * rows_hit >= 9 * rows && 10 * cols_hit >= 9 * cols)
    return finish(ErrorPattern::kEverywhere, "errors everywhere");

  // Tails: all bad elements in rows [r0, rows), every one of those rows hit,
  // and the block at least a quarter bad.
  const int64_t r0 = std::find_if(row_bad.begin(), row_bad.end(), [](int64_t x) { return x > 0; }) - row_bad.begin();
  const int64_t c0 = std::find_if(col_bad.begin(), col_bad.end(), [](int64_t x) { return x > 0; }) - col_bad.begin();
  if (r0 > 0 && rows_hit == rows - r0 && 4 * loc.bad >= (rows - r0) * cols) {
    loc.first_row = r0;
    return finish(ErrorPattern::kLastRows, "errors only in " + tail_text(r0, rows, "row"));
  }
  if (c0 > 0 && cols_hit == cols - c0 && 4 * loc.bad >= (cols - c0) * rows) {
    loc.first_col = c0;
    return finish(ErrorPattern::kLastCols, "errors only in " + tail_text(c0, cols, "column"));
  }

  // Dense lines: rows (columns) with at least half of their elements bad.
  std::vector<int64_t> dense_rows, dense_cols;
  for (int64_t r = 0; r < rows; ++r)
    if (2 * row_bad[static_cast<size_t>(r)] >= cols) dense_rows.push_back(r);
  for (int64_t c = 0; c < cols; ++c)
    if (2 * col_bad[static_cast<size_t>(c)] >= rows) dense_cols.push_back(c);
  // Bad elements off every dense line: a few are tolerated (and reported)
  // so that one stray NaN does not hide a tail or tile pattern.
  std::vector<std::pair<int64_t, int64_t>> strays;
  int64_t n_strays = 0;
  {
    std::vector<uint8_t> in_r(static_cast<size_t>(rows), 0), in_c(static_cast<size_t>(cols), 0);
    for (int64_t r : dense_rows) in_r[static_cast<size_t>(r)] = 1;
    for (int64_t c : dense_cols) in_c[static_cast<size_t>(c)] = 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        if (m.bad(r, c) && !in_r[static_cast<size_t>(r)] && !in_c[static_cast<size_t>(c)]) {
          if (strays.size() < 4) strays.emplace_back(r, c);
          ++n_strays;
        }
  }
  if ((!dense_rows.empty() || !dense_cols.empty()) && n_strays <= std::max<int64_t>(2, loc.bad / 100)) {
    // Each axis: a period over all its dense lines; else a tail (a suffix of
    // dense lines) plus, for the rest, a period or a plain list.
    std::vector<std::string> parts;
    bool tails = false, lines = false;
    auto explain = [&](const std::vector<int64_t>& dense, int64_t n, const char* noun, const char* var,
                       int64_t& first_tail, std::vector<int64_t>& residues) {
      if (dense.empty()) return;
      auto periodic = [&](const std::vector<int64_t>& set) {
        const Period p = find_period(set, n);
        if (p.tile == 0) return false;
        if (loc.tile == 0) loc.tile = p.tile;
        residues = p.residues;
        parts.push_back(fmt::format("{}s with {} (tile {})", noun, residue_text(var, p.tile, p.residues), p.tile));
        return true;
      };
      if (periodic(dense)) return;
      int64_t start = n;
      for (auto it = dense.rbegin(); it != dense.rend() && *it == start - 1; ++it) --start;
      const std::vector<int64_t> rest(dense.begin(), dense.end() - (n - start));
      if (start < n) {
        first_tail = start;
        tails = true;
        parts.push_back(tail_text(start, n, noun));
      }
      if (!rest.empty() && !periodic(rest)) {
        lines = true;
        parts.push_back(fmt::format("{}{} {}", noun, rest.size() == 1 ? "" : "s", list_ints(rest)));
      }
    };
    explain(dense_rows, rows, "row", "row", loc.first_row, loc.row_residues);
    explain(dense_cols, cols, "column", "col", loc.first_col, loc.col_residues);
    std::string head = fmt::format("errors only on {}", fmt::join(parts, " and "));
    if (n_strays > 0) {
      std::vector<std::string> at;
      for (auto [r, c] : strays) at.push_back(fmt::format("({}, {})", r, c));
      head +=
          fmt::format(", plus {} isolated element{}, e.g. {}", n_strays, n_strays == 1 ? "" : "s", fmt::join(at, " "));
    }
    ErrorPattern p = ErrorPattern::kLines;
    if (loc.tile != 0)
      p = ErrorPattern::kTile;
    else if (tails && !lines)
      p = loc.first_row >= 0 && loc.first_col >= 0 ? ErrorPattern::kLastRowsAndCols
          : loc.first_row >= 0                     ? ErrorPattern::kLastRows
                                                   : ErrorPattern::kLastCols;
    return finish(p, head);
  }

  if (loc.bad <= 64 && 10 * loc.bad <= total) {
    std::vector<std::string> at;
    for (auto [r, c] : first_bad) at.push_back(fmt::format("({}, {})", r, c));
    return finish(ErrorPattern::kIsolated, fmt::format("{} isolated element{}, e.g. (row, col) {}", loc.bad,
                                                       loc.bad == 1 ? "" : "s", fmt::join(at, " ")));
  }
  return finish(ErrorPattern::kScattered,
                fmt::format("errors scattered over {} of {} rows and {} of {} columns, no tail or tile pattern",
                            rows_hit, rows, cols_hit, cols));
}

// ---- heatmap -----------------------------------------------------------------------
namespace {

struct Rgb {
  int r, g, b;
  bool operator==(const Rgb&) const = default;
};

Rgb mix(Rgb a, Rgb b, double t) {
  auto l = [t](int x, int y) { return static_cast<int>(std::lround(x + (y - x) * t)); };
  return {l(a.r, b.r), l(a.g, b.g), l(a.b, b.b)};
}

constexpr Rgb kOkLow{247, 251, 255}, kOkHigh{33, 113, 181};  // ratio 1e-6 .. 1
constexpr Rgb kBadLow{252, 146, 114}, kBadHigh{103, 0, 13};  // ratio 1 .. 1e6
constexpr Rgb kNaNColour{0, 0, 0}, kUnwrittenColour{212, 0, 212};
constexpr int kLevels = 16;  // per scale: quantised so that runs of equal cells merge into one rect

// Severity of a pooled cell: unwritten > NaN > ratio.
struct Cell {
  int kind = 0;  // 0 ratio, 1 NaN, 2 unwritten
  double ratio = 0;
  void absorb(const Cell& o) {
    if (o.kind != kind) {
      if (o.kind > kind) *this = o;
      return;
    }
    if (kind == 0) ratio = std::max(ratio, o.ratio);
  }
};

// Colours use std::log10: display only, nothing here feeds back into values.
Rgb colour(const Cell& c) {
  if (c.kind == 2) return kUnwrittenColour;
  if (c.kind == 1) return kNaNColour;
  auto level = [](double t) { return std::round(std::clamp(t, 0.0, 1.0) * (kLevels - 1)) / (kLevels - 1); };
  if (c.ratio > 1.0) return mix(kBadLow, kBadHigh, level(std::isinf(c.ratio) ? 1.0 : std::log10(c.ratio) / 6));
  const double t = c.ratio <= 0 ? 0.0 : (std::log10(c.ratio) + 6) / 6;
  return mix(kOkLow, kOkHigh, level(t));
}

std::string hex(Rgb c) {
  return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
}

// 1, 2, 5 x 10^k, the smallest not below x.
int64_t nice_step(double x) {
  int64_t p = 1;
  for (;;) {
    for (int64_t m : {1, 2, 5})
      if (static_cast<double>(m * p) >= x) return m * p;
    p *= 10;
  }
}

}  // namespace

StatusOr<std::string> heatmap_svg(const ErrorMatrix& m, const HeatmapOptions& opt) {
  ASSAY_RETURN_IF_ERROR(m.validate());
  const int64_t cap = std::max<int64_t>(opt.max_cells, 1);
  const int64_t fr = std::max<int64_t>(1, (m.rows + cap - 1) / cap),
                fc = std::max<int64_t>(1, (m.cols + cap - 1) / cap);
  const int64_t pr = (m.rows + fr - 1) / fr, pc = (m.cols + fc - 1) / fc;  // pooled size
  const int64_t px = std::clamp<int64_t>(640 / std::max<int64_t>({pr, pc, 1}), 1, 24);
  const int64_t left = 64, top = opt.title.empty() ? 40 : 64, legend_w = 190;
  const int64_t map_w = pc * px, map_h = pr * px;
  const int64_t width = left + map_w + 24 + legend_w, height = top + std::max<int64_t>(map_h, 150) + 32;

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"monospace\" font-size=\"11\">\n",
      width, height, width, height);
  if (!opt.title.empty())
    s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"13\">{}</text>\n", left, html_escape(opt.title));
  if (fr > 1 || fc > 1)
    s += fmt::format("<text x=\"{}\" y=\"{}\">{} x {} elements, max-pooled {} x {} per cell</text>\n", left, top - 26,
                     m.rows, m.cols, fr, fc);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", left - 1,
                   top - 1, map_w + 2, map_h + 2);
  // Cells, one pooled row at a time; equal neighbours merge into one rect.
  s += "<g shape-rendering=\"crispEdges\">\n";
  std::vector<Cell> row(static_cast<size_t>(pc));
  for (int64_t i = 0; i < pr; ++i) {
    std::fill(row.begin(), row.end(), Cell{});
    for (int64_t r = i * fr; r < std::min(m.rows, (i + 1) * fr); ++r) {
      for (int64_t c = 0; c < m.cols; ++c) {
        Cell e;
        if (m.is_unwritten(r, c))
          e.kind = 2;
        else if (std::isnan(m.at(r, c)))
          e.kind = 1;
        else
          e.ratio = m.at(r, c);
        row[static_cast<size_t>(c / fc)].absorb(e);
      }
    }
    for (int64_t j = 0; j < pc;) {
      const Rgb col = colour(row[static_cast<size_t>(j)]);
      int64_t k = j + 1;
      while (k < pc && colour(row[static_cast<size_t>(k)]) == col) ++k;
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n", left + j * px,
                       top + i * px, (k - j) * px, px, hex(col));
      j = k;
    }
  }
  s += "</g>\n";
  // At a few pixels per cell a lone failing cell is invisible: ring the
  // failing cells (over bound, NaN, unwritten) with no failing neighbour,
  // up to 256 of them (more than that shows as texture anyway).
  bool ringed = false;
  if (px < 4) {
    std::vector<uint8_t> bad(static_cast<size_t>(pr * pc), 0);
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c)
        if (m.bad(r, c)) bad[static_cast<size_t>((r / fr) * pc + c / fc)] = 1;
    std::vector<std::pair<int64_t, int64_t>> lone;
    for (int64_t i = 0; i < pr && lone.size() <= 256; ++i) {
      for (int64_t j = 0; j < pc; ++j) {
        if (!bad[static_cast<size_t>(i * pc + j)]) continue;
        bool alone = true;
        for (int64_t di = -1; di <= 1; ++di)
          for (int64_t dj = -1; dj <= 1; ++dj) {
            const int64_t y = i + di, x = j + dj;
            if ((di || dj) && y >= 0 && y < pr && x >= 0 && x < pc && bad[static_cast<size_t>(y * pc + x)])
              alone = false;
          }
        if (alone) lone.emplace_back(i, j);
      }
    }
    if (lone.size() <= 256) {
      ringed = !lone.empty();
      for (auto [i, j] : lone)
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"9\" height=\"9\" fill=\"none\" stroke=\"#e00000\"/>\n",
                         left + j * px + px / 2 - 4, top + i * px + px / 2 - 4);
    }
  }
  // Axes: ticks at original indices (columns on top, rows on the left).
  auto ticks = [&](int64_t n, int64_t f, bool is_col) {
    if (n == 0) return;
    const int64_t step = nice_step(static_cast<double>(n) / 8);
    for (int64_t i = 0; i < n; i += step) {
      const int64_t pos = (i / f) * px + px / 2;
      if (is_col) {
        s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#444\"/>", left + pos, top - 5,
                         top - 1);
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + pos, top - 8, i);
      } else {
        s += fmt::format("<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"#444\"/>", left - 5, left - 1,
                         top + pos);
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8, top + pos + 4, i);
      }
    }
  };
  ticks(m.cols, fc, true);
  ticks(m.rows, fr, false);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">col</text>\n", left - 8, top - 8);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">row</text>\n", left - 30, top + 16);
  // Legend.
  const int64_t lx = left + map_w + 24;
  int64_t ly = top;
  auto swatch = [&](Rgb c, const std::string& label) {
    s +=
        fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#888\"/>", lx, ly, hex(c));
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 20, ly + 11, html_escape(label));
    ly += 20;
  };
  swatch(kOkLow, "ratio <= 1e-6");
  swatch(mix(kOkLow, kOkHigh, 0.5), "ratio 1e-3");
  swatch(kOkHigh, "ratio 1 (at bound)");
  swatch(kBadLow, "ratio > 1 (fails)");
  swatch(mix(kBadLow, kBadHigh, 0.5), "ratio 1e3");
  swatch(kBadHigh, "ratio >= 1e6, Inf");
  swatch(kNaNColour, "NaN mismatch");
  swatch(kUnwrittenColour, "unwritten");
  if (ringed) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"none\" stroke=\"#e00000\"/>", lx, ly);
    s += fmt::format("<text x=\"{}\" y=\"{}\">lone failing cell</text>\n", lx + 20, ly + 11);
  }
  s += "</svg>\n";
  return s;
}

// ---- HTML ---------------------------------------------------------------------------

std::string html_escape(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char ch : in) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

TriageReport make_triage_report(const Case& c, std::vector<Metric> metrics, ErrorMatrix errors) {
  TriageReport r;
  r.summary = c.summary();
  r.case_json = c.to_json();
  r.metrics = std::move(metrics);
  r.errors = std::move(errors);
  return r;
}

StatusOr<std::string> html_report(const TriageReport& r, const HeatmapOptions& opt) {
  ASSAY_ASSIGN_OR_RETURN(ErrorLocation loc, locate_errors(r.errors));
  HeatmapOptions hopt = opt;
  if (hopt.title.empty()) hopt.title = "|error| / bound";
  ASSAY_ASSIGN_OR_RETURN(std::string svg, heatmap_svg(r.errors, hopt));
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>assay triage: " +
      html_escape(r.summary) +
      "</title>\n"
      "<style>\n"
      "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}\n"
      "code,pre{font-family:ui-monospace,monospace}\n"
      "pre{background:#f6f6f6;padding:1em;overflow:auto;max-height:40em}\n"
      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}\n"
      "th{background:#eee}.where{font-size:1.1em}\n"
      "</style>\n</head>\n<body>\n<h1>assay triage report</h1>\n";
  h += "<p><code>" + html_escape(r.summary) + "</code></p>\n";
  h += "<p class=\"where\"><b>Where:</b> " + html_escape(loc.description) + "</p>\n";
  if (!r.replay.empty()) h += "<p><b>Replay:</b> <code>" + html_escape(r.replay) + "</code></p>\n";
  h += "<h2>Metrics</h2>\n<table>\n<tr><th>metric</th><th>value</th></tr>\n";
  for (const auto& m : r.metrics)
    h += "<tr><td>" + html_escape(m.key) + "</td><td>" + html_escape(m.value) + "</td></tr>\n";
  h += fmt::format("<tr><td>error pattern</td><td>{}</td></tr>\n", html_escape(error_pattern_name(loc.pattern)));
  h += "</table>\n<h2>Error map</h2>\n" + svg;
  h += "<h2>Case</h2>\n<pre>" + html_escape(r.case_json.is_null() ? "{}" : r.case_json.dump(2)) + "</pre>\n";
  h += "</body>\n</html>\n";
  return h;
}

Status write_triage_report(const TriageReport& r, const std::string& html_path, const std::string& svg_path) {
  ASSAY_ASSIGN_OR_RETURN(std::string html, html_report(r));
  ASSAY_RETURN_IF_ERROR(write_file_atomic(html_path, html));
  if (!svg_path.empty()) {
    ASSAY_ASSIGN_OR_RETURN(std::string svg, heatmap_svg(r.errors));
    ASSAY_RETURN_IF_ERROR(write_file_atomic(svg_path, svg));
  }
  return ok_status();
}

}  // namespace assay
