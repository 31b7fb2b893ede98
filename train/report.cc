#include "train/report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "graph/error.h"
#include "graph/tensor.h"
#include "io/file.h"

namespace tg::report {

// ---- text ----

namespace {

// Length in bytes of the valid UTF-8 sequence starting at s[i], or 0 when it is not valid.
size_t utf8_seq(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  if (n == 3 && ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) >= 0xA0))) return 0;  // overlong, surrogate
  if (n == 4 && ((c == 0xF0 && b(i + 1) < 0x90) || (c == 0xF4 && b(i + 1) >= 0x90))) return 0;
  return n;
}

// Number of characters (code points; an invalid byte counts as one).
size_t text_chars(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) i += std::max<size_t>(utf8_seq(s, i), 1);
  return n;
}

// Estimated width in pixels of text in the default sans-serif font (DejaVu Sans averages ~0.6 em).
double text_width(std::string_view s, double font_px, bool bold = false) {
  return static_cast<double>(text_chars(s)) * font_px * (bold ? 0.66 : 0.6);
}

// At most max_chars characters: longer text keeps max_chars - 1 of them and an ellipsis.
std::string shorten(const std::string& s, size_t max_chars) {
  if (text_chars(s) <= max_chars) return s;
  size_t i = 0;
  for (size_t n = 0; n + 1 < max_chars && i < s.size(); ++n) i += std::max<size_t>(utf8_seq(s, i), 1);
  return s.substr(0, i) + "\u2026";
}

// A token as a label: whitespace and control characters made visible (a space token reads "␣").
std::string visible(const std::string& s) {
  const bool blank = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c == ' '; });
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\u23ce";
    else if (c == '\t') out += "\u21e5";
    else if (c == ' ' && blank) out += "\u2423";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += "\u00b7";
    else out += c;
  }
  return out;
}

bool looks_numeric(const std::string& cell) {
  std::string s = cell;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (!s.empty() && s.back() == '%') s.pop_back();
  size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return false;
  const char* p = s.c_str() + b;
  char* end = nullptr;
  std::strtod(p, &end);
  return end != p && *end == '\0';
}

}  // namespace

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_seq(s, i);
    if (n == 0) {
      out += "\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s, i, n);
      i += n;
      continue;
    }
    switch (const char c = s[i++]) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// ---- ticks ----

