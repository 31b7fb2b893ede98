// Llama-family decoders: the modules (RMSNorm, rotary positions, grouped-query attention with its
// cache, SwiGLU) gradchecked in float64, and checkpoints written by Hugging Face transformers
// and GPT-2 (tests/golden/decoders, made by tools/make_decoder_golden.py; the GPT-2 one sharded)
// giving transformers' logits and
// greedy continuations, with and without the key/value cache; bad folders refused in one line.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace {
using namespace tgt;
namespace fs = std::filesystem;

std::string golden_dir(const std::string& name) { return std::string(TG_TEST_DATA_DIR) + "/golden/decoders/" + name; }

tg::LlamaConfig tiny(int64_t heads = 4, int64_t kv = 2) {
  return {.vocab = 11, .hidden = 8, .intermediate = 12, .layers = 2, .heads = heads, .kv_heads = kv, .max_positions = 32};
}

TEST(Llama, ModulesGradcheckInFloat64) {
  tg::manual_seed(1);
  tg::RMSNorm norm(6);
  norm.to(tg::kFloat64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return norm.forward(in[0]); }, {leaf({2, 3, 6})}));
  tg::SwiGLU ffn(6, 10);
  ffn.to(tg::kFloat64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return ffn.forward(in[0]); }, {leaf({2, 3, 6})}));
  // Grouped-query self-attention with rotary positions: gradients to the input and to W_Q, W_K, W_V.
  tg::MultiHeadAttention attn({.d_model = 8, .heads = 4, .kv_heads = 2, .qkv_bias = true, .out_bias = false});
  attn.rotary = std::make_shared<tg::RotaryEmbedding>(2);
  attn.to(tg::kFloat64);
  EXPECT_EQ(attn.w_k->weight.shape(), Shape({4, 8}));
  EXPECT_TRUE(gradcheck_ok(
      [&](const std::vector<Tensor>& in) { return attn.forward(in[0], in[0], {.causal = true}); }, {leaf({2, 5, 8})}));
  // The whole model in float64: the gradients of layer 0's W_Q, W_K and W_V (through rotary
  // positions, grouped heads, both layers, the norms and the head) — ordinary parameters.
  tg::LlamaForCausalLM m(tiny());
  m.to(tg::kFloat64);
  const Tensor ids = tg::from_vector<int64_t>({1, 4, 9, 3, 3, 7}, {2, 3});
  auto& a0 = *(*m.layers)[0]->self_attn;
  for (tg::Linear* lin : {a0.w_q.get(), a0.w_k.get(), a0.w_v.get()}) {
    const Tensor original = lin->weight;
    EXPECT_TRUE(gradcheck_ok(
        [&](const std::vector<Tensor>& in) {
          lin->weight = in[0];
          return m.forward(ids);
        },
        {original.detach().clone().requires_grad_()}));
    lin->weight = original;
  }
}

TEST(Llama, KeyValueCacheHoldsTheKeyValueHeadsAndMatchesTheFullForward) {
  tg::manual_seed(2);
  tg::LlamaForCausalLM m(tiny(4, 1));  // multi-query
  m.eval();
  tg::NoGradGuard ng;
  Tensor ids = tg::from_vector<int64_t>({1, 4, 9, 3, 3, 7, 2}, {1, 7});
  Tensor full = m.forward(ids);
  tg::DecoderCache cache;
  Tensor first = m.forward(ids.narrow(1, 0, 4), &cache);
  EXPECT_EQ(cache.self[0].keys().shape(), Shape({1, 1, 4, 2}));  // [B, kv_heads, S, head_dim]
  Tensor rest = m.forward(ids.narrow(1, 4, 3), &cache, /*last_only=*/false);
  EXPECT_EQ(cache.length, 7);
  EXPECT_TRUE(close(first, full.narrow(1, 0, 4), 1e-5, 1e-6));
  EXPECT_TRUE(close(rest, full.narrow(1, 4, 3), 1e-5, 1e-6));
  EXPECT_TRUE(throws_with([&] { m.forward(tg::zeros({1, 30}, tg::kInt64), &cache); }, {"LlamaForCausalLM", "37", "32"}));
}

