#pragma once
// NumPy broadcasting: the output shape of two or three inputs, and a plan that walks the output
// in rows, with each input's offset, so kernels see plain runs (stride 0 or 1).
#include <initializer_list>

#include "../graph/tensor.h"
#include "kernels/parallel.h"

namespace tg {

// Throws naming `op` when the shapes cannot be broadcast together.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

struct BroadcastPlan {
  static constexpr int kMaxInputs = 3;
  int n_in = 0;
  int64_t inner = 1;                   // length of one run
  int64_t inner_stride[kMaxInputs]{};  // 0 (broadcast) or 1 per input
  Shape outer;                         // the dims walked outside the run
  Shape outer_strides[kMaxInputs];
  int64_t rows = 1;                    // product of outer
};

BroadcastPlan make_broadcast_plan(const Shape& out, std::initializer_list<Shape> inputs);

// Calls f(out_offset, in_offsets, run_length) for every run; runs are split over threads when
// the output is large. Every output element is written by exactly one call.
template <class F>
void for_each_run(const BroadcastPlan& p, F&& f) {
  int64_t grain = p.inner >= kernels::kParallelGrain ? 1 : kernels::kParallelGrain / (p.inner ? p.inner : 1);
  kernels::parallel_for(0, p.rows, grain, [&](int64_t r0, int64_t r1) {
    const int64_t nd = p.outer.rank();
    int64_t idx[16] = {0};
    int64_t offs[BroadcastPlan::kMaxInputs] = {0};
    int64_t rem = r0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % p.outer[d];
      rem /= p.outer[d];
      for (int k = 0; k < p.n_in; ++k) offs[k] += idx[d] * p.outer_strides[k][d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      f(r * p.inner, static_cast<const int64_t*>(offs), p.inner);
      for (int64_t d = nd - 1; d >= 0; --d) {  // odometer
        ++idx[d];
        for (int k = 0; k < p.n_in; ++k) offs[k] += p.outer_strides[k][d];
        if (idx[d] < p.outer[d]) break;
        for (int k = 0; k < p.n_in; ++k) offs[k] -= p.outer[d] * p.outer_strides[k][d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace tg
