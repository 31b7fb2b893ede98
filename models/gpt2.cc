// GPT-2: the zoo's DecoderLM, and Hugging Face GPT-2 checkpoints loaded into it (the same
// architecture: learned positions, pre-norm blocks, GELU feed-forward, tied head).
#include "models/gpt2.h"

#include <cmath>

#include <fmt/format.h>

#include "models/causal_lm.h"
#include "models/hf_config_internal.h"
#include "models/transformer_internal.h"
#include "ops/ops.h"

namespace tg {

using hf::brief;
using hf::json;

Result<LMConfig> LMConfig::from_json(const std::string& path) {
  Result<json> parsed = hf::read_config(path);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (auto t = j.find("model_type"); t == j.end() || !t->is_string() || t->get<std::string>() != "gpt2")
    return io_error("{}: model_type {} is not supported (expected gpt2)", path,
                    t == j.end() ? std::string("(missing)") : brief(*t));
  LMConfig c;
  int64_t d = 0, heads = 0, inner = 0;
  c.vocab = 0;
  c.layers = -1;
  c.context = 1024;
  TG_RETURN_IF_ERROR(hf::read_int(j, "vocab_size", 1, int64_t{1} << 24, c.vocab, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "n_ctx", 1, int64_t{1} << 24, c.context, path));  // older files
  TG_RETURN_IF_ERROR(hf::read_int(j, "n_positions", 1, int64_t{1} << 24, c.context, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "n_embd", 1, 1 << 17, d, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "n_layer", 0, 1024, c.layers, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "n_head", 1, 4096, heads, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "n_inner", 1, 1 << 20, inner, path));
  if (c.vocab == 0 || d == 0 || heads == 0 || c.layers < 0)
    return io_error("{}: vocab_size, n_embd, n_layer and n_head are required", path);
  if (d % heads != 0) return io_error("{}: n_embd {} is not a multiple of n_head {}", path, d, heads);
  c.layer.d_model = d;
  c.layer.heads = heads;
  c.layer.d_ff = inner > 0 ? inner : 4 * d;
  c.layer.norm_first = true;
  c.layer.dropout = 0.1;
  c.layer.attn_dropout = 0.1;
  TG_RETURN_IF_ERROR(hf::read_number(j, "resid_pdrop", 0, 1, c.layer.dropout, path, true));
  TG_RETURN_IF_ERROR(hf::read_number(j, "attn_pdrop", 0, 1, c.layer.attn_dropout, path, true));
  TG_RETURN_IF_ERROR(hf::read_number(j, "layer_norm_epsilon", 0, 1, c.layer.eps, path));
  TG_RETURN_IF_ERROR(hf::read_bool(j, "tie_word_embeddings", c.tie_weights, path));
  if (auto a = j.find("activation_function"); a != j.end() && !a->is_null()) {
    const std::string act = a->is_string() ? a->get<std::string>() : "";
    if (act == "gelu_new" || act == "gelu_pytorch_tanh") c.layer.activation = Activation::kGeluTanh;
    else if (act == "gelu") c.layer.activation = Activation::kGelu;
    else if (act == "relu") c.layer.activation = Activation::kRelu;
    else return io_error("{}: activation_function {} is not supported (gelu_new, gelu_pytorch_tanh, gelu or relu)", path, brief(*a));
  } else {
    c.layer.activation = Activation::kGeluTanh;  // GPT2Config's default, gelu_new
  }
  TG_RETURN_IF_ERROR(hf::read_number(j, "embd_pdrop", 0, 1, c.embed_dropout, path, true));
  TG_RETURN_IF_ERROR(hf::read_token_id(j, "bos_token_id", c.vocab, c.bos_id, path));
  TG_RETURN_IF_ERROR(hf::read_token_id(j, "eos_token_id", c.vocab, c.eos_id, path));
  // What would change the computation and is not implemented here.
  bool scale = true, by_layer = false, cross = false;
  TG_RETURN_IF_ERROR(hf::read_bool(j, "scale_attn_weights", scale, path));
  TG_RETURN_IF_ERROR(hf::read_bool(j, "scale_attn_by_inverse_layer_idx", by_layer, path));
  TG_RETURN_IF_ERROR(hf::read_bool(j, "add_cross_attention", cross, path));
  if (!scale) return io_error("{}: scale_attn_weights = false is not supported (attention is scaled by 1/sqrt(head size))", path);
  if (by_layer) return io_error("{}: scale_attn_by_inverse_layer_idx = true is not supported", path);
  if (cross) return io_error("{}: add_cross_attention = true is not supported (a decoder-only model)", path);
  return c;
}

// ---- The model ----

DecoderLM::DecoderLM(const LMConfig& c) : cfg(c) {
  TG_CHECK(c.vocab > 0 && c.context > 0 && c.layers >= 0, "DecoderLM",
           "vocab ({}) and context ({}) must be positive, layers ({}) >= 0", c.vocab, c.context, c.layers);
  const int64_t d = c.layer.d_model;
  tok_embed = register_module("tok_embed", std::make_shared<Embedding>(c.vocab, d, EmbeddingOptions{.init_std = 0.02}));
  if (c.positions == Positions::kLearned)
    pos_embed = register_module("pos_embed", std::make_shared<LearnedPositionalEmbedding>(c.context, d));
  else if (c.positions == Positions::kSinusoidal)
    pos_sin = register_module("pos_sin", std::make_shared<SinusoidalPositionalEncoding>(d, c.context));
  else
    rotary = std::make_shared<RotaryEmbedding>(d / c.layer.heads, c.rope_theta);  // not a child: no parameters
  dropout = register_module("dropout", std::make_shared<Dropout>(c.embed_dropout < 0 ? c.layer.dropout : c.embed_dropout));
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < c.layers; ++i) {
    layers->push_back(std::make_shared<EncoderLayer>(c.layer));
    (*layers)[static_cast<size_t>(i)]->self_attn->rotary = rotary;
  }
  norm = register_module("norm", std::make_shared<LayerNorm>(d, c.layer.eps));
  if (!c.tie_weights) lm_head = register_module("lm_head", std::make_shared<Linear>(d, c.vocab, false));
}

