// Pretrained models: state-dict loading through name mappings with PyTorch's strictness, the BERT
// model (gradients, padding invariance, folder checks), the WordPiece tokenizer on a small
// tokenizer.json made here, and — with the real all-MiniLM-L6-v2 fetched by `./tg.sh models` — ids
// and embeddings against Hugging Face's (tests/golden/minilm, made by tools/minilm_golden.py).
// Without the model these last tests skip, unless TG_REQUIRE_MODELS=1 (as `./tg.sh test` sets),
// where they fail.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tgt {
namespace {

using tg::Tensor;
namespace fs = std::filesystem;

tg::BertConfig tiny_config() {
  return {.vocab = 40, .hidden = 8, .layers = 2, .heads = 2, .intermediate = 16, .max_positions = 12, .type_vocab = 2,
          .pad_id = 0, .eps = 1e-12, .dropout = 0.1, .attn_dropout = 0.0};
}

// The tiny model's parameters under Hugging Face's BertModel names, with values v(name).
tg::StateDict hf_state_dict(const tg::BertConfig& c, bool pooler = true) {
  tg::StateDict sd;
  auto put = [&](const std::string& n, const tg::Shape& s) { sd.insert(n, tg::randn(s)); };
  put("embeddings.word_embeddings.weight", {c.vocab, c.hidden});
  put("embeddings.position_embeddings.weight", {c.max_positions, c.hidden});
  put("embeddings.token_type_embeddings.weight", {c.type_vocab, c.hidden});
  put("embeddings.LayerNorm.weight", {c.hidden});
  put("embeddings.LayerNorm.bias", {c.hidden});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      put(p + m + ".weight", {c.hidden, c.hidden});
      put(p + m + ".bias", {c.hidden});
    }
    put(p + "attention.output.LayerNorm.weight", {c.hidden});
    put(p + "attention.output.LayerNorm.bias", {c.hidden});
    put(p + "intermediate.dense.weight", {c.intermediate, c.hidden});
    put(p + "intermediate.dense.bias", {c.intermediate});
    put(p + "output.dense.weight", {c.hidden, c.intermediate});
    put(p + "output.dense.bias", {c.hidden});
    put(p + "output.LayerNorm.weight", {c.hidden});
    put(p + "output.LayerNorm.bias", {c.hidden});
  }
  if (pooler) {
    put("pooler.dense.weight", {c.hidden, c.hidden});
    put("pooler.dense.bias", {c.hidden});
  }
  sd.insert("embeddings.position_ids", tg::arange(c.max_positions).reshape({1, c.max_positions}));
  return sd;
}

tg::StateDict without(const tg::StateDict& sd, const std::string& drop) {
  tg::StateDict out;
  for (const auto& [n, t] : sd)
    if (n != drop) out.insert(n, t);
  return out;
}

TEST(LoadStateDict, MapsHuggingFaceNamesIntoTheZoosModules) {
  tg::manual_seed(1);
  const tg::BertConfig c = tiny_config();
  tg::BertModel m(c);
  const tg::StateDict sd = hf_state_dict(c);
  tg::LoadReport r = tg::load_state_dict(m, sd, {.names = tg::BertModel::hugging_face_names()}).value();
  EXPECT_EQ(r.loaded.size(), m.named_parameters().size());
  EXPECT_TRUE(r.missing.empty());
  EXPECT_TRUE(r.unexpected.empty());
  EXPECT_EQ(r.ignored, std::vector<std::string>{"embeddings.position_ids"});
  EXPECT_TRUE(close(m.layers->operator[](1)->self_attn->w_k->weight, sd.at("encoder.layer.1.attention.self.key.weight")));
  EXPECT_TRUE(close(m.layers->operator[](0)->ffn->linear2->bias, sd.at("encoder.layer.0.output.dense.bias")));
  EXPECT_TRUE(close(m.layers->operator[](0)->norm1->weight, sd.at("encoder.layer.0.attention.output.LayerNorm.weight")));
  EXPECT_TRUE(close(m.embed_norm->bias, sd.at("embeddings.LayerNorm.bias")));
  EXPECT_TRUE(close(m.pooler->weight, sd.at("pooler.dense.weight")));
  // Inside a BertFor... checkpoint: "bert." is stripped, the task head is unexpected.
  tg::StateDict wrapped;
  for (const auto& [n, t] : sd) wrapped.insert("bert." + n, t);
  wrapped.insert("classifier.weight", tg::zeros({3, c.hidden}));
  auto strict = tg::load_state_dict(m, wrapped, {.names = tg::BertModel::hugging_face_names(), .source = "ckpt"});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().message(), "ckpt: does not match BertModel: 1 unexpected (classifier.weight)");
  auto loose = tg::load_state_dict(m, wrapped, {.strict = false, .names = tg::BertModel::hugging_face_names()});
  ASSERT_TRUE(loose.ok()) << loose.status().message();
  EXPECT_EQ(loose->unexpected, std::vector<std::string>{"classifier.weight"});
}

