#pragma once
// Skip-gram / CBOW negative-sampling loss (Mikolov et al., 2013), fused: for each row b, with
// scores s_bk = u_b · v_bk (k = 0 the true context, k >= 1 the negatives),
//   loss_b = -log σ(s_b0) - Σ_{k>=1} log σ(-s_bk)
// and its gradient, d loss_b / d s_bk = σ(s_bk) - [k == 0].
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "parallel.h"
#include "simd.h"

namespace tg::kernels {

template <class T>
inline T dot(const T* a, const T* b, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = xsimd::fma(B::load_unaligned(a + i), B::load_unaligned(b + i), acc);
  T s = hsum(acc);
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

// One window of skip-gram (or CBOW) with negatives shared by all its inputs (Ji et al. 2016,
// "Parallelizing Word2Vec in Shared and Distributed Memory"): the m input rows x [m, ld] (context
// words, or CBOW's one mean row) meet the n output rows y [n, ld] (row 0 the positive word, then
// the negatives), so the m * n level-1 updates of the original become three small matrix products:
//   s = x yᵀ,  g_ij = alpha ([j == 0] - σ(s_ij)),  gx = g y [m, ld],  gy = gᵀ x [n, ld].
// ld is a multiple of the SIMD width and the columns past the vector length are zero, so every
// load is full. scores must hold m * n rounded up to the SIMD width. Returns the window's loss,
// Σ_ij -log σ(±s_ij).
inline float sgns_shared_window(const float* x, int64_t m, const float* y, int64_t n, int64_t ld, float alpha,
                                float* gx, float* gy, float* scores) {
  using B = xsimd::batch<float>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  // s = x yᵀ, four output rows at a time (one load of x feeds four FMAs).
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * ld;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const float *y0 = y + j * ld, *y1 = y0 + ld, *y2 = y1 + ld, *y3 = y2 + ld;
      B a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
      for (int64_t d = 0; d < ld; d += W) {
        B xv = B::load_aligned(xi + d);
        a0 = xsimd::fma(xv, B::load_aligned(y0 + d), a0);
        a1 = xsimd::fma(xv, B::load_aligned(y1 + d), a1);
        a2 = xsimd::fma(xv, B::load_aligned(y2 + d), a2);
        a3 = xsimd::fma(xv, B::load_aligned(y3 + d), a3);
      }
      scores[i * n + j] = hsum(a0);
      scores[i * n + j + 1] = hsum(a1);
      scores[i * n + j + 2] = hsum(a2);
      scores[i * n + j + 3] = hsum(a3);
    }
    for (; j < n; ++j) {
      const float* yj = y + j * ld;
      B a(0.0f);
      for (int64_t d = 0; d < ld; d += W) a = xsimd::fma(B::load_aligned(xi + d), B::load_aligned(yj + d), a);
      scores[i * n + j] = hsum(a);
    }
  }
  // g and the loss, vectorised over all m * n scores: label 1 in column 0, 0 elsewhere.
  const int64_t mn = m * n;
  for (int64_t t = mn; t < (mn + W - 1) / W * W; ++t) scores[t] = 0.0f;
  B loss_acc(0.0f);
  for (int64_t b = 0; b < mn; b += W) {
    alignas(64) float label[W];
    for (int64_t t = 0; t < W; ++t) label[t] = (b + t) % n == 0 ? 1.0f : 0.0f;
    B s = B::load_unaligned(scores + b), l = B::load_aligned(label);
    B e = xsimd::exp(-xsimd::abs(s));                         // in (0, 1]: no overflow
    B sig = xsimd::select(s >= B(0.0f), B(1.0f) / (B(1.0f) + e), e / (B(1.0f) + e));
    // -log σ(s) for label 1, -log σ(-s) for label 0:  max(∓s, 0) + log1p(e)
    B z = xsimd::select(l > B(0.5f), -s, s);
    B term = xsimd::max(z, B(0.0f)) + xsimd::log1p(e);
    if (const int64_t valid = mn - b; valid < W) {  // the padding past m * n (zeroed above) adds no loss
      alignas(64) float keep[W];
      for (int64_t t = 0; t < W; ++t) keep[t] = t < valid ? 1.0f : 0.0f;
      term = term * B::load_aligned(keep);
    }
    loss_acc += term;
    (B(alpha) * (l - sig)).store_unaligned(scores + b);  // scores now hold g
  }
  // gx = g y, gy = gᵀ x.
  for (int64_t i = 0; i < m; ++i) {
    const float* gi = scores + i * n;
    for (int64_t d = 0; d < ld; d += W) {
      B a(0.0f);
      for (int64_t j = 0; j < n; ++j) a = xsimd::fma(B(gi[j]), B::load_aligned(y + j * ld + d), a);
      a.store_aligned(gx + i * ld + d);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t d = 0; d < ld; d += W) {
      B a(0.0f);
      for (int64_t i = 0; i < m; ++i) a = xsimd::fma(B(scores[i * n + j]), B::load_aligned(x + i * ld + d), a);
      a.store_aligned(gy + j * ld + d);
    }
  }
  return hsum(loss_acc);
}

}  // namespace tg::kernels
