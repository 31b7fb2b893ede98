#include "models/word2vec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include <atomic>
#include <exception>
#include <thread>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <fmt/format.h>

#include "graph/factory.h"
#include "graph/node.h"
#include "graph/random.h"
#include "io/file.h"
#include "ops/kernels/parallel.h"
#include "ops/kernels/sgns.h"
#include "ops/ops.h"

namespace tg {

// ---- WordCounts ----

WordCounts WordCounts::build(const std::vector<std::string>& tokens, int64_t min_count) {
  TG_CHECK(min_count >= 1, "WordCounts::build", "min_count must be >= 1, got {}", min_count);
  absl::flat_hash_map<std::string, int64_t> counts, first;
  for (const std::string& t : tokens) {
    if (counts[t]++ == 0) first[t] = static_cast<int64_t>(first.size());
  }
  std::vector<std::string> words;
  for (const auto& [w, c] : counts)
    if (c >= min_count) words.push_back(w);
  std::sort(words.begin(), words.end(), [&](const std::string& a, const std::string& b) {
    int64_t ca = counts[a], cb = counts[b];
    return ca != cb ? ca > cb : first[a] < first[b];
  });
  std::vector<int64_t> c;
  for (const auto& w : words) c.push_back(counts[w]);
  return from_words(std::move(words), std::move(c));
}

WordCounts WordCounts::from_words(std::vector<std::string> words, std::vector<int64_t> counts) {
  TG_CHECK(words.size() == counts.size(), "WordCounts", "{} words but {} counts", words.size(), counts.size());
  WordCounts v;
  v.words_ = std::move(words);
  v.counts_ = std::move(counts);
  for (size_t i = 0; i < v.words_.size(); ++i) {
    TG_CHECK(v.index_.emplace(v.words_[i], static_cast<int64_t>(i)).second, "WordCounts",
             "word '{}' appears twice", v.words_[i]);
    v.total_ += v.counts_[i];
  }
  return v;
}

int64_t WordCounts::id(const std::string& word) const {
  auto it = index_.find(word);
  return it == index_.end() ? -1 : it->second;
}

std::vector<int64_t> WordCounts::encode(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens)
    if (int64_t i = id(t); i >= 0) out.push_back(i);
  return out;
}

