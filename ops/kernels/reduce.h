#pragma once
// Reductions over the middle axis of an [outer, R, inner] view of a contiguous array. Each output
// is summed by one thread in a fixed order, and full reductions use fixed-size blocks combined in
// order, so results never depend on the thread count.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "elementwise.h"

namespace tg::kernels {

// Folds a contiguous run with a binary functor (Add, Max, Min), four vector accumulators wide.
template <class T, class Op>
T fold_run(const T* x, int64_t n, Op op, T init) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  int64_t i = 0;
  T acc = init;
  if (n >= 4 * L) {
    B a0(init), a1(init), a2(init), a3(init);
    for (; i + 4 * L <= n; i += 4 * L) {
      a0 = op(a0, B::load_unaligned(x + i));
      a1 = op(a1, B::load_unaligned(x + i + L));
      a2 = op(a2, B::load_unaligned(x + i + 2 * L));
      a3 = op(a3, B::load_unaligned(x + i + 3 * L));
    }
    for (; i + L <= n; i += L) a0 = op(a0, B::load_unaligned(x + i));
    B all = op(op(a0, a1), op(a2, a3));
    alignas(64) T lanes[L];
    all.store_aligned(lanes);
    for (int64_t j = 0; j < L; ++j) acc = op(acc, lanes[j]);
  }
  for (; i < n; ++i) acc = op(acc, x[i]);
  return acc;
}

template <class T, class Op>
void reduce(const T* x, T* out, int64_t outer, int64_t R, int64_t inner, Op op, T init) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  if (inner == 1) {
    if (outer == 1 && R >= 2 * kParallelGrain) {
      // One long run: fixed blocks, each folded by one thread, combined in order.
      const int64_t block = kParallelGrain;
      const int64_t nb = (R + block - 1) / block;
      std::vector<T> partial(static_cast<size_t>(nb));
      parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          partial[b] = fold_run(x + b * block, std::min(block, R - b * block), op, init);
      });
      T acc = init;
      for (T p : partial) acc = op(acc, p);
      out[0] = acc;
      return;
    }
    parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) out[o] = fold_run(x + o * R, R, op, init);
    });
    return;
  }
  // inner > 1: combine whole rows, vectorized along inner.
  auto rows = [&](int64_t o, int64_t j0, int64_t j1) {
    T* dst = out + o * inner;
    const T* src = x + o * R * inner;
    for (int64_t j = j0; j < j1; ++j) dst[j] = init;
    for (int64_t r = 0; r < R; ++r) {
      const T* row = src + r * inner;
      int64_t j = j0;
      for (; j + L <= j1; j += L)
        op(B::load_unaligned(dst + j), B::load_unaligned(row + j)).store_unaligned(dst + j);
      for (; j < j1; ++j) dst[j] = op(dst[j], row[j]);
    }
  };
  if (outer >= 2 || inner < 2 * kParallelGrain / std::max<int64_t>(R, 1)) {
    parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R * inner, 1)),
                 [&](int64_t o0, int64_t o1) {
                   for (int64_t o = o0; o < o1; ++o) rows(o, 0, inner);
                 });
  } else {
    parallel_for(0, inner, std::max<int64_t>(L, kParallelGrain / std::max<int64_t>(R, 1)),
                 [&](int64_t j0, int64_t j1) { rows(0, j0, j1); });
  }
}

// Value and index (first occurrence) of the extreme along R; NaN counts as the extreme.
template <class T, bool kMax>
void arg_reduce(const T* x, T* val, int64_t* idx, int64_t outer, int64_t R, int64_t inner) {
  parallel_for(0, outer * inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1)), [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      int64_t o = t / inner, j = t % inner;
      const T* p = x + o * R * inner + j;
      T best = p[0];
      int64_t bi = 0;
      for (int64_t r = 1; r < R && best == best; ++r) {
        T v = p[r * inner];
        if (v != v || (kMax ? v > best : v < best)) { best = v; bi = r; }
      }
      val[t] = best;
      idx[t] = bi;
    }
  });
}

}  // namespace tg::kernels
