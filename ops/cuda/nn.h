#pragma once
// The nn family's GPU kernels (nn.cu; nn_none.cc without CUDA): row kernels for softmax and
// log-softmax, layer norm and RMS norm (saving the statistics their backward reads), and bias +
// activation. One block a row, sums in a fixed tree: the same input gives the same bits each run.
#include <cstdint>

#include "elementwise.h"

namespace tg::cuda_ops {

// softmax (or log-softmax) along the middle axis of [outer, D, inner], float32 or float64.
struct SoftmaxArgs {
  int device = 0;
  const char* op = "";
  bool log = false;
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  void* y = nullptr;
  int64_t outer = 1, D = 1, inner = 1;
};
void softmax(const SoftmaxArgs& args);

// Layer norm (rms = false) or RMS norm (rms = true) over rows of D: y = (x - mean) rstd w + b, or
// y = x rstd w; mean (layer norm only) and rstd saved per row; w and b may be null.
struct NormArgs {
  int device = 0;
  const char* op = "";
  bool rms = false;
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  void* y = nullptr;
  void* mean = nullptr;
  void* rstd = nullptr;
  int64_t rows = 0, D = 0;
  double eps = 1e-5;
};
void norm(const NormArgs& args);

// y = act(x + bias) over rows of D; act is one of math::Unary's codes (kAffine with a = 1, b = 0
// for the identity, kRelu, kGeluErf, kGeluTanh).
struct BiasActArgs {
  int device = 0;
  const char* op = "";
  math::Unary act = math::Unary::kAffine;
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  int64_t rows = 0, D = 0;
};
void bias_act(const BiasActArgs& args);

}  // namespace tg::cuda_ops