namespace {

// A step of 1, 2 or 5 times 10^exp; multiples are computed so that 3 x 0.2 prints as 0.6.
struct Step {
  double mantissa;
  int exp;
  double times(double k) const {
    return exp >= 0 ? k * mantissa * std::pow(10.0, exp) : k * mantissa / std::pow(10.0, -exp);
  }
  double value() const { return times(1); }
};

// Heckbert's "nice numbers" (Graphics Gems, 1990): 1, 2, 5 or 10 times a power of ten near x.
Step nice_number(double x, bool round) {
  int e = static_cast<int>(std::floor(std::log10(x)));
  const double f = x / std::pow(10.0, e);
  double m = round ? (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) : (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10);
  if (m == 10) m = 1, ++e;
  return {m, e};
}

// lo < hi, both finite.
Step nice_step(double lo, double hi, int target) {
  const Step range = nice_number(hi - lo, false);
  return nice_number(range.value() / std::max(target - 1, 1), true);
}

// An axis that maps data to pixels: [lo, hi] (log10 of them on a log axis) with its ticks.
struct Scale {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks, minor;  // minor: unlabelled gridlines (2..9 x 10^k on log axes)
  double t(double v) const { return log ? std::log10(v) : v; }
  double frac(double v) const { return (t(v) - t(lo)) / (t(hi) - t(lo)); }
};

// The data range made non-empty.
void widen(double& lo, double& hi, bool log) {
  if (hi > lo) return;
  if (log) {
    lo /= 2, hi *= 2;
  } else {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d, hi += d;
  }
}

// How far an axis reaches beyond the data: kTight: [lo, hi] with the ticks inside (scatter plots);
// kFromTick: from the tick at or below lo to hi (x axes: a step axis ends at the last step);
// kLoose: from the tick at or below lo to the tick at or above hi (y axes).
enum class Reach { kTight, kFromTick, kLoose };

Scale linear_scale(double lo, double hi, Reach reach, int target = 5) {
  widen(lo, hi, false);
  Scale s;
  const Step d = nice_step(lo, hi, target);
  const double k0 = reach == Reach::kTight ? std::ceil(lo / d.value() - 1e-9) : std::floor(lo / d.value() + 1e-9);
  const double k1 = reach == Reach::kLoose ? std::ceil(hi / d.value() - 1e-9) : std::floor(hi / d.value() + 1e-9);
  for (double k = k0; k <= k1 && s.ticks.size() < 1000; ++k) s.ticks.push_back(d.times(k));
  s.lo = s.ticks.empty() ? lo : std::min(lo, s.ticks.front());
  s.hi = s.ticks.empty() ? hi : std::max(hi, s.ticks.back());
  return s;
}

Scale log_scale(double lo, double hi) {
  widen(lo, hi, true);
  Scale s;
  s.log = true;
  s.ticks = log_ticks(lo, hi);
  s.lo = std::min(lo, s.ticks.front());
  s.hi = std::max(hi, s.ticks.back());
  const int a = static_cast<int>(std::floor(std::log10(s.lo) + 1e-9)), b = static_cast<int>(std::ceil(std::log10(s.hi) - 1e-9));
  if (b - a <= 3)  // unlabelled lines at 2..9 x 10^k, where they do not crowd
    for (int e = a; e < b; ++e)
      for (int m = 2; m <= 9; ++m) {
        const double v = Step{static_cast<double>(m), e}.value();
        if (v > s.lo && v < s.hi && std::find(s.ticks.begin(), s.ticks.end(), v) == s.ticks.end()) s.minor.push_back(v);
      }
  return s;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  return linear_scale(lo, hi, Reach::kFromTick, std::max(target, 2)).ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  widen(lo, hi, true);
  const int a = static_cast<int>(std::floor(std::log10(lo) + 1e-9)), b = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  std::vector<double> out;
  if (b - a <= 2) {  // few decades: 1, 2, 5 x 10^k from the last at or below lo to the first at or above hi
    std::vector<double> all;
    for (int e = a - 1; e <= b; ++e)
      for (double m : {1.0, 2.0, 5.0}) all.push_back(Step{m, e}.value());
    size_t first = 0, last = all.size() - 1;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] <= lo * (1 + 1e-9)) first = i;
    for (size_t i = all.size(); i-- > 0;)
      if (all[i] >= hi * (1 - 1e-9)) last = i;
    out.assign(all.begin() + static_cast<std::ptrdiff_t>(first), all.begin() + static_cast<std::ptrdiff_t>(last) + 1);
    return out;
  }
  const int every = (b - a + 5) / 6;  // at most ~7 labelled decades
  const int start = static_cast<int>(std::floor(static_cast<double>(a) / every)) * every;
  for (int e = start;; e += every) {
    out.push_back(Step{1, e}.value());
    if (e >= b) break;
  }
  return out;
}

std::string format_tick(double v) {
  if (v == 0 || !std::isfinite(v)) return v == 0 ? "0" : fmt::format("{}", v);
  const double a = std::fabs(v);
  if (a >= 1e3 && a < 1e15) {
    static const char* kSuffix[] = {"k", "M", "G", "T"};
    int i = 0;
    double x = v / 1e3;
    while (std::fabs(x) >= 999.95 && i < 3) x /= 1e3, ++i;
    return fmt::format("{:.4g}{}", x, kSuffix[i]);
  }
  if (a >= 1e-3 && a < 1e3) return fmt::format("{:.4g}", v);
  int e = static_cast<int>(std::floor(std::log10(a)));
  std::string m = fmt::format("{:.3g}", v / Step{1, e}.value());
  if (m == "10" || m == "-10") m = v < 0 ? "-1" : "1", ++e;
  return fmt::format("{}e{}", m, e);
}

// ---- document ----

Html::Html(std::string title) : title_(std::move(title)) {}

namespace {
std::string anchor_id(const std::string& a) {
  std::string id = a;
  for (char& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  return id;
}
}  // namespace

void Html::heading(const std::string& text, int level, const std::string& anchor) {
  level = std::clamp(level, 1, 4);
  const std::string id = anchor.empty() ? "" : " id=\"" + anchor_id(anchor) + "\"";
  body_ += fmt::format("<h{0}{1}>{2}</h{0}>\n", level, id, escape(text));
}

void Html::answers(const std::vector<Answer>& items, size_t at) {
  std::string s = "<dl class=\"answers\">\n";
  for (const Answer& a : items) {
    s += "<dt>" + escape(a.question) + "</dt><dd>" + escape(a.answer);
    if (!a.anchor.empty()) s += " <a href=\"#" + anchor_id(a.anchor) + "\">" + escape(a.link_text) + "</a>";
    s += "</dd>\n";
  }
  s += "</dl>\n";
  body_.insert(std::min(at, body_.size()), s);
}

void Html::paragraph(const std::string& text) { body_ += "<p>" + escape(text) + "</p>\n"; }
void Html::preformatted(const std::string& text) { body_ += "<pre>" + escape(text) + "</pre>\n"; }

void Html::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  size_t ncols = header.size();
  for (const auto& r : rows) ncols = std::max(ncols, r.size());
  std::vector<bool> numeric(ncols, true), any(ncols, false);
  for (const auto& r : rows)
    for (size_t j = 0; j < r.size(); ++j) {
      if (r[j].empty()) continue;
      any[j] = true;
      if (!looks_numeric(r[j])) numeric[j] = false;
    }
  auto cls = [&](size_t j) { return numeric[j] && any[j] ? " class=\"num\"" : ""; };
  body_ += "<table>\n<tr>";
  for (size_t j = 0; j < header.size(); ++j) body_ += fmt::format("<th{}>{}</th>", cls(j), escape(header[j]));
  body_ += "</tr>\n";
  for (const auto& r : rows) {
    body_ += "<tr>";
    for (size_t j = 0; j < r.size(); ++j) body_ += fmt::format("<td{}>{}</td>", cls(j), escape(r[j]));
    body_ += "</tr>\n";
  }
  body_ += "</table>\n";
}

