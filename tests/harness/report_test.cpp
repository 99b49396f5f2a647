// Triage reports: the error locator on synthetic error matrices, the SVG
// heatmap (colours, pooling, axes) and the self-contained HTML page.
#include "harness/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <string>

namespace assay {
namespace {

ErrorMatrix with_bad(int64_t rows, int64_t cols, const std::function<bool(int64_t, int64_t)>& bad, double ratio = 5.0) {
  ErrorMatrix m = ErrorMatrix::zeros(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m.at(r, c) = bad(r, c) ? ratio : 0.25;
  return m;
}

ErrorLocation locate(const ErrorMatrix& m) {
  auto l = locate_errors(m);
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->description.find('\n'), std::string::npos);
  return *l;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TEST(Locator, NoErrors) {
  const auto l = locate(with_bad(8, 8, [](int64_t, int64_t) { return false; }));
  EXPECT_EQ(l.pattern, ErrorPattern::kNone);
  EXPECT_EQ(l.bad, 0);
  EXPECT_TRUE(contains(l.description, "no errors")) << l.description;
  EXPECT_EQ(locate(ErrorMatrix::zeros(0, 5)).pattern, ErrorPattern::kNone);
}

TEST(Locator, Everywhere) {
  const auto l = locate(with_bad(40, 50, [](int64_t r, int64_t c) { return (r + c) % 5 != 0; }));
  EXPECT_EQ(l.pattern, ErrorPattern::kEverywhere);
  EXPECT_TRUE(contains(l.description, "everywhere")) << l.description;
}

TEST(Locator, LastRows) {
  const auto l = locate(with_bad(64, 64, [](int64_t r, int64_t) { return r >= 61; }));
  EXPECT_EQ(l.pattern, ErrorPattern::kLastRows);
  EXPECT_EQ(error_pattern_name(l.pattern), "last rows");
  EXPECT_EQ(l.first_row, 61);
  EXPECT_EQ(l.bad, 3 * 64);
  EXPECT_TRUE(contains(l.description, "last 3 rows (61..63 of 64)")) << l.description;
  EXPECT_TRUE(contains(l.description, "192 over bound")) << l.description;
}

TEST(Locator, LastColumnsUnwritten) {
  ErrorMatrix m = ErrorMatrix::zeros(20, 37);
  for (int64_t r = 0; r < 20; ++r)
    for (int64_t c = 32; c < 37; ++c) m.mark_unwritten(r, c);
  const auto l = locate(m);
  EXPECT_EQ(l.pattern, ErrorPattern::kLastCols);
  EXPECT_EQ(l.first_col, 32);
  EXPECT_EQ(l.unwritten, 100);
  EXPECT_TRUE(contains(l.description, "last 5 columns (32..36 of 37)")) << l.description;
  EXPECT_TRUE(contains(l.description, "100 unwritten")) << l.description;
}

TEST(Locator, LastRowsAndColumns) {
  // M and N both not multiples of the block: the bottom rows and right columns.
  const auto l = locate(with_bad(70, 90, [](int64_t r, int64_t c) { return r >= 64 || c >= 80; }));
  EXPECT_EQ(l.pattern, ErrorPattern::kLastRowsAndCols);
  EXPECT_EQ(l.first_row, 64);
  EXPECT_EQ(l.first_col, 80);
  EXPECT_TRUE(contains(l.description, "last 6 rows")) << l.description;
  EXPECT_TRUE(contains(l.description, "last 10 columns")) << l.description;
}

TEST(Locator, EveryThirtySecondColumnIsTile32) {
  const auto l = locate(with_bad(48, 256, [](int64_t, int64_t c) { return c % 32 == 0; }));
  EXPECT_EQ(l.pattern, ErrorPattern::kTile);
  EXPECT_EQ(l.tile, 32);
  EXPECT_EQ(l.col_residues, std::vector<int64_t>{0});
  EXPECT_TRUE(l.row_residues.empty());
  EXPECT_TRUE(contains(l.description, "tile 32")) << l.description;
  EXPECT_TRUE(contains(l.description, "col % 32 == 0")) << l.description;
  // Offset residue: every 32nd column starting at 31.
  EXPECT_EQ(locate(with_bad(48, 256, [](int64_t, int64_t c) { return c % 32 == 31; })).tile, 32);
}

TEST(Locator, TileEdgesOnRowsAndColumns) {
  // Rows and columns at both edges of each 16-tile (i % 16 in {0, 15}).
  const auto l = locate(with_bad(
      128, 96, [](int64_t r, int64_t c) { return r % 16 == 0 || r % 16 == 15 || c % 16 == 0 || c % 16 == 15; }));
  EXPECT_EQ(l.pattern, ErrorPattern::kTile);
  EXPECT_EQ(l.tile, 16);
  EXPECT_EQ(l.row_residues, (std::vector<int64_t>{0, 15}));
  EXPECT_EQ(l.col_residues, (std::vector<int64_t>{0, 15}));
  // Rows only, every 8th.
  const auto rows = locate(with_bad(64, 10, [](int64_t r, int64_t) { return r % 8 == 3; }));
  EXPECT_EQ(rows.pattern, ErrorPattern::kTile);
  EXPECT_EQ(rows.tile, 8);
  EXPECT_EQ(rows.row_residues, std::vector<int64_t>{3});
}

TEST(Locator, TailsTilesAndStraysTogether) {
  // Unwritten last rows, a bad column at the end of each 32-tile, one NaN.
  ErrorMatrix m = with_bad(70, 90, [](int64_t, int64_t c) { return c % 32 == 31; });
  for (int64_t r = 66; r < 70; ++r)
    for (int64_t c = 0; c < 90; ++c) m.mark_unwritten(r, c);
  m.at(5, 5) = std::numeric_limits<double>::quiet_NaN();
  const auto l = locate(m);
  EXPECT_EQ(l.pattern, ErrorPattern::kTile);
  EXPECT_EQ(l.tile, 32);
  EXPECT_EQ(l.first_row, 66);
  EXPECT_EQ(l.col_residues, std::vector<int64_t>{31});
  EXPECT_TRUE(contains(l.description, "the last 4 rows (66..69 of 70)")) << l.description;
  EXPECT_TRUE(contains(l.description, "col % 32 == 31 (tile 32)")) << l.description;
  EXPECT_TRUE(contains(l.description, "plus 1 isolated element, e.g. (5, 5)")) << l.description;
  EXPECT_TRUE(contains(l.description, "1 NaN")) << l.description;
}

TEST(Locator, IsolatedElementsAndLines) {
  const auto l = locate(with_bad(100, 100, [](int64_t r, int64_t c) {
    return (r == 3 && c == 5) || (r == 40 && c == 41) || (r == 99 && c == 0);
  }));
  EXPECT_EQ(l.pattern, ErrorPattern::kIsolated);
  EXPECT_EQ(l.bad, 3);
  EXPECT_TRUE(contains(l.description, "3 isolated elements")) << l.description;
  EXPECT_TRUE(contains(l.description, "(3, 5)")) << l.description;
  // Two unrelated rows: lines, not a tile (no period).
  const auto lines = locate(with_bad(50, 50, [](int64_t r, int64_t) { return r == 7 || r == 20; }));
  EXPECT_EQ(lines.pattern, ErrorPattern::kLines);
  EXPECT_TRUE(contains(lines.description, "rows 7, 20")) << lines.description;
}

TEST(Locator, NaNAndScattered) {
  ErrorMatrix m = ErrorMatrix::zeros(60, 60);
  uint64_t x = 12345;
  for (double& v : m.ratio) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v = (x >> 60) < 5 ? std::numeric_limits<double>::quiet_NaN() : 0.5;  // ~31% NaN
  }
  const auto l = locate(m);
  EXPECT_EQ(l.pattern, ErrorPattern::kScattered);
  EXPECT_EQ(l.nan, l.bad);
  EXPECT_TRUE(contains(l.description, "NaN")) << l.description;
}

TEST(Locator, RejectsInconsistentSizes) {
  ErrorMatrix m = ErrorMatrix::zeros(4, 4);
  m.ratio.pop_back();
  EXPECT_FALSE(locate_errors(m).ok());
  m = ErrorMatrix::zeros(4, 4);
  m.unwritten.assign(3, 0);
  auto r = locate_errors(m);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "unwritten mask has 3 entries")) << r.status().message();
  EXPECT_FALSE(heatmap_svg(m).ok());
}

