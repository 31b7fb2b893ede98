// train_word2vec: skip-gram or CBOW word vectors, with the original word2vec's flags in Abseil
// form (--train, --output, --cbow, --size, --window, --negative, --sample, --min_count, --iter,
// --alpha, --threads, --binary), evaluation on an analogy file (questions-words.txt format) and a
// similarity file (word, word, score: Spearman correlation), and --query to print neighbours.
//
//   ./build/train_word2vec --train data/kjv.txt --output runs/w2v/vectors.bin --binary --query lord,king
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include "examples/common.h"
#include "examples/report.h"
#include "tapegrad.h"

ABSL_FLAG(std::string, train, "data/kjv.txt", "training text (words separated by white space; .gz accepted)");
ABSL_FLAG(std::string, output, "runs/w2v/vectors.txt", "where to write the vectors (word2vec format)");
ABSL_FLAG(bool, cbow, false, "CBOW instead of skip-gram (the original's -cbow 1)");
ABSL_FLAG(int64_t, size, 100, "vector dimensions");
ABSL_FLAG(int64_t, window, 5, "largest distance between a word and its context");
ABSL_FLAG(int64_t, negative, 5, "negative samples per positive pair");
ABSL_FLAG(double, sample, 1e-3, "threshold for subsampling frequent words (0: off)");
ABSL_FLAG(int64_t, min_count, 5, "discard words seen fewer times");
ABSL_FLAG(int64_t, iter, 5, "training epochs");
ABSL_FLAG(double, alpha, -1, "starting learning rate (default 0.025 skip-gram, 0.05 CBOW)");
ABSL_FLAG(int32_t, threads, 0, "threads (0: TG_NUM_THREADS or all cores)");
ABSL_FLAG(bool, binary, false, "write the binary format");
ABSL_FLAG(bool, lowercase, true, "lower-case the text and strip punctuation at word edges before counting");
ABSL_FLAG(int64_t, batch, 1024, "(centre, context) pairs per update");
ABSL_FLAG(uint64_t, seed, 1, "random seed");
ABSL_FLAG(std::string, analogies, "", "analogy questions to evaluate (questions-words.txt format)");
ABSL_FLAG(std::string, similarity, "", "word pairs with human scores (word, word, score; tab, comma or space separated)");
ABSL_FLAG(std::string, query, "", "comma-separated words whose nearest neighbours to print");

namespace ex = tg::examples;

namespace {

std::string normalise(const std::string& w, bool lowercase) {
  if (!lowercase) return w;
  size_t b = 0, e = w.size();
  while (b < e && std::ispunct(static_cast<unsigned char>(w[b]))) ++b;
  while (e > b && std::ispunct(static_cast<unsigned char>(w[e - 1]))) --e;
  std::string out = w.substr(b, e - b);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Analogy accuracy over questions whose four words are all known (as the original's compute-accuracy,
// restricted to the 30,000 most frequent words).
std::pair<double, int64_t> analogy_accuracy(const tg::Word2Vec& w2v, const std::string& path, int64_t* skipped) {
  std::string text = ex::or_fail(ex::read_text(path));
  int64_t right = 0, asked = 0;
  *skipped = 0;
  const int64_t limit = std::min<int64_t>(30000, w2v.vocab().size());
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == ':') continue;
    std::vector<std::string> w;
    for (absl::string_view t : absl::StrSplit(line, ' ', absl::SkipWhitespace())) w.push_back(normalise(std::string(t), true));
    if (w.size() != 4) ex::fail(fmt::format("{}: line '{}' does not hold four words", path, std::string(line)));
    bool known = true;
    for (const auto& x : w) {
      int64_t id = w2v.vocab().id(x);
      known = known && id >= 0 && id < limit;
    }
    if (!known) {
      ++*skipped;
      continue;
    }
    auto best = w2v.most_similar({w[1], w[2]}, {w[0]}, 1);
    right += !best.empty() && best[0].first == w[3];
    ++asked;
  }
  return {asked ? static_cast<double>(right) / static_cast<double>(asked) : NAN, asked};
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = (static_cast<double>(i) + static_cast<double>(j)) / 2.0;  // ties: mean rank
    i = j + 1;
  }
  return r;
}

