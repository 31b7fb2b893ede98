#include "models/transformer.h"
#include "models/transformer_internal.h"

#include <cmath>

#include "graph/factory.h"
#include "graph/node.h"
#include "graph/random.h"
#include "ops/autocast_internal.h"
#include "ops/dropout_internal.h"
#include "ops/ops.h"

namespace tg {

// ---- FeedForward ----

FeedForward::FeedForward(int64_t d_model, int64_t d_ff, Activation act, double p) : activation(act) {
  TG_CHECK(act != Activation::kIdentity, "FeedForward", "needs a non-linearity (Relu, Gelu or GeluTanh)");
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, d_ff));
  linear2 = register_module("linear2", std::make_shared<Linear>(d_ff, d_model));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
}

Tensor FeedForward::forward(const Tensor& x) const {
  // Trained under autocast on a GPU: the hidden layer stays bfloat16 from its product (ReLU in the
  // epilogue) through dropout into the second product (ops/autocast_internal.h).
  auto trained = [](const Linear& l) { return l.weight.requires_grad() || (l.bias.defined() && l.bias.requires_grad()); };
  if ((activation == Activation::kRelu || activation == Activation::kIdentity) &&
      detail::autocast_trains_on_gpu(x, x.requires_grad() || trained(*linear1) || trained(*linear2))) {
    const Tensor h = detail::linear_bf16_output(x, linear1->weight, linear1->bias, activation == Activation::kRelu);
    return linear2->forward(dropout->forward(h));
  }
  // act(x W_1ᵀ + b_1): the bias and activation run fused after the GEMM.
  return linear2->forward(dropout->forward(linear1->forward(x, activation)));
}

// ---- Layers ----

// x + dropout(sub): a layer's residual connection (one kernel on a GPU, the same numbers: detail::dropout_add).
static Tensor residual(const Tensor& x, const Dropout& d, const Tensor& sub) {
  return detail::dropout_add(sub, x, d.p, d.is_training());
}

static void check_config(const LayerConfig& c, const char* who) {
  TG_CHECK(c.d_model > 0 && c.heads > 0 && c.d_model % c.heads == 0 && c.d_ff > 0, who,
           "d_model ({}) must be a positive multiple of heads ({}), d_ff ({}) positive", c.d_model, c.heads, c.d_ff);
}

EncoderLayer::EncoderLayer(const LayerConfig& c) : cfg(c) {
  check_config(c, "EncoderLayer");
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(c.d_model, c.heads, c.attn_dropout));
  ffn = register_module("ffn", std::make_shared<FeedForward>(c.d_model, c.d_ff, c.activation, c.dropout));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(c.d_model, c.eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(c.d_model, c.eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(c.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(c.dropout));
}

Tensor EncoderLayer::forward(const Tensor& x, const AttentionMask& mask, KVCache* cache) {
  if (cfg.norm_first) {
    Tensor h = norm1->forward(x);
    Tensor y = residual(x, *dropout1, self_attn->forward(h, h, mask, cache));
    return residual(y, *dropout2, ffn->forward(norm2->forward(y)));
  }
  Tensor y = norm1->forward(residual(x, *dropout1, self_attn->forward(x, x, mask, cache)));
  return norm2->forward(residual(y, *dropout2, ffn->forward(y)));
}

DecoderLayer::DecoderLayer(const LayerConfig& c) : cfg(c) {
  check_config(c, "DecoderLayer");
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(c.d_model, c.heads, c.attn_dropout));
  cross_attn = register_module("cross_attn", std::make_shared<MultiHeadAttention>(c.d_model, c.heads, c.attn_dropout));
  ffn = register_module("ffn", std::make_shared<FeedForward>(c.d_model, c.d_ff, c.activation, c.dropout));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(c.d_model, c.eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(c.d_model, c.eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(c.d_model, c.eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(c.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(c.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(c.dropout));
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                             const AttentionMask& memory_mask, KVCache* self_cache, KVCache* cross_cache) {
  if (cfg.norm_first) {
    Tensor h = norm1->forward(x);
    Tensor y = residual(x, *dropout1, self_attn->forward(h, h, self_mask, self_cache));
    y = residual(y, *dropout2, cross_attn->forward(norm2->forward(y), memory, memory_mask, cross_cache));
    return residual(y, *dropout3, ffn->forward(norm3->forward(y)));
  }
  Tensor y = norm1->forward(residual(x, *dropout1, self_attn->forward(x, x, self_mask, self_cache)));
  // Q from the decoder, K and V from the encoder.
  y = norm2->forward(residual(y, *dropout2, cross_attn->forward(y, memory, memory_mask, cross_cache)));
  return norm3->forward(residual(y, *dropout3, ffn->forward(y)));
}

Encoder::Encoder(const LayerConfig& c, int64_t n, bool final_norm) {
  TG_CHECK(n >= 0, "Encoder", "number of layers must be >= 0, got {}", n);
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < n; ++i) layers->push_back(std::make_shared<EncoderLayer>(c));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(c.d_model, c.eps));
}

Tensor Encoder::forward(const Tensor& x, const AttentionMask& mask) {
  Tensor h = x;
  for (auto& layer : *layers) h = layer->forward(h, mask);
  return norm ? norm->forward(h) : h;
}

Decoder::Decoder(const LayerConfig& c, int64_t n, bool final_norm) {
  TG_CHECK(n >= 0, "Decoder", "number of layers must be >= 0, got {}", n);
  layers = register_module("layers", std::make_shared<ModuleList<DecoderLayer>>());
  for (int64_t i = 0; i < n; ++i) layers->push_back(std::make_shared<DecoderLayer>(c));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(c.d_model, c.eps));
}

void DecoderCache::reorder(const Tensor& rows) {
  for (KVCache& c : self) c.reorder(rows);
  for (KVCache& c : cross) c.reorder(rows);
}

void DecoderCache::clear() {
  self.clear();
  cross.clear();
  length = 0;
}

void DecoderCache::prepare(size_t layers, bool with_cross, const char* who) {
  if (self.size() == layers) return;
  TG_CHECK(length == 0 && self.empty(), who, "the cache was filled by a stack of {} layers, this one has {}",
           self.size(), layers);
  self.assign(layers, KVCache{.reserve = reserve});
  if (with_cross) cross.assign(layers, KVCache{.fixed = true});
}

Tensor Decoder::forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                        const AttentionMask& memory_mask, DecoderCache* cache) {
  const size_t n = layers->size();
  if (cache) cache->prepare(n, /*with_cross=*/true, "Decoder");
  Tensor h = x;
  for (size_t i = 0; i < n; ++i)
    h = (*layers)[i]->forward(h, memory, self_mask, memory_mask, cache ? &cache->self[i] : nullptr,
                              cache ? &cache->cross[i] : nullptr);
  if (cache) cache->length += x.size(1);
  return norm ? norm->forward(h) : h;
}

