#pragma once
// The loaders' fuzz targets: each takes any bytes and must return (accepting or refusing them with
// a tg::Status) without crashing, leaking, reading out of bounds or hanging. The same functions
// run under libFuzzer (tests/fuzz/fuzz_main.cc, the clang sanitizer build: `./tg.sh fuzz`) and, in
// every build, over the committed seeds and regression files (tests/fuzz_test.cc).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tg::fuzz {

struct Target {
  std::string name;  // also the folder of its seeds (tests/fuzz/corpus/NAME) and regressions (tests/fuzz/regressions/NAME)
  void (*run)(const uint8_t* data, size_t size);
};

const std::vector<Target>& targets();
const Target* find_target(const std::string& name);

}  // namespace tg::fuzz
