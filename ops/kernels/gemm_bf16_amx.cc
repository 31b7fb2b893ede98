// The AMX micro-kernel (tdpbf16ps on 16 x 16 float32 tiles), compiled with its own target
// attribute whatever the build's flags, and reached only when ops/kernels/bf16.cc found AMX-TILE
// and AMX-BF16 in CPUID and Linux granted the tile state. Its body is ops/kernels/amx_tiles.inc,
// which the tests also run with emulated tiles on every CPU.
#include <immintrin.h>

#include "ops/kernels/bf16.h"

namespace tg::kernels {
namespace {

// The tile configuration (palette 1): 8 tiles of 16 rows x 64 bytes, the same for every shape (the
// packed operands are padded to whole tiles), loaded by each thread at the start of its share of a
// product (amx_tiles_begin) and released at its end (amx_tiles_end).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t tile_rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);

const TileConfig tile_config;

}  // namespace

__attribute__((target("amx-tile"))) void amx_tiles_begin() { _tile_loadconfig(&tile_config); }
__attribute__((target("amx-tile"))) void amx_tiles_end() { _tile_release(); }

__attribute__((target("amx-tile,amx-bf16,avx512f"))) void tile_amx(const uint16_t* a, int64_t lda, const uint16_t* b,
                                                                    int64_t Kp, float* C, int64_t ldc, int64_t rows,
                                                                    int64_t cols, bool accumulate) {
#define TG_TILE_LOAD(t, ptr, stride) _tile_loadd(t, ptr, stride)
#define TG_TILE_STREAM_LOAD(t, ptr, stride) _tile_stream_loadd(t, ptr, stride)
#define TG_TILE_STORE(t, ptr, stride) _tile_stored(t, ptr, stride)
#define TG_TILE_ZERO(t) _tile_zero(t)
#define TG_TILE_DP(c, x, y) _tile_dpbf16ps(c, x, y)
#include "ops/kernels/amx_tiles.inc"
#undef TG_TILE_LOAD
#undef TG_TILE_STREAM_LOAD
#undef TG_TILE_STORE
#undef TG_TILE_ZERO
#undef TG_TILE_DP
}

}  // namespace tg::kernels