// ---- charts ----

namespace {

// Tableau 10: distinct at a glance, readable on white.
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr size_t kNumColors = sizeof(kColors) / sizeof(kColors[0]);
constexpr double kTickFont = 11, kLabelFont = 12;

struct Frame {  // the plotting area inside the SVG
  double left, top, width, height;
  double x(const Scale& s, double v) const { return left + s.frac(v) * width; }
  double y(const Scale& s, double v) const { return top + height - s.frac(v) * height; }
};

double max_label_width(const std::vector<double>& ticks) {
  double w = 0;
  for (double t : ticks) w = std::max(w, text_width(format_tick(t), kTickFont));
  return w;
}

std::string svg_open(double w, double h) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
                     "font-family=\"DejaVu Sans, Verdana, sans-serif\">\n",
                     w, h);
}

// Title, gridlines, axes, tick labels and axis titles around frame f.
std::string axes(const Frame& f, const Scale& xs, const Scale& ys, const std::string& title, const ChartOptions& o) {
  std::string s;
  if (!title.empty())
    s += fmt::format("<text x=\"{:.1f}\" y=\"18\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">{}</text>\n", f.left,
                     escape(title));
  s += "<g stroke=\"#f0f0f0\">";
  for (double v : ys.minor) s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", f.left, f.y(ys, v), f.left + f.width, f.y(ys, v));
  s += "</g>\n<g stroke=\"#dedede\">";
  for (double v : ys.ticks) s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", f.left, f.y(ys, v), f.left + f.width, f.y(ys, v));
  for (double v : xs.ticks) s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", f.x(xs, v), f.top, f.x(xs, v), f.top + f.height);
  s += "</g>\n";
  const double bottom = f.top + f.height;
  s += fmt::format("<g stroke=\"#777\"><line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>"
                   "<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{3:.1f}\" y2=\"{2:.1f}\"/>",
                   f.left, f.top, bottom, f.left + f.width);
  for (double v : ys.ticks) s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", f.left - 4, f.y(ys, v), f.left, f.y(ys, v));
  for (double v : xs.ticks) s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", f.x(xs, v), bottom, f.x(xs, v), bottom + 4);
  s += "</g>\n<g font-size=\"11\" fill=\"#444\">";
  for (double v : ys.ticks)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", f.left - 7, f.y(ys, v) + 4, format_tick(v));
  for (double v : xs.ticks)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", f.x(xs, v), bottom + 17, format_tick(v));
  s += "</g>\n";
  if (!o.x_label.empty())
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#222\">{}</text>\n",
                     f.left + f.width / 2, bottom + 37, escape(o.x_label));
  if (!o.y_label.empty()) {
    const double x = f.left - max_label_width(ys.ticks) - 18, y = f.top + f.height / 2;
    s += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#222\" "
                     "transform=\"rotate(-90 {0:.1f} {1:.1f})\">{2}</text>\n",
                     x, y, escape(o.y_label));
  }
  return s;
}

// Pixel points thinned to at most four per pixel column (first, lowest, highest, last): the
// drawing is unchanged and a 100k-step loss curve stays a few kilobytes.
std::vector<std::pair<double, double>> thin(const std::vector<std::pair<double, double>>& p) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < p.size();) {
    size_t j = i, lo = i, hi = i;
    const double col = std::floor(p[i].first);
    for (; j < p.size() && std::floor(p[j].first) == col; ++j) {
      if (p[j].second < p[lo].second) lo = j;
      if (p[j].second > p[hi].second) hi = j;
    }
    std::array<size_t, 4> keep = {i, std::min(lo, hi), std::max(lo, hi), j - 1};
    for (size_t k = 0; k < 4; ++k)
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(p[keep[k]]);
    i = j;
  }
  return out;
}

