// The AVX512-BF16 micro-kernel (vdpbf16ps), compiled with its own target attribute whatever the
// build's flags, and reached only when ops/kernels/bf16.cc found the instructions (CPUID and the
// OS's zmm state). Nothing here is inline-shared with the rest of the library: the one function
// is named for its ISA, and tests/isa_check.sh fails the build's tests if zmm registers or
// vdpbf16ps appear in any function that is not.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/kernels/bf16.h"

namespace tg::kernels {

// C[rows, cols] (+)= R packed rows of A (row stride Kp) times one 32-column VNNI-2 panel of B.
// Per k pair: two B vectors (16 columns x 2 k each), and for each row its (A[r][2p], A[r][2p+1])
// pair broadcast to all lanes: 2R vdpbf16ps, each 32 multiply-adds. Columns past `cols` are the
// panel's zero padding. Each row's sums run over the pairs in order whatever R is, so a row gets
// the same bits in a 1-row product (a decoding step) as in an 8-row one.
namespace {
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline void rows_avx512bf16(
    const uint16_t* a, int64_t lda, const uint16_t* b, int64_t Kp, float* C, int64_t ldc, int64_t rows, int64_t cols,
    bool accumulate) {
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
      std::memcpy(&pair, a + r * lda + 2 * p, 4);
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
    if (cols == 32) {  // plain loads and stores where the panel is whole (masked loads are slow on AMD)
      if (accumulate) {
        v0 = _mm512_add_ps(v0, _mm512_loadu_ps(c));
        v1 = _mm512_add_ps(v1, _mm512_loadu_ps(c + 16));
      }
      _mm512_storeu_ps(c, v0);
      _mm512_storeu_ps(c + 16, v1);
      continue;
    }
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
  }
}
}  // namespace

// Up to kAvx512Bf16Rows (8) rows: only the rows that are real are multiplied (the packed block's
// zero padding is not), so a 1-row product (a decoding step, memory-bound) does 2, not 16,
// vdpbf16ps per k pair.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void tile_avx512bf16(
    const uint16_t* a, int64_t lda, const uint16_t* b, int64_t Kp, float* C, int64_t ldc, int64_t rows, int64_t cols,
    bool accumulate) {
  static_assert(kAvx512Bf16Rows == 8);
  if (rows <= 1) return rows_avx512bf16<1>(a, lda, b, Kp, C, ldc, rows, cols, accumulate);
  if (rows <= 2) return rows_avx512bf16<2>(a, lda, b, Kp, C, ldc, rows, cols, accumulate);
  if (rows <= 4) return rows_avx512bf16<4>(a, lda, b, Kp, C, ldc, rows, cols, accumulate);
  rows_avx512bf16<8>(a, lda, b, Kp, C, ldc, rows, cols, accumulate);
}

// Packing A (bf16.h's pack_a_bf16 calls this when the CPU has AVX-512 F/BW/VL): float32 rounded
// to nearest even in integer arithmetic, bit for bit the portable rounding (NaN quieted, subnormals
// kept; vcvtneps2bf16 would flush them), so every path packs the same bits.
namespace {
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i round_avx512bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_blend_epi32(nan, rounded, quiet);  // 16 bfloat16 values, one in each 32-bit lane's low half
}

// Row `kk` of the stored A (16 values from column i, those in mask m real) as 16 bfloat16 values in
// the low halves of 32-bit lanes; zeros past them. Masked loads only for a partial vector: on Zen 5
// a masked load from memory streams at half the speed of a plain one (packing float32 from DRAM:
// 9 GB/s against 20).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i load_row_avx512bf16(const Bf16Operand& a, int64_t kk,
                                                                                        int64_t i, __mmask16 m) {
  if (a.is_bf16) {
    const uint16_t* s = static_cast<const uint16_t*>(a.data) + kk * a.ld + i;
    return _mm512_cvtepu16_epi32(m == 0xFFFF ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s))
                                             : _mm256_maskz_loadu_epi16(m, s));
  }
  const float* s = static_cast<const float*>(a.data) + kk * a.ld + i;
  return round_avx512bf16(m == 0xFFFF ? _mm512_loadu_ps(s) : _mm512_maskz_loadu_ps(m, s));
}

