#pragma once
// Optimizer update kernels: one pass over a parameter, its gradient and its state, vectorized with
// xsimd and a scalar tail. The arithmetic follows torch.optim's order of operations so that
// trajectories match it to rounding.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel.h"
#include "simd.h"

namespace tg::kernels {

// Runs f(i0, i1) over [0, n) in vector-aligned chunks on the pool (element-wise independent, so
// the result does not depend on the thread count).
template <class F>
void optim_for(int64_t n, F&& f) {
  parallel_for(0, n, kParallelGrain, f);
}

// Adam / AdamW (Kingma & Ba; Loshchilov & Hutter), torch.optim formulation:
//   g += wd_l2 * p;  p *= decoupled;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²
//   p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps),  step_size = lr / (1 - b1^t)
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, T b1, T b2, T eps, T step_size, T inv_sqrt_bc2,
                 T wd_l2, T decoupled) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  optim_for(n, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    const B vb1(b1), vb2(b2), c1(T(1) - b1), c2(T(1) - b2), veps(eps), vstep(step_size), vinv(inv_sqrt_bc2),
        vwd(wd_l2), vdec(decoupled);
    for (; i + W <= i1; i += W) {
      B pp = B::load_unaligned(p + i), gg = B::load_unaligned(g + i);
      gg = xsimd::fma(vwd, pp, gg);
      pp = pp * vdec;
      B mm = vb1 * B::load_unaligned(m + i) + c1 * gg;
      B vv = vb2 * B::load_unaligned(v + i) + c2 * gg * gg;
      pp = pp - vstep * (mm / (xsimd::sqrt(vv) * vinv + veps));
      mm.store_unaligned(m + i);
      vv.store_unaligned(v + i);
      pp.store_unaligned(p + i);
    }
    for (; i < i1; ++i) {
      T gg = g[i] + wd_l2 * p[i];
      T pp = p[i] * decoupled;
      m[i] = b1 * m[i] + (T(1) - b1) * gg;
      v[i] = b2 * v[i] + (T(1) - b2) * gg * gg;
      p[i] = pp - step_size * (m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps));
    }
  });
}

// SGD with momentum (torch.optim.SGD): g += wd p; buf = first ? g : mu buf + (1 - dampening) g;
// d = nesterov ? g + mu buf : buf (or g without momentum); p -= lr d.
template <class T>
void sgd_update(T* p, const T* g, T* buf, int64_t n, T lr, T wd, T mu, T dampening, bool nesterov, bool first) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  optim_for(n, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    const B vlr(lr), vwd(wd), vmu(mu), vdamp(T(1) - dampening);
    for (; i + W <= i1; i += W) {
      B pp = B::load_unaligned(p + i);
      B gg = xsimd::fma(vwd, pp, B::load_unaligned(g + i));
      if (buf) {
        B bb = first ? gg : vmu * B::load_unaligned(buf + i) + vdamp * gg;
        bb.store_unaligned(buf + i);
        gg = nesterov ? gg + vmu * bb : bb;
      }
      (pp - vlr * gg).store_unaligned(p + i);
    }
    for (; i < i1; ++i) {
      T gg = g[i] + wd * p[i];
      if (buf) {
        buf[i] = first ? gg : mu * buf[i] + (T(1) - dampening) * gg;
        gg = nesterov ? gg + mu * buf[i] : buf[i];
      }
      p[i] = p[i] - lr * gg;
    }
  });
}

// Σ x² accumulated in double over chunks of 1024 (vector partial sums in T within a chunk):
// sequential, so the result does not depend on the thread count.
template <class T>
double sum_squares(const T* x, int64_t n) {
  // Partial sums of 1024 values each (vector lanes, then the tail in double), added in order: the
  // same total whatever the thread count; the partial sums themselves in parallel.
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  auto part = [&](int64_t c) {
    const int64_t end = std::min<int64_t>(n, c + 1024);
    int64_t i = c;
    B acc(T(0));
    for (; i + W <= end; i += W) {
      B v = B::load_unaligned(x + i);
      acc = xsimd::fma(v, v, acc);
    }
    double p = static_cast<double>(hsum(acc));
    for (; i < end; ++i) p += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return p;
  };
  const int64_t chunks = (n + 1023) / 1024;
  double total = 0;
  if (n < 4 * kParallelGrain) {
    for (int64_t c = 0; c < chunks; ++c) total += part(c * 1024);
    return total;
  }
  std::vector<double> parts(static_cast<size_t>(chunks));
  parallel_for(0, chunks, kParallelGrain / 1024, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) parts[static_cast<size_t>(c)] = part(c * 1024);
  });
  for (double p : parts) total += p;
  return total;
}

}  // namespace tg::kernels