// Xavier-uniform on every matrix, as torch.nn.Transformer._reset_parameters does.
static void xavier_all_matrices(Module& m) {
  for (auto& [n, p] : m.named_parameters())
    if (p.dim() > 1) xavier_uniform_(p);
}

void check_token_ids(const Tensor& ids, int64_t vocab, const char* who) {
  TG_CHECK(ids.defined() && ids.dtype() == kInt64 && ids.dim() == 2, who,
           "expects int64 token ids [B, T], got {} {}", ids.defined() ? ids.dtype() : kInt64,
           ids.defined() ? ids.shape() : Shape{});
  (void)vocab;  // the embedding checks the range, naming the bad id
}

void set_record_attention_of(Module& m, bool on) {
  for (MultiHeadAttention* a : attention_modules(m)) {
    a->record_weights = on;
    if (!on) a->last_weights = Tensor();
  }
}

// ---- Transformer ----

TransformerConfig TransformerConfig::base(int64_t src_vocab, int64_t tgt_vocab) {
  TransformerConfig c;
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.layer = LayerConfig{.d_model = 512, .heads = 8, .d_ff = 2048, .dropout = 0.1};
  c.encoder_layers = c.decoder_layers = 6;
  return c;
}

Transformer::Transformer(const TransformerConfig& c) : cfg(c) {
  TG_CHECK(c.src_vocab > 0 && c.tgt_vocab > 0, "Transformer", "src_vocab ({}) and tgt_vocab ({}) must be positive",
           c.src_vocab, c.tgt_vocab);
  TG_CHECK(!c.share_embeddings || c.src_vocab == c.tgt_vocab, "Transformer",
           "share_embeddings needs src_vocab == tgt_vocab (got {} and {})", c.src_vocab, c.tgt_vocab);
  const int64_t d = c.layer.d_model;
  src_embed = register_module("src_embed", std::make_shared<Embedding>(c.src_vocab, d));
  tgt_embed = c.share_embeddings ? src_embed : register_module("tgt_embed", std::make_shared<Embedding>(c.tgt_vocab, d));
  pos = register_module("pos", std::make_shared<SinusoidalPositionalEncoding>(d, c.max_len));
  dropout = register_module("dropout", std::make_shared<Dropout>(c.layer.dropout));
  encoder = register_module("encoder", std::make_shared<Encoder>(c.layer, c.encoder_layers, true));
  decoder = register_module("decoder", std::make_shared<Decoder>(c.layer, c.decoder_layers, true));
  if (!c.tie_generator) generator = register_module("generator", std::make_shared<Linear>(d, c.tgt_vocab));
  xavier_all_matrices(*this);
}

Tensor Transformer::embed(const Embedding& e, const Tensor& ids, int64_t start) {
  // The paper (3.4): embeddings multiplied by √d_model, then the positional encoding added.
  return dropout->forward(pos->forward(e.forward(ids) * std::sqrt(static_cast<double>(cfg.layer.d_model)), start));
}

Tensor Transformer::encode(const Tensor& src) {
  check_token_ids(src, cfg.src_vocab, "Transformer::encode");
  return encoder->forward(embed(*src_embed, src), {.key_padding = padding_mask(src, cfg.pad_id)});
}

