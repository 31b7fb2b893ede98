// bfloat16 kernels: conversions, the choice of path, packing, the portable path and the blocked
// driver that feeds the ISA micro-kernels (gemm_bf16_avx512bf16.cc, gemm_bf16_amx.cc).
// Compiled with the build's own flags: nothing here uses an instruction the build does not.
#include "ops/kernels/bf16.h"

#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "ops/cpu_capability.h"
#include "ops/kernels/gemm.h"
#include "ops/kernels/parallel.h"

namespace tg::kernels {

// ---- Conversions -----------------------------------------------------------------------------

namespace {
// graph/bfloat16.h's rounding, written without branches so that the loops vectorize.
inline uint16_t round_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}
inline float widen_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
}  // namespace

void float_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  parallel_for(0, n, kParallelGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) dst[i] = round_to_bf16(src[i]);
  });
}

void bf16_to_float(const uint16_t* src, float* dst, int64_t n) {
  parallel_for(0, n, kParallelGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) dst[i] = widen_bf16(src[i]);
  });
}

// ---- Packing ---------------------------------------------------------------------------------

namespace {
// Element (r, c) of an operand's op(): r along M (or K for B), c along K (or N).
inline uint16_t operand_at(const Bf16Operand& x, int64_t r, int64_t c) {
  const int64_t off = x.trans ? c * x.ld + r : r * x.ld + c;
  return x.is_bf16 ? static_cast<const uint16_t*>(x.data)[off] : round_to_bf16(static_cast<const float*>(x.data)[off]);
}
}  // namespace

void pack_a_bf16(const Bf16Operand& a, int64_t i0, int64_t rows, int64_t K, uint16_t* dst, int64_t ldd, bool tiles) {
  if (cpu_features().avx512) return pack_a_avx512bf16(a, i0, rows, K, dst, ldd, tiles);
  pack_a_bf16_portable(a, i0, rows, K, dst, ldd, tiles);
}

void pack_a_bf16_portable(const Bf16Operand& a, int64_t i0, int64_t rows, int64_t K, uint16_t* dst, int64_t ldd, bool tiles) {
  const int64_t Kp = bf16_padded_k(K);
  const int64_t padded = (rows + kBf16RowStep - 1) / kBf16RowStep * kBf16RowStep;
  if (tiles) {  // packed in rows (Kp apart), then each row's 32-value runs moved to their tiles
    std::vector<uint16_t> in_rows(static_cast<size_t>(padded * Kp));
    pack_a_bf16_portable(a, i0, rows, K, in_rows.data(), Kp, false);
    for (int64_t r = 0; r < padded; ++r)
      for (int64_t k = 0; k < Kp; k += 32)
        std::memcpy(dst + packed_a_offset(r, k, ldd, true), in_rows.data() + r * Kp + k, 64);
    return;
  }
  if (a.trans) {
    // op(A)(i, k) = A[k][i]: a transpose, 16 x 16 at a time through a local block, so that the
    // stored rows of A are read contiguously and each packed row gets 32 contiguous bytes (writing
    // the packed rows element by element, Kp * 2 bytes apart, thrashes L1's sets).
    uint16_t block[16][16];
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      const int64_t kn = std::min<int64_t>(16, K - k0);
      for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        const int64_t rn = std::min<int64_t>(16, rows - r0);
        for (int64_t kk = 0; kk < kn; ++kk) {
          if (a.is_bf16) {
            const uint16_t* s = static_cast<const uint16_t*>(a.data) + (k0 + kk) * a.ld + i0 + r0;
            for (int64_t rr = 0; rr < rn; ++rr) block[rr][kk] = s[rr];
          } else {
            const float* s = static_cast<const float*>(a.data) + (k0 + kk) * a.ld + i0 + r0;
            for (int64_t rr = 0; rr < rn; ++rr) block[rr][kk] = round_to_bf16(s[rr]);
          }
        }
        for (int64_t rr = 0; rr < rn; ++rr) std::memcpy(dst + (r0 + rr) * ldd + k0, block[rr], static_cast<size_t>(kn) * 2);
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* d = dst + r * ldd;
    const int64_t i = i0 + r;
    if (!a.trans && a.is_bf16) {
      std::memcpy(d, static_cast<const uint16_t*>(a.data) + i * a.ld, static_cast<size_t>(K) * 2);
    } else if (!a.trans) {
      const float* s = static_cast<const float*>(a.data) + i * a.ld;
      for (int64_t k = 0; k < K; ++k) d[k] = round_to_bf16(s[k]);
    }
    std::fill(d + K, d + Kp, uint16_t{0});
  }
  for (int64_t r = rows; r < padded; ++r) std::fill(dst + r * ldd, dst + r * ldd + Kp, uint16_t{0});
}

