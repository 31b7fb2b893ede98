// word2vec: the fused negative-sampling loss (gradient checked), sparse row updates, training on a
// small built-in text (related words end up nearer than unrelated ones), and the original file
// formats.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include <unistd.h>

#include "io/file.h"
#include "ops/kernels/sgns.h"
#include "ops/kernels/simd.h"
#include "test_util.h"

namespace tgt {
namespace {

TEST(Word2VecOp, NegativeSamplingLossForward) {
  Tensor u = tg::randn({3, 4}, tg::kFloat64), v = tg::randn({3, 3, 4}, tg::kFloat64);
  Tensor s = tg::matmul(v, u.unsqueeze(2)).squeeze(2);  // [3, 3]
  auto sv = s.to_vector<double>();
  std::vector<double> rows(3, 0.0);
  for (int b = 0; b < 3; ++b)
    for (int c = 0; c < 3; ++c) {
      double x = c == 0 ? sv[b * 3 + c] : -sv[b * 3 + c];
      rows[b] += -std::log(1 / (1 + std::exp(-x)));
    }
  EXPECT_TRUE(close(tg::negative_sampling_loss(u, v, tg::Reduction::kNone), rows, 1e-12));
  EXPECT_NEAR(tg::negative_sampling_loss(u, v).item(), rows[0] + rows[1] + rows[2], 1e-12);
  EXPECT_NEAR(tg::negative_sampling_loss(u, v, tg::Reduction::kMean).item(), (rows[0] + rows[1] + rows[2]) / 3, 1e-12);
  // Large scores stay finite (log-sigmoid computed stably).
  Tensor big = tg::full({1, 2, 1}, 1000.0, tg::kFloat64);
  EXPECT_NEAR(tg::negative_sampling_loss(tg::ones({1, 1}, tg::kFloat64), big).item(), 1000.0, 1e-9);
}

TEST(Word2VecOp, NegativeSamplingLossGradcheck) {
  for (auto red : {tg::Reduction::kSum, tg::Reduction::kMean, tg::Reduction::kNone}) {
    Tensor u = leaf({4, 5}), v = leaf({4, 3, 5});
    auto fn = [red](const std::vector<Tensor>& in) { return tg::negative_sampling_loss(in[0], in[1], red); };
    EXPECT_TRUE(gradcheck_ok(fn, {u, v}));
    EXPECT_TRUE(gradgradcheck_ok(fn, {u, v}));
  }
  // float32 path: vector body and tail (D = 37), threaded over many rows.
  Tensor u = tg::randn({300, 37}).requires_grad_(), v = tg::randn({300, 6, 37}).requires_grad_();
  Tensor u64 = u.detach().to(tg::kFloat64).requires_grad_(), v64 = v.detach().to(tg::kFloat64).requires_grad_();
  tg::negative_sampling_loss(u, v).backward();
  tg::negative_sampling_loss(u64, v64).backward();
  EXPECT_TRUE(close(u.grad(), u64.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(close(v.grad(), v64.grad(), 1e-4, 1e-5));
}

TEST(Word2VecOp, Errors) {
  EXPECT_TRUE(throws_with([] { tg::negative_sampling_loss(tg::zeros({2, 3}), tg::zeros({2, 4, 4})); },
                          {"negative_sampling_loss", "[2, 3]", "[2, 4, 4]"}));
  EXPECT_TRUE(throws_with([] { tg::negative_sampling_loss(tg::zeros({2, 3}), tg::zeros({2, 4, 3}, tg::kFloat64)); },
                          {"one dtype"}));
}

TEST(Word2VecOp, IndexAddInPlaceTouchesOnlyGivenRows) {
  Tensor table = tg::zeros({6, 3});
  Tensor ids = tg::tensor({4, 1, 4}).to(tg::kInt64);
  tg::index_add_(table, 0, ids, tg::ones({3, 3}), -0.5);
  auto t = table.to_vector<double>();
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(t[r * 3 + c], r == 4 ? -1.0 : r == 1 ? -0.5 : 0.0);
  Tensor p = tg::zeros({6, 3}).requires_grad_();
  EXPECT_TRUE(throws_with([&] { tg::index_add_(p, 0, ids, tg::ones({3, 3})); }, {"index_add_", "requires grad"}));
  EXPECT_TRUE(throws_with([&] { tg::index_add_(table, 0, tg::tensor({6}).to(tg::kInt64), tg::ones({1, 3})); }, {"index_add_", "6"}));
}

// A small built-in text: three topics, each with its own words, sharing the function words.
std::string topic_text(uint64_t seed, int sentences) {
  const std::vector<std::vector<std::string>> topics = {
      {"king", "queen", "prince", "princess", "crown", "throne", "palace", "royal"},
      {"dog", "cat", "horse", "cow", "sheep", "farm", "barn", "puppy"},
      {"bread", "cheese", "apple", "soup", "kitchen", "cook", "butter", "meal"}};
  const std::vector<std::string> fillers = {"the", "a", "in", "on", "with", "and", "of", "was"};
  tg::Generator g(seed);
  std::string text;
  for (int s = 0; s < sentences; ++s) {
    const auto& t = topics[g.next_u64() % topics.size()];
    for (int w = 0; w < 10; ++w) {
      text += (w % 2 == 0) ? t[g.next_u64() % t.size()] : fillers[g.next_u64() % fillers.size()];
      text += ' ';
    }
    text += '\n';
  }
  return text;
}

std::vector<int64_t> corpus_with_sentences(const tg::WordCounts& vocab, const std::string& text) {
  std::vector<int64_t> corpus;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    auto ids = vocab.encode(tg::whitespace_tokens(text.substr(start, nl - start)));
    corpus.insert(corpus.end(), ids.begin(), ids.end());
    corpus.push_back(-1);
    start = nl == std::string::npos ? text.size() : nl + 1;
  }
  return corpus;
}

void expect_topics_separate(const tg::Word2Vec& w2v) {
  const std::vector<std::pair<std::string, std::string>> related = {{"king", "queen"}, {"dog", "cat"}, {"bread", "cheese"},
                                                                    {"prince", "throne"}, {"horse", "barn"}};
  const std::vector<std::pair<std::string, std::string>> unrelated = {{"king", "cat"}, {"dog", "cheese"}, {"bread", "queen"},
                                                                      {"prince", "barn"}, {"horse", "soup"}};
  for (size_t i = 0; i < related.size(); ++i) {
    double r = w2v.similarity(related[i].first, related[i].second);
    double u = w2v.similarity(unrelated[i].first, unrelated[i].second);
    EXPECT_GT(r, u + 0.2) << related[i].first << "/" << related[i].second << " " << r << " vs " << unrelated[i].first << "/"
                          << unrelated[i].second << " " << u;
  }
  auto near = w2v.most_similar("king", 5);
  const std::vector<std::string> royal = {"queen", "prince", "princess", "crown", "throne", "palace", "royal"};
  for (auto& [w, s] : near) EXPECT_NE(std::find(royal.begin(), royal.end(), w), royal.end()) << w << " near king";
}

TEST(Word2Vec, SkipGramPlacesRelatedWordsNearer) {
  std::string text = topic_text(1, 3000);
  tg::WordCounts vocab = tg::WordCounts::build(tg::whitespace_tokens(text), 5);
  EXPECT_EQ(vocab.size(), 32);
  tg::Word2Vec w2v(vocab, {.dim = 32, .window = 3, .negative = 5, .sample = 0, .epochs = 3, .batch = 256});
  std::vector<tg::Word2VecProgress> progress;
  w2v.train(corpus_with_sentences(vocab, text), [&](const tg::Word2VecProgress& p) { progress.push_back(p); });
  ASSERT_GE(progress.size(), 2u);
  EXPECT_EQ(progress.back().words_done, 3 * 30000);
  EXPECT_LT(progress.back().alpha, 0.025 * 0.01);  // decayed linearly to the floor
  EXPECT_LT(progress.back().loss, progress.front().loss);
  expect_topics_separate(w2v);
  // Analogy query form: (queen - king) + dog lands among the animals.
  auto a = w2v.most_similar({"queen", "dog"}, {"king"}, 3);
  const std::vector<std::string> animals = {"cat", "horse", "cow", "sheep", "farm", "barn", "puppy"};
  EXPECT_NE(std::find(animals.begin(), animals.end(), a[0].first), animals.end()) << a[0].first;
  EXPECT_TRUE(throws_with([&] { w2v.most_similar("emperor"); }, {"'emperor' is not in the vocabulary"}));
}

TEST(Word2Vec, OneLongLineTrainsToo) {  // no sentence breaks at all (as text8)
  std::string text = topic_text(5, 3000);
  tg::WordCounts vocab = tg::WordCounts::build(tg::whitespace_tokens(text), 5);
  tg::Word2Vec w2v(vocab, {.dim = 32, .window = 3, .negative = 5, .sample = 0, .epochs = 3, .batch = 256});
  std::vector<double> alphas;
  w2v.train(vocab.encode(tg::whitespace_tokens(text)), [&](const tg::Word2VecProgress& p) { alphas.push_back(p.alpha); });
  ASSERT_GE(alphas.size(), 5u);  // progress is reported along the way, the rate decays smoothly
  EXPECT_GT(alphas[0], 0.8 * 0.025);
  for (size_t i = 1; i < alphas.size(); ++i) EXPECT_LE(alphas[i], alphas[i - 1]);
  EXPECT_LT(alphas[alphas.size() / 2], alphas[0]);
  expect_topics_separate(w2v);
}

TEST(Word2Vec, CbowAndSubsamplingAlsoLearn) {
  std::string text = topic_text(2, 3000);
  tg::WordCounts vocab = tg::WordCounts::build(tg::whitespace_tokens(text), 1);
  tg::Word2Vec w2v(vocab, {.cbow = true, .dim = 32, .window = 3, .negative = 5, .sample = 1e-2, .epochs = 5, .batch = 128});
  w2v.train(corpus_with_sentences(vocab, text));
  expect_topics_separate(w2v);
}

TEST(Word2Vec, DeterministicForASeed) {
  std::string text = topic_text(3, 200);
  tg::WordCounts vocab = tg::WordCounts::build(tg::whitespace_tokens(text), 1);
  auto corpus = corpus_with_sentences(vocab, text);
  tg::Word2Vec a(vocab, {.dim = 8, .epochs = 1}), b(vocab, {.dim = 8, .epochs = 1});
  a.train(corpus);
  tg::set_num_threads(1);
  b.train(corpus);
  tg::set_num_threads(2);
  EXPECT_TRUE(close(a.vectors(), b.vectors(), 0, 0));
}

// The shared-negatives kernel against a float64 reference: scores, g, both gradients and the loss,
// with rows padded to the SIMD width and m * n not a multiple of it.
// Data-parallel word2vec's pure parts (the sums themselves are tested under mpirun, tests/dist).
TEST(Word2VecParts, ShardSentencesGivesEverySentenceToOneProcess) {
  // Sentences of 2, 0 (an empty line), 1 and 2,500 words (cut into 1,000 + 1,000 + 500), no final -1.
  std::vector<int64_t> corpus = {1, 2, -1, -1, 3, -1};
  for (int i = 0; i < 2500; ++i) corpus.push_back(4);
  for (int size : {1, 2, 3, 7}) {
    std::vector<std::vector<int64_t>> sentences;  // every shard's, in order
    std::vector<int64_t> words(size);
    for (int r = 0; r < size; ++r) {
      const std::vector<int64_t> part = tg::dist::shard_sentences(corpus, r, size);
      ASSERT_FALSE(part.empty() && r < 5) << "process " << r << " of " << size;
      if (!part.empty()) {
        EXPECT_EQ(part.back(), -1);
      }
      std::vector<int64_t> cur;
      for (int64_t id : part) {
        if (id >= 0) {
          cur.push_back(id);
          ++words[static_cast<size_t>(r)];
        } else {
          ASSERT_FALSE(cur.empty()) << "an empty sentence in process " << r << "'s part";
          sentences.push_back(std::exchange(cur, {}));
        }
      }
    }
    ASSERT_EQ(sentences.size(), 5u) << size << " processes";
    int64_t total = 0;
    std::multiset<size_t> lengths;
    for (const auto& s : sentences) {
      lengths.insert(s.size());
      total += static_cast<int64_t>(s.size());
    }
    EXPECT_EQ(total, 2503);
    EXPECT_EQ(lengths, (std::multiset<size_t>{1, 2, 500, 1000, 1000}));
  }
  // Sentence k goes to process k % size.
  std::vector<int64_t> second = {3, -1};  // sentences 1 and 3 of [1 2], [3], [4 x 1,000], [4 x 1,000], [4 x 500]
  second.insert(second.end(), 1000, 4);
  second.push_back(-1);
  EXPECT_EQ(tg::dist::shard_sentences(corpus, 1, 2), second);
  EXPECT_THROW(tg::dist::shard_sentences(corpus, 2, 2), tg::Error);
}

TEST(Word2VecParts, HotWordsAreThoseMetOnceAnInterval) {
  // 10,000 words. Without subsampling, word w is hot for interval S when count(w) x S >= 10,000.
  const tg::WordCounts vocab = tg::WordCounts::from_words({"a", "b", "c", "d"}, {5000, 4000, 990, 10});
  EXPECT_EQ(tg::dist::hot_words(vocab, 0, 2), (std::vector<int64_t>{0}));
  EXPECT_EQ(tg::dist::hot_words(vocab, 0, 3), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(tg::dist::hot_words(vocab, 0, 11), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(tg::dist::hot_words(vocab, 0, 1000), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(tg::dist::hot_words(vocab, 0, 0).empty());
  // Subsampling at 1e-2 (sN = 100) keeps (sqrt(5000 / 100) + 1) x 100 = 807 of "a"'s 5,000: met
  // 807 x S / 10,000 times, so not hot at S = 12 (0.97) but hot at 13 (1.05).
  EXPECT_EQ(tg::dist::hot_words(vocab, 1e-2, 12), (std::vector<int64_t>{}));
  EXPECT_EQ(tg::dist::hot_words(vocab, 1e-2, 13), (std::vector<int64_t>{0}));
  EXPECT_THROW(tg::dist::hot_words(vocab, -1, 10), tg::Error);
}

TEST(Word2VecKernel, SharedWindowMatchesReference) {
  const int64_t simd = static_cast<int64_t>(xsimd::batch<float>::size);
  for (int64_t m : {1, 3, 10})
    for (int64_t n : {1, 6, 7}) {
      const int64_t D = 37, ld = (D + simd - 1) / simd * simd;
      tg::Generator g(static_cast<uint64_t>(m * 100 + n));
      std::vector<float, tg::kernels::AlignedAllocator<float>> x(static_cast<size_t>(m * ld), 0.0f), y(static_cast<size_t>(n * ld), 0.0f),
          gx(static_cast<size_t>(m * ld)), gy(static_cast<size_t>(n * ld)), scores(static_cast<size_t>((m * n / simd + 2) * simd));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t d = 0; d < D; ++d) x[i * ld + d] = static_cast<float>(g.normal());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t d = 0; d < D; ++d) y[j * ld + d] = static_cast<float>(g.normal() * 0.5);
      const float alpha = 0.025f;
      float loss = tg::kernels::sgns_shared_window(x.data(), m, y.data(), n, ld, alpha, gx.data(), gy.data(), scores.data());
      double ref_loss = 0;
      std::vector<double> G(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += static_cast<double>(x[i * ld + d]) * y[j * ld + d];
          const double label = j == 0 ? 1 : 0, sig = 1 / (1 + std::exp(-s));
          G[i * n + j] = alpha * (label - sig);
          ref_loss += -std::log(j == 0 ? sig : 1 - sig);
        }
      EXPECT_NEAR(loss, ref_loss, 1e-4 * (1 + ref_loss)) << m << "x" << n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t d = 0; d < ld; ++d) {
          double r = 0;
          for (int64_t j = 0; j < n; ++j) r += G[i * n + j] * y[j * ld + d];
          ASSERT_NEAR(gx[i * ld + d], r, 1e-6) << "gx " << i << "," << d;
        }
      for (int64_t j = 0; j < n; ++j)
        for (int64_t d = 0; d < ld; ++d) {
          double r = 0;
          for (int64_t i = 0; i < m; ++i) r += G[i * n + j] * x[i * ld + d];
          ASSERT_NEAR(gy[j * ld + d], r, 1e-6) << "gy " << j << "," << d;
          if (d >= D) {
            ASSERT_EQ(gy[j * ld + d], 0.0f);  // the padding stays zero
          }
        }
    }
}

// The numbers depend on the seed and the batch, never on the thread count: 1, 2 and 3 threads,
// skip-gram and CBOW, with subsampling and many small batches.
TEST(Word2Vec, SameVectorsForAnyThreadCount) {
  std::string text = topic_text(7, 200);
  tg::WordCounts vocab = tg::WordCounts::build(tg::whitespace_tokens(text), 1);
  auto corpus = corpus_with_sentences(vocab, text);
  const int before = tg::num_threads();
  for (bool cbow : {false, true}) {
    std::vector<Tensor> results;
    for (int threads : {1, 2, 3}) {
      tg::set_num_threads(threads);
      tg::Word2Vec w(vocab, {.cbow = cbow, .dim = 19, .window = 4, .negative = 3, .sample = 1e-2, .epochs = 2, .batch = 16});
      w.train(corpus);
      results.push_back(w.vectors().clone());
      EXPECT_TRUE(close(w.vectors(), results[0], 0, 0)) << (cbow ? "cbow" : "skip-gram") << ", " << threads << " threads";
    }
  }
  tg::set_num_threads(before);
}

// Real text (the KJV, which `./tg.sh test` installs): words of one kind end up nearer each other
// than random frequent words are. A wrong sign, a missing update of either table or a broken
// noise distribution fails this.
TEST(Word2Vec, LearnsRelatedWordsFromTheKjv) {
  const std::string path = std::string(TG_TEST_DATA_DIR) + "/../data/kjv.txt";
  auto text = tg::read_file(path);
  if (!text.ok()) {
    GTEST_SKIP() << path << " is missing: ./tg.sh data (or ./tg.sh test) writes it";
  }
  std::string lower = *text;
  for (char& c : lower) c = std::isalpha(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c == '\n' ? '\n' : ' ';
  tg::WordCounts vocab = tg::WordCounts::build(tg::whitespace_tokens(lower), 5);
  tg::Word2Vec w(vocab, {.dim = 64, .epochs = 2});
  w.train(corpus_with_sentences(vocab, lower));
  const std::vector<std::pair<std::string, std::string>> related = {
      {"gold", "silver"}, {"moses", "aaron"}, {"sheep", "oxen"}, {"bread", "wine"}, {"sword", "spear"},
      {"son", "daughter"}, {"heaven", "earth"}, {"brass", "iron"}, {"camels", "asses"}, {"saul", "david"}};
  double related_mean = 0;
  for (const auto& [a, b] : related) related_mean += w.similarity(a, b) / static_cast<double>(related.size());
  // Random pairs among the 2,000 most frequent words.
  tg::Generator g(3);
  double random_mean = 0;
  const int pairs = 500;
  for (int i = 0; i < pairs; ++i)
    random_mean += w.similarity(vocab.word(static_cast<int64_t>(g.next_u64() % 2000)),
                                vocab.word(static_cast<int64_t>(g.next_u64() % 2000))) / pairs;
  EXPECT_GT(related_mean, random_mean + 0.15) << "related " << related_mean << ", random " << random_mean;
  auto near = w.most_similar("silver", 10);
  bool gold = false;
  for (auto& [word, s] : near) gold = gold || word == "gold";
  EXPECT_TRUE(gold) << "gold is not among silver's 10 nearest words";
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tg_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(Word2Vec, TextAndBinaryFilesRoundTrip) {
  std::string text = topic_text(4, 100);
  tg::WordCounts vocab = tg::WordCounts::build(tg::whitespace_tokens(text), 1);
  tg::Word2Vec w2v(vocab, {.dim = 7, .epochs = 1});
  w2v.train(corpus_with_sentences(vocab, text));
  for (bool binary : {false, true}) {
    std::string path = temp_path(binary ? "v.bin" : "v.txt");
    ASSERT_TRUE(w2v.save(path, binary).ok());
    auto back = tg::load_word2vec(path);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->vocab().words(), vocab.words());
    EXPECT_TRUE(close(back->vectors(), w2v.vectors(), binary ? 0 : 1e-5, binary ? 0 : 1e-6));
    std::ifstream in(path, std::ios::binary);
    std::string head;
    std::getline(in, head);
    EXPECT_EQ(head, std::to_string(vocab.size()) + " 7");
    std::remove(path.c_str());
  }
}

TEST(Word2Vec, CorruptFilesAreRejected) {
  auto write = [](const std::string& name, const std::string& bytes) {
    std::string p = temp_path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  };
  auto rejects = [](const std::string& path, const std::string& fragment) -> ::testing::AssertionResult {
    auto r = tg::load_word2vec(path);
    std::remove(path.c_str());
    if (r.ok()) return ::testing::AssertionFailure() << "accepted (" << fragment << ")";
    std::string msg(r.status().message());
    if (msg.find(fragment) == std::string::npos) return ::testing::AssertionFailure() << msg;
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(rejects(write("a", ""), "no header line"));
  EXPECT_TRUE(rejects(write("b", "2 x\n"), "bad header line"));
  EXPECT_TRUE(rejects(write("c", "-1 3\n"), "bad header line"));
  EXPECT_TRUE(rejects(write("d", "2 3\nking 0.1 0.2 0.3\nqueen 0.1 0.2\n"), "line 3: expected a word and 3 numbers"));
  EXPECT_TRUE(rejects(write("e", "1 2\nking 0.1 abc\n"), "'abc' is not a finite number"));
  EXPECT_TRUE(rejects(write("f", "2 2\nking 1 2\n"), "truncated"));  // text cut after one entry
  EXPECT_TRUE(rejects(write("g", "2 2\nking 1 2\nking 3 4\n"), "'king' appears twice"));
  std::string bin = "2 4\nking ";
  float v[4] = {1, 2, 3, 4};
  bin.append(reinterpret_cast<const char*>(v), 16);
  bin += "\nqueen ";
  bin.append(reinterpret_cast<const char*>(v), 9);  // truncated binary entry
  EXPECT_TRUE(rejects(write("h", bin), "entry 2 ('queen'): 9 bytes left, 16 needed"));
  EXPECT_FALSE(tg::load_word2vec("/nonexistent/vectors.bin").ok());
  EXPECT_TRUE(rejects(write("i", "100000000 100000\n"), "more than the 0 bytes that follow"));
  tg::Word2Vec loaded(tg::WordCounts::from_words({"a", "b"}, {1, 1}), tg::zeros({2, 3}));
  EXPECT_TRUE(throws_with([&] { loaded.train({0, 1}); }, {"loaded vectors only"}));
}

TEST(Word2Vec, MeanVectorsAverageTheKnownWords) {
  const tg::Word2Vec w2v = tg::parse_word2vec("3 2\nking 1 2\nqueen 3 -4\nman 0.5 0\n", "toy").value();
  const Tensor m = w2v.mean_vectors({{"king", "queen"}, {"unicorn", "man", "man"}, {}, {"unicorn"}});
  EXPECT_EQ(m.shape(), (tg::Shape{4, 2}));
  EXPECT_EQ(m.dtype(), tg::kFloat32);
  EXPECT_TRUE(close(m, std::vector<double>{2, -1, 0.5, 0, 0, 0, 0, 0}, 0, 0));  // unknown words skipped; none known: zeros
  EXPECT_EQ(w2v.mean_vectors({}).shape(), (tg::Shape{0, 2}));
}

}  // namespace
}  // namespace tgt
