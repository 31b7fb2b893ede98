#include "models/bert.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "graph/factory.h"
#include "graph/format.h"
#include "io/file.h"
#include "models/hf_config_internal.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace tg {

namespace {
using hf::brief;
using hf::json;
using hf::read_int;

Status read_prob(const json& j, const char* key, double& value, const std::string& path) {
  return hf::read_number(j, key, 0, 1, value, path, /*lo_closed=*/true);
}
}  // namespace

Result<BertConfig> BertConfig::from_json(const std::string& path) {
  Result<json> parsed = hf::read_config(path);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (auto t = j.find("model_type"); t != j.end() && !(t->is_string() && t->get<std::string>() == "bert"))
    return io_error("{}: model_type {} is not supported (expected \"bert\")", path, brief(*t));
  BertConfig c;
  TG_RETURN_IF_ERROR(read_int(j, "vocab_size", 1, int64_t{1} << 24, c.vocab, path));
  TG_RETURN_IF_ERROR(read_int(j, "hidden_size", 1, 1 << 16, c.hidden, path));
  TG_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", 0, 1024, c.layers, path));
  TG_RETURN_IF_ERROR(read_int(j, "num_attention_heads", 1, 1024, c.heads, path));
  TG_RETURN_IF_ERROR(read_int(j, "intermediate_size", 1, 1 << 20, c.intermediate, path));
  TG_RETURN_IF_ERROR(read_int(j, "max_position_embeddings", 1, 1 << 20, c.max_positions, path));
  TG_RETURN_IF_ERROR(read_int(j, "type_vocab_size", 1, 1 << 16, c.type_vocab, path));
  TG_RETURN_IF_ERROR(read_int(j, "pad_token_id", 0, c.vocab - 1, c.pad_id, path));
  TG_RETURN_IF_ERROR(read_prob(j, "hidden_dropout_prob", c.dropout, path));
  TG_RETURN_IF_ERROR(read_prob(j, "attention_probs_dropout_prob", c.attn_dropout, path));
  if (auto e = j.find("layer_norm_eps"); e != j.end()) {
    if (!e->is_number() || !(e->get<double>() > 0 && e->get<double>() < 1))
      return io_error("{}: layer_norm_eps = {} (expected a number in (0, 1))", path, brief(*e));
    c.eps = e->get<double>();
  }
  if (auto a = j.find("hidden_act"); a != j.end()) {
    const std::string act = a->is_string() ? a->get<std::string>() : brief(*a);
    if (act == "gelu") c.activation = Activation::kGelu;
    else if (act == "gelu_new" || act == "gelu_pytorch_tanh") c.activation = Activation::kGeluTanh;
    else if (act == "relu") c.activation = Activation::kRelu;
    else return io_error("{}: hidden_act '{}' is not supported (expected gelu, gelu_new, gelu_pytorch_tanh or relu)", path, act);
  }
  if (auto p = j.find("position_embedding_type"); p != j.end() && !(p->is_string() && p->get<std::string>() == "absolute"))
    return io_error("{}: position_embedding_type {} is not supported (expected \"absolute\")", path, brief(*p));
  // Keys that would change the computation and that this encoder does not implement.
  for (const char* key : {"is_decoder", "add_cross_attention"})
    if (auto v = j.find(key); v != j.end() && !v->is_null()) {
      if (!v->is_boolean()) return io_error("{}: {} = {} is not true or false", path, key, brief(*v));
      if (v->get<bool>()) return io_error("{}: {} = true is not supported (BertModel is an encoder)", path, key);
    }
  if (c.hidden % c.heads != 0)
    return io_error("{}: hidden_size {} is not a multiple of num_attention_heads {}", path, c.hidden, c.heads);
  return c;
}

