#pragma once
// bfloat16 kernels: conversions, and matrix products of bfloat16 inputs with float32 accumulation
// and output, on one of three paths chosen at run time (the first use) from CPUID and the OS:
//
//   amx          Intel AMX tiles (tdpbf16ps: a 16 x 16 float32 tile += 16 x 32 by 32 x 16
//                bfloat16) — Sapphire Rapids and later; Linux must grant the tile state
//                (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once per process).
//   avx512_bf16  vdpbf16ps (16 float32 lanes += pairs of bfloat16 products) — Zen 4, Zen 5,
//                Cooper Lake, Sapphire Rapids.
//   portable     any x86-64: the inputs rounded to bfloat16 and widened back to float32, then the
//                float32 GEMM (ops/kernels/gemm.h).
//
// Every path computes the same products of the same bfloat16-rounded inputs; they differ only in
// the order float32 sums are taken, so results agree to float32 rounding (not bit for bit). Each
// element of C is summed by one thread in a fixed order: results do not depend on the thread count.
//
// The ISA kernels live in files of their own (gemm_bf16_avx512bf16.cc, gemm_bf16_amx.cc) whose
// functions carry their own target attributes and are named for their ISA; nothing inline is shared
// with the rest of the library, so a CPU without those instructions never runs one (CI checks the
// disassembly). TG_CPU_CAPABILITY=amx|avx512_bf16|portable forces a lower path.
//
// Kernels know no graph: bfloat16 values are their bits, uint16_t.
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "../cpu_capability.h"

namespace tg::kernels {

// ---- Conversions (round to nearest even in software, the same bits on every path; NaN stays NaN)

void float_to_bf16(const float* src, uint16_t* dst, int64_t n);
void bf16_to_float(const uint16_t* src, float* dst, int64_t n);

// ---- Which path runs the products: tg::CpuCapability (ops/cpu_capability.h, graph-free), chosen
// where the CPU's features are read.

// ---- Products

// An operand as stored: float32 values (rounded to bfloat16 as they are packed) or bfloat16 bits,
// row-major with leading dimension ld, read transposed when trans.
struct Bf16Operand {
  const void* data = nullptr;
  bool is_bf16 = false;
  int64_t ld = 0;
  bool trans = false;
};

// Storage on 64-byte lines: a tile row or a vector load of a packed panel never straddles two lines
// (std::vector's 16-byte alignment would make every AMX B tile load touch twice the lines).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
};

// B packed once for repeated products (autocast packs a float32 weight once per optimizer step):
// on the ISA paths its VNNI-2 panels, on the portable path its bfloat16-rounded values as float32
// in B's own layout (ld = trans ? K : N).
struct PackedB {
  CpuCapability path = CpuCapability::kPortable;
  int64_t N = 0, K = 0;
  bool trans = false;
  std::vector<uint16_t, CacheLineAllocator<uint16_t>> panels;
  std::vector<float> rounded;
};
PackedB pack_b_bf16(const Bf16Operand& b, int64_t N, int64_t K, CpuCapability path);
// The same into an existing pack, reusing its memory (autocast repacks a weight after each step).
void pack_b_bf16(const Bf16Operand& b, int64_t N, int64_t K, CpuCapability path, PackedB& out);

// What a product does to each complete float32 sum before C holds it (a linear layer's bias and
// activation, so that its output is written once): + bias[j] (column j; none when null), then
// max(0, .) when relu. On the ISA paths it runs on each block of C as the block is finished, while
// the block is in cache.
struct Bf16Epilogue {
  const float* bias = nullptr;
  bool relu = false;
};

// C[M, N] (row stride ldc) = op(A)[M, K] op(B)[K, N], or += when accumulate; then the epilogue, if
// given (with accumulate: C = epilogue(C + op(A) op(B))). With `packed` (made by pack_b_bf16 for
// this N, K and path), b is not read.
void gemm_bf16(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, float* C, int64_t ldc,
               bool accumulate, CpuCapability path, const PackedB* packed = nullptr, const Bf16Epilogue* epilogue = nullptr);