Tensor Transformer::decode(const Tensor& tgt, const Tensor& memory, const Tensor& src, bool last_only,
                          DecoderCache* cache, const Tensor& tgt_key_padding) {
  check_token_ids(tgt, cfg.tgt_vocab, "Transformer::decode");
  check_token_ids(src, cfg.src_vocab, "Transformer::decode");
  const int64_t start = cache ? cache->length : 0;
  TG_CHECK(start + tgt.size(1) <= cfg.max_len, "Transformer::decode", "position {} is past max_len {}",
           start + tgt.size(1), cfg.max_len);
  Tensor h = decoder->forward(embed(*tgt_embed, tgt, start), memory, {.causal = true, .key_padding = tgt_key_padding},
                              {.key_padding = padding_mask(src, cfg.pad_id)}, cache);
  if (last_only && h.size(1) > 1) h = h.narrow(1, h.size(1) - 1, 1);
  return generator ? generator->forward(h) : matmul(h, tgt_embed->weight, false, true);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const Tensor& tgt_key_padding) {
  TG_CHECK(src.defined() && tgt.defined() && src.dim() == 2 && tgt.dim() == 2 && src.size(0) == tgt.size(0),
           "Transformer", "expects src [B, S] and tgt [B, T] with the same batch, got {} and {}",
           src.defined() ? src.shape() : Shape{}, tgt.defined() ? tgt.shape() : Shape{});
  return decode(tgt, encode(src), src, false, nullptr, tgt_key_padding);
}

void Transformer::set_record_attention(bool on) { set_record_attention_of(*this, on); }

// ---- MaskedLM ----

MaskedLM::MaskedLM(const MLMConfig& c) : cfg(c) {
  TG_CHECK(c.vocab > 0 && c.context > 0 && c.layers >= 0, "MaskedLM",
           "vocab ({}) and context ({}) must be positive, layers ({}) >= 0", c.vocab, c.context, c.layers);
  const int64_t d = c.layer.d_model;
  tok_embed = register_module("tok_embed", std::make_shared<Embedding>(
                                                c.vocab, d, EmbeddingOptions{.padding_idx = c.pad_id, .init_std = 0.02}));
  pos_embed = register_module("pos_embed", std::make_shared<LearnedPositionalEmbedding>(c.context, d));
  embed_norm = register_module("embed_norm", std::make_shared<LayerNorm>(d, c.layer.eps));
  dropout = register_module("dropout", std::make_shared<Dropout>(c.layer.dropout));
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < c.layers; ++i) layers->push_back(std::make_shared<EncoderLayer>(c.layer));
  mlm_dense = register_module("mlm_dense", std::make_shared<Linear>(d, d));
  mlm_norm = register_module("mlm_norm", std::make_shared<LayerNorm>(d, c.layer.eps));
  mlm_bias = register_parameter("mlm_bias", zeros({c.vocab}));
}

Tensor MaskedLM::encode(const Tensor& ids) {
  check_token_ids(ids, cfg.vocab, "MaskedLM");
  TG_CHECK(ids.size(1) <= cfg.context, "MaskedLM", "sequence of {} tokens exceeds the context of {}", ids.size(1),
           cfg.context);
  Tensor h = dropout->forward(embed_norm->forward(pos_embed->forward(tok_embed->forward(ids))));
  AttentionMask mask{.key_padding = padding_mask(ids, cfg.pad_id)};
  for (auto& layer : *layers) h = layer->forward(h, mask);
  return h;
}

Tensor MaskedLM::forward(const Tensor& ids) {
  Tensor h = mlm_norm->forward(mlm_dense->forward(encode(ids), cfg.layer.activation));
  return linear(h, tok_embed->weight, mlm_bias);
}

MaskedBatch mask_tokens(const Tensor& ids, int64_t mask_id, int64_t vocab, double p, int64_t pad_id,
                        int64_t first_regular_id) {
  TG_CHECK(ids.defined() && ids.dtype() == kInt64, "mask_tokens", "expects int64 ids");
  TG_CHECK(p > 0 && p <= 1 && mask_id >= 0 && mask_id < vocab && first_regular_id < vocab, "mask_tokens",
           "bad arguments: p {} (in (0, 1]), mask_id {} and first_regular_id {} (below vocab {})", p, mask_id,
           first_regular_id, vocab);
  Tensor inputs = ids.clone().detach(), labels = full(ids.shape(), -100, kInt64);
  const int64_t* src = ids.data<int64_t>();
  int64_t* in = inputs.data<int64_t>();
  int64_t* lab = labels.data<int64_t>();
  Generator& g = default_generator();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (src[i] == pad_id || g.uniform() >= p) continue;
    lab[i] = src[i];
    double r = g.uniform();
    if (r < 0.8) {
      in[i] = mask_id;
    } else if (r < 0.9) {
      in[i] = first_regular_id + static_cast<int64_t>(g.uniform() * static_cast<double>(vocab - first_regular_id));
    }
  }
  return {inputs, labels};
}

}  // namespace tg
