#pragma once
// Strided copies: permute, slice, expand and the backward of slice move data with these.
#include <cstdint>
#include <cstring>

#include "../../graph/error.h"
#include "../../graph/shape.h"
#include "parallel.h"

namespace tg::kernels {

// Walks a (merged) shape in row-major order, keeping the offset of the current row under a
// second set of strides: seek() jumps to a row, next() steps to the following one.
struct RowWalker {
  Shape shape, strides;  // outer dims only
  int64_t idx[16] = {0};
  int64_t offset = 0;
  void seek(int64_t row) {
    offset = 0;
    for (int64_t d = shape.rank() - 1; d >= 0; --d) {
      idx[d] = row % shape[d];
      row /= shape[d];
      offset += idx[d] * strides[d];
    }
  }
  void next() {
    for (int64_t d = shape.rank() - 1; d >= 0; --d) {
      ++idx[d];
      offset += strides[d];
      if (idx[d] < shape[d]) return;
      offset -= shape[d] * strides[d];
      idx[d] = 0;
    }
  }
};

// Calls run(row, strided_offset, inner, inner_stride) for every row of a contiguous tensor of
// shape `shape_in` whose elements sit at `strides_in` on the strided side (dims contiguous on
// both sides are merged first). Rows are split over threads.
template <class F>
void for_each_strided_row(const Shape& shape_in, const Shape& strides_in, F&& run) {
  TG_CHECK(shape_in.rank() <= 16, "copy", "tensors of rank {} are not supported (at most 16 dimensions)", shape_in.rank());
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
  if (shape.empty()) {
    run(0, 0, 1, 1);
    return;
  }
  const int64_t inner = shape.back(), is = st.back();
  shape.pop_back();
  st.pop_back();
  const int64_t rows = total / inner;
  const int64_t grain = inner >= kParallelGrain ? 1 : kParallelGrain / inner;
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    RowWalker w{shape, st};
    w.seek(r0);
    for (int64_t r = r0; r < r1; ++r, w.next()) run(r, w.offset, inner, is);
  });
}

// dst (contiguous, `shape`) <- src read at `strides` (0 for a broadcast dimension).
template <class T>
void strided_copy(const T* src, T* dst, const Shape& shape, const Shape& strides) {
  for_each_strided_row(shape, strides, [&](int64_t r, int64_t off, int64_t inner, int64_t is) {
    T* out = dst + r * inner;
    const T* in = src + off;
    if (is == 1) std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(T));
    else for (int64_t i = 0; i < inner; ++i) out[i] = in[i * is];
  });
}

// dst written at `strides` <- src (contiguous, `shape`); strides must not map two elements to
// one place (the inverse of a slice).
template <class T>
void strided_scatter(const T* src, T* dst, const Shape& shape, const Shape& strides) {
  for_each_strided_row(shape, strides, [&](int64_t r, int64_t off, int64_t inner, int64_t is) {
    const T* in = src + r * inner;
    T* out = dst + off;
    if (is == 1) std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(T));
    else for (int64_t i = 0; i < inner; ++i) out[i * is] = in[i];
  });
}

}  // namespace tg::kernels
