#pragma once
// Learning-rate schedules: lr(step) for step = 1, 2, ... (the step about to be taken). Use as
//   opt.set_lr(schedule(opt.steps() + 1)); opt.step();
#include <cstdint>

namespace tg {

// The paper's (5.3): lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5):
// linear warm-up for `warmup` steps, then decay with the inverse square root of the step.
struct NoamSchedule {
  int64_t d_model = 512;
  int64_t warmup = 4000;
  double factor = 1.0;
  double operator()(int64_t step) const;
};

// Linear warm-up from 0 to peak over `warmup` steps, then cosine decay to min_lr at `total`
// steps (and min_lr after).
struct WarmupCosineSchedule {
  double peak = 1e-3;
  int64_t warmup = 100;
  int64_t total = 10000;
  double min_lr = 0.0;
  double operator()(int64_t step) const;
};

// base * gamma^floor((step - 1) / step_size): as torch.optim.lr_scheduler.StepLR, stepped once per step.
struct StepSchedule {
  double base = 0.1;
  int64_t step_size = 1000;
  double gamma = 0.1;
  double operator()(int64_t step) const;
};

}  // namespace tg
