#pragma once
// Per-element formulas of the GPU's elementwise ops, one definition for device and host (TG_HD):
// tests/cuda_host_test.cc checks them on the CPU against the CPU's ops, so CI catches a wrong
// formula without a GPU. They follow ops/kernels/elementwise.h's definitions (NaN propagation of
// maximum/minimum, sign(0) = 0, relu(NaN) = 0, the two GELU forms, bfloat16 rounding), and those
// of dropout's mask and the optimizers' updates (ops/kernels/dropout.h, ops/kernels/optim.h).
#include <math.h>  // expf, erff, ...: the names CUDA's device math library also defines
#include <cstdint>
#include <cstring>

#include "hd.h"

namespace tg::cuda_ops::math {

// ---- float32 / float64 overloads of the C math library ---------------------------------------
TG_HD float m_exp(float x) { return ::expf(x); }
TG_HD double m_exp(double x) { return ::exp(x); }
TG_HD float m_log(float x) { return ::logf(x); }
TG_HD double m_log(double x) { return ::log(x); }
TG_HD float m_sqrt(float x) { return ::sqrtf(x); }
TG_HD double m_sqrt(double x) { return ::sqrt(x); }
TG_HD float m_tanh(float x) { return ::tanhf(x); }
TG_HD double m_tanh(double x) { return ::tanh(x); }
TG_HD float m_erf(float x) { return ::erff(x); }
TG_HD double m_erf(double x) { return ::erf(x); }
TG_HD float m_sin(float x) { return ::sinf(x); }
TG_HD double m_sin(double x) { return ::sin(x); }
TG_HD float m_cos(float x) { return ::cosf(x); }
TG_HD double m_cos(double x) { return ::cos(x); }
TG_HD float m_pow(float x, float y) { return ::powf(x, y); }
TG_HD double m_pow(double x, double y) { return ::pow(x, y); }
TG_HD float m_log1p(float x) { return ::log1pf(x); }
TG_HD double m_log1p(double x) { return ::log1p(x); }
TG_HD float m_fabs(float x) { return ::fabsf(x); }
TG_HD double m_fabs(double x) { return ::fabs(x); }
TG_HD float m_fma(float a, float b, float c) { return ::fmaf(a, b, c); }
TG_HD double m_fma(double a, double b, double c) { return ::fma(a, b, c); }

// ---- bfloat16 bits <-> float32, as tg::bfloat16 (graph/bfloat16.h) ----------------------------
TG_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
TG_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
// Round to nearest, ties to even; NaN stays a quiet NaN with its sign and upper payload bits.
TG_HD uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
TG_HD float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// ---- Unary ops ---------------------------------------------------------------------------------
// The op codes of cuda_ops::unary (elementwise.h); a and b are the op's scalar parameters.
enum class Unary : uint8_t {
  kAffine,      // a * x + b (add, sub, mul, div by a number, neg)
  kExp, kLog, kSqrt, kRsqrt, kAbs, kSign, kSquare, kReciprocal, kTanh, kSigmoid, kRelu, kSilu, kErf,
  kSin, kCos, kGeluErf, kGeluTanh,
  kPowScalar,   // x ** a
  kClamp,       // min(max(x, a), b)
};

template <class T>
TG_HD T unary(Unary op, T x, T a, T b) {
  switch (op) {
    case Unary::kAffine: return m_fma(a, x, b);
    case Unary::kExp: return m_exp(x);
    case Unary::kLog: return m_log(x);
    case Unary::kSqrt: return m_sqrt(x);
    case Unary::kRsqrt: return T(1) / m_sqrt(x);
    case Unary::kAbs: return m_fabs(x);
    case Unary::kSign: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case Unary::kSquare: return x * x;
    case Unary::kReciprocal: return T(1) / x;
    case Unary::kTanh: return m_tanh(x);
    case Unary::kSigmoid: return T(1) / (T(1) + m_exp(-x));
    case Unary::kRelu: return x > T(0) ? x : T(0);
    case Unary::kSilu: return x / (T(1) + m_exp(-x));
    case Unary::kErf: return m_erf(x);
    case Unary::kSin: return m_sin(x);
    case Unary::kCos: return m_cos(x);
    case Unary::kGeluErf: return T(0.5) * x * (T(1) + m_erf(x * T(0.70710678118654752440)));
    case Unary::kGeluTanh: {
      const T k = T(0.7978845608028654);
      return T(0.5) * x * (T(1) + m_tanh(k * (x + T(0.044715) * x * x * x)));
    }
    case Unary::kPowScalar:
      if (a == T(2)) return x * x;
      if (a == T(1)) return x;
      if (a == T(0.5)) return m_sqrt(x);
      return m_pow(x, a);
    case Unary::kClamp: return x < a ? a : (x > b ? b : x);
  }
  return x;
}

// ---- Binary ops --------------------------------------------------------------------------------
enum class Binary : uint8_t {
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,
  kGeluErfGrad, kGeluTanhGrad,  // g * gelu'(x): (a, b) = (g, x)
  kBceWithLogits,               // max(x, 0) - x y + log(1 + exp(-|x|)): (a, b) = (x, y)
};

template <class T>
TG_HD T binary(Binary op, T a, T b) {
  switch (op) {
    case Binary::kAdd: return a + b;
    case Binary::kSub: return a - b;
    case Binary::kMul: return a * b;
    case Binary::kDiv: return a / b;
    case Binary::kPow: return m_pow(a, b);
    case Binary::kMax: return (a != a || a > b) ? a : b;  // NaN propagates, as in PyTorch
    case Binary::kMin: return (a != a || a < b) ? a : b;
    case Binary::kGeluErfGrad: {
      const T cdf = T(0.5) * (T(1) + m_erf(b * T(0.70710678118654752440)));
      const T pdf = m_exp(T(-0.5) * b * b) * T(0.3989422804014327);
      return a * (cdf + b * pdf);
    }
    case Binary::kGeluTanhGrad: {
      const T k = T(0.7978845608028654), c = T(0.044715);
      const T t = m_tanh(k * (b + c * b * b * b));
      const T dt = (T(1) - t * t) * k * (T(1) + T(3) * c * b * b);
      return a * (T(0.5) * (T(1) + t) + T(0.5) * b * dt);
    }
    case Binary::kBceWithLogits: {
      const T x = a, y = b;
      return (x > T(0) ? x : T(0)) - x * y + m_log1p(m_exp(-m_fabs(x)));
    }
  }
  return a;
}

// ---- Comparisons and logic (bool results) ------------------------------------------------------
enum class Compare : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr };

