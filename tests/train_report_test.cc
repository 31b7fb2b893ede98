// The HTML report (train/report.h): well-formed (balanced elements, escaped text), axes at round
// numbers, legends, markers, a colour scale on every heatmap, readable labels, scatter plots and
// the PCA behind them.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "io/file.h"
#include "train/curves.h"
#include "train/report.h"

namespace tgt {
namespace {

using tg::report::Heatmap;
using tg::report::Html;
using tg::report::Series;

// Every opened element of these kinds is closed, in order (a small structural check). A plain
// scanner, not std::regex: libstdc++'s regex recurses per character and overflows the stack on a
// report-sized string under AddressSanitizer.
::testing::AssertionResult balanced(const std::string& html) {
  static const std::set<std::string> kinds = {"html", "head", "body", "svg", "g", "defs", "linearGradient", "stop", "div",
                                              "section", "table", "tr", "td", "th", "figure", "pre", "p", "h1", "h2", "h3",
                                              "h4", "text", "title", "rect", "path", "polyline", "circle", "line"};
  std::vector<std::string> stack;
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    size_t p = at + 1;
    const bool closing = p < html.size() && html[p] == '/';
    if (closing) ++p;
    size_t e = p;
    while (e < html.size() && std::isalnum(static_cast<unsigned char>(html[e]))) ++e;
    const std::string name = html.substr(p, e - p);
    if (!kinds.count(name)) continue;
    const size_t close = html.find('>', e);
    if (close == std::string::npos) return ::testing::AssertionFailure() << "<" << name << " never ends";
    if (html[close - 1] == '/') continue;  // self-closing
    if (closing) {
      if (stack.empty() || stack.back() != name) return ::testing::AssertionFailure() << "unexpected </" << name << ">";
      stack.pop_back();
    } else {
      stack.push_back(name);
    }
  }
  if (!stack.empty()) return ::testing::AssertionFailure() << "<" << stack.back() << "> never closed";
  return ::testing::AssertionSuccess();
}

// The values of every `attribute="..."` (attribute found anywhere, as a substring).
std::vector<std::string> values_of(const std::string& s, const std::string& attribute) {
  std::vector<std::string> out;
  const std::string key = attribute + "=\"";
  for (size_t p = s.find(key); p != std::string::npos; p = s.find(key, p + 1)) {
    const size_t b = p + key.size(), e = s.find('"', b);
    if (e == std::string::npos) break;
    out.push_back(s.substr(b, e - b));
  }
  return out;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Rows of a softmax-like matrix: each row sums to 1, one clear maximum.
Heatmap attention(const std::string& title, const std::vector<std::string>& labels, int shift) {
  Heatmap m{title, {}, labels, labels};
  const size_t n = labels.size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<float> r(n, 0.5f / static_cast<float>(n));
    r[(i + static_cast<size_t>(shift)) % n] += 0.5f;
    m.w.push_back(r);
  }
  return m;
}

std::vector<double> numbers_of(const std::string& s, const std::string& attribute) {
  std::vector<double> out;
  for (const std::string& v : values_of(s, attribute))
    if (!v.empty() && v.find_first_not_of("0123456789.") == std::string::npos) out.push_back(std::stod(v));
  return out;
}

TEST(Report, WellFormedWithEveryLayerAndHead) {
  Html html("test <report> & \"quotes\"");
  html.paragraph("a < b & c");
  html.line_chart("loss", "step", {{"train", {{1, 3.0}, {2, 2.0}, {3, 1.5}}}, {"valid", {{3, 1.7}}}});
  html.line_chart("empty", "step", {});
  html.table({"a", "b"}, {{"1", "<2>"}});
  std::vector<std::string> labels = {"a", "b", "<c>", "d", "e", "f"};
  for (int l = 0; l < 2; ++l) {
    std::vector<Heatmap> maps;
    for (int h = 0; h < 3; ++h) maps.push_back(attention("layer " + std::to_string(l) + " head " + std::to_string(h), labels, h));
    html.heatmap_grid("self-attention, layer " + std::to_string(l), maps);
  }
  const std::string s = html.str();
  EXPECT_TRUE(balanced(s));
  EXPECT_EQ(s.find("<report>"), std::string::npos);  // escaped
  EXPECT_NE(s.find("&lt;report&gt; &amp; &quot;quotes&quot;"), std::string::npos);
  EXPECT_NE(s.find("&lt;c&gt;"), std::string::npos);
  EXPECT_EQ(s.find("<c>"), std::string::npos);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h) EXPECT_NE(s.find("layer " + std::to_string(l) + " head " + std::to_string(h)), std::string::npos);
  // 2 layers x 3 heads x 36 cells.
  EXPECT_GE(count(s, "<rect x=\""), 2u * 3 * 36);
  EXPECT_NE(s.find("<path d=\""), std::string::npos);
  EXPECT_NE(s.find("no data"), std::string::npos);
  EXPECT_EQ(s.find("<script"), std::string::npos);  // self-contained: nothing runs, nothing is fetched
  EXPECT_EQ(count(s, "http"), count(s, "http://www.w3.org/2000/svg"));
}

