// text/vocabulary.h: building (frequency order, ties first seen, min_count, max_size), lookups,
// the one-token-a-line file with escapes, and the errors of a corrupt file.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>

#include "text/vocabulary.h"

namespace tgt {
namespace {

using tg::text::Vocabulary;

TEST(Vocabulary, DefaultHoldsTheFourSpecials) {
  Vocabulary v;
  ASSERT_EQ(v.size(), 4);
  EXPECT_EQ(v.token(tg::text::kPad), "<pad>");
  EXPECT_EQ(v.token(tg::text::kBos), "<bos>");
  EXPECT_EQ(v.token(tg::text::kEos), "<eos>");
  EXPECT_EQ(v.token(tg::text::kUnk), "<unk>");
  EXPECT_EQ(v.unk_id(), tg::text::kUnk);
  EXPECT_EQ(v.id("anything"), tg::text::kUnk);
}

TEST(Vocabulary, BuildOrdersByCountThenFirstSeen) {
  // counts: b 3, a 2, c 2, d 1, e 1; a is seen before c, d before e.
  Vocabulary v = Vocabulary::build({{"a", "b", "c"}, {"b", "d", "a"}, {"c", "b", "e"}}, 0);
  EXPECT_EQ(v.tokens(), (std::vector<std::string>{"<pad>", "<bos>", "<eos>", "<unk>", "b", "a", "c", "d", "e"}));
  EXPECT_EQ(v.id("c"), 6);
  // max_size counts the specials; min_count drops the rare ones.
  EXPECT_EQ(Vocabulary::build({{"a", "b", "c"}, {"b", "d", "a"}, {"c", "b", "e"}}, 6).tokens().back(), "a");
  EXPECT_EQ(Vocabulary::build({{"a", "b", "c"}, {"b", "d", "a"}, {"c", "b", "e"}}, 0, 2).size(), 7);
  EXPECT_EQ(Vocabulary::build({{"a", "b", "c"}, {"b", "d", "a"}, {"c", "b", "e"}}, 0, 4).size(), 4);
}

TEST(Vocabulary, BuildSkipsSpecialsEmptyAndOverlongTokens) {
  Vocabulary v = Vocabulary::build({{"<unk>", "", "x", std::string(tg::text::kMaxTokenBytes + 1, 'y'), "<pad>"}}, 0);
  EXPECT_EQ(v.tokens(), (std::vector<std::string>{"<pad>", "<bos>", "<eos>", "<unk>", "x"}));
  Vocabulary mine = Vocabulary::build({{"x", "y"}}, 0, 1, {"[PAD]", "[UNK]"});
  EXPECT_EQ(mine.tokens(), (std::vector<std::string>{"[PAD]", "[UNK]", "x", "y"}));
  EXPECT_EQ(mine.unk_id(), -1);  // no "<unk>" until told
  EXPECT_THROW(mine.id("z"), tg::Error);
  mine.set_unk_token("[UNK]");
  EXPECT_EQ(mine.id("z"), 1);
  EXPECT_THROW(mine.set_unk_token("[MASK]"), tg::Error);
}

TEST(Vocabulary, BuildFromCountsAddsRepeatedEntries) {
  Vocabulary v = Vocabulary::build_from_counts({{"x", 1}, {"y", 2}, {"x", 2}, {"z", 2}}, 0);
  EXPECT_EQ(v.tokens(), (std::vector<std::string>{"<pad>", "<bos>", "<eos>", "<unk>", "x", "y", "z"}));
}

TEST(Vocabulary, TokenIsChecked) {
  Vocabulary v;
  EXPECT_THROW(v.token(4), tg::Error);
  EXPECT_THROW(v.token(-1), tg::Error);
  try {
    v.token(9);
    ADD_FAILURE() << "token(9) did not throw";
  } catch (const tg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("id 9 is out of range"), std::string::npos) << e.what();
  }
}

TEST(Vocabulary, SerializeRoundTripsAwkwardTokens) {
  auto v = Vocabulary::from_tokens({"<pad>", "<bos>", "<eos>", "<unk>", "\n", " ", "\\", "\\n", "a\rb", "\t", "é", "\xff"});
  ASSERT_TRUE(v.ok()) << v.status().message();
  const std::string bytes = v->serialize();
  auto back = Vocabulary::parse(bytes, "mem");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tokens(), v->tokens());
  EXPECT_EQ(back->id("\n"), 4);
  EXPECT_EQ(back->id("\\n"), 7);
  // One line a token.
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), '\n'), v->size());
}

TEST(Vocabulary, ForeignVocabTxtReadsAsWritten) {
  // BERT-style vocab.txt: no escapes; a lone backslash and "\x" stay as they are; CRLF is accepted.
  auto v = Vocabulary::parse("[PAD]\r\n[UNK]\r\n\\\r\n\\x\r\n##ing\r\n", "vocab.txt");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->tokens(), (std::vector<std::string>{"[PAD]", "[UNK]", "\\", "\\x", "##ing"}));
}

TEST(Vocabulary, CorruptFilesAreRefusedWithFileAndLine) {
  auto dup = Vocabulary::parse("<pad>\nthe\ncat\nthe\n", "vocab.txt");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(), "vocab.txt: line 4: token 'the' appears twice (first on line 2)");
  auto empty_line = Vocabulary::parse("a\n\nb\n", "v.txt");
  ASSERT_FALSE(empty_line.ok());
  EXPECT_EQ(empty_line.status().message(), "v.txt: line 2: empty token");
  auto offset = Vocabulary::parse("a\na\n", "t.txt", 2);  // after a header line
  ASSERT_FALSE(offset.ok());
  EXPECT_EQ(offset.status().message(), "t.txt: line 3: token 'a' appears twice (first on line 2)");
  auto nothing = Vocabulary::parse("", "e.txt");
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.status().message(), "e.txt: an empty vocabulary (no tokens)");
  auto big = Vocabulary::parse("a\n" + std::string(tg::text::kMaxTokenBytes + 1, 'x') + "\n", "big.txt");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "big.txt: line 2: a token of 65537 bytes (at most 65536)");
  auto repeated = Vocabulary::from_tokens({"a", "b", "a"});
  ASSERT_FALSE(repeated.ok());
  EXPECT_EQ(repeated.status().message(), "vocabulary: token 2 'a' repeats token 0");
}

TEST(Vocabulary, SaveAndLoad) {
  const std::string path = ::testing::TempDir() + "/text_vocabulary_test.txt";
  Vocabulary v = Vocabulary::build({{"x", "y", "x", "\n"}}, 0);
  ASSERT_TRUE(v.save(path).ok());
  auto back = Vocabulary::load(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, v);
  auto missing = Vocabulary::load(::testing::TempDir() + "/no_such_vocabulary.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no_such_vocabulary.txt"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace tgt