TEST(LoadStateDict, ReportsEveryProblemAtOnceAndChangesNothing) {
  tg::manual_seed(2);
  const tg::BertConfig c = tiny_config();
  tg::BertModel m(c);
  const Tensor before = m.tok_embed->weight.clone();
  tg::StateDict sd = without(without(hf_state_dict(c), "pooler.dense.bias"), "encoder.layer.1.output.dense.weight");
  tg::StateDict bad;
  for (const auto& [n, t] : sd) bad.insert(n, n == "embeddings.word_embeddings.weight" ? tg::zeros({c.vocab + 1, c.hidden}) : t);
  bad.insert("extra.weight", tg::zeros({2}));
  auto r = tg::load_state_dict(m, bad, {.names = tg::BertModel::hugging_face_names(), .source = "model.safetensors"});
  ASSERT_FALSE(r.ok());
  const std::string msg = r.status().message();
  for (const char* part : {"model.safetensors: does not match BertModel", "2 missing (layers.1.ffn.linear2.weight, pooler.bias)",
                           "1 unexpected (extra.weight)", "shape mismatch for tok_embed.weight: checkpoint [41, 8], model [40, 8]"})
    EXPECT_NE(msg.find(part), std::string::npos) << msg << "\n lacks: " << part;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_TRUE(close(m.tok_embed->weight, before));  // untouched
  // Non-strict: missing and unexpected are reported, shape mismatches still refused.
  auto loose = tg::load_state_dict(m, bad, {.strict = false, .names = tg::BertModel::hugging_face_names()});
  ASSERT_FALSE(loose.ok());
  EXPECT_EQ(loose.status().message().find("missing"), std::string::npos);
  auto ok = tg::load_state_dict(m, sd, {.strict = false, .names = tg::BertModel::hugging_face_names()});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->missing, (std::vector<std::string>{"layers.1.ffn.linear2.weight", "pooler.bias"}));
}

