#pragma once
// Rotary position embedding (RoPE) on rows of a contiguous buffer.
#include <algorithm>

#include "reduce.h"

namespace tg::kernels {

// Rotary position embedding, half-split layout: rows of length d = 2h at positions t; row r of
// x [n, T, d] is rotated by the angles of row (r mod T) of cos/sin [T, h]:
//   y[i] = x[i] c - x[i+h] s,  y[i+h] = x[i+h] c + x[i] s   (c, s = cos[t, i], sin[t, i]).
// sign = -1 rotates back (the backward).
template <class T>
void rope_rows(T* y, const T* x, const T* cos, const T* sin, int64_t rows, int64_t T_, int64_t h, T sign) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(2 * h, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* x1 = x + r * 2 * h;
      const T* x2 = x1 + h;
      T* y1 = y + r * 2 * h;
      T* y2 = y1 + h;
      const T* c = cos + (r % T_) * h;
      const T* s = sin + (r % T_) * h;
      int64_t i = 0;
      for (; i + L <= h; i += L) {
        const V a = V::load_unaligned(x1 + i), b = V::load_unaligned(x2 + i);
        const V vc = V::load_unaligned(c + i), vs = V::load_unaligned(s + i) * V(sign);
        xsimd::fnma(b, vs, a * vc).store_unaligned(y1 + i);
        xsimd::fma(a, vs, b * vc).store_unaligned(y2 + i);
      }
      for (; i < h; ++i) {
        const T a = x1[i], b = x2[i], si = s[i] * sign;
        y1[i] = a * c[i] - b * si;
        y2[i] = b * c[i] + a * si;
      }
    }
  });
}

}  // namespace tg::kernels
