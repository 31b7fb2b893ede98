#pragma once
// The optimizers' per-element updates, one definition for the CPU kernels (optim.h: the scalar
// tails; the vector bodies compute the same in SIMD) and the GPU's multi-tensor kernel
// (ops/cuda/optim.cu). torch.optim's order of operations, so trajectories match it to rounding.
#include <math.h>

#include <type_traits>

#include "../cuda/hd.h"

namespace tg::kernels {

template <class T>
TG_HD T optim_sqrt(T x) {
  if constexpr (std::is_same_v<T, float>) return ::sqrtf(x);
  else return ::sqrt(x);
}

// Adam / AdamW: g += wd_l2 p; p *= decay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g²;
// p -= step_size m / (sqrt(v) inv_sqrt_bc2 + eps).
template <class T>
TG_HD void adam_element(T& p, T g, T& m, T& v, T b1, T b2, T eps, T step_size, T inv_sqrt_bc2, T wd_l2, T decay) {
  const T gg = g + wd_l2 * p;
  const T pp = p * decay;
  m = b1 * m + (T(1) - b1) * gg;
  v = b2 * v + (T(1) - b2) * gg * gg;
  p = pp - step_size * (m / (optim_sqrt(v) * inv_sqrt_bc2 + eps));
}

// SGD: g += wd p; with momentum (buf non-null) buf = first ? g : mu buf + (1 - dampening) g and
// d = nesterov ? g + mu buf : buf; p -= lr d.
template <class T>
TG_HD void sgd_element(T& p, T g, T* buf, T lr, T wd, T mu, T dampening, bool nesterov, bool first) {
  T gg = g + wd * p;
  if (buf != nullptr) {
    *buf = first ? gg : mu * *buf + (T(1) - dampening) * gg;
    gg = nesterov ? gg + mu * *buf : *buf;
  }
  p = p - lr * gg;
}

}  // namespace tg::kernels
