// The AVX512-BF16 micro-kernel (vdpbf16ps), compiled with its own target attribute whatever the
// build's flags, and reached only when ops/kernels/bf16.cc found the instructions (CPUID and the
// OS's zmm state). Nothing here is inline-shared with the rest of the library: the one function
// is named for its ISA, and tests/isa_check.sh fails the build's tests if zmm registers or
// vdpbf16ps appear in any function that is not.
#include <immintrin.h>

#include <cstring>

#include "ops/kernels/bf16.h"

namespace tg::kernels {

// C[rows, cols] (+)= 8 packed rows of A (row stride Kp) times one 32-column VNNI-2 panel of B.
// Per k pair: two B vectors (16 columns x 2 k each), and for each row its (A[r][2p], A[r][2p+1])
// pair broadcast to all lanes: 16 vdpbf16ps, each 32 multiply-adds. Rows past `rows` are the
// packed block's zero padding; columns past `cols` are the panel's.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void tile_avx512bf16(
    const uint16_t* a, const uint16_t* b, int64_t Kp, float* C, int64_t ldc, int64_t rows, int64_t cols, bool accumulate) {
  constexpr int R = static_cast<int>(kAvx512Bf16Rows);
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int64_t pairs = Kp / 2;
#pragma GCC unroll 2
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * 64);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * 64 + 32);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * Kp + 2 * p, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xFFFF) : cols <= 16 ? __mmask16(0) : __mmask16((1u << (cols - 16)) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (r >= rows) break;
    float* c = C + r * ldc;
    __m512 v0 = acc[r][0], v1 = acc[r][1];
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
  }
}

}  // namespace tg::kernels
