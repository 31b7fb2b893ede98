// Evaluating word vectors: reading analogy and word-pair files, analogy accuracy, Spearman.
#include "pipelines/word_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "test_util.h"

namespace tgt {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tg_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// man - king and woman - queen differ by the same vector; apple is elsewhere.
tg::Word2Vec toy_vectors() {
  return tg::parse_word2vec("5 3\nman 0 1 1\nwoman 0 -1 1\nking 2 1 1\nqueen 2 -1 1\napple 0 0 -1\n", "toy").value();
}

TEST(WordEval, NormalisesAsTheVocabularyDoes) {
  EXPECT_EQ(tg::text::normalise_word("\"Lord,", true), "lord");
  EXPECT_EQ(tg::text::normalise_word("don't", true), "don't");
  EXPECT_EQ(tg::text::normalise_word("\"Lord,", false), "\"Lord,");
  EXPECT_EQ(tg::text::normalise_word("--", true), "");
  EXPECT_EQ(tg::text::normalised_words("  The LORD -- said:\tunto\r", true),
            (std::vector<std::string>{"the", "lord", "said", "unto"}));
}

TEST(WordEval, ReadsAnalogiesAndNamesTheBadLine) {
  const auto qs = tg::text::read_analogies(
      write_temp("q.txt", ": family\nMan King Woman Queen\n\n: other\r\nman woman king queen\r\n"));
  ASSERT_TRUE(qs.ok()) << qs.status().message();
  ASSERT_EQ(qs->size(), 2u);
  EXPECT_EQ((*qs)[0].a, "man");
  EXPECT_EQ((*qs)[0].d, "queen");
  EXPECT_EQ((*qs)[1].c, "king");
  const std::string bad = write_temp("q_bad.txt", ": family\nman king woman queen\nman king woman\n");
  const auto r = tg::text::read_analogies(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), bad + ": line 3: expected four words (a b c d: a is to b as c is to d), found 3");
  const std::string empty = write_temp("q_empty.txt", ": only a header\n\n");
  EXPECT_NE(tg::text::read_analogies(empty).status().message().find("no analogy questions"), std::string::npos);
  EXPECT_NE(tg::text::read_analogies("/nonexistent/q.txt").status().message().find("/nonexistent/q.txt"), std::string::npos);
}

TEST(WordEval, ReadsWordPairsSkippingHeadersAndComments) {
  const auto ps = tg::text::read_word_pairs(
      write_temp("p.csv", "# WordSim\nWord 1,Word 2,Human (mean)\nKing,Queen,9\ntiger\tcat\t7.35\r\nonly two\nman woman 8 extra\n"));
  ASSERT_TRUE(ps.ok()) << ps.status().message();
  ASSERT_EQ(ps->size(), 3u);
  EXPECT_EQ((*ps)[0].a, "king");
  EXPECT_EQ((*ps)[0].score, 9.0);
  EXPECT_EQ((*ps)[1].b, "cat");
  EXPECT_DOUBLE_EQ((*ps)[1].score, 7.35);
  EXPECT_EQ((*ps)[2].a, "man");
  const std::string none = write_temp("p_none.csv", "word1,word2,score\nnan,inf,x\n");
  const auto r = tg::text::read_word_pairs(none);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), none + ": no word pair with a score in it (expected lines 'word word score', tab, comma or "
                                         "space separated)");
}

TEST(WordEval, SpearmanRanksWithTies) {
  EXPECT_DOUBLE_EQ(tg::text::spearman({1, 2, 3, 4}, {10, 20, 30, 45}), 1.0);
  EXPECT_DOUBLE_EQ(tg::text::spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Ranks {0, 1.5, 1.5, 3} and {0, 1, 2, 3}: 4.5 / sqrt(4.5 * 5) (scipy.stats.spearmanr: 0.9486832980505138).
  EXPECT_NEAR(tg::text::spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9486832980505138, 1e-15);
  EXPECT_TRUE(std::isnan(tg::text::spearman({1, 1, 1}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(tg::text::spearman({1}, {2})));
  EXPECT_TRUE(throws_with([] { tg::text::spearman({1, 2}, {1}); }, {"spearman", "x has 2 values, y 1"}));
}

TEST(WordEval, AnalogyAccuracyAsksOnlyFrequentWords) {
  const tg::Word2Vec w2v = toy_vectors();
  const std::vector<tg::text::Analogy> qs = {{"man", "king", "woman", "queen"},    // right
                                             {"king", "man", "queen", "woman"},    // right
                                             {"man", "woman", "king", "apple"},    // asked, wrong (queen)
                                             {"man", "king", "woman", "unicorn"}};  // unknown: skipped
  const tg::text::AnalogyResult r = tg::text::evaluate_analogies(w2v, qs);
  EXPECT_EQ(r.right, 2);
  EXPECT_EQ(r.asked, 3);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_DOUBLE_EQ(r.accuracy(), 2.0 / 3.0);
  // Only the 3 most frequent (the file's first 3: man, woman, king): every question has another word.
  const tg::text::AnalogyResult few = tg::text::evaluate_analogies(w2v, qs, 3);
  EXPECT_EQ(few.asked, 0);
  EXPECT_EQ(few.skipped, 4);
  EXPECT_EQ(few.accuracy(), 0.0);
  EXPECT_TRUE(throws_with([&] { tg::text::evaluate_analogies(w2v, qs, 0); }, {"restrict_vocab must be > 0, got 0"}));
}

TEST(WordEval, WordPairsCorrelateWithTheCosines) {
  const tg::Word2Vec w2v = toy_vectors();
  // Cosines: king-queen 4/6, man-woman 0, king-apple -1/sqrt(6): the same order as the scores.
  const tg::text::WordPairResult r =
      tg::text::evaluate_word_pairs(w2v, {{"king", "queen", 9}, {"man", "woman", 8}, {"king", "apple", 1}, {"queen", "unicorn", 5}});
  EXPECT_DOUBLE_EQ(r.spearman, 1.0);
  EXPECT_EQ(r.pairs, 3);
  EXPECT_EQ(r.skipped, 1);
  const tg::text::WordPairResult flipped =
      tg::text::evaluate_word_pairs(w2v, {{"king", "queen", 1}, {"man", "woman", 8}, {"king", "apple", 9}});
  EXPECT_DOUBLE_EQ(flipped.spearman, -1.0);
  const tg::text::WordPairResult unknown = tg::text::evaluate_word_pairs(w2v, {{"king", "unicorn", 1}});
  EXPECT_TRUE(std::isnan(unknown.spearman));
  EXPECT_EQ(unknown.pairs, 0);
  EXPECT_EQ(unknown.skipped, 1);
}

}  // namespace
}  // namespace tgt
