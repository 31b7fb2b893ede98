// word2vec in several processes (data parallelism over MPI; train_word2vec does it under mpirun).
//
//   tg::dist::Communicator& comm = tg::dist::world();
//   auto mine = tg::dist::shard_sentences(corpus, comm.rank(), comm.size());
//   tg::dist::Word2VecChangeSum sum(comm, model, corpus_words);
//   model.train(mine, on_progress, sum.sync());
//
// Every process trains on every size-th sentence with its own random numbers, and the processes'
// changes to both tables (input and output vectors) since the last sum are added together, so
// each process goes on from what all of them learned, as one process on the whole text would.
// The sums come on two schedules (the frequent words' vectors are brought together as often as
// they change, Ji et al. 2016, "Parallelizing Word2Vec in Shared and Distributed Memory"):
//   - every `sync_words` words a process trains: every word's vectors;
//   - every `hot_sync_words` words: the vectors of the hot words, those a process meets (after
//     subsampling) at least once in that many words on average. There are at most
//     hot_sync_words of them whatever the vocabulary, so this costs at most two vectors per word
//     trained; a word met less often changes little between the full sums.
// A frequent word's vectors change in every process between two sums; summing changes made from
// the same stale vectors overshoots, and on the KJV CBOW lost a point of analogy accuracy with the
// full sums alone (bench/RESULTS.md, "word2vec in two processes").
#pragma once

#include <cstdint>
#include <vector>

#include "../models/word2vec.h"
#include "dist.h"

namespace tg::dist {

// Sentence k of `corpus` (word ids, sentences ended by -1; lines longer than kWord2VecMaxSentence
// words are cut there, as Word2Vec::train cuts them) goes to process k % size, so every process sees all of the
// text's topics at every point of an epoch.
std::vector<int64_t> shard_sentences(const std::vector<int64_t>& corpus, int rank, int size);

struct Word2VecSumOptions {
  int64_t sync_words = 50000;     // words each process trains between sums of every vector
  int64_t hot_sync_words = 5000;  // words between sums of the hot words' vectors (0: none)
};

// The hot words' ids for `hot_sync_words` (see above): word w is hot when
// count(w) x keep(w) x hot_sync_words / total >= 1, keep(w) being
// word2vec_keep_probability(count(w), total, sample). Empty when hot_sync_words is 0.
std::vector<int64_t> hot_words(const WordCounts& vocab, double sample, int64_t hot_sync_words);

// Sums the processes' changes to a Word2Vec's vectors; pass sync() to Word2Vec::train. Keeps a
// copy of the vectors as of the last sum: construct it after the model and keep it alive through
// train(). Every process must construct it with the same model settings and corpus_words.
class Word2VecChangeSum {
 public:
  // corpus_words: the words of the whole corpus (all processes' parts together).
  Word2VecChangeSum(Communicator& comm, const Word2Vec& model, int64_t corpus_words, const Word2VecSumOptions& opts = {});
  Word2VecSync sync();

  int64_t syncs() const { return syncs_; }            // sums in all (the last at the end of training)
  int64_t full_syncs() const;                         // of them, those of every vector
  int64_t hot_word_count() const { return static_cast<int64_t>(hot_.size()); }
  int64_t calls() const { return calls_; }            // sums done so far

  // One sum now, as train() calls it: every vector when `full`, else the hot words'.
  void sum(Tensor& in, Tensor& out, bool full);

 private:
  Communicator& comm_;
  std::vector<int64_t> hot_;
  std::vector<float> before_in_, before_out_, delta_;
  int64_t dim_ = 0, syncs_ = 0, full_every_ = 1, calls_ = 0;
};

}  // namespace tg::dist
