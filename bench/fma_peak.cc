// The machine's float32 FMA peak, measured: each thread runs 16 independent chains of fused
// multiply-adds on the widest vectors the build targets (xsimd's default batch: 16 floats with
// AVX-512, 8 with AVX2), enough chains to cover the FMA latency (4 cycles) times the FMA units
// (2) with room to spare. Also the clock, from a chain of dependent 1-cycle integer adds, so the
// measured FLOP per cycle can be set beside the core's theoretical figure (Zen 3 and Zen 4: 32,
// two 256-bit FMA pipes, a 512-bit FMA taking both on Zen 4; Zen 5: 64, two 512-bit pipes).
// The training-step benchmarks state their GFLOP/s as a share of this peak (bench/RESULTS.md).
//
//   build/fma_peak [--threads 1,2] [--seconds 1]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "ops/kernels/simd.h"
#include "tapegrad.h"

namespace {

using B = xsimd::batch<float>;
constexpr int kChains = 16;

// FLOPs done: iterations * chains * lanes * 2.
__attribute__((noipa)) float fma_loop(int64_t iterations, float seed) {
  B acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = B(seed + static_cast<float>(c));
  const B a(0.999999f), b(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = xsimd::fma(acc[c], a, b);
  }
  B s = acc[0];
  for (int c = 1; c < kChains; ++c) s += acc[c];
  return tg::kernels::hsum(s);
}

// Dependent adds, one a cycle, eight per loop iteration (the loop's own counter and branch run
// beside them): n iterations take 8 n cycles, which gives the core clock.
__attribute__((noipa)) uint64_t add_chain(uint64_t n) {
  uint64_t x = 0;
  for (uint64_t i = 0; i < n; ++i)
    asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                 "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
  return x;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string threads = "1,2";
    double seconds = 1.0;
    tg::cli::Flags flags("fma_peak", "float32 FMA peak of this machine, per thread count");
    flags.add("threads", &threads, "comma-separated thread counts");
    flags.add("seconds", &seconds, "seconds per measurement").above(0);
    flags.parse(argc, argv).or_throw();
    // Clock: the loop's add is one cycle, its counter update runs beside it.
    add_chain(20'000'000);
    auto t0 = std::chrono::steady_clock::now();
    const uint64_t n_add = 200'000'000;
    add_chain(n_add);
    const double ghz = 8.0 * static_cast<double>(n_add) / seconds_since(t0) / 1e9;
    // Iterations for about `seconds` on one thread.
    int64_t iters = 1'000'000;
    t0 = std::chrono::steady_clock::now();
    volatile float keep = fma_loop(iters, 1.0f);  // noipa and a use: the call cannot be dropped
    (void)keep;
    iters = static_cast<int64_t>(static_cast<double>(iters) * seconds / std::max(seconds_since(t0), 1e-6));
    const double flops_per_call = static_cast<double>(iters) * kChains * static_cast<double>(B::size) * 2;
    for (size_t pos = 0; pos < threads.size();) {
      size_t comma = std::min(threads.find(',', pos), threads.size());
      const int n = std::stoi(threads.substr(pos, comma - pos));
      pos = comma + 1;
      double best = 0;
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<std::thread> ts;
        std::atomic<float> sink{0};
        auto start = std::chrono::steady_clock::now();
        for (int t = 0; t < n; ++t) ts.emplace_back([&, t] { sink = sink + fma_loop(iters, static_cast<float>(t)); });
        for (auto& t : ts) t.join();
        best = std::max(best, flops_per_call * n / seconds_since(start) / 1e9);
      }
      fmt::print("{{\"threads\": {}, \"gflops\": {:.1f}, \"ghz\": {:.2f}, \"flop_per_cycle_per_core\": {:.1f}, "
                 "\"lanes\": {}, \"arch\": \"{}\"}}\n",
                 n, best, ghz, best / n / ghz, B::size, tg::build_march());
    }
    return 0;
  });
}