TEST(LoadStateDict, PrefixesTransposesCollisionsAndBadRules) {
  tg::Linear lin(3, 2);  // weight [2, 3]
  tg::StateDict sd;
  sd.insert("module.w", tg::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));  // stored [in, out], as GPT-2's Conv1D
  sd.insert("module.b", tg::from_vector<float>({7, 8}, {2}));
  tg::NameMapping names{.strip_prefixes = {"module."}, .renames = {{"^w$", "weight"}, {"^b$", "bias"}}, .transpose = {"^weight$"}};
  ASSERT_TRUE(tg::load_state_dict(lin, sd, {.names = names}).ok());
  EXPECT_TRUE(close(lin.weight, {1, 3, 5, 2, 4, 6}));
  EXPECT_TRUE(close(lin.bias, {7, 8}));
  // Two checkpoint names onto one module name.
  tg::StateDict twice;
  twice.insert("a.weight", tg::zeros({2, 3}));
  twice.insert("b.weight", tg::zeros({2, 3}));
  auto r = tg::load_state_dict(lin, twice, {.strict = false, .names = {.renames = {{"^[ab]\\.", ""}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'a.weight' and 'b.weight' both map to 'weight'"), std::string::npos);
  // A transposed name that is not 2-D; a malformed pattern; an integer tensor for a parameter.
  tg::StateDict one;
  one.insert("bias", tg::zeros({2}));
  one.insert("weight", tg::zeros({2, 3}));
  EXPECT_NE(tg::load_state_dict(lin, one, {.names = {.transpose = {"bias"}}}).status().message().find("'bias' is to be transposed"),
            std::string::npos);
  EXPECT_NE(tg::load_state_dict(lin, one, {.names = {.ignore = {"(["}}}).status().message().find("not a valid regular expression"),
            std::string::npos);
  tg::StateDict ints;
  ints.insert("bias", tg::zeros({2}, tg::kInt64));
  ints.insert("weight", tg::zeros({2, 3}));
  EXPECT_NE(tg::load_state_dict(lin, ints).status().message().find("'bias' is int64"), std::string::npos);
}

TEST(Bert, GradientsOfPoolingNormalisationAndTheModel) {
  const Tensor mask = tg::from_vector<int64_t>({1, 1, 1, 0, 1, 1, 0, 0}, {2, 4});
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return tg::pool(in[0], mask, tg::Pooling::kMean); }, {leaf({2, 4, 3})}));
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return tg::pool(in[0], mask, tg::Pooling::kCls); }, {leaf({2, 4, 3})}));
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return tg::l2_normalize(in[0]); }, {leaf({3, 5})}));
  EXPECT_TRUE(gradgradcheck_ok([&](const std::vector<Tensor>& in) { return tg::l2_normalize(in[0]); }, {leaf({2, 4})}));
  // Through the whole model in float64 (eval: no dropout), with respect to a weight of layer 0.
  tg::manual_seed(3);
  tg::BertModel m(tiny_config());
  m.to(tg::kFloat64);
  m.eval();
  const tg::BertInputs in{tg::from_vector<int64_t>({5, 6, 7, 0, 8, 9, 0, 0}, {2, 4}), mask,
                          tg::from_vector<int64_t>({0, 0, 1, 0, 0, 1, 0, 0}, {2, 4})};
  Tensor w = m.layers->operator[](0)->self_attn->w_q->weight;
  // The model's parameters are leaves: check d(loss)/d(w) against central differences directly.
  Tensor loss = tg::sum(tg::mul(tg::l2_normalize(tg::pool(m.forward(in), in.attention_mask, tg::Pooling::kMean)),
                                tg::arange(8).reshape({1, 8}).to(tg::kFloat64)));
  loss.backward();
  const std::vector<double> g = w.grad().to_vector<double>();
  for (int64_t k : {0, 9, 27, 63}) {
    const double h = 1e-6;
    std::vector<double> v = w.to_vector<double>();
    auto at = [&](double delta) {
      tg::NoGradGuard ng;
      std::vector<double> p = v;
      p[static_cast<size_t>(k)] += delta;
      w.copy_(tg::from_vector(p, w.shape(), tg::kFloat64));
      return tg::sum(tg::mul(tg::l2_normalize(tg::pool(m.forward(in), in.attention_mask, tg::Pooling::kMean)),
                             tg::arange(8).reshape({1, 8}).to(tg::kFloat64)))
          .item();
    };
    const double numeric = (at(h) - at(-h)) / (2 * h);
    at(0);
    EXPECT_NEAR(g[static_cast<size_t>(k)], numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << "element " << k;
  }
}

