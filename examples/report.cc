#include "examples/report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "models/safetensors.h"

namespace tg::report {

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

Html::Html(std::string title) : title_(std::move(title)) {}

void Html::heading(const std::string& text, int level) {
  level = std::clamp(level, 1, 4);
  body_ += fmt::format("<h{0}>{1}</h{0}>\n", level, escape(text));
}

void Html::paragraph(const std::string& text) { body_ += "<p>" + escape(text) + "</p>\n"; }
void Html::preformatted(const std::string& text) { body_ += "<pre>" + escape(text) + "</pre>\n"; }

void Html::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  body_ += "<table>\n<tr>";
  for (const auto& h : header) body_ += "<th>" + escape(h) + "</th>";
  body_ += "</tr>\n";
  for (const auto& r : rows) {
    body_ += "<tr>";
    for (const auto& c : r) body_ += "<td>" + escape(c) + "</td>";
    body_ += "</tr>\n";
  }
  body_ += "</table>\n";
}

namespace {
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"};

std::string fmt_tick(double v) {
  if (v == 0) return "0";
  double a = std::fabs(v);
  if (a >= 1e4 || a < 1e-3) return fmt::format("{:.1e}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.4f}", v);
}
}  // namespace

void Html::line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series,
                      bool log_y) {
  const double W = 680, H = 300, L = 70, R = 190, T = 30, B = 45;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  auto ty = [&](double y) { return log_y ? std::log10(std::max(y, 1e-12)) : y; };
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, ty(y)), y1 = std::max(y1, ty(y));
    }
  std::string svg = fmt::format(
      "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n"
      "<text x=\"{}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
      W, H, W, H, L, escape(title));
  if (!(x1 >= x0)) {  // no points
    svg += "<text x=\"70\" y=\"150\" font-size=\"12\">no data</text></svg></figure>\n";
    body_ += svg;
    return;
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (ty(y) - y0) / (y1 - y0) * (H - T - B); };
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", L, T,
                     W - L - R, H - T - B);
  for (int i = 0; i <= 4; ++i) {
    double fy = y0 + (y1 - y0) * i / 4, yy = H - B - (H - T - B) * i / 4.0;
    double label = log_y ? std::pow(10.0, fy) : fy;
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n",
                       L, yy, W - R, yy, L - 5, yy + 4, fmt_tick(label));
    double fx = x0 + (x1 - x0) * i / 4, xx = L + (W - L - R) * i / 4.0;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", xx, H - B + 16,
                       fmt_tick(fx));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", L + (W - L - R) / 2,
                     H - 8, escape(x_label));
  for (size_t s = 0; s < series.size(); ++s) {
    const char* color = kColors[s % 8];
    std::string pts;
    for (auto [x, y] : series[s].points)
      if (std::isfinite(y)) pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    if (series[s].points.size() == 1) {
      auto [x, y] = series[s].points[0];
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(x), py(y), color);
    } else {
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", color, pts);
    }
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>\n",
                       W - R + 10, T + 10 + 18 * s, color, W - R + 26, T + 15 + 18 * s, escape(series[s].name));
  }
  svg += "</svg></figure>\n";
  body_ += svg;
}

void Html::heatmap_grid(const std::string& caption, const std::vector<Heatmap>& maps, int ncols) {
  body_ += "<section class=\"heatmaps\"><h3>" + escape(caption) + "</h3>\n<div class=\"grid\" style=\"grid-template-columns: repeat(" +
           std::to_string(std::max(1, ncols)) + ", auto)\">\n";
  for (const Heatmap& m : maps) {
    const size_t rows = m.w.size(), cols = rows ? m.w[0].size() : 0;
    const double cell = std::clamp(240.0 / static_cast<double>(std::max<size_t>({rows, cols, 1})), 4.0, 18.0);
    const double left = m.row_labels.empty() ? 4 : 60, top = m.col_labels.empty() ? 20 : 70;
    const double W = std::max(left + cell * static_cast<double>(cols) + 4, left + 7.0 * static_cast<double>(m.title.size())),
                 H = top + cell * static_cast<double>(rows) + 4;
    std::string svg = fmt::format(
        "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\">"
        "<text x=\"{}\" y=\"13\" font-size=\"12\" font-weight=\"bold\">{}</text>\n",
        W, H, left, escape(m.title));
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < cols && j < m.w[i].size(); ++j) {
        double v = std::clamp(static_cast<double>(m.w[i][j]), 0.0, 1.0);
        int shade = static_cast<int>(255 - 255 * v);
        svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"rgb({},{},255)\"><title>{:.3f}</title></rect>",
                           left + cell * static_cast<double>(j), top + cell * static_cast<double>(i), cell, cell, shade,
                           shade, v);
      }
    for (size_t i = 0; i < m.row_labels.size() && i < rows; ++i)
      svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"{:.0f}\" text-anchor=\"end\">{}</text>", left - 3,
                         top + cell * (static_cast<double>(i) + 0.75), std::min(cell, 11.0), escape(m.row_labels[i]));
    for (size_t j = 0; j < m.col_labels.size() && j < cols; ++j) {
      double x = left + cell * (static_cast<double>(j) + 0.7);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"{:.0f}\" transform=\"rotate(-60 {:.1f} {})\">{}</text>", x,
                         top - 3, std::min(cell, 11.0), x, top - 3, escape(m.col_labels[j]));
    }
    svg += "</svg>\n";
    body_ += "<div>" + svg + "</div>\n";
  }
  body_ += "</div></section>\n";
}

std::string Html::str() const {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(title_) +
         "</title>\n<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
         ".grid{display:grid;gap:10px}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}</style>\n"
         "</head><body>\n<h1>" + escape(title_) + "</h1>\n" + body_ + "</body></html>\n";
}

absl::Status Html::write(const std::string& path) const { return write_file_atomic(path, str()); }

}  // namespace tg::report