std::vector<std::string> whitespace_tokens(const std::string& text, bool lowercase) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : text) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
    } else {
      cur.push_back(lowercase ? static_cast<char>(std::tolower(static_cast<unsigned char>(ch))) : ch);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// ---- Training ----

Word2Vec::Word2Vec(WordCounts vocab, const Word2VecOptions& o) : vocab_(std::move(vocab)), opts_(o) {
  TG_CHECK(vocab_.size() > 0, "Word2Vec", "the vocabulary is empty (min_count too high for this text?)");
  TG_CHECK(o.dim > 0 && o.window > 0 && o.negative > 0 && o.epochs > 0 && o.batch > 0 && o.sample >= 0, "Word2Vec",
           "dim ({}), window ({}), negative ({}), epochs ({}) and batch ({}) must be positive, sample ({}) >= 0", o.dim,
           o.window, o.negative, o.epochs, o.batch, o.sample);
  if (opts_.alpha < 0) opts_.alpha = o.cbow ? 0.05 : 0.025;
  const int64_t V = vocab_.size(), D = o.dim;
  // The original's initialisation: input vectors U(-0.5, 0.5) / dim, output vectors zero.
  Generator gen(o.seed);
  std::vector<float> init(static_cast<size_t>(V * D));
  for (float& x : init) x = static_cast<float>((gen.uniform() - 0.5) / static_cast<double>(D));
  in_ = from_vector(init, {V, D});
  out_ = zeros({V, D});
}

Word2Vec::Word2Vec(WordCounts vocab, Tensor vectors) : vocab_(std::move(vocab)), in_(std::move(vectors)) {
  TG_CHECK(in_.dim() == 2 && in_.size(0) == vocab_.size(), "Word2Vec", "vectors of shape {} for {} words",
           in_.shape(), vocab_.size());
  opts_.dim = in_.size(1);
}

namespace {

bool all_finite(const Tensor& t) {
  const float* p = t.data<float>();
  float acc = 0;  // inf - inf and NaN stay NaN: one pass, no branch per element
  for (int64_t i = 0, n = t.numel(); i < n; ++i) acc += p[i] * 0.0f;
  return acc == 0.0f;
}

// splitmix64 (Steele et al.): the counter-based generator behind each window's draws (its width
// and its negatives), keyed by (seed, epoch, position): any thread draws a window's numbers, and
// they do not depend on which thread does or when.
inline uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Walker's alias method (Vose's construction): draws word w with probability p_w from one 64-bit
// number in O(1), from V entries (8 bytes each: they stay in cache) rather than the original's
// 10^8-entry table, and without its rounding of each word's share to table cells.
class AliasTable {
 public:
  explicit AliasTable(const std::vector<double>& weights) : prob_(weights.size()), alias_(weights.size()) {
    const size_t n = weights.size();
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    std::vector<double> scaled(n);
    std::vector<int32_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      scaled[i] = weights[i] * static_cast<double>(n) / total;
      (scaled[i] < 1.0 ? small : large).push_back(static_cast<int32_t>(i));
    }
    while (!small.empty() && !large.empty()) {
      int32_t s = small.back(), l = large.back();
      small.pop_back();
      prob_[static_cast<size_t>(s)] = static_cast<float>(scaled[static_cast<size_t>(s)]);
      alias_[static_cast<size_t>(s)] = l;
      scaled[static_cast<size_t>(l)] -= 1.0 - scaled[static_cast<size_t>(s)];
      if (scaled[static_cast<size_t>(l)] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (int32_t i : small) prob_[static_cast<size_t>(i)] = 1.0f, alias_[static_cast<size_t>(i)] = i;
    for (int32_t i : large) prob_[static_cast<size_t>(i)] = 1.0f, alias_[static_cast<size_t>(i)] = i;
  }
  int32_t draw(uint64_t r) const {
    const uint64_t i = ((r >> 32) * prob_.size()) >> 32;                       // high half: the cell
    const float u = static_cast<float>(r & 0xffffffffu) * 0x1p-32f;            // low half: within it
    return u < prob_[i] ? static_cast<int32_t>(i) : alias_[i];
  }

 private:
  std::vector<float> prob_;
  std::vector<int32_t> alias_;
};

// A barrier for the training threads, which are all busy between barriers: it spins briefly (the
// wait is usually a few microseconds), then sleeps on the generation counter (a futex), so a
// thread whose partner lost its core to another process does not burn its own.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void wait() {
    const uint32_t gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
      gen_.notify_all();
      return;
    }
    for (int spins = 0; spins < kSpins; ++spins) {
      if (gen_.load(std::memory_order_acquire) != gen) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    while (gen_.load(std::memory_order_acquire) == gen) gen_.wait(gen, std::memory_order_acquire);
  }

 private:
  static constexpr int kSpins = 4000;
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<uint32_t> gen_{0};
};

using AlignedFloats = std::vector<float, tg::kernels::AlignedAllocator<float>>;

// An update to one row: the vector at `at` in its thread's buffer is added to row `row`.
struct RowUpdate {
  int32_t row, at;
};

// What one thread produces in a batch, and its scratch space.
struct Worker {
  std::vector<RowUpdate> in_updates, out_updates;
  AlignedFloats grads, x, y, scores;
  std::vector<int32_t> ctx, outs;
  int64_t used = 0;  // floats of `grads` filled in this batch
  int64_t pairs = 0;
};

}  // namespace

double word2vec_keep_probability(int64_t count, int64_t total, double sample) {
  if (sample <= 0) return 1.0;
  const double sn = sample * static_cast<double>(total), f = static_cast<double>(count);
  return std::min(1.0, (std::sqrt(f / sn) + 1) * sn / f);
}