// 32 float32 values (x0, then x1) rounded into 32 bfloat16 values in order: rounded in 32-bit
// lanes, joined with vpackusdw (which interleaves 128-bit lanes), put back in order by one permutation.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i round_two_avx512bf16(__m512 x0, __m512 x1) {
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  return _mm512_permutexvar_epi64(order, _mm512_packus_epi32(round_avx512bf16(x0), round_avx512bf16(x1)));
}

// n float32 values rounded into n bfloat16 values: 64 at a time, then 16, then one masked vector.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void round_row_avx512bf16(const float* s, uint16_t* d,
                                                                                      int64_t n) {
  int64_t k = 0;
  for (; k + 64 <= n; k += 64) {
    _mm512_storeu_si512(d + k, round_two_avx512bf16(_mm512_loadu_ps(s + k), _mm512_loadu_ps(s + k + 16)));
    _mm512_storeu_si512(d + k + 32, round_two_avx512bf16(_mm512_loadu_ps(s + k + 32), _mm512_loadu_ps(s + k + 48)));
  }
  for (; k + 32 <= n; k += 32) _mm512_storeu_si512(d + k, round_two_avx512bf16(_mm512_loadu_ps(s + k), _mm512_loadu_ps(s + k + 16)));
  for (; k + 16 <= n; k += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + k), _mm512_cvtepi32_epi16(round_avx512bf16(_mm512_loadu_ps(s + k))));
  if (k < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
    _mm256_mask_storeu_epi16(d + k, m, _mm512_cvtepi32_epi16(round_avx512bf16(_mm512_maskz_loadu_ps(m, s + k))));
  }
}
}  // namespace

namespace {
// A 16 x 16 transpose of 32-bit elements: r[i] lane j becomes r[j] lane i.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void transpose16x16_avx512bf16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 4) {
    t[i + 0] = _mm512_unpacklo_epi32(r[i + 0], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i + 0], r[i + 1]);
    t[i + 2] = _mm512_unpacklo_epi32(r[i + 2], r[i + 3]);
    t[i + 3] = _mm512_unpackhi_epi32(r[i + 2], r[i + 3]);
    u[i + 0] = _mm512_unpacklo_epi64(t[i + 0], t[i + 2]);  // rows i..i+3 of columns 4L     (lane L)
    u[i + 1] = _mm512_unpackhi_epi64(t[i + 0], t[i + 2]);  //                  columns 4L + 1
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);  //                  columns 4L + 2
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);  //                  columns 4L + 3
  }
  for (int j = 0; j < 4; ++j) {
    // v[j]: rows 0-3 / 4-7 of columns j and 8 + j; v[4 + j]: columns 4 + j and 12 + j; v[8 + ...]: rows 8-15.
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), v4 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
    const __m512i v8 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88), v12 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_i32x4(v0, v8, 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(v0, v8, 0xDD);
    r[4 + j] = _mm512_shuffle_i32x4(v4, v12, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(v4, v12, 0xDD);
  }
}

}  // namespace

// A bfloat16 C from the micro-kernel's float32 block (bf16.h's Bf16RoundFn), row by row, 32 values
// at a time by vcvtne2ps2bf16 (round to nearest even; a NaN quieted as the software rounding does)
// unless one of them is subnormal, which the instruction flushes to zero: those 32 in software.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void round_block_avx512bf16(const float* src, int64_t lds,
                                                                                             uint16_t* dst, int64_t ldd,
                                                                                             int64_t rows, int64_t cols) {
  const __m512i exponent = _mm512_set1_epi32(0x7F800000), mantissa = _mm512_set1_epi32(0x007FFFFF);
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    uint16_t* d = dst + r * ldd;
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
      const __m512 x0 = _mm512_loadu_ps(s + c), x1 = _mm512_loadu_ps(s + c + 16);
      const __m512i u0 = _mm512_castps_si512(x0), u1 = _mm512_castps_si512(x1);
      const __mmask16 sub0 = _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u0, exponent), u0, mantissa);
      const __mmask16 sub1 = _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u1, exponent), u1, mantissa);
      if ((sub0 | sub1) != 0) _mm512_storeu_si512(d + c, round_two_avx512bf16(x0, x1));
      else _mm512_storeu_si512(d + c, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));
    }
    if (c < cols) round_row_avx512bf16(s + c, d + c, cols - c);
  }
}