TEST(Bert, PaddingChangesNothingAndErrorsNameTheProblem) {
  tg::manual_seed(4);
  tg::BertModel m(tiny_config());
  m.eval();
  tg::NoGradGuard ng;
  const tg::BertInputs alone{tg::from_vector<int64_t>({5, 6, 7}, {1, 3}), tg::ones({1, 3}, tg::kInt64)};
  const tg::BertInputs padded{tg::from_vector<int64_t>({5, 6, 7, 0, 0, 9, 8, 7, 6, 5}, {2, 5}),
                              tg::from_vector<int64_t>({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, {2, 5})};
  const Tensor a = tg::pool(m.forward(alone), alone.attention_mask, tg::Pooling::kMean);
  const Tensor b = tg::pool(m.forward(padded), padded.attention_mask, tg::Pooling::kMean).narrow(0, 0, 1);
  EXPECT_TRUE(close(b, a, 1e-5, 1e-6));
  std::vector<Tensor> hidden;
  m.forward(alone, &hidden);
  EXPECT_EQ(hidden.size(), 3u);  // embeddings + 2 layers
  EXPECT_TRUE(close(m.forward(alone, nullptr, 1), hidden[1]));
  EXPECT_TRUE(throws_with([&] { m.forward({tg::zeros({1, 13}, tg::kInt64)}); }, {"BertModel", "13 tokens", "12"}));
  EXPECT_TRUE(throws_with([&] { m.forward({tg::zeros({1, 3}, tg::kInt64), tg::ones({1, 4}, tg::kInt64)}); },
                          {"BertModel", "[1, 3]", "[1, 4]"}));
  EXPECT_TRUE(throws_with([&] { m.forward(alone, nullptr, 3); }, {"3 layers", "of 2"}));
  EXPECT_TRUE(throws_with([&] { m.forward({tg::from_vector<int64_t>({40}, {1, 1})}); }, {"40"}));
}

// ---- a model folder made here ----

struct Folder {
  std::string dir;
  explicit Folder(const std::string& name) : dir((fs::temp_directory_path() / ("tg_bert_" + name)).string()) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Folder() { fs::remove_all(dir); }
  void write(const std::string& file, const std::string& text) const {
    fs::create_directories(fs::path(dir + "/" + file).parent_path());
    std::ofstream(dir + "/" + file) << text;
  }
};

const char* kTinyConfig = R"({"model_type": "bert", "vocab_size": 40, "hidden_size": 8, "num_hidden_layers": 2,
  "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 12, "type_vocab_size": 2,
  "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0})";

// A WordPiece tokenizer.json of 40 tokens, as Hugging Face writes them.
std::string tiny_tokenizer_json(const std::string& model_type = "WordPiece") {
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "un", "##want", "##ed",
                                          "runn", "##ing", ",", ".", "!", "?", "中", "文", "a", "##b", "##c", "b", "c", "x",
                                          "##x", "hello", "world", "naive", "'", "s", "i", "##s", "e", "##e", "d", "##d", "'s",
                                          "dog", "big", "##gest"};
  nlohmann::json v = nlohmann::json::object();
  for (size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
  nlohmann::json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 0}, {"content", "[PAD]"}, {"special", true}}, {{"id", 1}, {"content", "[UNK]"}, {"special", true}},
        {{"id", 2}, {"content", "[CLS]"}, {"special", true}}, {{"id", 3}, {"content", "[SEP]"}, {"special", true}},
        {{"id", 4}, {"content", "[MASK]"}, {"special", true}}}},
      {"normalizer",
       {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true}, {"strip_accents", nullptr}, {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                    {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
        {"pair", {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                  {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}},
                  {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 1}}}}}},
        {"special_tokens", {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
                            {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model", {{"type", model_type}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                 {"max_input_chars_per_word", 8}, {"vocab", v}}}};
  return j.dump(2);
}

std::unique_ptr<tg::text::Tokenizer> tiny_tokenizer() {
  return tg::text::Tokenizer::parse(tiny_tokenizer_json(), "tokenizer.json").value();
}

std::vector<std::string> tokens(const tg::text::Tokenizer& t, const std::string& s) { return t.tokenize(s); }

TEST(WordPiece, NormalizesSplitsAndPiecesAsBert) {
  auto t = tiny_tokenizer();
  EXPECT_EQ(t->kind(), "wordpiece");
  EXPECT_EQ(t->size(), 40);
  // Lowercasing, accent stripping, punctuation split, ## continuations, the longest piece first.
  EXPECT_EQ(tokens(*t, "UNWANTED, Café runnING!"),
            (std::vector<std::string>{"un", "##want", "##ed", ",", "cafe", "runn", "##ing", "!"}));
  EXPECT_EQ(tokens(*t, "NAÏVE dog's biggest"), (std::vector<std::string>{"naive", "dog", "'", "s", "big", "##gest"}));
  // CJK characters are words of their own; a word a piece cannot finish is one [UNK].
  EXPECT_EQ(tokens(*t, "中文abc abz"), (std::vector<std::string>{"中", "文", "a", "##b", "##c", "[UNK]"}));
  // Longer than max_input_chars_per_word (8 here): [UNK], even when pieces would cover it.
  EXPECT_EQ(tokens(*t, "abcxxxxx abcxxxxxx"), (std::vector<std::string>{"a", "##b", "##c", "##x", "##x", "##x", "##x", "##x", "[UNK]"}));
  // Control characters vanish, other spaces split; added tokens match in the raw text, case-sensitively.
  EXPECT_EQ(tokens(*t, "the\x01\xE2\x80\x83" "dog [MASK]the [mask]"),
            (std::vector<std::string>{"the", "dog", "[MASK]", "the", "[UNK]", "[UNK]", "[UNK]"}));
  EXPECT_EQ(t->encode(""), std::vector<int64_t>{});
  // Many literal added tokens: each is found once, in text order (the scan stays linear).
  std::string many;
  for (int i = 0; i < 20000; ++i) many += "[SEP]";
  EXPECT_EQ(t->encode(many), std::vector<int64_t>(20000, 3));
  EXPECT_EQ(t->encode("  \t\n "), std::vector<int64_t>{});
  // Invalid UTF-8 reads as U+FFFD, which the normalizer removes.
  EXPECT_EQ(tokens(*t, "the\xFF\xC3 dog"), (std::vector<std::string>{"the", "dog"}));
  // Pairs: [CLS] a [SEP] b [SEP] with type ids; decode skips specials and glues pieces.
  tg::text::Encoding e = t->encode_pair("the dog", "hello world");
  EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 5, 37, 3, 25, 26, 3}));
  EXPECT_EQ(e.type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(t->decode(t->encode_pair("unwanted runnING, the dog!").ids), "unwanted running, the dog!");
  EXPECT_EQ(t->pad_id(), 0);
  EXPECT_EQ(t->unk_id(), 1);
  EXPECT_EQ(t->cls_id(), 2);
  EXPECT_EQ(t->sep_id(), 3);
}

