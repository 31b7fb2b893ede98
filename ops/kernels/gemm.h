#pragma once
// GEMM in the GotoBLAS/BLIS manner: C[M, N] (+)= op(A)[M, K] op(B)[K, N], where op is the
// identity or the transpose, read through strides (no transposed copy is ever made).
//
//   for each NC-wide block of B's columns
//     for each KC-deep slice of K            pack B[kc, nc] into NR-wide panels (shared)
//       for each MC-tall block of A's rows   pack A[mc, kc] into MR-tall panels (per thread)
//         for each NR panel, each MR panel   micro-kernel: an MR x NR tile of C in registers
//
// The micro-kernel holds MR x NV accumulators (NV vectors of xsimd::batch<T> across, so
// NR = NV * lanes: 6 x 32 floats with AVX-512, 6 x 16 with AVX2) and does one FMA per
// accumulator per k, A values broadcast from the packed panel. Edge tiles are computed in full
// on zero-padded panels and only their valid part is written back.
//
// Every element of C is accumulated by one thread, in the same k order whatever the thread
// count, so results do not depend on it.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "elementwise.h"

#ifndef TG_GEMM_MR
#define TG_GEMM_MR 8
#endif
#ifndef TG_GEMM_KC
#define TG_GEMM_KC 384
#endif
#ifndef TG_GEMM_NC
#define TG_GEMM_NC 512
#endif
#ifndef TG_GEMM_MC
#define TG_GEMM_MC 128
#endif

namespace tg::kernels {

template <class T>
struct GemmShape {
  static constexpr int64_t L = static_cast<int64_t>(xsimd::batch<T>::size);
#if defined(__AVX512F__)
  static constexpr int MR = TG_GEMM_MR;  // 8 x 2 accumulators + 2 B vectors + 1 A: 19 of 32 registers
#else
  static constexpr int MR = 6;  // 6 x 2 + 2 + 1 = 15 of 16 registers (AVX2, SSE)
#endif
  static constexpr int NV = 2;
  static constexpr int64_t NR = NV * L;
  static constexpr int64_t KC = TG_GEMM_KC;
  static constexpr int64_t MC = TG_GEMM_MC;    // A block: MC x KC = 192 KB of floats
  static constexpr int64_t NC = TG_GEMM_NC;  // B block: KC x NC = 768 KB of floats, in L2
};

// A thread's scratch buffer, 64-byte aligned, grown on demand and kept between calls.
template <class T>
T* gemm_scratch(int slot, size_t elems) {
  struct Buf {
    T* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf bufs[2];
  Buf& b = bufs[slot];
  if (b.n < elems) {
    std::free(b.p);
    size_t bytes = (elems * sizeof(T) + 63) / 64 * 64;
    b.p = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!b.p) throw std::bad_alloc();
    b.n = elems;
  }
  return b.p;
}

// Packs rows [0, mc) x cols [0, kc) of A (element (i, k) at A[i * rs + k * cs]) into MR-row
// panels: panel p holds, for each k, the MR values of rows p*MR .. p*MR+MR-1 (zero past mc).
template <class T>
void pack_a(const T* A, int64_t rs, int64_t cs, int64_t mc, int64_t kc, T* dst) {
  constexpr int MR = GemmShape<T>::MR;
  for (int64_t p = 0; p < mc; p += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - p);
    if (rows == MR && cs == 1) {
      for (int64_t k = 0; k < kc; ++k)
        for (int r = 0; r < MR; ++r) dst[k * MR + r] = A[(p + r) * rs + k];
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        int r = 0;
        for (; r < rows; ++r) dst[k * MR + r] = A[(p + r) * rs + k * cs];
        for (; r < MR; ++r) dst[k * MR + r] = T(0);
      }
    }
    dst += MR * kc;
  }
}

// Packs rows [0, kc) x cols [j0, j1) of B (element (k, j) at B[k * rs + j * cs]) into NR-column
// panels: for each k, NR contiguous values (zero past the last column).
template <class T>
void pack_b_panel(const T* B, int64_t rs, int64_t cs, int64_t kc, int64_t cols, T* dst) {
  constexpr int64_t NR = GemmShape<T>::NR;
  if (cols == NR && cs == 1) {
    for (int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * NR, B + k * rs, NR * sizeof(T));
    return;
  }
  for (int64_t k = 0; k < kc; ++k) {
    int64_t c = 0;
    for (; c < cols; ++c) dst[k * NR + c] = B[k * rs + c * cs];
    for (; c < NR; ++c) dst[k * NR + c] = T(0);
  }
}

