#pragma once
// The nn family's GPU kernels (nn.cu; nn_none.cc without CUDA): row kernels for softmax and
// log-softmax, layer norm and RMS norm (saving the statistics their backward reads), bias +
// activation, the classification losses' targets and cross-entropy, and dropout. One block a row, sums in a fixed tree: the same input gives the same bits each run.
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
// Its backward from the output y and the gradient g (as ops/kernels/softmax.h): dx = y (g - sum(g
// y)), or for log-softmax dx = g - exp(y) sum(g). x holds y, y receives dx.
void softmax_backward(const SoftmaxArgs& args, const void* g);

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
  void* y_bf16 = nullptr;  // float32: also y rounded to bfloat16 here (autocast's copy for the products that read y)
};
void norm(const NormArgs& args);

// Their backward from the saved statistics: gx a row a block (layer norm: rstd (dxhat - mean(dxhat)
// - xhat mean(dxhat xhat)); RMS norm without the mean terms; dxhat = g w), and the parameters'
// gradients gw = sum over rows of g xhat, gb = sum of g, in two fixed-order passes: partial sums
// over chunks of rows, then the chunks in order (`partial`: norm_backward_scratch(rows, D)
// elements of the type). Any of gx, gw, gb may be null (not wanted).
struct NormBackwardArgs {
  int device = 0;
  const char* op = "";
  bool rms = false;
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  const void* g = nullptr;
  const void* w = nullptr;
  const void* mean = nullptr;
  const void* rstd = nullptr;
  void* gx = nullptr;
  void* gw = nullptr;
  void* gb = nullptr;
  void* partial = nullptr;
  int64_t rows = 0, D = 0;
};
int64_t norm_backward_scratch(int64_t rows, int64_t D);
void norm_backward(const NormBackwardArgs& args);

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
// Its backward: dx = g act'(x + bias) (g given, dx out; x and bias from args), and db = dx's column
// sums in the norms' two fixed-order passes (`partial`: norm_backward_scratch(rows, D) elements;
// db may be null).
void bias_act_backward(const BiasActArgs& args, const void* g, void* dx, void* db, void* partial);

// Targets of a classification loss over classes [0, C): safe[i] = target[i], or 0 where it is
// ignore_index or out of range; valid[i] = 1 where it counts, else 0, in the loss's float type. A
// target out of range that is not ignore_index raises the device's index flag (reported naming
// the op at the next synchronization).
struct TargetArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  const int64_t* target = nullptr;
  int64_t* safe = nullptr;
  void* valid = nullptr;
  int64_t n = 0, C = 0, ignore_index = -100;
};
void class_targets(const TargetArgs& args);

// Cross-entropy of rows of C logits against safe targets, label smoothing eps (as
// ops/kernels/softmax.h): lse[r] = logsumexp(x[r]); loss[r] = 0 where valid[r] is 0. backward: dx
// = g[r] valid[r] (softmax(x[r]) - (1 - eps) onehot(t[r]) - eps / C), from the saved lse.
struct CrossEntropyArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  const int64_t* target = nullptr;  // safe targets (class_targets)
  const void* valid = nullptr;
  void* loss = nullptr;  // forward: [rows]
  void* lse = nullptr;   // forward: written; backward: read
  const void* g = nullptr;  // backward: the gradient of each row's loss
  void* dx = nullptr;       // backward: [rows, C]
  int64_t rows = 0, C = 0;
  double eps = 0;
};
void cross_entropy(const CrossEntropyArgs& args);
void cross_entropy_backward(const CrossEntropyArgs& args);

// Dropout, bit for bit the CPU's mask (math::dropout_element): y = x scaled where kept. With
// row_keys (device memory, one key a row of `len` elements), element j of row r is counter j of
// row_keys[r]; without, element i of the n is counter i of `key`.
struct DropoutArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  void* y = nullptr;
  int64_t n = 0, len = 1;
  const uint64_t* row_keys = nullptr;
  uint64_t key = 0;
  const uint64_t* key_at = nullptr;  // device memory: the key, read there when set (a CUDA graph's step value)
  uint32_t threshold = 0;
  double scale = 1;
  // float32/float64: y = residual + dropout(x), the sum rounded separately from the product (the
  // same bits as the two ops), where residual is given (x's shape).
  const void* residual = nullptr;
  // float32: also y's bfloat16 rounding (the bits a cast writes), where given: autocast's copy of a
  // gradient for the product that reads it.
  void* y_bf16 = nullptr;
};
void dropout(const DropoutArgs& args);  // float32, float64, or bfloat16 (computed in float32, rounded once)

// d = g where y > 0, else 0, for n bfloat16 elements (a ReLU's backward from its kept output).
void relu_backward_bf16(int device, const char* op, const void* g, const void* y, void* d, int64_t n);
// The backward of a bfloat16 linear's output over rows of D in one pass: d = g where y > 0 (y null:
// d = g; d null: not written) and the bias's gradient db = the column sums of d in float32, summed
// in a fixed order (a chunk of rows at a time into `partial`, then the chunks in order: the
// norms' two passes). partial: bf16_column_sums_scratch(rows, D) float32s.
int64_t bf16_column_sums_scratch(int64_t rows, int64_t D);
void bf16_backward_with_sums(int device, const char* op, const void* g, const void* y, void* d, float* db, float* partial,
                             int64_t rows, int64_t D);

// m[i, j] = j > i + offset for a bool [T, S] (causal_mask, made on the device: nothing copied from
// the host, so a CUDA graph can record it).
void causal_mask(int device, const char* op, bool* m, int64_t T, int64_t S, int64_t offset);

}  // namespace tg::cuda_ops
