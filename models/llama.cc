#include "models/llama.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "graph/node.h"
#include "io/safetensors.h"
#include "models/hf_config_internal.h"
#include "ops/ops.h"

namespace tg {

SwiGLU::SwiGLU(int64_t d_model, int64_t d_ff, bool bias) {
  TG_CHECK(d_model > 0 && d_ff > 0, "SwiGLU", "d_model ({}) and d_ff ({}) must be positive", d_model, d_ff);
  gate_proj = register_module("gate_proj", std::make_shared<Linear>(d_model, d_ff, bias));
  up_proj = register_module("up_proj", std::make_shared<Linear>(d_model, d_ff, bias));
  down_proj = register_module("down_proj", std::make_shared<Linear>(d_ff, d_model, bias));
}

Tensor SwiGLU::forward(const Tensor& x) const {
  return down_proj->forward(mul(silu(gate_proj->forward(x)), up_proj->forward(x)));
}

namespace {
void check_config(const LlamaConfig& c) {
  TG_CHECK(c.vocab > 0 && c.hidden > 0 && c.intermediate > 0 && c.layers >= 0 && c.heads > 0 && c.max_positions > 0,
           "LlamaForCausalLM",
           "vocab ({}), hidden ({}), intermediate ({}), heads ({}) and max_positions ({}) must be positive, layers ({}) >= 0",
           c.vocab, c.hidden, c.intermediate, c.heads, c.max_positions, c.layers);
  const int64_t kv = c.kv_heads > 0 ? c.kv_heads : c.heads;
  TG_CHECK(c.kv_heads >= 0 && c.heads % kv == 0, "LlamaForCausalLM",
           "heads ({}) must be a multiple of kv_heads ({})", c.heads, kv);
  TG_CHECK(c.head_dim > 0 || c.hidden % c.heads == 0, "LlamaForCausalLM",
           "hidden ({}) must be a multiple of heads ({}) unless head_dim is given", c.hidden, c.heads);
  const int64_t hd = c.head_dim > 0 ? c.head_dim : c.hidden / c.heads;
  TG_CHECK(hd % 2 == 0, "LlamaForCausalLM", "the head size ({}) must be even for rotary positions", hd);
  TG_CHECK(c.init_std > 0, "LlamaForCausalLM", "init_std must be positive, got {}", c.init_std);
}
}  // namespace

LlamaBlock::LlamaBlock(const LlamaConfig& c, std::shared_ptr<const RotaryEmbedding> rope) {
  input_layernorm = register_module("input_layernorm", std::make_shared<RMSNorm>(c.hidden, c.rms_eps));
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(AttentionConfig{
                                               .d_model = c.hidden, .heads = c.heads, .kv_heads = c.kv_heads,
                                               .head_dim = c.head_dim, .qkv_bias = c.attention_bias, .out_bias = false}));
  self_attn->rotary = std::move(rope);
  post_attention_layernorm = register_module("post_attention_layernorm", std::make_shared<RMSNorm>(c.hidden, c.rms_eps));
  mlp = register_module("mlp", std::make_shared<SwiGLU>(c.hidden, c.intermediate, c.mlp_bias));
}

Tensor LlamaBlock::forward(const Tensor& x, KVCache* cache) {
  Tensor n = input_layernorm->forward(x);
  Tensor h = add(x, self_attn->forward(n, n, {.causal = true}, cache));
  return add(h, mlp->forward(post_attention_layernorm->forward(h)));
}

