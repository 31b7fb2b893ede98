// Refuses to run on a CPU that lacks the instructions the library was compiled for, with one line
// instead of SIGILL. This file alone is compiled for baseline x86-64 (CMakeLists.txt), and the
// path from the load-time constructor to _Exit calls only C functions: an inline C++ function
// here could be merged by the linker with a copy compiled for AVX-512 in another file.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "graph/build_info.h"
#include "tg_build_config.h"  // generated: TG_BUILD_ARCH, TG_BUILD_MARCH, TG_BUILD_CPU_FEATURES,
                      // TG_BUILD_CPU_FEATURE_LIST

namespace tg::detail {
namespace {

const char* const kRequired[] = {TG_BUILD_CPU_FEATURES nullptr};

// __builtin_cpu_supports wants a literal name, hence one line per feature we may compile for.
bool cpu_supports(const char* f) {
#if defined(__x86_64__) || defined(__i386__)
#define TG_CPU_FEATURE(name) \
  if (std::strcmp(f, name) == 0) return __builtin_cpu_supports(name);
  TG_CPU_FEATURE("sse3") TG_CPU_FEATURE("ssse3") TG_CPU_FEATURE("sse4.1")
  TG_CPU_FEATURE("sse4.2") TG_CPU_FEATURE("popcnt") TG_CPU_FEATURE("avx") TG_CPU_FEATURE("avx2")
  TG_CPU_FEATURE("fma") TG_CPU_FEATURE("bmi") TG_CPU_FEATURE("bmi2") TG_CPU_FEATURE("f16c")
  TG_CPU_FEATURE("movbe") TG_CPU_FEATURE("lzcnt") TG_CPU_FEATURE("gfni") TG_CPU_FEATURE("vaes")
  TG_CPU_FEATURE("vpclmulqdq") TG_CPU_FEATURE("avx512f") TG_CPU_FEATURE("avx512bw")
  TG_CPU_FEATURE("avx512dq") TG_CPU_FEATURE("avx512vl") TG_CPU_FEATURE("avx512cd")
  TG_CPU_FEATURE("avx512vnni") TG_CPU_FEATURE("avx512bf16") TG_CPU_FEATURE("avx512vbmi")
  TG_CPU_FEATURE("avx512vbmi2") TG_CPU_FEATURE("avx512ifma") TG_CPU_FEATURE("avx512bitalg")
  TG_CPU_FEATURE("avx512vpopcntdq") TG_CPU_FEATURE("avx512fp16")
  TG_CPU_FEATURE("avx512vp2intersect") TG_CPU_FEATURE("avxvnni")
#undef TG_CPU_FEATURE
#endif
  (void)f;
  return true;
}

// Load-time check: runs before any other static initializer of the library (priority 101).
__attribute__((constructor(101))) void check_cpu_at_load() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
#endif
  char missing[512];
  if (missing_cpu_features(missing, sizeof missing, cpu_supports) == 0) return;
  std::fprintf(stderr,
               "tapegrad: this CPU lacks %s, which the library was compiled for (TG_ARCH=%s, "
               "-march=%s); rebuild tapegrad on this machine or configure it with "
               "-DTG_ARCH=portable (x86-64-v3) or -DTG_ARCH=baseline\n",
               missing, TG_BUILD_ARCH, TG_BUILD_MARCH);
  std::_Exit(1);
}

}  // namespace

int missing_cpu_features(char* out, size_t capacity, bool (*has)(const char*)) {
  int count = 0;
  size_t used = 0;
  if (capacity > 0) out[0] = '\0';
  for (const char* const* f = kRequired; *f != nullptr; ++f) {
    if (has(*f)) continue;
    ++count;
    size_t len = std::strlen(*f);
    if (used + len + 3 > capacity) continue;  // the count stays right; the list is cut short
    if (used > 0) {
      std::memcpy(out + used, ", ", 2);
      used += 2;
    }
    std::memcpy(out + used, *f, len + 1);
    used += len;
  }
  return count;
}

// Storage refers to this so that a static link always pulls this file (and its constructor) in.
extern const char kCpuCheckLinked = 1;

}  // namespace tg::detail

namespace tg {

const char* build_arch() { return TG_BUILD_ARCH; }
const char* build_march() { return TG_BUILD_MARCH; }
const char* build_cpu_features() { return TG_BUILD_CPU_FEATURE_LIST; }

}  // namespace tg
