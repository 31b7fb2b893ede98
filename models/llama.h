#pragma once
// The decoder of Llama, Mistral, Qwen2 and SmolLM (a "LlamaForCausalLM"-shaped model), from the
// zoo's generic parts: token embedding, pre-norm blocks of RMSNorm -> causal self-attention with
// rotary positions and grouped-query heads -> residual, RMSNorm -> SwiGLU feed-forward ->
// residual, a final RMSNorm and a head onto the vocabulary (its own or the embedding's).
//
// W_Q, W_K, W_V and W_O are the same MultiHeadAttention Linear layers as in the 2017 model; what
// changed since is where position enters (rotating Q and K instead of adding a vector to the
// input), the norm (no centring), the feed-forward (gated) and the number of key/value heads.
#include <memory>
#include <string>

#include "attention.h"
#include "layers.h"
#include "module_io.h"
#include "transformer.h"

namespace tg {

// SwiGLU feed-forward (Shazeer, 2020): down(silu(gate(x)) * up(x)), d_model -> d_ff -> d_model.
class SwiGLU : public Module {
 public:
  SwiGLU(int64_t d_model, int64_t d_ff, bool bias = false);
  Tensor forward(const Tensor& x) const;
  std::string type_name() const override { return "SwiGLU"; }
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// The fields of a Hugging Face LlamaConfig (and Mistral's / Qwen2's) that shape the computation.
struct LlamaConfig {
  int64_t vocab = 0;              // vocab_size
  int64_t hidden = 0;             // hidden_size (d_model)
  int64_t intermediate = 0;       // intermediate_size (the SwiGLU's d_ff)
  int64_t layers = 0;             // num_hidden_layers
  int64_t heads = 0;              // num_attention_heads
  int64_t kv_heads = 0;           // num_key_value_heads (0: heads)
  int64_t head_dim = 0;           // 0: hidden / heads
  int64_t max_positions = 2048;   // max_position_embeddings (longest sequence)
  double rms_eps = 1e-6;          // rms_norm_eps
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = {};  // Llama 3.1+'s "llama3" rope_type
  bool attention_bias = false;    // biases on W_Q, W_K, W_V (Qwen2: true)
  bool mlp_bias = false;
  bool tie_word_embeddings = false;
  double init_std = 0.02;         // initializer_range: N(0, init_std) for every weight matrix
  int64_t bos_id = -1, eos_id = -1;  // bos_token_id, eos_token_id (the first, when a list); -1: none
  std::string model_type = "llama";  // llama, mistral or qwen2 (what save_pretrained writes)

  // Reads a Hugging Face config.json of model_type llama, mistral or qwen2. Keys that change the
  // computation and that this model does not implement (another hidden_act, a sliding window
  // shorter than the context, mixtures of experts, partial rotary, rope scaling other than
  // "llama3") are refused by name; informational keys are ignored. rope_theta / rope_scaling (as
  // on the hub) and rope_parameters (as transformers 5 writes) are both read.
  static Result<LlamaConfig> from_json(const std::string& path);
};

class LlamaBlock : public Module {
 public:
  LlamaBlock(const LlamaConfig& cfg, std::shared_ptr<const RotaryEmbedding> rotary);
  // x [B, T, hidden]; with a cache, x holds only the new positions.
  Tensor forward(const Tensor& x, KVCache* cache = nullptr);
  std::string type_name() const override { return "LlamaBlock"; }
  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<SwiGLU> mlp;
};

class LlamaForCausalLM : public Module, public CausalLM {
 public:
  explicit LlamaForCausalLM(const LlamaConfig& cfg);
  // ids [B, T] -> logits [B, T, vocab] (with last_only, [B, 1, vocab]: decoding needs no more).
  // With a cache (self caches only, holding kv_heads heads each), ids are the new positions, which
  // start at cache->length; cache->length + T must stay within max_positions.
  Tensor forward(const Tensor& ids, DecoderCache* cache = nullptr, bool last_only = false) override;
  int64_t vocab_size() const override { return cfg.vocab; }
  int64_t max_positions() const override { return cfg.max_positions; }
  int64_t bos_token_id() const override { return cfg.bos_id; }
  int64_t eos_token_id() const override { return cfg.eos_id; }
  Module& module() override { return *this; }
  std::string type_name() const override { return "LlamaForCausalLM"; }
  // A Hugging Face folder: config.json and model.safetensors (float32, float16 or bfloat16). The
  // configuration is checked against the file's header before anything is allocated; names are
  // strict (model.layers.N.self_attn.q_proj -> layers.N.self_attn.w_q, ...). Returns the model in
  // eval mode.
  static Result<std::unique_ptr<LlamaForCausalLM>> from_pretrained(const std::string& dir);
  // Writes DIR/config.json and DIR/model.safetensors (float32, Hugging Face's names) that
  // from_pretrained and transformers' AutoModelForCausalLM load; each file atomically. A folder
  // that already holds a config.json is refused unless overwrite.
  Status save_pretrained(const std::string& dir, bool overwrite = false) const override;
  static NameMapping hugging_face_names();
  LlamaConfig cfg;
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList<LlamaBlock>> layers;
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Linear> lm_head;  // null when tied to embed_tokens
  std::shared_ptr<RotaryEmbedding> rotary;
};

}  // namespace tg
