// text/batching.h: length buckets (never over max_tokens, every index once, the translator's old
// grouping kept), padding masks, sequence-to-sequence batches, stacked encodings and a language
// model's token windows.
#include <algorithm>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "graph/tensor.h"
#include "text/batching.h"

namespace tgt {
namespace {

namespace text = tg::text;

std::vector<text::Example> random_examples(uint32_t seed, size_t n) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> len(1, 40);
  std::vector<text::Example> out(n);
  for (auto& e : out) {
    e.src.assign(static_cast<size_t>(len(gen)), 7);
    e.tgt.assign(static_cast<size_t>(len(gen)), 9);
  }
  return out;
}

// train_translator's make_batches from before the move, kept here as the reference.
std::vector<std::vector<size_t>> old_make_batches(const std::vector<text::Example>& data, int64_t batch_tokens) {
  std::vector<size_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(data[a].tgt.size(), data[a].src.size()) < std::make_pair(data[b].tgt.size(), data[b].src.size());
  });
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> cur;
  size_t longest = 0;
  for (size_t i : order) {
    size_t len = std::max(data[i].tgt.size() + 1, data[i].src.size());
    if (!cur.empty() && static_cast<int64_t>(std::max(longest, len) * (cur.size() + 1)) > batch_tokens) {
      out.push_back(cur);
      cur.clear();
      longest = 0;
    }
    cur.push_back(i);
    longest = std::max(longest, len);
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

TEST(BucketBatches, NeverOverMaxTokensAndEveryIndexOnce) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int64_t> len(0, 50);
  for (int64_t max_tokens : {50, 64, 100, 1500}) {
    SCOPED_TRACE(max_tokens);
    std::vector<int64_t> lengths(997);
    for (auto& l : lengths) l = len(gen);
    auto batches = text::bucket_batches(lengths, max_tokens);
    std::vector<int> seen(lengths.size(), 0);
    for (const auto& b : batches) {
      ASSERT_FALSE(b.empty());
      int64_t longest = 0;
      for (int64_t i : b) longest = std::max(longest, lengths[static_cast<size_t>(i)]), ++seen[static_cast<size_t>(i)];
      EXPECT_LE(longest * static_cast<int64_t>(b.size()), max_tokens);
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
  }
}

TEST(BucketBatches, GroupsSimilarLengths) {
  // Sorted by length (stable), filled greedily: 4 x 2 = 8 fits, then 5 x 2 > 8.
  auto b = text::bucket_batches({5, 1, 4, 1, 2, 4}, 8);
  EXPECT_EQ(b, (std::vector<std::vector<int64_t>>{{1, 3, 4}, {2, 5}, {0}}));
  // A sample longer than max_tokens gets a batch of its own.
  EXPECT_EQ(text::bucket_batches({3, 20, 3}, 10), (std::vector<std::vector<int64_t>>{{0, 2}, {1}}));
  // Sort keys other than the lengths.
  EXPECT_EQ(text::bucket_batches({1, 1, 1}, 2, {{3, 0}, {1, 5}, {1, 2}}), (std::vector<std::vector<int64_t>>{{2, 1}, {0}}));
  EXPECT_TRUE(text::bucket_batches(std::vector<int64_t>{}, 8).empty());
  EXPECT_THROW(text::bucket_batches({1, 2}, 0), tg::Error);
  EXPECT_THROW(text::bucket_batches({1, 2}, 8, {{1, 1}}), tg::Error);
  EXPECT_THROW(text::bucket_batches({1, -2}, 8), tg::Error);
}

TEST(BucketBatches, TranslatorGroupingUnchanged) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto data = random_examples(seed, 600);
    for (int64_t max_tokens : {40, 300, 1500}) {
      auto want = old_make_batches(data, max_tokens);
      auto got = text::bucket_batches(data, max_tokens);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(std::vector<size_t>(got[i].begin(), got[i].end()), want[i]);
    }
  }
}

TEST(PadSequences, IdsAndMask) {
  text::Padded p = text::pad_sequences({{5, 6, 7}, {8}, {}}, 0);
  EXPECT_EQ(p.ids.shape(), (tg::Shape{3, 3}));
  EXPECT_EQ(p.ids.dtype(), tg::kInt64);
  EXPECT_EQ(p.padding_mask.dtype(), tg::kBool);
  EXPECT_EQ(p.ids.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 7, 8, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p.padding_mask.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 1}));
  text::Padded empty = text::pad_sequences({{}, {}}, 3);  // at least one column
  EXPECT_EQ(empty.ids.shape(), (tg::Shape{2, 1}));
  EXPECT_EQ(empty.ids.to_vector<int64_t>(), (std::vector<int64_t>{3, 3}));
}

