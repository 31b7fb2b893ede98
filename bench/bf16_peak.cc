// The machine's bfloat16 dot-product peak, measured beside fma_peak's float32 one: each thread runs
// 16 independent vdpbf16ps chains (16 float32 lanes += 16 pairs of bfloat16 products: 64 FLOP an
// instruction) and, on an AMX machine, tdpbf16ps on four independent 16 x 16 tiles (16 x 16 x 32
// multiply-adds: 16,384 FLOP an instruction) with operands held in tiles. A path the CPU lacks
// prints "available": false. bench/RESULTS.md states the GEMMs' GFLOP/s as a share of these.
//
//   build/bf16_peak [--threads 1,2] [--seconds 1]
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "ops/kernels/bf16.h"
#include "tapegrad.h"

namespace {

__attribute__((noipa, target("avx512f,avx512bw,avx512bf16"))) float dp_loop_avx512bf16(int64_t iterations) {
  __m512 acc[16];
  for (int c = 0; c < 16; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80), b = (__m512bh)_mm512_set1_epi16(0x2000);  // 1.0, tiny
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < 16; ++c) s = _mm512_add_ps(s, acc[c]);
  return _mm512_reduce_add_ps(s);
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

__attribute__((noipa, target("amx-tile,amx-bf16"))) float tdp_loop_amx(int64_t iterations) {
  static const TileConfig config;
  _tile_loadconfig(&config);
  alignas(64) static const uint16_t ones[16 * 32] = {};
  alignas(64) float out[16 * 16];
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, ones, 64); _tile_loadd(5, ones, 64); _tile_loadd(6, ones, 64); _tile_loadd(7, ones, 64);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Best GFLOP/s of three runs of `loop` on n threads, `iters` iterations each.
template <class Loop>
double measure(Loop loop, int64_t iters, double flops_per_iter, int n) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> ts;
    std::atomic<float> sink{0};
    auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < n; ++t) ts.emplace_back([&] { sink = sink + loop(iters); });
    for (auto& t : ts) t.join();
    best = std::max(best, flops_per_iter * static_cast<double>(iters) * n / seconds_since(start) / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string threads = "1,2";
    double seconds = 1.0;
    tg::cli::Flags flags("bf16_peak", "bfloat16 dot-product peak of this machine (AVX512-BF16 and AMX), per thread count");
    flags.add("threads", &threads, "comma-separated thread counts");
    flags.add("seconds", &seconds, "seconds per measurement").above(0);
    flags.parse(argc, argv).or_throw();
    const auto best = tg::best_cpu_capability();
    struct Path {
      const char* name;
      bool available;
      float (*loop)(int64_t);
      double flops_per_iter;
    };
    const Path paths[] = {{"avx512_bf16", best >= tg::CpuCapability::kAvx512Bf16, dp_loop_avx512bf16, 16 * 64.0},
                          {"amx", best >= tg::CpuCapability::kAmx, tdp_loop_amx, 4 * 16384.0}};
    for (const Path& p : paths) {
      if (!p.available) {
        fmt::print("{{\"path\": \"{}\", \"available\": false}}\n", p.name);
        continue;
      }
      int64_t iters = 100'000;
      auto t0 = std::chrono::steady_clock::now();
      volatile float keep = p.loop(iters);
      (void)keep;
      iters = static_cast<int64_t>(static_cast<double>(iters) * seconds / std::max(seconds_since(t0), 1e-6));
      for (size_t pos = 0; pos < threads.size();) {
        const size_t comma = std::min(threads.find(',', pos), threads.size());
        const int n = std::stoi(threads.substr(pos, comma - pos));
        pos = comma + 1;
        fmt::print("{{\"path\": \"{}\", \"available\": true, \"threads\": {}, \"gflops\": {:.1f}}}\n", p.name, n,
                   measure(p.loop, iters, p.flops_per_iter, n));
      }
    }
    return 0;
  });
}
