// Byte-level BPE from Hugging Face tokenizer.json files (GPT-2, Llama 3, Qwen2 with NFC, and
// SmolLM forms), against the ids and pre-tokenizer pieces of the `tokenizers` package on 2,000
// strings of many scripts, emoji, combining marks, Hangul, digits and whitespace runs (tests/golden/tokenizers, made by
// tools/make_byte_bpe_golden.py); decoding round-trips; bad files and bad text are one line.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "text/tokenizer.h"
#include "text/tokenizer_internal.h"

namespace {
using namespace tgt;
using tg::text::Tokenizer;
using nlohmann::json;

std::string dir() { return std::string(TG_TEST_DATA_DIR) + "/golden/tokenizers"; }

const json& golden() {
  static const json j = [] {
    std::ifstream in(dir() + "/golden.json");
    return json::parse(in);
  }();
  return j;
}

class ByteBpeGolden : public ::testing::TestWithParam<std::string> {};

void expect_ids(const Tokenizer& tok, const json& g, bool check_pieces) {
  const json& strings = golden()["strings"];
  size_t wrong = 0, wrong_pieces = 0, wrong_decode = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string s = strings[i].get<std::string>();
    const auto want = g["ids"][i].get<std::vector<int64_t>>();
    const auto got = tok.encode(s);
    if (got != want && wrong++ < 3) ADD_FAILURE() << "ids of " << json(s).dump() << ": " << json(got).dump() << " != " << json(want).dump();
    const auto want_special = g.contains("ids_special") ? g["ids_special"][i].get<std::vector<int64_t>>() : want;
    EXPECT_EQ(tok.encode_pair(s).ids, want_special) << json(s).dump();
    if (check_pieces && g.contains("pieces")) {
      const auto pieces = tg::text::internal::byte_bpe_pre_tokenize(tok, s);
      if (pieces != g["pieces"][i].get<std::vector<std::string>>() && wrong_pieces++ < 3)
        ADD_FAILURE() << "pieces of " << json(s).dump() << ": " << json(pieces).dump() << " != " << g["pieces"][i].dump();
    }
    // Decoding gives tokenizers' decode (special tokens skipped): the string itself for byte-level
    // BPE without specials (it round-trips bytes), else what the golden file says.
    bool has_special = false;
    for (int64_t id : want) has_special = has_special || tok.token(id).rfind("<|", 0) == 0;
    if (g.contains("decoded")) {
      if (tok.decode(want) != g["decoded"][i].get<std::string>() && wrong_decode++ < 3)
        ADD_FAILURE() << "decode of " << json(s).dump() << ": " << json(tok.decode(want)).dump() << " != " << g["decoded"][i].dump();
    } else if (!has_special && tok.decode(want) != s && wrong_decode++ < 3) {
      ADD_FAILURE() << "decode of " << json(s).dump();
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(wrong_pieces, 0u);
  EXPECT_EQ(wrong_decode, 0u);
}

TEST_P(ByteBpeGolden, IdsAndPiecesEqualTokenizers) {
  auto tok = Tokenizer::load(dir() + "/" + GetParam() + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->kind(), "byte_bpe");
  expect_ids(**tok, golden()[GetParam()], true);
}

INSTANTIATE_TEST_SUITE_P(Forms, ByteBpeGolden, ::testing::Values("gpt2", "llama3", "qwen2", "smollm", "llama2", "llama2_metaspace"));

TEST(ByteBpe, MergesAsStringsTheOlderFormGiveTheSameIds) {
  auto tok = Tokenizer::load(dir() + "/gpt2/tokenizer_legacy.json");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  expect_ids(**tok, golden()["gpt2"], false);
}

TEST(ByteBpe, SpecialTokensTemplateAndDecoding) {
  auto tok = Tokenizer::load(dir() + "/llama3/tokenizer.json").value();
  const int64_t bos = tok->id_of("<|begin_of_text|>");
  EXPECT_GE(bos, 0);
  EXPECT_EQ(tok->bos_id(), bos);
  EXPECT_EQ(tok->encode_pair("Hi").ids.front(), bos);
  const auto ids = tok->encode("a<|end_of_text|>b <tg_extra> c");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->id_of("<|end_of_text|>")), 1);
  EXPECT_EQ(tok->decode(ids), "ab <tg_extra> c");  // specials skipped, other added tokens kept
  // A token that ends in the middle of a UTF-8 character decodes to U+FFFD until the rest comes.
  auto gpt2 = Tokenizer::load(dir() + "/gpt2/tokenizer.json").value();
  const auto euro = gpt2->encode("€");
  ASSERT_GE(euro.size(), 2u);
  EXPECT_EQ(gpt2->decode({euro[0]}), "\xEF\xBF\xBD");
  EXPECT_EQ(gpt2->decode(euro), "€");
}