std::string no_data(const std::string& title) {
  return "<figure>" + svg_open(420, 80) +
         fmt::format("<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">{}</text>"
                     "<text x=\"10\" y=\"50\" font-size=\"12\" fill=\"#888\">no data</text></svg></figure>\n",
                     escape(title));
}

}  // namespace

void Html::line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series, bool log_y) {
  line_chart(title, series, ChartOptions{.x_label = x_label, .log_y = log_y});
}

void Html::line_chart(const std::string& title, const std::vector<Series>& series, const ChartOptions& o) {
  const auto usable = [&](double x, double y) { return std::isfinite(x) && std::isfinite(y) && (!o.log_y || y > 0); };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (auto [x, y] : s.points)
      if (usable(x, y)) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (!(x1 >= x0)) {
    body_ += no_data(title);
    return;
  }
  const Scale xs = linear_scale(x0, x1, Reach::kFromTick), ys = o.log_y ? log_scale(y0, y1) : linear_scale(y0, y1, Reach::kLoose);

  // Legend entries (right of the plot) and the frame around the plot.
  std::vector<std::string> names;
  double legend_w = 0;
  for (const auto& s : series) {
    names.push_back(shorten(s.name, 36));
    legend_w = std::max(legend_w, text_width(names.back(), kLabelFont));
  }
  const bool legend = legend_w > 0;
  const double pw = o.width > 0 ? o.width : 600, ph = o.height > 0 ? o.height : 280;
  const double left = 14 + max_label_width(ys.ticks) + (o.y_label.empty() ? 0 : 20), top = title.empty() ? 12 : 32;
  const Frame f{left, top, pw, ph};
  const double width = left + pw + (legend ? 44 + legend_w : 24);
  const double height = std::max(top + ph + (o.x_label.empty() ? 28 : 46), top + 18.0 * static_cast<double>(series.size()) + 8);

  std::string svg = "<figure>" + svg_open(width, height) + axes(f, xs, ys, title, o);
  // A path through pixel points, broken at gaps (empty segments).
  auto path_of = [](const std::vector<std::vector<std::pair<double, double>>>& segments) {
    std::string d;
    for (const auto& seg : segments) {
      const auto pts = thin(seg);
      for (size_t k = 0; k < pts.size(); ++k) d += fmt::format("{}{:.1f},{:.1f}", k == 0 ? " M" : " L", pts[k].first, pts[k].second);
    }
    return d;
  };
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& se = series[i];
    const char* color = kColors[i % kNumColors];
    const bool smooth = se.smoothing > 0 && se.smoothing < 1;
    std::vector<std::vector<std::pair<double, double>>> raw(1), ema(1);
    size_t count = 0;
    double avg = 0, weight = 0;
    for (auto [x, y] : se.points) {
      if (!usable(x, y)) {
        raw.emplace_back(), ema.emplace_back();
        continue;
      }
      ++count;
      raw.back().emplace_back(f.x(xs, x), f.y(ys, y));
      if (smooth) {  // debiased EMA (in log space on a log axis, so that it stays positive)
        avg = se.smoothing * avg + (1 - se.smoothing) * ys.t(y), weight = se.smoothing * weight + (1 - se.smoothing);
        const double v = avg / weight;
        ema.back().emplace_back(f.x(xs, x), f.y(ys, o.log_y ? std::pow(10.0, v) : v));
      }
    }
    // Few points (a validation curve, a final score): markers, so each measurement is seen.
    const bool markers = !smooth && (count <= 30 || static_cast<double>(count) * 12 <= pw);
    svg += fmt::format("<g><title>{}</title>", escape(se.name));
    if (count > 1)
      svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" stroke-linejoin=\"round\"{}/>",
                         path_of(raw), color, smooth ? 1.2 : 1.8, smooth ? " stroke-opacity=\"0.3\"" : "");
    if (smooth && count > 1)
      svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" stroke-linejoin=\"round\"/>", path_of(ema), color);
    if (markers || count == 1)
      for (const auto& seg : raw)
        for (auto [px, py] : seg)
          svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.2\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"1\"/>", px, py, color);
    svg += "</g>\n";
    if (legend) {
      const double lx = left + pw + 16, ly = top + 10 + 18.0 * static_cast<double>(i);
      svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2.5\"/>", lx, ly,
                         lx + 20, ly, color);
      if (markers) svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.2\" fill=\"{}\"/>", lx + 10, ly, color);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"#222\">{}</text>\n", lx + 26, ly + 4, escape(names[i]));
    }
  }
  body_ += svg + "</svg></figure>\n";
}

