// The translator's tokenizers: characters, words and SentencePiece subwords (BPE, unigram) behind
// one interface; files saved and loaded, corrupt files refused with a message.
#include <fstream>

#include "examples/tokenizer.h"
#include "test_util.h"

namespace tgt {
namespace {

namespace ex = tg::examples;

std::vector<std::string> corpus() {
  // Enough varied text for SentencePiece to fill a small vocabulary.
  const char* subj[] = {"The small dog", "A young woman", "Two old men", "The children", "A brown horse", "Grüne Äpfel"};
  const char* verb[] = {"runs across", "is sitting on", "walks along", "looks at", "jumps over", "plays near"};
  const char* obj[] = {"the green field.", "a wooden bench.", "the busy street.", "the tall building.", "a red ball!",
                       "the quiet river?"};
  std::vector<std::string> out;
  for (const char* s : subj)
    for (const char* v : verb)
      for (const char* o : obj) out.push_back(std::string(s) + " " + v + " " + o);
  return out;
}

TEST(Tokenizer, Utf8Characters) {
  EXPECT_EQ(ex::utf8_chars("aÜß€"), (std::vector<std::string>{"a", "Ü", "ß", "€"}));
  EXPECT_EQ(ex::utf8_chars("AbC", true), (std::vector<std::string>{"a", "b", "c"}));
  // A truncated or stray byte stands alone; nothing is read past the end.
  EXPECT_EQ(ex::utf8_chars(std::string("x\xC3")), (std::vector<std::string>{"x", "\xC3"}));
  EXPECT_EQ(ex::utf8_chars(std::string("\xE2\x82z")), (std::vector<std::string>{"\xE2", "\x82", "z"}));
}

TEST(Tokenizer, CharactersRoundTrip) {
  auto t = ex::Tokenizer::train(ex::TokenizerKind::kChar, corpus(), {.vocab_size = 1000, .min_count = 1});
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::string s = "Grüne Äpfel jumps over the river!";
  auto ids = t->encode(s);
  EXPECT_EQ(ids.size(), ex::utf8_chars(s).size());
  EXPECT_EQ(t->decode(ids), s);
  EXPECT_EQ(t->encode("Z")[0], ex::Tokenizer::kUnk);  // never seen
  const std::string path = ::testing::TempDir() + "/chars_vocab.txt";
  ASSERT_TRUE(t->save(path).ok());
  auto back = ex::Tokenizer::load(ex::TokenizerKind::kChar, path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->encode(s), ids);
  // A character vocabulary is not a word vocabulary.
  auto wrong = ex::Tokenizer::load(ex::TokenizerKind::kWord, path);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.status().message()).find("character vocabulary"), std::string::npos);
}

TEST(Tokenizer, SubwordsRoundTripAndReload) {
  for (auto kind : {ex::TokenizerKind::kBpe, ex::TokenizerKind::kUnigram}) {
    SCOPED_TRACE(ex::tokenizer_name(kind));
    auto t = ex::Tokenizer::train(kind, corpus(), {.vocab_size = 64});
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->size(), 64);
    EXPECT_EQ(t->token(ex::Tokenizer::kPad), "<pad>");
    EXPECT_EQ(t->token(ex::Tokenizer::kEos), "<eos>");
    const std::string s = "The young horse walks across a wooden street.";
    auto ids = t->encode(s);
    ASSERT_FALSE(ids.empty());
    EXPECT_LT(ids.size(), s.size());  // pieces, not characters
    for (int64_t id : ids) EXPECT_GT(id, ex::Tokenizer::kEos);
    EXPECT_EQ(t->decode(ids), s);
    auto with_eos = ids;
    with_eos.insert(with_eos.begin() + 2, ex::Tokenizer::kEos);
    EXPECT_EQ(t->decode(with_eos), t->decode({ids[0], ids[1]}));
    const std::string path = ::testing::TempDir() + "/" + ex::Tokenizer::file_name(kind, "src");
    ASSERT_TRUE(t->save(path).ok());
    auto back = ex::Tokenizer::load(kind, path);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->encode(s), ids);
  }
}

TEST(Tokenizer, BadInputIsRefused) {
  auto too_big = ex::Tokenizer::train(ex::TokenizerKind::kBpe, {"a b c", "a b"}, {.vocab_size = 5000});
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(std::string(too_big.status().message()).find("SentencePiece"), std::string::npos) << too_big.status().message();
  EXPECT_FALSE(ex::parse_tokenizer_kind("wordpiece").ok());
  const std::string path = ::testing::TempDir() + "/corrupt.spm";
  std::ofstream(path) << "this is not a model";
  auto bad = ex::Tokenizer::load(ex::TokenizerKind::kBpe, path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("not a SentencePiece model"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ex::Tokenizer::load(ex::TokenizerKind::kUnigram, ::testing::TempDir() + "/missing.spm").ok());
}

}  // namespace
}  // namespace tgt
