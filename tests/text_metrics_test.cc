// text/metrics.h: BLEU against sacreBLEU (tests/golden/bleu_cases.json, made by
// tests/golden/make_bleu_golden.py) and perplexity.
#include <cmath>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "text/metrics.h"

namespace tgt {
namespace {

namespace text = tg::text;

TEST(Bleu, MatchesSacreBleu) {
  std::ifstream in(std::string(TG_TEST_DATA_DIR) + "/golden/bleu_cases.json");
  ASSERT_TRUE(in.good());
  nlohmann::json j = nlohmann::json::parse(in);
  int n = 0;
  for (const auto& c : j.at("cases")) {
    std::vector<std::string> hyps = c.at("hyps"), refs = c.at("refs");
    text::Bleu b = text::corpus_bleu(hyps, refs);
    std::string name = c.at("name");
    EXPECT_NEAR(b.score, c.at("score").get<double>(), 1e-9) << name;
    EXPECT_NEAR(b.bp, c.at("bp").get<double>(), 1e-12) << name;
    EXPECT_EQ(b.sys_len, c.at("sys_len").get<int64_t>()) << name;
    EXPECT_EQ(b.ref_len, c.at("ref_len").get<int64_t>()) << name;
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(b.precisions[k], c.at("precisions")[k].get<double>(), 1e-9) << name << " p" << k + 1;
    ++n;
  }
  EXPECT_EQ(n, 7);
  EXPECT_EQ(text::tokenize_13a("He paid $3,000.50 (roughly) for it, didn't he?"),
            (std::vector<std::string>{"He", "paid", "$", "3,000.50", "(", "roughly", ")", "for", "it", ",", "didn't", "he", "?"}));
  EXPECT_EQ(text::tokenize_13a("  a\tb &amp; c-\nd  "), (std::vector<std::string>{"a", "b", "&", "cd"}));
  EXPECT_TRUE(text::tokenize_13a("   ").empty());
}

TEST(Perplexity, FromSummedNats) {
  EXPECT_DOUBLE_EQ(text::perplexity(0.0, 10), 1.0);
  EXPECT_NEAR(text::perplexity(10 * std::log(50.0), 10), 50.0, 1e-9);
  EXPECT_NEAR(text::perplexity(3.0, 2), std::exp(1.5), 1e-12);
  EXPECT_TRUE(std::isinf(text::perplexity(1e6, 1)));  // overflow is an honest infinity
}

TEST(Perplexity, RefusesWhatHasNoPerplexity) {
  auto message = [](double nats, int64_t tokens) {
    try {
      text::perplexity(nats, tokens);
    } catch (const tg::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(1.0, 0), "perplexity: the token count must be positive, not 0");
  EXPECT_EQ(message(1.0, -3), "perplexity: the token count must be positive, not -3");
  EXPECT_EQ(message(std::numeric_limits<double>::quiet_NaN(), 5),
            "perplexity: the summed loss is nan (not finite: did training diverge?)");
  EXPECT_EQ(message(std::numeric_limits<double>::infinity(), 5),
            "perplexity: the summed loss is inf (not finite: did training diverge?)");
  EXPECT_EQ(message(-1.0, 5), "perplexity: the summed loss -1 is negative (a cross-entropy in nats is >= 0)");
}

}  // namespace
}  // namespace tgt
