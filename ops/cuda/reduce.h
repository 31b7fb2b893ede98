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
  void* scratch = nullptr;     // reduce_plan(...).scratch values of the type (when not 0)
};
void reduce(const ReduceArgs& args);

// How reduce() spreads the work (pure logic, tested on the CPU). Rows (inner == 1) take a block
// each, columns (inner > 1) a thread each; when that leaves the GPU mostly idle — few outputs over
// a long R, as a linear layer's bias gradient (the column sums of [rows, out]) or a whole-tensor
// sum — R is cut into `chunks` pieces of `chunk` positions, each piece folded by its own block or
// thread into scratch [outer, chunks, inner], and a second pass folds the pieces in order. The cut
// depends on the shape alone (not on the card): the same bits run after run, on every GPU.
struct ReducePlan {
  int64_t chunks = 1, chunk = 0;  // chunks == 1: one pass over the whole R
  int64_t scratch = 0;            // values of scratch a two-pass reduction needs
};
constexpr int64_t kReduceFewOutputs = int64_t{1} << 15;  // fewer column outputs than this: cut R
constexpr int64_t kReduceColumnChunk = 256;              // R positions a column piece
constexpr int64_t kReduceFewRows = 512;                  // fewer rows than this: cut R
constexpr int64_t kReduceRowChunk = 8192;                // R positions a row piece
inline ReducePlan reduce_plan(int64_t outer, int64_t R, int64_t inner) {
  ReducePlan p{1, R, 0};
  const int64_t piece = inner > 1 ? kReduceColumnChunk : kReduceRowChunk;
  const bool few = inner > 1 ? outer * inner < kReduceFewOutputs : outer < kReduceFewRows;
  if (few && R > 2 * piece) {
    p.chunk = piece;
    p.chunks = (R + piece - 1) / piece;
    p.scratch = outer * p.chunks * inner;
  }
  return p;
}

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