void Word2Vec::train(const std::vector<int64_t>& corpus, const std::function<void(const Word2VecProgress&)>& on_progress,
                     const Word2VecSync& sync) {
  TG_CHECK(sync.syncs >= 0 && (sync.syncs == 0 || sync.fn), "Word2Vec::train", "sync needs syncs >= 0 and a function");
  TG_CHECK(out_.defined(), "Word2Vec::train", "this model holds loaded vectors only; build a Word2Vec from a "
           "vocabulary and options to train");
  const int64_t V = vocab_.size(), D = opts_.dim, K = opts_.negative, W = opts_.window;
  TG_CHECK(V >= 2, "Word2Vec::train", "needs at least 2 words in the vocabulary for negative sampling, got {}", V);
  TG_CHECK(V < (int64_t{1} << 31), "Word2Vec::train", "at most 2^31 - 1 words, got {}", V);
  for (int64_t id : corpus)
    TG_CHECK(id >= -1 && id < V, "Word2Vec::train", "corpus id {} is outside the vocabulary [0, {})", id, V);
  in_ = in_.contiguous();
  out_ = out_.contiguous();
  float* in = in_.data<float>();
  float* out = out_.data<float>();

  // Noise distribution: unigram counts to the power 0.75.
  std::vector<double> pw(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) pw[static_cast<size_t>(i)] = std::pow(static_cast<double>(vocab_.count(i)), 0.75);
  const AliasTable noise(pw);
  std::vector<double> keep(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i)
    keep[static_cast<size_t>(i)] = word2vec_keep_probability(vocab_.count(i), vocab_.total(), opts_.sample);
  const int64_t corpus_words = std::count_if(corpus.begin(), corpus.end(), [](int64_t x) { return x >= 0; });
  const int64_t total = corpus_words * opts_.epochs;

  // The work is cut into batches of `batch` consecutive centre words. Within a batch every
  // window reads the vectors as they were at its start (phase 1, windows split among the
  // threads), then the updates are added in window order, each row by one thread (phase 2).
  // Which thread computes what never changes a number: the results depend on the seed and the
  // batch size, not on the thread count.
  const int T = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_threads(), opts_.batch)));
  const int64_t simd = static_cast<int64_t>(xsimd::batch<float>::size);
  const int64_t ld = (D + simd - 1) / simd * simd;  // padded row length: full vectors only
  const int64_t n_out = 1 + K, max_in = 2 * W;
  const int64_t per_thread = (opts_.batch + T - 1) / T;
  TG_CHECK(per_thread * (max_in + n_out) * ld < (int64_t{1} << 31), "Word2Vec::train",
           "batch {} x (2 x window {} + 1 + negative {}) x dim {} is too large for one batch's gradients; use a "
           "smaller batch", opts_.batch, W, K, D);
  std::vector<Worker> workers(static_cast<size_t>(T));
  for (Worker& w : workers) {
    // Skip-gram: 2W context gradients and 1 + K output gradients a window; CBOW: one of the first.
    w.grads.resize(static_cast<size_t>(per_thread * (max_in + n_out) * ld));
    w.x.assign(static_cast<size_t>(std::max<int64_t>(max_in, 1) * ld), 0.0f);
    w.y.assign(static_cast<size_t>(n_out * ld), 0.0f);
    w.scores.resize(static_cast<size_t>((max_in * n_out + simd) / simd * simd + simd));
    w.ctx.resize(static_cast<size_t>(max_in));
    w.outs.resize(static_cast<size_t>(n_out));
    w.in_updates.reserve(static_cast<size_t>(per_thread * max_in));
    w.out_updates.reserve(static_cast<size_t>(per_thread * n_out));
  }
  std::vector<double> window_loss(static_cast<size_t>(opts_.batch));

  // Each epoch's subsampled text: word ids with -1 closing each sentence (lines longer than the
  // original's 1,000 words are cut into sentences of that length, as it does).
  std::vector<int32_t> kept;
  kept.reserve(corpus.size() + corpus.size() / kWord2VecMaxSentence + 2);
  // A process of several draws its own numbers (stream 0 is the single-process run).
  const uint64_t seed = sync.stream == 0 ? opts_.seed : mix_key(opts_.seed, sync.stream);
  Generator gen(seed + 1);
  auto subsample = [&]() {
    kept.clear();
    int64_t read = 0;
    for (size_t pos = 0; pos < corpus.size(); ++pos) {
      const int64_t w = corpus[pos];
      if (w < 0 || read == kWord2VecMaxSentence) {
        if (!kept.empty() && kept.back() >= 0) kept.push_back(-1);
        read = 0;
        if (w < 0) continue;
      }
      ++read;
      const double k = keep[static_cast<size_t>(w)];
      if (k >= 1.0 || gen.uniform() < k) kept.push_back(static_cast<int32_t>(w));
    }
    if (!kept.empty() && kept.back() >= 0) kept.push_back(-1);
  };

  const bool cbow = opts_.cbow;
  // Phase 1 for one window (centre kept[i]): gradients into the worker's buffer; returns the loss.
  auto window = [&](Worker& wk, int64_t epoch, int64_t i, float alpha) -> double {
    const int32_t centre = kept[static_cast<size_t>(i)];
    if (centre < 0) return 0.0;
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(epoch) << 48) ^ static_cast<uint64_t>(i);
    const int64_t ew = W - static_cast<int64_t>(splitmix(rng) % static_cast<uint64_t>(W));  // shrunk window
    int32_t* ctx = wk.ctx.data();
    int64_t m = 0;
    for (int64_t j = i - 1; j >= 0 && i - j <= ew && kept[static_cast<size_t>(j)] >= 0; --j) ctx[m++] = kept[static_cast<size_t>(j)];
    for (int64_t j = i + 1; j - i <= ew && kept[static_cast<size_t>(j)] >= 0; ++j) ctx[m++] = kept[static_cast<size_t>(j)];
    if (m == 0) return 0.0;
    // The output rows: the centre word, then K negatives shared by the whole window.
    int32_t* outs = wk.outs.data();
    outs[0] = centre;
    for (int64_t k = 1; k < n_out; ++k) {
      int32_t neg = noise.draw(splitmix(rng));
      for (int tries = 0; neg == centre && tries < 10; ++tries) neg = noise.draw(splitmix(rng));
      outs[k] = neg;
    }
    const size_t row_bytes = static_cast<size_t>(D) * sizeof(float);
    for (int64_t k = 0; k < n_out; ++k) std::memcpy(wk.y.data() + k * ld, out + outs[k] * D, row_bytes);
    const int32_t at = static_cast<int32_t>(wk.used);
    float* g = wk.grads.data() + at;
    float loss;
    if (cbow) {  // one input row: the mean of the context vectors
      float* h = wk.x.data();
      std::fill(h, h + ld, 0.0f);
      for (int64_t c = 0; c < m; ++c) kernels::axpy(1.0f / static_cast<float>(m), in + ctx[c] * D, h, D);
      loss = kernels::sgns_shared_window(h, 1, wk.y.data(), n_out, ld, alpha, g, g + ld, wk.scores.data());
      // As the original, every context word receives the whole gradient of the mean.
      for (int64_t c = 0; c < m; ++c) wk.in_updates.push_back({ctx[c], at});
      for (int64_t k = 0; k < n_out; ++k) wk.out_updates.push_back({outs[k], at + static_cast<int32_t>((1 + k) * ld)});
      wk.used += (1 + n_out) * ld;
      wk.pairs += 1;
    } else {  // the context words are the inputs, as in the original's skip-gram
      for (int64_t c = 0; c < m; ++c) std::memcpy(wk.x.data() + c * ld, in + ctx[c] * D, row_bytes);
      loss = kernels::sgns_shared_window(wk.x.data(), m, wk.y.data(), n_out, ld, alpha, g, g + m * ld, wk.scores.data());
      for (int64_t c = 0; c < m; ++c) wk.in_updates.push_back({ctx[c], at + static_cast<int32_t>(c * ld)});
      for (int64_t k = 0; k < n_out; ++k) wk.out_updates.push_back({outs[k], at + static_cast<int32_t>((m + k) * ld)});
      wk.used += (m + n_out) * ld;
      wk.pairs += m;
    }
    return loss;
  };

  // Phase 2: the updates of every window in window order; this thread adds those to its rows.
  auto apply = [&](int t) {
    for (const Worker& wk : workers) {
      const float* g = wk.grads.data();
      for (const RowUpdate& u : wk.in_updates)
        if (u.row % T == t) kernels::axpy(1.0f, g + u.at, in + static_cast<int64_t>(u.row) * D, D);
      for (const RowUpdate& u : wk.out_updates)
        if (u.row % T == t) kernels::axpy(1.0f, g + u.at, out + static_cast<int64_t>(u.row) * D, D);
    }
  };

  SpinBarrier barrier(T);
  double loss_sum = 0, alpha = opts_.alpha;
  int64_t pairs_since = 0, last_report = 0, batch_begin = 0, epoch = 0;
  bool finished = false;
  int64_t diverged_at = -1;  // the batch (in the epoch's kept words) whose loss was not finite
  double diverged_alpha = 0;
  std::exception_ptr error;
  const int64_t B = opts_.batch;
  // Thread 0 (the caller) does the serial parts between barriers: the next epoch's subsampling,
  // the learning rate, the loss and the progress report.
  auto advance = [&]() {  // false when training is over
    while (batch_begin >= static_cast<int64_t>(kept.size())) {
      if (epoch == opts_.epochs || error) return false;
      subsample();
      ++epoch;
      batch_begin = 0;
    }
    if (error) return false;
    // Linear decay by the words of the whole run done so far (to alpha * 1e-4).
    const double frac = static_cast<double>(batch_begin) / static_cast<double>(kept.size());
    const double done = static_cast<double>(corpus_words) * (static_cast<double>(epoch - 1) + frac);
    alpha = opts_.alpha * std::max(1e-4, 1.0 - done / static_cast<double>(total + 1));
    return true;
  };
  // Two barriers a batch: after the windows (phase 1) and after the updates (phase 2). Thread 0
  // does the serial work during phase 2, which reads neither the text nor the rate: the loss, the
  // next batch (and at an epoch's end the next epoch's subsampling). The progress report runs at
  // the start of the next phase 1, while the vectors are only being read.
  bool report = false;
  // Syncs at fractions k / syncs of the run; run after every thread has added its updates.
  int64_t syncs_done = 0;
  bool sync_now = false;
  auto run = [&](int t) {
    Worker& wk = workers[static_cast<size_t>(t)];
    for (;;) {
      barrier.wait();  // the batch and its rate are set, the previous batch's updates are in
      if (sync_now) {  // every thread sees it: it was set before the barrier
        if (t == 0) {
          try {
            sync.fn(in_, out_);
          } catch (...) {
            error = std::current_exception();
            finished = true;
          }
        }
        barrier.wait();  // sync_now is cleared only in phase 2, after every thread has read it
      }
      if (finished) return;
      if (t == 0 && report) {
        report = false;
        try {  // a throwing callback ends training (once the other threads stop) and is rethrown
          on_progress({last_report, total, alpha, pairs_since ? loss_sum / static_cast<double>(pairs_since) : 0.0});
        } catch (...) {
          error = std::current_exception();
        }
        loss_sum = 0;
        pairs_since = 0;
      }
      const int64_t n = std::min<int64_t>(B, static_cast<int64_t>(kept.size()) - batch_begin);
      const int64_t lo = n * t / T, hi = n * (t + 1) / T;
      wk.in_updates.clear();
      wk.out_updates.clear();
      wk.used = 0;
      for (int64_t i = lo; i < hi; ++i)
        window_loss[static_cast<size_t>(i)] = window(wk, epoch - 1, batch_begin + i, static_cast<float>(alpha));
      barrier.wait();  // every window has read the vectors of the batch's start
      apply(t);
      if (t == 0) {
        double batch_loss = 0;
        for (int64_t i = 0; i < n; ++i) batch_loss += window_loss[static_cast<size_t>(i)];
        loss_sum += batch_loss;
        if (!std::isfinite(batch_loss) && diverged_at < 0) {  // stop: every later update would spread the NaN
          diverged_at = batch_begin;
          diverged_alpha = alpha;
          finished = true;
          sync_now = false;
          continue;
        }
        for (Worker& w : workers) pairs_since += std::exchange(w.pairs, 0);
        batch_begin += n;
        const double frac = static_cast<double>(batch_begin) / static_cast<double>(kept.size());
        const auto now = static_cast<int64_t>(static_cast<double>(corpus_words) * (static_cast<double>(epoch - 1) + frac));
        if (on_progress && now - last_report >= 10000) {
          report = true;
          last_report = now;
        }
        finished = !advance();
        sync_now = false;
        // The next sync point: fraction (syncs_done + 1) / syncs of all epochs' words (the final one at the end, below).
        if (!finished && sync.syncs > 1 && syncs_done + 1 < sync.syncs &&
            static_cast<double>(now) >= static_cast<double>(total) * static_cast<double>(syncs_done + 1) /
                                             static_cast<double>(sync.syncs)) {
          sync_now = true;
          ++syncs_done;
        }
      }
    }
  };
  finished = !advance();
  std::vector<std::thread> threads;
  for (int t = 1; t < T; ++t) threads.emplace_back(run, t);
  run(0);
  for (std::thread& th : threads) th.join();
  if (error) std::rethrow_exception(error);
  diverged_ = diverged_at >= 0 || !all_finite(in_) || !all_finite(out_);
  if (diverged_) {
    throw Error(diverged_at >= 0
                    ? fmt::format("word2vec: training diverged in epoch {} at word {} of {} (the loss is not finite at learning "
                                  "rate {:g}); the vectors are unusable: lower alpha (it was {:g})",
                                  epoch, diverged_at, kept.size(), diverged_alpha, opts_.alpha)
                    : fmt::format("word2vec: training diverged (vectors are not finite); lower alpha (it was {:g})", opts_.alpha));
  }
  // Every process calls fn exactly `syncs` times (those a short run skipped, then the last: every
  // process ends with the same vectors).
  for (; sync.syncs > 0 && syncs_done < sync.syncs; ++syncs_done) sync.fn(in_, out_);
  words_trained_ += total;
  if (on_progress) on_progress({total, total, alpha, pairs_since ? loss_sum / static_cast<double>(pairs_since) : 0.0});
}

