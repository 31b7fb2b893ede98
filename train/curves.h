#pragma once
// The charts every training report starts with, drawn from a run's metrics history: the training
// and validation losses on one chart, the learning rate, the gradient norm, the peak GPU memory (a
// run on a GPU), and one chart per other validation metric (BLEU, accuracy, ...).
#include <string>

#include "checkpoint.h"
#include "report.h"

namespace tg::train {

// loss_unit labels the loss axis ("nats/token", "nats/char").
void add_training_charts(report::Html& html, const History& history, const std::string& loss_unit = "nats/token");

// The training loss averaged over windows of `window` steps (the raw per-step curve is noisy).
std::vector<std::pair<double, double>> smoothed(const std::vector<std::pair<double, double>>& points, size_t window);

}  // namespace tg::train
