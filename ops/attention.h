#pragma once
// Scaled dot-product attention: softmax(q kᵀ · scale + mask) v.
#include "../graph/tensor.h"

namespace tg {

struct AttentionOptions {
  bool causal = false;  // key j is hidden from query i when j > i + causal_offset (top-left aligned
                        // as PyTorch's is_causal when the offset is 0)
  int64_t causal_offset = 0;  // the queries' first position among the keys: with a key/value cache,
                              // T new queries after `causal_offset` cached keys
  Tensor mask = {};     // optional bool, broadcastable to [..., T, S]; true = hidden (e.g. padding)
  double scale = 0;     // 0: 1 / sqrt(d)
};

// Fused (flash-attention) form: q [..., T, d], k [..., S, d], v [..., S, dv] with the same leading
// dims; returns [..., T, dv]. The T x S weights are never stored: memory grows linearly in T.
// A query row that sees no key at all gets a zero output (the unfused form gives NaN there).
// Differentiable once (its backward is a fused kernel); use attention_unfused for higher order.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts = {});

// The same from generic ops (matmul, masked_fill, softmax, matmul), returning the weights too:
// the reference the fused kernel is tested against, and the path that can show attention maps.
struct AttentionResult {
  Tensor output;
  Tensor weights;  // [..., T, S]
};
AttentionResult attention_unfused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts = {});

}  // namespace tg
