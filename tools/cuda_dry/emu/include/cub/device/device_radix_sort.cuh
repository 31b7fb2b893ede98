#pragma once
// CUB's DeviceRadixSort::SortPairs for the CUDA emulator (tools/cuda_dry/emu): the same contract —
// a stable sort of (key, value) pairs by the key's bits [begin_bit, end_bit), signed keys in their
// numeric order, queued on the stream — run on the CPU. Found before the toolkit's CUB only in a
// -DTG_CUDA_EMU=ON build.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <type_traits>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <class K, class V, class N>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out, const V* values_in,
                               V* values_out, N n, int begin_bit = 0, int end_bit = sizeof(K) * 8,
                               cudaStream_t stream = nullptr) {
    if (temp == nullptr) {
      temp_bytes = 256;  // (the emulator needs none; a real CUB asks for some)
      return cudaSuccess;
    }
    const int64_t count = static_cast<int64_t>(n);
    auto* work = new std::function<void()>([=] {
      using U = std::make_unsigned_t<K>;
      auto digit = [&](K k) {
        U u = static_cast<U>(k);
        if constexpr (std::is_signed_v<K>) u ^= U{1} << (sizeof(K) * 8 - 1);
        u >>= begin_bit;
        const int bits = end_bit - begin_bit;
        return bits >= static_cast<int>(sizeof(K) * 8) ? u : (u & ((U{1} << bits) - 1));
      };
      std::vector<int64_t> order(static_cast<size_t>(count));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return digit(keys_in[a]) < digit(keys_in[b]); });
      std::vector<K> k(static_cast<size_t>(count));
      std::vector<V> v(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        k[static_cast<size_t>(i)] = keys_in[order[static_cast<size_t>(i)]];
        v[static_cast<size_t>(i)] = values_in[order[static_cast<size_t>(i)]];
      }
      std::copy(k.begin(), k.end(), keys_out);
      std::copy(v.begin(), v.end(), values_out);
    });
    tg_emu_enqueue("cub::DeviceRadixSort::SortPairs", stream, work);
    return cudaSuccess;
  }
};

}  // namespace cub
