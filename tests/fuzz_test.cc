// The fuzz targets (tests/fuzz/targets.cc) over their committed seeds and over every input a fuzzer
// ever crashed on (tests/fuzz/regressions/TARGET/), in every build: a fixed crash stays fixed.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_util.h"
#include "tests/fuzz/targets.h"

namespace {
namespace fs = std::filesystem;

const std::string kFuzzDir = std::string(TG_TEST_DATA_DIR) + "/fuzz";

class FuzzReplay : public testing::TestWithParam<std::string> {};

TEST_P(FuzzReplay, SeedsAndRegressionsLoadOrAreRefused) {
  const tg::fuzz::Target* target = tg::fuzz::find_target(GetParam());
  ASSERT_NE(target, nullptr);
  int seeds = 0, regressions = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(kFuzzDir) / kind / GetParam();
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::string bytes = tg::read_file(entry.path().string()).value();
      SCOPED_TRACE(entry.path().string());
      target->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++(std::string(kind) == "corpus" ? seeds : regressions);
    }
  }
  RecordProperty("regressions", regressions);
  EXPECT_GE(seeds, 2) << "every target has committed seeds in tests/fuzz/corpus/" << GetParam();
}

// The integrity regressions are refused for the right reason (a crash-free replay alone would
// also pass if they loaded).
TEST(FuzzRegressions, IntegrityCasesAreRefusedNamingTheProblem) {
  auto bytes = [](const std::string& target, const std::string& name) {
    return tg::read_file(kFuzzDir + "/regressions/" + target + "/" + name).value();
  };
  auto message = [](const tg::Status& s) { return s.ok() ? std::string("accepted") : s.message(); };
  EXPECT_TRUE(tg::parse_safetensors(bytes("safetensors", "checksums_valid")).ok());
  for (const auto& [name, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"checksum_flipped_byte", "fails its checksum"},
           {"checksum_missing_tensor", "has no checksum for tensor"},
           {"checksum_extra_name", "which is not a tensor of the file"},
           {"checksum_not_hex", "not 16 hex digits"},
           {"checksums_not_json", "is not a JSON object"},
           {"checksums_a_list", "is not a JSON object"},
           {"checksums_deep", "is not a JSON object"},
           {"overlong_name", "a tensor name of 2021 bytes"},
           {"duplicate_among_many", "tensor 't123' appears twice"}}) {
    auto r = tg::parse_safetensors(bytes("safetensors", name), name);
    EXPECT_NE(message(r.ok() ? tg::Status{} : r.status()).find(fragment), std::string::npos) << name << ": " << message(r.status());
  }
  tg::Linear model(3, 2);
  tg::AdamW opt(model.named_parameters(), {.lr = 1e-3});
  for (const auto& [name, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"nan_weight_valid_checksum", "'model.weight' holds NaN at flat index 0"},
           {"inf_weight_no_checksum", "'model.weight' holds Inf at flat index 0"},
           {"checksum_flipped_weight", "tensor 'model.weight' fails its checksum"}}) {
    auto r = tg::train::parse_train_state(bytes("train_state", name), name, model, opt);
    EXPECT_NE(message(r.ok() ? tg::Status{} : r.status()).find(fragment), std::string::npos) << name << ": " << message(r.status());
  }
  for (const auto& [name, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"wordpiece_post_processor_contradicts_vocab", "but the vocabulary has it at"},
           {"wordpiece_padding_ill_typed", "padding.pad_id = \"0\""},
           {"duplicate_added_token", "listed twice in added_tokens"},
           {"same_added_token_two_ids", "listed twice in added_tokens"}}) {
    auto r = tg::text::Tokenizer::parse(bytes("tokenizer", name), name);
    EXPECT_NE(message(r.ok() ? tg::Status{} : r.status()).find(fragment), std::string::npos) << name << ": " << message(r.status());
  }
}

