// text/tokenizer.h and text/split.h: characters, words and SentencePiece subwords (BPE, unigram)
// behind one interface; files saved, recognised by content and reloaded; corrupt, truncated and
// oversized files refused with one line naming the file; encode_pair's specials, truncation,
// padding and type ids.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "text/split.h"
#include "text/tokenizer.h"

namespace tgt {
namespace {

namespace text = tg::text;
using text::Tokenizer;

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

std::unique_ptr<Tokenizer> train(std::string_view kind, const std::vector<std::string>& sentences,
                                 const text::TrainOptions& o) {
  auto t = Tokenizer::train(kind, sentences, o);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *std::move(t) : nullptr;
}

std::string temp(const std::string& name) { return ::testing::TempDir() + "/text_tokenizer_test_" + name; }

void write(const std::string& path, std::string_view bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A refusal is one line that names the file.
::testing::AssertionResult refused_naming(const tg::Status& s, const std::string& name) {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted";
  const std::string& m = s.message();
  if (m.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "more than one line: " << m;
  if (m.find(name) == std::string::npos) return ::testing::AssertionFailure() << "does not name " << name << ": " << m;
  return ::testing::AssertionSuccess() << m;
}

// ---- splitting ----

TEST(TextSplit, Utf8Characters) {
  EXPECT_EQ(text::utf8_chars("aÜß€"), (std::vector<std::string>{"a", "Ü", "ß", "€"}));
  EXPECT_EQ(text::utf8_chars("AbC", true), (std::vector<std::string>{"a", "b", "c"}));
  // A truncated or stray byte stands alone; nothing is read past the end.
  EXPECT_EQ(text::utf8_chars(std::string("x\xC3")), (std::vector<std::string>{"x", "\xC3"}));
  EXPECT_EQ(text::utf8_chars(std::string("\xE2\x82z")), (std::vector<std::string>{"\xE2", "\x82", "z"}));
  EXPECT_EQ(text::utf8_chars("a b\n"), (std::vector<std::string>{"a", " ", "b", "\n"}));
}

TEST(TextSplit, InvalidUtf8Offset) {
  EXPECT_EQ(text::invalid_utf8_offset("plain ÄÖÜ € 𝄞"), std::string_view::npos);
  EXPECT_EQ(text::invalid_utf8_offset("ab\xC3"), 2u);                // truncated
  EXPECT_EQ(text::invalid_utf8_offset("a\x80"), 1u);                 // stray continuation byte
  EXPECT_EQ(text::invalid_utf8_offset("\xC0\xAF"), 0u);              // overlong '/'
  EXPECT_EQ(text::invalid_utf8_offset("x\xED\xA0\x80"), 1u);         // a surrogate
  EXPECT_EQ(text::invalid_utf8_offset("\xF4\x90\x80\x80"), 0u);      // above U+10FFFF
  EXPECT_EQ(text::invalid_utf8_offset("ok\xFFok"), 2u);
}

TEST(TextSplit, WordTokensRoundTrip) {
  auto t = text::word_tokens("Don't worry, it's (mostly) well-known!");
  EXPECT_EQ(t, (std::vector<std::string>{"Don't", "worry", ",", "it's", "(", "mostly", ")", "well", "-", "known", "!"}));
  EXPECT_EQ(text::detokenize(t), "Don't worry, it's (mostly) well-known!");
  EXPECT_EQ(text::word_tokens("Über Straße.", true), (std::vector<std::string>{"Über", "straße", "."}));
  // Line breaks: whitespace by default, a token with keep_newlines.
  EXPECT_EQ(text::word_tokens("a b.\nc"), (std::vector<std::string>{"a", "b", ".", "c"}));
  auto lines = text::word_tokens("In the beginning.\nAnd the earth", false, true);
  EXPECT_EQ(lines, (std::vector<std::string>{"In", "the", "beginning", ".", "\n", "And", "the", "earth"}));
  EXPECT_EQ(text::detokenize(lines), "In the beginning.\nAnd the earth");
}

// ---- word and char ----

TEST(Tokenizer, WordVocabularyEncodesAndSerializes) {
  auto v = train("word", {"the cat sat.", "the dog sat.", "a cat!"}, {.vocab_size = 8, .min_count = 1});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind(), "word");
  EXPECT_EQ(v->size(), 8);
  EXPECT_EQ(v->token(4), "the");  // most frequent first (ties: first seen)
  auto ids = v->encode("the cat ran.");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[2], text::kUnk);
  EXPECT_EQ(v->tokenize("the cat ran."), (std::vector<std::string>{"the", "cat", "ran", "."}));
  EXPECT_EQ(v->decode({ids[0], ids[1], text::kEos, ids[0]}), "the cat");
  EXPECT_EQ(v->decode({text::kBos, ids[0], text::kPad, ids[2], 999, -1}), "the <unk>");
  EXPECT_EQ(v->id_of("cat"), ids[1]);
  EXPECT_EQ(v->id_of("zebra"), text::kUnk);
  EXPECT_THROW(v->token(8), tg::Error);
  auto back = Tokenizer::parse(v->serialize(), "mem");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->encode("the cat ran."), ids);
  EXPECT_FALSE(Tokenizer::parse("garbage\n", "mem").ok());
}

TEST(Tokenizer, WordLowercaseAndNewlines) {
  auto v = train("word", {"The Cat.\nThe dog."}, {.min_count = 1, .lowercase = true, .keep_newlines = true});
  ASSERT_TRUE(v);
  auto ids = v->encode("THE CAT.\nthe dog.");
  EXPECT_EQ(v->decode(ids), "the cat.\nthe dog.");
  auto back = Tokenizer::parse(v->serialize(), "mem");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->encode("THE CAT.\nthe dog."), ids);
  EXPECT_EQ(v->serialize().substr(0, v->serialize().find('\n')), "tapegrad tokenizer word lowercase=1 newlines=1");
}