LlamaForCausalLM::LlamaForCausalLM(const LlamaConfig& c) : cfg(c) {
  check_config(c);
  const int64_t hd = c.head_dim > 0 ? c.head_dim : c.hidden / c.heads;
  rotary = std::make_shared<RotaryEmbedding>(hd, c.rope_theta, c.rope_scaling);
  embed_tokens = register_module("embed_tokens", std::make_shared<Embedding>(c.vocab, c.hidden,
                                                                             EmbeddingOptions{.init_std = c.init_std}));
  layers = register_module("layers", std::make_shared<ModuleList<LlamaBlock>>());
  for (int64_t i = 0; i < c.layers; ++i) layers->push_back(std::make_shared<LlamaBlock>(c, rotary));
  norm = register_module("norm", std::make_shared<RMSNorm>(c.hidden, c.rms_eps));
  if (!c.tie_word_embeddings) lm_head = register_module("lm_head", std::make_shared<Linear>(c.hidden, c.vocab, false));
  // transformers' _init_weights: N(0, initializer_range) for every Linear and Embedding, zero biases.
  for (auto& [name, p] : named_parameters()) {
    if (name.ends_with(".bias")) zeros_(p);
    else if (p.dim() == 2) normal_(p, 0.0, c.init_std);
  }
}

Tensor LlamaForCausalLM::forward(const Tensor& ids, DecoderCache* cache, bool last_only) {
  TG_CHECK(ids.defined() && ids.dtype() == kInt64 && ids.dim() == 2 && ids.size(1) > 0, "LlamaForCausalLM",
           "expects int64 token ids [B, T] with T >= 1, got {} {}", ids.defined() ? ids.dtype() : kInt64,
           ids.defined() ? ids.shape() : Shape{});
  const int64_t start = cache ? cache->length : 0;
  TG_CHECK(start + ids.size(1) <= cfg.max_positions, "LlamaForCausalLM",
           "sequence of {} tokens exceeds max_position_embeddings {}", start + ids.size(1), cfg.max_positions);
  const size_t n = layers->size();
  if (cache) cache->prepare(n, /*with_cross=*/false, "LlamaForCausalLM");
  Tensor h = embed_tokens->forward(ids);
  for (size_t i = 0; i < n; ++i) h = (*layers)[i]->forward(h, cache ? &cache->self[i] : nullptr);
  if (cache) cache->length += ids.size(1);
  if (last_only) h = h.narrow(1, h.size(1) - 1, 1);
  h = norm->forward(h);
  return lm_head ? lm_head->forward(h) : matmul(h, embed_tokens->weight, false, true);
}

// ---- Hugging Face folders ----

