#include "distributed/word2vec_sync.h"

#include <algorithm>
#include <cstddef>

#include "graph/error.h"

namespace tg::dist {

std::vector<int64_t> shard_sentences(const std::vector<int64_t>& corpus, int rank, int size) {
  TG_CHECK(size >= 1 && rank >= 0 && rank < size, "shard_sentences", "process {} of {}: expected 0 <= rank < size", rank, size);
  std::vector<int64_t> out;
  out.reserve(corpus.size() / static_cast<size_t>(size) + 1);
  int64_t sentence = 0, run = 0;  // sentence number; words of the current line so far
  for (size_t i = 0; i < corpus.size();) {
    // One sentence: up to the next -1, or kWord2VecMaxSentence words of a longer line.
    size_t end = i;
    while (end < corpus.size() && corpus[end] >= 0 && run < kWord2VecMaxSentence) {
      ++end;
      ++run;
    }
    const bool line_ends = end == corpus.size() || corpus[end] < 0;
    if (end > i && sentence++ % size == rank) {
      out.insert(out.end(), corpus.begin() + static_cast<std::ptrdiff_t>(i), corpus.begin() + static_cast<std::ptrdiff_t>(end));
      out.push_back(-1);
    }
    i = line_ends ? end + 1 : end;
    run = 0;
  }
  return out;
}

std::vector<int64_t> hot_words(const WordCounts& vocab, double sample, int64_t hot_sync_words) {
  TG_CHECK(hot_sync_words >= 0 && sample >= 0, "hot_words", "expected hot_sync_words >= 0 and sample >= 0, got {} and {}",
           hot_sync_words, sample);
  std::vector<int64_t> hot;
  if (hot_sync_words == 0 || vocab.total() <= 0) return hot;
  for (int64_t i = 0; i < vocab.size(); ++i) {
    const double kept = static_cast<double>(vocab.count(i)) * word2vec_keep_probability(vocab.count(i), vocab.total(), sample);
    if (kept * static_cast<double>(hot_sync_words) >= static_cast<double>(vocab.total())) hot.push_back(i);
  }
  return hot;
}

Word2VecChangeSum::Word2VecChangeSum(Communicator& comm, const Word2Vec& model, int64_t corpus_words,
                                     const Word2VecSumOptions& opts)
    : comm_(comm), dim_(model.options().dim) {
  TG_CHECK(opts.sync_words >= 1 && opts.hot_sync_words >= 0, "Word2VecChangeSum",
           "expected sync_words >= 1 and hot_sync_words >= 0, got {} and {}", opts.sync_words, opts.hot_sync_words);
  TG_CHECK(corpus_words >= 0, "Word2VecChangeSum", "corpus_words must be >= 0, got {}", corpus_words);
  TG_CHECK(model.output_vectors().defined(), "Word2VecChangeSum", "the model holds loaded vectors only; it cannot be trained");
  if (opts.hot_sync_words > 0 && opts.hot_sync_words < opts.sync_words)
    hot_ = hot_words(model.vocab(), model.options().sample, opts.hot_sync_words);
  // Sums every `interval` words; every full_every_-th of them is a full one. At least one, at the
  // end, so every process ends with the same vectors.
  const int64_t interval = hot_.empty() ? opts.sync_words : opts.hot_sync_words;
  if (!hot_.empty()) full_every_ = std::max<int64_t>(1, (opts.sync_words + interval / 2) / interval);
  syncs_ = std::max<int64_t>(1, corpus_words * model.options().epochs / comm.size() / interval);
  before_in_ = model.vectors().to_vector<float>();
  before_out_ = model.output_vectors().to_vector<float>();
}

int64_t Word2VecChangeSum::full_syncs() const {
  // Calls full_every, 2 full_every, ... and always the last.
  return syncs_ / full_every_ + (syncs_ % full_every_ != 0 ? 1 : 0);
}

Word2VecSync Word2VecChangeSum::sync() {
  Word2VecSync s;
  s.syncs = syncs_;
  s.stream = static_cast<uint64_t>(comm_.rank());
  s.fn = [this](Tensor& in, Tensor& out) {
    const int64_t call = calls_ + 1;
    sum(in, out, call % full_every_ == 0 || call == syncs_);
  };
  return s;
}

void Word2VecChangeSum::sum(Tensor& in, Tensor& out, bool full) {
  ++calls_;
  TG_CHECK(in.numel() == static_cast<int64_t>(before_in_.size()) && out.numel() == static_cast<int64_t>(before_out_.size()),
           "Word2VecChangeSum", "the vectors are {} and {}, expected {} and {} floats (the model it was built for)",
           in.shape().str(), out.shape().str(), before_in_.size(), before_out_.size());
  // The rows summed: every row, or the hot words'; both tables' changes go in one all-reduce.
  const auto D = static_cast<size_t>(dim_);
  const size_t rows = full ? before_in_.size() / D : hot_.size();
  if (rows == 0) return;
  auto row = [&](size_t r) { return (full ? r : static_cast<size_t>(hot_[r])) * D; };
  float* tables[2] = {in.data<float>(), out.data<float>()};
  float* befores[2] = {before_in_.data(), before_out_.data()};
  delta_.resize(2 * rows * D);
  for (size_t t = 0; t < 2; ++t)
    for (size_t r = 0; r < rows; ++r) {
      const float* v = tables[t] + row(r);
      const float* b = befores[t] + row(r);
      float* d = delta_.data() + (t * rows + r) * D;
      for (size_t j = 0; j < D; ++j) d[j] = v[j] - b[j];
    }
  comm_.all_reduce_sum(delta_.data(), static_cast<int64_t>(delta_.size()), full ? "summing the word vectors' changes" : "summing the frequent words' vector changes");
  for (size_t t = 0; t < 2; ++t)
    for (size_t r = 0; r < rows; ++r) {
      float* v = tables[t] + row(r);
      float* b = befores[t] + row(r);
      const float* d = delta_.data() + (t * rows + r) * D;
      for (size_t j = 0; j < D; ++j) v[j] = b[j] = b[j] + d[j];
    }
}

}  // namespace tg::dist
