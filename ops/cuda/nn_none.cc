// The nn family's GPU entry points in a build without CUDA: never reached, refusing if they were.
#include "graph/error.h"
#include "ops/cuda/nn.h"

namespace tg::cuda_ops {
void softmax(const SoftmaxArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void softmax_backward(const SoftmaxArgs& a, const void*) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void norm(const NormArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
int64_t norm_backward_scratch(int64_t, int64_t) { return 0; }
void norm_backward(const NormBackwardArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void bias_act_backward(const BiasActArgs& a, const void*, void*, void*, void*) {
  detail::fail(a.op, "this tapegrad was built without CUDA");
}
void bias_act(const BiasActArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void class_targets(const TargetArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void cross_entropy(const CrossEntropyArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void cross_entropy_backward(const CrossEntropyArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void dropout(const DropoutArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void relu_backward_bf16(int, const char* op, const void*, const void*, void*, int64_t) {
  detail::fail(op, "this tapegrad was built without CUDA");
}
int64_t bf16_column_sums_scratch(int64_t, int64_t) { return 0; }
void bf16_backward_with_sums(int, const char* op, const void*, const void*, void*, float*, float*, int64_t, int64_t) {
  detail::fail(op, "this tapegrad was built without CUDA");
}
void causal_mask(int, const char* op, bool*, int64_t, int64_t, int64_t) {
  detail::fail(op, "this tapegrad was built without CUDA");
}
}  // namespace tg::cuda_ops
