#pragma once
// Attention, as in "Attention Is All You Need" (Vaswani et al., 2017), section 3.2.
//
//   Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
//   MultiHead(X_q, X_kv) = Concat(head_1, ..., head_h) W_O,  head_i = Attention(X_q W_Q_i, X_kv W_K_i, X_kv W_V_i)
//
// W_Q, W_K, W_V and W_O are four ordinary Linear layers: parameters like any other, randomly
// initialised, reached by the same backward pass and updated by the same optimizer step as the
// embedding table. The h heads are the h slices of width d_k = d_model / h of their outputs.
#include <functional>
#include <memory>

#include "layers.h"
#include "../ops/attention.h"

namespace tg {

// Which keys each query may not see (true = hidden, as PyTorch's bool masks).
struct AttentionMask {
  bool causal = false;       // key j hidden from query i when j > i + causal_offset
  Tensor key_padding = {};   // bool [B, S]: padded keys of each sequence (all S keys, cached ones too)
  Tensor mask = {};          // any bool mask broadcastable to [B, heads, T, S]
  int64_t causal_offset = 0; // the queries' first position among the keys (MultiHeadAttention adds
                             // its cache's length itself)
};

// Keys and values kept between calls for incremental decoding, one per attention module: each
// call then feeds only the new positions. Self-attention appends their keys and values;
// cross-attention (fixed) projects the encoder output once and reuses it.
//
// k and v have room past length() positions: when no gradient flows through the cache (decoding
// under NoGradGuard), a step writes its keys and values in place after the cached ones and the
// room doubles when full, so a step copies only its own positions, never the whole cache. When a
// gradient does flow, the cache is joined with the new keys by concat (differentiable), and
// k and v hold exactly length() positions.
struct KVCache {
  Tensor k = {}, v = {};  // [B, heads, capacity, d_k]; undefined until the first call
  bool fixed = false;     // true: computed once from x_kv, then reused (x_kv is not read again)
  int64_t reserve = 0;    // positions to make room for at the first in-place append (0: 64)
  int64_t length() const { return len; }
  Tensor keys() const;    // [B, heads, length(), d_k] (a copy when there is room past length())
  Tensor values() const;
  // Appends new keys and values [B, heads, T, d_k] (after length()).
  void append(const Tensor& new_k, const Tensor& new_v);
  // Keeps batch rows `rows` (int64 [B']), in that order, repeating or dropping rows: beam search
  // follows each surviving hypothesis's parent.
  void reorder(const Tensor& rows);
  void clear() {
    k = v = Tensor();
    len = 0;
  }
  int64_t len = 0;  // positions held (the first len of k's and v's dim 2)
};

// softmax(q kᵀ · scale + mask) v over q [..., T, d_k], k [..., S, d_k], v [..., S, d_v]
// (scale 0 means 1/√d_k; pass 1 to see what happens without the scaling). With need_weights it is
// computed from generic ops and returns the weights [..., T, S]; otherwise it runs the fused
// flash-attention kernel, which never stores them (nor dropout's mask on them: dropout_p draws the
// same mask in both forms).
// key_padding is only meaningful for 4-D [B, heads, T, d] inputs.
AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionMask& mask = {}, bool need_weights = false,
                                             double dropout_p = 0.0, double scale = 0.0);

// The shape of a MultiHeadAttention beyond the paper's (d_model, heads): grouped-query attention
// (Llama 2 70B, Llama 3, Mistral, Qwen2: kv_heads < heads, 1 = multi-query), a head size other
// than d_model / heads, and which projections have a bias (Qwen2: Q, K and V only; Llama: none).
struct AttentionConfig {
  int64_t d_model = 512, heads = 8;
  int64_t kv_heads = 0;   // key/value heads (0: heads); heads must be a multiple of it
  int64_t head_dim = 0;   // d_k (0: d_model / heads)
  bool qkv_bias = true;   // W_Q, W_K, W_V
  bool out_bias = true;   // W_O
  double attn_dropout = 0.0;
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t num_heads, double attn_dropout = 0.0, bool bias = true);
  // W_Q [heads·d_k, d_model], W_K and W_V [kv_heads·d_k, d_model], W_O [d_model, heads·d_k].
  explicit MultiHeadAttention(const AttentionConfig& cfg);

  // Self-attention: forward(x, x, mask). Cross-attention: queries from the decoder (x_q [B, T, D]),
  // keys and values from the encoder output (x_kv [B, S, D]). Returns [B, T, D].
  // With a cache (incremental decoding), x_q and x_kv hold only the new positions: their keys and
  // values are appended to the cache and the queries attend to all of it, the causal mask shifted
  // by the cached length; a fixed cache, once filled, is used instead of projecting x_kv.
  Tensor forward(const Tensor& x_q, const Tensor& x_kv, const AttentionMask& mask = {}, KVCache* cache = nullptr);
  // The same, also returning the attention weights [B, heads, T, S].
  AttentionResult forward_with_weights(const Tensor& x_q, const Tensor& x_kv, const AttentionMask& mask = {},
                                       KVCache* cache = nullptr);

  std::string type_name() const override { return "MultiHeadAttention"; }
  int64_t d_model, num_heads, num_kv_heads, d_k;
  double attn_dropout;
  // When set, every forward keeps its weights (detached) in last_weights: for attention maps.
  bool record_weights = false;
  Tensor last_weights;
  double scale = 0.0;  // 0: 1/√d_k (the paper); other values for experiments
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
  // When set, Q and K are rotated by their positions after the projection (the cache's length is
  // the first new position), before the cache stores K: rotary positions. Shared by the layers
  // of a model; not a child (it has no parameters).
  std::shared_ptr<const RotaryEmbedding> rotary;

 private:
  AttentionResult run(const Tensor& x_q, const Tensor& x_kv, const AttentionMask& mask, bool need_weights,
                      KVCache* cache);
};

// How the attention projections W_Q, W_K and W_V (weights and biases) are trained: an ablation
// (train_translator --projections, explain_attention's experiment 2). Learned: as usual. Identity:
// W = I, b = 0 (Q = K = V = X), not trained. Frozen: kept at their random initialisation.
enum class Projections {
  kLearned,
  kIdentity,
  kFrozen,
  Learned [[deprecated("use kLearned")]] = kLearned,  // the names before 0.2, kept for one release
  Identity [[deprecated("use kIdentity")]] = kIdentity,
  Frozen [[deprecated("use kFrozen")]] = kFrozen,
};
// Applies `how` to every MultiHeadAttention inside m (its w_q, w_k and w_v children). Call it
// before the optimizer is made: fixed parameters are not handed to it. Identity needs square
// projections (not grouped-query attention); anything else throws, naming the parameter.
void fix_attention_projections(Module& m, Projections how);

// Every MultiHeadAttention inside m (m itself included), in the order the modules were registered
// (encoder before decoder, layer 0 first; in a layer, self- before cross-attention).
std::vector<MultiHeadAttention*> attention_modules(Module& m);
// The attention weights of every MultiHeadAttention inside m during `forward` (transformers'
// output_attentions=True): one [B, heads, T, S] tensor per module, in attention_modules' order,
// detached; undefined for a module the forward did not run (the last call's, if it ran twice).
// Each module's record_weights and last_weights are restored afterwards, also when forward throws.
// Mode and gradients are the caller's: run it in eval mode to see weights without dropout.
//   auto maps = tg::record_attention(model, [&] { model.forward(ids); });
std::vector<Tensor> record_attention(Module& m, const std::function<void()>& forward);

}  // namespace tg