// Greedy continuation of `prompt` by n tokens, with the cache (one token a step) or recomputing.
std::vector<int64_t> greedy(tg::CausalLM& m, const Tensor& prompt, int64_t n, bool use_cache) {
  tg::NoGradGuard ng;
  std::vector<int64_t> seq = prompt.to_vector<int64_t>(), out;
  tg::DecoderCache cache;
  Tensor next = prompt;
  for (int64_t i = 0; i < n; ++i) {
    Tensor logits = use_cache ? m.forward(next, &cache, true)
                              : m.forward(tg::from_vector<int64_t>(seq, {1, static_cast<int64_t>(seq.size())}), nullptr, true);
    const int64_t id = tg::argmax(logits.reshape({-1}), 0, false).to_vector<int64_t>()[0];
    out.push_back(id);
    seq.push_back(id);
    next = tg::from_vector<int64_t>({id}, {1, 1});
  }
  return out;
}

// The folder's model against its golden logits and greedy tokens (cached, uncached, and through tg::sample).
void expect_golden(const std::string& dir, const std::string& golden) {
  auto loaded = tg::load_causal_lm(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  tg::CausalLM& m = **loaded;
  const tg::SafetensorsFile g = tg::load_safetensors(golden + "/golden.safetensors").value();
  const Tensor prompt = g.tensors.at("prompt");
  {
    tg::NoGradGuard ng;
    EXPECT_TRUE(close(m.forward(prompt), g.tensors.at("logits"), 1e-4, 1e-4));
  }
  const std::vector<int64_t> want = g.tensors.at("greedy").to_vector<int64_t>();
  EXPECT_EQ(greedy(m, prompt, static_cast<int64_t>(want.size()), true), want);
  EXPECT_EQ(greedy(m, prompt, static_cast<int64_t>(want.size()), false), want);
  EXPECT_EQ(tg::sample(m, prompt.to_vector<int64_t>(), {.max_new_tokens = static_cast<int64_t>(want.size()), .temperature = 0}),
            want);
}

class DecoderGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderGolden, LogitsAndGreedyTokensEqualTransformers) { expect_golden(golden_dir(GetParam()), golden_dir(GetParam())); }

// The folder's tokenizer.json gives the golden prompt from its text, as `tokenizers` did.
TEST_P(DecoderGolden, TokenizerInTheFolderGivesThePrompt) {
  auto tok = tg::text::Tokenizer::load_in(golden_dir(GetParam())).value();
  EXPECT_EQ(tok->kind(), "byte_bpe");
  const tg::SafetensorsFile g = tg::load_safetensors(golden_dir(GetParam()) + "/golden.safetensors").value();
  EXPECT_EQ(tok->encode_pair("To be, or not to be: that is the question.").ids, g.tensors.at("prompt").to_vector<int64_t>());
}

// The same weights with the configuration in the form most hub files have (transformers 4:
// rope_theta and rope_scaling at the top; Qwen2's disabled sliding window shorter than the context).
TEST_P(DecoderGolden, HubStyleConfigGivesTheSameModel) {
  const fs::path dir = fs::temp_directory_path() / ("tg_hub_config_" + GetParam());
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(golden_dir(GetParam())))
    if (e.path().filename().string().rfind("model", 0) == 0) fs::copy_file(e.path(), dir / e.path().filename());
  fs::copy_file(golden_dir(GetParam()) + "/config_hub.json", dir / "config.json");
  expect_golden(dir.string(), golden_dir(GetParam()));
  fs::remove_all(dir);
}

