#pragma once
// The transformer family: feed-forward block, encoder and decoder layers and stacks, and three
// models — the paper's encoder-decoder Transformer, a decoder-only language model (GPT-style)
// and an encoder-only masked language model (BERT-style).
//
// Post-norm (the paper, and PyTorch's default):  x = LayerNorm(x + Dropout(Sublayer(x)))
// Pre-norm (norm_first, GPT-2 and most modern models): x = x + Dropout(Sublayer(LayerNorm(x)))
#include <memory>
#include <vector>

#include "attention.h"
#include "layers.h"
#include "module_io.h"

namespace tg {

struct LayerConfig {
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t d_ff = 2048;
  double dropout = 0.1;       // on each sublayer's output, the FFN's hidden layer and the inputs
  double attn_dropout = 0.0;  // on the attention weights (PyTorch uses `dropout` there too); the
                              // fused kernel draws it, the mask never stored
  Activation activation = Activation::kRelu;
  bool norm_first = false;
  double eps = 1e-5;
};

// FFN(x) = act(x W_1ᵀ + b_1) W_2ᵀ + b_2, d_model -> d_ff -> d_model (the paper's eq. 2).
class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, Activation act = Activation::kRelu, double dropout = 0.0);
  Tensor forward(const Tensor& x) const;
  std::string type_name() const override { return "FeedForward"; }
  Activation activation;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout;
};

// Self-attention then feed-forward, each with a residual connection and a layer norm.
// With a causal mask it is also the block of a decoder-only model.
class EncoderLayer : public Module {
 public:
  explicit EncoderLayer(const LayerConfig& cfg);
  // With a cache (a decoder-only model's incremental decoding), x holds only the new positions.
  Tensor forward(const Tensor& x, const AttentionMask& mask = {}, KVCache* cache = nullptr);
  std::string type_name() const override { return "EncoderLayer"; }
  LayerConfig cfg;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;
};

// Masked self-attention, cross-attention over the encoder output (queries from the decoder,
// keys and values from memory), then feed-forward.
class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(const LayerConfig& cfg);
  // With caches (incremental decoding), x holds only the new target positions; cross_cache keeps
  // the projected memory (mark it fixed).
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask = {.causal = true},
                 const AttentionMask& memory_mask = {}, KVCache* self_cache = nullptr, KVCache* cross_cache = nullptr);
  std::string type_name() const override { return "DecoderLayer"; }
  LayerConfig cfg;
  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;
};

// N layers and an optional final layer norm (`norm`, as torch.nn.TransformerEncoder's).
class Encoder : public Module {
 public:
  Encoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm = true);
  Tensor forward(const Tensor& x, const AttentionMask& mask = {});
  std::string type_name() const override { return "Encoder"; }
  std::shared_ptr<ModuleList<EncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  // null without a final norm
};

// The key/value caches of a decoder stack for incremental decoding (greedy, beam search,
// sampling): each call feeds only the new positions, which attend to everything before them
// without recomputing it. `length` is the number of positions fed so far (the next one's
// position); reorder() follows beam search's choice of parents.
struct DecoderCache {
  std::vector<KVCache> self, cross;  // one per layer (cross: the encoder output, projected once)
  int64_t length = 0;
  // Positions the self-attention caches make room for when first filled (0: they start at 64 and
  // double): set it to the prompt plus the tokens to generate, and no step reallocates.
  int64_t reserve = 0;
  void reorder(const Tensor& rows);
  void clear();
  // Sizes an empty cache for `layers` layers (cross caches too when with_cross); a cache filled
  // by a stack of another depth is an error naming `who`.
  void prepare(size_t layers, bool with_cross, const char* who);
};

class Decoder : public Module {
 public:
  Decoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm = true);
  // With a cache, x holds only the new positions and cache->length grows by their number.
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask = {.causal = true},
                 const AttentionMask& memory_mask = {}, DecoderCache* cache = nullptr);
  std::string type_name() const override { return "Decoder"; }
  std::shared_ptr<ModuleList<DecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

struct TransformerConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;
  LayerConfig layer = {};
  int64_t encoder_layers = 6, decoder_layers = 6;
  int64_t max_len = 1024;
  int64_t pad_id = 0;
  bool share_embeddings = false;  // one table for source and target (needs src_vocab == tgt_vocab)
  bool tie_generator = false;     // generator weight = target embedding (no generator bias then)
  // The paper's base model: d_model 512, 8 heads, d_ff 2048, 6 + 6 layers, dropout 0.1.
  static TransformerConfig base(int64_t src_vocab, int64_t tgt_vocab);
};

