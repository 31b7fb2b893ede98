// The oracle for the cpu_check_refuses test: prints, from CPUID, which of the features that
// tests/cpu_check/tg_build_config.h lists this CPU lacks, joined as graph/cpu_features.cc joins them
// ("avx512fp16, avx512vp2intersect"), or nothing when it has them all. It does not link
// graph/cpu_features.cc (whose load-time check would stop it first).
#include <cstdio>

#include "tg_build_config.h"

int main() {
  __builtin_cpu_init();
  const char* sep = "";
#define TG_FEATURE_LACKED(name)                 \
  if (!__builtin_cpu_supports(name)) {          \
    std::printf("%s%s", sep, name);             \
    sep = ", ";                                 \
  }
  TG_BUILD_CPU_FEATURES(TG_FEATURE_LACKED)
#undef TG_FEATURE_LACKED
  return 0;
}