TEST(WordPiece, RefusesWhatItCannotRead) {
  auto err = [](const std::string& bytes) {
    auto r = tg::text::Tokenizer::parse(bytes, "x/tokenizer.json");
    return r.ok() ? std::string("loaded") : r.status().message();
  };
  // A BPE model is read as byte-level BPE, which refuses WordPiece's "##" prefix by name.
  EXPECT_EQ(err(tiny_tokenizer_json("BPE")),
            "x/tokenizer.json: model.continuing_subword_prefix = \"##\" is not supported (byte-level BPE has none)");
  EXPECT_EQ(err(tiny_tokenizer_json("Unigram")),
            "x/tokenizer.json: model type 'Unigram' is not supported (expected a WordPiece model, as BERT's)");
  EXPECT_NE(err("{\"model\": {\"type\": \"WordPiece\"").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err("{\"version\": \"1.0\"}").find("no \"model\" object"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(tiny_tokenizer_json());
  j["model"]["vocab"]["the"] = 99;
  EXPECT_NE(err(j.dump()).find("model.vocab[\"the\"] = 99 is not an id in 0..39"), std::string::npos);
  j = nlohmann::json::parse(tiny_tokenizer_json());
  j["model"]["vocab"]["the"] = 6;
  EXPECT_NE(err(j.dump()).find("gives id 6 to two tokens"), std::string::npos);
  j = nlohmann::json::parse(tiny_tokenizer_json());
  j["normalizer"]["type"] = "NFKC";
  EXPECT_NE(err(j.dump()).find("normalizer 'NFKC' is not supported"), std::string::npos);
  j = nlohmann::json::parse(tiny_tokenizer_json());
  j["model"]["unk_token"] = "<unk>";
  EXPECT_NE(err(j.dump()).find("model.unk_token '<unk>' is not in the vocabulary"), std::string::npos);
  j = nlohmann::json::parse(tiny_tokenizer_json());
  j["added_tokens"][4]["lstrip"] = true;
  EXPECT_NE(err(j.dump()).find("added token \"[MASK]\" has lstrip set, which is not supported"), std::string::npos);
  EXPECT_NE(err("{\"model\": " + std::string(100000, '[') + std::string(100000, ']') + "}").find("nested too deeply"),
            std::string::npos);
  j = nlohmann::json::parse(tiny_tokenizer_json());
  j["post_processor"]["single"].erase(0);
  EXPECT_NE(err(j.dump()).find("post_processor template is not BERT's"), std::string::npos);
  // Ill-typed or contradictory post_processor, padding and added-token fields: refused by name.
  auto with = [](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json e = nlohmann::json::parse(tiny_tokenizer_json());
    edit(e);
    return e.dump();
  };
  EXPECT_NE(err(with([](auto& e) { e["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {5}; }))
                .find("post_processor gives \"[CLS]\" the id 5, but the vocabulary has it at 2"),
            std::string::npos);
  EXPECT_NE(err(with([](auto& e) { e["post_processor"]["special_tokens"]["[SEP]"]["ids"] = "3"; }))
                .find("post_processor.special_tokens[\"[SEP]\"]"),
            std::string::npos);
  EXPECT_NE(err(with([](auto& e) { e["post_processor"]["special_tokens"] = {1, 2}; })).find("special_tokens is not an object"),
            std::string::npos);
  EXPECT_NE(err(with([](auto& e) { e["post_processor"]["pair"][3]["Sequence"]["type_id"] = "1"; }))
                .find("post_processor template is not BERT's"),
            std::string::npos);
  const auto bert_processing = [](nlohmann::json cls) {
    return [cls](nlohmann::json& e) { e["post_processor"] = {{"type", "BertProcessing"}, {"cls", cls}, {"sep", {"[SEP]", 3}}}; };
  };
  EXPECT_EQ(err(with(bert_processing({"[CLS]", 2}))), "loaded");
  EXPECT_NE(err(with(bert_processing({"[CLS]", "2"}))).find("post_processor.cls = [\"[CLS]\",\"2\"] (expected"), std::string::npos);
  EXPECT_NE(err(with(bert_processing({"[CLS]", 7}))).find("gives \"[CLS]\" the id 7, but the vocabulary has it at 2"),
            std::string::npos);
  EXPECT_NE(err(with([](auto& e) { e["padding"] = {{"pad_id", -1}}; })).find("padding.pad_id = -1 (expected an id"), std::string::npos);
  EXPECT_NE(err(with([](auto& e) { e["padding"] = "yes"; })).find("padding = \"yes\" is not an object"), std::string::npos);
  EXPECT_NE(err(with([](auto& e) { e["added_tokens"][1]["special"] = "true"; }))
                .find("added token \"[UNK]\": special = \"true\" is not true or false"),
            std::string::npos);
}

TEST(Bert, ModelFolderLoadsAndBadFoldersAreOneLine) {
  tg::manual_seed(5);
  Folder f("folder");
  f.write("config.json", kTinyConfig);
  f.write("tokenizer.json", tiny_tokenizer_json());
  f.write("1_Pooling/config.json", R"({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true})");
  const char* kModules = R"([{"type": "sentence_transformers.models.Transformer", "path": ""},
    {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}, {"type": "sentence_transformers.models.Normalize"}])";
  f.write("modules.json", kModules);
  f.write("sentence_bert_config.json", R"({"max_seq_length": 10, "do_lower_case": true})");
  const tg::StateDict sd = hf_state_dict(tiny_config());
  tg::save_safetensors(f.dir + "/model.safetensors", sd).or_throw();
  auto enc = tg::text::SentenceEncoder::load(f.dir).value();
  EXPECT_TRUE(enc->normalize);
  EXPECT_EQ(enc->max_length, 10);
  EXPECT_EQ(enc->pooling, tg::Pooling::kMean);
  EXPECT_TRUE(close(enc->model().tok_embed->weight, sd.at("embeddings.word_embeddings.weight")));
  // encode() keeps the input order whatever the length sort, and matches one-at-a-time forward.
  const std::vector<std::string> s = {"the dog", "hello world , the big dog is unwanted running", "cafe"};
  const Tensor all = enc->encode(s, 2);
  for (size_t i = 0; i < s.size(); ++i) {
    tg::NoGradGuard ng;
    EXPECT_TRUE(close(all.narrow(0, static_cast<int64_t>(i), 1), enc->forward({s[i]}), 1e-5, 1e-6)) << i;
  }
  EXPECT_NEAR(tg::sum(tg::mul(all, all), {-1}).to_vector<double>()[1], 1.0, 1e-5);
  // Each broken file: one line naming it.
  auto load_err = [&] {
    auto r = tg::text::SentenceEncoder::load(f.dir);
    return r.ok() ? std::string("loaded") : r.status().message();
  };
  f.write("config.json", std::string(kTinyConfig).replace(std::string(kTinyConfig).find("\"vocab_size\": 40"), 16, "\"vocab_size\": 41"));
  EXPECT_EQ(load_err(), f.dir + "/model.safetensors: 'embeddings.word_embeddings.weight' is [40, 8] but " + f.dir +
                            "/config.json says [41, 8] (vocab_size, hidden_size)");
  f.write("config.json", std::string(kTinyConfig).replace(std::string(kTinyConfig).find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 3"));
  EXPECT_EQ(load_err(), f.dir + "/model.safetensors: holds 2 encoder layers but " + f.dir + "/config.json says num_hidden_layers 3");
  f.write("config.json", std::string(kTinyConfig).replace(std::string(kTinyConfig).find("\"gelu\""), 6, "\"swish\""));
  EXPECT_NE(load_err().find("config.json: hidden_act 'swish' is not supported"), std::string::npos);
  f.write("config.json", "{\"model_type\": \"gpt2\"}");
  EXPECT_NE(load_err().find("config.json: model_type \"gpt2\" is not supported"), std::string::npos);
  f.write("config.json", kTinyConfig);
  f.write("tokenizer.json", tiny_tokenizer_json("Unigram"));
  EXPECT_NE(load_err().find("tokenizer.json: model type 'Unigram' is not supported"), std::string::npos);
  f.write("tokenizer.json", tiny_tokenizer_json());
  f.write("1_Pooling/config.json", R"({"pooling_mode_max_tokens": true})");
  EXPECT_NE(load_err().find("1_Pooling/config.json: pooling_mode_max_tokens is not supported"), std::string::npos);
  // Every field of the sentence-transformers files: typed, in range, or refused by name.
  f.write("1_Pooling/config.json", R"({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true, "word_embedding_dimension": 8})");
  EXPECT_EQ(load_err(), "loaded");
  const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> bad_fields = {
      {"1_Pooling/config.json", {R"({"pooling_mode_mean_tokens": "true"})", "pooling_mode_mean_tokens = \"true\" is not true or false"}},
      {"1_Pooling/config.json", {R"({"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true})", "expected exactly one"}},
      {"1_Pooling/config.json", {R"({"pooling_mode_mean_tokens": true, "pooling_mode_fancy": true})", "pooling_mode_fancy is not supported"}},
      {"1_Pooling/config.json", {R"({"pooling_mode_mean_tokens": true, "word_embedding_dimension": 9})",
                                 "word_embedding_dimension = 9, but"}},
      {"1_Pooling/config.json", {R"([])", "not a JSON object"}},
      {"modules.json", {"[]", "modules [] (none) (expected Transformer, Pooling"}},
      {"modules.json", {"null", "modules.json: not a JSON list"}},
      {"modules.json", {"[{}]", "module {} has no \"type\" string"}},
      {"modules.json", {R"([{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Normalize"}])",
                        "modules Transformer, Normalize (expected"}},
      {"modules.json", {R"([{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Pooling", "path": "2_Pooling"}])",
                        "the Pooling module's path is \"2_Pooling\"; only 1_Pooling is read"}},
      {"modules.json", {R"([{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Dense"}])",
                        "is not supported (Transformer, Pooling and Normalize are)"}},
      {"sentence_bert_config.json", {R"({"max_seq_length": "10"})", "max_seq_length = \"10\" (expected 2..12"}},
      {"sentence_bert_config.json", {R"({"do_lower_case": "no"})", "do_lower_case = \"no\" is not true or false"}},
      {"sentence_bert_config.json", {R"(null)", "not a JSON object"}},
  };
  for (const auto& [file, c] : bad_fields) {
    const std::string kept = tg::read_file(f.dir + "/" + file).ok() ? tg::read_file(f.dir + "/" + file).value() : "";
    f.write(file, c.first);
    const std::string e = load_err();
    EXPECT_NE(e.find(f.dir + "/" + file), std::string::npos) << file << " " << c.first << ": " << e;
    EXPECT_NE(e.find(c.second), std::string::npos) << file << " " << c.first << ": " << e;
    if (kept.empty()) fs::remove(f.dir + "/" + file); else f.write(file, kept);
  }
  EXPECT_EQ(load_err(), "loaded");
  f.write("config.json", std::string(kTinyConfig).replace(std::string(kTinyConfig).size() - 1, 1, R"(, "is_decoder": true})"));
  EXPECT_NE(load_err().find("config.json: is_decoder = true is not supported"), std::string::npos) << load_err();
  f.write("config.json", kTinyConfig);
  // A NaN weight in a Hugging Face file (no checksums there): refused by name.
  tg::StateDict with_nan;
  for (const auto& [n, t] : sd) with_nan.insert(n, n == "encoder.layer.1.attention.self.key.weight" ? tg::full(t.shape(), NAN) : t);
  tg::save_safetensors(f.dir + "/model.safetensors", with_nan).or_throw();
  EXPECT_NE(load_err().find("'encoder.layer.1.attention.self.key.weight' holds NaN at flat index 0"), std::string::npos) << load_err();
  fs::remove(f.dir + "/1_Pooling/config.json");
  tg::save_safetensors(f.dir + "/model.safetensors", without(sd, "encoder.layer.0.output.LayerNorm.bias")).or_throw();
  EXPECT_EQ(load_err(), f.dir + "/model.safetensors: does not match BertModel: 1 missing (layers.0.norm2.bias)");
  fs::remove(f.dir + "/model.safetensors");
  EXPECT_NE(load_err().find("model.safetensors"), std::string::npos);
  EXPECT_NE(tg::text::SentenceEncoder::load(f.dir + "/nowhere").status().message().find("not a model folder"), std::string::npos);
}

