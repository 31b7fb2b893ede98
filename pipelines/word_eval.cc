#include "pipelines/word_eval.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "graph/error.h"
#include "text/readers.h"

namespace tg::text {

namespace {
// Every line as it is (text/readers.h: \r, a byte-order mark and .gz handled, UTF-8 checked), so
// that line i + 1 of the file is element i.
constexpr LineOptions kEveryLine{.trim = false, .skip_empty = false};
}  // namespace

std::string normalise_word(std::string_view w, bool lowercase) {
  if (!lowercase) return std::string(w);
  size_t b = 0, e = w.size();
  while (b < e && std::ispunct(static_cast<unsigned char>(w[b]))) ++b;
  while (e > b && std::ispunct(static_cast<unsigned char>(w[e - 1]))) --e;
  std::string out(w.substr(b, e - b));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> normalised_words(std::string_view line, bool lowercase) {
  std::vector<std::string> out;
  for (const std::string& t : whitespace_tokens(std::string(line)))
    if (std::string w = normalise_word(t, lowercase); !w.empty()) out.push_back(std::move(w));
  return out;
}

Result<std::vector<Analogy>> read_analogies(const std::string& path, bool lowercase) {
  Result<std::vector<std::string>> lines = read_lines(path, kEveryLine);
  if (!lines.ok()) return lines.status();
  std::vector<Analogy> out;
  for (size_t i = 0; i < lines->size(); ++i) {
    const std::string& line = (*lines)[i];
    std::vector<std::string> w = normalised_words(line, lowercase);
    if (w.empty() || line.front() == ':') continue;  // a blank line or a section header
    if (w.size() != 4)
      return io_error("{}: line {}: expected four words (a b c d: a is to b as c is to d), found {}", path, i + 1, w.size());
    out.push_back({std::move(w[0]), std::move(w[1]), std::move(w[2]), std::move(w[3])});
  }
  if (out.empty()) return io_error("{}: no analogy questions in it (lines of four words, as questions-words.txt)", path);
  return out;
}

Result<std::vector<ScoredPair>> read_word_pairs(const std::string& path, bool lowercase) {
  Result<std::vector<std::string>> lines = read_lines(path, kEveryLine);
  if (!lines.ok()) return lines.status();
  std::vector<ScoredPair> out;
  for (const std::string& line : *lines) {
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string> f;
    auto sep = [](char c) { return c == '\t' || c == ',' || c == ' '; };
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && sep(line[i])) ++i;
      size_t j = i;
      while (j < line.size() && !sep(line[j])) ++j;
      if (j > i) f.emplace_back(line.substr(i, j - i));
      i = j;
    }
    if (f.size() < 3) continue;
    char* end = nullptr;
    const double score = std::strtod(f[2].c_str(), &end);
    if (*end != '\0' || !std::isfinite(score)) continue;  // a header line
    out.push_back({normalise_word(f[0], lowercase), normalise_word(f[1], lowercase), score});
  }
  if (out.empty())
    return io_error("{}: no word pair with a score in it (expected lines 'word word score', tab, comma or space separated)",
                    path);
  return out;
}

AnalogyResult evaluate_analogies(const Word2Vec& vectors, const std::vector<Analogy>& questions, int64_t restrict_vocab) {
  TG_CHECK(restrict_vocab > 0, "evaluate_analogies", "restrict_vocab must be > 0, got {}", restrict_vocab);
  AnalogyResult r;
  const int64_t limit = std::min(restrict_vocab, vectors.vocab().size());
  auto frequent = [&](const std::string& w) {
    const int64_t id = vectors.vocab().id(w);
    return id >= 0 && id < limit;
  };
  for (const Analogy& q : questions) {
    if (!frequent(q.a) || !frequent(q.b) || !frequent(q.c) || !frequent(q.d)) {
      ++r.skipped;
      continue;
    }
    const auto best = vectors.most_similar({q.b, q.c}, {q.a}, 1);
    r.right += !best.empty() && best[0].first == q.d;
    ++r.asked;
  }
  return r;
}

namespace {
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = (static_cast<double>(i) + static_cast<double>(j)) / 2.0;
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  TG_CHECK(x.size() == y.size(), "spearman", "x has {} values, y {}", x.size(), y.size());
  if (x.size() < 2) return NAN;
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double n = static_cast<double>(rx.size());
  const double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / n, my = std::accumulate(ry.begin(), ry.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : NAN;
}

WordPairResult evaluate_word_pairs(const Word2Vec& vectors, const std::vector<ScoredPair>& pairs) {
  WordPairResult r;
  std::vector<double> human, model;
  for (const ScoredPair& p : pairs) {
    if (vectors.vocab().id(p.a) < 0 || vectors.vocab().id(p.b) < 0) {
      ++r.skipped;
      continue;
    }
    human.push_back(p.score);
    model.push_back(vectors.similarity(p.a, p.b));
  }
  r.pairs = static_cast<int64_t>(human.size());
  r.spearman = spearman(human, model);
  return r;
}

}  // namespace tg::text