// ---- heatmap --------------------------------------------------------------------

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Fill colours used in `svg` and not in `base`.
std::set<std::string> new_fills(const std::string& svg, const std::string& base) {
  auto fills = [](const std::string& x) {
    std::set<std::string> out;
    for (size_t p = x.find("fill=\"#"); p != std::string::npos; p = x.find("fill=\"#", p + 1))
      out.insert(x.substr(p + 6, 7));
    return out;
  };
  std::set<std::string> a = fills(svg), b = fills(base), out;
  for (const auto& f : a)
    if (!b.count(f)) out.insert(f);
  return out;
}

bool reddish(const std::string& hex) {
  const int r = std::stoi(hex.substr(1, 2), nullptr, 16), g = std::stoi(hex.substr(3, 2), nullptr, 16),
            b = std::stoi(hex.substr(5, 2), nullptr, 16);
  return r > g + 60 && r > b + 60;
}

TEST(Heatmap, ColoursAndAxes) {
  ErrorMatrix m = ErrorMatrix::zeros(20, 30);
  m.at(1, 1) = 1e3;                                       // over bound: red scale
  m.at(2, 2) = std::numeric_limits<double>::quiet_NaN();  // NaN: black
  m.mark_unwritten(3, 3);                                 // unwritten: magenta
  m.at(4, 4) = 1.0;                                       // at bound: strongest blue
  HeatmapOptions opt;
  opt.title = "gemm <tiled>";
  auto svg = heatmap_svg(m, opt);
  ASSERT_TRUE(svg.ok());
  const std::string& s = *svg;
  EXPECT_EQ(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(count(s, "</svg>"), 1u);
  EXPECT_TRUE(contains(s, "gemm &lt;tiled&gt;"));
  EXPECT_TRUE(contains(s, "fill=\"#d400d4\"/>"));  // unwritten
  EXPECT_TRUE(contains(s, "fill=\"#000000\"/>"));  // NaN
  EXPECT_TRUE(contains(s, "fill=\"#2171b5\"/>"));  // ratio 1
  ErrorMatrix calm = m;
  calm.at(1, 1) = 0;
  const auto extra = new_fills(s, *heatmap_svg(calm, opt));
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_TRUE(reddish(*extra.begin())) << *extra.begin();
  // Axis labels: column and row indices.
  EXPECT_TRUE(contains(s, ">col<"));
  EXPECT_TRUE(contains(s, ">row<"));
  EXPECT_TRUE(contains(s, "text-anchor=\"middle\">25<"));  // column tick
  EXPECT_TRUE(contains(s, "text-anchor=\"end\">15<"));     // row tick
  EXPECT_FALSE(contains(s, "max-pooled"));
}

TEST(Heatmap, LargeMatricesArePooledAndKeepTheWorstElement) {
  ErrorMatrix m = ErrorMatrix::zeros(2000, 3000);
  m.at(1234, 2345) = 50;  // a single failing element must survive pooling
  m.mark_unwritten(10, 10);
  auto svg = heatmap_svg(m);
  ASSERT_TRUE(svg.ok());
  const std::string& s = *svg;
  EXPECT_TRUE(contains(s, "2000 x 3000 elements, max-pooled 4 x 6 per cell")) << s.substr(0, 400);
  EXPECT_TRUE(contains(s, "fill=\"#d400d4\"/>"));
  // Merged runs: far fewer rects than pooled cells (500 x 500).
  EXPECT_LT(count(s, "<rect"), 2000u);
  // The failing element's (red) colour is there, beyond the legend's.
  ErrorMatrix clean = m;
  clean.at(1234, 2345) = 0;
  const auto extra = new_fills(s, *heatmap_svg(clean));
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_TRUE(reddish(*extra.begin())) << *extra.begin();
  // At 1 px per cell, the lone failing cells (the 50 and the unwritten one) are ringed.
  EXPECT_EQ(count(s, "fill=\"none\" stroke=\"#e00000\"/>"), 2u + 1u);  // + the legend's
  // Row ticks are original row indices, up to the last hundreds.
  EXPECT_TRUE(contains(s, ">1500<"));
  EXPECT_TRUE(contains(s, ">2500<"));
  // The same with an explicit cap.
  HeatmapOptions small;
  small.max_cells = 100;
  EXPECT_TRUE(contains(*heatmap_svg(m, small), "max-pooled 20 x 30 per cell"));
}

// ---- HTML ---------------------------------------------------------------------------

Case sample_case() {
  Case c;
  c.op = "gemm";
  c.variant = "tiled";
  c.params = {{"m", 64}, {"n", 64}};
  TensorSpec t;
  t.name = "A";
  t.desc = TensorDesc::contiguous(DType::kF32, {64, 64});
  t.values.seed = 9;
  c.tensors.push_back(t);
  return c;
}

TEST(Html, SelfContainedWithCaseMetricsAndMap) {
  TriageReport r = make_triage_report(sample_case(), {{"max ratio", "5.0"}, {"<script>", "x & y"}},
                                      with_bad(64, 64, [](int64_t row, int64_t) { return row >= 61; }));
  r.replay = "assay replay corpora/gemm/abc.json";
  auto html = html_report(r);
  ASSERT_TRUE(html.ok()) << html.status().to_string();
  const std::string& h = *html;
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(h, "<svg"), 1u);
  EXPECT_TRUE(contains(h, "errors only in the last 3 rows"));
  EXPECT_TRUE(contains(h, "<td>max ratio</td><td>5.0</td>"));
  EXPECT_TRUE(contains(h, "<td>&lt;script&gt;</td><td>x &amp; y</td>"));
  EXPECT_FALSE(contains(h, "<script>"));
  EXPECT_TRUE(contains(h, "&quot;op&quot;: &quot;gemm&quot;"));  // the case JSON, escaped
  EXPECT_TRUE(contains(h, "assay replay corpora/gemm/abc.json"));
  EXPECT_TRUE(contains(h, r.summary));
  // Self-contained: no external resources.
  EXPECT_FALSE(contains(h, "src="));
  EXPECT_FALSE(contains(h, "href="));
  EXPECT_FALSE(contains(h, "@import"));
}

TEST(Html, WritesFilesAtomically) {
  const auto dir = std::filesystem::temp_directory_path() / ("assay_report_test_" + std::to_string(::getpid()));
  const std::string html_path = (dir / "sub" / "report.html").string(), svg_path = (dir / "map.svg").string();
  TriageReport r = make_triage_report(sample_case(), {}, with_bad(8, 8, [](int64_t, int64_t c) { return c == 7; }));
  ASSERT_TRUE(write_triage_report(r, html_path, svg_path).ok());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(slurp(html_path), *html_report(r));
  EXPECT_EQ(slurp(svg_path), *heatmap_svg(r.errors));
  std::filesystem::remove_all(dir);
  // A bad matrix is an error value, not a crash or a half-written file.
  r.errors.ratio.clear();
  EXPECT_FALSE(write_triage_report(r, html_path).ok());
  EXPECT_FALSE(std::filesystem::exists(html_path));
}

}  // namespace
}  // namespace assay