TEST(Report, NiceTicks) {
  EXPECT_EQ(tg::report::nice_ticks(0, 0.93), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8}));
  EXPECT_EQ(tg::report::nice_ticks(1, 12345), (std::vector<double>{0, 5000, 10000}));
  EXPECT_EQ(tg::report::nice_ticks(1, 388), (std::vector<double>{0, 100, 200, 300}));
  EXPECT_EQ(tg::report::nice_ticks(4.01, 8.87), (std::vector<double>{4, 5, 6, 7, 8}));
  EXPECT_EQ(tg::report::nice_ticks(-3, 3), (std::vector<double>{-4, -2, 0, 2}));
  EXPECT_EQ(tg::report::nice_ticks(0, 1e-3), (std::vector<double>{0, 2e-4, 4e-4, 6e-4, 8e-4, 1e-3}));
  // A constant series still gets ticks around its value.
  std::vector<double> flat = tg::report::nice_ticks(5, 5);
  ASSERT_GE(flat.size(), 2u);
  EXPECT_LE(flat.front(), 5);
  EXPECT_GE(flat.back(), 5 - 1e-9);
  EXPECT_TRUE(tg::report::nice_ticks(0, NAN).empty());
}

TEST(Report, LogTicks) {
  EXPECT_EQ(tg::report::log_ticks(0.003, 20), (std::vector<double>{0.001, 0.01, 0.1, 1, 10, 100}));
  EXPECT_EQ(tg::report::log_ticks(4, 9), (std::vector<double>{2, 5, 10}));
  std::vector<double> wide = tg::report::log_ticks(1e-6, 1e6);  // many decades: every other one
  ASSERT_EQ(wide.size(), 7u);
  for (size_t i = 0; i < wide.size(); ++i) EXPECT_DOUBLE_EQ(wide[i], std::pow(10.0, -6 + 2 * static_cast<int>(i)));
  EXPECT_TRUE(tg::report::log_ticks(0, 1).empty());
  EXPECT_TRUE(tg::report::log_ticks(-1, 1).empty());
}

TEST(Report, CompactTickLabels) {
  using tg::report::format_tick;
  EXPECT_EQ(format_tick(0), "0");
  EXPECT_EQ(format_tick(0.25), "0.25");
  EXPECT_EQ(format_tick(0.1 + 0.2), "0.3");
  EXPECT_EQ(format_tick(3), "3");
  EXPECT_EQ(format_tick(1000), "1k");
  EXPECT_EQ(format_tick(1500), "1.5k");
  EXPECT_EQ(format_tick(20000), "20k");
  EXPECT_EQ(format_tick(-5000), "-5k");
  EXPECT_EQ(format_tick(3e6), "3M");
  EXPECT_EQ(format_tick(0.001), "0.001");
  EXPECT_EQ(format_tick(1e-4), "1e-4");
  EXPECT_EQ(format_tick(2.5e-5), "2.5e-5");
}

TEST(Report, LineChartWithLegendMarkersAndAxes) {
  Series train{"train loss"}, valid{"validation loss"};
  for (int s = 1; s <= 500; ++s) train.points.push_back({s, 0.9 * std::exp(-s / 200.0) + 0.03});
  for (int s : {100, 300, 500}) valid.points.push_back({s, 0.9 * std::exp(-s / 200.0) + 0.05});
  Html html("t");
  html.line_chart("loss", {train, valid}, {.x_label = "step", .y_label = "nats/token"});
  const std::string s = html.str();
  EXPECT_TRUE(balanced(s));
  EXPECT_NE(s.find(">train loss</text>"), std::string::npos);  // legend
  EXPECT_NE(s.find(">validation loss</text>"), std::string::npos);
  EXPECT_NE(s.find(">step</text>"), std::string::npos);  // axis titles
  EXPECT_NE(s.find(">nats/token</text>"), std::string::npos);
  EXPECT_NE(s.find("rotate(-90"), std::string::npos);
  for (const char* tick : {">0</text>", ">0.2</text>", ">0.8</text>", ">100</text>", ">500</text>"}) EXPECT_NE(s.find(tick), std::string::npos) << tick;
  // Two colours; markers on the 3 validation points (and its legend entry), none on the 500.
  EXPECT_NE(s.find("stroke=\"#1f77b4\""), std::string::npos);
  EXPECT_NE(s.find("stroke=\"#ff7f0e\""), std::string::npos);
  EXPECT_EQ(count(s, "<circle"), 3u + 1);
  EXPECT_EQ(count(s, "<path d=\""), 2u);
}