void pack_b_panel_bf16(const Bf16Operand& b, int64_t j0, int64_t cols, int64_t K, uint16_t* dst) {
  if (b.trans && cpu_features().avx512) return pack_b_panel_avx512bf16(b, j0, cols, K, dst);
  pack_b_panel_bf16_portable(b, j0, cols, K, dst);
}

void pack_b_panel_bf16_portable(const Bf16Operand& b, int64_t j0, int64_t cols, int64_t K, uint16_t* dst) {
  const int64_t Kp = bf16_padded_k(K);
  constexpr int64_t W = kBf16PanelCols;
  std::fill(dst, dst + Kp * W, uint16_t{0});
  if (b.trans && !b.is_bf16) {
    // op(B)(k, j) = B[j][k] (a Linear weight, x Wᵀ): column c's pairs are adjacent floats of row
    // j0 + c; each pair row p of the panel is 32 such pairs, written as one 128-byte line.
    const float* rows = static_cast<const float*>(b.data) + j0 * b.ld;
    const int64_t whole = K / 2;
    for (int64_t p = 0; p < whole; ++p) {
      uint32_t line[W] = {};
      for (int64_t c = 0; c < cols; ++c) {
        const float* s = rows + c * b.ld + 2 * p;
        line[c] = round_to_bf16(s[0]) | static_cast<uint32_t>(round_to_bf16(s[1])) << 16;
      }
      std::memcpy(dst + p * 2 * W, line, sizeof line);
    }
    if (K % 2)
      for (int64_t c = 0; c < cols; ++c) dst[whole * 2 * W + c * 2] = round_to_bf16(rows[c * b.ld + K - 1]);
    return;
  }
  if (b.trans) {
    // op(B)(k, j) = B[j][k]: each column's pairs are adjacent in memory.
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t k = 0; k < K; ++k) dst[(k / 2) * 2 * W + c * 2 + (k & 1)] = operand_at(b, k, j0 + c);
    return;
  }
  for (int64_t k = 0; k < K; ++k) {
    uint16_t* d = dst + (k / 2) * 2 * W + (k & 1);
    for (int64_t c = 0; c < cols; ++c) d[c * 2] = operand_at(b, k, j0 + c);
  }
}

// Pair rows [p0, p1) of every panel of a non-transposed op(B) (B[k][j] at B + k * ld + j): row k
// of B is read once, contiguously, and written into each panel's pair row.
void pack_b_pair_rows_bf16(const Bf16Operand& b, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* dst) {
  if (cpu_features().avx512) return pack_b_pair_rows_avx512bf16(b, N, K, p0, p1, dst);
  pack_b_pair_rows_bf16_portable(b, N, K, p0, p1, dst);
}

void pack_b_pair_rows_bf16_portable(const Bf16Operand& b, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* dst) {
  constexpr int64_t W = kBf16PanelCols;
  const int64_t panels = (N + W - 1) / W, panel_size = bf16_padded_k(K) * W;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t k = 2 * p;
    for (int64_t q = 0; q < panels; ++q) {
      uint16_t* d = dst + q * panel_size + p * 2 * W;
      const int64_t j0 = q * W, cols = std::min(W, N - j0);
      if (k + 1 < K && !b.is_bf16) {  // the common case: both rows, float32, one 32-bit pair a column
        const float* s0 = static_cast<const float*>(b.data) + k * b.ld + j0;
        const float* s1 = s0 + b.ld;
        uint32_t pairs[W] = {};
        for (int64_t c = 0; c < cols; ++c) pairs[c] = round_to_bf16(s0[c]) | static_cast<uint32_t>(round_to_bf16(s1[c])) << 16;
        std::memcpy(d, pairs, sizeof pairs);
        continue;
      }
      for (int h = 0; h < 2; ++h) {
        if (k + h >= K) {
          for (int64_t c = 0; c < W; ++c) d[2 * c + h] = 0;
          continue;
        }
        if (b.is_bf16) {
          const uint16_t* s = static_cast<const uint16_t*>(b.data) + (k + h) * b.ld + j0;
          for (int64_t c = 0; c < cols; ++c) d[2 * c + h] = s[c];
        } else {
          const float* s = static_cast<const float*>(b.data) + (k + h) * b.ld + j0;
          for (int64_t c = 0; c < cols; ++c) d[2 * c + h] = round_to_bf16(s[c]);
        }
        for (int64_t c = cols; c < W; ++c) d[2 * c + h] = 0;
      }
    }
  }
}

