#pragma once
// Scaled dot-product attention: softmax(q kᵀ · scale + mask) v.
#include "../graph/tensor.h"

namespace tg {

// How flash_attention's tensors hold their heads.
enum class AttentionLayout {
  kHeadsFirst,   // q [..., T, d], k [..., S, d], v [..., S, dv] -> [..., T, dv]: heads among the
                 // leading dims, [B, H, T, d] (PyTorch's scaled_dot_product_attention)
  kTokensFirst,  // q [B, T, H, d], k [B, S, H_kv, d], v [B, S, H_kv, dv] -> [B, T, H, dv]
                 // (FlashAttention's): a projection [B, T, H d] reshaped, no copy to split heads
};

struct AttentionOptions {
  bool causal = false;  // key j is hidden from query i when j > i + causal_offset (top-left aligned
                        // as PyTorch's is_causal when the offset is 0)
  int64_t causal_offset = 0;  // the queries' first position among the keys: with a key/value cache,
                              // T new queries after `causal_offset` cached keys
  Tensor mask = {};     // optional bool, broadcastable to [..., T, S]; true = hidden (e.g. padding)
  double scale = 0;     // 0: 1 / sqrt(d)
  int64_t kv_length = 0;  // > 0: only the first kv_length keys and values (dim -2) are read, the
                          // filled part of a preallocated cache; masks then cover [..., T, kv_length]
  double dropout = 0;     // in [0, 1): dropout on the weights (training): the mask dropout(weights, p)
                          // would draw from the same seed (or SampleKeyScope), never stored
  // kTokensFirst: the same attention with heads inside the tokens. Masks, kv_length (dim 1 then) and
  // dropout's weights stay [B, H, T, S]; the result equals the permuted kHeadsFirst one bit for bit.
  // GPU tensor cores read and write it in place; elsewhere it is permuted around kHeadsFirst.
  AttentionLayout layout = AttentionLayout::kHeadsFirst;
};

// Fused (flash-attention) form: q [..., T, d], k [..., S, d], v [..., S, dv] with the same leading
// dims; returns [..., T, dv]. Grouped-query attention: k and v may have fewer heads than q in dim
// -3 (q [B, H, T, d], k and v [B, H_kv, S, d], H a multiple of H_kv); query head h then reads
// key/value head h / (H / H_kv), as Hugging Face's repeat_kv, without copying them. The T x S weights are never stored: memory grows linearly in T.
// A query row that sees no key at all gets a zero output (the unfused form gives NaN there).
// bfloat16 q, k, v are computed in float32 and the output rounded to bfloat16 once; on a GPU with
// head size 32, 64 or 128 they take the tensor-core kernels instead (forward and backward: float32
// sums, the weights rounded to bfloat16 before they meet v, as FlashAttention-2).
// Differentiable once (its backward is a fused kernel); use attention_unfused for higher order.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts = {});

// The same from generic ops (matmul, masked_fill, softmax, matmul), returning the weights too:
// the reference the fused kernel is tested against, and the path that can show attention maps.
struct AttentionResult {
  Tensor output;
  Tensor weights;  // [..., T, S]
};
AttentionResult attention_unfused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts = {});

// x [..., H_kv, S, d] -> [..., H_kv * n_rep, S, d], each head repeated n_rep times in place
// (head j becomes heads j n_rep ... j n_rep + n_rep - 1): grouped-query keys and values made into
// one per query head (a copy; the gradient sums each group back).
Tensor repeat_kv(const Tensor& x, int64_t n_rep);

// Rotary position embedding (Su et al., 2021, "RoFormer"), in the half-split layout of Hugging
// Face's Llama: x [..., T, d] (d even); element i of each row pairs with element i + d/2 and the
// pair turns by the angle of that row's position:
//   y[i] = x[i] cos[t, i] - x[i + d/2] sin[t, i],   y[i + d/2] = x[i + d/2] cos[t, i] + x[i] sin[t, i]
// cos and sin [T, d/2] hold the angles' cosines and sines (RotaryEmbedding makes them from the
// positions and rope_theta) in x's dtype; they are constants: no gradient flows to them. q·k of a
// rotated query and key then depends on their positions only through the difference.
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin);

namespace detail {
// flash_attention's backward from public ops (what a GPU runs for float32 and float64): (dq, dk,
// dv) for the output `out`, the saved per-row log-sum-exp `lse` [..., T] and the gradient g.
// Exposed so that the CPU's tests check it against the CPU's fused kernel. With opts.dropout it
// draws the call's keys afresh, as flash_attention did: to draw the same mask, reseed the
// generator (inside a SampleKeyScope, make the scope anew) before each.
std::vector<Tensor> flash_attention_backward_from_ops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                        const Tensor& lse, const Tensor& g, const AttentionOptions& opts);
}  // namespace detail

}  // namespace tg