void Html::scatter(const std::string& title, const std::vector<Point>& points, const ChartOptions& o) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const Point& p : points)
    if (std::isfinite(p.x) && std::isfinite(p.y)) x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  if (!(x1 >= x0)) {
    body_ += no_data(title);
    return;
  }
  // A margin of 5% so that no point sits on the frame.
  const double mx = (x1 - x0) * 0.05, my = (y1 - y0) * 0.05;
  const Scale xs = linear_scale(x0 - mx, x1 + mx, Reach::kTight), ys = linear_scale(y0 - my, y1 + my, Reach::kTight);
  const double pw = o.width > 0 ? o.width : 640, ph = o.height > 0 ? o.height : 480;
  const double left = 14 + max_label_width(ys.ticks) + (o.y_label.empty() ? 0 : 20), top = title.empty() ? 12 : 32;
  const Frame f{left, top, pw, ph};
  const double width = left + pw + 24, height = top + ph + (o.x_label.empty() ? 28 : 46);
  std::string svg = "<figure>" + svg_open(width, height) + axes(f, xs, ys, title, o);

  struct Box {
    double x0, y0, x1, y1;
    bool overlaps(const Box& b) const { return x0 < b.x1 && b.x0 < x1 && y0 < b.y1 && b.y0 < y1; }
  };
  std::vector<std::pair<double, double>> px;
  std::vector<Box> taken;  // the points themselves, then each label drawn
  for (const Point& p : points) {
    px.emplace_back(f.x(xs, p.x), f.y(ys, p.y));
    taken.push_back({px.back().first - 3, px.back().second - 3, px.back().first + 3, px.back().second + 3});
  }
  std::string dots, labels;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    const auto [cx, cy] = px[i];
    const char* color = kColors[static_cast<size_t>(std::abs(p.group)) % kNumColors];
    dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.85\"><title>{} ({:.3g}, {:.3g})</title></circle>",
                        cx, cy, color, escape(p.label), p.x, p.y);
    const std::string text = shorten(visible(p.label), 24);
    if (text.empty()) continue;
    // Right, left, above, below the point: the first place that overlaps nothing drawn so far.
    const double w = text_width(text, kTickFont), h = 11;
    const std::array<Box, 4> places = {Box{cx + 5, cy - h / 2, cx + 5 + w, cy + h / 2}, Box{cx - 5 - w, cy - h / 2, cx - 5, cy + h / 2},
                                       Box{cx - w / 2, cy - 5 - h, cx + w / 2, cy - 5}, Box{cx - w / 2, cy + 5, cx + w / 2, cy + 5 + h}};
    for (const Box& b : places) {
      if (b.x0 < 0 || b.x1 > width || b.y0 < top - 4 || b.y1 > top + ph + 4) continue;
      bool clear = true;
      for (size_t k = 0; k < taken.size() && clear; ++k)
        if (k != i && taken[k].overlaps(b)) clear = false;
      if (!clear) continue;
      taken.push_back(b);
      labels += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", b.x0, b.y1 - 1.5, escape(text));
      break;
    }
  }
  svg += "<g>" + dots + "</g>\n<g font-size=\"11\" fill=\"#333\">" + labels + "</g>\n";
  body_ += svg + "</svg></figure>\n";
}

// ---- heatmaps ----