// ---- the real all-MiniLM-L6-v2 against Hugging Face ----

std::string minilm_dir() {
  const char* env = std::getenv("TG_MODELS_DIR");
  return (env && *env ? std::string(env) : std::string(TG_TEST_DATA_DIR) + "/../data/models") + "/all-MiniLM-L6-v2";
}

// Skips (or, with TG_REQUIRE_MODELS=1, fails) when the model has not been fetched.
bool have_minilm() {
  if (fs::exists(minilm_dir() + "/model.safetensors")) return true;
  const char* req = std::getenv("TG_REQUIRE_MODELS");
  if (req && std::string(req) == "1") ADD_FAILURE() << minilm_dir() << " is missing: run ./tg.sh models (TG_REQUIRE_MODELS=1)";
  return false;
}

TEST(MiniLM, TokenIdsEqualHuggingFaces) {
  if (!have_minilm()) GTEST_SKIP() << "no " << minilm_dir() << " (./tg.sh models fetches it)";
  auto tok = tg::text::Tokenizer::load(minilm_dir() + "/tokenizer.json").value();
  std::ifstream in(std::string(TG_TEST_DATA_DIR) + "/golden/minilm/tokenizer_cases.json");
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 40u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    tg::text::EncodeOptions o{.max_length = c["max_length"].get<int64_t>()};
    tg::text::Encoding e = c["pair"].is_null() ? tok->encode_pair(text, std::nullopt, o)
                                               : tok->encode_pair(text, c["pair"].get<std::string>(), o);
    EXPECT_EQ(e.ids, c["ids"].get<std::vector<int64_t>>()) << "text: " << text;
    EXPECT_EQ(e.type_ids, c["type_ids"].get<std::vector<int64_t>>()) << "text: " << text;
  }
}

