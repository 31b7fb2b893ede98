#pragma once
// GPT-2: the zoo's decoder-only language model (token embeddings and positions, pre-norm blocks of
// causal self-attention, a final layer norm, a head onto the vocabulary), which also loads and
// writes Hugging Face GPT-2 folders.
//
//   auto lm = tg::DecoderLM::from_pretrained("models/gpt2").value();
//   tg::Tensor logits = lm->forward(ids);  // [B, T, vocab]
#include <cstdint>
#include <memory>
#include <string>

#include "../io/status.h"
#include "layers.h"
#include "module_io.h"
#include "transformer.h"

namespace tg {

// Where a DecoderLM's tokens get their order from.
enum class Positions {
  kLearned,     // a learned vector per position added to the input (GPT-2): `context` of them
  kSinusoidal,  // the 2017 paper's fixed sines and cosines added to the input (token embeddings
                // scaled by √d_model, as there)
  kRotary,      // Q and K of every layer rotated by their positions (RoFormer; Llama): nothing is
                // added to the input, and the scores depend on the distance between positions only
};

struct LMConfig {
  int64_t vocab = 0;
  int64_t context = 256;  // the longest sequence (learned positions)
  LayerConfig layer = {.activation = Activation::kGelu, .norm_first = true};
  int64_t layers = 4;
  bool tie_weights = true;  // lm_head shares the token embedding
  int64_t bos_id = -1, eos_id = -1;  // from a GPT-2 config.json (bos_token_id, eos_token_id); -1: none
  Positions positions = Positions::kLearned;  // GPT-2's; the others have no GPT-2 form (save_pretrained)
  double rope_theta = 10000.0;                // with Positions::kRotary
  double embed_dropout = -1;  // on the embeddings (GPT-2's embd_pdrop); < 0: layer.dropout (resid_pdrop)

  // Reads a Hugging Face GPT-2 config.json (model_type gpt2): n_embd, n_layer, n_head, n_inner,
  // n_positions, activation_function (gelu_new / gelu_pytorch_tanh, gelu, relu), layer_norm_epsilon,
  // the dropouts, tie_word_embeddings. What would change the computation and is not implemented
  // (scale_attn_weights false, scale_attn_by_inverse_layer_idx, cross-attention) is refused by name.
  static Result<LMConfig> from_json(const std::string& path);
};

// GPT-style decoder-only language model: token embeddings (+ positions, LMConfig::positions), pre-norm blocks
// with causal self-attention, a final layer norm and a head onto the vocabulary. GPT-2's
// architecture: DecoderLM::from_pretrained loads Hugging Face GPT-2 checkpoints.
class DecoderLM : public Module, public CausalLM {
 public:
  explicit DecoderLM(const LMConfig& cfg);
  // [B, T] -> logits [B, T, vocab] (with last_only, [B, 1, vocab]). With a cache (self caches
  // only), ids are the new positions, which start at cache->length (cache->length + T must stay
  // within the context).
  Tensor forward(const Tensor& ids, DecoderCache* cache = nullptr, bool last_only = false) override;
  int64_t vocab_size() const override { return cfg.vocab; }
  int64_t max_positions() const override { return cfg.context; }
  int64_t bos_token_id() const override { return cfg.bos_id; }
  int64_t eos_token_id() const override { return cfg.eos_id; }
  Module& module() override { return *this; }
  // A Hugging Face GPT-2 folder: config.json and model.safetensors (or its shards; float32,
  // float16 or bfloat16), names with or without "transformer.". Conv1D weights (stored [in, out])
  // are transposed and the fused c_attn is split into W_Q, W_K, W_V; the attn.bias mask buffers
  // are ignored. The config is checked against the header before allocating. Eval mode.
  static Result<std::unique_ptr<DecoderLM>> from_pretrained(const std::string& dir);
  // Writes a GPT-2 folder (config.json, model.safetensors with Conv1D's [in, out] weights and the
  // fused c_attn) that from_pretrained and transformers' GPT2LMHeadModel load; each file
  // atomically; a folder holding a config.json is refused unless overwrite. Pre-norm models with
  // learned positions and GELU (tanh or erf) or ReLU only (GPT-2's architecture).
  Status save_pretrained(const std::string& dir, bool overwrite = false) const override;
  static NameMapping hugging_face_names();
  void set_record_attention(bool on);
  std::string type_name() const override { return "DecoderLM"; }
  LMConfig cfg;
  std::shared_ptr<Embedding> tok_embed;
  std::shared_ptr<LearnedPositionalEmbedding> pos_embed;  // Positions::kLearned only
  std::shared_ptr<SinusoidalPositionalEncoding> pos_sin;   // Positions::kSinusoidal only
  std::shared_ptr<RotaryEmbedding> rotary;                 // Positions::kRotary only (every layer's self_attn->rotary)
  std::shared_ptr<Dropout> dropout;  // on the embeddings (cfg.embed_dropout)
  std::shared_ptr<ModuleList<EncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> lm_head;  // null when tied
};

}  // namespace tg
