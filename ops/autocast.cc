#include "ops/autocast.h"

#include "graph/error.h"

namespace tg {
namespace {
thread_local bool t_autocast = false;
}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : prev_(t_autocast) {
  TG_CHECK(dtype == kBFloat16 || dtype == kFloat32, "AutocastGuard", "autocasts to bfloat16 (or float32: off), not {}", dtype);
  t_autocast = dtype == kBFloat16;
}
AutocastGuard::~AutocastGuard() { t_autocast = prev_; }
bool autocast_enabled() { return t_autocast; }

}  // namespace tg