TEST(Tokenizer, CharactersRoundTrip) {
  auto t = train("char", corpus(), {.vocab_size = 1000, .min_count = 1});
  ASSERT_TRUE(t);
  const std::string s = "Grüne Äpfel jumps over the river!";
  auto ids = t->encode(s);
  EXPECT_EQ(ids.size(), text::utf8_chars(s).size());
  EXPECT_EQ(t->decode(ids), s);
  EXPECT_EQ(t->encode("Z")[0], text::kUnk);  // never seen
  const std::string path = temp("chars.txt");
  ASSERT_TRUE(t->save(path).ok());
  auto back = Tokenizer::load(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->kind(), "char");  // recognised from the file
  EXPECT_EQ((*back)->encode(s), ids);
}

TEST(Tokenizer, CharacterLanguageModelKeepsEveryCharacter) {
  // A character LM reads whole text: line breaks and spaces are tokens, min_count 1 keeps everything.
  const std::string text = "In the beginning\n\nGod  created\tthe heaven.\r\nÄnd ünd €.\n";
  auto t = train("char", {text}, {.vocab_size = 1000, .min_count = 1});
  ASSERT_TRUE(t);
  auto ids = t->encode(text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), text::kUnk), 0);
  EXPECT_EQ(t->decode(ids), text);
  EXPECT_EQ(t->label(t->id_of("\n")), "\\n");
  EXPECT_EQ(t->label(t->id_of(" ")), "\xE2\x90\xA3");
  EXPECT_EQ(t->label(t->id_of("G")), "G");
  auto back = Tokenizer::parse(t->serialize(), "lm.txt");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->encode(text), ids);
  EXPECT_EQ((*back)->fingerprint(), t->fingerprint());
}

TEST(Tokenizer, OlderTranslatorFilesLoad) {
  auto w = Tokenizer::parse("lowercase 1\n<pad>\n<bos>\n<eos>\n<unk>\nthe\n\\\n", "src_vocab.txt");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ((*w)->kind(), "word");
  EXPECT_EQ((*w)->encode("The \\ x"), (std::vector<int64_t>{4, 5, text::kUnk}));
  auto c = Tokenizer::parse("characters lowercase 0\n<pad>\n<bos>\n<eos>\n<unk>\na\n", "tgt_vocab.txt");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->kind(), "char");
  EXPECT_EQ((*c)->encode("aA"), (std::vector<int64_t>{4, text::kUnk}));
}

// ---- SentencePiece ----