namespace {
// Values k0 .. k0 + 31 of stored row `row` (those below K real, zeros past them) as 16 bfloat16 pairs.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i load_pairs_avx512bf16(const Bf16Operand& b,
                                                                                          int64_t row, int64_t k0,
                                                                                          int64_t K) {
  const int64_t n = std::min<int64_t>(32, K - k0);
  if (b.is_bf16) {
    const uint16_t* s = static_cast<const uint16_t*>(b.data) + row * b.ld + k0;
    return n == 32 ? _mm512_loadu_si512(s) : _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << n) - 1), s);
  }
  const float* s = static_cast<const float*>(b.data) + row * b.ld + k0;
  __m512 x0, x1;
  if (n == 32) {
    x0 = _mm512_loadu_ps(s);
    x1 = _mm512_loadu_ps(s + 16);
  } else {
    const int64_t n1 = std::max<int64_t>(0, n - 16);
    x0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << std::min<int64_t>(16, n)) - 1), s);
    x1 = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n1) - 1), s + 16);
  }
  return round_two_avx512bf16(x0, x1);
}
}  // namespace

// Packed A, in rows or tiles (bf16.h's packed_a_offset): each packed row is written 32 values (one
// 64-byte store) at a time, wherever the layout puts them.
// A float32 block into C (bf16.h's Bf16StoreFn): 16 values a vector, masked at a row's end.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void store_block_avx512bf16(const float* src, int64_t lds, float* dst,
                                                                                  int64_t ldd, int64_t rows, int64_t cols,
                                                                                  bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    float* d = dst + r * ldd;
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 m = cols - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c)) - 1);
      __m512 v = _mm512_loadu_ps(s + c);  // the block's rows are whole (32 values)
      if (m == 0xFFFF) {
        if (accumulate) v = _mm512_add_ps(v, _mm512_loadu_ps(d + c));
        _mm512_storeu_ps(d + c, v);
      } else {
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, d + c));
        _mm512_mask_storeu_ps(d + c, m, v);
      }
    }
  }
}

// A block of C + bias, then max(0, .) (bf16.h's Bf16EpilogueFn), 16 values a vector: the same
// float32 additions as the portable epilogue (and as bias_act), so the same bits.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void epilogue_block_avx512bf16(float* C, int64_t ldc, int64_t rows,
                                                                                     int64_t cols, const float* bias,
                                                                                     bool relu) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols; c += 16) {
    const __mmask16 m = cols - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c)) - 1);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + c) : zero;
    for (int64_t r = 0; r < rows; ++r) {
      float* d = C + r * ldc + c;
      __m512 v = m == 0xFFFF ? _mm512_loadu_ps(d) : _mm512_maskz_loadu_ps(m, d);
      if (bias) v = _mm512_add_ps(v, b);
      if (relu) v = _mm512_max_ps(v, zero);  // a NaN becomes 0, as the portable x > 0 ? x : 0
      if (m == 0xFFFF) _mm512_storeu_ps(d, v);
      else _mm512_mask_storeu_ps(d, m, v);
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_a_avx512bf16(const Bf16Operand& a, int64_t i0, int64_t rows,
                                                                             int64_t K, uint16_t* dst, int64_t ldd,
                                                                             bool tiles) {
  const int64_t Kp = bf16_padded_k(K);
  const int64_t padded = (rows + kBf16RowStep - 1) / kBf16RowStep * kBf16RowStep;
  if (!a.trans) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k0 = 0; k0 < Kp; k0 += 32)
        _mm512_storeu_si512(dst + packed_a_offset(r, k0, ldd, tiles), load_pairs_avx512bf16(a, i0 + r, k0, K));
  } else {
    // op(A)(i, k) = A[k][i]. Per 16 rows of op(A) x 32 k: each stored row k gives 16 rounded values;
    // rows k, k + 1 are joined into 32-bit (k, k + 1) pairs, one vector per k pair (16 of them, a
    // lane per packed row); a 16 x 16 transpose of those pairs gives each packed row its 32 values,
    // one 64-byte store (before: 8 pairs at a time through a buffer on the stack; dW's products
    // 2-5% faster). Past K the pairs are zeros, so each row is written up to Kp. The 32 stored rows
    // of a k step are taken across the whole row block before the next k step, so each stored row is
    // read as one contiguous run (down one 16-column strip at a time, a strip's lines were 2-8 KB
    // apart: one core, dW's shapes 4-10% slower).
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
      for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        const int64_t rn = std::min<int64_t>(16, rows - r0);
        const __mmask16 m = rn == 16 ? __mmask16(0xFFFF) : __mmask16((1u << rn) - 1);
        __m512i p[16];
        for (int q = 0; q < 16; ++q) {
          const int64_t k = k0 + 2 * q;
          const __m512i lo = k < K ? load_row_avx512bf16(a, k, i0 + r0, m) : _mm512_setzero_si512();
          const __m512i hi = k + 1 < K ? load_row_avx512bf16(a, k + 1, i0 + r0, m) : _mm512_setzero_si512();
          p[q] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
        }
        transpose16x16_avx512bf16(p);
        for (int64_t rr = 0; rr < rn; ++rr) _mm512_storeu_si512(dst + packed_a_offset(r0 + rr, k0, ldd, tiles), p[rr]);
      }
    }
  }
  for (int64_t r = rows; r < padded; ++r)
    for (int64_t k0 = 0; k0 < Kp; k0 += 32) _mm512_storeu_si512(dst + packed_a_offset(r, k0, ldd, tiles), _mm512_setzero_si512());
}