inline void gemm_bf16(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, float* C, int64_t ldc,
                      bool accumulate = false) {
  gemm_bf16(M, N, K, a, b, C, ldc, accumulate, cpu_capability());
}
// The same product with a bfloat16 C (a @ b of bfloat16 tensors): each float32 sum rounded once to
// nearest even, the bits float_to_bf16 gives the float32 result. On the ISA paths each block of C
// is rounded as the micro-kernel finishes it, from L1 (no float32 copy of C in memory).
void gemm_bf16_to_bf16(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, uint16_t* C,
                       int64_t ldc, CpuCapability path);

// ---- The packed layouts the AVX512-BF16 and AMX paths share (exposed for the tests)
//
// K is padded with zeros to a multiple of kBf16KStep (one AMX tile's depth). A block of rows is
// row-major bfloat16, rows padded with zeros to a multiple of kBf16RowStep. B is packed in panels
// of kBf16PanelCols columns in the VNNI-2 pair layout: for k pair p, the 32 columns' (B[2p][j],
// B[2p+1][j]) pairs side by side, 128 bytes a pair row — one vdpbf16ps operand per 16 columns, and
// for AMX two 16-column B tiles of 16 pair rows each (64 bytes a row, stride 128 bytes).
inline constexpr int64_t kBf16KStep = 32;
inline constexpr int64_t kBf16RowStep = 32;
inline constexpr int64_t kBf16PanelCols = 32;
inline int64_t bf16_padded_k(int64_t K) { return (K + kBf16KStep - 1) / kBf16KStep * kBf16KStep; }

// Where a packed block of A keeps its value (r, k), ldd >= Kp: in rows (the AVX512-BF16 kernel's
// layout), r * ldd + k; in tiles (AMX's), each 16 rows x 32 k one contiguous 1 KB tile (its rows 64
// bytes apart, so that a tileloadd reads 16 consecutive lines), a 16-row group's tiles in k order,
// the groups 16 * ldd values apart (ldd a multiple of 32).
inline int64_t packed_a_offset(int64_t r, int64_t k, int64_t ldd, bool tiles) {
  return tiles ? (r / 16) * 16 * ldd + (k / 32) * 512 + (r % 16) * 32 + k % 32 : r * ldd + k;
}
// Rows [i0, i0 + rows) of op(A), all K, padded with zeros to whole row steps and to Kp, into dst in
// rows or tiles (packed_a_offset; the values of a row past Kp are not written): pack_a_avx512bf16
// where the CPU has AVX-512 F/BW/VL (any CPU with the avx512_bf16 or amx path), else
// pack_a_bf16_portable; the two write the same bits (tests compare them).
void pack_a_bf16(const Bf16Operand& a, int64_t i0, int64_t rows, int64_t K, uint16_t* dst, int64_t ldd, bool tiles = false);
void pack_a_bf16_portable(const Bf16Operand& a, int64_t i0, int64_t rows, int64_t K, uint16_t* dst, int64_t ldd,
                          bool tiles = false);
void pack_a_avx512bf16(const Bf16Operand& a, int64_t i0, int64_t rows, int64_t K, uint16_t* dst, int64_t ldd,
                       bool tiles = false);
// Columns [j0, j0 + cols) of op(B) (cols <= kBf16PanelCols), all K, into one panel of Kp * 32 values;
// a transposed op(B) (x Wᵀ) the AVX-512 way where the CPU has it, as for A.
void pack_b_panel_bf16(const Bf16Operand& b, int64_t j0, int64_t cols, int64_t K, uint16_t* dst);
void pack_b_panel_bf16_portable(const Bf16Operand& b, int64_t j0, int64_t cols, int64_t K, uint16_t* dst);
void pack_b_panel_avx512bf16(const Bf16Operand& b, int64_t j0, int64_t cols, int64_t K, uint16_t* dst);

// Pair rows [p0, p1) (k = 2p, 2p + 1) of every panel of a plain (not transposed) op(B) with N columns;
// the AVX-512 version where the CPU has it, as for A.
void pack_b_pair_rows_bf16(const Bf16Operand& b, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* dst);
void pack_b_pair_rows_bf16_portable(const Bf16Operand& b, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* dst);
void pack_b_pair_rows_avx512bf16(const Bf16Operand& b, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* dst);

// The micro-kernels: C[rows, cols] (+)= packed rows of A (Kp values each; lda the packed block's
// ldd, in its kernel's layout) times one B panel (Kp deep: a whole panel, or a chunk of one); rows <=
// their kernel's row block, cols <= 32.
using Bf16TileFn = void (*)(const uint16_t* a, int64_t lda, const uint16_t* b, int64_t Kp, float* C, int64_t ldc,
                            int64_t rows, int64_t cols, bool accumulate);