// save_pretrained writes a folder that loads back to the same model (and, checked by
// bench/check_saved_decoders.py with TG_KEEP_SAVED=DIR, that transformers loads with the same logits).
TEST_P(DecoderGolden, SavePretrainedLoadsBackExactly) {
  const char* keep = std::getenv("TG_KEEP_SAVED");
  const fs::path dir = (keep ? fs::path(keep) : fs::temp_directory_path() / "tg_saved") / GetParam();
  fs::remove_all(dir);
  auto m = tg::load_causal_lm(golden_dir(GetParam())).value();
  tg::Status saved = GetParam() == "gpt2" ? dynamic_cast<tg::DecoderLM&>(*m).save_pretrained(dir.string())
                                          : dynamic_cast<tg::LlamaForCausalLM&>(*m).save_pretrained(dir.string());
  ASSERT_TRUE(saved.ok()) << saved.message();
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  auto again = tg::load_causal_lm(dir.string());
  ASSERT_TRUE(again.ok()) << again.status().message();
  const Tensor prompt = tg::load_safetensors(golden_dir(GetParam()) + "/golden.safetensors").value().tensors.at("prompt");
  tg::NoGradGuard ng;
  EXPECT_TRUE(close(m->forward(prompt), (*again)->forward(prompt), 0, 0));  // bit for bit
  EXPECT_EQ((*again)->eos_token_id(), m->eos_token_id());
  // A folder holding a model is not replaced unless asked.
  tg::Status twice = GetParam() == "gpt2" ? dynamic_cast<tg::DecoderLM&>(*m).save_pretrained(dir.string())
                                          : dynamic_cast<tg::LlamaForCausalLM&>(*m).save_pretrained(dir.string());
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("overwrite"), std::string::npos) << twice.message();
  if (!keep) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, DecoderGolden, ::testing::Values("llama", "qwen2", "llama3", "gpt2"));

// The hub's own GPT-2 file form: one file, names without "transformer.", the causal-mask buffers
// (attn.bias, attn.masked_bias) stored beside the weights; and bfloat16 weights.
TEST(Gpt2, HubNamesMaskBuffersAndBFloat16Load) {
  const fs::path dir = fs::temp_directory_path() / "tg_gpt2_hub";
  fs::remove_all(dir);
  fs::create_directories(dir);
  tg::StateDict sd;
  const auto ck = tg::open_safetensors_checkpoint(golden_dir("gpt2")).value();
  ASSERT_GT(ck.files.size(), 1u);  // the golden folder is sharded
  for (const auto& f : ck.files)
    for (const auto& t : f.tensors()) sd.insert(t.name.substr(std::string("transformer.").size()), f.read(t.name).value());
  for (int l = 0; l < 2; ++l) {
    sd.insert("h." + std::to_string(l) + ".attn.bias", tg::ones({1, 1, 256, 256}));
    sd.insert("h." + std::to_string(l) + ".attn.masked_bias", tg::full({}, -1e4));
  }
  ASSERT_TRUE(tg::save_safetensors((dir / "model.safetensors").string(), sd).ok());
  fs::copy_file(golden_dir("gpt2") + "/config.json", dir / "config.json");
  expect_golden(dir.string(), golden_dir("gpt2"));
  // bfloat16 weights load into float32 parameters.
  tg::StateDict half;
  for (const auto& [n, t] : sd) half.insert(n, t.to(tg::kBFloat16));
  ASSERT_TRUE(tg::save_safetensors((dir / "model.safetensors").string(), half).ok());
  auto m = tg::DecoderLM::from_pretrained(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->tok_embed->weight.dtype(), tg::kFloat32);
  fs::remove_all(dir);
}