// ---- Queries ----

Tensor Word2Vec::unit_rows() const {
  NoGradGuard ng;
  Tensor v = in_.to(kFloat32);
  return v / maximum(sqrt(sum(v * v, {1}, true)), 1e-12);
}

std::vector<std::pair<std::string, double>> Word2Vec::nearest(const std::vector<float>& query,
                                                              const std::vector<int64_t>& exclude, int64_t k) const {
  NoGradGuard ng;
  Tensor q = from_vector(query, {static_cast<int64_t>(query.size()), 1});
  q = q / maximum(sqrt(sum(q * q)), 1e-12);
  std::vector<float> sims = matmul(unit_rows(), q).to_vector<float>();
  std::vector<int64_t> order(sims.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return sims[a] > sims[b]; });
  std::vector<std::pair<std::string, double>> out;
  for (int64_t i : order) {
    if (static_cast<int64_t>(out.size()) >= k) break;
    if (std::find(exclude.begin(), exclude.end(), i) != exclude.end()) continue;
    out.emplace_back(vocab_.word(i), sims[static_cast<size_t>(i)]);
  }
  return out;
}

static int64_t known_id(const WordCounts& v, const std::string& w, const char* who) {
  int64_t id = v.id(w);
  TG_CHECK(id >= 0, who, "'{}' is not in the vocabulary ({} words)", w, v.size());
  return id;
}

