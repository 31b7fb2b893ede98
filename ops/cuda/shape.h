#pragma once
// The shape family's GPU kernels (shape.cu; shape_none.cc without CUDA): strided copies (permute,
// expand, slice and slice's backward), the index ops, and their backward (index_add, scatter_add). An index out of range never reads or
// writes out of bounds: the kernel writes zeros there and raises the device's index flag, which the
// next synchronization turns into one line naming the op (graph/cuda/runtime.h).
#include <cstddef>
#include <cstdint>

#include "elementwise.h"

namespace tg::cuda_ops {

constexpr int kMaxCopyRank = 8;

// gather (scatter = false): dst[i] = src[offset(i)]; scatter (true): dst[offset(i)] = src[i], where
// offset(i) = sum over d of coordinate_d(i) * stride[d], i walking `size` row-major.
struct CopyArgs {
  int device = 0;
  const char* op = "";
  int elem_bytes = 4;
  int rank = 0;
  int64_t size[kMaxCopyRank] = {};
  int64_t stride[kMaxCopyRank] = {};
  const void* src = nullptr;
  void* dst = nullptr;
  bool scatter = false;
};
void strided_copy(const CopyArgs& args);

// index_select over the middle axis of [outer, R, inner]: dst[o, i, :] = src[o, index[i], :].
struct IndexSelectArgs {
  int device = 0;
  const char* op = "";
  int elem_bytes = 4;
  const void* src = nullptr;
  void* dst = nullptr;
  const int64_t* index = nullptr;
  int64_t n = 0, outer = 1, R = 1, inner = 1;
};
void index_select(const IndexSelectArgs& args);

// gather along dim: dst[i] = src[base(i) + index[i] * src_stride[dim]], where base(i) places the
// coordinates of i (in the index's shape) at the source's strides, dim excluded.
struct GatherArgs {
  int device = 0;
  const char* op = "";
  int elem_bytes = 4;
  int rank = 0, dim = 0;
  int64_t index_size[kMaxCopyRank] = {};
  int64_t src_stride[kMaxCopyRank] = {};
  int64_t limit = 0;  // the source's size along dim
  const void* src = nullptr;
  void* dst = nullptr;
  const int64_t* index = nullptr;
};
void gather(const GatherArgs& args);

// Sums into dst along one axis, a column at a time: each column (every coordinate but the axis)
// is one thread adding its positions k = 0, 1, ... in order, as the CPU does (no atomics, the same
// bits every run). float32 or float64.
// index_add (rank = 0): dst[o, index[k], j] += alpha src[o, k, j] over src [outer, n, inner], dst
// [outer, R, inner]. scatter_add (rank > 0): over the index's shape `size` (src has the same, and
// is contiguous), dst[base(c) + index[c, k] * dst_stride[dim]] += src[c, k], base(c) placing the
// coordinates of column c at dst_stride. An index outside [0, R) raises the index flag and is skipped.
struct ScatterAddArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  int64_t outer = 1, n = 0, inner = 1, R = 0;
  int rank = 0, dim = 0;
  int64_t size[kMaxCopyRank] = {};
  int64_t dst_stride[kMaxCopyRank] = {};
  const int64_t* index = nullptr;
  const void* src = nullptr;
  void* dst = nullptr;
  double alpha = 1;
  // index_add with many positions (an embedding's gradient: n tokens into R rows) sorts the
  // positions by row first (a stable radix sort, so each row's positions stay in order) and adds
  // each row's run in one thread per column: the same sums, in parallel over rows. It needs
  // index_add_scratch_bytes(n, R) bytes of device memory here (0: the column path runs).
  void* scratch = nullptr;
};
void scatter_add(const ScatterAddArgs& args);
size_t index_add_scratch_bytes(int64_t n, int64_t R);

}  // namespace tg::cuda_ops
