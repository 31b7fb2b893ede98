// Text data for the translator: BLEU against sacreBLEU (tests/golden/bleu_cases.json, made by
// tests/golden/make_bleu_golden.py), tokenization, vocabularies, sentence-pair readers.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "examples/text_data.h"
#include "test_util.h"

namespace tgt {
namespace {

namespace ex = tg::examples;

TEST(Bleu, MatchesSacreBleu) {
  std::ifstream in(std::string(TG_TEST_DATA_DIR) + "/golden/bleu_cases.json");
  ASSERT_TRUE(in.good());
  nlohmann::json j = nlohmann::json::parse(in);
  int n = 0;
  for (const auto& c : j.at("cases")) {
    std::vector<std::string> hyps = c.at("hyps"), refs = c.at("refs");
    ex::Bleu b = ex::corpus_bleu(hyps, refs);
    std::string name = c.at("name");
    EXPECT_NEAR(b.score, c.at("score").get<double>(), 1e-9) << name;
    EXPECT_NEAR(b.bp, c.at("bp").get<double>(), 1e-12) << name;
    EXPECT_EQ(b.sys_len, c.at("sys_len").get<int64_t>()) << name;
    EXPECT_EQ(b.ref_len, c.at("ref_len").get<int64_t>()) << name;
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(b.precisions[k], c.at("precisions")[k].get<double>(), 1e-9) << name << " p" << k + 1;
    ++n;
  }
  EXPECT_EQ(n, 7);
  EXPECT_EQ(ex::tokenize_13a("He paid $3,000.50 (roughly) for it, didn't he?"),
            (std::vector<std::string>{"He", "paid", "$", "3,000.50", "(", "roughly", ")", "for", "it", ",", "didn't", "he", "?"}));
}

TEST(TextData, WordTokensRoundTrip) {
  auto t = ex::word_tokens("Don't worry, it's (mostly) well-known!");
  EXPECT_EQ(t, (std::vector<std::string>{"Don't", "worry", ",", "it's", "(", "mostly", ")", "well", "-", "known", "!"}));
  EXPECT_EQ(ex::detokenize(t), "Don't worry, it's (mostly) well-known!");
  EXPECT_EQ(ex::word_tokens("Über Straße.", true), (std::vector<std::string>{"Über", "straße", "."}));
}

TEST(TextData, VocabularyEncodesAndSerializes) {
  ex::WordVocab v = ex::WordVocab::build({"the cat sat.", "the dog sat.", "a cat!"}, 8, false);
  EXPECT_EQ(v.size(), 8);
  EXPECT_EQ(v.token(4), "the");  // most frequent first (ties: first seen)
  auto ids = v.encode("the cat ran.");
  EXPECT_EQ(ids[2], ex::WordVocab::kUnk);
  EXPECT_EQ(v.decode({ids[0], ids[1], ex::WordVocab::kEos, ids[0]}), "the cat");
  auto back = ex::WordVocab::parse(v.serialize());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->encode("the cat ran."), ids);
  EXPECT_FALSE(ex::WordVocab::parse("garbage\n").ok());
}

TEST(TextData, ReadersAndSplit) {
  std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/ding.txt") << "# comment\n"
                                   << "Haus {n} | Das Haus ist sehr alt. :: house | The house is very old.\n"
                                   << "Er kommt morgen wieder zurück. :: He will come back tomorrow.\n"
                                   << "kurz :: short\n";
  auto d = ex::read_ding_pairs(dir + "/ding.txt");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].second, "The house is very old.");
  std::ofstream(dir + "/a.txt") << "eins\nzwei\n";
  std::ofstream(dir + "/b.txt") << "one\n";
  auto bad = ex::read_aligned(dir + "/a.txt", dir + "/b.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("aligned"), std::string::npos);
  std::ofstream(dir + "/p.tsv") << "eins\tone\nzwei two\n";
  auto tsv = ex::read_tsv(dir + "/p.tsv");
  ASSERT_FALSE(tsv.ok());
  EXPECT_NE(std::string(tsv.status().message()).find("line 2 has no tab"), std::string::npos);
  ex::Pairs many;
  for (int i = 0; i < 2000; ++i) many.emplace_back("satz " + std::to_string(i), "sentence " + std::to_string(i));
  ex::Split s = ex::split_pairs(many, 2), again = ex::split_pairs(many, 2);
  EXPECT_EQ(s.train.size() + s.valid.size() + s.test.size(), 2000u);
  EXPECT_NEAR(static_cast<double>(s.valid.size()), 40, 25);
  EXPECT_EQ(s.valid, again.valid);  // deterministic
}

}  // namespace
}  // namespace tgt