BertModel::BertModel(const BertConfig& c) : cfg(c) {
  TG_CHECK(c.vocab > 0 && c.hidden > 0 && c.layers >= 0 && c.heads > 0 && c.hidden % c.heads == 0 && c.max_positions > 0 &&
               c.type_vocab > 0,
           "BertModel", "bad configuration: vocab {}, hidden {}, layers {}, heads {}, max_positions {}, type_vocab {}",
           c.vocab, c.hidden, c.layers, c.heads, c.max_positions, c.type_vocab);
  const int64_t d = c.hidden;
  tok_embed = register_module("tok_embed", std::make_shared<Embedding>(c.vocab, d, EmbeddingOptions{.padding_idx = c.pad_id, .init_std = 0.02}));
  pos_embed = register_module("pos_embed", std::make_shared<LearnedPositionalEmbedding>(c.max_positions, d));
  type_embed = register_module("type_embed", std::make_shared<Embedding>(c.type_vocab, d, EmbeddingOptions{.init_std = 0.02}));
  embed_norm = register_module("embed_norm", std::make_shared<LayerNorm>(d, c.eps));
  dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  const LayerConfig lc{.d_model = d, .heads = c.heads, .d_ff = c.intermediate, .dropout = c.dropout,
                       .attn_dropout = c.attn_dropout, .activation = c.activation, .norm_first = false, .eps = c.eps};
  for (int64_t i = 0; i < c.layers; ++i) {
    auto layer = layers->push_back(std::make_shared<EncoderLayer>(lc));
    layer->ffn->dropout->p = 0;  // BERT has no dropout inside the feed-forward block
  }
  if (c.pooler) pooler = register_module("pooler", std::make_shared<Linear>(d, d));
}

Tensor BertModel::forward(const BertInputs& in, std::vector<Tensor>* hidden_states, int64_t run_layers) {
  const Tensor& ids = in.ids;
  TG_CHECK(ids.defined() && ids.dtype() == kInt64 && ids.dim() == 2, "BertModel", "expects int64 token ids [B, T], got {} {}",
           ids.defined() ? ids.dtype() : kInt64, ids.defined() ? ids.shape() : Shape{});
  TG_CHECK(ids.size(1) <= cfg.max_positions, "BertModel", "a sequence of {} tokens exceeds max_position_embeddings {}",
           ids.size(1), cfg.max_positions);
  for (const Tensor* t : {&in.attention_mask, &in.token_types})
    TG_CHECK(!t->defined() || (t->dtype() == kInt64 && t->shape() == ids.shape()), "BertModel",
             "attention mask and token types must be int64 {} like the ids, got {} {}", ids.shape(), t->dtype(), t->shape());
  TG_CHECK(run_layers <= cfg.layers, "BertModel", "{} layers asked of a model of {}", run_layers, cfg.layers);
  const Tensor types = in.token_types.defined() ? in.token_types : zeros(ids.shape(), kInt64, ids.device());
  Tensor h = add(pos_embed->forward(tok_embed->forward(ids)), type_embed->forward(types));
  h = dropout->forward(embed_norm->forward(h));
  if (hidden_states) hidden_states->assign({h});
  AttentionMask mask;
  if (in.attention_mask.defined()) mask.key_padding = eq(in.attention_mask, 0.0);
  const int64_t n = run_layers < 0 ? cfg.layers : run_layers;
  for (int64_t i = 0; i < n; ++i) {
    h = (*layers)[static_cast<size_t>(i)]->forward(h, mask);
    if (hidden_states) hidden_states->push_back(h);
  }
  return h;
}

Tensor BertModel::pooled(const Tensor& hidden) const {
  TG_CHECK(pooler != nullptr, "BertModel::pooled", "this model was built without a pooler");
  return tanh(pooler->forward(squeeze(hidden.narrow(1, 0, 1), 1)));
}

void BertModel::set_record_attention(bool on) {
  for (auto& layer : *layers) {
    layer->self_attn->record_weights = on;
    if (!on) layer->self_attn->last_weights = Tensor();
  }
}

NameMapping BertModel::hugging_face_names() {
  const std::string L = R"(^encoder\.layer\.(\d+)\.)";
  return {
      .ignore = {R"(^(bert\.)?embeddings\.position_ids$)", R"(^cls\.)"},
      .strip_prefixes = {"bert."},
      .renames = {{R"(^embeddings\.word_embeddings\.)", "tok_embed."},
                  {R"(^embeddings\.position_embeddings\.)", "pos_embed."},
                  {R"(^embeddings\.token_type_embeddings\.)", "type_embed."},
                  {R"(^embeddings\.LayerNorm\.)", "embed_norm."},
                  {L + R"(attention\.self\.query\.)", "layers.$1.self_attn.w_q."},
                  {L + R"(attention\.self\.key\.)", "layers.$1.self_attn.w_k."},
                  {L + R"(attention\.self\.value\.)", "layers.$1.self_attn.w_v."},
                  {L + R"(attention\.output\.dense\.)", "layers.$1.self_attn.w_o."},
                  {L + R"(attention\.output\.LayerNorm\.)", "layers.$1.norm1."},
                  {L + R"(intermediate\.dense\.)", "layers.$1.ffn.linear1."},
                  {L + R"(output\.dense\.)", "layers.$1.ffn.linear2."},
                  {L + R"(output\.LayerNorm\.)", "layers.$1.norm2."},
                  {R"(^pooler\.dense\.)", "pooler."},
                  {R"(\.gamma$)", ".weight"},  // LayerNorm names of older (TensorFlow-converted) checkpoints
                  {R"(\.beta$)", ".bias"}},
  };
}

