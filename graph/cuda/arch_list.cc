// Which CUDA architectures run on which card: pure logic, in every build (tests/device_test.cc).
#include <cstdlib>
#include <string>

#include "graph/cuda/runtime.h"

namespace tg::cuda_rt {

// archs: CMAKE_CUDA_ARCHITECTURES' form, "80-real;90-real;90-virtual" or "90a-real" or "86".
// A plain number means real code and PTX. "a" (90a) code runs on that exact capability only,
// "f" (100f) code on its family (the same major version, same or later minor).
bool architectures_run_on(const std::string& archs, int capability) {
  size_t pos = 0;
  while (pos <= archs.size()) {
    size_t end = archs.find(';', pos);
    if (end == std::string::npos) end = archs.size();
    const std::string item = archs.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    char* rest = nullptr;
    const long cc = std::strtol(item.c_str(), &rest, 10);
    if (rest == item.c_str() || cc <= 0) continue;
    const std::string tail(rest);
    const bool exact = !tail.empty() && tail[0] == 'a';
    const bool family = !tail.empty() && tail[0] == 'f';
    const std::string kind = tail.substr(tail.find('-') == std::string::npos ? tail.size() : tail.find('-'));
    const bool real = kind != "-virtual";
    const bool ptx = kind.empty() || kind == "-virtual";
    if (exact) {
      if (cc == capability) return true;
      continue;
    }
    if (real && !family && cc / 10 == capability / 10 && cc <= capability) return true;
    if (family && cc / 10 == capability / 10 && cc <= capability) return true;
    if (ptx && !family && cc <= capability) return true;
  }
  return false;
}

}  // namespace tg::cuda_rt
