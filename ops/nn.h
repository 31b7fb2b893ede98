#pragma once
// Neural-network ops: softmax family, losses, normalisation, dropout and attention masks.
#include <optional>

#include "../graph/tensor.h"

namespace tg {

Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

enum class Reduction {
  kMean,
  kSum,
  kNone,
  Mean [[deprecated("use kMean")]] = kMean,  // the names before 0.2, kept for one release
  Sum [[deprecated("use kSum")]] = kSum,
  None [[deprecated("use kNone")]] = kNone,
};

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::kMean;
  // Class weights [C] (undefined: all 1), as PyTorch's `weight`: a target of class c counts w[c]
  // times, the smoothing term weighs class c by w[c], and Mean divides by the sum of the targets'
  // weights (not by their number).
  Tensor weight = {};
};
// logits [..., C] (classes on the last axis) and int64 targets [...]. Mean is over the targets
// that are not ignore_index, as in PyTorch.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts = {});
// log_probs [..., C], targets [...]: -w[target] log_probs[target] (w: `weight` [C], or all 1);
// Mean divides by the sum of the counted targets' weights, as PyTorch's nll_loss.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index = -100,
                Reduction reduction = Reduction::kMean, const Tensor& weight = {});
// Numerically stable sigmoid + binary cross entropy; target has the logits' shape (or broadcasts).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::kMean);

// word2vec's negative-sampling loss, fused: input [B, D] (the centre word's vector, or CBOW's
// context mean), output [B, 1 + K, D] (the true context's output vector, then K negatives'):
// loss_b = -log σ(u_b·v_b0) - Σ_k log σ(-u_b·v_bk). Reduction over B (None gives [B]).
Tensor negative_sampling_loss(const Tensor& input, const Tensor& output, Reduction reduction = Reduction::kSum);
// Normalises over the last normalized_ndim dims; weight and bias (optional) have those dims.
// Fused forward and backward kernels (mean and 1/std saved for backward).
Tensor layer_norm(const Tensor& x, int64_t normalized_ndim, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// Root-mean-square norm (Zhang & Sennrich, 2019; Llama, Mistral, Qwen2): over the last dim,
// y = x / sqrt(mean(x²) + eps) * weight, weight [D] optional. No centring and no bias, unlike
// layer_norm. Fused forward and backward (1/rms saved per row).
Tensor rms_norm(const Tensor& x, const Tensor& weight = Tensor(), double eps = 1e-6);

// act(x + bias) in one pass, bias [D] broadcast over the rows of x [..., D] (the first half of a
// feed-forward block after its matmul). Backward fused too: dx = g act'(x + b), dbias = its column
// sums (in fixed row blocks, so the sum does not depend on the thread count).
enum class Activation {
  kIdentity,
  kRelu,
  kGelu,
  kGeluTanh,
  Identity [[deprecated("use kIdentity")]] = kIdentity,  // the names before 0.2, kept for one release
  Relu [[deprecated("use kRelu")]] = kRelu,
  Gelu [[deprecated("use kGelu")]] = kGelu,
  GeluTanh [[deprecated("use kGeluTanh")]] = kGeluTanh,
};
Tensor bias_act(const Tensor& x, const Tensor& bias, Activation act);

// Zeroes elements with probability p and scales the rest by 1/(1-p) when training; identity
// otherwise. The mask comes from the global generator (tg::manual_seed).
Tensor dropout(const Tensor& x, double p, bool training = true);

// Attention masks: true marks a position that must NOT be attended to (filled with -inf).
// [T, T]: true above the diagonal (key j > query i); [T, S] for T queries and S keys.
Tensor causal_mask(int64_t T);
Tensor causal_mask(int64_t T, int64_t S, int64_t offset = 0);  // key j hidden from query i when j > i + offset
Tensor causal_mask(int64_t T, int64_t S, int64_t offset, Device device);  // the same, made on `device`
// ids [B, T] -> bool [B, T]: true where ids == pad_id.
Tensor padding_mask(const Tensor& ids, int64_t pad_id);

}  // namespace tg
