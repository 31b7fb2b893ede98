#pragma once
// word2vec (Mikolov et al., 2013): skip-gram and CBOW with negative sampling, trained as the
// original is, row by row, with one change that makes it fast and deterministic: the negatives
// are shared by all the context words of a window (Ji et al. 2016), so a window's updates are
// three small matrix products (ops/kernels/sgns.h) instead of many vector updates. Threads split
// each batch of windows and then each batch's row updates; the result depends on the seed and
// the batch size, never on the thread count.
//
// As the original: a unigram^0.75 noise distribution, subsampling of frequent words
// (keep probability (sqrt(f / (s N)) + 1) (s N) / f), a window shrunk at random per word, and a
// learning rate decaying linearly to alpha * 1e-4 over all epochs.
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../graph/tensor.h"
#include "../io/status.h"

namespace tg {

// word2vec's vocabulary: the words kept for training, each with how often it occurs (the
// subsampling and the negative-sampling table read the counts). Not the tokenizers'
// tg::text::Vocabulary, which maps tokens to ids with special tokens.
class WordCounts {
 public:
  // Words seen at least min_count times, most frequent first (ties in first-seen order).
  static WordCounts build(const std::vector<std::string>& tokens, int64_t min_count = 5);
  static WordCounts from_words(std::vector<std::string> words, std::vector<int64_t> counts);
  int64_t id(const std::string& word) const;  // -1 when absent
  const std::string& word(int64_t id) const { return words_.at(static_cast<size_t>(id)); }
  int64_t count(int64_t id) const { return counts_.at(static_cast<size_t>(id)); }
  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  int64_t total() const { return total_; }  // tokens covered by the vocabulary
  // The ids of tokens, dropping out-of-vocabulary words.
  std::vector<int64_t> encode(const std::vector<std::string>& tokens) const;
  const std::vector<std::string>& words() const { return words_; }

 private:
  std::vector<std::string> words_;
  std::vector<int64_t> counts_;
  std::unordered_map<std::string, int64_t> index_;
  int64_t total_ = 0;
};

// The name before 0.2, kept for one release.
using Vocabulary [[deprecated("renamed tg::WordCounts")]] = WordCounts;

// Splits text on whitespace (what the original word2vec does; lower-case beforehand if wanted).
std::vector<std::string> whitespace_tokens(const std::string& text, bool lowercase = false);

// Lines longer than this are cut into sentences of this many words (as the original does).
inline constexpr int64_t kWord2VecMaxSentence = 1000;

// Subsampling: the probability that training keeps an occurrence of a word seen `count` times of
// `total`, (sqrt(f / (s N)) + 1) (s N) / f capped at 1; 1 when `sample` is 0 (off).
double word2vec_keep_probability(int64_t count, int64_t total, double sample);

struct Word2VecOptions {
  bool cbow = false;       // false: skip-gram
  int64_t dim = 100;
  int64_t window = 5;
  int64_t negative = 5;
  double sample = 1e-3;    // subsampling threshold (0: off)
  int64_t epochs = 5;
  double alpha = -1;       // starting learning rate; < 0: 0.025 for skip-gram, 0.05 for CBOW
  int64_t batch = 256;     // centre words whose windows read the same vectors before their
                           // updates are added (the threads share a batch)
  uint64_t seed = 1;
};

struct Word2VecProgress {
  int64_t words_done, words_total;
  double alpha, loss;  // mean loss per pair since the last report
};

// Training in several processes (data parallelism; train_word2vec does it under mpirun): each
// process trains on its own part of the corpus, and `fn` brings the processes' vectors together
// at `syncs` points spread evenly over each process's progress (the last at the end), between
// batches, with every thread of this process waiting. `stream` (the process's rank) gives each
// process its own noise words, windows and subsampling.
struct Word2VecSync {
  int64_t syncs = 0;  // 0: never
  std::function<void(Tensor& in, Tensor& out)> fn{};
  uint64_t stream = 0;
};

class Word2Vec {
 public:
  Word2Vec(WordCounts vocab, const Word2VecOptions& opts = {});
  // corpus: word ids (from vocab), sentences separated by -1 (a window never crosses one).
  // on_progress is called about every 10,000 words.
  void train(const std::vector<int64_t>& corpus, const std::function<void(const Word2VecProgress&)>& on_progress = {},
             const Word2VecSync& sync = {});

  const WordCounts& vocab() const { return vocab_; }
  const Word2VecOptions& options() const { return opts_; }
  // The word vectors [V, dim] (the input embeddings, as the original writes them).
  const Tensor& vectors() const { return in_; }
  const Tensor& output_vectors() const { return out_; }
  int64_t words_trained() const { return words_trained_; }  // corpus words processed, all epochs
  // True after train() stopped because the loss or the vectors stopped being finite (a learning
  // rate far too high); train() then throws tg::Error saying so, and the vectors are unusable.
  bool diverged() const { return diverged_; }

  // Nearest words by cosine similarity (the query words excluded).
  std::vector<std::pair<std::string, double>> most_similar(const std::string& word, int64_t k = 10) const;
  // Analogy: positive - negative (e.g. {"king", "woman"} - {"man"} -> "queen").
  std::vector<std::pair<std::string, double>> most_similar(const std::vector<std::string>& positive,
                                                           const std::vector<std::string>& negative,
                                                           int64_t k = 10) const;
  double similarity(const std::string& a, const std::string& b) const;  // cosine; tg::Error for unknown words
  // One row per sentence [n, dim], float32: the mean of the vectors of its words that are in the
  // vocabulary (gensim's get_mean_vector, unweighted; a sentence-level baseline feature); zeros
  // for a sentence with none.
  Tensor mean_vectors(const std::vector<std::vector<std::string>>& sentences) const;

  // The original word2vec formats: "V dim\n" then per word "word v1 ... vdim\n" (text) or
  // "word " + dim little-endian float32 + "\n" (binary). Written atomically.
  Status save(const std::string& path, bool binary = false) const;

  // Used by the loaders: a model from existing vectors.
  Word2Vec(WordCounts vocab, Tensor vectors);

 private:
  Tensor unit_rows() const;  // rows scaled to unit length (cached lazily is not worth it)
  std::vector<std::pair<std::string, double>> nearest(const std::vector<float>& query,
                                                      const std::vector<int64_t>& exclude, int64_t k) const;
  WordCounts vocab_;
  Word2VecOptions opts_;
  Tensor in_, out_;
  int64_t words_trained_ = 0;
  bool diverged_ = false;
};

// Reads vectors in either original format (detected from the bytes), validating counts, sizes and
// numbers; a truncated or corrupt file gives a message naming the line or word.
Result<Word2Vec> load_word2vec(const std::string& path);
// The same on bytes in memory; `source` names them in messages.
Result<Word2Vec> parse_word2vec(std::string_view bytes, const std::string& source = "<memory>");

}  // namespace tg