// ---- Products --------------------------------------------------------------------------------

namespace {

// The portable path: the operands rounded to bfloat16 and widened (same layout), then float32 GEMM.
void gemm_portable(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, float* C, int64_t ldc,
                   bool accumulate, bool b_rounded = false) {
  auto rounded = [](const Bf16Operand& x, int64_t rows, int64_t cols) {  // op(x) is rows x cols
    const int64_t sr = x.trans ? cols : rows, sc = x.trans ? rows : cols;  // as stored
    std::vector<float> out(static_cast<size_t>(sr * sc));
    parallel_for(0, sr, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(sc, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* d = out.data() + r * sc;
        if (x.is_bf16) {
          const uint16_t* s = static_cast<const uint16_t*>(x.data) + r * x.ld;
          for (int64_t c = 0; c < sc; ++c) d[c] = widen_bf16(s[c]);
        } else {
          const float* s = static_cast<const float*>(x.data) + r * x.ld;
          for (int64_t c = 0; c < sc; ++c) d[c] = widen_bf16(round_to_bf16(s[c]));
        }
      }
    });
    return out;
  };
  const std::vector<float> ar = rounded(a, M, K);
  if (b_rounded) {  // already rounded (a PackedB), read in place
    gemm<float>(a.trans, b.trans, M, N, K, ar.data(), a.trans ? M : K, static_cast<const float*>(b.data), b.ld, C, ldc, accumulate);
    return;
  }
  const std::vector<float> br = rounded(b, K, N);
  gemm<float>(a.trans, b.trans, M, N, K, ar.data(), a.trans ? M : K, br.data(), b.trans ? K : N, C, ldc, accumulate);
}

}  // namespace