// Spearman correlation between the human scores and the cosine similarities of known pairs.
std::pair<double, int64_t> spearman(const tg::Word2Vec& w2v, const std::string& path, int64_t* skipped) {
  std::string text = ex::or_fail(ex::read_text(path));
  std::vector<double> human, model;
  *skipped = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> f;
    for (absl::string_view t : absl::StrSplit(line, absl::ByAnyChar("\t, "), absl::SkipWhitespace())) f.emplace_back(t);
    if (f.size() < 3) continue;
    char* end = nullptr;
    double score = std::strtod(f[2].c_str(), &end);
    if (*end != '\0') continue;  // a header line
    std::string a = normalise(f[0], true), b = normalise(f[1], true);
    if (w2v.vocab().id(a) < 0 || w2v.vocab().id(b) < 0) {
      ++*skipped;
      continue;
    }
    human.push_back(score);
    model.push_back(w2v.similarity(a, b));
  }
  if (human.size() < 2) return {NAN, static_cast<int64_t>(human.size())};
  std::vector<double> rh = ranks(human), rm = ranks(model);
  const double n = static_cast<double>(rh.size());
  double mh = std::accumulate(rh.begin(), rh.end(), 0.0) / n, mm = std::accumulate(rm.begin(), rm.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rh.size(); ++i) {
    sxy += (rh[i] - mh) * (rm[i] - mm);
    sxx += (rh[i] - mh) * (rh[i] - mh);
    syy += (rm[i] - mm) * (rm[i] - mm);
  }
  return {sxy / std::sqrt(sxx * syy), static_cast<int64_t>(rh.size())};
}

}  // namespace

