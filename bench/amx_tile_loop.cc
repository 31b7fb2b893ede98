// What the AMX micro-kernel's loop can do on this core, apart from the GEMM around it: the 2 x 2
// tile block of ops/kernels/amx_tiles.inc (per k step two A tiles and two B tiles loaded, four
// tdpbf16ps of 16 x 16 x 32), run over operands held in different places, with and without storing
// the 32 x 32 float32 block of C after every `steps` k steps (as the GEMM does once per block):
//
//   l1          both operands in L1 (blocks of 8 k steps over the same 16 KB of A and of B)
//   a_resident  A's 32 rows x steps k in L1, B streamed from 1 MB (L2)
//   b_resident  the other way round
//   streamed    both streamed from 1 MB each
// and C: none (accumulate only), hot (a 128 KB region of C that stays in cache), cold (C rotating
// over 8 MB, as a product's output is). bench/RESULTS.md compares the GEMM's kernel with these.
// Then the GEMM's own pattern (16 k steps a block, A's two tiles streamed with tileloaddt1, B's 32
// KB chunk changing every 4 blocks, C stored hot): a_tiles, A packed in tiles as the driver packs
// it (each tile 1 KB contiguous, the k steps in turn), and a_stride, A in rows lda apart for strides
// around 1, 2 and 4 KB (the row layout the driver used before: it padded rows by 64 bytes).
//
//   build/amx_tile_loop [--seconds 0.5]      (prints "available": false without AMX)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/core.h>

#include "ops/kernels/bf16.h"
#include "tapegrad.h"