// C tile (rows x cols valid) (+)= A panel (MR x kc; element (r, k) at a[r * ars + k * aks]: a
// packed panel has ars = 1, aks = MR; a row-major A read in place has ars = lda, aks = 1)
// times a B panel (kc x NR, row k at b + k * bks: NR when packed, ldb when read in place).
// kFull: the tile is whole (rows == MR, cols == NR), written straight from the registers.
template <class T, bool kFull, int MR = GemmShape<T>::MR, int NV = GemmShape<T>::NV>
inline void micro_tile(int64_t kc, const T* a, int64_t ars, int64_t aks, const T* b, int64_t bks, T* C,
                       int64_t ldc, bool accumulate, int64_t rows, int64_t cols) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = GemmShape<T>::L;
  constexpr int64_t NR = NV * L;
  // The C tile is read and written once, after the k loop: fetch its lines now.
  for (int64_t r = 0; r < rows; ++r) {
    __builtin_prefetch(C + r * ldc, 1);
    __builtin_prefetch(C + r * ldc + NR - 1, 1);
  }
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V(T(0));
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = V::load_unaligned(b + k * bks + v * L);
    const T* ak = a + k * aks;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const V av(ak[r * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(av, bv[v], acc[r][v]);
    }
  }
  if constexpr (kFull) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        T* c = C + r * ldc + v * L;
        V out = accumulate ? acc[r][v] + V::load_unaligned(c) : acc[r][v];
        out.store_unaligned(c);
      }
  } else {
    alignas(64) T tile[MR * NR];
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) acc[r][v].store_aligned(tile + r * NR + v * L);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) C[r * ldc + c] = accumulate ? C[r * ldc + c] + tile[r * NR + c] : tile[r * NR + c];
  }
}

template <class T>
inline void micro_kernel(int64_t kc, const T* a, int64_t ars, int64_t aks, const T* b, int64_t bks, T* C, int64_t ldc,
                         bool accumulate, int64_t rows, int64_t cols) {
  if (rows == GemmShape<T>::MR && cols == GemmShape<T>::NR)
    micro_tile<T, true>(kc, a, ars, aks, b, bks, C, ldc, accumulate, rows, cols);
  else
    micro_tile<T, false>(kc, a, ars, aks, b, bks, C, ldc, accumulate, rows, cols);
}

