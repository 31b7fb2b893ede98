// make_strided_plan: the host half of the elementwise kernels' indexing (strided.h).
#include <cstdint>

#include "ops/cuda/strided.h"

namespace tg::cuda_ops {

bool make_strided_plan(int out_rank, const int64_t* out_shape, int n_in, const int64_t* const* in_shapes,
                       const int* in_ranks, StridedPlan* plan) {
  StridedPlan p;
  p.n_in = n_in;
  p.numel = 1;
  for (int d = 0; d < out_rank; ++d) p.numel *= out_shape[d];
  bool flat = true;
  for (int k = 0; k < n_in; ++k) {
    if (in_ranks[k] != out_rank) flat = false;
    for (int d = 0; d < in_ranks[k] && flat; ++d) flat = in_shapes[k][d] == out_shape[d];
  }
  p.flat = flat;
  if (flat) {
    p.rank = p.numel > 1 ? 1 : 0;
    p.size[0] = p.numel;
    for (int k = 0; k < n_in; ++k) p.stride[k][0] = 1;
    *plan = p;
    return true;
  }
  // Contiguous strides of each input over the output's dims (0 where broadcast or missing), then
  // walk the dims from the last, merging a dim into the one after it when every input allows.
  int64_t merged_size[64];
  int64_t merged_stride[StridedPlan::kMaxInputs][64];
  int n = 0;
  int64_t run[StridedPlan::kMaxInputs] = {1, 1, 1};  // each input's contiguous stride so far
  for (int d = out_rank - 1; d >= 0; --d) {
    const int64_t size = out_shape[d];
    int64_t st[StridedPlan::kMaxInputs] = {0, 0, 0};
    for (int k = 0; k < n_in; ++k) {
      const int kd = d - (out_rank - in_ranks[k]);  // the input's own dim, if it has one here
      const int64_t in_size = kd >= 0 ? in_shapes[k][kd] : 1;
      st[k] = in_size == 1 ? 0 : run[k];
      run[k] *= in_size;
    }
    if (size == 1) continue;  // contributes nothing to any offset
    bool merge = n > 0;
    for (int k = 0; k < n_in && merge; ++k) {
      // dims (d, inner) merge when stride(d) == stride(inner) * size(inner) for every input
      merge = st[k] == merged_stride[k][n - 1] * merged_size[n - 1];
    }
    if (merge) {
      merged_size[n - 1] *= size;
      continue;
    }
    if (n == 64) return false;
    merged_size[n] = size;
    for (int k = 0; k < n_in; ++k) merged_stride[k][n] = st[k];
    ++n;
  }
  if (n > StridedPlan::kMaxDims) return false;
  p.rank = n;
  for (int d = 0; d < n; ++d) {  // merged_* run from the innermost dim out: reverse
    p.size[d] = merged_size[n - 1 - d];
    for (int k = 0; k < n_in; ++k) p.stride[k][d] = merged_stride[k][n - 1 - d];
  }
  *plan = p;
  return true;
}

}  // namespace tg::cuda_ops