std::vector<std::pair<std::string, double>> Word2Vec::most_similar(const std::string& word, int64_t k) const {
  return most_similar(std::vector<std::string>{word}, {}, k);
}

std::vector<std::pair<std::string, double>> Word2Vec::most_similar(const std::vector<std::string>& positive,
                                                                   const std::vector<std::string>& negative,
                                                                   int64_t k) const {
  TG_CHECK(!positive.empty(), "most_similar", "needs at least one positive word");
  Tensor unit = unit_rows();
  const float* u = unit.data<float>();
  const int64_t D = in_.size(1);
  std::vector<float> q(static_cast<size_t>(D), 0.0f);
  std::vector<int64_t> exclude;
  for (int sign : {1, -1})
    for (const std::string& w : sign > 0 ? positive : negative) {
      int64_t id = known_id(vocab_, w, "most_similar");
      exclude.push_back(id);
      for (int64_t d = 0; d < D; ++d) q[static_cast<size_t>(d)] += static_cast<float>(sign) * u[id * D + d];
    }
  return nearest(q, exclude, k);
}

double Word2Vec::similarity(const std::string& a, const std::string& b) const {
  Tensor unit = unit_rows();
  const int64_t D = in_.size(1), ia = known_id(vocab_, a, "similarity"), ib = known_id(vocab_, b, "similarity");
  const float* u = unit.data<float>();
  double s = 0;
  for (int64_t d = 0; d < D; ++d) s += static_cast<double>(u[ia * D + d]) * u[ib * D + d];
  return s;
}