TEST(MiniLM, EmbeddingsEqualHuggingFaces) {
  if (!have_minilm()) GTEST_SKIP() << "no " << minilm_dir() << " (./tg.sh models fetches it)";
  auto enc = tg::text::SentenceEncoder::load(minilm_dir()).value();
  EXPECT_EQ(enc->max_length, 256);
  EXPECT_TRUE(enc->normalize);
  const std::vector<std::string> sentences =
      tg::text::read_lines(std::string(TG_TEST_DATA_DIR) + "/golden/minilm/sentences.txt", {.trim = false, .skip_empty = false}).value();
  const tg::SafetensorsFile golden = tg::load_safetensors(std::string(TG_TEST_DATA_DIR) + "/golden/minilm/embeddings.safetensors").value();
  const std::vector<int64_t> lengths = golden.tensors.at("lengths").to_vector<int64_t>();
  ASSERT_EQ(lengths.size(), sentences.size());
  for (size_t i = 0; i < sentences.size(); ++i)
    EXPECT_EQ(enc->inputs({sentences[i]}).ids.size(1), lengths[i]) << sentences[i];
  // One forward per batch of 8 (as the golden file's), every pooling from its hidden states.
  std::map<std::string, std::vector<float>> got;
  tg::NoGradGuard ng;
  for (size_t start = 0; start < sentences.size(); start += 8) {
    const std::vector<std::string> batch(sentences.begin() + static_cast<std::ptrdiff_t>(start),
                                         sentences.begin() + static_cast<std::ptrdiff_t>(std::min(start + 8, sentences.size())));
    const tg::BertInputs in = enc->inputs(batch);
    std::vector<Tensor> hidden;
    enc->model().forward(in, &hidden);
    ASSERT_EQ(hidden.size(), 7u);
    const Tensor mean = tg::pool(hidden[6], in.attention_mask, tg::Pooling::kMean);
    for (const auto& [name, t] : {std::pair<std::string, Tensor>{"mean", mean}, {"mean_normalized", tg::l2_normalize(mean)},
                                  {"cls", tg::pool(hidden[6], in.attention_mask, tg::Pooling::kCls)},
                                  {"layer3_mean", tg::pool(hidden[3], in.attention_mask, tg::Pooling::kMean)}}) {
      const std::vector<float> v = t.to_vector<float>();
      got[name].insert(got[name].end(), v.begin(), v.end());
    }
  }
  // SentenceEncoder::encode (sorted batches) gives the same as the model's default output.
  got["mean_normalized_encode"] = enc->encode(sentences, 5).to_vector<float>();
  for (const auto& [name, values] : got) {
    const std::string golden_name = name.ends_with("_encode") ? name.substr(0, name.size() - 7) : name;
    const std::vector<float> want = golden.tensors.at(golden_name).to_vector<float>();
    ASSERT_EQ(values.size(), want.size()) << name;
    const size_t d = want.size() / sentences.size();
    double worst_cos = 1, worst_abs = 0;
    for (size_t i = 0; i < sentences.size(); ++i) {
      double dot = 0, gg = 0, ww = 0;
      for (size_t k = i * d; k < (i + 1) * d; ++k) {
        dot += double(values[k]) * want[k];
        gg += double(values[k]) * values[k];
        ww += double(want[k]) * want[k];
        worst_abs = std::max(worst_abs, std::abs(double(values[k]) - want[k]));
      }
      worst_cos = std::min(worst_cos, dot / std::sqrt(gg * ww));
    }
    EXPECT_GE(worst_cos, 0.99999) << name;
    EXPECT_LE(worst_abs, 1e-4) << name;
  }
}

}  // namespace
}  // namespace tgt
