// The shape family's GPU entry points in a build without CUDA: never reached, refusing if they were.
#include "graph/error.h"
#include "ops/cuda/shape.h"

namespace tg::cuda_ops {
void strided_copy(const CopyArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void index_select(const IndexSelectArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void gather(const GatherArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
size_t index_add_scratch_bytes(int64_t, int64_t) { return 0; }
void scatter_add(const ScatterAddArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
}  // namespace tg::cuda_ops