TEST(Seq2SeqBatch, TeacherForcingTensors) {
  std::vector<text::Example> data = {{{10, 11, 12}, {20}}, {{13}, {21, 22, 23}}, {{14, 15}, {24, 25}}};
  text::Seq2SeqBatch b = text::make_seq2seq_batch(data, {2, 0});
  EXPECT_EQ(b.src.shape(), (tg::Shape{2, 3}));
  EXPECT_EQ(b.src.to_vector<int64_t>(), (std::vector<int64_t>{14, 15, 0, 10, 11, 12}));
  EXPECT_EQ(b.tgt_in.to_vector<int64_t>(), (std::vector<int64_t>{1, 24, 25, 1, 20, 0}));
  EXPECT_EQ(b.tgt_out.to_vector<int64_t>(), (std::vector<int64_t>{24, 25, 2, 20, 2, 0}));
  EXPECT_EQ(b.src_padding_mask.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(b.tgt_padding_mask.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(b.src_padding_mask.dtype(), tg::kBool);
  EXPECT_EQ(b.tokens, 5);  // 2 + 1 and 1 + 1 target tokens with eos
  text::Seq2SeqBatch own = text::make_seq2seq_batch(data, {1}, {.pad = 7, .bos = 8, .eos = 9});
  EXPECT_EQ(own.tgt_in.to_vector<int64_t>(), (std::vector<int64_t>{8, 21, 22, 23}));
  EXPECT_EQ(own.tgt_out.to_vector<int64_t>(), (std::vector<int64_t>{21, 22, 23, 9}));
  EXPECT_THROW(text::make_seq2seq_batch(data, {3}), tg::Error);
}

TEST(EncodePairs, DropsEmptyAndLongPairs) {
  auto tok = tg::text::Tokenizer::train("word", {"a b c d e"}, {.min_count = 1});
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const text::Pairs pairs = {{"a b", "c"}, {"a b c d", "e"}, {"a", "..."}, {"?", ""}, {"e", "d c"}};
  std::vector<int64_t> kept;
  auto examples = text::encode_pairs(pairs, **tok, **tok, 3, &kept);
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 2, 4}));  // 1: 4 source tokens; 3: an empty target
  ASSERT_EQ(examples.size(), 3u);
  EXPECT_EQ(examples[0].src, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(examples[1].tgt, (std::vector<int64_t>{tg::text::kUnk, tg::text::kUnk, tg::text::kUnk}));
  EXPECT_EQ(examples[2].tgt, (std::vector<int64_t>{7, 6}));
  EXPECT_EQ(text::encode_pairs(pairs, **tok, **tok).size(), 4u);  // no length limit
}

TEST(StackEncodings, TensorsAndMasks) {
  std::vector<text::Encoding> e = {{{1, 5, 2}, {0, 0, 0}, {1, 1, 1}}, {{1, 5, 2, 6, 2}, {0, 0, 0, 1, 1}, {1, 1, 1, 1, 1}}};
  text::EncodedBatch b = text::stack_encodings(e, 0);
  EXPECT_EQ(b.ids.shape(), (tg::Shape{2, 5}));
  EXPECT_EQ(b.ids.to_vector<int64_t>(), (std::vector<int64_t>{1, 5, 2, 0, 0, 1, 5, 2, 6, 2}));
  EXPECT_EQ(b.type_ids.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(b.attention_mask.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(b.padding_mask.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_THROW(text::stack_encodings({{{1, 2}, {0}, {1, 1}}}, 0), tg::Error);
}

TEST(TokenWindows, InputsAndTargetsAreTheWindowShiftedByOne) {
  std::vector<int64_t> ids(23);
  std::iota(ids.begin(), ids.end(), 100);
  const text::TokenWindows w(ids, 5);
  ASSERT_EQ(w.size(), 4);  // (23 - 1) / 5: windows of 6 tokens at 0, 5, 10, 15
  EXPECT_EQ(w.start(3), 15);
  const tg::Tensor x = w.inputs({3, 0}), y = w.targets({3, 0});
  EXPECT_EQ(x.shape(), tg::Shape({2, 5}));
  EXPECT_EQ(x.to_vector<int64_t>(), std::vector<int64_t>({115, 116, 117, 118, 119, 100, 101, 102, 103, 104}));
  EXPECT_EQ(y.to_vector<int64_t>(), std::vector<int64_t>({116, 117, 118, 119, 120, 101, 102, 103, 104, 105}));
  EXPECT_EQ(text::TokenWindows(std::vector<int64_t>(ids.begin(), ids.begin() + 21), 5).size(), 4);  // 21 = 4 x 5 + 1
  EXPECT_EQ(text::TokenWindows(std::vector<int64_t>(ids.begin(), ids.begin() + 20), 5).size(), 3);
}

TEST(TokenWindows, AtMostMaxWindowsEvenlySpaced) {
  const text::TokenWindows w(std::vector<int64_t>(101, 1), 10, 4);  // 10 available: 0, 2, 5, 7 (x 10)
  ASSERT_EQ(w.size(), 4);
  EXPECT_EQ(std::vector<int64_t>({w.start(0), w.start(1), w.start(2), w.start(3)}), std::vector<int64_t>({0, 20, 50, 70}));
  EXPECT_EQ(text::TokenWindows(std::vector<int64_t>(101, 1), 10, 50).size(), 10);  // fewer available than asked
}

TEST(TokenWindows, TooFewTokensAndBadArgumentsAreSaid) {
  EXPECT_EQ(text::TokenWindows({1, 2, 3}, 3).size(), 0);
  EXPECT_EQ(text::TokenWindows({}, 3).size(), 0);
  EXPECT_THROW(text::TokenWindows({1, 2, 3}, 0), tg::Error);
  EXPECT_THROW(text::TokenWindows({1, 2, 3}, 1, -1), tg::Error);
  const text::TokenWindows w({1, 2, 3, 4}, 1);
  try {
    w.inputs({0, 3});
    FAIL() << "window 3 of 3 accepted";
  } catch (const tg::Error& e) {
    EXPECT_STREQ(e.what(), "TokenWindows: window 3 is out of range: there are 3");
  }
}

}  // namespace
}  // namespace tgt