namespace {
using hf::brief;
using hf::json;

// rope_scaling (hub) or rope_parameters (transformers 5): the type, and llama3's fields.
Status read_rope(const json& r, const char* key, LlamaConfig& c, const std::string& path) {
  if (r.is_null()) return {};
  if (!r.is_object()) return io_error("{}: {} = {} (expected an object or null)", path, key, brief(r));
  std::string type = "default";
  for (const char* k : {"rope_type", "type"})
    if (auto t = r.find(k); t != r.end() && !t->is_null()) {
      if (!t->is_string()) return io_error("{}: {}.{} = {} (expected a string)", path, key, k, brief(*t));
      type = t->get<std::string>();
      break;
    }
  TG_RETURN_IF_ERROR(hf::read_number(r, "rope_theta", 1, 1e12, c.rope_theta, path));
  if (type == "default") return {};
  if (type != "llama3")
    return io_error("{}: {} type '{}' is not supported (default or llama3 rotary positions only)", path, key, type);
  // transformers refuses a llama3 rope_scaling without its four fields; so do we (no invented defaults).
  for (const char* field : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    if (auto f = r.find(field); f == r.end() || f->is_null())
      return io_error("{}: {} of type llama3 has no {} (it needs factor, low_freq_factor, high_freq_factor and "
                      "original_max_position_embeddings)", path, key, field);
  c.rope_scaling.factor = 1;
  TG_RETURN_IF_ERROR(hf::read_number(r, "factor", 0, 1e6, c.rope_scaling.factor, path));
  TG_RETURN_IF_ERROR(hf::read_number(r, "low_freq_factor", 0, 1e6, c.rope_scaling.low_freq_factor, path));
  TG_RETURN_IF_ERROR(hf::read_number(r, "high_freq_factor", 0, 1e6, c.rope_scaling.high_freq_factor, path));
  TG_RETURN_IF_ERROR(hf::read_int(r, "original_max_position_embeddings", 1, int64_t{1} << 24,
                                  c.rope_scaling.original_max_position, path));
  if (c.rope_scaling.factor < 1 || c.rope_scaling.high_freq_factor <= c.rope_scaling.low_freq_factor)
    return io_error("{}: {}: llama3 scaling needs factor >= 1 and high_freq_factor > low_freq_factor, got {}, {} and {}",
                    path, key, c.rope_scaling.factor, c.rope_scaling.low_freq_factor, c.rope_scaling.high_freq_factor);
  return {};
}

}  // namespace

Result<LlamaConfig> LlamaConfig::from_json(const std::string& path) {
  Result<json> parsed = hf::read_config(path);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  std::string type;
  if (auto t = j.find("model_type"); t != j.end() && t->is_string()) type = t->get<std::string>();
  if (type != "llama" && type != "mistral" && type != "qwen2")
    return io_error("{}: model_type {} is not supported (expected llama, mistral or qwen2)", path,
                    j.contains("model_type") ? brief(j["model_type"]) : std::string("(missing)"));
  LlamaConfig c;
  c.model_type = type;
  c.head_dim = 0;
  c.attention_bias = type == "qwen2";  // Qwen2's Q, K and V projections always have biases
  TG_RETURN_IF_ERROR(hf::read_int(j, "vocab_size", 1, int64_t{1} << 24, c.vocab, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "hidden_size", 1, 1 << 17, c.hidden, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "intermediate_size", 1, 1 << 20, c.intermediate, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "num_hidden_layers", 0, 1024, c.layers, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "num_attention_heads", 1, 4096, c.heads, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "num_key_value_heads", 1, 4096, c.kv_heads, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "head_dim", 2, 1 << 14, c.head_dim, path));
  TG_RETURN_IF_ERROR(hf::read_int(j, "max_position_embeddings", 1, int64_t{1} << 24, c.max_positions, path));
  TG_RETURN_IF_ERROR(hf::read_number(j, "rms_norm_eps", 0, 1, c.rms_eps, path));
  TG_RETURN_IF_ERROR(hf::read_number(j, "rope_theta", 1, 1e12, c.rope_theta, path));
  TG_RETURN_IF_ERROR(hf::read_number(j, "initializer_range", 0, 10, c.init_std, path));
  TG_RETURN_IF_ERROR(hf::read_bool(j, "tie_word_embeddings", c.tie_word_embeddings, path));
  if (type != "qwen2") TG_RETURN_IF_ERROR(hf::read_bool(j, "attention_bias", c.attention_bias, path));
  TG_RETURN_IF_ERROR(hf::read_bool(j, "mlp_bias", c.mlp_bias, path));
  if (c.vocab == 0 || c.hidden == 0 || c.intermediate == 0 || c.heads == 0 || !j.contains("num_hidden_layers"))
    return io_error("{}: vocab_size, hidden_size, intermediate_size, num_hidden_layers and num_attention_heads are "
                    "required", path);
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (auto r = j.find(key); r != j.end()) TG_RETURN_IF_ERROR(read_rope(*r, key, c, path));
  TG_RETURN_IF_ERROR(hf::read_token_id(j, "bos_token_id", c.vocab, c.bos_id, path));
  TG_RETURN_IF_ERROR(hf::read_token_id(j, "eos_token_id", c.vocab, c.eos_id, path));
  if (auto a = j.find("hidden_act"); a != j.end() && !(a->is_string() && a->get<std::string>() == "silu"))
    return io_error("{}: hidden_act {} is not supported (the SwiGLU feed-forward uses silu)", path, brief(*a));
  // What would change the computation and is not implemented here.
  bool sliding = type == "mistral";  // Mistral's window applies whenever it is set; Qwen2's only with use_sliding_window
  TG_RETURN_IF_ERROR(hf::read_bool(j, "use_sliding_window", sliding, path));
  if (auto lt = j.find("layer_types"); lt != j.end() && lt->is_array())  // transformers 5: per layer
    for (const json& t : *lt) sliding = sliding || (t.is_string() && t.get<std::string>() == "sliding_attention");
  if (auto w = j.find("sliding_window"); sliding && w != j.end() && !w->is_null()) {
    if (!w->is_number_integer()) return io_error("{}: sliding_window = {} (expected a whole number or null)", path, brief(*w));
    if (w->get<int64_t>() < c.max_positions)
      return io_error("{}: sliding_window {} is shorter than max_position_embeddings {}: sliding-window attention is not "
                      "supported", path, w->get<int64_t>(), c.max_positions);
  }
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size"})
    if (auto v = j.find(key); v != j.end() && !v->is_null() && !(v->is_number_integer() && v->get<int64_t>() == 0))
      return io_error("{}: {} = {}: mixtures of experts are not supported", path, key, brief(*v));
  if (auto v = j.find("partial_rotary_factor"); v != j.end() && !v->is_null() && !(v->is_number() && v->get<double>() == 1.0))
    return io_error("{}: partial_rotary_factor = {}: partial rotary positions are not supported", path, brief(*v));
  const int64_t kv = c.kv_heads > 0 ? c.kv_heads : c.heads;
  if (c.heads % kv != 0)
    return io_error("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", path, c.heads, kv);
  if (c.head_dim == 0 && c.hidden % c.heads != 0)
    return io_error("{}: hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim)", path, c.hidden, c.heads);
  if ((c.head_dim > 0 ? c.head_dim : c.hidden / c.heads) % 2 != 0)
    return io_error("{}: the head size {} is odd (rotary positions need it even)", path,
                    c.head_dim > 0 ? c.head_dim : c.hidden / c.heads);
  return c;
}

NameMapping LlamaForCausalLM::hugging_face_names() {
  const std::string A = R"(^(layers\.\d+\.self_attn\.))";
  return {.ignore = {R"(\.rotary_emb\.inv_freq$)"},
          .strip_prefixes = {"model."},
          .renames = {{A + R"(q_proj\.)", "$1w_q."},
                      {A + R"(k_proj\.)", "$1w_k."},
                      {A + R"(v_proj\.)", "$1w_v."},
                      {A + R"(o_proj\.)", "$1w_o."}}};
}

Result<std::unique_ptr<LlamaForCausalLM>> LlamaForCausalLM::from_pretrained(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  Result<LlamaConfig> cfg = LlamaConfig::from_json(config_path);
  if (!cfg.ok()) return cfg.status();
  Result<SafetensorsCheckpoint> file = open_safetensors_checkpoint(dir);  // one file or the shards' headers
  if (!file.ok()) return file.status();
  const LlamaConfig& c = *cfg;
  // Every tensor the configuration implies, with its shape, before anything of that size is built.
  const hf::HeaderShapes header = hf::header_shapes(*file, "model.", "layers.", config_path);
  const int64_t H = c.hidden, I = c.intermediate, hd = c.head_dim > 0 ? c.head_dim : c.hidden / c.heads;
  const int64_t kv = c.kv_heads > 0 ? c.kv_heads : c.heads;
  auto expect = [&](const std::string& name, const Shape& want, const char* keys) { return header.expect(name, want, keys); };
  TG_RETURN_IF_ERROR(expect("embed_tokens.weight", {c.vocab, H}, "vocab_size, hidden_size"));
  if (!c.tie_word_embeddings) TG_RETURN_IF_ERROR(expect("lm_head.weight", {c.vocab, H}, "vocab_size, hidden_size"));
  TG_RETURN_IF_ERROR(header.expect_layers(c.layers, "num_hidden_layers"));
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("layers.{}.", i);
    TG_RETURN_IF_ERROR(expect(p + "self_attn.q_proj.weight", {c.heads * hd, H}, "num_attention_heads, head_dim, hidden_size"));
    TG_RETURN_IF_ERROR(expect(p + "self_attn.k_proj.weight", {kv * hd, H}, "num_key_value_heads, head_dim, hidden_size"));
    TG_RETURN_IF_ERROR(expect(p + "self_attn.v_proj.weight", {kv * hd, H}, "num_key_value_heads, head_dim, hidden_size"));
    TG_RETURN_IF_ERROR(expect(p + "self_attn.o_proj.weight", {H, c.heads * hd}, "hidden_size, num_attention_heads, head_dim"));
    TG_RETURN_IF_ERROR(expect(p + "mlp.gate_proj.weight", {I, H}, "intermediate_size, hidden_size"));
    TG_RETURN_IF_ERROR(expect(p + "mlp.up_proj.weight", {I, H}, "intermediate_size, hidden_size"));
    TG_RETURN_IF_ERROR(expect(p + "mlp.down_proj.weight", {H, I}, "hidden_size, intermediate_size"));
  }
  NameMapping names = hugging_face_names();
  if (c.tie_word_embeddings) names.ignore.push_back(R"(^lm_head\.weight$)");  // some tied checkpoints store it too
  return hf::build_and_load<LlamaForCausalLM>(c, *file, names, config_path);
}