// Pair rows [p0, p1) of every panel of a plain op(B) (bf16.h's pack_b_pair_rows_bf16 calls this
// when the CPU has AVX-512 F/BW/VL): for each panel, rows k and k + 1's 32 columns rounded and
// joined into 32-bit (B[k][j], B[k + 1][j]) pairs, one 128-byte pair row.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_b_pair_rows_avx512bf16(const Bf16Operand& b, int64_t N,
                                                                                       int64_t K, int64_t p0, int64_t p1,
                                                                                       uint16_t* dst) {
  constexpr int64_t W = kBf16PanelCols;
  const int64_t panels = (N + W - 1) / W, panel_size = bf16_padded_k(K) * W;
  // 8 pair rows at a time, panel by panel: each panel gets 1 KB written contiguously. (Pair row by
  // pair row, the writes went to all panels in turn, Kp * 64 bytes apart: at K = 1024 every one of
  // them in the same L1 set. One core, bf16 1024^3: the packing ran at 10 GB/s.)
  for (int64_t g = p0; g < p1; g += 8) {
    const int64_t g1 = std::min(p1, g + 8);
    for (int64_t q = 0; q < panels; ++q)
      for (int64_t p = g; p < g1; ++p) {
        const int64_t k = 2 * p;
        uint16_t* d = dst + q * panel_size + p * 2 * W;
        for (int h = 0; h < 2; ++h) {  // columns 16h .. 16h + 15 of the panel
          const int64_t j = q * W + 16 * h, n = std::clamp<int64_t>(N - j, 0, 16);
          const __mmask16 m = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
          const __m512i lo = k < K ? load_row_avx512bf16(b, k, j, m) : _mm512_setzero_si512();
          const __m512i hi = k + 1 < K ? load_row_avx512bf16(b, k + 1, j, m) : _mm512_setzero_si512();
          _mm512_storeu_si512(d + 32 * h, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
      }
  }
}

// One panel of a transposed op(B) (bf16.h's pack_b_panel_bf16 calls this when the CPU has AVX-512
// F/BW/VL; a Linear weight's x Wᵀ): op(B)(k, j) = B[j][k], so column c's (k, k + 1) pairs are
// adjacent values of stored row j0 + c. 16 columns x 16 pairs at a time: each column's 32 values
// rounded and packed into one vector of 16 pairs (or, for bfloat16, loaded as they are), then a
// 16 x 16 transpose of 32-bit pairs gives, per pair row, the 16 columns' pairs: one 64-byte store.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_b_panel_avx512bf16(const Bf16Operand& b, int64_t j0,
                                                                                   int64_t cols, int64_t K, uint16_t* dst) {
  if (!b.trans) return pack_b_panel_bf16_portable(b, j0, cols, K, dst);
  constexpr int64_t W = kBf16PanelCols;
  const int64_t Kp = bf16_padded_k(K);
  for (int64_t k0 = 0; k0 < Kp; k0 += 32) {
    for (int64_t c0 = 0; c0 < W; c0 += 16) {
      __m512i r[16];
      for (int64_t c = 0; c < 16; ++c)
        r[c] = c0 + c < cols ? load_pairs_avx512bf16(b, j0 + c0 + c, k0, K) : _mm512_setzero_si512();
      transpose16x16_avx512bf16(r);
      uint16_t* d = dst + (k0 / 2) * 2 * W + 2 * c0;
      for (int64_t p = 0; p < 16; ++p) _mm512_storeu_si512(d + p * 2 * W, r[p]);
    }
  }
}

}  // namespace tg::kernels
