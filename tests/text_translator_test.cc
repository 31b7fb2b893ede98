// text/translator.h: a translator folder saved and read back translates the same, its
// configuration survives the metadata round trip and bad values are refused by name; and
// models/attention.h's fix_attention_projections (the W_Q/W_K/W_V ablation).
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace tgt {
namespace {

namespace text = tg::text;
namespace fs = std::filesystem;

const std::vector<std::string> kGerman = {"das haus ist alt", "der hund ist klein", "ich habe keine zeit",
                                          "wo ist der bahnhof", "das auto ist rot", "der mann ist alt"};
const std::vector<std::string> kEnglish = {"the house is old", "the dog is small", "i have no time",
                                           "where is the station", "the car is red", "the man is old"};

text::TranslatorConfig small_config() {
  return {.layers = 1, .width = 16, .heads = 2, .ff = 32, .max_len = 32, .dropout = 0.0, .tokenizer = "word"};
}

text::Translator small_translator(uint64_t seed, double dropout = 0.0) {
  const text::TrainOptions to{.vocab_size = 100, .min_count = 1};
  text::TranslatorConfig c = small_config();
  c.dropout = dropout;
  tg::manual_seed(seed);
  return text::Translator::create(c, text::Tokenizer::train("word", kGerman, to).value(),
                                  text::Tokenizer::train("word", kEnglish, to).value());
}

Tensor param(const tg::Module& m, const std::string& name) {
  for (const auto& [n, p] : m.named_parameters())
    if (n == name) return p;
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/text_translator_test_" + name;
  fs::remove_all(dir);
  return dir;
}

TEST(Translator, ASavedFolderLoadsAndTranslatesTheSame) {
  const text::Translator t = small_translator(3);
  const std::string dir = fresh_dir("round_trip");
  ASSERT_TRUE(t.save(dir).ok());
  for (const char* f : {"model.safetensors", "src.txt", "tgt.txt"}) EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  tg::Result<text::Translator> back = text::Translator::load(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->config.to_metadata(), t.config.to_metadata());
  EXPECT_FALSE(back->model->is_training());
  t.model->eval();
  std::vector<text::Example> examples;
  for (size_t i = 0; i < kGerman.size(); ++i) examples.push_back({t.src->encode(kGerman[i]), t.tgt->encode(kEnglish[i])});
  for (const std::string& s : kGerman) {
    EXPECT_EQ(back->translate(s), t.translate(s)) << s;
    EXPECT_EQ(back->translate(s, {.beam = 1, .use_cache = false}), t.translate(s, {.beam = 1, .use_cache = true})) << s;
  }
  EXPECT_EQ(back->translate_greedy(examples), t.translate_greedy(examples));
  EXPECT_EQ(t.translate_greedy(examples, 2).size(), 2u);
  EXPECT_EQ(t.translate(""), "");
}

TEST(Translator, GreedyTranslationRestoresTheTrainingMode) {
  const text::Translator t = small_translator(4, /*dropout=*/0.5);
  t.model->train();
  const std::vector<text::Example> one = {{t.src->encode(kGerman[0]), t.tgt->encode(kEnglish[0])}};
  const std::vector<std::string> first = t.translate_greedy(one);
  EXPECT_TRUE(t.model->is_training());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.translate_greedy(one), first);  // evaluation mode inside (greedy_decode's): no dropout
}

TEST(Translator, LoadRefusesSwappedTokenizersAndWrongShapes) {
  const text::Translator t = small_translator(5);
  const std::string dir = fresh_dir("swapped");
  ASSERT_TRUE(t.save(dir).ok());
  fs::rename(dir + "/src.txt", dir + "/tmp.txt");
  fs::rename(dir + "/tgt.txt", dir + "/src.txt");
  fs::rename(dir + "/tmp.txt", dir + "/tgt.txt");
  tg::Result<text::Translator> swapped = text::Translator::load(dir);
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find("were the src and tgt files swapped"), std::string::npos)
      << swapped.status().message();

  // A model file whose metadata says another feed-forward width than its tensors.
  const std::string dir2 = fresh_dir("shapes");
  ASSERT_TRUE(t.save(dir2).ok());
  tg::Metadata meta = t.config.to_metadata();
  meta["ff"] = "64";
  meta["src_tokenizer_fingerprint"] = t.src->fingerprint();
  meta["tgt_tokenizer_fingerprint"] = t.tgt->fingerprint();
  ASSERT_TRUE(tg::save_module(*t.model, dir2 + "/model.safetensors", meta).ok());
  tg::Result<text::Translator> wrong = text::Translator::load(dir2);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("has shape [32, 16], but the metadata and tokenizers say [64, 16]"), std::string::npos)
      << wrong.status().message();

  tg::Result<text::Translator> missing = text::Translator::load(fresh_dir("nothing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("model.safetensors"), std::string::npos) << missing.status().message();
}

TEST(TranslatorConfig, MetadataRoundTripAndRefusals) {
  const text::TranslatorConfig c{.layers = 3, .width = 48, .heads = 6, .ff = 100, .max_len = 77, .dropout = 0.3, .tokenizer = "bpe"};
  tg::Result<text::TranslatorConfig> back = text::TranslatorConfig::from_metadata(c.to_metadata(), "m");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_metadata(), c.to_metadata());
  EXPECT_EQ(back->dropout, 0.3);

  tg::Metadata older = c.to_metadata();
  older.erase("tokenizer");  // models saved before the flag: words
  EXPECT_EQ(text::TranslatorConfig::from_metadata(older, "m")->tokenizer, "word");

  for (auto [key, value, fragment] : {std::tuple{"heads", "5", "not a multiple of heads 5"}, std::tuple{"layers", "0", "layers"},
                                      std::tuple{"tokenizer", "morse", "morse"}, std::tuple{"dropout", "1.5", "dropout"},
                                      std::tuple{"width", "x", "width"}}) {
    tg::Metadata m = c.to_metadata();
    m[key] = value;
    tg::Result<text::TranslatorConfig> r = text::TranslatorConfig::from_metadata(m, "model.safetensors");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find("model.safetensors"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(throws_with(
      [] {
        text::TranslatorConfig chars = small_config();
        chars.tokenizer = "char";
        text::Translator::create(chars, text::Tokenizer::train("word", kGerman).value(), text::Tokenizer::train("word", kEnglish).value());
      },
      {"Translator::create", "'word'", "'char'"}));
}

TEST(AttentionProjections, IdentityFrozenAndLearned) {
  auto count_trainable = [](const tg::Module& m) { return m.num_parameters(/*trainable_only=*/true); };
  const text::TranslatorConfig c = small_config();

  tg::manual_seed(1);
  tg::Transformer learned(c.model(20, 20));
  const int64_t all = count_trainable(learned);
  tg::fix_attention_projections(learned, tg::Projections::kLearned);
  EXPECT_EQ(count_trainable(learned), all);

  // Per attention (3: encoder self, decoder self and cross), W_Q, W_K, W_V: 3 x (16 x 16 + 16).
  const int64_t fixed = 3 * 3 * (16 * 16 + 16);
  tg::manual_seed(1);
  tg::Transformer frozen(c.model(20, 20));
  tg::fix_attention_projections(frozen, tg::Projections::kFrozen);
  EXPECT_EQ(count_trainable(frozen), all - fixed);
  for (const auto& [name, p] : frozen.named_parameters()) {
    const bool projection = name.find(".w_q.") != std::string::npos || name.find(".w_k.") != std::string::npos ||
                            name.find(".w_v.") != std::string::npos;
    EXPECT_EQ(p.requires_grad(), !projection) << name;
    EXPECT_TRUE(close(p, param(learned, name), 0, 0)) << name;  // values kept
  }

  tg::manual_seed(1);
  tg::Transformer identity(c.model(20, 20));
  tg::fix_attention_projections(identity, tg::Projections::kIdentity);
  EXPECT_EQ(count_trainable(identity), all - fixed);
  EXPECT_TRUE(close(param(identity, "encoder.layers.0.self_attn.w_k.weight"), tg::eye(16), 0, 0));
  EXPECT_TRUE(close(param(identity, "decoder.layers.0.cross_attn.w_v.bias"), tg::zeros({16}), 0, 0));
  const std::string w_o = "encoder.layers.0.self_attn.w_o.weight";
  EXPECT_TRUE(close(param(identity, w_o), param(learned, w_o), 0, 0));  // W_O untouched

  // A bare attention module (names without a parent: "w_q.weight"): Q = K = V = X.
  tg::manual_seed(2);
  tg::MultiHeadAttention mha(8, 2);
  tg::fix_attention_projections(mha, tg::Projections::kIdentity);
  EXPECT_TRUE(close(mha.w_q->weight, tg::eye(8), 0, 0));
  EXPECT_FALSE(mha.w_v->bias.requires_grad());
  EXPECT_TRUE(mha.w_o->weight.requires_grad());

  // Grouped-query attention's W_K and W_V are not square: no identity.
  tg::MultiHeadAttention gqa(tg::AttentionConfig{.d_model = 8, .heads = 4, .kv_heads = 2});
  EXPECT_TRUE(throws_with([&] { tg::fix_attention_projections(gqa, tg::Projections::kIdentity); },
                          {"fix_attention_projections", "w_k.weight", "[4, 8]", "grouped-query"}));
}

TEST(Report, HeadHeatmapsOnePerHead) {
  const Tensor w = tg::from_vector(std::vector<float>{0.1f, 0.9f, 0.4f, 0.6f, 1, 0, 0.5f, 0.5f}, {1, 2, 2, 2});
  const auto maps = tg::report::head_heatmaps(w, "layer 3", {"a", "b"}, {"x", "y"});
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[1].title, "layer 3 head 1");
  EXPECT_EQ(maps[1].w, (std::vector<std::vector<float>>{{1, 0}, {0.5f, 0.5f}}));
  EXPECT_EQ(maps[0].col_labels, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(throws_with([&] { tg::report::head_heatmaps(w, "t", {"a"}, {"x", "y"}); }, {"head_heatmaps", "1 row"}));
  EXPECT_TRUE(throws_with([&] { tg::report::head_heatmaps(w.reshape({2, 2, 2}), "t", {"a", "b"}, {"x", "y"}); },
                          {"head_heatmaps", "[2, 2, 2]"}));
}

}  // namespace
}  // namespace tgt
