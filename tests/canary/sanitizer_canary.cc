// Canaries for the sanitizer builds: each mode plants one bug the sanitizer must report. The
// tests (CMakeLists.txt, sanitizer_canary_*) pass only when the sanitizer's own report text
// appears, which proves the sanitizer is really on in that build.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

void* g_sink = nullptr;

// Sixteen blocks whose pointers are all gone (the last one could linger in a register; the
// others cannot), then a stack scrubbed of any copy, so that LeakSanitizer's conservative scan
// at exit finds them unreachable in every build.
[[gnu::noinline]] void leak_some() {
  for (int i = 0; i < 16; ++i) g_sink = std::malloc(4096);
  g_sink = nullptr;
}
[[gnu::noinline]] void clobber_stack() {
  volatile char scratch[16384];
  for (size_t i = 0; i < sizeof scratch; ++i) scratch[i] = 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "overflow") == 0) {  // AddressSanitizer: heap-buffer-overflow
    char* p = static_cast<char*>(std::malloc(16));
    const int past_end = 14 + argc;  // 16: one past the end, computed at run time
    p[past_end] = 1;
    std::free(p);
  } else if (std::strcmp(mode, "leak") == 0) {  // LeakSanitizer: detected memory leaks
    leak_some();
    clobber_stack();
    std::printf("%d\n", g_sink == nullptr);
  } else if (std::strcmp(mode, "ub") == 0) {  // UBSan: signed integer overflow
    volatile int big = 2147483647;
    volatile int r = big + argc;
    std::printf("%d\n", r);
  } else if (std::strcmp(mode, "race") == 0) {  // ThreadSanitizer: data race
    static int shared = 0;
    std::thread t([] { for (int i = 0; i < 1000; ++i) ++shared; });
    for (int i = 0; i < 1000; ++i) ++shared;
    t.join();
    std::printf("%d\n", shared);
  } else {
    std::fprintf(stderr, "usage: sanitizer_canary overflow|leak|ub|race\n");
    return 2;
  }
  return 0;
}
