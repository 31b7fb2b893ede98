#pragma once
// Layer norm over rows of length D, in the llm.c style: the forward saves mean and rstd
// (1/sqrt(var + eps)) per row; the backward reads them back.
#include <cmath>

#include "ops/kernels/reduce.h"

namespace tg::kernels {

// y = (x - mean) * rstd * w + b; w and b may be null (identity / zero).
template <class T>
void layer_norm_forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t rows, int64_t D, T eps) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      T* yr = y + r * D;
      const T m = fold_run(xr, D, Add{}, T(0)) / static_cast<T>(D);
      // Two-pass variance: sum of squared deviations.
      V vs(T(0));
      T s = 0;
      int64_t i = 0;
      for (; i + L <= D; i += L) {
        V d = V::load_unaligned(xr + i) - V(m);
        vs = xsimd::fma(d, d, vs);
      }
      for (; i < D; ++i) s += (xr[i] - m) * (xr[i] - m);
      s += xsimd::hadd(vs);
      const T rs = T(1) / std::sqrt(s / static_cast<T>(D) + eps);
      mean[r] = m;
      rstd[r] = rs;
      i = 0;
      for (; i + L <= D; i += L) {
        V v = (V::load_unaligned(xr + i) - V(m)) * V(rs);
        if (w) v = v * V::load_unaligned(w + i);
        if (b) v = v + V::load_unaligned(b + i);
        v.store_unaligned(yr + i);
      }
      for (; i < D; ++i) {
        T v = (xr[i] - m) * rs;
        if (w) v *= w[i];
        if (b) v += b[i];
        yr[i] = v;
      }
    }
  });
}

// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy w; dw = sum dy xhat;
// db = sum dy. dx, dw, db may be null when not needed; dw/db are overwritten.
template <class T>
void layer_norm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const T* mean, const T* rstd,
                         int64_t rows, int64_t D) {
  if (dx) {
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * D;
        const T* gr = dy + r * D;
        T* dr = dx + r * D;
        const T m = mean[r], rs = rstd[r];
        T s1 = 0, s2 = 0;
        for (int64_t i = 0; i < D; ++i) {
          T dxh = gr[i] * (w ? w[i] : T(1));
          s1 += dxh;
          s2 += dxh * (xr[i] - m) * rs;
        }
        s1 /= static_cast<T>(D);
        s2 /= static_cast<T>(D);
        for (int64_t i = 0; i < D; ++i) {
          T dxh = gr[i] * (w ? w[i] : T(1));
          dr[i] = rs * (dxh - s1 - (xr[i] - m) * rs * s2);
        }
      }
    });
  }
  if (dw || db) {
    // Column sums over rows, split over columns (each column summed in row order by one thread).
    parallel_for(0, D, std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(rows, 1)), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        if (dw) dw[c] = 0;
        if (db) db[c] = 0;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const T m = mean[r], rs = rstd[r];
        for (int64_t c = c0; c < c1; ++c) {
          const T g = dy[r * D + c];
          if (dw) dw[c] += g * (x[r * D + c] - m) * rs;
          if (db) db[c] += g;
        }
      }
    });
  }
}

}  // namespace tg::kernels
