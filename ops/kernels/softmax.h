#pragma once
// Softmax and log-softmax over the middle axis of an [outer, D, inner] array: max, sum of
// exponentials, normalise. inner == 1 (the last axis, the common case) is vectorized.
#include <cmath>
#include <limits>

#include "reduce.h"

namespace tg::kernels {

// Returns sum_i exp(x[i] - m), writing each exp(x[i] - m) to y unless y is null: the inner pass
// of softmax, cross-entropy and flash attention.
template <class T>
T exp_shift_sum(const T* x, T m, T* y, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  const B vm(m);
  B acc(T(0));
  T s = 0;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const B e = xsimd::exp(B::load_unaligned(x + i) - vm);
    if (y) e.store_unaligned(y + i);
    acc += e;
  }
  for (; i < n; ++i) {
    const T e = std::exp(x[i] - m);
    if (y) y[i] = e;
    s += e;
  }
  return s + hsum(acc);
}

template <class T, bool kLog>
void softmax_rows(const T* x, T* y, int64_t outer, int64_t D, int64_t inner) {
  const T ninf = -std::numeric_limits<T>::infinity();
  if (inner == 1) {
    parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const T* xr = x + o * D;
        T* yr = y + o * D;
        const T m = fold_run(xr, D, Max{}, ninf);
        const T s = exp_shift_sum(xr, m, kLog ? nullptr : yr, D);
        if constexpr (kLog) {
          const T shift = m + std::log(s);
          unary_loop(xr, yr, D, Affine<T>{T(1), -shift});
        } else {
          const T inv = T(1) / s;
          unary_loop(yr, yr, D, Affine<T>{inv, T(0)});
        }
      }
    });
    return;
  }
  parallel_for(0, outer * inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      const int64_t o = t / inner, j = t % inner;
      const T* xr = x + o * D * inner + j;
      T* yr = y + o * D * inner + j;
      T m = ninf;
      for (int64_t i = 0; i < D; ++i) m = Max{}(m, xr[i * inner]);
      T s = 0;
      for (int64_t i = 0; i < D; ++i) s += std::exp(xr[i * inner] - m);
      for (int64_t i = 0; i < D; ++i) {
        if constexpr (kLog) yr[i * inner] = xr[i * inner] - m - std::log(s);
        else yr[i * inner] = std::exp(xr[i * inner] - m) / s;
      }
    }
  });
}

// Backward from the saved output y: softmax dx = y (g - sum(g y)); log-softmax
// dx = g - exp(y) sum(g). One pass to reduce, one to write, per row.
template <class T, bool kLog>
void softmax_backward_rows(const T* y, const T* g, T* dx, int64_t outer, int64_t D, int64_t inner) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  if (inner == 1) {
    parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const T* yr = y + o * D;
        const T* gr = g + o * D;
        T* dr = dx + o * D;
        B acc(T(0));
        T s = 0;
        int64_t i = 0;
        for (; i + L <= D; i += L) {
          const B gv = B::load_unaligned(gr + i);
          acc = kLog ? acc + gv : xsimd::fma(gv, B::load_unaligned(yr + i), acc);
        }
        for (; i < D; ++i) s += kLog ? gr[i] : gr[i] * yr[i];
        s += hsum(acc);
        const B vs(s);
        i = 0;
        for (; i + L <= D; i += L) {
          const B yv = B::load_unaligned(yr + i), gv = B::load_unaligned(gr + i);
          const B d = kLog ? gv - xsimd::exp(yv) * vs : yv * (gv - vs);
          d.store_unaligned(dr + i);
        }
        for (; i < D; ++i) dr[i] = kLog ? gr[i] - std::exp(yr[i]) * s : yr[i] * (gr[i] - s);
      }
    });
    return;
  }
  parallel_for(0, outer * inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      const int64_t base = (t / inner) * D * inner + t % inner;
      T s = 0;
      for (int64_t i = 0; i < D; ++i) s += kLog ? g[base + i * inner] : g[base + i * inner] * y[base + i * inner];
      for (int64_t i = 0; i < D; ++i) {
        const int64_t k = base + i * inner;
        dx[k] = kLog ? g[k] - std::exp(y[k]) * s : y[k] * (g[k] - s);
      }
    }
  });
}

// Cross-entropy per row of logits [rows, C], fused (llm.c style): one pass for the row's
// log-sum-exp, no log-probabilities written. loss = -(1 - eps) (x_t - lse) - eps/C sum_c (x_c - lse)
// (label smoothing eps); rows whose target is ignore_index get 0. lse is saved for backward.
template <class T>
void cross_entropy_forward(const T* x, const int64_t* target, T* loss, T* lse, int64_t rows, int64_t C, T eps,
                           int64_t ignore_index) {
  const T ninf = -std::numeric_limits<T>::infinity();
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * C;
      const T m = fold_run(xr, C, Max{}, ninf);
      const T l = m + std::log(exp_shift_sum<T>(xr, m, nullptr, C));
      lse[r] = l;
      if (target[r] == ignore_index) {
        loss[r] = 0;
        continue;
      }
      T nll = -(xr[target[r]] - l);
      if (eps != T(0)) {
        const T sum_x = fold_run(xr, C, Add{}, T(0));
        nll = (T(1) - eps) * nll - eps / static_cast<T>(C) * (sum_x - static_cast<T>(C) * l);
      }
      loss[r] = nll;
    }
  });
}

// dx[r, c] = grow[r] (softmax(x)[r, c] - (1 - eps) [c == t] - eps / C); zero for ignored rows.
template <class T>
void cross_entropy_backward(const T* x, const T* lse, const int64_t* target, const T* grow, T* dx, int64_t rows,
                            int64_t C, T eps, int64_t ignore_index) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* dr = dx + r * C;
      if (target[r] == ignore_index) {
        std::fill(dr, dr + C, T(0));
        continue;
      }
      const T* xr = x + r * C;
      const T g = grow[r], off = eps / static_cast<T>(C);
      const B vl(lse[r]), vg(g), voff(off);
      int64_t i = 0;
      for (; i + L <= C; i += L) (vg * (xsimd::exp(B::load_unaligned(xr + i) - vl) - voff)).store_unaligned(dr + i);
      for (; i < C; ++i) dr[i] = g * (std::exp(xr[i] - lse[r]) - off);
      dr[target[r]] -= g * (T(1) - eps);
    }
  });
}

}  // namespace tg::kernels
