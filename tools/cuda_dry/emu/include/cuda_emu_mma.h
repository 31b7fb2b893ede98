#pragma once
// The tensor-core instructions of ops/cuda/mma.cuh, emulated on the CPU from the PTX ISA's own
// description (not from ops/cuda/mma_layout.h, which they thereby check): cp.async (synchronous
// here), ldmatrix .m8n8.x4 (.trans), mma.sync .m16n8k16 .row.col bf16 x bf16 + f32, cvt.rn.bf16x2.
// ldmatrix and mma are warp collectives: each lane hands its operands to the warp's exchange.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../emu.h"  // __uint_as_float (also forced in first)
#include "../emu_abi.h"

namespace tg::cuda_ops::mma {

inline void cp_async16(void* dst, const void* src, bool valid) {
  if (valid) {
    std::memcpy(dst, src, 16);
  } else {
    std::memset(dst, 0, 16);
  }
}
inline void cp_async4(void* dst, const void* src, bool valid) {
  if (valid) {
    std::memcpy(dst, src, 4);
  } else {
    std::memset(dst, 0, 4);
  }
}
inline void cp_async_commit() {}
template <int kPending>
inline void cp_async_wait() {}

namespace emu {
inline float bf16_to_float(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
// Round to nearest, ties to even (cvt.rn); NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// ldmatrix .x4: lane l names row l % 8 of matrix l / 8; register i of lane l gets matrix i's row
// l / 4, elements 2 (l % 4) and +1 — or, with .trans, elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4).
inline void ldmatrix(uint32_t (&r)[4], const void* p, bool trans) {
  const uint64_t mine = reinterpret_cast<uintptr_t>(p);
  const uint64_t* all = tg_emu_warp_exchange(&mine, 1);
  const unsigned l = tg_emu_now.lane;
  auto row_of = [&](int matrix, int row) { return reinterpret_cast<const uint16_t*>(all[(matrix * 8 + row) * 16]); };
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (!trans) {
      const uint16_t* row = row_of(i, static_cast<int>(l / 4));
      lo = row[2 * (l % 4)];
      hi = row[2 * (l % 4) + 1];
    } else {
      lo = row_of(i, static_cast<int>(2 * (l % 4)))[l / 4];
      hi = row_of(i, static_cast<int>(2 * (l % 4) + 1))[l / 4];
    }
    r[i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
}
}  // namespace emu

inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) { emu::ldmatrix(r, p, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) { emu::ldmatrix(r, p, true); }

// mma.m16n8k16 .row.col, lane l = 4 g + t (PTX ISA, "Matrix Fragments for mma.m16n8k16"): A's
// elements a0..a7 (two a register) at row g + 8 ((i / 2) % 2), column 2 t + (i % 2) + 8 (i / 4);
// B's b0..b3 at row 2 t + (i % 2) + 8 (i / 2), column g; C's c0..c3 at row g + 8 (i / 2), column
// 2 t + (i % 2). The lower half of a register is the element with the lower index.
inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint64_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
  const uint64_t* all = tg_emu_warp_exchange(mine, 6);
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const uint32_t reg = static_cast<uint32_t>(all[lane * 16 + i / 2]);
      const uint16_t h = static_cast<uint16_t>(i % 2 == 0 ? reg & 0xffffu : reg >> 16);
      A[g + 8 * ((i / 2) % 2)][2 * t + (i % 2) + 8 * (i / 4)] = emu::bf16_to_float(h);
    }
    for (int i = 0; i < 4; ++i) {
      const uint32_t reg = static_cast<uint32_t>(all[lane * 16 + 4 + i / 2]);
      const uint16_t h = static_cast<uint16_t>(i % 2 == 0 ? reg & 0xffffu : reg >> 16);
      B[2 * t + (i % 2) + 8 * (i / 2)][g] = emu::bf16_to_float(h);
    }
  }
  const unsigned l = tg_emu_now.lane;
  const int g = static_cast<int>(l / 4), t = static_cast<int>(l % 4);
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * t + (i % 2);
    float sum = 0;
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    c[i] += sum;
  }
}

// cvt.rn.bf16x2.f32: lo in the low half.
inline uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(emu::float_to_bf16(lo)) | (static_cast<uint32_t>(emu::float_to_bf16(hi)) << 16);
}

}  // namespace tg::cuda_ops::mma