// Rounds a block of float32 values (row stride lds) to bfloat16 (row stride ldd), as float_to_bf16.
using Bf16RoundFn = void (*)(const float* src, int64_t lds, uint16_t* dst, int64_t ldd, int64_t rows, int64_t cols);
// Writes a block of float32 values (row stride lds) into C (row stride ldd): dst = src, or += src.
using Bf16StoreFn = void (*)(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, int64_t cols,
                             bool accumulate);
// Applies an epilogue in place to a block of C (row stride ldc) whose columns start at bias[0].
using Bf16EpilogueFn = void (*)(float* C, int64_t ldc, int64_t rows, int64_t cols, const float* bias, bool relu);
// A micro-kernel with its row block and, for AMX, what each thread runs around its share of one
// product: `begin` loads the tile configuration, `end` releases the tiles (as oneDNN does), so that
// another library releasing them on the same thread between two products cannot leave our
// tileloadd without a configuration (a SIGILL), and no thread keeps 8 KB of tile state once done.
// `round` writes a bfloat16 C from the micro-kernel's float32 block; `store`, where given, a float32
// C the same way (the micro-kernel's sums kept in an L1 block, with rows 128 bytes apart, until
// complete; else it writes C itself). k_chunk (a multiple of 32, or
// 0 for all of K): K is taken in chunks of that depth, each adding to C (a chunk of the B panel stays
// in L1 while the row tiles pass); the chunks depend on K alone, so the order of the sums does too.
// a_block_bytes: the packed A block's size in L2, which sets the rows per block (0: 128 rows).
// a_tiles: A packed in tiles (packed_a_offset, ldd = Kp), else in rows. epilogue: how a block of C
// gets a Bf16Epilogue (null: epilogue_block_portable).
struct Bf16Kernel {
  Bf16TileFn tile;
  int64_t rows;
  void (*begin)() = nullptr;
  void (*end)() = nullptr;
  Bf16RoundFn round = nullptr;
  int64_t k_chunk = 0;
  int64_t a_block_bytes = 0;
  bool a_tiles = false;
  Bf16StoreFn store = nullptr;
  Bf16EpilogueFn epilogue = nullptr;
};
// The blocked driver the ISA paths share, with the micro-kernel given (the tests give an emulated
// one): into a float32 C (C16 null) or, not accumulating, into a bfloat16 C16 (C null).
void gemm_bf16_packed(int64_t M, int64_t N, int64_t K, const Bf16Operand& a, const Bf16Operand& b, float* C, int64_t ldc,
                      bool accumulate, const Bf16Kernel& kernel, uint16_t* C16 = nullptr,
                      const Bf16Epilogue* epilogue = nullptr);
void round_block_bf16_portable(const float* src, int64_t lds, uint16_t* dst, int64_t ldd, int64_t rows, int64_t cols);
void round_block_avx512bf16(const float* src, int64_t lds, uint16_t* dst, int64_t ldd, int64_t rows, int64_t cols);
void epilogue_block_portable(float* C, int64_t ldc, int64_t rows, int64_t cols, const float* bias, bool relu);
void epilogue_block_avx512bf16(float* C, int64_t ldc, int64_t rows, int64_t cols, const float* bias, bool relu);
void store_block_portable(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, int64_t cols, bool accumulate);
void store_block_avx512bf16(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, int64_t cols,
                            bool accumulate);
inline constexpr int64_t kAvx512Bf16Rows = 8;  // rows per avx512_bf16 tile
inline constexpr int64_t kAmxRows = 32;        // rows per AMX tile block (two 16-row tiles)
void tile_avx512bf16(const uint16_t* a, int64_t lda, const uint16_t* b, int64_t Kp, float* C, int64_t ldc, int64_t rows,
                     int64_t cols, bool accumulate);
void tile_amx(const uint16_t* a, int64_t lda, const uint16_t* b, int64_t Kp, float* C, int64_t ldc, int64_t rows,
              int64_t cols, bool accumulate);
void amx_tiles_begin();  // _tile_loadconfig of the one configuration tile_amx uses
void amx_tiles_end();    // _tile_release

}  // namespace tg::kernels