Tensor DecoderLM::forward(const Tensor& ids, DecoderCache* cache, bool last_only) {
  check_token_ids(ids, cfg.vocab, "DecoderLM");
  const int64_t start = cache ? cache->length : 0;
  TG_CHECK(start + ids.size(1) <= cfg.context, "DecoderLM", "sequence of {} tokens exceeds the context of {}",
           start + ids.size(1), cfg.context);
  const size_t n = layers->size();
  if (cache) cache->prepare(n, /*with_cross=*/false, "DecoderLM");
  Tensor h = tok_embed->forward(ids);
  if (pos_embed) h = pos_embed->forward(h, start);
  if (pos_sin) h = pos_sin->forward(h * std::sqrt(static_cast<double>(cfg.layer.d_model)), start);
  h = dropout->forward(h);
  for (size_t i = 0; i < n; ++i) h = (*layers)[i]->forward(h, {.causal = true}, cache ? &cache->self[i] : nullptr);
  if (cache) cache->length += ids.size(1);
  if (last_only) h = h.narrow(1, h.size(1) - 1, 1);
  h = norm->forward(h);
  return lm_head ? lm_head->forward(h) : matmul(h, tok_embed->weight, false, true);
}

void DecoderLM::set_record_attention(bool on) { set_record_attention_of(*this, on); }

// ---- Hugging Face GPT-2 folders ----