Status LlamaForCausalLM::save_pretrained(const std::string& dir, bool overwrite) const {
  TG_RETURN_IF_ERROR(hf::prepare_folder(dir, overwrite));
  const LlamaConfig& c = cfg;
  const std::string type = c.model_type.empty() ? "llama" : c.model_type;
  hf::ordered_json j;
  j["architectures"] = {type == "qwen2" ? "Qwen2ForCausalLM" : type == "mistral" ? "MistralForCausalLM" : "LlamaForCausalLM"};
  j["model_type"] = type;
  j["vocab_size"] = c.vocab;
  j["hidden_size"] = c.hidden;
  j["intermediate_size"] = c.intermediate;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["num_key_value_heads"] = c.kv_heads > 0 ? c.kv_heads : c.heads;
  j["head_dim"] = c.head_dim > 0 ? c.head_dim : c.hidden / c.heads;
  j["max_position_embeddings"] = c.max_positions;
  j["rms_norm_eps"] = c.rms_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.factor > 0)  // 0: no scaling
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position}};
  else
    j["rope_scaling"] = nullptr;
  j["hidden_act"] = "silu";
  if (type != "qwen2") j["attention_bias"] = c.attention_bias;
  if (type == "qwen2" || type == "mistral") j["sliding_window"] = nullptr;
  if (type == "qwen2") j["use_sliding_window"] = false;
  j["mlp_bias"] = c.mlp_bias;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["initializer_range"] = c.init_std;
  j["bos_token_id"] = c.bos_id >= 0 ? hf::ordered_json(c.bos_id) : hf::ordered_json(nullptr);
  j["eos_token_id"] = c.eos_id >= 0 ? hf::ordered_json(c.eos_id) : hf::ordered_json(nullptr);
  j["torch_dtype"] = "float32";
  // Our names back to Hugging Face's: "model." before all but the head, W_Q.. as q_proj..
  StateDict sd;
  for (const auto& [name, t] : state_dict()) {
    std::string n = name;
    for (const auto& [ours, theirs] : {std::pair<std::string, std::string>{".w_q.", ".q_proj."}, {".w_k.", ".k_proj."},
                                       {".w_v.", ".v_proj."}, {".w_o.", ".o_proj."}})
      if (auto at = n.find(ours); at != std::string::npos) n.replace(at, ours.size(), theirs);
    sd.insert(n.rfind("lm_head.", 0) == 0 ? n : "model." + n, t.to(kFloat32).contiguous());
  }
  return hf::write_folder(dir, j, sd);
}

}  // namespace tg