// The hf_folder seeds are whole folders that load and generate: the fuzzer starts from models that
// run, not from files refused at the first check.
TEST(FuzzSeeds, HfFolderSeedsLoadAndGenerate) {
  for (const char* seed : {"llama.bin", "qwen2.bin", "gpt2.bin", "gpt2_sharded.bin"}) {
    const std::string bytes = tg::read_file(kFuzzDir + "/corpus/hf_folder/" + seed).value();
    const fs::path dir = fs::path(testing::TempDir()) / ("hf_seed_check_" + std::string(seed));
    fs::remove_all(dir);
    fs::create_directories(dir);
    static const char* const kFiles[] = {"config.json", "model.safetensors", "tokenizer.json", "model.safetensors.index.json"};
    size_t at = 0, part = 0;
    for (; at + 4 <= bytes.size() && part < 4; ++part) {
      uint32_t n = 0;
      for (int b = 0; b < 4; ++b) n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + static_cast<size_t>(b)])) << (8 * b);
      tg::write_file_atomic((dir / kFiles[part]).string(), std::string_view(bytes).substr(at + 4, n)).or_throw();
      at += 4 + n;
    }
    if (part == 4) {  // sharded: the weights under the index's shard name only
      fs::rename(dir / "model.safetensors", dir / "model-00001-of-00001.safetensors");
    }
    auto lm = tg::load_causal_lm(dir.string());
    ASSERT_TRUE(lm.ok()) << seed << ": " << lm.status().message();
    EXPECT_EQ(tg::sample(**lm, {0, 1}, {.max_new_tokens = 2, .temperature = 0}).size(), 2u) << seed;
    EXPECT_TRUE(tg::text::Tokenizer::load((dir / "tokenizer.json").string()).ok()) << seed;
    fs::remove_all(dir);
  }
}

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const auto& t : tg::fuzz::targets()) names.push_back(t.name);
  return names;
}

