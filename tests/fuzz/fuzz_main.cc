// One libFuzzer binary per target: TG_FUZZ_TARGET names it (CMakeLists.txt, TG_FUZZ=ON).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tg::fuzz::Target* target = [] {
    const tg::fuzz::Target* t = tg::fuzz::find_target(TG_FUZZ_TARGET);
    if (!t) {
      std::fprintf(stderr, "no fuzz target %s\n", TG_FUZZ_TARGET);
      std::abort();
    }
    return t;
  }();
  target->run(data, size);
  return 0;
}
