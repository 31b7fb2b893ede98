#pragma once
// How an elementwise GPU kernel finds its inputs: the output's dimensions after merging those
// that every input walks contiguously (and dropping size-1 ones), and each input's element stride
// over them (0 where it is broadcast). Built on the host by make_strided_plan (plan.cc); the
// kernels and the CPU tests read offsets through the same plan_offsets.
#include <cstdint>

#include "hd.h"

namespace tg::cuda_ops {

struct StridedPlan {
  static constexpr int kMaxDims = 8;
  static constexpr int kMaxInputs = 3;
  int rank = 0;                          // merged dimensions (0 for a single element)
  int n_in = 0;
  int64_t numel = 0;
  bool flat = false;                     // every input has the output's shape: offset = index
  int64_t size[kMaxDims] = {};
  int64_t stride[kMaxInputs][kMaxDims] = {};
};

// Each input's element offset for output element i.
TG_HD void plan_offsets(const StridedPlan& p, int64_t i, int64_t* off) {
  for (int k = 0; k < StridedPlan::kMaxInputs; ++k) off[k] = p.flat ? i : 0;
  if (p.flat) return;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t n = p.size[d];
    const int64_t idx = i % n;
    i /= n;
    for (int k = 0; k < p.n_in; ++k) off[k] += idx * p.stride[k][d];
  }
}

// The plan for an output of out_rank dims broadcast from n_in inputs (each input's dims aligned to
// the output's last ones, as NumPy does; the shapes must already broadcast). False when more than
// kMaxDims dimensions remain after merging (the op then refuses, naming itself).
bool make_strided_plan(int out_rank, const int64_t* out_shape, int n_in, const int64_t* const* in_shapes,
                       const int* in_ranks, StridedPlan* plan);

}  // namespace tg::cuda_ops