Tensor Word2Vec::mean_vectors(const std::vector<std::vector<std::string>>& sentences) const {
  const Tensor table = in_.to(kFloat32);
  const float* t = table.data<float>();
  const int64_t n = static_cast<int64_t>(sentences.size()), D = table.size(1);
  std::vector<float> x(static_cast<size_t>(n * D), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* row = x.data() + i * D;
    int64_t known = 0;
    for (const std::string& w : sentences[static_cast<size_t>(i)]) {
      const int64_t id = vocab_.id(w);
      if (id < 0) continue;
      for (int64_t d = 0; d < D; ++d) row[d] += t[id * D + d];
      ++known;
    }
    if (known > 0)
      for (int64_t d = 0; d < D; ++d) row[d] /= static_cast<float>(known);
  }
  return from_vector(x, {n, D});
}

// ---- Files ----

Status Word2Vec::save(const std::string& path, bool binary) const {
  Tensor v = in_.to(kFloat32);
  const int64_t V = v.size(0), D = v.size(1);
  const float* p = v.data<float>();
  std::string out = fmt::format("{} {}\n", V, D);
  for (int64_t i = 0; i < V; ++i) {
    out += vocab_.word(i);
    out += ' ';
    if (binary) {
      out.append(reinterpret_cast<const char*>(p + i * D), static_cast<size_t>(D) * sizeof(float));
    } else {
      for (int64_t d = 0; d < D; ++d) fmt::format_to(std::back_inserter(out), "{:.6f} ", p[i * D + d]);
    }
    out += '\n';
  }
  return write_file_atomic(path, out);
}

