#include "ops/cpu_capability.h"

#include <stdexcept>

#include "graph/error.h"
#include "ops/kernels/bf16.h"

namespace tg {
namespace {
template <class F>
auto as_tg_error(const char* op, F&& f) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    detail::fail(op, "{}", e.what());
  }
}
}  // namespace

CpuCapability cpu_capability() {
  return as_tg_error("cpu_capability", [] { return static_cast<CpuCapability>(kernels::cpu_path()); });
}
CpuCapability best_cpu_capability() { return static_cast<CpuCapability>(kernels::best_cpu_path()); }
const char* cpu_capability_name(CpuCapability c) { return kernels::cpu_path_name(static_cast<kernels::CpuPath>(c)); }
void set_cpu_capability(CpuCapability c) {
  as_tg_error("set_cpu_capability", [c] { kernels::set_cpu_path(static_cast<kernels::CpuPath>(c)); });
}
std::string cpu_capability_description() {
  return as_tg_error("cpu_capability", [] { return kernels::cpu_path_description(); });
}

}  // namespace tg
