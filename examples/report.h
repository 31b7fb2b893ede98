#pragma once
// A self-contained HTML report (inline SVG, no scripts or downloads): headings, text, tables,
// line charts (loss, validation, learning rate) and grids of attention heatmaps (one per layer and
// head, in the spirit of bertviz's head view). Written atomically.
#include <string>
#include <utility>
#include <vector>

#include <absl/status/status.h>

namespace tg::report {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

// A square-ish matrix of weights in [0, 1] (rows: queries, columns: keys).
struct Heatmap {
  std::string title;                // "layer 0, head 3"
  std::vector<std::vector<float>> w;
  std::vector<std::string> row_labels, col_labels;
};

class Html {
 public:
  explicit Html(std::string title);
  void heading(const std::string& text, int level = 2);
  void paragraph(const std::string& text);   // escaped
  void preformatted(const std::string& text);
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
  void line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series,
                  bool log_y = false);
  // One section: a caption, then the heatmaps side by side, wrapping (ncols per row).
  void heatmap_grid(const std::string& caption, const std::vector<Heatmap>& maps, int ncols = 4);
  std::string str() const;
  absl::Status write(const std::string& path) const;

 private:
  std::string title_, body_;
};

std::string escape(const std::string& s);

}  // namespace tg::report
