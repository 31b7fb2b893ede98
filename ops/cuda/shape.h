#pragma once
// The shape family's GPU kernels (shape.cu; shape_none.cc without CUDA): strided copies (permute,
// expand, slice and slice's backward), and the index ops. An index out of range never reads or
// writes out of bounds: the kernel writes zeros there and raises the device's index flag, which the
// next synchronization turns into one line naming the op (graph/cuda/runtime.h).
#include <cstdint>

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

}  // namespace tg::cuda_ops
