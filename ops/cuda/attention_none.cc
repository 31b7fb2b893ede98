// Attention on the GPU in a build without CUDA: never reached, refusing if it were.
#include "graph/error.h"
#include "ops/cuda/attention.h"

namespace tg::cuda_ops {
void attention(const AttentionArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void attention_backward(const AttentionBackwardArgs& a) { detail::fail(a.fwd.op, "this tapegrad was built without CUDA"); }
void rope(const RopeArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
}  // namespace tg::cuda_ops
