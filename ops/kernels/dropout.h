#pragma once
// Dropout masks from a counter-based hash: element i of a call keyed by k is kept when
// hash(k, i) >= p * 2^32. Any element's bit can be recomputed from (k, i) alone, so the
// forward stores no mask (the backward regenerates it), chunks can run on any thread, and the
// result never depends on the thread count. The hash is two rounds of MurmurHash3's 32-bit
// finaliser keyed by the two halves of k (one 64-bit draw from the global generator per call).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "parallel.h"
#include "simd.h"

namespace tg::kernels {

template <class V>
inline V fmix32(V h) {
  h = h ^ (h >> 16);
  h = h * V(0x85ebca6bu);
  h = h ^ (h >> 13);
  h = h * V(0xc2b2ae35u);
  return h ^ (h >> 16);
}

// The random bits of element counter c (a scalar or a vector of counters) of a call keyed by (k1, k2).
template <class V>
inline V dropout_hash(V c, uint32_t k1, uint32_t k2) {
  return fmix32(fmix32(c ^ V(k1)) ^ V(k2));
}

// 0, 1, ..., W - 1: the counters of one vector's lanes, to add to its first element's.
inline xsimd::batch<uint32_t> lane_counters() {
  using U = xsimd::batch<uint32_t>;
  alignas(64) uint32_t lane[U::size];
  for (size_t j = 0; j < U::size; ++j) lane[j] = static_cast<uint32_t>(j);
  return U::load_aligned(lane);
}

// out[j] = hash(key, first + j) for j in [0, n): the random bits of elements first .. first + n.
inline void dropout_bits(uint64_t key, int64_t first, uint32_t* out, int64_t n) {
  using U = xsimd::batch<uint32_t>;
  constexpr int64_t W = static_cast<int64_t>(U::size);
  const uint32_t k1 = static_cast<uint32_t>(key), k2 = static_cast<uint32_t>(key >> 32);
  const U offs = lane_counters();
  int64_t j = 0;
  for (; j + W <= n; j += W) dropout_hash(offs + U(static_cast<uint32_t>(first + j)), k1, k2).store_unaligned(out + j);
  for (; j < n; ++j) out[j] = dropout_hash(static_cast<uint32_t>(first + j), k1, k2);
}

// y[j] = keep ? x[j] * scale : 0 for elements first .. first + n of a call keyed by `key`, keep[j] =
// bits(first + j) >= threshold (compared on the top 31 bits, so the comparison is a signed one every
// instruction set has). float: the bits and the select in registers, one pass over x and y (the
// mask is a multiplier: a dropped NaN stays NaN, as x * mask does in PyTorch); other types through
// a buffer of bits.
template <class T>
void dropout_run(const T* x, T* y, int64_t n, uint64_t key, int64_t first, int32_t thr31, T scale) {
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {  // same lane count as uint32
    using F = xsimd::batch<float>;
    using I = xsimd::batch<int32_t>;
    using U = xsimd::batch<uint32_t>;
    constexpr int64_t W = static_cast<int64_t>(F::size);
    const uint32_t k1 = static_cast<uint32_t>(key), k2 = static_cast<uint32_t>(key >> 32);
    const U offs = lane_counters();
    const I vscale = bitcast<I>(F(scale)), vthr(thr31), zero(0);
    for (; j + W <= n; j += W) {
      const I b = bitcast<I>(dropout_hash(offs + U(static_cast<uint32_t>(first + j)), k1, k2) >> 1);
      const F m = bitcast<F>(xsimd::select(b >= vthr, vscale, zero));
      (F::load_unaligned(x + j) * m).store_unaligned(y + j);
    }
    for (; j < n; ++j) {
      const uint32_t bits = dropout_hash(static_cast<uint32_t>(first + j), k1, k2);
      y[j] = x[j] * (static_cast<int32_t>(bits >> 1) >= thr31 ? scale : T(0));
    }
  } else {
    alignas(64) uint32_t bits[2048];
    for (; j < n; j += 2048) {
      const int64_t len = std::min<int64_t>(2048, n - j);
      dropout_bits(key, first + j, bits, len);
      for (int64_t i = 0; i < len; ++i) y[j + i] = static_cast<int32_t>(bits[i] >> 1) >= thr31 ? x[j + i] * scale : T(0);
    }
  }
}

// Keyed by row: y[r, j] = keep ? x[r, j] * scale : 0 with keep from hash(row_keys[r], j), for rows
// of `len` elements (dropout keyed by sample, whose rows are padding-independent positions).
template <class T>
void dropout_apply_rows(const T* x, T* y, int64_t rows, int64_t len, const uint64_t* row_keys, uint32_t threshold, T scale) {
  const int32_t thr31 = static_cast<int32_t>(threshold >> 1);
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1));
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) dropout_run(x + r * len, y + r * len, len, row_keys[r], 0, thr31, scale);
  });
}

// y = keep ? x * scale : 0 over n elements keyed by `key`, in parallel chunks of 2048.
template <class T>
void dropout_apply(const T* x, T* y, int64_t n, uint64_t key, uint32_t threshold, T scale) {
  const int32_t thr31 = static_cast<int32_t>(threshold >> 1);
  parallel_for(0, (n + 2047) / 2048, std::max<int64_t>(1, kParallelGrain / 2048), [&](int64_t c0, int64_t c1) {
    const int64_t start = c0 * 2048, len = std::min<int64_t>(c1 * 2048, n) - start;
    dropout_run(x + start, y + start, len, key, start, thr31, scale);
  });
}

}  // namespace tg::kernels
