#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "graph/error.h"

namespace tg {

double NoamSchedule::operator()(int64_t step) const {
  TG_CHECK(step >= 1 && warmup >= 1 && d_model >= 1, "NoamSchedule",
           "step ({}), warmup ({}) and d_model ({}) must be >= 1", step, warmup, d_model);
  const double s = static_cast<double>(step), w = static_cast<double>(warmup);
  return factor * std::pow(static_cast<double>(d_model), -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}

double WarmupCosineSchedule::operator()(int64_t step) const {
  TG_CHECK(step >= 1 && warmup >= 0 && total > warmup, "WarmupCosineSchedule",
           "needs step >= 1 and total ({}) > warmup ({}) >= 0, got step {}", total, warmup, step);
  if (step <= warmup) return peak * static_cast<double>(step) / static_cast<double>(warmup);
  if (step >= total) return min_lr;
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
  return min_lr + 0.5 * (peak - min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

double StepSchedule::operator()(int64_t step) const {
  TG_CHECK(step >= 1 && step_size >= 1, "StepSchedule", "step ({}) and step_size ({}) must be >= 1", step, step_size);
  return base * std::pow(gamma, static_cast<double>((step - 1) / step_size));
}

}  // namespace tg
