#pragma once
// Strided copy: dst (contiguous, `shape`) <- src read with arbitrary element strides (0 for a
// broadcast dimension). Serves permute, slice, expand and their backwards.
#include <cstdint>
#include <cstring>

#include "graph/shape.h"
#include "ops/kernels/parallel.h"

namespace tg::kernels {

template <class T>
void strided_copy(const T* src, T* dst, const Shape& shape_in, const Shape& strides_in) {
  // Merge dims that are contiguous in the source too; drop size-1 dims.
  Shape shape, st;
  for (int64_t d = 0; d < shape_in.rank(); ++d) {
    if (shape_in[d] == 1) continue;
    if (!shape.empty() && st.back() == strides_in[d] * shape_in[d]) {
      shape.back() *= shape_in[d];
      st.back() = strides_in[d];
    } else {
      shape.push_back(shape_in[d]);
      st.push_back(strides_in[d]);
    }
  }
  const int64_t total = shape_in.numel();
  if (total == 0) return;
  if (shape.empty()) { dst[0] = src[0]; return; }
  const int64_t inner = shape.back(), is = st.back();
  const int64_t nd = shape.rank() - 1;
  const int64_t rows = total / inner;
  const int64_t grain = inner >= kParallelGrain ? 1 : kParallelGrain / inner;
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    int64_t idx[16] = {0};
    int64_t off = 0, rem = r0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
      off += idx[d] * st[d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      T* out = dst + r * inner;
      const T* in = src + off;
      if (is == 1) std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(T));
      else if (is == 0) for (int64_t i = 0; i < inner; ++i) out[i] = in[0];
      else for (int64_t i = 0; i < inner; ++i) out[i] = in[i * is];
      for (int64_t d = nd - 1; d >= 0; --d) {
        ++idx[d];
        off += st[d];
        if (idx[d] < shape[d]) break;
        off -= shape[d] * st[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace tg::kernels
