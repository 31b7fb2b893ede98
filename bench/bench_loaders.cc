// What a hostile model file costs to load or refuse: a safetensors header of N tensors (parsing,
// duplicate and name checks must stay linear: 10k -> 1M entries should cost 100x, not 10,000x).
// Run:
//   build/bench_loaders --benchmark_filter=BM_safetensors_header
#include <cstdint>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "io/safetensors.h"

namespace {

// A safetensors file in memory with n one-element float32 tensors ("layers.<i>.w").
std::string many_tensors(int64_t n, int pad = 0) {
  std::string header = "{";
  const std::string tail(static_cast<size_t>(pad), 'w');
  for (int64_t i = 0; i < n; ++i)
    header += fmt::format("{}\"layers.{}.w{}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}", i ? "," : "", i,
                          tail, 4 * i, 4 * i + 4);
  header += "}";
  std::string file(8, '\0');
  const uint64_t len = header.size();
  for (int b = 0; b < 8; ++b) file[static_cast<size_t>(b)] = static_cast<char>((len >> (8 * b)) & 0xFF);
  file += header;
  file.append(static_cast<size_t>(4 * n), '\0');
  return file;
}

void BM_safetensors_header(benchmark::State& state) {
  const std::string file = many_tensors(state.range(0), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    auto parsed = tg::parse_safetensors(file);
    if (!parsed.ok()) state.SkipWithError(std::string(parsed.status().message()).c_str());
    benchmark::DoNotOptimize(parsed);
  }
  state.counters["header_MB"] = static_cast<double>(file.size()) / 1e6;
  state.SetComplexityN(state.range(0));
}
// Second argument: bytes added to each name (19: a million entries fill the 100 MB header cap).
BENCHMARK(BM_safetensors_header)->Args({10000, 0})->Args({100000, 0})->Args({1000000, 0})->Args({1000000, 19})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