// A run on a GPU gets a chart of its peak GPU memory (metrics' gpu_peak_mib), titled with the top;
// a CPU run's report has none.
TEST(Report, TrainingChartsShowPeakGpuMemoryOfAGpuRun) {
  tg::train::History h;
  h["train/loss"] = {{1, 3.0}, {2, 2.5}, {3, 2.0}};
  Html cpu("cpu run");
  tg::train::add_training_charts(cpu, h);
  EXPECT_EQ(cpu.str().find("GPU memory"), std::string::npos);
  h["train/gpu_peak_mib"] = {{1, 120.0}, {2, 410.4}, {3, 410.4}};
  Html gpu("gpu run");
  tg::train::add_training_charts(gpu, h);
  const std::string s = gpu.str();
  EXPECT_TRUE(balanced(s));
  EXPECT_NE(s.find("GPU memory: peak allocated so far (410 MiB at most)"), std::string::npos);
  EXPECT_NE(s.find(">MiB</text>"), std::string::npos);
}

TEST(Report, LongCurvesAreThinnedAndGapsBreakTheLine) {
  Series noisy{"noisy"};
  for (int s = 0; s < 100000; ++s) noisy.points.push_back({s, (s * 7919) % 1000 / 1000.0});
  noisy.points[50000].second = NAN;
  Html html("t");
  html.line_chart("noisy", {noisy}, {});
  const std::string s = html.str();
  EXPECT_LT(s.size(), 100000u);         // at most 4 points per pixel column
  EXPECT_EQ(count(s, " M"), 2u);        // the NaN splits the path in two
  EXPECT_EQ(s.find("nan"), std::string::npos);
}

TEST(Report, SmoothedSeriesDrawsTheRawFaintly) {
  Series train{"train", {}, 0.9};
  for (int s = 1; s <= 200; ++s) train.points.push_back({s, 1.0 + (s % 2 ? 0.5 : -0.5)});
  Html html("t");
  html.line_chart("loss", {train}, {});
  const std::string s = html.str();
  EXPECT_EQ(count(s, "<path d=\""), 2u);
  EXPECT_NE(s.find("stroke-opacity=\"0.3\""), std::string::npos);
}

TEST(Report, LogAxisAtDecades) {
  Series g{"grad norm"};
  for (int s = 1; s <= 100; ++s) g.points.push_back({s, std::pow(10.0, -s / 25.0)});  // 1 .. 1e-4
  g.points.push_back({101, 0.0});  // not drawable on a log axis: skipped
  Html html("t");
  html.line_chart("gradient norm", "step", {g}, true);
  const std::string s = html.str();
  for (const char* tick : {">1</text>", ">0.1</text>", ">0.01</text>", ">0.001</text>", ">1e-4</text>"}) EXPECT_NE(s.find(tick), std::string::npos) << tick;
  EXPECT_EQ(s.find("inf"), std::string::npos);
}

TEST(Report, EveryHeatmapHasAColourScale) {
  Html html("t");
  std::vector<Heatmap> maps = {attention("h0", {"a", "b", "c"}, 0), attention("h1", {"a", "b", "c"}, 1)};
  maps.push_back(attention("h2", {"a", "b", "c"}, 2));
  maps.back().vmax = 2;  // its own scale
  html.heatmap_grid("grid", maps, 2);
  html.heatmap_grid("again", {attention("h3", {"x", "y"}, 0)});
  const std::string s = html.str();
  EXPECT_TRUE(balanced(s));
  EXPECT_EQ(count(s, "class=\"colorbar\""), 4u);
  // Gradient ids are unique in the document.
  std::vector<std::string> ids;
  for (const std::string& v : values_of(s, "id"))
    if (!v.empty()) ids.push_back(v);
  ASSERT_EQ(ids.size(), 4u);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
  for (const std::string& i : ids) EXPECT_NE(s.find("url(#" + i + ")"), std::string::npos);
  // Labelled 0 .. max: the shared max of the grid (0.5/3 + 0.5 = 0.67), and 2 for the map that set it.
  EXPECT_NE(s.find(">0.67</text>"), std::string::npos);
  EXPECT_NE(s.find(">2</text>"), std::string::npos);
  EXPECT_NE(s.find(">0</text>"), std::string::npos);
  EXPECT_EQ(count(s, "class=\"break\""), 1u);  // 3 maps at 2 per row
}