// C[M, N] (row stride ldc) = op(A) op(B), or += when accumulate. op(A)(i, k) is
// A[i * lda + k] (or A[k * lda + i] when trans_a); op(B)(k, j) is B[k * ldb + j] (or
// B[j * ldb + k] when trans_b). Threads split the rows of C (or, for short C, its columns).
// Matrix-vector products (M <= 8 rows of A, plain): incremental decoding multiplies one token's
// row (or a beam's few) by every weight matrix, where packing the weights (the blocked path)
// would cost as much as the product. With trans_b (x Wᵀ, B holding W [N, K] row-major) each
// output is a dot product of contiguous rows: four rows of W at a time meet every row of A while
// they are in L1, so W is read from memory once. Otherwise each row of C is a sum of B's rows.
// Each element of C is computed by one thread in a fixed order.
template <class T>
void gemv_rows(bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
               int64_t ldc, bool accumulate) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  const int64_t grain = std::max<int64_t>(16, (int64_t{1} << 16) / std::max<int64_t>(K * M, 1));
  parallel_for(0, N, grain, [&](int64_t j0, int64_t j1) {
    if (trans_b) {
      auto store = [&](int64_t i, int64_t j, T r) {
        T& c = C[i * ldc + j];
        c = accumulate ? c + r : r;
      };
      int64_t j = j0;
      if (M == 1 && K >= 4 * L) {
        // One row of A (a decoding step): W's rows in memory order, one sequential stream that the
        // hardware prefetcher follows (four rows side by side are four short streams, which it
        // keeps restarting), each dot product over four accumulators.
        for (; j < j1; ++j) {
          const T* b = B + j * ldb;
          V s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
          int64_t k = 0;
          for (; k + 4 * L <= K; k += 4 * L) {
            s0 = xsimd::fma(V::load_unaligned(A + k), V::load_unaligned(b + k), s0);
            s1 = xsimd::fma(V::load_unaligned(A + k + L), V::load_unaligned(b + k + L), s1);
            s2 = xsimd::fma(V::load_unaligned(A + k + 2 * L), V::load_unaligned(b + k + 2 * L), s2);
            s3 = xsimd::fma(V::load_unaligned(A + k + 3 * L), V::load_unaligned(b + k + 3 * L), s3);
          }
          for (; k + L <= K; k += L) s0 = xsimd::fma(V::load_unaligned(A + k), V::load_unaligned(b + k), s0);
          T r = hsum((s0 + s1) + (s2 + s3));
          for (; k < K; ++k) r += A[k] * b[k];
          store(0, j, r);
        }
        return;
      }
      for (; j + 4 <= j1; j += 4) {
        const T *b0 = B + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
        for (int64_t i = 0; i < M; ++i) {
          const T* a = A + i * lda;
          V s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
          int64_t k = 0;
          for (; k + L <= K; k += L) {
            const V x = V::load_unaligned(a + k);
            s0 = xsimd::fma(x, V::load_unaligned(b0 + k), s0);
            s1 = xsimd::fma(x, V::load_unaligned(b1 + k), s1);
            s2 = xsimd::fma(x, V::load_unaligned(b2 + k), s2);
            s3 = xsimd::fma(x, V::load_unaligned(b3 + k), s3);
          }
          T r[4] = {hsum(s0), hsum(s1), hsum(s2), hsum(s3)};
          for (; k < K; ++k) {
            r[0] += a[k] * b0[k];
            r[1] += a[k] * b1[k];
            r[2] += a[k] * b2[k];
            r[3] += a[k] * b3[k];
          }
          for (int q = 0; q < 4; ++q) store(i, j + q, r[q]);
        }
      }
      for (; j < j1; ++j) {
        const T* b = B + j * ldb;
        for (int64_t i = 0; i < M; ++i) {
          const T* a = A + i * lda;
          V s(T(0));
          int64_t k = 0;
          for (; k + L <= K; k += L) s = xsimd::fma(V::load_unaligned(a + k), V::load_unaligned(b + k), s);
          T r = hsum(s);
          for (; k < K; ++k) r += a[k] * b[k];
          store(i, j, r);
        }
      }
      return;
    }
    for (int64_t i = 0; i < M; ++i) {
      const T* a = A + i * lda;
      T* c = C + i * ldc;
      if (!accumulate) std::fill(c + j0, c + j1, T(0));
      for (int64_t k = 0; k < K; ++k) {
        const V x(a[k]);
        const T* b = B + k * ldb;
        int64_t j = j0;
        for (; j + L <= j1; j += L) xsimd::fma(x, V::load_unaligned(b + j), V::load_unaligned(c + j)).store_unaligned(c + j);
        for (; j < j1; ++j) c[j] += a[k] * b[j];
      }
    }
  });
}

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate = false) {
  using S = GemmShape<T>;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return;
  }
  if (M <= 8 && !trans_a && N * K >= 4096) {
    gemv_rows(trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
#if defined(__AVX512F__)
  // Small products of whole 4 x (4 vectors) tiles with plain operands (attention's per-head
  // products): a 4 x 4-vector tile needs 4 loads and 4 broadcasts per 16 FMAs (the general 8 x 2
  // tile needs 2 and 8), and neither operand is packed.
  {
    constexpr int64_t NR4 = 4 * S::L;
    if (!trans_a && !trans_b && K <= S::KC && M % 4 == 0 && N % NR4 == 0 &&
        (M * K + K * N) * static_cast<int64_t>(sizeof(T)) <= (64 << 10)) {
      for (int64_t i = 0; i < M; i += 4)
        for (int64_t j = 0; j < N; j += NR4)
          micro_tile<T, true, 4, 4>(K, A + i * lda, lda, 1, B + j, ldb, C + i * ldc + j, ldc, accumulate, 4, NR4);
      return;
    }
  }
#endif
  const int64_t a_rs = trans_a ? 1 : lda, a_cs = trans_a ? lda : 1;
  const int64_t b_rs = trans_b ? 1 : ldb, b_cs = trans_b ? ldb : 1;
  const int threads = num_threads();
  // Row blocks: at most MC tall, and enough of them to keep every thread busy.
  const int64_t mc_even = (M + threads - 1) / threads;
  const int64_t MC = std::max<int64_t>(S::MR, std::min<int64_t>(S::MC, (mc_even + S::MR - 1) / S::MR * S::MR));
  const int64_t m_blocks = (M + MC - 1) / MC;
  const bool small = 2.0 * M * N * K < 2.0e5;  // not worth waking threads

  for (int64_t jc = 0; jc < N; jc += S::NC) {
    const int64_t nc = std::min(S::NC, N - jc);
    const int64_t n_panels = (nc + S::NR - 1) / S::NR;
    for (int64_t pc = 0; pc < K; pc += S::KC) {
      const int64_t kc = std::min(S::KC, K - pc);
      const bool acc = accumulate || pc > 0;
      // Pack this B block once; every thread reads it. A small non-transposed B (attention's
      // batched products) whose panels are all whole is read in place instead: its rows are
      // contiguous, and the whole block stays in cache.
      const bool b_in_place = !trans_b && nc % S::NR == 0 && kc * nc * static_cast<int64_t>(sizeof(T)) <= (64 << 10);
      T* bp = b_in_place ? nullptr : gemm_scratch<T>(0, static_cast<size_t>(n_panels * S::NR * kc));
      auto pack_b = [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t j = jc + q * S::NR;
          pack_b_panel(B + pc * b_rs + j * b_cs, b_rs, b_cs, kc, std::min(S::NR, N - j), bp + q * S::NR * kc);
        }
      };
      if (b_in_place) {
      } else if (small) {
        pack_b(0, n_panels);
      } else {
        parallel_for(0, n_panels, 1, pack_b);
      }
      auto b_panel = [&](int64_t q) { return b_in_place ? B + pc * b_rs + jc + q * S::NR : bp + q * S::NR * kc; };
      const int64_t bks = b_in_place ? b_rs : S::NR;

      // A non-transposed A is read in place (its rows are contiguous in k), except when its rows
      // are a multiple of 4 KB apart and C is wide: then the 8 rows of a tile would fall into the
      // same L1 sets, and packing (paid once, reused across many B panels) is cheaper. A
      // transposed A is always packed. The last, partial row panel is always packed
      // (zero-padded) so that the micro-kernel never reads past A.
      const bool aliasing = (a_rs * static_cast<int64_t>(sizeof(T))) % 4096 == 0;
      const bool pack_all = trans_a || (n_panels > 4 && aliasing);
      auto prepare_a = [&](int64_t ic, int64_t mc, T* ap) {
        const int64_t full = pack_all ? 0 : mc / S::MR * S::MR;
        if (full < mc) pack_a(A + (ic + full) * a_rs + pc * a_cs, a_rs, a_cs, mc - full, kc, ap + full * kc);
      };
      auto block = [&](int64_t ic, int64_t mc, const T* ap, int64_t q0, int64_t q1) {
        const int64_t full = pack_all ? 0 : mc / S::MR * S::MR;
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t j = jc + q * S::NR;
          const int64_t cols = std::min(S::NR, N - j);
          for (int64_t p = 0; p < mc; p += S::MR) {
            const T* bq = b_panel(q);
            T* c = C + (ic + p) * ldc + j;
            const int64_t rows = std::min<int64_t>(S::MR, mc - p);
            if (p < full) micro_kernel(kc, A + (ic + p) * a_rs + pc * a_cs, a_rs, a_cs, bq, bks, c, ldc, acc, rows, cols);
            else micro_kernel(kc, ap + p * kc, int64_t{1}, int64_t{S::MR}, bq, bks, c, ldc, acc, rows, cols);
          }
        }
      };
      if (small || m_blocks >= threads || threads == 1) {
        // Split the rows of C: each thread packs its own A blocks.
        auto rows = [&](int64_t b0, int64_t b1) {
          T* ap = gemm_scratch<T>(1, static_cast<size_t>((MC + S::MR) * kc));
          for (int64_t blk = b0; blk < b1; ++blk) {
            const int64_t ic = blk * MC, mc = std::min(MC, M - ic);
            prepare_a(ic, mc, ap);
            block(ic, mc, ap, 0, n_panels);
          }
        };
        if (small) rows(0, m_blocks);
        else parallel_for(0, m_blocks, 1, rows);
      } else {
        // Few rows: pack A once, split the columns of C.
        for (int64_t ic = 0; ic < M; ic += MC) {
          const int64_t mc = std::min(MC, M - ic);
          T* ap = gemm_scratch<T>(1, static_cast<size_t>((MC + S::MR) * kc));
          prepare_a(ic, mc, ap);
          parallel_for(0, n_panels, 1, [&](int64_t q0, int64_t q1) { block(ic, mc, ap, q0, q1); });
        }
      }
    }
  }
}

}  // namespace tg::kernels