namespace {

// Matplotlib's "Blues": white for 0, dark blue for the maximum; labels stay readable around it.
constexpr std::array<std::array<int, 3>, 9> kBlues = {{{247, 251, 255}, {222, 235, 247}, {198, 219, 239}, {158, 202, 225}, {107, 174, 214},
                                                      {66, 146, 198}, {33, 113, 181}, {8, 81, 156}, {8, 48, 107}}};

std::string blues(double t) {
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(kBlues.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), kBlues.size() - 2);
  const double f = t - static_cast<double>(i);
  std::array<int, 3> c{};
  for (size_t k = 0; k < 3; ++k) c[k] = static_cast<int>(std::lround(kBlues[i][k] * (1 - f) + kBlues[i + 1][k] * f));
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

constexpr double kMapFont = 11;       // labels readable at 100% zoom
constexpr size_t kMaxLabelChars = 20;  // longer ones end in an ellipsis

std::string heatmap_svg(const Heatmap& m, double vmax, int id) {
  const size_t rows = m.w.size();
  size_t cols = 0;
  for (const auto& r : m.w) cols = std::max(cols, r.size());
  const size_t n = std::max<size_t>({rows, cols, 1});
  // Cells 12-20 px so an 11 px label fits beside each; past 80 tokens the map is capped at ~960 px
  // and only every k-th label is written.
  const double cell = n * 12 <= 960 ? std::clamp(240.0 / static_cast<double>(n), 12.0, 20.0) : 960.0 / static_cast<double>(n);
  const size_t every = static_cast<size_t>(std::ceil(12.0 / cell - 1e-9));

  std::vector<std::string> rl, cl;
  double rw = 0, cw = 0;
  for (size_t i = 0; i < rows && i < m.row_labels.size(); ++i) {
    rl.push_back(shorten(visible(m.row_labels[i]), kMaxLabelChars));
    rw = std::max(rw, text_width(rl.back(), kMapFont));
  }
  for (size_t j = 0; j < cols && j < m.col_labels.size(); ++j) {
    cl.push_back(shorten(visible(m.col_labels[j]), kMaxLabelChars));
    cw = std::max(cw, text_width(cl.back(), kMapFont));
  }
  // Column labels: horizontal when they fit their column, else at 45 degrees, or upright when
  // the columns are too narrow for slanted lines of text not to overlap.
  const double spacing = cell * static_cast<double>(every);
  const int angle = cw <= spacing - 2 ? 0 : spacing * 0.7071 >= 12 ? 45 : 90;
  const bool rotate = angle != 0;
  const double rise = angle == 45 ? cw * 0.7071 : cw;
  const double left = rl.empty() ? 4 : rw + 10;
  const double top = 22 + (cl.empty() ? 0 : rotate ? rise + 14 : 16);
  const double mw = cell * static_cast<double>(cols), mh = cell * static_cast<double>(rows);
  const double bar_x = left + mw + 14, bar_h = std::clamp(mh, 72.0, 260.0), bar_label_w = 40;
  double width = bar_x + 10 + 6 + bar_label_w;
  if (angle == 45 && !cl.empty()) width = std::max(width, left + cell * (static_cast<double>(cl.size()) - 0.5) + rise + 8);
  width = std::max(width, 4 + text_width(m.title, 12, true) + 8);
  const double height = top + std::max(mh, bar_h) + 6;

  std::string s = fmt::format("<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
                              "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
                              "<text x=\"4\" y=\"14\" font-size=\"12\" font-weight=\"bold\" fill=\"#222\">{2}</text>\n",
                              width, height, escape(m.title));
  s += "<g>";
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < m.w[i].size(); ++j) {
      const double v = m.w[i][j];
      const std::string fill = std::isfinite(v) ? blues(vmax > 0 ? v / vmax : 0) : "#bbbbbb";
      const std::string who = (i < m.row_labels.size() ? m.row_labels[i] : std::to_string(i)) + " \u2192 " +
                              (j < m.col_labels.size() ? m.col_labels[j] : std::to_string(j));
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}: {:.3f}</title></rect>",
                       left + cell * static_cast<double>(j), top + cell * static_cast<double>(i), cell + 0.05, cell + 0.05, fill,
                       escape(who), v);
    }
  s += fmt::format("</g>\n<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#bbb\"/>\n", left, top, mw, mh);
  s += "<g font-size=\"11\" fill=\"#222\">";
  for (size_t i = 0; i < rl.size(); i += every)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 5, top + cell * (static_cast<double>(i) + 0.5) + 4,
                     escape(rl[i]));
  for (size_t j = 0; j < cl.size(); j += every) {
    const double x = left + cell * (static_cast<double>(j) + 0.5);
    if (angle == 45)
      s += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" transform=\"rotate(-45 {0:.1f} {1:.1f})\">{2}</text>", x - 2, top - 6, escape(cl[j]));
    else if (angle == 90)
      s += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" transform=\"rotate(-90 {0:.1f} {1:.1f})\">{2}</text>", x + 4, top - 5, escape(cl[j]));
    else
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", x, top - 5, escape(cl[j]));
  }
  s += "</g>\n";
  // The colour scale: 0 at the bottom, vmax at the top.
  s += fmt::format("<defs><linearGradient id=\"tg-scale-{}\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">", id);
  for (size_t k = 0; k < kBlues.size(); ++k)
    s += fmt::format("<stop offset=\"{:.3f}\" stop-color=\"{}\"/>", static_cast<double>(k) / static_cast<double>(kBlues.size() - 1),
                     blues(static_cast<double>(k) / static_cast<double>(kBlues.size() - 1)));
  s += "</linearGradient></defs>\n";
  s += fmt::format("<g class=\"colorbar\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"{:.1f}\" fill=\"url(#tg-scale-{})\" stroke=\"#bbb\"/>",
                   bar_x, top, bar_h, id);
  s += "<g font-size=\"11\" fill=\"#444\">";
  for (double f : {0.0, 0.5, 1.0})
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#777\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\">{5}</text>",
                     bar_x + 10, top + bar_h * (1 - f), bar_x + 13, bar_x + 16, top + bar_h * (1 - f) + 4, format_tick(std::stod(fmt::format("{:.2g}", vmax * f))));
  s += "</g></g>\n</svg>\n";
  return s;
}

}  // namespace

