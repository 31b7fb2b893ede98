#pragma once
// Layer norm over rows of length D, in the llm.c style: the forward saves mean and rstd
// (1/sqrt(var + eps)) per row; the backward reads them back.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "reduce.h"

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
      s += hsum(vs);
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
// One pass over the rows: blocks of kRowBlock rows (a fixed size, so the summation order does not
// depend on the thread count) each write their dx rows and a partial dw/db; the partials are then
// added in block order.
template <class T>
void layer_norm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const T* mean, const T* rstd,
                         int64_t rows, int64_t D) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  constexpr int64_t kRowBlock = 32;
  const int64_t nblocks = (rows + kRowBlock - 1) / kRowBlock;
  const bool partials = dw || db;
  std::vector<T> pw(partials ? static_cast<size_t>(nblocks * D) : 0), pb(pw.size());
  parallel_for(0, nblocks, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(kRowBlock * D, 1)), [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      T* bw = partials ? pw.data() + blk * D : nullptr;
      T* bb = partials ? pb.data() + blk * D : nullptr;
      if (partials) {
        std::fill(bw, bw + D, T(0));
        std::fill(bb, bb + D, T(0));
      }
      for (int64_t r = blk * kRowBlock; r < std::min(rows, (blk + 1) * kRowBlock); ++r) {
        const T* xr = x + r * D;
        const T* gr = dy + r * D;
        const V vm(mean[r]), vrs(rstd[r]);
        // Row sums of dxhat and dxhat * xhat; dw/db partials on the way.
        V s1v(T(0)), s2v(T(0));
        T s1 = 0, s2 = 0;
        int64_t i = 0;
        for (; i + L <= D; i += L) {
          const V g = V::load_unaligned(gr + i);
          const V xh = (V::load_unaligned(xr + i) - vm) * vrs;
          const V dxh = w ? g * V::load_unaligned(w + i) : g;
          s1v += dxh;
          s2v = xsimd::fma(dxh, xh, s2v);
          if (partials) {
            xsimd::fma(g, xh, V::load_unaligned(bw + i)).store_unaligned(bw + i);
            (V::load_unaligned(bb + i) + g).store_unaligned(bb + i);
          }
        }
        for (; i < D; ++i) {
          const T xh = (xr[i] - mean[r]) * rstd[r];
          const T dxh = gr[i] * (w ? w[i] : T(1));
          s1 += dxh;
          s2 += dxh * xh;
          if (partials) {
            bw[i] += gr[i] * xh;
            bb[i] += gr[i];
          }
        }
        if (!dx) continue;
        s1 = (s1 + hsum(s1v)) / static_cast<T>(D);
        s2 = (s2 + hsum(s2v)) / static_cast<T>(D);
        T* dr = dx + r * D;
        const V vs1(s1), vs2(s2);
        i = 0;
        for (; i + L <= D; i += L) {
          const V g = V::load_unaligned(gr + i);
          const V xh = (V::load_unaligned(xr + i) - vm) * vrs;
          const V dxh = w ? g * V::load_unaligned(w + i) : g;
          (vrs * (dxh - vs1 - xh * vs2)).store_unaligned(dr + i);
        }
        for (; i < D; ++i) {
          const T xh = (xr[i] - mean[r]) * rstd[r];
          const T dxh = gr[i] * (w ? w[i] : T(1));
          dr[i] = rstd[r] * (dxh - s1 - xh * s2);
        }
      }
    }
  });
  if (!partials) return;
  // Add the partials in block order, vectorized along D, columns split over threads.
  parallel_for(0, D, std::max<int64_t>(L, kParallelGrain / std::max<int64_t>(nblocks, 1)), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      if (dw) dw[c] = 0;
      if (db) db[c] = 0;
    }
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      if (dw) binary_run(dw + c0, 1, pw.data() + blk * D + c0, 1, dw + c0, c1 - c0, Add{});
      if (db) binary_run(db + c0, 1, pb.data() + blk * D + c0, 1, db + c0, c1 - c0, Add{});
    }
  });
}

// RMS norm: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) saved per row; w may be null.
template <class T>
void rms_norm_forward(T* y, T* rstd, const T* x, const T* w, int64_t rows, int64_t D, T eps) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      T* yr = y + r * D;
      V vs(T(0));
      T s = 0;
      int64_t i = 0;
      for (; i + L <= D; i += L) {
        const V v = V::load_unaligned(xr + i);
        vs = xsimd::fma(v, v, vs);
      }
      for (; i < D; ++i) s += xr[i] * xr[i];
      s += hsum(vs);
      const T rs = T(1) / std::sqrt(s / static_cast<T>(D) + eps);
      rstd[r] = rs;
      i = 0;
      for (; i + L <= D; i += L) {
        V v = V::load_unaligned(xr + i) * V(rs);
        if (w) v = v * V::load_unaligned(w + i);
        v.store_unaligned(yr + i);
      }
      for (; i < D; ++i) yr[i] = w ? xr[i] * rs * w[i] : xr[i] * rs;
    }
  });
}

