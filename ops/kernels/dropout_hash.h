#pragma once
// The dropout mask's per-element formula, one definition for the CPU kernels (dropout.h, on
// scalars and on SIMD vectors) and the GPU's (ops/cuda/nn.cu): element c of a call keyed by k is
// kept when hash(k, c) >= p * 2^32, compared on the top 31 bits. Two rounds of MurmurHash3's
// 32-bit finaliser keyed by the two halves of k.
#include <cstdint>
#include <type_traits>

#include "../cuda/hd.h"

namespace tg::kernels {

template <class V>
TG_HD V fmix32(V h) {
  h = h ^ (h >> 16);
  h = h * V(0x85ebca6bu);
  h = h ^ (h >> 13);
  h = h * V(0xc2b2ae35u);
  return h ^ (h >> 16);
}

// The random bits of element counter c (a scalar or a vector of counters) of a call keyed by (k1, k2).
template <class V>
TG_HD V dropout_hash(V c, uint32_t k1, uint32_t k2) {
  return fmix32(fmix32(c ^ V(k1)) ^ V(k2));
}

// One element: x scaled where kept, else dropped. float multiplies by the mask (a dropped NaN stays
// NaN, as x * mask in PyTorch; the vector path does the same), other types select.
template <class T>
TG_HD T dropout_element(T x, uint32_t c, uint32_t k1, uint32_t k2, int32_t thr31, T scale) {
  const bool keep = static_cast<int32_t>(dropout_hash(c, k1, k2) >> 1) >= thr31;
  if constexpr (std::is_same_v<T, float>) return x * (keep ? scale : T(0));
  else return keep ? x * scale : T(0);
}

}  // namespace tg::kernels