// Writes the seeds (run on demand: tg_tests --gtest_also_run_disabled_tests
// --gtest_filter='*WriteSeeds'): small valid files of every kind each loader reads. The
// *_no_checksums.safetensors seeds are the same files as written before per-tensor checksums: a
// fuzzer that changes their tensor bytes still reaches the checks after the checksum.
TEST(FuzzSeeds, DISABLED_WriteSeeds) {
  auto put = [](const std::string& target, const std::string& name, std::string_view bytes) {
    const fs::path dir = fs::path(kFuzzDir) / "corpus" / target;
    fs::create_directories(dir);
    tg::write_file_atomic((dir / name).string(), bytes).or_throw();
  };
  tg::manual_seed(1);
  tg::StateDict sd;
  sd.insert("w", tg::randn({2, 3}));
  sd.insert("ids", tg::from_vector(std::vector<int64_t>{1, 2, 3}, {3}));
  sd.insert("mask", tg::gt(tg::randn({2}), 0.0));
  sd.insert("d", tg::randn({2}).to(tg::kFloat64));
  put("safetensors", "mixed.safetensors", tg::serialize_safetensors(sd, {{"format", "pt"}, {"step", "7"}}));
  put("safetensors", "empty.safetensors", tg::serialize_safetensors({}));
  {
    tg::manual_seed(1);
    tg::Linear model(3, 2);
    tg::AdamW opt(model.named_parameters(), {.lr = 1e-3});
    tg::Tensor loss = tg::sum(model.forward(tg::randn({4, 3})));
    loss.backward();
    opt.step();
    tg::train::TrainState st;
    st.step = 1;
    st.history["train/loss"] = {{1, 0.5}};
    st.user["seconds"] = "1.5";
    put("train_state", "fresh.safetensors", tg::train::serialize_train_state({}, model, opt));
    put("train_state", "step1.safetensors", tg::train::serialize_train_state(st, model, opt));
  }
  {
    tg::Word2Vec w(tg::WordCounts::from_words({"king", "queen", "man", "woman"}, {4, 3, 2, 1}), tg::randn({4, 3}));
    const std::string dir = testing::TempDir();
    for (bool binary : {false, true}) {
      const std::string path = dir + (binary ? "/v.bin" : "/v.txt");
      w.save(path, binary).or_throw();
      put("word2vec", binary ? "vectors.bin" : "vectors.txt", tg::read_file(path).value());
    }
  }
  const std::vector<std::string> text = {"the cat sat on the mat.", "a dog barked at the cat!", "naïve café, 東京",
                                         "the cat and the dog", "the mat is red."};
  put("vocabulary", "vocab.txt", tg::text::Vocabulary::build({{"the", "cat"}, {"a\tb", "dog"}}, 100).serialize());
  put("vocabulary", "bert_vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n##s\n");
  for (const char* kind : {"word", "char", "bpe", "unigram"}) {
    auto t = tg::text::Tokenizer::train(kind, text, {.vocab_size = std::string(kind) == "bpe" || std::string(kind) == "unigram" ? 30 : 50,
                                                     .min_count = 1});
    if (t.ok()) put("tokenizer", std::string(kind) + ".tok", (*t)->serialize());
  }
  put("tokenizer", "wordpiece.json", R"({"version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [{"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                  {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                  {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
 "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
 "pre_tokenizer": {"type": "BertPreTokenizer"},
 "post_processor": {"type": "TemplateProcessing",
   "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
   "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
   "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
 "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
           "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "the": 4, "cat": 5, "##s": 6, "hello": 7, ",": 8, "!": 9, "world": 10}}})");
  put("readers", "lines.txt", "first line\n\n  second line  \r\nthird\n");
  put("readers", "pairs.tsv", std::string("das haus\tthe house\nein hund\ta dog\n") + '\0' + "the house\na dog\n");
  put("readers", "ding.txt", "# Version :: 1.0\nHaus {n} | Häuser {pl} :: house | houses\nHund {m} :: dog\n");
  {
    const std::string plain = testing::TempDir() + "/lines.txt";
    tg::write_file_atomic(plain, "das haus\tthe house\nein hund\ta dog\n").or_throw();
    ASSERT_EQ(std::system(("gzip -9nc " + plain + " > " + plain + ".gz").c_str()), 0);
    put("gzip", "lines.txt.gz", tg::read_file(plain + ".gz").value());
    put("gzip", "empty.gz", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00", 20));
  }
  put("bert_config", "config.json", R"({"model_type": "bert", "vocab_size": 30, "hidden_size": 8, "num_hidden_layers": 1,
 "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 32, "type_vocab_size": 2,
 "layer_norm_eps": 1e-12, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "pad_token_id": 0})");
  put("bert_config", "minimal.json", R"({"model_type": "bert", "vocab_size": 5, "hidden_size": 4, "num_hidden_layers": 1,
 "num_attention_heads": 1, "intermediate_size": 4, "max_position_embeddings": 8})");
  // sentence-transformers' files, as all-MiniLM-L6-v2 has them (the first byte picks the file).
  put("sentence_settings", "pooling.json", std::string(1, '\0') + R"({"word_embedding_dimension": 8, "pooling_mode_cls_token": false,
 "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false})");
  put("sentence_settings", "modules.json", std::string(1, '\1') + R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
 {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])");
  put("sentence_settings", "sentence_bert_config.json", std::string(1, '\2') + R"({"max_seq_length": 10, "do_lower_case": false})");
  // Hugging Face decoder folders (tests/fuzz/targets.cc hf_folder: length-prefixed parts), tiny.
  auto parts = [](const std::vector<std::string>& files) {
    std::string out;
    for (const std::string& f : files) {
      const uint32_t n = static_cast<uint32_t>(f.size());
      for (int b = 0; b < 4; ++b) out += static_cast<char>((n >> (8 * b)) & 0xFF);
      out += f;
    }
    return out;
  };
  const std::string tok = tg::read_file(kFuzzDir + "/corpus/tokenizer/byte_bpe.json").value();
  for (const char* type : {"llama", "qwen2"}) {
    tg::manual_seed(3);
    tg::LlamaConfig c;
    c.model_type = type;
    c.vocab = 300;
    c.hidden = 8;
    c.intermediate = 12;
    c.layers = 1;
    c.heads = 2;
    c.kv_heads = 1;
    c.max_positions = 16;
    c.attention_bias = std::string(type) == "qwen2";  // Qwen2's config implies its biases
    tg::LlamaForCausalLM lm(c);
    const std::string dir = testing::TempDir() + "/hf_seed_" + type;
    fs::remove_all(dir);
    lm.save_pretrained(dir).or_throw();
    const std::string config = tg::read_file(dir + "/config.json").value(), weights = tg::read_file(dir + "/model.safetensors").value();
    put("hf_folder", std::string(type) + ".bin", parts({config, weights, tok}));
  }
  {
    tg::manual_seed(3);
    tg::DecoderLM lm({.vocab = 300, .context = 16, .layer = {.d_model = 8, .heads = 2, .d_ff = 16, .activation = tg::Activation::kGeluTanh,
                                                             .norm_first = true}, .layers = 1});
    const std::string dir = testing::TempDir() + "/hf_seed_gpt2";
    fs::remove_all(dir);
    lm.save_pretrained(dir).or_throw();
    const std::string config = tg::read_file(dir + "/config.json").value(), weights = tg::read_file(dir + "/model.safetensors").value();
    put("hf_folder", "gpt2.bin", parts({config, weights, tok}));
    std::string index = R"({"metadata": {}, "weight_map": {)";
    const tg::SafetensorsFile parsed = tg::parse_safetensors(weights).value();
    for (const auto& [name, t] : parsed.tensors)
      index += (index.back() == '{' ? "\"" : ", \"") + name + "\": \"model-00001-of-00001.safetensors\"";
    index += "}}";
    put("hf_folder", "gpt2_sharded.bin", parts({config, weights, tok, index}));
  }
}

INSTANTIATE_TEST_SUITE_P(Loaders, FuzzReplay, testing::ValuesIn(target_names()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