TEST(Tokenizer, SubwordsRoundTripAndReload) {
  for (const char* kind : {"bpe", "unigram"}) {
    SCOPED_TRACE(kind);
    auto t = train(kind, corpus(), {.vocab_size = 64});
    ASSERT_TRUE(t);
    EXPECT_EQ(t->kind(), kind);
    EXPECT_EQ(t->size(), 64);
    EXPECT_EQ(t->token(text::kPad), "<pad>");
    EXPECT_EQ(t->token(text::kEos), "<eos>");
    EXPECT_THROW(t->token(64), tg::Error);
    const std::string s = "The young horse walks across a wooden street.";
    auto ids = t->encode(s);
    ASSERT_FALSE(ids.empty());
    EXPECT_LT(ids.size(), s.size());  // pieces, not characters
    for (int64_t id : ids) EXPECT_GT(id, text::kEos);
    EXPECT_EQ(t->decode(ids), s);
    EXPECT_EQ(t->tokenize(s).size(), ids.size());
    EXPECT_EQ(t->tokenize(s)[0], t->token(ids[0]));
    auto with_eos = ids;
    with_eos.insert(with_eos.begin() + 2, text::kEos);
    EXPECT_EQ(t->decode(with_eos), t->decode({ids[0], ids[1]}));
    const std::string path = temp(Tokenizer::file_name(kind, "src"));
    ASSERT_TRUE(t->save(path).ok());
    auto back = Tokenizer::load(path);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ((*back)->kind(), kind);
    EXPECT_EQ((*back)->encode(s), ids);
  }
}

TEST(Tokenizer, SubwordLineBreaks) {
  // keep_newlines: one piece (U+2424) for a line break, put between lines and decoded back to "\n".
  std::vector<std::string> c = corpus(), chunks;
  for (size_t i = 0; i + 3 <= c.size(); i += 3) chunks.push_back(c[i] + "\n" + c[i + 1] + "\n\n" + c[i + 2]);
  auto t = train("unigram", chunks, {.vocab_size = 64, .keep_newlines = true});
  ASSERT_TRUE(t);
  const int64_t nl = t->id_of("\xE2\x90\xA4");
  ASSERT_NE(nl, text::kUnk);
  const std::string s = "The small dog runs across the green field.\nA young woman looks at a red ball!\n\nTwo old men";
  auto ids = t->encode(s);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), nl), 3);
  EXPECT_EQ(t->decode(ids), s);
  EXPECT_EQ(t->label(nl), "\xE2\x90\xA4");
  auto back = Tokenizer::parse(t->serialize(), "lm.spm");  // the line-break piece is found again
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->encode(s), ids);
  EXPECT_EQ((*back)->decode(ids), s);
  // Without keep_newlines there is no such piece.
  auto plain = train("bpe", corpus(), {.vocab_size = 64});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->id_of("\xE2\x90\xA4"), text::kUnk);
}

TEST(Tokenizer, UserSymbolsStayWhole) {
  auto t = train("bpe", corpus(), {.vocab_size = 64, .user_symbols = {"<sep>"}});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->id_of("<sep>"), 4);
  auto ids = t->encode("The dog<sep>The horse");
  EXPECT_NE(std::find(ids.begin(), ids.end(), 4), ids.end());
  EXPECT_FALSE(Tokenizer::train("bpe", corpus(), {.vocab_size = 64, .user_symbols = {"a,b"}}).ok());
}

// ---- every kind through a file ----

TEST(Tokenizer, EveryKindRoundTripsThroughItsFile) {
  const std::string dir = temp("dir_every_kind");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string s = "Two old men plays near the busy street.";
  for (const std::string& kind : Tokenizer::kinds()) {
    SCOPED_TRACE(kind);
    auto t = train(kind, corpus(), {.vocab_size = 64, .min_count = 1});
    ASSERT_TRUE(t);
    const std::string stem = "side_" + kind;
    ASSERT_TRUE(t->save_in(dir, stem).ok());
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + Tokenizer::file_name(kind, stem)));
    auto back = Tokenizer::load_in(dir, stem);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ((*back)->kind(), kind);
    EXPECT_EQ((*back)->size(), t->size());
    EXPECT_EQ((*back)->serialize(), t->serialize());
    EXPECT_EQ((*back)->fingerprint(), t->fingerprint());
    EXPECT_EQ((*back)->fingerprint().size(), 16u);
    EXPECT_EQ((*back)->encode(s), t->encode(s));
    EXPECT_EQ((*back)->decode(t->encode(s)), t->decode(t->encode(s)));
    for (int64_t id = 0; id < t->size(); ++id) ASSERT_EQ((*back)->token(id), t->token(id));
  }
  EXPECT_EQ(Tokenizer::file_name("word"), "tokenizer.txt");
  EXPECT_EQ(Tokenizer::file_name("char", "tgt"), "tgt.txt");
  EXPECT_EQ(Tokenizer::file_name("unigram", "src"), "src.spm");
  EXPECT_EQ(Tokenizer::file_name("wordpiece"), "tokenizer.json");  // read from a Hugging Face tokenizer.json
  EXPECT_THROW(Tokenizer::file_name("sentencepiece"), tg::Error);
  // Two candidates for one stem, or none, are refused.
  auto word = train("word", corpus(), {.min_count = 1});
  ASSERT_TRUE(word);
  ASSERT_TRUE(word->save_in(dir, "side_bpe").ok());
  EXPECT_TRUE(refused_naming(Tokenizer::load_in(dir, "side_bpe").status(), "side_bpe.txt"));
  EXPECT_TRUE(refused_naming(Tokenizer::load_in(dir, "nothing").status(), dir));
}