int main(int argc, char** argv) {
  ex::set_program_name(argv[0]);
  absl::SetProgramUsageMessage("train word vectors (skip-gram or CBOW with negative sampling): train_word2vec --train FILE");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_threads) > 0) tg::set_num_threads(absl::GetFlag(FLAGS_threads));
  if (absl::GetFlag(FLAGS_size) < 1 || absl::GetFlag(FLAGS_window) < 1 || absl::GetFlag(FLAGS_negative) < 1 ||
      absl::GetFlag(FLAGS_iter) < 1 || absl::GetFlag(FLAGS_min_count) < 1 || absl::GetFlag(FLAGS_sample) < 0 ||
      absl::GetFlag(FLAGS_batch) < 1)
    ex::fail("--size, --window, --negative, --iter, --min_count and --batch must be >= 1, --sample >= 0");
  const std::string train = absl::GetFlag(FLAGS_train), output = absl::GetFlag(FLAGS_output);
  std::string text = ex::or_fail(ex::read_text(train));
  const bool lower = absl::GetFlag(FLAGS_lowercase);

  // Words (sentences are lines: a window never crosses a line break).
  std::vector<std::string> tokens;
  std::vector<size_t> line_ends;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    for (absl::string_view t : absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipWhitespace())) {
      std::string w = normalise(std::string(t), lower);
      if (!w.empty()) tokens.push_back(std::move(w));
    }
    line_ends.push_back(tokens.size());
  }
  tg::Vocabulary vocab = tg::Vocabulary::build(tokens, absl::GetFlag(FLAGS_min_count));
  if (vocab.size() < 2) ex::fail(fmt::format("{}: fewer than 2 words occur --min_count {} times", train, absl::GetFlag(FLAGS_min_count)));
  std::vector<int64_t> corpus;
  corpus.reserve(tokens.size() + line_ends.size());
  size_t at = 0;
  for (size_t end : line_ends) {
    for (; at < end; ++at)
      if (int64_t id = vocab.id(tokens[at]); id >= 0) corpus.push_back(id);
    corpus.push_back(-1);
  }
  std::printf("train_word2vec: %s, %zu words, vocabulary %lld (min_count %lld), %s, %lld dims, window %lld, %lld negatives, %lld epochs\n",
              train.c_str(), tokens.size(), static_cast<long long>(vocab.size()),
              static_cast<long long>(absl::GetFlag(FLAGS_min_count)), absl::GetFlag(FLAGS_cbow) ? "CBOW" : "skip-gram",
              static_cast<long long>(absl::GetFlag(FLAGS_size)), static_cast<long long>(absl::GetFlag(FLAGS_window)),
              static_cast<long long>(absl::GetFlag(FLAGS_negative)), static_cast<long long>(absl::GetFlag(FLAGS_iter)));
  tokens.clear();
  tokens.shrink_to_fit();

  tg::Word2Vec w2v(vocab, {.cbow = absl::GetFlag(FLAGS_cbow), .dim = absl::GetFlag(FLAGS_size),
                           .window = absl::GetFlag(FLAGS_window), .negative = absl::GetFlag(FLAGS_negative),
                           .sample = absl::GetFlag(FLAGS_sample), .epochs = absl::GetFlag(FLAGS_iter),
                           .alpha = absl::GetFlag(FLAGS_alpha), .batch = absl::GetFlag(FLAGS_batch),
                           .seed = absl::GetFlag(FLAGS_seed)});
  const int64_t total = static_cast<int64_t>(corpus.size() - line_ends.size()) * absl::GetFlag(FLAGS_iter);
  ex::Progress progress(total);
  std::vector<std::pair<double, double>> loss_curve;
  w2v.train(corpus, [&](const tg::Word2VecProgress& p) {
    loss_curve.emplace_back(static_cast<double>(p.words_done), p.loss);
    progress.update(p.words_done, fmt::format("alpha {:.5f}  loss {:.3f}  {:.0f} words/s", p.alpha, p.loss,
                                              static_cast<double>(p.words_done) / std::max(progress.elapsed(), 1e-9)));
  });
  const double secs = progress.elapsed();
  progress.finish("");
  std::printf("trained %lld words in %.1f s: %.0f words/s\n", static_cast<long long>(w2v.words_trained()), secs,
              static_cast<double>(w2v.words_trained()) / secs);
  if (auto slash = output.find_last_of('/'); slash != std::string::npos) ex::or_fail(ex::make_dirs(output.substr(0, slash)));
  ex::or_fail(w2v.save(output, absl::GetFlag(FLAGS_binary)));
  std::printf("wrote %s (%s)\n", output.c_str(), absl::GetFlag(FLAGS_binary) ? "binary" : "text");

  std::vector<std::vector<std::string>> results;
  if (!absl::GetFlag(FLAGS_analogies).empty()) {
    int64_t skipped = 0;
    auto [acc, n] = analogy_accuracy(w2v, absl::GetFlag(FLAGS_analogies), &skipped);
    std::printf("analogies: %.2f%% of %lld questions right (%lld skipped: a word outside the 30,000 most frequent)\n", 100 * acc,
                static_cast<long long>(n), static_cast<long long>(skipped));
    results.push_back({"analogy accuracy", fmt::format("{:.2f}%", 100 * acc), fmt::format("{} asked, {} skipped", n, skipped)});
  }
  if (!absl::GetFlag(FLAGS_similarity).empty()) {
    int64_t skipped = 0;
    auto [rho, n] = spearman(w2v, absl::GetFlag(FLAGS_similarity), &skipped);
    std::printf("similarity: Spearman %.4f over %lld pairs (%lld with an unknown word skipped)\n", rho, static_cast<long long>(n),
                static_cast<long long>(skipped));
    results.push_back({"Spearman", fmt::format("{:.4f}", rho), fmt::format("{} pairs, {} skipped", n, skipped)});
  }
  std::string neighbours;
  for (absl::string_view q : absl::StrSplit(absl::GetFlag(FLAGS_query), ',', absl::SkipEmpty())) {
    std::string w = normalise(std::string(q), lower);
    if (vocab.id(w) < 0) {
      std::printf("%s: not in the vocabulary\n", w.c_str());
      continue;
    }
    std::string line = w + ":";
    for (auto& [n, s] : w2v.most_similar(w, 10)) line += fmt::format(" {} ({:.3f})", n, s);
    std::printf("%s\n", line.c_str());
    neighbours += line + "\n";
  }
  // Report beside the vectors.
  std::string dir = output.find('/') == std::string::npos ? "." : output.substr(0, output.find_last_of('/'));
  tg::report::Html html("train_word2vec");
  html.paragraph(fmt::format("{}: vocabulary {}, {} words trained in {:.1f} s ({:.0f} words/s).", train, vocab.size(),
                             w2v.words_trained(), secs, static_cast<double>(w2v.words_trained()) / secs));
  html.line_chart("loss per pair", "words processed", {{"loss", loss_curve}});
  if (!results.empty()) html.table({"evaluation", "value", "note"}, results);
  if (!neighbours.empty()) html.preformatted(neighbours);
  ex::or_fail(html.write(dir + "/report.html"));
  return 0;
}
