// The optimizers' GPU entry points in a build without CUDA: never reached, refusing if they were.
#include "graph/error.h"
#include "ops/cuda/optim.h"

namespace tg::cuda_ops {
void optimizer_step(const OptimArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
int64_t blocks_for_norm(const OptimTable&) { return 0; }
void grad_norm(const GradNormArgs& a) { detail::fail(a.op, "this tapegrad was built without CUDA"); }
void scale_grads(int, const char* op, Scalar, const OptimTable&, const double*) {
  detail::fail(op, "this tapegrad was built without CUDA");
}
void check_finite(int, const char* op, Scalar, const void*, int64_t, int64_t*, int64_t, const int64_t*) {
  detail::fail(op, "this tapegrad was built without CUDA");
}
}  // namespace tg::cuda_ops
