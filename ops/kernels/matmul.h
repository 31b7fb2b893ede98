#pragma once
// C[M, N] = A[M, K] B[K, N] for contiguous row-major operands. Register-blocked: 4 rows of A
// times two vectors of B's columns are accumulated in 8 registers over all of K; rows are split
// over threads. (The packed GotoBLAS-style GEMM is its own piece of work; this one is correct on
// every size and reasonably fast.)
#include <algorithm>
#include <cstdint>

#include "ops/kernels/elementwise.h"

namespace tg::kernels {

template <class T, int MR>
void gemm_rows(const T* A, const T* B, T* C, int64_t rows, int64_t N, int64_t K) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  int64_t j = 0;
  for (; j + 2 * L <= N; j += 2 * L) {
    V acc0[MR], acc1[MR];
    for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = V(T(0));
    for (int64_t kk = 0; kk < K; ++kk) {
      const V b0 = V::load_unaligned(B + kk * N + j);
      const V b1 = V::load_unaligned(B + kk * N + j + L);
      for (int r = 0; r < MR; ++r) {
        const V a(A[r * K + kk]);
        acc0[r] = xsimd::fma(a, b0, acc0[r]);
        acc1[r] = xsimd::fma(a, b1, acc1[r]);
      }
    }
    for (int r = 0; r < MR && r < rows; ++r) {
      acc0[r].store_unaligned(C + r * N + j);
      acc1[r].store_unaligned(C + r * N + j + L);
    }
  }
  for (; j + L <= N; j += L) {
    V acc[MR];
    for (int r = 0; r < MR; ++r) acc[r] = V(T(0));
    for (int64_t kk = 0; kk < K; ++kk) {
      const V b0 = V::load_unaligned(B + kk * N + j);
      for (int r = 0; r < MR; ++r) acc[r] = xsimd::fma(V(A[r * K + kk]), b0, acc[r]);
    }
    for (int r = 0; r < MR && r < rows; ++r) acc[r].store_unaligned(C + r * N + j);
  }
  for (; j < N; ++j) {
    for (int r = 0; r < MR && r < rows; ++r) {
      T s = 0;
      for (int64_t kk = 0; kk < K; ++kk) s += A[r * K + kk] * B[kk * N + j];
      C[r * N + j] = s;
    }
  }
}

template <class T>
void gemm(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K) {
  if (K == 0) {
    std::fill(C, C + M * N, T(0));
    return;
  }
  constexpr int64_t MR = 4;
  const int64_t blocks = (M + MR - 1) / MR;
  const int64_t work_per_block = std::max<int64_t>(1, MR * N * K);
  parallel_for(0, blocks, std::max<int64_t>(1, (1 << 18) / work_per_block), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t i = b * MR, rows = std::min(MR, M - i);
      if (rows == MR) gemm_rows<T, 4>(A + i * K, B, C + i * N, rows, N, K);
      else if (rows == 3) gemm_rows<T, 3>(A + i * K, B, C + i * N, rows, N, K);
      else if (rows == 2) gemm_rows<T, 2>(A + i * K, B, C + i * N, rows, N, K);
      else gemm_rows<T, 1>(A + i * K, B, C + i * N, rows, N, K);
    }
  });
}

}  // namespace tg::kernels