TEST(Report, HeatmapLabelsAreReadable) {
  const std::string long_label(40, 'x');
  std::vector<std::string> labels = {"<b>", long_label, " ", "\n", "\xff"};
  Html html("t");
  html.heatmap_grid("labels", {attention("map", labels, 0)});
  const std::string s = html.str();
  EXPECT_TRUE(balanced(s));
  EXPECT_EQ(s.find("<b>"), std::string::npos);
  EXPECT_NE(s.find(">&lt;b&gt;</text>"), std::string::npos);
  EXPECT_NE(s.find(">" + std::string(19, 'x') + "\u2026</text>"), std::string::npos);  // cut with an ellipsis ...
  EXPECT_NE(s.find(long_label + " \u2192 "), std::string::npos);                       // ... whole in the tooltip
  EXPECT_NE(s.find("\u2423"), std::string::npos);  // a space token is visible
  EXPECT_NE(s.find("\u23ce"), std::string::npos);  // so is a newline
  EXPECT_NE(s.find("\ufffd"), std::string::npos);  // invalid UTF-8 replaced
  EXPECT_NE(s.find("rotate(-45"), std::string::npos);  // long column labels slant
  EXPECT_NE(s.find("font-size=\"11\""), std::string::npos);
  for (double w : numbers_of(s.substr(s.find("class=\"heatmap\"")), "width")) EXPECT_GE(w, 10);  // cells and bar
}

TEST(Report, HeatmapWidthGrowsWithTokensAndIsCapped) {
  auto width_of = [](size_t n) {
    std::vector<std::string> labels;
    for (size_t i = 0; i < n; ++i) labels.push_back("w" + std::to_string(i));
    Html html("t");
    html.heatmap_grid("g", {attention("m", labels, 0)});
    const std::string s = html.str();
    const std::string svg = s.substr(s.find("class=\"heatmap\""));
    double cell = numbers_of(svg.substr(svg.find("<rect")), "width").front();
    return std::pair<double, double>(numbers_of(svg, "width").front(), cell);
  };
  const auto [w10, c10] = width_of(10);
  const auto [w60, c60] = width_of(60);
  const auto [w300, c300] = width_of(300);
  EXPECT_GE(c10, 12);
  EXPECT_GE(c60, 12);
  EXPECT_GT(w60, w10 * 2);
  EXPECT_LT(w300, 1300);  // capped: 300 tokens do not make a 3600 px map
  EXPECT_LT(c300, 12);
}

TEST(Report, ScatterWithLabels) {
  std::vector<tg::report::Point> pts = {{0, 0, "king"}, {1, 1, "queen"}, {-1, 0.5, "<man>", 1}, {0.5, -1, "woman", 1}};
  for (int i = 0; i < 20; ++i) pts.push_back({3, 3, "same" + std::to_string(i), 2});  // all on one spot
  Html html("t");
  html.scatter("word vectors", pts, {.x_label = "PC 1", .y_label = "PC 2"});
  const std::string s = html.str();
  EXPECT_TRUE(balanced(s));
  EXPECT_EQ(count(s, "<circle"), pts.size());
  for (const char* w : {">king</text>", ">queen</text>", ">&lt;man&gt;</text>", ">woman</text>", ">PC 1</text>", ">PC 2</text>"})
    EXPECT_NE(s.find(w), std::string::npos) << w;
  // Of the 20 on one spot, only labels that do not overlap are drawn; every point keeps a tooltip.
  size_t drawn = 0;
  for (int i = 0; i < 20; ++i) drawn += s.find(">same" + std::to_string(i) + "</text>") != std::string::npos;
  EXPECT_GE(drawn, 1u);
  EXPECT_LT(drawn, 20u);
  for (int i = 0; i < 20; ++i) EXPECT_NE(s.find("<title>same" + std::to_string(i) + " ("), std::string::npos);
  EXPECT_NE(s.find("fill=\"#2ca02c\""), std::string::npos);  // group 2's colour
}