// The encoder-decoder model: token embeddings scaled by √d_model plus sinusoidal positions,
// Encoder, Decoder (causal self-attention, cross-attention on the encoder output), and a
// generator (Linear to the target vocabulary). The pad id hides padded source keys.
class Transformer : public Module {
 public:
  explicit Transformer(const TransformerConfig& cfg);
  // src [B, S], tgt [B, T] int64 ids -> logits [B, T, tgt_vocab] (tgt is the shifted-right input).
  // Source positions equal to pad_id are hidden from attention; tgt_key_padding (bool [B, T],
  // true = padding, as PyTorch's tgt_key_padding_mask) hides target positions from the decoder's
  // self-attention.
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& tgt_key_padding = {});
  Tensor encode(const Tensor& src);                                         // -> memory [B, S, D]
  // -> logits [B, T, V]; with last_only, of the last position only [B, 1, V] (decoding needs no more).
  // With a cache, tgt holds only the new positions (their positions start at cache->length) and
  // tgt_key_padding, if given, covers all cache->length + T positions.
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& src, bool last_only = false,
                DecoderCache* cache = nullptr, const Tensor& tgt_key_padding = {});
  void set_record_attention(bool on);  // keep every MultiHeadAttention's weights (for maps)
  std::string type_name() const override { return "Transformer"; }
  TransformerConfig cfg;
  std::shared_ptr<Embedding> src_embed, tgt_embed;
  std::shared_ptr<SinusoidalPositionalEncoding> pos;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<Linear> generator;  // null when tied

 private:
  Tensor embed(const Embedding& e, const Tensor& ids, int64_t start = 0);
};

// What text generation (tg::sample, the generate program) needs from a decoder-only language
// model, whatever its architecture: DecoderLM (GPT-2) and LlamaForCausalLM (Llama, Mistral, Qwen2).
// load_causal_lm (models/causal_lm.h) makes one from a Hugging Face folder.
class CausalLM {
 public:
  virtual ~CausalLM() = default;
  // ids [B, T] -> logits [B, T, vocab] ([B, 1, vocab] with last_only); with a cache, ids are the
  // new positions, which start at cache->length.
  virtual Tensor forward(const Tensor& ids, DecoderCache* cache = nullptr, bool last_only = false) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_positions() const = 0;  // the longest sequence it takes
  virtual int64_t bos_token_id() const = 0;   // -1: none
  virtual int64_t eos_token_id() const = 0;   // -1: none
  virtual Module& module() = 0;               // its parameters, train/eval mode, dtype
  // Writes DIR/config.json and DIR/model.safetensors in its Hugging Face form (float32), which
  // load_causal_lm and transformers load; each file atomically; a folder that already holds a
  // config.json is refused unless overwrite.
  virtual Status save_pretrained(const std::string& dir, bool overwrite = false) const = 0;
};

struct MLMConfig {
  int64_t vocab = 0;
  int64_t context = 512;
  LayerConfig layer = {.activation = Activation::kGelu};
  int64_t layers = 4;
  int64_t pad_id = 0;
};

// BERT-style encoder-only masked language model: embeddings + layer norm, post-norm encoder
// layers, an MLM head (dense + GELU + layer norm, then the tied embedding and a bias).
class MaskedLM : public Module {
 public:
  explicit MaskedLM(const MLMConfig& cfg);
  Tensor forward(const Tensor& ids);   // [B, T] -> logits [B, T, vocab]; pad keys hidden
  Tensor encode(const Tensor& ids);    // [B, T] -> hidden states [B, T, d_model]
  std::string type_name() const override { return "MaskedLM"; }
  MLMConfig cfg;
  std::shared_ptr<Embedding> tok_embed;
  std::shared_ptr<LearnedPositionalEmbedding> pos_embed;
  std::shared_ptr<LayerNorm> embed_norm;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<ModuleList<EncoderLayer>> layers;
  std::shared_ptr<Linear> mlm_dense;
  std::shared_ptr<LayerNorm> mlm_norm;
  Tensor mlm_bias;
};

// BERT's masking: each non-pad token is chosen with probability p; of those 80% become mask_id,
// 10% a random token, 10% stay. Returns the inputs and the labels (the original id where chosen,
// -100 elsewhere: cross_entropy's default ignore_index). Draws from tg::manual_seed's generator.
struct MaskedBatch {
  Tensor inputs, labels;
};
MaskedBatch mask_tokens(const Tensor& ids, int64_t mask_id, int64_t vocab, double p = 0.15, int64_t pad_id = 0,
                        int64_t first_regular_id = 0);

}  // namespace tg

// DecoderLM and LMConfig moved to models/gpt2.h in 0.2; included here until 0.3.
#include "gpt2.h"  // IWYU pragma: export