namespace {

struct Case {
  int64_t steps;      // k steps of 32 per block of C
  int64_t a_blocks;   // distinct A blocks cycled (1: resident)
  int64_t b_blocks;   // distinct B blocks cycled
  int c_mode;         // 0 none, 1 hot, 2 cold
};

// Blocks of `steps` k steps: A packed 2 KB a step (two 16 x 32 tiles), B 2 KB a step (two 16-column
// tiles of 16 pair rows, 128-byte rows, as the GEMM's panels). The tiles are configured as the
// kernel configures them (amx_tiles_begin / amx_tiles_end).
__attribute__((noipa, target("amx-tile,amx-bf16"))) void tile_blocks_amx(const Case& c, int64_t blocks, const uint16_t* A,
                                                                        const uint16_t* B, float* C) {
  tg::kernels::amx_tiles_begin();
  constexpr int64_t ldc = 1024;
  for (int64_t it = 0; it < blocks; ++it) {
    const uint16_t* a = A + (it % c.a_blocks) * c.steps * 1024;
    const uint16_t* b = B + (it % c.b_blocks) * c.steps * 1024;
    float* out = C + (it & 31) * 32 + (c.c_mode == 2 ? ((it >> 5) & 63) * 32 * ldc : 0);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t s = 0; s < c.steps; ++s) {
      const uint16_t* as = a + s * 1024;
      const uint16_t* bs = b + s * 1024;
      _tile_loadd(4, as, 64);
      _tile_loadd(6, bs, 128);
      _tile_dpbf16ps(0, 4, 6);
      _tile_loadd(7, bs + 32, 128);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, as + 512, 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    if (c.c_mode != 0) {
      _tile_stored(0, out, ldc * 4);
      _tile_stored(1, out + 16, ldc * 4);
      _tile_stored(2, out + 16 * ldc, ldc * 4);
      _tile_stored(3, out + 16 * ldc + 16, ldc * 4);
    }
  }
  tg::kernels::amx_tiles_end();
}

// The GEMM's pattern: blocks of 16 k steps over A rows `lda` values apart, or (lda 0) in tiles (32
// blocks of A, 32 rows each, cycled) and a 32 KB chunk of B that changes every 4 blocks (of 32 in 1 MB).
__attribute__((noipa, target("amx-tile,amx-bf16"))) void strided_blocks_amx(int64_t blocks, int64_t lda, const uint16_t* A,
                                                                           const uint16_t* B, float* C) {
  tg::kernels::amx_tiles_begin();
  // A in tiles: block `it` holds 16 k steps of two contiguous 1 KB tiles (32 KB); in rows: its 32
  // rows lda apart, a k step 32 values further along them.
  const bool tiles = lda == 0;
  const int64_t block = tiles ? 32 * 512 : 32 * lda, step = tiles ? 1024 : 32, second = tiles ? 512 : 16 * lda;
  const int64_t stride = tiles ? 64 : lda * 2;
  for (int64_t it = 0; it < blocks; ++it) {
    const uint16_t* a = A + (it % 32) * block;
    const uint16_t* b = B + ((it / 4) % 32) * 16384;
    float* out = C + (it & 31) * 32;
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t s = 0; s < 16; ++s) {
      _tile_stream_loadd(4, a + s * step, stride);
      _tile_loadd(6, b + s * 1024, 128);
      _tile_dpbf16ps(0, 4, 6);
      _tile_loadd(7, b + s * 1024 + 32, 128);
      _tile_dpbf16ps(1, 4, 7);
      _tile_stream_loadd(5, a + second + s * step, stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 4096);
    _tile_stored(1, out + 16, 4096);
    _tile_stored(2, out + 16 * 1024, 4096);
    _tile_stored(3, out + 16 * 1024 + 16, 4096);
  }
  tg::kernels::amx_tiles_end();
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    double seconds = 0.5;
    tg::cli::Flags flags("amx_tile_loop", "the AMX micro-kernel's 2 x 2 tile loop over operands in L1 or L2, with and without C stores");
    flags.add("seconds", &seconds, "seconds per case").above(0);
    flags.parse(argc, argv).or_throw();
    if (tg::best_cpu_capability() < tg::CpuCapability::kAmx) {
      fmt::print("{{\"available\": false}}\n");
      return 0;
    }
    std::vector<uint16_t, tg::kernels::CacheLineAllocator<uint16_t>> A(1 << 20, 0x3F80), B(1 << 20, 0x3F80);  // 2 MB each
    std::vector<float, tg::kernels::CacheLineAllocator<float>> C(64 * 32 * 1024, 0.0f);                       // 8 MB
    const char* c_names[] = {"none", "hot", "cold"};
    for (int64_t steps : {16, 32}) {
      const int64_t streamed = (1 << 20) / (steps * 2048);  // blocks in 1 MB
      struct Placement {
        const char* name;
        int64_t steps, a_blocks, b_blocks;
      };
      std::vector<Placement> placements = {
          {"a_resident", steps, 1, streamed}, {"b_resident", steps, streamed, 1}, {"streamed", steps, streamed, streamed}};
      if (steps == 16) placements.insert(placements.begin(), {"l1", 8, 1, 1});  // 16 KB of A and of B, reused
      for (const Placement& p : placements)
        for (int c_mode = 0; c_mode < 3; ++c_mode) {
          const Case c{p.steps, p.a_blocks, p.b_blocks, c_mode};
          int64_t blocks = 1000;
          auto t0 = std::chrono::steady_clock::now();
          tile_blocks_amx(c, blocks, A.data(), B.data(), C.data());
          const double probe = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          blocks = std::max<int64_t>(1000, static_cast<int64_t>(1000 * seconds / std::max(probe, 1e-6)));
          double best = 0;
          for (int rep = 0; rep < 3; ++rep) {
            t0 = std::chrono::steady_clock::now();
            tile_blocks_amx(c, blocks, A.data(), B.data(), C.data());
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            best = std::max(best, static_cast<double>(blocks) * c.steps * 4 * 16384.0 / s / 1e9);
          }
          fmt::print("{{\"available\": true, \"operands\": \"{}\", \"k_steps_per_block\": {}, \"c_store\": \"{}\", \"gflops\": {:.0f}}}\n",
                     p.name, c.steps, c_names[c_mode], best);
        }
    }
    std::vector<uint16_t, tg::kernels::CacheLineAllocator<uint16_t>> As(32 * 32 * 2080, 0x3F80);  // 32 blocks at the widest stride
    for (int64_t lda : {0, 512, 1024, 1056, 2048, 2080}) {
      auto time_blocks = [&](int64_t blocks) {
        const auto t0 = std::chrono::steady_clock::now();
        strided_blocks_amx(blocks, lda, As.data(), B.data(), C.data());
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      };
      const int64_t blocks = std::max<int64_t>(1000, static_cast<int64_t>(1000 * seconds / std::max(time_blocks(1000), 1e-6)));
      double best = 0;
      for (int rep = 0; rep < 3; ++rep) best = std::max(best, static_cast<double>(blocks) * 16 * 4 * 16384.0 / time_blocks(blocks) / 1e9);
      if (lda == 0) fmt::print("{{\"available\": true, \"operands\": \"a_tiles\", \"gflops\": {:.0f}}}\n", best);
      else fmt::print("{{\"available\": true, \"operands\": \"a_stride\", \"a_row_bytes\": {}, \"gflops\": {:.0f}}}\n", lda * 2, best);
    }
    return 0;
  });
}