TEST(Report, PcaFindsTheKnownPrincipalAxis) {
  // Points spread along (3, 4, 0, 0)/5, less along (0, 0, 1, 0), a little along (0, 0, 0, 1); the
  // three spreads are made uncorrelated, so these are exactly the principal axes.
  const size_t n = 50;
  std::vector<double> t(n), u(n), e(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i);
    t[i] = 10.0 * std::sin(x * 0.7) + static_cast<double>(i % 7), u[i] = 2.0 * std::cos(x * 1.3), e[i] = 0.01 * static_cast<double>((i * 37) % 11);
  }
  auto centre = [&](std::vector<double>& a) {
    double m = 0;
    for (double v : a) m += v / static_cast<double>(n);
    for (double& v : a) v -= m;
  };
  auto remove = [&](std::vector<double>& a, const std::vector<double>& b) {  // a -= (a.b / b.b) b
    double ab = 0, bb = 0;
    for (size_t i = 0; i < n; ++i) ab += a[i] * b[i], bb += b[i] * b[i];
    for (size_t i = 0; i < n; ++i) a[i] -= ab / bb * b[i];
  };
  centre(t), centre(u), centre(e);
  remove(u, t), remove(e, t), remove(e, u);
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < n; ++i)
    rows.push_back({static_cast<float>(0.6 * t[i] + 5), static_cast<float>(0.8 * t[i] - 1), static_cast<float>(u[i] + 2),
                    static_cast<float>(e[i])});
  const auto xy = tg::report::pca_2d(rows);
  ASSERT_EQ(xy.size(), n);
  for (size_t i = 0; i < n; ++i) {
    // Each axis's sign makes its largest component positive: (0.6, 0.8, 0, 0) and (0, 0, 1, 0).
    EXPECT_NEAR(xy[i].first, t[i], 1e-4);
    EXPECT_NEAR(xy[i].second, u[i], 1e-4);
  }
  EXPECT_EQ(tg::report::pca_2d(rows), xy);  // deterministic
  EXPECT_EQ(tg::report::pca_2d({{1, 2, 3}}), (std::vector<std::pair<double, double>>{{0, 0}}));
  EXPECT_TRUE(tg::report::pca_2d({}).empty());
  EXPECT_THROW(tg::report::pca_2d({{1, 2}, {3}}), tg::Error);
  const auto line = tg::report::pca_2d({{0, 0}, {1, 1}, {2, 2}});  // rank one: no second axis
  EXPECT_NEAR(line[2].first, std::sqrt(2.0), 1e-9);
  EXPECT_EQ(line[2].second, 0);
}

TEST(Report, AnswersLinkToAnchoredHeadings) {
  Html html("t");
  html.answers({{"Do W_Q, W_K and W_V matter?", "Yes: 99% vs 6% <recall>.", "exp 2", "experiment 2"},
                {"Unlinked?", "No link.", ""}});
  html.heading("2. Ablation", 2, "exp 2");
  const std::string s = html.str();
  EXPECT_NE(s.find("<dt>Do W_Q, W_K and W_V matter?</dt><dd>Yes: 99% vs 6% &lt;recall&gt;. <a href=\"#exp-2\">experiment 2</a></dd>"),
            std::string::npos);
  EXPECT_NE(s.find("<dd>No link.</dd>"), std::string::npos);
  EXPECT_NE(s.find("<h2 id=\"exp-2\">2. Ablation</h2>"), std::string::npos);
  html.heading("plain");
  EXPECT_NE(html.str().find("<h2>plain</h2>"), std::string::npos);
  // Written last, shown first: an opening placed at a position taken before the sections.
  Html later("t");
  later.paragraph("intro");
  const size_t at = later.position();
  later.heading("section");
  later.answers({{"Q?", "A.", ""}}, at);
  const std::string l = later.str();
  EXPECT_LT(l.find("<p>intro</p>"), l.find("<dt>Q?</dt>"));
  EXPECT_LT(l.find("<dt>Q?</dt>"), l.find("<h2>section</h2>"));
}

TEST(Report, TablesAlignNumbers) {
  Html html("t");
  html.table({"name", "loss"}, {{"a", "1.25"}, {"b", "12%"}});
  const std::string s = html.str();
  EXPECT_NE(s.find("<th class=\"num\">loss</th>"), std::string::npos);
  EXPECT_NE(s.find("<td>a</td><td class=\"num\">1.25</td>"), std::string::npos);
}

TEST(Report, WritesAtomicallyAndReportsFailure) {
  const std::string dir = ::testing::TempDir() + "/tg_report_test";
  std::filesystem::create_directories(dir);
  Html html("t");
  html.paragraph("hello");
  ASSERT_TRUE(html.write(dir + "/report.html").ok());
  EXPECT_EQ(tg::read_file(dir + "/report.html").value(), html.str());
  const tg::Status bad = html.write(dir + "/no/such/folder/report.html");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("no/such/folder"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tgt