std::vector<Heatmap> head_heatmaps(const Tensor& weights, const std::string& title, const std::vector<std::string>& row_labels,
                                   const std::vector<std::string>& col_labels) {
  TG_CHECK(weights.dim() == 4 && weights.size(0) == 1, "head_heatmaps", "expected weights [1, heads, T, S], got shape {}",
           weights.shape());
  const int64_t H = weights.size(1), T = weights.size(2), S = weights.size(3);
  TG_CHECK(static_cast<int64_t>(row_labels.size()) == T && static_cast<int64_t>(col_labels.size()) == S, "head_heatmaps",
           "{} row and {} column labels for weights of shape {}", row_labels.size(), col_labels.size(), weights.shape());
  const std::vector<float> v = weights.to_vector<float>();
  std::vector<Heatmap> maps;
  for (int64_t h = 0; h < H; ++h) {
    Heatmap m{fmt::format("{} head {}", title, h), {}, row_labels, col_labels};
    for (int64_t i = 0; i < T; ++i) m.w.emplace_back(v.begin() + (h * T + i) * S, v.begin() + (h * T + i + 1) * S);
    maps.push_back(std::move(m));
  }
  return maps;
}

void Html::heatmap_grid(const std::string& caption, const std::vector<Heatmap>& maps, int ncols) {
  double shared = 0;  // one scale for the grid, so that a diffuse head looks paler than a sharp one
  for (const Heatmap& m : maps)
    for (const auto& r : m.w)
      for (float v : r)
        if (std::isfinite(v)) shared = std::max(shared, static_cast<double>(v));
  if (shared <= 0) shared = 1;
  body_ += "<section class=\"heatmaps\"><h3>" + escape(caption) + "</h3>\n<div class=\"maps\">\n";
  const size_t per_row = static_cast<size_t>(std::max(1, ncols));
  for (size_t k = 0; k < maps.size(); ++k) {
    if (k > 0 && k % per_row == 0) body_ += "<div class=\"break\"></div>\n";
    body_ += "<div>" + heatmap_svg(maps[k], maps[k].vmax > 0 ? maps[k].vmax : shared, next_id_++) + "</div>\n";
  }
  body_ += "</div></section>\n";
}

std::string Html::str() const {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(title_) +
         "</title>\n<style>\n"
         "body{font-family:\"DejaVu Sans\",Verdana,system-ui,sans-serif;max-width:1240px;margin:2em auto;padding:0 1.2em;"
         "color:#222;line-height:1.45;font-size:15px}\n"
         "h1{font-size:1.7em;margin:0 0 .4em}h2{font-size:1.3em;margin-top:1.8em;border-bottom:1px solid #e2e2e2;padding-bottom:.2em}"
         "h3{font-size:1.05em;margin:1.2em 0 .5em}\n"
         "table{border-collapse:collapse;margin:.8em 0;font-size:14px}th,td{padding:4px 12px;text-align:left;vertical-align:top;"
         "border-bottom:1px solid #e6e6e6}th{background:#f4f5f7;border-bottom:2px solid #ccc}"
         "td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even) td{background:#fafafb}\n"
         "figure{margin:1em 0}svg{display:block}\n"
         "pre{background:#f4f5f7;padding:10px;border-radius:4px;white-space:pre-wrap;font-size:13px}\n"
         "dl.answers dt{font-weight:bold;margin-top:.7em}dl.answers dd{margin:.2em 0 0 1.2em}\n"
         ".maps{display:flex;flex-wrap:wrap;gap:18px 30px;align-items:flex-start;overflow-x:auto}.break{flex-basis:100%;height:0}\n"
         "</style>\n</head><body>\n<h1>" +
         escape(title_) + "</h1>\n" + body_ + "</body></html>\n";
}

Status Html::write(const std::string& path) const { return write_file_atomic(path, str()); }

// ---- PCA ----

