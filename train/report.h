#pragma once
// A self-contained HTML report: one file, inline SVG, no scripts, nothing downloaded. Headings,
// text, tables, line charts (train and validation curves together, optional log scale), scatter
// plots with labelled points (a PCA of word vectors) and grids of heatmaps (attention weights, one
// per layer and head, in the spirit of bertviz's head view), each with its colour scale.
//
//   tg::report::Html html("train_lm");
//   html.line_chart("loss", {{"train", train_points}, {"validation", valid_points}},
//                   {.x_label = "step", .y_label = "nats/token", .log_y = true});
//   html.heatmap_grid("self-attention, layer 0", maps);
//   html.write(dir + "/report.html").or_throw();   // atomic: readers never see half a report
//
// Axes carry ticks at round numbers (1, 2, 5 x 10^k; decades on log axes) labelled compactly
// (20k, 0.001, 1e-4), gridlines and titles; every series gets a colour and a legend entry.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "../io/status.h"

namespace tg {
class Tensor;
}

namespace tg::report {

// One curve: (x, y) points in x order. Non-finite y (and y <= 0 on a log axis) leave a gap.
// smoothing in (0, 1): the points are drawn faintly and, over them, their exponential moving
// average with that weight (debiased, as TensorBoard draws a noisy training loss).
struct Series {
  std::string name{};
  std::vector<std::pair<double, double>> points{};
  double smoothing = 0;
};

// A matrix of non-negative weights (rows: queries, columns: keys), drawn with a colour scale from
// 0 to vmax. vmax <= 0: the largest weight of all maps in the same heatmap_grid (one scale, so
// maps compare). Long labels are cut with an ellipsis; the cell's tooltip has the full text.
struct Heatmap {
  std::string title{};  // "layer 0, head 3"
  std::vector<std::vector<float>> w{};
  std::vector<std::string> row_labels{}, col_labels{};
  double vmax = 0;
};

// One heatmap per head of recorded attention weights [1, heads, T, S] (MultiHeadAttention's
// last_weights): titled "TITLE head h", rows labelled by the T queries, columns by the S keys.
std::vector<Heatmap> head_heatmaps(const Tensor& weights, const std::string& title, const std::vector<std::string>& row_labels,
                                   const std::vector<std::string>& col_labels);

// A labelled point of a scatter plot; points of the same group share a colour.
struct Point {
  double x = 0, y = 0;
  std::string label{};
  int group = 0;
};

struct ChartOptions {
  std::string x_label{};  // axis titles, may be empty
  std::string y_label{};
  bool log_y = false;
  int width = 0;  // the plotting area in pixels, 0: 600 x 280 (line chart), 640 x 480 (scatter);
  int height = 0;  // the legend, tick labels and titles come on top
};

class Html {
 public:
  explicit Html(std::string title);
  // anchor (optional): the heading's id, so that a link ("#anchor") can point at it; letters,
  // digits, '-' and '_' are kept, anything else becomes '-'.
  void heading(const std::string& text, int level = 2, const std::string& anchor = "");
  void paragraph(const std::string& text);  // escaped
  void preformatted(const std::string& text);
  // Questions, each with its short answer and a link to the section that backs it (a heading's
  // anchor; empty: no link): the opening of a report that answers what its readers ask.
  struct Answer {
    std::string question{}, answer{}, anchor{}, link_text = "details";
  };
  // at: where in the document (a position() taken earlier; default: the end), so that an opening
  // can be written once the sections it summarises have their numbers.
  void answers(const std::vector<Answer>& items, size_t at = std::string::npos);
  size_t position() const { return body_.size(); }
  // Cells that read as numbers are right-aligned, text left-aligned.
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
  // Several series share the axes, each with its colour and legend entry; a series of few points
  // is drawn with markers. Long series are thinned to the pixel grid (extremes kept).
  void line_chart(const std::string& title, const std::vector<Series>& series, const ChartOptions& options);
  void line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series,
                  bool log_y = false);
  // Points with their labels; a label that would overlap one already drawn is left to the tooltip.
  void scatter(const std::string& title, const std::vector<Point>& points, const ChartOptions& options = {});
  // One section: a caption, then the heatmaps side by side, wrapping (at most ncols per row).
  void heatmap_grid(const std::string& caption, const std::vector<Heatmap>& maps, int ncols = 4);
  std::string str() const;
  Status write(const std::string& path) const;

 private:
  std::string title_, body_;
  int next_id_ = 0;  // unique ids for SVG gradients
};

// Text for HTML content and attribute values: & < > " escaped; invalid UTF-8 becomes U+FFFD.
std::string escape(const std::string& s);

// Tick positions at round numbers (1, 2 or 5 times a power of ten), about `target` of them, from
// the multiple of the step at or below lo up to hi: (0, 0.93) -> 0, 0.2, 0.4, 0.6, 0.8;
// (1, 12345) -> 0, 5000, 10000.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// Ticks of a log axis over [lo, hi] (lo > 0): powers of ten, every k-th decade when there are many;
// with 1, 2, 5 times them when the range spans at most two decades. Reaches from the largest tick
// <= lo to the smallest >= hi.
std::vector<double> log_ticks(double lo, double hi);
// A compact tick label: 0, 0.25, 3, 1k, 20k, 1.5M, 0.001, 1e-4.
std::string format_tick(double v);

// 2-D principal component projection of the rows (all of one length): the centred rows projected
// onto the two leading eigenvectors of their covariance, found by deterministic power iteration.
// Each axis's sign is fixed so that its largest-magnitude component is positive. Fewer than two
// dimensions or rows: zeros where there is no component.
std::vector<std::pair<double, double>> pca_2d(const std::vector<std::vector<float>>& rows);

}  // namespace tg::report