NameMapping DecoderLM::hugging_face_names() {
  const std::string L = R"(^h\.(\d+)\.)";
  return {.ignore = {R"((^|\.)h\.\d+\.attn\.(bias|masked_bias)$)"},
          .strip_prefixes = {"transformer."},
          .renames = {{R"(^wte\.)", "tok_embed."},
                      {R"(^wpe\.)", "pos_embed."},
                      {R"(^ln_f\.)", "norm."},
                      {L + R"(ln_1\.)", "layers.$1.norm1."},
                      {L + R"(ln_2\.)", "layers.$1.norm2."},
                      {L + R"(attn\.c_attn\.)", "layers.$1.self_attn.c_attn."},
                      {L + R"(attn\.c_proj\.)", "layers.$1.self_attn.w_o."},
                      {L + R"(mlp\.c_fc\.)", "layers.$1.ffn.linear1."},
                      {L + R"(mlp\.c_proj\.)", "layers.$1.ffn.linear2."}},
          .transpose = {R"(^layers\.\d+\.(self_attn\.(c_attn|w_o)|ffn\.linear[12])\.weight$)"},
          .splits = {{R"(^(layers\.\d+\.self_attn\.)c_attn\.(weight|bias)$)", {"$1w_q.$2", "$1w_k.$2", "$1w_v.$2"}}}};
}

Result<std::unique_ptr<DecoderLM>> DecoderLM::from_pretrained(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  Result<LMConfig> cfg = LMConfig::from_json(config_path);
  if (!cfg.ok()) return cfg.status();
  Result<SafetensorsCheckpoint> file = open_safetensors_checkpoint(dir);
  if (!file.ok()) return file.status();
  const LMConfig& c = *cfg;
  const hf::HeaderShapes header = hf::header_shapes(*file, "transformer.", "h.", config_path);
  const int64_t D = c.layer.d_model, F = c.layer.d_ff;
  TG_RETURN_IF_ERROR(header.expect("wte.weight", {c.vocab, D}, "vocab_size, n_embd"));
  TG_RETURN_IF_ERROR(header.expect("wpe.weight", {c.context, D}, "n_positions, n_embd"));
  if (!c.tie_weights) TG_RETURN_IF_ERROR(header.expect("lm_head.weight", {c.vocab, D}, "vocab_size, n_embd"));
  TG_RETURN_IF_ERROR(header.expect_layers(c.layers, "n_layer"));
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("h.{}.", i);
    TG_RETURN_IF_ERROR(header.expect(p + "attn.c_attn.weight", {D, 3 * D}, "n_embd (Conv1D: [in, out])"));
    TG_RETURN_IF_ERROR(header.expect(p + "attn.c_proj.weight", {D, D}, "n_embd"));
    TG_RETURN_IF_ERROR(header.expect(p + "mlp.c_fc.weight", {D, F}, "n_embd, n_inner (Conv1D: [in, out])"));
    TG_RETURN_IF_ERROR(header.expect(p + "mlp.c_proj.weight", {F, D}, "n_inner, n_embd (Conv1D: [in, out])"));
  }
  NameMapping names = hugging_face_names();
  if (c.tie_weights) names.ignore.push_back(R"(^lm_head\.weight$)");  // some tied checkpoints store it too
  return hf::build_and_load<DecoderLM>(c, *file, names, config_path);
}

