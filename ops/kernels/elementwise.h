#pragma once
// Elementwise kernels: plain functions over raw pointers, vectorized with xsimd::batch<T> and a
// scalar tail. They know nothing of tensors or the graph. A functor is called with either a
// batch or a scalar, so one definition serves both paths.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "ops/kernels/parallel.h"

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
    else return xsimd::select(a > b || a != a, a, b);
  }
};
struct Min {
  template <class V> V operator()(V a, V b) const {
    if constexpr (is_scalar_v<V>) return (a != a || a < b) ? a : b;
    else return xsimd::select(a < b || a != a, a, b);
  }
};
// sigmoid(x) - y, the gradient of binary_cross_entropy_with_logits (and its stable forward).
struct BceWithLogits {  // max(x, 0) - x y + log(1 + exp(-|x|))
  template <class V> V operator()(V x, V y) const {
    if constexpr (is_scalar_v<V>) return (x > V(0) ? x : V(0)) - x * y + std::log1p(std::exp(-std::fabs(x)));
    else return xsimd::max(x, V(0)) - x * y + xsimd::log1p(xsimd::exp(-xsimd::abs(x)));
  }
};

// ---- Loops ---------------------------------------------------------------------------------
template <class T, class F>
void unary_loop(const T* x, T* y, int64_t n, F f) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  int64_t i = 0;
  for (; i + L <= n; i += L) f(B::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(x[i]);
}

template <class T, class F>
void unary(const T* x, T* y, int64_t n, F f) {
  parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) { unary_loop(x + b, y + b, e - b, f); });
}

// One run of a broadcast binary op: a and b advance by sa, sb in {0, 1}.
template <class T, class F>
void binary_run(const T* a, int64_t sa, const T* b, int64_t sb, T* o, int64_t n, F f) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  int64_t i = 0;
  if (sa == 1 && sb == 1) {
    for (; i + L <= n; i += L) f(B::load_unaligned(a + i), B::load_unaligned(b + i)).store_unaligned(o + i);
    for (; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sa == 1) {
    const B vb(b[0]);
    for (; i + L <= n; i += L) f(B::load_unaligned(a + i), vb).store_unaligned(o + i);
    for (; i < n; ++i) o[i] = f(a[i], b[0]);
  } else if (sb == 1) {
    const B va(a[0]);
    for (; i + L <= n; i += L) f(va, B::load_unaligned(b + i)).store_unaligned(o + i);
    for (; i < n; ++i) o[i] = f(a[0], b[i]);
  } else {
    const T v = f(a[0], b[0]);
    for (; i < n; ++i) o[i] = v;
  }
}

}  // namespace tg::kernels