namespace {

// Deterministic start vectors: splitmix64.
double start_value(uint64_t i) {
  uint64_t z = i + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 9007199254740992.0 - 0.5;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Makes b orthogonal to a (unit) and unit; false when nothing is left of it.
bool orthonormalize(const std::vector<double>* a, std::vector<double>& b, double scale) {
  if (a) {
    const double p = dot(*a, b);
    for (size_t i = 0; i < b.size(); ++i) b[i] -= p * (*a)[i];
  }
  const double n = std::sqrt(dot(b, b));
  if (!(n > 1e-12 * scale)) return false;
  for (double& x : b) x /= n;
  return true;
}

}  // namespace

std::vector<std::pair<double, double>> pca_2d(const std::vector<std::vector<float>>& rows) {
  const size_t n = rows.size(), d = n ? rows[0].size() : 0;
  for (size_t i = 0; i < n; ++i)
    TG_CHECK(rows[i].size() == d, "pca_2d", "row {} has {} values, row 0 has {}", i, rows[i].size(), d);
  std::vector<std::pair<double, double>> out(n, {0.0, 0.0});
  if (n < 2 || d == 0) return out;
  std::vector<double> mean(d, 0.0), x(n * d);
  for (const auto& r : rows)
    for (size_t j = 0; j < d; ++j) mean[j] += r[j];
  for (double& m : mean) m /= static_cast<double>(n);
  double total = 0;  // the trace of the covariance: the scale against which "nothing left" is judged
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < d; ++j) x[i * d + j] = rows[i][j] - mean[j], total += x[i * d + j] * x[i * d + j];
  total /= static_cast<double>(n);
  if (!(total > 0)) return out;
  // C v = X^T (X v) / n, without forming the d x d covariance.
  auto cov_times = [&](const std::vector<double>& v) {
    std::vector<double> w(d, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const double* xi = &x[i * d];
      double u = 0;
      for (size_t j = 0; j < d; ++j) u += xi[j] * v[j];
      for (size_t j = 0; j < d; ++j) w[j] += u * xi[j];
    }
    for (double& wj : w) wj /= static_cast<double>(n);
    return w;
  };
  // Orthogonal (subspace) iteration on two vectors, then Rayleigh-Ritz in the 2-D subspace: it
  // converges at the rate lambda3/lambda2 even when lambda1 and lambda2 are close.
  const size_t k = std::min<size_t>(2, d);
  std::vector<std::vector<double>> v(k, std::vector<double>(d));
  for (size_t c = 0; c < k; ++c)
    for (size_t j = 0; j < d; ++j) v[c][j] = start_value(c * 1000003 + j);
  bool have2 = k == 2;
  orthonormalize(nullptr, v[0], 1.0);
  if (have2) have2 = orthonormalize(&v[0], v[1], 1.0);
  for (int it = 0; it < 2000; ++it) {
    std::vector<std::vector<double>> w;
    for (size_t c = 0; c < (have2 ? 2u : 1u); ++c) w.push_back(cov_times(v[c]));
    if (!orthonormalize(nullptr, w[0], total)) break;
    if (have2 && !orthonormalize(&w[0], w[1], total)) have2 = false, w.pop_back();
    // How far the new vectors stand out of the old span (0 once the subspace has settled).
    double change = 0;
    for (const auto& wc : w) {
      double in = 0;
      for (size_t c = 0; c < w.size(); ++c) in += dot(wc, v[c]) * dot(wc, v[c]);
      change += 1 - in;
    }
    for (size_t c = 0; c < w.size(); ++c) v[c] = std::move(w[c]);
    if (std::fabs(change) < 1e-15 && it > 3) break;
  }
  if (have2) {  // rotate within the subspace onto the eigenvectors of the 2 x 2 projection
    const std::vector<double> c0 = cov_times(v[0]), c1 = cov_times(v[1]);
    const double a = dot(v[0], c0), b = dot(v[0], c1), c = dot(v[1], c1);
    const double theta = 0.5 * std::atan2(2 * b, a - c);  // the angle of the larger eigenvector
    const double cs = std::cos(theta), sn = std::sin(theta);
    std::vector<double> e0(d), e1(d);
    for (size_t j = 0; j < d; ++j) e0[j] = cs * v[0][j] + sn * v[1][j], e1[j] = -sn * v[0][j] + cs * v[1][j];
    v[0] = std::move(e0), v[1] = std::move(e1);
  }
  for (size_t c = 0; c < (have2 ? 2u : 1u); ++c) {  // sign: the largest-magnitude component positive
    size_t big = 0;
    for (size_t j = 1; j < d; ++j)
      if (std::fabs(v[c][j]) > std::fabs(v[c][big]) + 1e-12) big = j;
    if (v[c][big] < 0)
      for (double& t : v[c]) t = -t;
  }
  for (size_t i = 0; i < n; ++i) {
    const double* xi = &x[i * d];
    double p0 = 0, p1 = 0;
    for (size_t j = 0; j < d; ++j) p0 += xi[j] * v[0][j], p1 += have2 ? xi[j] * v[1][j] : 0.0;
    out[i] = {p0, p1};
  }
  return out;
}

}  // namespace tg::report
