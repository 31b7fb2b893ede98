// Linked with graph/cpu_features.cc and tests/cpu_check/tg_build_config.h: main must not be reached
// unless this CPU really has every instruction set listed there.
#include <cstdio>

int main() {
  __builtin_cpu_init();
  bool has_all = __builtin_cpu_supports("sse3") && __builtin_cpu_supports("avx512fp16") &&
                 __builtin_cpu_supports("avx512vp2intersect");
  std::puts(has_all ? "reached main on a CPU that has them all" : "reached main on a CPU that lacks them");
  return has_all ? 0 : 2;
}