namespace {

Status corrupt(const std::string& path, const std::string& what) {
  return io_error("{}: not a valid word2vec file: {}", path, what);
}

bool is_text_number_byte(unsigned char c) {
  return std::isalnum(c) || c == '.' || c == '-' || c == '+' || c == ' ' || c == '\t' || c == '\r';
}

}  // namespace

Result<Word2Vec> load_word2vec(const std::string& path) {
  Result<std::string> bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  return parse_word2vec(*bytes, path);
}

Result<Word2Vec> parse_word2vec(std::string_view s, const std::string& path) {
  size_t nl = s.find('\n');
  if (nl == std::string::npos) return corrupt(path, "no header line \"<words> <dimensions>\"");
  long long V = 0, D = 0;
  char extra = 0;
  if (std::sscanf(std::string(s.substr(0, nl)).c_str(), "%lld %lld %c", &V, &D, &extra) != 2 || V <= 0 || D <= 0 ||
      V > 100'000'000 || D > 100'000)
    return corrupt(path, fmt::format("bad header line '{}' (expected two positive counts)", s.substr(0, std::min<size_t>(nl, 60))));
  // Text or binary: text when the first entry's line is a word and dim fields made only of the
  // characters numbers are written with.
  size_t pos = nl + 1;
  bool binary = true;
  {
    size_t e = s.find('\n', pos);
    std::string line(s.substr(pos, e == std::string::npos ? std::string::npos : e - pos));
    std::vector<std::string> tok = whitespace_tokens(line);
    if (static_cast<long long>(tok.size()) == D + 1) {
      size_t first_end = line.find(tok[0]) + tok[0].size();
      binary = false;
      for (size_t i = first_end; i < line.size() && !binary; ++i)
        binary = !is_text_number_byte(static_cast<unsigned char>(line[i]));
    }
  }
  // Every entry needs at least a one-byte word, a separator and its numbers: refuse headers that
  // claim more than the file can hold before allocating for them.
  const double min_bytes = static_cast<double>(V) * (binary ? 2.0 + 4.0 * static_cast<double>(D) : 2.0 + 2.0 * static_cast<double>(D));
  if (min_bytes > static_cast<double>(s.size() - pos))
    return corrupt(path, fmt::format("the header claims {} words of {} numbers, more than the {} bytes that follow "
                                     "hold (truncated file?)", V, D, s.size() - pos));
  std::vector<std::string> words;
  std::vector<float> data;
  data.reserve(static_cast<size_t>(V * D));
  for (long long i = 0; i < V; ++i) {
    if (binary) {
      while (pos < s.size() && (s[pos] == '\n' || s[pos] == '\r')) ++pos;
      size_t e = s.find(' ', pos);
      if (e == std::string::npos || e == pos)
        return corrupt(path, fmt::format("entry {} of {}: no word (truncated file?)", i + 1, V));
      words.emplace_back(s.substr(pos, e - pos));
      pos = e + 1;
      if (s.size() - pos < static_cast<size_t>(D) * 4)
        return corrupt(path, fmt::format("entry {} ('{}'): {} bytes left, {} needed (truncated file?)", i + 1,
                                         words.back(), s.size() - pos, D * 4));
      for (long long d = 0; d < D; ++d) {
        float x;
        std::memcpy(&x, s.data() + pos + 4 * d, 4);
        if (!std::isfinite(x)) return corrupt(path, fmt::format("entry {} ('{}') holds a non-finite number", i + 1, words.back()));
        data.push_back(x);
      }
      pos += static_cast<size_t>(D) * 4;
    } else {
      size_t e = s.find('\n', pos);
      std::string line(s.substr(pos, e == std::string::npos ? std::string::npos : e - pos));
      pos = e == std::string::npos ? s.size() : e + 1;
      std::vector<std::string> tok = whitespace_tokens(line);
      if (static_cast<long long>(tok.size()) != D + 1)
        return corrupt(path, fmt::format("line {}: expected a word and {} numbers, got {} fields", i + 2, D, tok.size()));
      words.push_back(tok[0]);
      for (long long d = 1; d <= D; ++d) {
        char* end = nullptr;
        float x = std::strtof(tok[static_cast<size_t>(d)].c_str(), &end);
        if (*end != '\0' || !std::isfinite(x))
          return corrupt(path, fmt::format("line {}: '{}' is not a finite number", i + 2, tok[static_cast<size_t>(d)]));
        data.push_back(x);
      }
    }
  }
  std::vector<std::string> copy = words;
  std::sort(copy.begin(), copy.end());
  if (auto it = std::adjacent_find(copy.begin(), copy.end()); it != copy.end())
    return corrupt(path, fmt::format("word '{}' appears twice", *it));
  std::vector<int64_t> counts(words.size(), 1);
  return Word2Vec(WordCounts::from_words(std::move(words), std::move(counts)), from_vector(data, {V, D}));
}

}  // namespace tg