// ---- refusals ----

TEST(Tokenizer, BadInputIsRefused) {
  auto too_big = Tokenizer::train("bpe", {"a b c", "a b"}, {.vocab_size = 5000});
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("SentencePiece"), std::string::npos) << too_big.status().message();
  EXPECT_FALSE(Tokenizer::check_kind("wordpiece").ok());
  EXPECT_TRUE(Tokenizer::check_kind("unigram").ok());
  auto unknown = Tokenizer::train("wordpiece", corpus());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "unknown tokenizer 'wordpiece' (expected word, char, bpe or unigram)");
  EXPECT_FALSE(Tokenizer::train("word", {}, {}).ok());
  EXPECT_FALSE(Tokenizer::train("char", corpus(), {.vocab_size = 4}).ok());
  EXPECT_FALSE(Tokenizer::train("unigram", {"", "\n"}, {.vocab_size = 64}).ok());
  const std::string path = temp("corrupt.spm");
  write(path, "this is not a model");
  auto bad = Tokenizer::load(path);
  EXPECT_TRUE(refused_naming(bad.status(), path));
  EXPECT_NE(bad.status().message().find("not a SentencePiece model"), std::string::npos) << bad.status().message();
  EXPECT_TRUE(refused_naming(Tokenizer::load(temp("missing.spm")).status(), temp("missing.spm")));
  EXPECT_TRUE(refused_naming(Tokenizer::parse("", "empty.spm").status(), "empty.spm"));
}

TEST(Tokenizer, TruncatedSentencePieceFilesAreRefused) {
  auto t = train("bpe", corpus(), {.vocab_size = 64});
  ASSERT_TRUE(t);
  const std::string bytes = t->serialize();
  const size_t n = bytes.size();
  for (size_t len : {size_t{1}, size_t{2}, size_t{5}, size_t{17}, n / 4, n / 2, n - 40, n - 2, n - 1}) {
    SCOPED_TRACE(len);
    EXPECT_TRUE(refused_naming(Tokenizer::parse(std::string_view(bytes).substr(0, len), "cut.spm").status(), "cut.spm"));
  }
  // A flipped byte anywhere (SentencePiece itself would trust a damaged normalizer table and could
  // crash): our files end with a fingerprint of the rest.
  for (size_t at : {size_t{40}, size_t{900}, n / 3, n - 30}) {
    SCOPED_TRACE(at);
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    auto f = Tokenizer::parse(flipped, "flipped.spm");
    EXPECT_TRUE(refused_naming(f.status(), "flipped.spm"));
  }
  // A model written by SentencePiece itself (no fingerprint field: 3 + 1 + 16 bytes) loads as before.
  auto plain = Tokenizer::parse(std::string_view(bytes).substr(0, n - 20), "plain.spm");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ((*plain)->encode("The small dog"), t->encode("The small dog"));
}

