#pragma once
// Autocast with float32 master weights, as PyTorch's torch.autocast("cpu", torch.bfloat16): inside
// an AutocastGuard's scope (thread-local, nestable) the float32 matrix products — matmul, Linear,
// batched matmul — take bfloat16 inputs and sum in float32, forward and in both backward products
// (dX and dW, whenever backward runs); everything else (softmax, layer norm, losses, reductions,
// the optimizer, clipping) stays float32, and so do parameters, activations between ops and
// gradients. Inputs are rounded to bfloat16 inside the product's packing, never by a pass of their
// own; a float32 weight (a leaf tensor) is rounded and packed once and reused until it changes (its
// storage's version: in-place ops and optimizer steps bump it). float64 is never autocast, so
// gradcheck is unaffected. The fused attention (scaled_dot_product_attention) stays float32 on the
// CPU; on a GPU, attention being trained (inputs that need a gradient, head size 32/64/128) runs on
// tensor cores in bfloat16 with a float32 output, as PyTorch's CUDA autocast runs it.
//
//   {
//     tg::AutocastGuard autocast(tg::kBFloat16);
//     Tensor loss = tg::cross_entropy(model.forward(x), y);
//     loss.backward();
//   }
//   opt.step();
#include "../graph/shape.h"
#include "../graph/tensor.h"
#include "matmul.h"  // refresh_autocast_packs moved there in 0.2; included here until 0.3

namespace tg {

class AutocastGuard {
 public:
  // dtype: kBFloat16 (the only reduced precision), or kFloat32 to turn autocast off in a scope.
  explicit AutocastGuard(DType dtype = kBFloat16);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_;
};

// Whether float32 products on this thread run in bfloat16 now.
bool autocast_enabled();

}  // namespace tg