Result<std::unique_ptr<BertModel>> BertModel::from_pretrained(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  Result<BertConfig> cfg = BertConfig::from_json(config_path);
  if (!cfg.ok()) return cfg.status();
  // The headers; values are read into the model.
  Result<SafetensorsCheckpoint> file = open_safetensors_checkpoint(dir);
  if (!file.ok()) return file.status();
  // The configuration against the file's shapes before anything of the configuration's size is
  // built: every tensor the configuration implies must be in the file with that shape, so a
  // config.json that does not belong to these weights is named, never allocated.
  hf::HeaderShapes header = hf::header_shapes(*file, "bert.", "encoder.layer.", config_path);
  for (const auto& [n, sh] : std::map<std::string, Shape>(header.shapes)) {  // old checkpoints' LayerNorm names
    if (n.ends_with("LayerNorm.gamma")) header.shapes.emplace(n.substr(0, n.size() - 5) + "weight", sh);
    if (n.ends_with("LayerNorm.beta")) header.shapes.emplace(n.substr(0, n.size() - 4) + "bias", sh);
  }
  const std::map<std::string, Shape>& shapes = header.shapes;
  const BertConfig& c = *cfg;
  const int64_t H = c.hidden, I = c.intermediate;
  auto expect = [&](const std::string& name, const Shape& want, const char* keys) { return header.expect(name, want, keys); };
  TG_RETURN_IF_ERROR(expect("embeddings.word_embeddings.weight", {c.vocab, H}, "vocab_size, hidden_size"));
  TG_RETURN_IF_ERROR(expect("embeddings.position_embeddings.weight", {c.max_positions, H}, "max_position_embeddings, hidden_size"));
  TG_RETURN_IF_ERROR(expect("embeddings.token_type_embeddings.weight", {c.type_vocab, H}, "type_vocab_size, hidden_size"));
  TG_RETURN_IF_ERROR(expect("embeddings.LayerNorm.weight", {H}, "hidden_size"));
  TG_RETURN_IF_ERROR(header.expect_layers(c.layers, "num_hidden_layers", "encoder layers"));
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("encoder.layer.{}.", i);
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      TG_RETURN_IF_ERROR(expect(p + m + ".weight", {H, H}, "hidden_size"));
      TG_RETURN_IF_ERROR(expect(p + m + ".bias", {H}, "hidden_size"));
    }
    TG_RETURN_IF_ERROR(expect(p + "intermediate.dense.weight", {I, H}, "intermediate_size, hidden_size"));
    TG_RETURN_IF_ERROR(expect(p + "output.dense.weight", {H, I}, "hidden_size, intermediate_size"));
  }
  if (shapes.count("pooler.dense.weight")) TG_RETURN_IF_ERROR(expect("pooler.dense.weight", {H, H}, "hidden_size"));
  BertConfig built = c;
  built.pooler = shapes.count("pooler.dense.weight") != 0;
  return hf::build_and_load<BertModel>(built, *file, hugging_face_names(), config_path);
}

Tensor pool(const Tensor& hidden, const Tensor& attention_mask, Pooling pooling) {
  TG_CHECK(hidden.defined() && hidden.dim() == 3, "pool", "expects hidden states [B, T, D], got {}",
           hidden.defined() ? hidden.shape() : Shape{});
  if (pooling == Pooling::kCls) return squeeze(hidden.narrow(1, 0, 1), 1);
  TG_CHECK(attention_mask.defined() && attention_mask.shape() == Shape({hidden.size(0), hidden.size(1)}), "pool",
           "attention mask of shape {} for hidden states {} (expected [B, T])",
           attention_mask.defined() ? attention_mask.shape() : Shape{}, hidden.shape());
  const Tensor m = unsqueeze(to(attention_mask, hidden.dtype()), -1);  // [B, T, 1]
  const Tensor count = clamp(sum(m, {1}), 1e-9, INFINITY);             // [B, 1]
  return div(sum(mul(hidden, m), {1}), count);
}

Tensor l2_normalize(const Tensor& x, double eps) {
  TG_CHECK(x.defined() && x.dim() >= 1, "l2_normalize", "expects a tensor with at least one axis");
  return div(x, clamp(sqrt(sum(mul(x, x), {-1}, true)), eps, INFINITY));
}

}  // namespace tg