Status DecoderLM::save_pretrained(const std::string& dir, bool overwrite) const {
  const LayerConfig& L = cfg.layer;
  if (!L.norm_first) return io_error("{}: a post-norm DecoderLM has no GPT-2 form (norm_first is required)", dir);
  if (cfg.positions != Positions::kLearned)
    return io_error("{}: a DecoderLM with {} positions has no GPT-2 form (GPT-2 learns its positions)", dir,
                    cfg.positions == Positions::kRotary ? "rotary" : "sinusoidal");
  TG_RETURN_IF_ERROR(hf::prepare_folder(dir, overwrite));
  hf::ordered_json j;
  j["architectures"] = {"GPT2LMHeadModel"};
  j["model_type"] = "gpt2";
  j["vocab_size"] = cfg.vocab;
  j["n_positions"] = cfg.context;
  j["n_ctx"] = cfg.context;
  j["n_embd"] = L.d_model;
  j["n_layer"] = cfg.layers;
  j["n_head"] = L.heads;
  j["n_inner"] = L.d_ff;
  j["activation_function"] = L.activation == Activation::kGeluTanh ? "gelu_new" : L.activation == Activation::kGelu ? "gelu" : "relu";
  j["layer_norm_epsilon"] = L.eps;
  j["resid_pdrop"] = L.dropout;
  j["embd_pdrop"] = cfg.embed_dropout < 0 ? L.dropout : cfg.embed_dropout;
  j["attn_pdrop"] = L.attn_dropout;
  j["scale_attn_weights"] = true;
  j["tie_word_embeddings"] = cfg.tie_weights;
  j["bos_token_id"] = cfg.bos_id >= 0 ? hf::ordered_json(cfg.bos_id) : hf::ordered_json(nullptr);
  j["eos_token_id"] = cfg.eos_id >= 0 ? hf::ordered_json(cfg.eos_id) : hf::ordered_json(nullptr);
  j["torch_dtype"] = "float32";
  auto f32 = [](const Tensor& t) { return t.detach().to(kFloat32).contiguous(); };
  auto conv = [&](const Tensor& w) { return f32(w).transpose(0, 1).contiguous(); };  // Linear [out, in] -> Conv1D [in, out]
  StateDict sd;
  sd.insert("transformer.wte.weight", f32(tok_embed->weight));
  sd.insert("transformer.wpe.weight", f32(pos_embed->weight));
  for (size_t i = 0; i < layers->size(); ++i) {
    const EncoderLayer& l = *(*layers)[i];
    const std::string p = fmt::format("transformer.h.{}.", i);
    const MultiHeadAttention& a = *l.self_attn;
    if (!a.w_q->bias.defined() || !a.w_o->bias.defined() || !l.ffn->linear1->bias.defined())
      return io_error("{}: layer {} has Linear layers without biases, which GPT-2's Conv1D always has", dir, i);
    sd.insert(p + "ln_1.weight", f32(l.norm1->weight));
    sd.insert(p + "ln_1.bias", f32(l.norm1->bias));
    sd.insert(p + "attn.c_attn.weight", conv(concat({f32(a.w_q->weight), f32(a.w_k->weight), f32(a.w_v->weight)}, 0)));
    sd.insert(p + "attn.c_attn.bias", concat({f32(a.w_q->bias), f32(a.w_k->bias), f32(a.w_v->bias)}, 0));
    sd.insert(p + "attn.c_proj.weight", conv(a.w_o->weight));
    sd.insert(p + "attn.c_proj.bias", f32(a.w_o->bias));
    sd.insert(p + "ln_2.weight", f32(l.norm2->weight));
    sd.insert(p + "ln_2.bias", f32(l.norm2->bias));
    sd.insert(p + "mlp.c_fc.weight", conv(l.ffn->linear1->weight));
    sd.insert(p + "mlp.c_fc.bias", f32(l.ffn->linear1->bias));
    sd.insert(p + "mlp.c_proj.weight", conv(l.ffn->linear2->weight));
    sd.insert(p + "mlp.c_proj.bias", f32(l.ffn->linear2->bias));
  }
  sd.insert("transformer.ln_f.weight", f32(norm->weight));
  sd.insert("transformer.ln_f.bias", f32(norm->bias));
  if (lm_head) sd.insert("lm_head.weight", f32(lm_head->weight));
  return hf::write_folder(dir, j, sd);
}

Result<std::unique_ptr<CausalLM>> load_causal_lm(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  Result<hf::json> j = hf::read_config(config_path);
  if (!j.ok()) return j.status();
  auto t = j->find("model_type");
  const std::string type = t != j->end() && t->is_string() ? t->get<std::string>() : "";
  if (type == "gpt2") {
    Result<std::unique_ptr<DecoderLM>> m = DecoderLM::from_pretrained(dir);
    if (!m.ok()) return m.status();
    return std::unique_ptr<CausalLM>(std::move(*m));
  }
  if (type == "llama" || type == "mistral" || type == "qwen2") {
    Result<std::unique_ptr<LlamaForCausalLM>> m = LlamaForCausalLM::from_pretrained(dir);
    if (!m.ok()) return m.status();
    return std::unique_ptr<CausalLM>(std::move(*m));
  }
  return io_error("{}: model_type {} is not supported (gpt2, llama, mistral or qwen2)", config_path,
                  t == j->end() ? std::string("(missing)") : hf::brief(*t));
}

}  // namespace tg
