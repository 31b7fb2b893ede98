#include "train/curves.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tg::train {

std::vector<std::pair<double, double>> smoothed(const std::vector<std::pair<double, double>>& points, size_t window) {
  if (window <= 1) return points;
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < points.size(); i += window) {
    const size_t end = std::min(points.size(), i + window);
    double sum = 0;
    size_t n = 0;
    for (size_t j = i; j < end; ++j)
      if (std::isfinite(points[j].second)) sum += points[j].second, ++n;
    if (n > 0) out.emplace_back(points[end - 1].first, sum / static_cast<double>(n));
  }
  return out;
}

void add_training_charts(report::Html& html, const History& history, const std::string& loss_unit) {
  auto get = [&](const std::string& key) {
    auto it = history.find(key);
    return it == history.end() ? std::vector<std::pair<double, double>>{} : it->second;
  };
  const auto train_loss = get("train/loss");
  const size_t window = std::max<size_t>(1, train_loss.size() / 300);
  std::vector<report::Series> losses;
  if (!train_loss.empty()) losses.push_back({"train", train_loss, train_loss.size() > 50 ? 0.9 : 0.0});
  if (auto v = get("valid/valid_loss"); !v.empty()) losses.push_back({"validation", v});
  if (!losses.empty()) html.line_chart("loss", losses, {.x_label = "step", .y_label = loss_unit});
  if (auto lr = get("train/lr"); !lr.empty()) html.line_chart("learning rate", {{"lr", lr}}, {.x_label = "step", .y_label = "lr"});
  if (auto g = get("train/grad_norm"); !g.empty())
    html.line_chart("gradient norm (before clipping)", {{"norm", smoothed(g, window)}},
                    {.x_label = "step", .y_label = "L2 norm", .log_y = true});
  if (auto m = get("train/gpu_peak_mib"); !m.empty()) {  // a run on a GPU: what its tensors held at most
    double top = 0;
    for (const auto& [step, mib] : m) top = std::max(top, mib);
    html.line_chart(fmt::format("GPU memory: peak allocated so far ({:.0f} MiB at most)", top), {{"peak", m}},
                    {.x_label = "step", .y_label = "MiB"});
  }
  for (const auto& [key, points] : history) {
    if (key.rfind("valid/", 0) != 0 || key == "valid/valid_loss" || points.empty()) continue;
    const std::string name = key.substr(6);
    html.line_chart("validation " + name, {{name, points}}, {.x_label = "step", .y_label = name});
  }
}

}  // namespace tg::train