template <class T>
TG_HD bool compare(Compare op, T a, T b) {
  switch (op) {
    case Compare::kEq: return a == b;
    case Compare::kNe: return a != b;
    case Compare::kLt: return a < b;
    case Compare::kLe: return a <= b;
    case Compare::kGt: return a > b;
    case Compare::kGe: return a >= b;
    case Compare::kAnd: return a != T(0) && b != T(0);
    case Compare::kOr: return a != T(0) || b != T(0);
  }
  return false;
}

// ---- Dropout's mask, as ops/kernels/dropout.h ---------------------------------------------------
// Element c of a call keyed by k = (k1, k2) is kept when hash(c) >= p 2^32, compared on the top 31
// bits; the hash is two rounds of MurmurHash3's 32-bit finaliser. float multiplies by the mask (a
// dropped NaN stays NaN, as the CPU's vector path does); other types select.
TG_HD uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}
TG_HD uint32_t dropout_hash(uint32_t c, uint32_t k1, uint32_t k2) { return fmix32(fmix32(c ^ k1) ^ k2); }
// Whether element `counter` (taken mod 2^32) of a call keyed by `key` is kept.
TG_HD bool dropout_keeps(uint64_t key, int64_t counter, int32_t thr31) {
  const uint32_t h = dropout_hash(static_cast<uint32_t>(counter), static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return static_cast<int32_t>(h >> 1) >= thr31;
}
template <class T>
TG_HD T dropout_element(T x, uint32_t c, uint32_t k1, uint32_t k2, int32_t thr31, T scale) {
  const bool keep = static_cast<int32_t>(dropout_hash(c, k1, k2) >> 1) >= thr31;
  if constexpr (sizeof(T) == sizeof(float)) return x * (keep ? scale : T(0));
  else return keep ? x * scale : T(0);
}

// ---- Optimizer updates, as ops/kernels/optim.h's scalar tails (torch.optim's order) -------------
// Adam / AdamW: g += wd_l2 p; p *= decay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g²;
// p -= step_size m / (sqrt(v) inv_sqrt_bc2 + eps).
template <class T>
TG_HD void adam_element(T& p, T g, T& m, T& v, T b1, T b2, T eps, T step_size, T inv_sqrt_bc2, T wd_l2, T decay) {
  const T gg = g + wd_l2 * p;
  const T pp = p * decay;
  m = b1 * m + (T(1) - b1) * gg;
  v = b2 * v + (T(1) - b2) * gg * gg;
  p = pp - step_size * (m / (m_sqrt(v) * inv_sqrt_bc2 + eps));
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

}  // namespace tg::cuda_ops::math