// The ISA paths: B packed whole into 32-column panels (shared), A packed a block of rows at a time
// (per thread), then the micro-kernel over every (row tile, panel) pair. Each element of C is
// summed over all of K by one call, in one order.
namespace {
// Every panel of op(B) into bp (Kp * 32 values a panel). A plain B is packed by pair rows (each row
// of B read once, contiguously); a transposed one by panels (each column's pairs are adjacent).
void pack_all_panels(const Bf16Operand& b, int64_t N, int64_t K, uint16_t* bp, bool small) {
  const int64_t Kp = bf16_padded_k(K), panels = (N + kBf16PanelCols - 1) / kBf16PanelCols, panel_size = Kp * kBf16PanelCols;
  auto pack = [&](int64_t x0, int64_t x1) {
    if (!b.trans) return pack_b_pair_rows_bf16(b, N, K, x0, x1, bp);
    for (int64_t q = x0; q < x1; ++q)
      pack_b_panel_bf16(b, q * kBf16PanelCols, std::min(kBf16PanelCols, N - q * kBf16PanelCols), K, bp + q * panel_size);
  };
  const int64_t units = b.trans ? panels : Kp / 2;
  if (small) pack(0, units);
  else parallel_for(0, units, b.trans ? 1 : 8, pack);
}

bool is_small(int64_t M, int64_t N, int64_t K) { return 2.0 * static_cast<double>(M) * N * K < 2.0e5; }

// The most rows of A packed (and of C written) at a time.
constexpr int64_t kMaxRowBlock = 256;

// A packed block of `rows` rows of op(A), row stride ld (padded to whole row steps, with room to spare).
size_t a_scratch_elems(int64_t rows, int64_t ld) { return static_cast<size_t>((rows + kBf16RowStep) * ld); }

// The products over packed panels of B: A packed a block of rows at a time (per thread; a bfloat16
// A too, into the kernel's layout, rows or tiles), then the micro-kernel over every (row tile,
// panel) pair, K in chunks. Each element of C is summed in one order whatever
// the thread count. With C16, each row block of a panel is rounded into the bfloat16 C from a local
// buffer once its sums are complete.
void gemm_on_panels(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const uint16_t* bp, float* C, int64_t ldc,
                    bool accumulate, const Bf16Kernel& kernel, uint16_t* C16 = nullptr, const Bf16Epilogue* ep = nullptr) {
  const int64_t tile_rows = kernel.rows;
  const Bf16TileFn tile = kernel.tile;
  // Each thread's share runs between the kernel's begin and end (AMX: configure, release the tiles).
  struct Scope {
    const Bf16Kernel& k;
    explicit Scope(const Bf16Kernel& kernel) : k(kernel) {
      if (k.begin) k.begin();
    }
    ~Scope() {
      if (k.end) k.end();
    }
  };
  const int64_t Kp = bf16_padded_k(K);
  const int64_t panels = (N + kBf16PanelCols - 1) / kBf16PanelCols;
  const int64_t panel_size = Kp * kBf16PanelCols;
  const int64_t ald = Kp;  // packed A's ldd (bf16.h's packed_a_offset)
  const int threads = is_small(M, N, K) ? 1 : num_threads();
  // Row blocks that fill the kernel's L2 budget for A (or 128 rows), at least as many blocks as
  // threads when M allows.
  const int64_t budget_rows = kernel.a_block_bytes > 0 ? kernel.a_block_bytes / (ald * 2) / tile_rows * tile_rows : 128;
  const int64_t max_rows = std::clamp<int64_t>(budget_rows, tile_rows, kMaxRowBlock);
  const int64_t even = (M + threads - 1) / threads;
  const int64_t mc = std::max<int64_t>(tile_rows, std::min<int64_t>(max_rows, (even + tile_rows - 1) / tile_rows * tile_rows));
  const int64_t blocks = (M + mc - 1) / mc;
  // K in chunks of kc (a multiple of the tile depth): where K is deep, a chunk of the panel stays in
  // L1 while the row tiles stream past it, each adding its chunk's sums to C (in cache: a row block
  // of one panel). The chunks are fixed by K alone, so the order of the sums is too.
  const int64_t kc = kernel.k_chunk > 0 ? std::min(Kp, kernel.k_chunk) : Kp;
  // Rows [i0, i0 + rows) (at most kMaxRowBlock) of C over panels [q0, q1), from the packed rows ap.
  // The sums in an L1 block until complete: a bfloat16 C, and a float32 one where the kernel says so
  // and K takes several chunks (AMX: each chunk stored and reloaded its tiles in C, whose rows 2-8 KB
  // apart fall into a few L1 sets; one core, autocast 2048^3 +5-10%; with one chunk, no change).
  const bool via_block = C16 != nullptr || (kernel.store != nullptr && Kp > kc);
  // The epilogue runs on each row block of a panel once its sums are complete, while it is in cache
  // (applied to each 32 x 32 tile as it is stored, or to the L1 block before its store: no gain).
  const Bf16EpilogueFn epilogue = kernel.epilogue ? kernel.epilogue : epilogue_block_portable;
  auto run_block = [&](int64_t i0, int64_t rows, const uint16_t* ap, int64_t q0, int64_t q1) {
    alignas(64) float block[kMaxRowBlock * kBf16PanelCols];  // C16's float32 sums for one panel
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t j = q * kBf16PanelCols, cols = std::min(kBf16PanelCols, N - j);
      for (int64_t k0 = 0; k0 < Kp; k0 += kc) {
        const int64_t klen = std::min(kc, Kp - k0);
        const uint16_t* bq = bp + q * panel_size + k0 * kBf16PanelCols;  // pair rows from k0 / 2
        for (int64_t r = 0; r < rows; r += tile_rows) {
          const uint16_t* at = ap + packed_a_offset(r, k0, ald, kernel.a_tiles);
          const int64_t n = std::min(tile_rows, rows - r);
          if (via_block) tile(at, ald, bq, klen, block + r * kBf16PanelCols, kBf16PanelCols, n, cols, k0 > 0);
          else tile(at, ald, bq, klen, C + (i0 + r) * ldc + j, ldc, n, cols, accumulate || k0 > 0);
        }
      }
      if (C16) kernel.round(block, kBf16PanelCols, C16 + i0 * ldc + j, ldc, rows, cols);
      else if (via_block) kernel.store(block, kBf16PanelCols, C + i0 * ldc + j, ldc, rows, cols, accumulate);
      if (ep && !C16) epilogue(C + i0 * ldc + j, ldc, rows, cols, ep->bias ? ep->bias + j : nullptr, ep->relu);
    }
  };
  if (blocks >= threads || threads == 1) {
    auto rows_task = [&](int64_t b0, int64_t b1) {
      const Scope scope(kernel);
      uint16_t* ap = gemm_scratch<uint16_t>(1, a_scratch_elems(mc, ald));
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t i0 = blk * mc, rows = std::min(mc, M - i0);
        pack_a_bf16(a, i0, rows, K, ap, ald, kernel.a_tiles);
        run_block(i0, rows, ap, 0, panels);
      }
    };
    if (threads == 1) rows_task(0, blocks);
    else parallel_for(0, blocks, 1, rows_task);
  } else {
    // Few rows: pack them once, split the panels among the threads.
    uint16_t* ap = gemm_scratch<uint16_t>(1, a_scratch_elems(M, ald));
    pack_a_bf16(a, 0, M, K, ap, ald, kernel.a_tiles);
    parallel_for(0, panels, 1, [&](int64_t q0, int64_t q1) {
      const Scope scope(kernel);
      for (int64_t i0 = 0; i0 < M; i0 += kMaxRowBlock)
        run_block(i0, std::min(kMaxRowBlock, M - i0), ap + packed_a_offset(i0, 0, ald, kernel.a_tiles), q0, q1);
    });
  }
}
}  // namespace

