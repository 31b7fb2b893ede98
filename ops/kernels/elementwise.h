#pragma once
// Elementwise kernels: plain functions over raw pointers, vectorized with xsimd::batch<T> and a
// scalar tail. They know nothing of tensors or the graph. A functor is called with either a
// batch or a scalar, so one definition serves both paths.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <immintrin.h>

#include "parallel.h"
#include "simd.h"

namespace tg::kernels {

template <class V>
inline constexpr bool is_scalar_v = std::is_arithmetic_v<V>;

// ---- Unary functors ------------------------------------------------------------------------
struct Neg { template <class V> V operator()(V x) const { return -x; } };
struct Exp { template <class V> V operator()(V x) const { return xsimd::exp(x); } };
struct Log { template <class V> V operator()(V x) const { return xsimd::log(x); } };
struct Sqrt { template <class V> V operator()(V x) const { return xsimd::sqrt(x); } };
struct Rsqrt { template <class V> V operator()(V x) const { return V(1) / xsimd::sqrt(x); } };
struct Abs { template <class V> V operator()(V x) const { return xsimd::abs(x); } };
struct Tanh { template <class V> V operator()(V x) const { return xsimd::tanh(x); } };
struct Erf { template <class V> V operator()(V x) const { return xsimd::erf(x); } };
struct Sin { template <class V> V operator()(V x) const { return xsimd::sin(x); } };
struct Cos { template <class V> V operator()(V x) const { return xsimd::cos(x); } };
struct Square { template <class V> V operator()(V x) const { return x * x; } };
struct Reciprocal { template <class V> V operator()(V x) const { return V(1) / x; } };
struct Sigmoid {
  template <class V> V operator()(V x) const { return V(1) / (V(1) + xsimd::exp(-x)); }
};
struct Relu {
  template <class V> V operator()(V x) const {
    if constexpr (is_scalar_v<V>) return x > V(0) ? x : V(0);
    else return xsimd::max(x, V(0));
  }
};
struct Sign {
  template <class V> V operator()(V x) const {
    if constexpr (is_scalar_v<V>) return x > V(0) ? V(1) : (x < V(0) ? V(-1) : V(0));
    else return xsimd::select(x > V(0), V(1), xsimd::select(x < V(0), V(-1), V(0)));
  }
};
struct Silu { template <class V> V operator()(V x) const { return x / (V(1) + xsimd::exp(-x)); } };
struct GeluErf {  // x * Phi(x)
  template <class V> V operator()(V x) const { return V(0.5) * x * (V(1) + xsimd::erf(x * V(M_SQRT1_2))); }
};
struct GeluTanh {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  template <class V> V operator()(V x) const {
    const V k(0.7978845608028654);
    return V(0.5) * x * (V(1) + xsimd::tanh(k * (x + V(0.044715) * x * x * x)));
  }
};
// Derivatives of GELU, for the fused backward: g * gelu'(x).
struct GeluErfGrad {
  template <class V> V operator()(V g, V x) const {
    const V cdf = V(0.5) * (V(1) + xsimd::erf(x * V(M_SQRT1_2)));
    const V pdf = xsimd::exp(V(-0.5) * x * x) * V(0.3989422804014327);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhGrad {
  template <class V> V operator()(V g, V x) const {
    const V k(0.7978845608028654), c(0.044715);
    const V t = xsimd::tanh(k * (x + c * x * x * x));
    const V dt = (V(1) - t * t) * k * (V(1) + V(3) * c * x * x);
    return g * (V(0.5) * (V(1) + t) + V(0.5) * x * dt);
  }
};
struct ReluGrad {
  template <class V> V operator()(V g, V x) const {
    if constexpr (is_scalar_v<V>) return x > V(0) ? g : V(0);
    else return xsimd::select(x > V(0), g, V(0));
  }
};
struct IdentityGrad { template <class V> V operator()(V g, V) const { return g; } };
struct Identity { template <class V> V operator()(V x) const { return x; } };
// a * x + b: the tensor-scalar add, sub, mul, div and neg.
template <class T>
struct Affine {
  T a, b;
  template <class V> V operator()(V x) const { return xsimd::fma(V(a), x, V(b)); }
};
template <class T>
struct PowScalar {
  T p;
  template <class V> V operator()(V x) const {
    if (p == T(2)) return x * x;
    if (p == T(1)) return x;
    if (p == T(0.5)) return xsimd::sqrt(x);
    return xsimd::pow(x, V(p));
  }
};
template <class T>
struct Clamp {
  T lo, hi;
  template <class V> V operator()(V x) const {
    if constexpr (is_scalar_v<V>) return x < lo ? lo : (x > hi ? hi : x);
    else return xsimd::min(xsimd::max(x, V(lo)), V(hi));
  }
};

// ---- Binary functors -----------------------------------------------------------------------
struct Add { template <class V> V operator()(V a, V b) const { return a + b; } };
struct Sub { template <class V> V operator()(V a, V b) const { return a - b; } };
struct Mul { template <class V> V operator()(V a, V b) const { return a * b; } };
struct Div { template <class V> V operator()(V a, V b) const { return a / b; } };
struct Pow { template <class V> V operator()(V a, V b) const { return xsimd::pow(a, b); } };
struct Max {
  template <class V> V operator()(V a, V b) const {
    if constexpr (is_scalar_v<V>) return (a != a || a > b) ? a : b;   // NaN propagates, as in PyTorch
    else return xsimd::select(a > b || xsimd::isnan(a), a, b);  // not a != a: xsimd compares ordered
  }
};
struct Min {
  template <class V> V operator()(V a, V b) const {
    if constexpr (is_scalar_v<V>) return (a != a || a < b) ? a : b;
    else return xsimd::select(a < b || xsimd::isnan(a), a, b);
  }
};
// sigmoid(x) - y, the gradient of binary_cross_entropy_with_logits (and its stable forward).
struct BceWithLogits {  // max(x, 0) - x y + log(1 + exp(-|x|))
  template <class V> V operator()(V x, V y) const {
    if constexpr (is_scalar_v<V>) return (x > V(0) ? x : V(0)) - x * y + std::log1p(std::exp(-std::fabs(x)));
    else return xsimd::max(x, V(0)) - x * y + xsimd::log1p(xsimd::exp(-xsimd::abs(x)));
  }
};

// ---- Stores ---------------------------------------------------------------------------------
// Outputs of ops that move more than stream_threshold_bytes() (parallel.h) are written with
// non-temporal stores.
template <class T, class A>
inline void stream_store(T* p, const xsimd::batch<T, A>& v) {
#if defined(__AVX512F__)
  if constexpr (sizeof(v) == 64) {
    if constexpr (std::is_same_v<T, float>) _mm512_stream_ps(p, v);
    else _mm512_stream_pd(p, v);
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (sizeof(v) == 32) {
    if constexpr (std::is_same_v<T, float>) _mm256_stream_ps(p, v);
    else _mm256_stream_pd(p, v);
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (sizeof(v) == 16) {
    if constexpr (std::is_same_v<T, float>) _mm_stream_ps(p, v);
    else _mm_stream_pd(p, v);
    return;
  }
#endif
  v.store_aligned(p);
}
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Elements to do one by one before y + i is aligned for a vector store.
template <class T>
inline int64_t until_aligned(const T* y, int64_t n) {
  constexpr size_t bytes = sizeof(xsimd::batch<T>);
  const size_t mis = reinterpret_cast<uintptr_t>(y) % bytes;
  if (mis % sizeof(T)) return n;  // not even element-aligned: no streaming
  return std::min<int64_t>(n, static_cast<int64_t>(mis ? (bytes - mis) / sizeof(T) : 0));
}

// ---- Loops ---------------------------------------------------------------------------------
template <bool kStream = false, class T, class F>
void unary_loop(const T* x, T* y, int64_t n, F f) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  int64_t i = 0;
  if constexpr (kStream) {
    for (const int64_t head = until_aligned(y, n); i < head; ++i) y[i] = f(x[i]);
    for (; i + L <= n; i += L) stream_store(y + i, f(B::load_unaligned(x + i)));
    stream_fence();
  }
  for (; i + L <= n; i += L) f(B::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(x[i]);
}

template <class T, class F>
void unary(const T* x, T* y, int64_t n, F f) {
  const bool stream = 2 * n * static_cast<int64_t>(sizeof(T)) > stream_threshold_bytes();
  parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
    if (stream) unary_loop<true>(x + b, y + b, e - b, f);
    else unary_loop<false>(x + b, y + b, e - b, f);
  });
}

// One run of a broadcast binary op: a and b advance by sa, sb in {0, 1}.
template <bool kStream = false, class T, class F>
void binary_run(const T* a, int64_t sa, const T* b, int64_t sb, T* o, int64_t n, F f) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  int64_t i = 0;
  // Vector body for loads ld(i) of a and b; streaming or plain stores.
  auto body = [&](auto lda, auto ldb, auto sca, auto scb) {
    if constexpr (kStream) {
      for (const int64_t head = until_aligned(o, n); i < head; ++i) o[i] = f(sca(i), scb(i));
      for (; i + L <= n; i += L) stream_store(o + i, f(lda(i), ldb(i)));
      stream_fence();
    }
    for (; i + L <= n; i += L) f(lda(i), ldb(i)).store_unaligned(o + i);
    for (; i < n; ++i) o[i] = f(sca(i), scb(i));
  };
  auto vec = [](const T* p) { return [p](int64_t j) { return B::load_unaligned(p + j); }; };
  auto bcast = [](const T* p) { return [v = B(p[0])](int64_t) { return v; }; };
  auto elem = [](const T* p) { return [p](int64_t j) { return p[j]; }; };
  auto first = [](const T* p) { return [v = p[0]](int64_t) { return v; }; };
  if (sa == 1 && sb == 1) body(vec(a), vec(b), elem(a), elem(b));
  else if (sa == 1) body(vec(a), bcast(b), elem(a), first(b));
  else if (sb == 1) body(bcast(a), vec(b), first(a), elem(b));
  else {
    const T v = f(a[0], b[0]);
    for (; i < n; ++i) o[i] = v;
  }
}

}  // namespace tg::kernels
