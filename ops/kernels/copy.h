#pragma once
// Strided copies: permute, slice, expand and the backward of slice move data with these. A layout
// is `rank` sizes and strides in elements, at most kMaxCopyRank of them (the op checks).
#include <cstdint>
#include <cstring>

#include "parallel.h"

namespace tg::kernels {

inline constexpr int64_t kMaxCopyRank = 16;

// Walks a (merged) shape in row-major order, keeping the offset of the current row under a
// second set of strides: seek() jumps to a row, next() steps to the following one.
struct RowWalker {
  const int64_t* shape;    // outer dims only
  const int64_t* strides;
  int64_t rank;
  int64_t idx[kMaxCopyRank] = {0};
  int64_t offset = 0;
  void seek(int64_t row) {
    offset = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      idx[d] = row % shape[d];
      row /= shape[d];
      offset += idx[d] * strides[d];
    }
  }
  void next() {
    for (int64_t d = rank - 1; d >= 0; --d) {
      ++idx[d];
      offset += strides[d];
      if (idx[d] < shape[d]) return;
      offset -= shape[d] * strides[d];
      idx[d] = 0;
    }
  }
};

// Calls run(row, strided_offset, inner, inner_stride) for every row of a contiguous tensor of
// sizes `shape_in` (rank of them, at most kMaxCopyRank) whose elements sit at `strides_in` on the
// strided side (dims contiguous on both sides are merged first). Rows are split over threads.
template <class F>
void for_each_strided_row(const int64_t* shape_in, const int64_t* strides_in, int64_t rank, F&& run) {
  int64_t shape[kMaxCopyRank], st[kMaxCopyRank];
  int64_t n = 0, total = 1;
  for (int64_t d = 0; d < rank; ++d) {
    total *= shape_in[d];
    if (shape_in[d] == 1) continue;
    if (n > 0 && st[n - 1] == strides_in[d] * shape_in[d]) {
      shape[n - 1] *= shape_in[d];
      st[n - 1] = strides_in[d];
    } else {
      shape[n] = shape_in[d];
      st[n] = strides_in[d];
      ++n;
    }
  }
  if (total == 0) return;
  if (n == 0) {
    run(0, 0, 1, 1);
    return;
  }
  const int64_t inner = shape[n - 1], is = st[n - 1];
  --n;
  const int64_t rows = total / inner;
  const int64_t grain = inner >= kParallelGrain ? 1 : kParallelGrain / inner;
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    RowWalker w{shape, st, n};
    w.seek(r0);
    for (int64_t r = r0; r < r1; ++r, w.next()) run(r, w.offset, inner, is);
  });
}

// dst (contiguous, `shape`) <- src read at `strides` (0 for a broadcast dimension).
template <class T>
void strided_copy(const T* src, T* dst, const int64_t* shape, const int64_t* strides, int64_t rank) {
  for_each_strided_row(shape, strides, rank, [&](int64_t r, int64_t off, int64_t inner, int64_t is) {
    T* out = dst + r * inner;
    const T* in = src + off;
    if (is == 1) std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(T));
    else for (int64_t i = 0; i < inner; ++i) out[i] = in[i * is];
  });
}

// dst written at `strides` <- src (contiguous, `shape`); strides must not map two elements to
// one place (the inverse of a slice).
template <class T>
void strided_scatter(const T* src, T* dst, const int64_t* shape, const int64_t* strides, int64_t rank) {
  for_each_strided_row(shape, strides, rank, [&](int64_t r, int64_t off, int64_t inner, int64_t is) {
    const T* in = src + r * inner;
    T* out = dst + off;
    if (is == 1) std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(T));
    else for (int64_t i = 0; i < inner; ++i) out[i * is] = in[i];
  });
}

}  // namespace tg::kernels