void gemm_bf16_packed(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, float* C, int64_t ldc,
                      bool accumulate, const Bf16Kernel& kernel, uint16_t* C16, const Bf16Epilogue* epilogue) {
  const int64_t panels = (N + kBf16PanelCols - 1) / kBf16PanelCols;
  uint16_t* bp = gemm_scratch<uint16_t>(0, static_cast<size_t>(panels * bf16_padded_k(K) * kBf16PanelCols));
  pack_all_panels(b, N, K, bp, is_small(M, N, K));
  gemm_on_panels(M, N, K, a, bp, C, ldc, accumulate, kernel, C16, epilogue);
}

void epilogue_block_portable(float* C, int64_t ldc, int64_t rows, int64_t cols, const float* bias, bool relu) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float& v = C[r * ldc + c];
      const float x = bias ? v + bias[c] : v;
      v = relu ? (x > 0.0f ? x : 0.0f) : x;
    }
}

void store_block_portable(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, int64_t cols, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * ldd + c] = accumulate ? dst[r * ldd + c] + src[r * lds + c] : src[r * lds + c];
}

void round_block_bf16_portable(const float* src, int64_t lds, uint16_t* dst, int64_t ldd, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * ldd + c] = round_to_bf16(src[r * lds + c]);
}

PackedB pack_b_bf16(const Bf16Operand& b, int64_t N, int64_t K, CpuCapability path) {
  PackedB p;
  pack_b_bf16(b, N, K, path, p);
  return p;
}

void pack_b_bf16(const Bf16Operand& b, int64_t N, int64_t K, CpuCapability path, PackedB& p) {
  p.path = path;
  p.N = N;
  p.K = K;
  p.trans = b.trans;
  if (path == CpuCapability::kPortable) {
    const int64_t sr = b.trans ? N : K, sc = b.trans ? K : N;
    p.rounded.resize(static_cast<size_t>(sr * sc));
    for (int64_t r = 0; r < sr; ++r)
      for (int64_t c = 0; c < sc; ++c) {
        const int64_t off = r * b.ld + c;
        p.rounded[r * sc + c] = widen_bf16(b.is_bf16 ? static_cast<const uint16_t*>(b.data)[off]
                                                     : round_to_bf16(static_cast<const float*>(b.data)[off]));
      }
    p.panels.clear();
    return;
  }
  p.rounded.clear();
  p.panels.resize(static_cast<size_t>((N + kBf16PanelCols - 1) / kBf16PanelCols * bf16_padded_k(K) * kBf16PanelCols));
  pack_all_panels(b, N, K, p.panels.data(), false);
}

