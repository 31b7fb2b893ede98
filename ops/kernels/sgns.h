#pragma once
// Skip-gram / CBOW negative-sampling loss (Mikolov et al., 2013), fused: for each row b, with
// scores s_bk = u_b · v_bk (k = 0 the true context, k >= 1 the negatives),
//   loss_b = -log σ(s_b0) - Σ_{k>=1} log σ(-s_bk)
// and its gradient, d loss_b / d s_bk = σ(s_bk) - [k == 0].
#include <cmath>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "parallel.h"

namespace tg::kernels {

template <class T>
inline T dot(const T* a, const T* b, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = xsimd::fma(B::load_unaligned(a + i), B::load_unaligned(b + i), acc);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += alpha * x
template <class T>
inline void axpy(T alpha, const T* x, T* y, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const B va(alpha);
  int64_t i = 0;
  for (; i + W <= n; i += W) xsimd::fma(va, B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// -log σ(x), stable for large |x|.
template <class T>
inline T neg_log_sigmoid(T x) {
  return std::max(-x, T(0)) + std::log1p(std::exp(-std::abs(x)));
}

// u [B, D], v [B, C, D] -> scores [B, C], row losses [B].
template <class T>
void sgns_forward(const T* u, const T* v, T* scores, T* row_loss, int64_t B, int64_t C, int64_t D) {
  parallel_for(0, B, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C * D, 1)), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T l = 0;
      for (int64_t c = 0; c < C; ++c) {
        T s = dot(u + b * D, v + (b * C + c) * D, D);
        scores[b * C + c] = s;
        l += neg_log_sigmoid(c == 0 ? s : -s);
      }
      row_loss[b] = l;
    }
  });
}

// g_row [B] (the upstream gradient of each row's loss) -> du [B, D], dv [B, C, D] (either may be null).
template <class T>
void sgns_backward(const T* u, const T* v, const T* scores, const T* g_row, T* du, T* dv, int64_t B, int64_t C,
                   int64_t D) {
  parallel_for(0, B, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C * D, 1)), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      if (du)
        for (int64_t i = 0; i < D; ++i) du[b * D + i] = 0;
      for (int64_t c = 0; c < C; ++c) {
        const T s = scores[b * C + c];
        const T coef = g_row[b] * (T(1) / (T(1) + std::exp(-s)) - (c == 0 ? T(1) : T(0)));
        if (du) axpy(coef, v + (b * C + c) * D, du + b * D, D);
        if (dv) {
          T* out = dv + (b * C + c) * D;
          const T* ub = u + b * D;
          for (int64_t i = 0; i < D; ++i) out[i] = coef * ub[i];
        }
      }
    }
  });
}

}  // namespace tg::kernels
