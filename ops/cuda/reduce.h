#pragma once
// The reduction GPU kernels' entry points (reduce.cu; reduce_none.cc without CUDA): the middle axis
// of an [outer, R, inner] view of a contiguous array, as ops/kernels/reduce.h does on the CPU.
// Sums are taken in a fixed order (a fixed tree per row), so the same input gives the same bits
// run after run; the order differs from the CPU's (results agree to rounding).
#include <cstdint>

#include "elementwise.h"

namespace tg::cuda_ops {

enum class Reduce : uint8_t { kSum, kMax, kMin };  // max/min propagate NaN, as math::binary's

struct ReduceArgs {
  int device = 0;
  const char* op = "";
  Reduce f = Reduce::kSum;
  Scalar type = Scalar::kF32;  // float32 or float64
  const void* x = nullptr;
  void* out = nullptr;         // outer * inner values
  int64_t outer = 1, R = 1, inner = 1;
};
void reduce(const ReduceArgs& args);

// Value and index of the first extreme along R (NaN counts as the extreme), as the CPU's arg_reduce.
struct ArgReduceArgs {
  int device = 0;
  const char* op = "";
  bool max = true;
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  void* values = nullptr;
  int64_t* indices = nullptr;
  int64_t outer = 1, R = 1, inner = 1;
};
void arg_reduce(const ArgReduceArgs& args);

}  // namespace tg::cuda_ops
