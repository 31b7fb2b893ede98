#pragma once
// BERT (Devlin et al., 2019) as Hugging Face's BertModel computes it, built from the zoo's
// generic modules: token, position and token-type embeddings summed and layer-normed, then
// post-norm EncoderLayers (the same MultiHeadAttention with separate W_Q, W_K, W_V), and the
// pooler (dense + tanh on [CLS]). Pretrained weights load from a Hugging Face model folder:
//
//   auto bert = tg::BertModel::from_pretrained("data/models/all-MiniLM-L6-v2").value();
//   auto tok = tg::text::Tokenizer::load("data/models/all-MiniLM-L6-v2/tokenizer.json").value();
//   auto b = tg::text::stack_encodings(tok->encode_batch(sentences, {.max_length = 256}), tok->pad_id());
//   tg::BertInputs in{b.ids, b.attention_mask, b.type_ids};
//   tg::Tensor h = bert->forward(in);                                   // [B, T, hidden]
//   tg::Tensor e = tg::l2_normalize(tg::pool(h, in.attention_mask, tg::Pooling::kMean));  // sentence vectors
#include <memory>
#include <string>
#include <vector>

#include "module_io.h"
#include "transformer.h"

namespace tg {

struct BertConfig {
  int64_t vocab = 30522, hidden = 768, layers = 12, heads = 12, intermediate = 3072;
  int64_t max_positions = 512, type_vocab = 2, pad_id = 0;
  double eps = 1e-12;
  double dropout = 0.1;       // hidden_dropout_prob: embeddings and each sublayer's output
  double attn_dropout = 0.1;  // attention_probs_dropout_prob
  Activation activation = Activation::kGelu;  // "gelu" is the exact erf form
  bool pooler = true;
  // Hugging Face's config.json (model_type "bert"); unknown keys are ignored, unsupported values
  // (another activation or position type, heads not dividing hidden) are refused naming the file.
  static Result<BertConfig> from_json(const std::string& path);
};

// A padded batch: ids, attention mask (1 = token, 0 = padding) and token types, int64 [B, T].
struct BertInputs {
  Tensor ids, attention_mask = {}, token_types = {};  // mask absent: no padding; types absent: all 0
};

class BertModel : public Module {
 public:
  explicit BertModel(const BertConfig& cfg);
  // The last layer's hidden states [B, T, hidden]. With `hidden_states`, also every layer's: the
  // embeddings' output first, then each layer's (as Hugging Face's output_hidden_states); with
  // `layers` >= 0 only that many layers run (their output is returned).
  Tensor forward(const BertInputs& in, std::vector<Tensor>* hidden_states = nullptr, int64_t layers = -1);
  Tensor pooled(const Tensor& hidden) const;  // tanh(dense(h[:, 0])), [B, hidden]; needs the pooler
  void set_record_attention(bool on);          // every layer's attention weights in last_weights (off: dropped)
  std::string type_name() const override { return "BertModel"; }

  // The rules from Hugging Face's BertModel names: "bert." is stripped (the encoder inside a
  // BertFor... checkpoint), pretraining heads "cls.*" and the position_ids buffer are ignored; a
  // task head (classifier.*) is unexpected: load such a checkpoint with strict = false.
  static NameMapping hugging_face_names();
  // DIR/config.json and DIR/model.safetensors, checked against each other before the model is
  // built; every problem names the file.
  static Result<std::unique_ptr<BertModel>> from_pretrained(const std::string& dir);

  BertConfig cfg;
  std::shared_ptr<Embedding> tok_embed, type_embed;
  std::shared_ptr<LearnedPositionalEmbedding> pos_embed;
  std::shared_ptr<LayerNorm> embed_norm;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<ModuleList<EncoderLayer>> layers;
  std::shared_ptr<Linear> pooler;  // null without one
};

// Sentence vectors from hidden states [B, T, D] and the attention mask [B, T]: the mean over the
// tokens (padding excluded, as sentence-transformers), or the first ([CLS]) token. Differentiable.
enum class Pooling {
  kMean,
  kCls,
  Mean [[deprecated("use kMean")]] = kMean,  // the names before 0.2, kept for one release
  Cls [[deprecated("use kCls")]] = kCls,
};
Tensor pool(const Tensor& hidden, const Tensor& attention_mask, Pooling pooling);
// x / max(||x||, eps) along the last axis (torch.nn.functional.normalize).
Tensor l2_normalize(const Tensor& x, double eps = 1e-12);

}  // namespace tg