// The fuzzers' seed (a cut-down Llama 3 form: 20 merges) loads and gives tokenizers' ids.
TEST(ByteBpe, FuzzSeedLoads) {
  auto tok = Tokenizer::load(std::string(TG_TEST_DATA_DIR) + "/fuzz/corpus/tokenizer/byte_bpe.json");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->encode_pair("Hello world <tg_extra>").ids, (std::vector<int64_t>{0, 41, 70, 275, 80, 265, 272, 77, 69, 222, 280}));
}

// A SentencePiece-style text is one word per segment: 300,000 characters without a break are
// merged by a queue, not by rescanning the word after every merge (which would take hours).
TEST(ByteBpe, LongWordsAreMergedInLogLinearTime) {
  auto tok = Tokenizer::load(dir() + "/llama2/tokenizer.json").value();
  std::string text;
  while (text.size() < 300000) text += "Tobeornottobethatisthequestion";
  const auto ids = tok->encode(text);
  EXPECT_LE(ids.size(), text.size() / 2);  // merged (into pairs, at least)
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(ByteBpe, InvalidUtf8IsRefusedNamingLineAndColumn) {
  auto tok = Tokenizer::load(dir() + "/gpt2/tokenizer.json").value();
  EXPECT_TRUE(throws_with([&] { tok->encode("ok\nab\xFF" "c"); }, {"UTF-8", "0xFF", "line 2", "column 3"}));
  EXPECT_TRUE(throws_with([&] { tok->encode("\xC3"); }, {"line 1", "column 1"}));
  EXPECT_TRUE(throws_with([&] { tok->encode("\xED\xA0\x80"); }, {"UTF-8"}));  // a surrogate
}

TEST(ByteBpe, WhatIsNotImplementedIsRefusedByName) {
  std::ifstream in(dir() + "/llama3/tokenizer.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto refused = [&](const std::function<void(json&)>& change, std::vector<std::string> words) {
    json j = json::parse(text);
    change(j);
    auto r = Tokenizer::parse(j.dump(), "tok.json");
    if (r.ok()) return ::testing::AssertionFailure() << "accepted";
    for (const std::string& w : words)
      if (r.status().message().find(w) == std::string::npos)
        return ::testing::AssertionFailure() << "'" << w << "' not in: " << r.status().message();
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(refused([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; },
                      {"tok.json", "split pattern", "\\\\w+"}));
  EXPECT_TRUE(refused([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, {"normalizer", "NFKC"}));
  EXPECT_TRUE(refused([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, {"normalizer", "Lowercase"}));
  EXPECT_TRUE(refused([](json& j) { j["model"]["byte_fallback"] = true; }, {"pre_tokenizer", "Metaspace"}));
  EXPECT_TRUE(refused([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }, {"Metaspace"}));
  EXPECT_TRUE(refused([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}}; },
                      {"decoder"}));
  EXPECT_TRUE(refused([](json& j) { j["model"]["merges"][3] = json::array({"zz", "qq"}); }, {"merge 3", "vocabulary"}));
  EXPECT_TRUE(refused([](json& j) { j["model"]["merges"][5] = "nospace"; }, {"merge 5"}));
  EXPECT_TRUE(refused(
      [](json& j) {
        j["model"]["vocab"]["\u2603x"] = j["model"]["vocab"]["!"];
        j["model"]["vocab"].erase("!");
      },
      {"byte 0x21", "not a byte-level BPE"}));
  EXPECT_TRUE(refused([](json& j) { j["model"]["vocab"]["!"] = 1 << 24; }, {"model.vocab['!']", "16777216"}));
  EXPECT_TRUE(refused([](json& j) { j["model"]["vocab"]["\u2603"] = 1 << 23; }, {"largest id is 8388608", "too sparse"}));
  EXPECT_TRUE(refused([](json& j) { j["added_tokens"][0]["lstrip"] = true; }, {"lstrip"}));
  EXPECT_TRUE(refused([](json& j) { j["model"]["dropout"] = 0.1; }, {"dropout"}));
  // Template forms we do not reproduce exactly: the sequence twice, or $B alone.
  auto template_single = [](json& j) -> json& {
    for (json& p : j["post_processor"]["processors"])
      if (p["type"] == "TemplateProcessing") return p["single"];
    throw std::runtime_error("no template");
  };
  EXPECT_TRUE(refused([&](json& j) { json& s = template_single(j); s[0] = s[1]; }, {"post_processor template"}));
  EXPECT_TRUE(refused([&](json& j) { template_single(j)[1]["Sequence"]["id"] = "B"; }, {"post_processor template"}));
  // An added token listed twice (it would be matched twice at every position of a text).
  EXPECT_TRUE(refused([](json& j) { j["added_tokens"].push_back(j["added_tokens"][0]); }, {"listed twice in added_tokens"}));
}

// NFC's canonical ordering sorts each run of combining marks by class, stably, in n log n: a run of
// 100,000 marks of alternating classes (230, 220) comes out as all 220s, then all 230s, and the
// first acute (not blocked: the marks before it have a lower class) composes with the a.
TEST(ByteBpe, LongRunsOfCombiningMarksAreOrderedStablyInLogLinearTime) {
  std::u32string marks = U"a";
  for (int i = 0; i < 50000; ++i) marks += U"\u0301\u0316";  // acute (230), grave below (220)
  const std::u32string out = tg::text::internal::nfc_for_tests(marks);
  ASSERT_EQ(out.size(), marks.size() - 1);
  EXPECT_EQ(out[0], U'\u00e1');  // a + acute
  for (size_t i = 1; i <= 50000; ++i) ASSERT_EQ(out[i], U'\u0316') << i;
  for (size_t i = 50001; i < out.size(); ++i) ASSERT_EQ(out[i], U'\u0301') << i;
  // Composition still happens where a mark of class 230 follows the base directly: e + acute.
  EXPECT_EQ(tg::text::internal::nfc_for_tests(U"e\u0301"), U"\u00e9");
}

}  // namespace

// ---- training (Tokenizer::train("byte_bpe", ...)) ----
namespace {

::testing::AssertionResult fails_with(const tg::Result<std::unique_ptr<Tokenizer>>& r, const std::vector<std::string>& words) {
  if (r.ok()) return ::testing::AssertionFailure() << "accepted";
  for (const std::string& w : words)
    if (r.status().message().find(w) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << w << "' not in: " << r.status().message();
  return ::testing::AssertionSuccess();
}

// English prose with code in it: the repository's README.
// English prose with code in it: the README and the docs/ pages, in name order.
std::string readme() {
  const std::filesystem::path root = std::filesystem::path(TG_TEST_DATA_DIR) / "..";
  std::vector<std::filesystem::path> pages = {root / "README.md"};
  for (const auto& e : std::filesystem::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") pages.push_back(e.path());
  std::sort(pages.begin() + 1, pages.end());
  std::string text;
  for (const auto& page : pages) {
    std::ifstream in(page);
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return text;
}

TEST(ByteBpeTraining, MergesTheMostFrequentPairFirstTiesToTheSmallerIds) {
  // Pieces "aaab", " aab", " ab": (a,a) and (a,b) both occur 3 times -> "aa" (smaller ids) first;
  // then "ab" (2); then, all pairs at 1, the smallest: (Ġ, aa) (space's byte character sorts first).
  auto tok = Tokenizer::train("byte_bpe", {"aaab aab ab"}, {.vocab_size = 1 + 256 + 3, .min_count = 1}).value();
  EXPECT_EQ(tok->kind(), "byte_bpe");
  EXPECT_EQ(tok->size(), 260);
  const json j = json::parse(tok->serialize());
  EXPECT_EQ(j["model"]["merges"], json::parse(R"([["a","a"],["a","b"],["Ġ","aa"]])"));
  EXPECT_EQ(tok->token(0), "<|endoftext|>");
  EXPECT_EQ(tok->encode("aaab aab"), (std::vector<int64_t>{257, 258, 259, 1 + 98}));  // aa ab Ġaa b (byte 98 at id 1 + 98)
  // min_count 2 stops before the pairs seen once.
  EXPECT_EQ(Tokenizer::train("byte_bpe", {"aaab aab ab"}, {.vocab_size = 1000, .min_count = 2}).value()->size(), 259);
}

TEST(ByteBpeTraining, LearnsWordsRoundTripsAndIsDeterministic) {
  const std::string text = readme();
  ASSERT_GT(text.size(), 20000u);
  auto tok = Tokenizer::train("byte_bpe", {text}, {.vocab_size = 1000}).value();
  EXPECT_EQ(tok->size(), 1000);
  EXPECT_EQ(tok->encode(" the").size(), 1u);  // a frequent word is one token
  EXPECT_EQ(tok->label(tok->encode(" the")[0]), " the");  // plots show the text, not "Ġthe"
  EXPECT_EQ(tok->label(tok->encode("\n")[0]), "\\n");
  EXPECT_EQ(tok->label(0), "<|endoftext|>");
  EXPECT_EQ(tok->label(tok->encode("\xC3\xA9")[0]), tok->token(tok->encode("\xC3\xA9")[0]));  // é alone: its bytes' token if split
  EXPECT_LT(tok->encode(text).size(), text.size() / 2);
  const std::string odd = "Naïve café — 東京 🙂\n\n  tabs\there\r\n";
  EXPECT_EQ(tok->decode(tok->encode(odd)), odd);  // bytes never seen in training still round-trip
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  // The same text gives the same file; the file parses back to the same ids.
  EXPECT_EQ(Tokenizer::train("byte_bpe", {text}, {.vocab_size = 1000}).value()->serialize(), tok->serialize());
  auto again = Tokenizer::parse(tok->serialize(), "trained.json").value();
  EXPECT_EQ(again->encode(text), tok->encode(text));
  // User symbols become added tokens, never split.
  auto with = Tokenizer::train("byte_bpe", {text}, {.vocab_size = 600, .user_symbols = {"<sep>"}}).value();
  EXPECT_EQ(with->id_of("<sep>"), 1);
  EXPECT_EQ(with->encode("a<sep>b"), (std::vector<int64_t>{with->encode("a")[0], 1, with->encode("b")[0]}));
}

TEST(ByteBpeTraining, BadRequestsAreOneLine) {
  EXPECT_TRUE(fails_with(Tokenizer::train("byte_bpe", {"abc"}, {.vocab_size = 100}), {"vocabulary of 100", "256 byte tokens"}));
  EXPECT_TRUE(fails_with(Tokenizer::train("byte_bpe", {"ok", "line\n\xFF"}, {.vocab_size = 300}), {"text 2", "UTF-8", "0xFF", "line 2"}));
  EXPECT_TRUE(fails_with(Tokenizer::train("byte_bpe", {""}, {.vocab_size = 300}), {"no text"}));
  EXPECT_TRUE(fails_with(Tokenizer::train("byte_bpe", {"abc"}, {.vocab_size = 300, .lowercase = true}), {"lowercase"}));
  EXPECT_TRUE(fails_with(Tokenizer::train("byte_bpe", {"abc"}, {.vocab_size = 300, .user_symbols = {"x", "x"}}), {"'x'", "twice"}));
}

}  // namespace
