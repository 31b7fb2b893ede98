// Products on the GPU in a build without CUDA: never reached, refusing if they were.
#include "graph/error.h"
#include "ops/cuda/matmul.h"

namespace tg::cuda_ops {
void gemm(const GemmArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
}  // namespace tg::cuda_ops