TEST(Gpt2, ConfigIsReadAndWhatIsNotImplementedIsRefusedByName) {
  const fs::path dir = fs::temp_directory_path() / "tg_gpt2_config";
  fs::create_directories(dir);
  auto with = [&](const std::string& extra) {
    std::ofstream(dir / "config.json") << R"({"model_type": "gpt2", "vocab_size": 50, "n_embd": 8, "n_layer": 1, "n_head": 2)" +
                                              extra + "}";
    return tg::LMConfig::from_json((dir / "config.json").string());
  };
  auto c = with(R"(, "n_ctx": 64, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->context, 64);
  EXPECT_EQ(c->layer.d_ff, 32);  // n_inner null: 4 n_embd
  EXPECT_EQ(c->layer.activation, tg::Activation::kGeluTanh);
  EXPECT_TRUE(c->tie_weights);
  auto refused = [&](const std::string& extra, std::vector<std::string> words) {
    auto r = with(extra);
    if (r.ok()) return ::testing::AssertionFailure() << extra << " was accepted";
    for (const std::string& w : words)
      if (r.status().message().find(w) == std::string::npos)
        return ::testing::AssertionFailure() << "'" << w << "' not in: " << r.status().message();
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(refused(R"(, "activation_function": "swish")", {"activation_function", "swish"}));
  EXPECT_TRUE(refused(R"(, "scale_attn_by_inverse_layer_idx": true)", {"scale_attn_by_inverse_layer_idx"}));
  EXPECT_TRUE(refused(R"(, "scale_attn_weights": false)", {"scale_attn_weights"}));
  // A dropout on the embeddings other than the blocks' is GPT-2's own: read, not refused.
  auto drops = with(R"(, "embd_pdrop": 0.0, "resid_pdrop": 0.1)");
  ASSERT_TRUE(drops.ok()) << drops.status().message();
  EXPECT_EQ(drops->embed_dropout, 0.0);
  EXPECT_EQ(drops->layer.dropout, 0.1);
  EXPECT_TRUE(refused(R"(, "add_cross_attention": true)", {"add_cross_attention"}));
  EXPECT_TRUE(refused(R"(, "n_head": 3)", {"n_embd 8", "n_head 3"}));
  EXPECT_TRUE(refused(R"(, "model_type": "gpt_neo")", {"model_type", "gpt_neo"}));
  std::ofstream(dir / "config.json") << R"({"model_type": "falcon"})";
  auto lm = tg::load_causal_lm(dir.string());
  ASSERT_FALSE(lm.ok());
  EXPECT_NE(lm.status().message().find("falcon"), std::string::npos) << lm.status().message();
  fs::remove_all(dir);
}

// A sharded folder whose index lies is refused naming the index or the shard: a shard name that
// leaves the folder, a tensor the index does not place where it is, a tensor listed but absent.
TEST(ShardedCheckpoint, IndexIsCheckedAgainstTheShards) {
  const fs::path dir = fs::temp_directory_path() / "tg_shards";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(golden_dir("gpt2"))) fs::copy_file(e.path(), dir / e.path().filename());
  std::ifstream in(dir / "model.safetensors.index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  const std::string wte_shard = index["weight_map"]["transformer.wte.weight"];
  std::string other_shard;
  for (const auto& [name, shard] : index["weight_map"].items())
    if (shard != wte_shard) other_shard = shard;
  auto with_index = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = index;
    change(j);
    std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << j.dump();
    auto r = tg::open_safetensors_checkpoint(dir.string());
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  auto wte_in = [&](const std::string& shard) {
    return with_index([&](nlohmann::json& j) { j["weight_map"]["transformer.wte.weight"] = shard; });
  };
  std::string msg = wte_in("../" + wte_shard);
  EXPECT_NE(msg.find("plain file name"), std::string::npos) << msg;
  msg = wte_in("/etc/passwd");
  EXPECT_NE(msg.find("plain file name"), std::string::npos) << msg;
  msg = wte_in("..");
  EXPECT_NE(msg.find("plain file name"), std::string::npos) << msg;
  msg = wte_in(other_shard);  // the index places it in another shard than the one holding it
  EXPECT_NE(msg.find("transformer.wte.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find(other_shard), std::string::npos) << msg;
  msg = with_index([&](nlohmann::json& j) { j["weight_map"]["transformer.extra"] = wte_shard; });
  EXPECT_NE(msg.find("transformer.extra"), std::string::npos) << msg;
  msg = with_index([](nlohmann::json& j) { j.erase("weight_map"); });
  EXPECT_NE(msg.find("weight_map"), std::string::npos) << msg;
  std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << index.dump();
  EXPECT_TRUE(tg::DecoderLM::from_pretrained(dir.string()).ok());
  fs::remove(dir / other_shard);
  auto r = tg::DecoderLM::from_pretrained(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(other_shard), std::string::npos) << r.status().message();
  fs::remove_all(dir);
  r = tg::DecoderLM::from_pretrained(dir.string());
  ASSERT_FALSE(r.ok());
}

TEST(Sample, RepetitionPenaltyAndGreedyAtTemperatureZero) {
  auto m = tg::load_causal_lm(golden_dir("llama")).value();
  const std::vector<int64_t> prompt = {5, 6, 7};
  const auto plain = tg::sample(*m, prompt, {.max_new_tokens = 40, .temperature = 0});
  const auto penalised = tg::sample(*m, prompt, {.max_new_tokens = 40, .temperature = 0, .repetition_penalty = 1e6});
  // With a huge penalty no token comes twice (until every token with a positive logit is used).
  std::set<int64_t> seen(prompt.begin(), prompt.end());
  for (int64_t id : penalised) EXPECT_TRUE(seen.insert(id).second) << id;
  EXPECT_NE(plain, penalised);
  std::vector<int64_t> streamed;
  const auto stopped = tg::sample(*m, prompt, {.max_new_tokens = 40, .temperature = 0, .on_token = [&](int64_t id) {
                                                 streamed.push_back(id);
                                                 return streamed.size() < 5;
                                               }});
  EXPECT_EQ(stopped, streamed);
  EXPECT_EQ(stopped, std::vector<int64_t>(plain.begin(), plain.begin() + 5));
  EXPECT_TRUE(throws_with([&] { tg::sample(*m, prompt, {.temperature = -1}); }, {"temperature"}));
  EXPECT_TRUE(throws_with([&] { tg::sample(*m, prompt, {.repetition_penalty = 0}); }, {"repetition_penalty"}));
}

TEST(Llama, ConfigsOfTheFamilyAreReadAndWhatIsNotImplementedIsRefusedByName) {
  const fs::path dir = fs::temp_directory_path() / "tg_llama_config";
  fs::create_directories(dir);
  auto with = [&](const std::string& text) {
    std::ofstream(dir / "config.json") << text;
    return tg::LlamaConfig::from_json((dir / "config.json").string());
  };
  const std::string base = R"("vocab_size": 11, "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64)";
  tg::Result<tg::LlamaConfig> hub = with(R"({"model_type": "llama", )" + base +
                                         R"(, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}})");
  ASSERT_TRUE(hub.ok()) << hub.status().message();
  EXPECT_EQ(hub->rope_theta, 500000.0);
  EXPECT_EQ(hub->rope_scaling.factor, 8.0);
  EXPECT_EQ(hub->rope_scaling.original_max_position, 32);
  tg::Result<tg::LlamaConfig> qwen = with(R"({"model_type": "qwen2", )" + base + R"(, "sliding_window": 16, "use_sliding_window": false})");
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  EXPECT_TRUE(qwen->attention_bias);
  auto refused = [&](const std::string& extra, std::vector<std::string> words, const char* type = "llama") {
    tg::Result<tg::LlamaConfig> r = with(std::string(R"({"model_type": ")") + type + "\", " + base + extra + "}");
    if (r.ok()) return ::testing::AssertionFailure() << extra << " was accepted";
    for (const std::string& w : words)
      if (r.status().message().find(w) == std::string::npos)
        return ::testing::AssertionFailure() << "'" << w << "' not in: " << r.status().message();
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(refused(R"(, "sliding_window": 16)", {"sliding_window 16", "64"}, "mistral"));
  EXPECT_TRUE(refused(R"(, "sliding_window": 16, "use_sliding_window": true)", {"sliding_window"}, "qwen2"));
  EXPECT_TRUE(refused(R"(, "num_local_experts": 8)", {"num_local_experts", "experts"}));
  EXPECT_TRUE(refused(R"(, "partial_rotary_factor": 0.5)", {"partial_rotary_factor"}));
  EXPECT_TRUE(refused(R"(, "hidden_act": "gelu")", {"hidden_act", "gelu"}));
  EXPECT_TRUE(refused(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})", {"rope_scaling", "yarn"}));
  // llama3 scaling without its four fields is refused (transformers does), never given defaults.
  EXPECT_TRUE(refused(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0})", {"rope_scaling", "low_freq_factor"}));
  EXPECT_TRUE(refused(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0})",
                      {"original_max_position_embeddings"}));
  EXPECT_TRUE(refused(R"(, "rope_scaling": {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32})", {"no factor"}));
  EXPECT_TRUE(refused(R"(, "num_key_value_heads": 3)", {"num_key_value_heads 3"}));
  EXPECT_TRUE(refused(R"(, "rms_norm_eps": -1)", {"rms_norm_eps", "-1"}));
  EXPECT_TRUE(refused("", {"model_type", "gpt_neox"}, "gpt_neox"));
  fs::remove_all(dir);
}

TEST(Llama, AFolderWhoseConfigDoesNotMatchItsWeightsIsRefusedBeforeAllocating) {
  const fs::path dir = fs::temp_directory_path() / "tg_llama_mismatch";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(golden_dir("llama") + "/model.safetensors", dir / "model.safetensors");
  std::ifstream in(golden_dir("llama") + "/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"intermediate_size\": 96");
  ASSERT_NE(at, std::string::npos);
  std::ofstream(dir / "config.json") << text.replace(at, 23, "\"intermediate_size\": 960000");
  auto r = tg::LlamaForCausalLM::from_pretrained(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mlp.gate_proj.weight"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("intermediate_size"), std::string::npos) << r.status().message();
  fs::remove_all(dir);
}

// A model trained by train_lm --arch llama with a byte_bpe tokenizer it trained
// (tests/golden/train_lm_llama, tools/make_train_lm_golden.py): transformers' AutoModelForCausalLM
// and AutoTokenizer loaded that folder; we give their logits, greedy tokens and token ids.
TEST(TrainLmFolder, TransformersGivesTheSameLogitsTokensAndIds) {
  const std::string dir = std::string(TG_TEST_DATA_DIR) + "/golden/train_lm_llama";
  expect_golden(dir, dir);
  auto tok = tg::text::Tokenizer::load_in(dir).value();
  EXPECT_EQ(tok->kind(), "byte_bpe");
  const tg::SafetensorsFile g = tg::load_safetensors(dir + "/golden.safetensors").value();
  EXPECT_EQ(tok->encode("ROMEO:\nBut soft, what light through yonder window breaks?"), g.tensors.at("prompt").to_vector<int64_t>());
  std::ifstream s(std::string(TG_TEST_DATA_DIR) + "/golden/tokenizers/golden.json"), i(dir + "/tokenizer_ids.json");
  const nlohmann::json strings = nlohmann::json::parse(s)["strings"], ids = nlohmann::json::parse(i)["ids"];
  ASSERT_EQ(strings.size(), ids.size());
  int64_t differ = 0;
  for (size_t k = 0; k < strings.size(); ++k)
    if (tok->encode(strings[k].get<std::string>()) != ids[k].get<std::vector<int64_t>>() && ++differ <= 3)
      ADD_FAILURE() << "string " << k << ": " << strings[k].dump();
  EXPECT_EQ(differ, 0);
}

}  // namespace
