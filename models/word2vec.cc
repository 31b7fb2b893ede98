#include "models/word2vec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <numeric>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <fmt/format.h>

#include "graph/factory.h"
#include "graph/node.h"
#include "graph/random.h"
#include "io/file.h"
#include "ops/ops.h"

namespace tg {

// ---- Vocabulary ----

Vocabulary Vocabulary::build(const std::vector<std::string>& tokens, int64_t min_count) {
  TG_CHECK(min_count >= 1, "Vocabulary::build", "min_count must be >= 1, got {}", min_count);
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

Vocabulary Vocabulary::from_words(std::vector<std::string> words, std::vector<int64_t> counts) {
  TG_CHECK(words.size() == counts.size(), "Vocabulary", "{} words but {} counts", words.size(), counts.size());
  Vocabulary v;
  v.words_ = std::move(words);
  v.counts_ = std::move(counts);
  for (size_t i = 0; i < v.words_.size(); ++i) {
    TG_CHECK(v.index_.emplace(v.words_[i], static_cast<int64_t>(i)).second, "Vocabulary",
             "word '{}' appears twice", v.words_[i]);
    v.total_ += v.counts_[i];
  }
  return v;
}

int64_t Vocabulary::id(const std::string& word) const {
  auto it = index_.find(word);
  return it == index_.end() ? -1 : it->second;
}

std::vector<int64_t> Vocabulary::encode(const std::vector<std::string>& tokens) const {
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

Word2Vec::Word2Vec(Vocabulary vocab, const Word2VecOptions& o) : vocab_(std::move(vocab)), opts_(o) {
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

Word2Vec::Word2Vec(Vocabulary vocab, Tensor vectors) : vocab_(std::move(vocab)), in_(std::move(vectors)) {
  TG_CHECK(in_.dim() == 2 && in_.size(0) == vocab_.size(), "Word2Vec", "vectors of shape {} for {} words",
           in_.shape(), vocab_.size());
  opts_.dim = in_.size(1);
}

void Word2Vec::train(const std::vector<int64_t>& corpus, const std::function<void(const Word2VecProgress&)>& on_progress) {
  TG_CHECK(out_.defined(), "Word2Vec::train", "this model holds loaded vectors only; build a Word2Vec from a "
           "vocabulary and options to train");
  const int64_t V = vocab_.size(), D = opts_.dim, K = opts_.negative, W = opts_.window;
  TG_CHECK(V >= 2, "Word2Vec::train", "needs at least 2 words in the vocabulary for negative sampling, got {}", V);
  for (int64_t id : corpus)
    TG_CHECK(id >= -1 && id < V, "Word2Vec::train", "corpus id {} is outside the vocabulary [0, {})", id, V);
  Generator gen(opts_.seed + 1);

  // Noise distribution: unigram counts to the power 0.75, as a table sampled uniformly.
  std::vector<double> pw(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) pw[static_cast<size_t>(i)] = std::pow(static_cast<double>(vocab_.count(i)), 0.75);
  const double pw_total = std::accumulate(pw.begin(), pw.end(), 0.0);
  const int64_t table_size = std::clamp<int64_t>(V * 100, 1'000'000, 100'000'000);
  std::vector<int32_t> table(static_cast<size_t>(table_size));
  {
    int64_t w = 0;
    double cum = pw[0] / pw_total;
    for (int64_t a = 0; a < table_size; ++a) {
      table[static_cast<size_t>(a)] = static_cast<int32_t>(w);
      if (static_cast<double>(a) / static_cast<double>(table_size) > cum && w < V - 1) cum += pw[static_cast<size_t>(++w)] / pw_total;
    }
  }
  // Subsampling: keep word w with probability (sqrt(f / (s N)) + 1) (s N) / f.
  std::vector<double> keep(static_cast<size_t>(V), 1.0);
  if (opts_.sample > 0) {
    const double sn = opts_.sample * static_cast<double>(vocab_.total());
    for (int64_t i = 0; i < V; ++i) {
      double f = static_cast<double>(vocab_.count(i));
      keep[static_cast<size_t>(i)] = std::min(1.0, (std::sqrt(f / sn) + 1) * sn / f);
    }
  }

  const int64_t corpus_words = std::count_if(corpus.begin(), corpus.end(), [](int64_t x) { return x >= 0; });
  const int64_t total = corpus_words * opts_.epochs;
  const int64_t B = opts_.batch, C = 1 + K, ctx_slots = 2 * W;
  std::vector<int64_t> in_ids, out_ids;
  std::vector<float> ctx_w, ctx_n;  // CBOW: each slot's weight in the mean (1/cnt) and cnt
  in_ids.reserve(static_cast<size_t>(B * (opts_.cbow ? ctx_slots : 1)));
  out_ids.reserve(static_cast<size_t>(B * C));
  double loss_sum = 0, alpha = opts_.alpha;
  int64_t pairs_since = 0, words_done = 0, last_report = 0;

  auto draw_negatives = [&](int64_t positive) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t neg = table[static_cast<size_t>(gen.next_u64() % static_cast<uint64_t>(table_size))];
      for (int tries = 0; neg == positive && tries < 10; ++tries)
        neg = table[static_cast<size_t>(gen.next_u64() % static_cast<uint64_t>(table_size))];
      out_ids.push_back(neg);
    }
  };

  // One step over the pairs collected so far: lookups, fused loss, backward, sparse updates.
  auto step = [&]() {
    const int64_t n = static_cast<int64_t>(out_ids.size()) / C;
    if (n == 0) return;
    Tensor out_idx = from_vector(out_ids, {n * C});
    Tensor in_idx = from_vector(in_ids, {static_cast<int64_t>(in_ids.size())});
    Tensor v = index_select(out_, 0, out_idx).reshape({n, C, D}).set_requires_grad();
    Tensor rows = index_select(in_, 0, in_idx).set_requires_grad();
    Tensor u = rows;
    if (opts_.cbow) {  // the input is the mean of the context words' vectors
      Tensor weights = from_vector(ctx_w, {n, ctx_slots, 1});
      u = sum(rows.reshape({n, ctx_slots, D}) * weights, {1});
    }
    Tensor loss = negative_sampling_loss(u, v, Reduction::Sum);
    loss.backward();
    loss_sum += loss.item();
    pairs_since += n;
    {
      NoGradGuard ng;
      // CBOW, as the original: every context word receives the full gradient of the mean (not
      // the 1/cnt share the chain rule gives), so context vectors learn at the same rate as in
      // skip-gram; skip-gram rows get their plain gradient.
      Tensor g_in = opts_.cbow ? rows.grad() * from_vector(ctx_n, {n * ctx_slots, 1}) : rows.grad();
      index_add_(in_, 0, in_idx, g_in, -alpha);
      index_add_(out_, 0, out_idx, v.grad().reshape({n * C, D}), -alpha);
    }
    in_ids.clear();
    out_ids.clear();
    ctx_w.clear();
    ctx_n.clear();
  };

  std::vector<int64_t> sentence;
  constexpr int64_t kMaxSentence = 1000;  // as the original: long lines are cut into sentences
  for (int64_t epoch = 0; epoch < opts_.epochs; ++epoch) {
    size_t pos = 0;
    while (pos < corpus.size()) {
      // Next sentence (up to a -1 or kMaxSentence words), subsampled.
      sentence.clear();
      int64_t read = 0;
      for (; pos < corpus.size() && corpus[pos] >= 0 && read < kMaxSentence; ++pos, ++read) {
        int64_t w = corpus[pos];
        if (keep[static_cast<size_t>(w)] >= 1.0 || gen.uniform() < keep[static_cast<size_t>(w)]) sentence.push_back(w);
      }
      if (pos < corpus.size() && corpus[pos] < 0) ++pos;  // the separator
      const int64_t sentence_start = words_done;
      words_done += read;
      const int64_t L = static_cast<int64_t>(sentence.size());
      for (int64_t i = 0; i < L; ++i) {
        // Linear decay, updated as the words go by (not only between sentences).
        const int64_t done = sentence_start + (read * i) / std::max<int64_t>(L, 1);
        alpha = opts_.alpha * std::max(1e-4, 1.0 - static_cast<double>(done) / static_cast<double>(total + 1));
        const int64_t ew = W - static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(W));  // shrunk window
        const int64_t lo = std::max<int64_t>(0, i - ew), hi = std::min<int64_t>(L - 1, i + ew);
        const int64_t centre = sentence[static_cast<size_t>(i)];
        if (opts_.cbow) {
          int64_t cnt = hi - lo;  // context words (i itself excluded)
          if (cnt == 0) continue;
          for (int64_t j = lo, slot = 0; slot < ctx_slots; ++slot) {
            if (j == i) ++j;
            bool real = j <= hi;
            in_ids.push_back(real ? sentence[static_cast<size_t>(j)] : 0);
            ctx_w.push_back(real ? 1.0f / static_cast<float>(cnt) : 0.0f);
            ctx_n.push_back(real ? static_cast<float>(cnt) : 0.0f);
            if (real) ++j;
          }
          out_ids.push_back(centre);
          draw_negatives(centre);
          if (static_cast<int64_t>(out_ids.size()) >= B * C) step();
        } else {
          for (int64_t j = lo; j <= hi; ++j) {
            if (j == i) continue;
            in_ids.push_back(centre);
            out_ids.push_back(sentence[static_cast<size_t>(j)]);
            draw_negatives(sentence[static_cast<size_t>(j)]);
            if (static_cast<int64_t>(out_ids.size()) >= B * C) step();
          }
        }
      }
      if (on_progress && words_done - last_report >= 10000) {
        on_progress({words_done, total, alpha, pairs_since ? loss_sum / static_cast<double>(pairs_since) : 0.0});
        last_report = words_done;
        loss_sum = 0;
        pairs_since = 0;
      }
    }
  }
  step();
  words_trained_ += words_done;
  if (on_progress) on_progress({words_done, total, alpha, pairs_since ? loss_sum / static_cast<double>(pairs_since) : 0.0});
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

static int64_t known_id(const Vocabulary& v, const std::string& w, const char* who) {
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
  const std::string& s = *bytes;
  size_t nl = s.find('\n');
  if (nl == std::string::npos) return corrupt(path, "no header line \"<words> <dimensions>\"");
  long long V = 0, D = 0;
  char extra = 0;
  if (std::sscanf(s.substr(0, nl).c_str(), "%lld %lld %c", &V, &D, &extra) != 2 || V <= 0 || D <= 0 ||
      V > 100'000'000 || D > 100'000)
    return corrupt(path, fmt::format("bad header line '{}' (expected two positive counts)", s.substr(0, std::min<size_t>(nl, 60))));
  // Text or binary: text when the first entry's line is a word and dim fields made only of the
  // characters numbers are written with.
  size_t pos = nl + 1;
  bool binary = true;
  {
    size_t e = s.find('\n', pos);
    std::string line = s.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
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
      words.push_back(s.substr(pos, e - pos));
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
      std::string line = s.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
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
  return Word2Vec(Vocabulary::from_words(std::move(words), std::move(counts)), from_vector(data, {V, D}));
}

}  // namespace tg