// dx = rstd (dxhat - xhat mean(dxhat xhat)), xhat = x rstd, dxhat = dy w; dw = sum over rows of
// dy xhat (overwritten). dx or dw may be null. Partial dw per block of a fixed number of rows,
// added in block order: the sum does not depend on the thread count.
template <class T>
void rms_norm_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd, int64_t rows, int64_t D) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  constexpr int64_t kRowBlock = 32;
  const int64_t nblocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<T> pw(dw ? static_cast<size_t>(nblocks * D) : 0);
  parallel_for(0, nblocks, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(kRowBlock * D, 1)), [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      T* bw = dw ? pw.data() + blk * D : nullptr;
      if (bw) std::fill(bw, bw + D, T(0));
      for (int64_t r = blk * kRowBlock; r < std::min(rows, (blk + 1) * kRowBlock); ++r) {
        const T* xr = x + r * D;
        const T* gr = dy + r * D;
        const V vrs(rstd[r]);
        V s2v(T(0));
        T s2 = 0;
        int64_t i = 0;
        for (; i + L <= D; i += L) {
          const V g = V::load_unaligned(gr + i);
          const V xh = V::load_unaligned(xr + i) * vrs;
          const V dxh = w ? g * V::load_unaligned(w + i) : g;
          s2v = xsimd::fma(dxh, xh, s2v);
          if (bw) xsimd::fma(g, xh, V::load_unaligned(bw + i)).store_unaligned(bw + i);
        }
        for (; i < D; ++i) {
          const T xh = xr[i] * rstd[r];
          s2 += gr[i] * (w ? w[i] : T(1)) * xh;
          if (bw) bw[i] += gr[i] * xh;
        }
        if (!dx) continue;
        s2 = (s2 + hsum(s2v)) / static_cast<T>(D);
        T* dr = dx + r * D;
        const V vs2(s2);
        i = 0;
        for (; i + L <= D; i += L) {
          const V g = V::load_unaligned(gr + i);
          const V xh = V::load_unaligned(xr + i) * vrs;
          const V dxh = w ? g * V::load_unaligned(w + i) : g;
          (vrs * (dxh - xh * vs2)).store_unaligned(dr + i);
        }
        for (; i < D; ++i) {
          const T xh = xr[i] * rstd[r];
          dr[i] = rstd[r] * (gr[i] * (w ? w[i] : T(1)) - xh * s2);
        }
      }
    }
  });
  if (!dw) return;
  parallel_for(0, D, std::max<int64_t>(L, kParallelGrain / std::max<int64_t>(nblocks, 1)), [&](int64_t c0, int64_t c1) {
    std::fill(dw + c0, dw + c1, T(0));
    for (int64_t blk = 0; blk < nblocks; ++blk) binary_run(dw + c0, 1, pw.data() + blk * D + c0, 1, dw + c0, c1 - c0, Add{});
  });
}

// y = act(x + b) over rows of length D.
template <class T, class Act>
void bias_act_forward(const T* x, const T* b, T* y, int64_t rows, int64_t D, Act act) {
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      binary_run(x + r * D, 1, b, 1, y + r * D, D, [act](auto u, auto v) { return act(u + v); });
  });
}

// dx = g act'(x + b); db = column sums of dx, added in blocks of a fixed number of rows. With dx
// null (the identity, whose dx is g): db only, the same sums.
template <class T, class ActGrad>
void bias_act_backward(const T* g, const T* x, const T* b, T* dx, T* db, int64_t rows, int64_t D, ActGrad grad) {
  constexpr int64_t kRowBlock = 32;
  const int64_t nblocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<T> partial(db ? static_cast<size_t>(nblocks * D) : 0);
  parallel_for(0, nblocks, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(kRowBlock * D, 1)), [&](int64_t b0, int64_t b1) {
    std::vector<T> pre(static_cast<size_t>(D));
    for (int64_t blk = b0; blk < b1; ++blk) {
      T* pb = db ? partial.data() + blk * D : nullptr;
      if (pb) std::fill(pb, pb + D, T(0));
      for (int64_t r = blk * kRowBlock; r < std::min(rows, (blk + 1) * kRowBlock); ++r) {
        if (!dx) {
          if (pb) binary_run(pb, 1, g + r * D, 1, pb, D, Add{});
          continue;
        }
        binary_run(x + r * D, 1, b, 1, pre.data(), D, Add{});
        binary_run(g + r * D, 1, pre.data(), 1, dx + r * D, D, grad);
        if (pb) binary_run(pb, 1, dx + r * D, 1, pb, D, Add{});
      }
    }
  });
  if (!db) return;
  std::fill(db, db + D, T(0));
  for (int64_t blk = 0; blk < nblocks; ++blk) binary_run(db, 1, partial.data() + blk * D, 1, db, D, Add{});
}

}  // namespace tg::kernels