TEST(Tokenizer, CorruptWordFilesAreRefusedWithTheLine) {
  auto check = [](const std::string& bytes, const std::string& want) {
    auto r = Tokenizer::parse(bytes, "tok.txt");
    ASSERT_FALSE(r.ok()) << "accepted: " << bytes;
    EXPECT_EQ(r.status().message(), want);
  };
  check("tapegrad tokenizer word lowercase=0\n", "tok.txt: line 2: the vocabulary is missing (expected <pad> <bos> <eos> <unk> first)");
  check("tapegrad tokenizer word lowercase=0\n<pad>\n<bos>\n",
        "tok.txt: line 4: the file ends before the special tokens <pad> <bos> <eos> <unk> are all listed");
  check("tapegrad tokenizer char lowercase=0\n<pad>\n<eos>\n<bos>\n<unk>\n",
        "tok.txt: line 3: expected '<bos>' (the vocabulary starts with <pad> <bos> <eos> <unk>), found '<eos>'");
  check("tapegrad tokenizer word lowercase=0\n<pad>\n<bos>\n<eos>\n<unk>\nthe\ncat\nthe\n",
        "tok.txt: line 8: token 'the' appears twice (first on line 6)");
  check("tapegrad tokenizer word lowercase=2\n<pad>\n", "tok.txt: line 1: unexpected option 'lowercase=2' (a word tokenizer takes lowercase=0|1 and newlines=0|1)");
  check("tapegrad tokenizer char newlines=1\n<pad>\n", "tok.txt: line 1: unexpected option 'newlines=1' (a char tokenizer takes lowercase=0|1)");
  check("tapegrad tokenizer bpe\n<pad>\n", "tok.txt: line 1: expected 'tapegrad tokenizer word|char ...', found the kind 'bpe'");
  check("hello\nworld\n",
        "tok.txt: not a tokenizer file (line 1 is not 'tapegrad tokenizer word|char ...', and the file is not a SentencePiece model either)");
  check("tapegrad tokenizer word\n<pad>\n<bos>\n<eos>\n<unk>\n" + std::string(70000, 'x') + "\n",
        "tok.txt: line 6: a token of 70000 bytes (at most 65536)");
}

TEST(Tokenizer, OversizedFilesAreRefusedUnread) {
  const std::string path = temp("huge.spm");
  {
    std::ofstream(path) << "x";
  }
  std::filesystem::resize_file(path, static_cast<std::uintmax_t>(Tokenizer::kMaxFileBytes) + 1);  // sparse: costs no disk
  auto r = Tokenizer::load(path);
  EXPECT_TRUE(refused_naming(r.status(), path));
  EXPECT_NE(r.status().message().find("too large"), std::string::npos) << r.status().message();
  std::filesystem::remove(path);
}

// ---- encode_pair ----

// A stand-in for a BERT WordPiece tokenizer: its own special ids, one id per digit.
class DigitTokenizer : public Tokenizer {
 public:
  std::string kind() const override { return "digits"; }
  std::vector<std::string> tokenize(std::string_view t) const override { return text::utf8_chars(t); }
  std::vector<int64_t> encode(std::string_view t) const override {
    std::vector<int64_t> ids;
    for (char c : t) ids.push_back(c >= '0' && c <= '9' ? 10 + (c - '0') : unk_id());
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s;
    for (int64_t id : ids)
      if (id >= 10 && id < 20) s += static_cast<char>('0' + id - 10);
    return s;
  }
  std::string token(int64_t id) const override { return std::to_string(id); }
  int64_t id_of(std::string_view) const override { return unk_id(); }
  int64_t size() const override { return 20; }
  std::string serialize() const override { return "digits"; }
  int64_t pad_id() const override { return 0; }
  int64_t unk_id() const override { return 1; }
  int64_t cls_id() const override { return 2; }  // [CLS]
  int64_t sep_id() const override { return 3; }  // [SEP]
};