namespace {
void require_path(CpuCapability path) {
  if (static_cast<int>(path) > static_cast<int>(best_cpu_capability()))
    throw std::invalid_argument(std::string("gemm_bf16: this CPU cannot run the ") + cpu_capability_name(path) + " path");
}

Bf16Kernel isa_kernel(CpuCapability path) {
  // AMX (measured on the Intel Xeon VM, one core, alternating runs; bench/RESULTS.md): K in chunks of
  // 512 (a 32 KB chunk of the panel in L1: bf16 1024^3 +10-12% over whole K; 1024-deep chunks -20%,
  // 256 -5%); A packed in tiles (bench/amx_tile_loop's a_tiles case against rows 2 KB + 64 bytes
  // apart: +15-20%; bf16 1024^3 1,190 -> 1,320-1,420 GFLOP/s); row blocks of up to 1 MB of A (256
  // rows up to K = 2048: 2048^3 +8-10% over 544 KB; 512-row blocks -10% at 1024^3). AVX512-BF16:
  // whole K, 128-row blocks, A in rows (its Zen 4 and 5 tuning, unchanged).
  return path == CpuCapability::kAmx
             ? Bf16Kernel{tile_amx, kAmxRows, amx_tiles_begin, amx_tiles_end, round_block_avx512bf16, 512, 1 << 20, true,
                          store_block_avx512bf16, epilogue_block_avx512bf16}
             : Bf16Kernel{tile_avx512bf16, kAvx512Bf16Rows, nullptr, nullptr, round_block_avx512bf16, 0, 0, false, nullptr,
                          epilogue_block_avx512bf16};
}
}  // namespace

void gemm_bf16_to_bf16(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, uint16_t* C,
                       int64_t ldc, CpuCapability path) {
  if (M == 0 || N == 0) return;
  require_path(path);
  if (path == CpuCapability::kPortable || K == 0) {  // float32 sums, then rounded
    std::vector<float> c32(static_cast<size_t>(M * N));
    gemm_bf16(M, N, K, a, b, c32.data(), N, false, path);
    if (ldc == N) return float_to_bf16(c32.data(), C, M * N);
    for (int64_t i = 0; i < M; ++i) float_to_bf16(c32.data() + i * N, C + i * ldc, N);
    return;
  }
  gemm_bf16_packed(M, N, K, a, b, nullptr, ldc, false, isa_kernel(path), C);
}

namespace {
// The epilogue over all of C, a row range per thread (the portable path and K = 0).
void epilogue_all(int64_t M, int64_t N, float* C, int64_t ldc, const Bf16Epilogue& ep) {
  parallel_for(0, M, std::max<int64_t>(1, kParallelGrain / N), [&](int64_t r0, int64_t r1) {
    epilogue_block_portable(C + r0 * ldc, ldc, r1 - r0, N, ep.bias, ep.relu);
  });
}
}  // namespace

void gemm_bf16(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, float* C, int64_t ldc,
               bool accumulate, CpuCapability path, const PackedB* packed, const Bf16Epilogue* epilogue) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    if (epilogue) epilogue_all(M, N, C, ldc, *epilogue);
    return;
  }
  require_path(path);
  if (packed && (packed->path != path || packed->N != N || packed->K != K))
    throw std::invalid_argument("gemm_bf16: the packed B was made for another shape or path");
  const Bf16Kernel kernel = isa_kernel(path);
  if (path == CpuCapability::kPortable) {
    if (!packed) gemm_portable(M, N, K, a, b, C, ldc, accumulate);
    else gemm_portable(M, N, K, a, {packed->rounded.data(), false, packed->trans ? K : N, packed->trans}, C, ldc, accumulate,
                       /*b_rounded=*/true);
    if (epilogue) epilogue_all(M, N, C, ldc, *epilogue);
    return;
  }
  if (packed) return gemm_on_panels(M, N, K, a, packed->panels.data(), C, ldc, accumulate, kernel, nullptr, epilogue);
  gemm_bf16_packed(M, N, K, a, b, C, ldc, accumulate, kernel, nullptr, epilogue);
}

}  // namespace tg::kernels
