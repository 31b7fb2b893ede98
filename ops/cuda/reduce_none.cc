// The reduction GPU entry points in a build without CUDA: never reached, refusing if they were.
#include "graph/error.h"
#include "ops/cuda/reduce.h"

namespace tg::cuda_ops {
void reduce(const ReduceArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void arg_reduce(const ArgReduceArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
}  // namespace tg::cuda_ops