TEST(EncodePair, SpecialsAndTypeIds) {
  DigitTokenizer t;
  text::Encoding one = t.encode_pair("12");
  EXPECT_EQ(one.ids, (std::vector<int64_t>{2, 11, 12, 3}));
  EXPECT_EQ(one.type_ids, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(one.attention_mask, (std::vector<int64_t>{1, 1, 1, 1}));
  text::Encoding two = t.encode_pair("12", "345");
  EXPECT_EQ(two.ids, (std::vector<int64_t>{2, 11, 12, 3, 13, 14, 15, 3}));
  EXPECT_EQ(two.type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  text::Encoding bare = t.encode_pair("12", "3", {.add_special_tokens = false});
  EXPECT_EQ(bare.ids, (std::vector<int64_t>{11, 12, 13}));
  EXPECT_EQ(bare.type_ids, (std::vector<int64_t>{0, 0, 1}));
  // Our own tokenizers put <bos> and <eos> around.
  auto w = train("word", {"a b c"}, {.min_count = 1});
  ASSERT_TRUE(w);
  EXPECT_EQ(w->encode_pair("a b", "c").ids, (std::vector<int64_t>{text::kBos, 4, 5, text::kEos, 6, text::kEos}));
}

TEST(EncodePair, TruncatesLongestFirst) {
  DigitTokenizer t;
  // 5 + 3 tokens and 3 specials into 8: 2 + 3 of the 5 left to them (a longer one is cut to 3, b to 2).
  text::Encoding e = t.encode_pair("12345", "678", {.max_length = 8});
  EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 11, 12, 13, 3, 16, 17, 3}));
  EXPECT_EQ(e.type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 1}));
  // Both too long: halves of what is left, b taking the odd token (Hugging Face tokenizers 0.23's rule).
  EXPECT_EQ(t.encode_pair("1234", "5678", {.max_length = 8}).ids, (std::vector<int64_t>{2, 11, 12, 3, 15, 16, 17, 3}));
  EXPECT_EQ(t.encode_pair("1234", "5678", {.max_length = 7}).ids, (std::vector<int64_t>{2, 11, 12, 3, 15, 16, 3}));
  // A longer b loses first.
  EXPECT_EQ(t.encode_pair("1", "56789", {.max_length = 6}).ids, (std::vector<int64_t>{2, 11, 3, 15, 16, 3}));
  // One segment: cut at the end; nothing cut when it fits, or without truncation.
  EXPECT_EQ(t.encode_pair("12345", std::nullopt, {.max_length = 4}).ids, (std::vector<int64_t>{2, 11, 12, 3}));
  EXPECT_EQ(t.encode_pair("12", std::nullopt, {.max_length = 4}).ids.size(), 4u);
  EXPECT_EQ(t.encode_pair("12345", std::nullopt, {.max_length = 4, .truncation = false}).ids.size(), 7u);
  // Only the specials fit; fewer than the specials is a programming error.
  EXPECT_EQ(t.encode_pair("12", "34", {.max_length = 3}).ids, (std::vector<int64_t>{2, 3, 3}));
  EXPECT_THROW(t.encode_pair("12", "34", {.max_length = 2}), tg::Error);
}

TEST(EncodePair, Pads) {
  DigitTokenizer t;
  text::Encoding e = t.encode_pair("12", "3", {.max_length = 8, .padding = text::Padding::kMaxLength});
  EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 11, 12, 3, 13, 3, 0, 0}));
  EXPECT_EQ(e.type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(t.encode_pair("123", std::nullopt, {.padding = text::Padding::kLongest, .pad_to_multiple_of = 4}).ids,
            (std::vector<int64_t>{2, 11, 12, 13, 3, 0, 0, 0}));
  EXPECT_EQ(t.encode_pair("123", std::nullopt, {.pad_to_multiple_of = 4}).ids.size(), 5u);  // padding off
  EXPECT_THROW(t.encode_pair("1", std::nullopt, {.padding = text::Padding::kMaxLength}), tg::Error);
  EXPECT_THROW(t.encode_pair("1", std::nullopt, {.max_length = -1}), tg::Error);
}

TEST(EncodePair, BatchesPadToTheLongest) {
  DigitTokenizer t;
  auto b = t.encode_batch(std::vector<std::string>{"1", "1234", "12"}, {.padding = text::Padding::kLongest});
  ASSERT_EQ(b.size(), 3u);
  for (const auto& e : b) {
    EXPECT_EQ(e.ids.size(), 6u);
    EXPECT_EQ(e.type_ids.size(), 6u);
    EXPECT_EQ(e.attention_mask.size(), 6u);
  }
  EXPECT_EQ(b[0].ids, (std::vector<int64_t>{2, 11, 3, 0, 0, 0}));
  EXPECT_EQ(b[0].attention_mask, (std::vector<int64_t>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(b[1].attention_mask, (std::vector<int64_t>{1, 1, 1, 1, 1, 1}));
  auto p = t.encode_batch(std::vector<std::pair<std::string, std::string>>{{"1", "2"}, {"123", "45"}},
                          {.max_length = 6, .padding = text::Padding::kLongest, .pad_to_multiple_of = 8});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].ids, (std::vector<int64_t>{2, 11, 3, 12, 3, 0, 0, 0}));
  EXPECT_EQ(p[1].ids, (std::vector<int64_t>{2, 11, 12, 3, 14, 3, 0, 0}));  // cut to 6, padded to 8
  EXPECT_EQ(p[1].type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0}));
  auto none = t.encode_batch(std::vector<std::string>{"1", "1234"});
  EXPECT_EQ(none[0].ids.size(), 3u);
  EXPECT_EQ(none[1].ids.size(), 6u);
}

}  // namespace
}  // namespace tgt
