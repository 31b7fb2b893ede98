// train_word2vec: skip-gram or CBOW word vectors with the original word2vec's flags (--train,
// --output, --cbow, --size, --window, --negative, --sample, --min_count, --iter, --alpha,
// --threads, --binary; its single-dash forms `-cbow 0 -binary 1` work too), evaluated on an
// analogy file (questions-words.txt format) and a similarity file (word, word, score: Spearman
// correlation). Beside the vectors: metrics.jsonl and report.html (loss curve, evaluation,
// nearest neighbours, a 2-D PCA map of frequent words).
//
//   ./build/train_word2vec --train data/kjv.txt --output runs/w2v/vectors.bin --binary --query lord,king
//
// The training itself is one call, tg::Word2Vec::train (sparse row updates, its own linear
// learning-rate decay); it is not a generic tg::train::Trainer loop.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <tapegrad/tapegrad.h>

namespace {

struct Options {
  std::string train = "data/kjv.txt", output = "runs/w2v/vectors.txt", analogies, similarity, query, device = "auto";
  bool cbow = false, binary = false, lowercase = true, overwrite = false;
  int64_t size = 100, window = 5, negative = 5, min_count = 5, iter = 5, batch = 256, threads = 0, sync_words = 50000,
          hot_sync_words = 5000;
  double sample = 1e-3, alpha = -1;
  uint64_t seed = 1;
};

void define_flags(tg::cli::Flags& f, Options& o) {
  f.add("train", &o.train, "training text (words separated by white space, sentences by line breaks; .gz accepted)").not_empty();
  f.add("output", &o.output, "where to write the vectors (word2vec format); metrics.jsonl and report.html go beside it").not_empty();
  f.add("overwrite", &o.overwrite, "replace an existing --output and the metrics.jsonl beside it");
  f.add("cbow", &o.cbow, "CBOW instead of skip-gram (the original's -cbow 1)");
  f.add("size", &o.size, "vector dimensions").range(1, 10000);
  f.add("window", &o.window, "largest distance between a word and its context").min(1);
  f.add("negative", &o.negative, "negative samples per positive pair").min(1);
  f.add("sample", &o.sample, "threshold for subsampling frequent words (0: off)").min(0);
  f.add("min_count", &o.min_count, "discard words seen fewer times").min(1);
  f.add("iter", &o.iter, "training epochs").min(1);
  f.add("alpha", &o.alpha, "starting learning rate (-1: 0.025 for skip-gram, 0.05 for CBOW)");
  f.add("threads", &o.threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
  f.add("device", &o.device, "auto or cpu: word2vec trains on the CPU (cuda is refused, with why)");
  f.add("binary", &o.binary, "write the binary format");
  f.add("lowercase", &o.lowercase, "lower-case the text and strip punctuation at word edges before counting");
  f.add("batch", &o.batch, "centre words per update (their windows read the same vectors; the threads share them)").min(1);
  f.add("seed", &o.seed, "random seed");
  f.add("sync_words", &o.sync_words, "under mpirun: words each process trains between summing the processes' changes to "
        "every vector").min(1000);
  f.add("hot_sync_words", &o.hot_sync_words, "under mpirun: words between sums of the frequent words' vectors (those a "
        "process meets at least once in that many words; 0: none)").min(0);
  f.add("analogies", &o.analogies, "analogy questions to evaluate (questions-words.txt format)");
  f.add("similarity", &o.similarity, "word pairs with human scores (word, word, score; tab, comma or space separated)");
  f.add("query", &o.query, "comma-separated words whose nearest neighbours to print (default in the report: 12 frequent words)");
  f.check([&o] {
    return o.alpha == -1 || o.alpha > 0 ? std::string()
                                        : fmt::format("--alpha: must be > 0 (or -1 for the default), got {}", o.alpha);
  });
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// ---- The report's word lists ----

bool has_letter(const std::string& w) {
  return std::any_of(w.begin(), w.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || (c & 0x80); });
}

// English function words (with the King James Bible's: thee, thou, unto, hath ...). They are the
// most frequent words of any English text and say little about its content; the report's default
// neighbour table and its map leave them out.
bool is_function_word(const std::string& w) {
  static const std::vector<std::string> kWords = {
      "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "art", "as", "at",
      "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "didst",
      "do", "does", "doest", "doth", "down", "each", "even", "ever", "every", "few", "for", "from", "further", "had", "hadst",
      "has", "hast", "hath", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i",
      "if", "in", "into", "is", "it", "its", "itself", "just", "let", "like", "may", "mayest", "me", "might", "mine", "more",
      "most", "much", "must", "my", "myself", "neither", "no", "nor", "not", "now", "o", "of", "off", "oh", "on", "once",
      "one", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "shall", "shalt", "she",
      "should", "shouldest", "so", "some", "such", "than", "that", "the", "thee", "their", "theirs", "them", "themselves",
      "then", "there", "thereof", "therefore", "these", "they", "thine", "this", "those", "thou", "though", "through",
      "thus", "thy", "thyself", "to", "too", "toward", "under", "unto", "until", "up", "upon", "us", "very", "was", "we",
      "were", "what", "when", "whence", "where", "wherefore", "whether", "which", "while", "whither", "who", "whom",
      "whose", "why", "will", "wilt", "with", "would", "ye", "yea", "yet", "you", "your", "yours", "yourself", "yourselves"};
  static const std::vector<std::string> sorted = [] {
    std::vector<std::string> v = kWords;
    std::sort(v.begin(), v.end());
    return v;
  }();
  std::string lower = w;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::binary_search(sorted.begin(), sorted.end(), lower);
}

// The n most frequent words, leaving out function words and tokens without a letter.
std::vector<std::string> frequent_words(const tg::WordCounts& vocab, int64_t n) {
  std::vector<std::string> out;
  for (int64_t id = 0; id < vocab.size() && static_cast<int64_t>(out.size()) < n; ++id)
    if (has_letter(vocab.word(id)) && !is_function_word(vocab.word(id))) out.push_back(vocab.word(id));
  return out;
}

// The PCA map: the words' vectors scaled to unit length (cosine is what word2vec's geometry
// means), projected on their two principal components.
std::vector<tg::report::Point> pca_points(const tg::Word2Vec& w2v, const std::vector<std::string>& words,
                                          const std::vector<std::string>& marked) {
  const int64_t dim = w2v.vectors().size(1);
  const std::vector<float> table = w2v.vectors().to_vector<float>();
  std::vector<std::vector<float>> rows;
  for (const std::string& w : words) {
    const int64_t id = w2v.vocab().id(w);
    std::vector<float> v(table.begin() + id * dim, table.begin() + (id + 1) * dim);
    double ss = 0;
    for (float x : v) ss += double(x) * x;
    if (ss > 0)
      for (float& x : v) x = static_cast<float>(x / std::sqrt(ss));
    rows.push_back(std::move(v));
  }
  const auto xy = tg::report::pca_2d(rows);
  std::vector<tg::report::Point> points;
  for (size_t i = 0; i < words.size(); ++i) {
    const bool mark = std::find(marked.begin(), marked.end(), words[i]) != marked.end();
    points.push_back({xy[i].first, xy[i].second, words[i], mark ? 1 : 0});
  }
  return points;
}

int run(int argc, char** argv) {
  Options o;
  tg::cli::Flags flags("train_word2vec", "train word vectors (skip-gram or CBOW with negative sampling) on a text file");
  define_flags(flags, o);
  flags.parse(argc, argv).or_throw();
  if (o.threads > 0) tg::set_num_threads(static_cast<int>(o.threads));
  tg::cli::training_device(o.device, "word2vec (its negative-sampling loss has no GPU kernel)");  // cuda: one line, exit 2

  // The run folder: the vectors' folder, which also gets metrics.jsonl and report.html. An earlier
  // run there is replaced only on request.
  namespace fs = std::filesystem;
  const fs::path out_path(o.output);
  const std::string dir = out_path.has_parent_path() ? out_path.parent_path().string() : ".";
  tg::make_dirs(dir).or_throw();
  if (fs::is_directory(out_path)) tg::cli::fail(fmt::format("--output {} is a folder; give the vectors' file name", o.output));
  if (fs::exists(out_path) && !o.overwrite)
    tg::cli::fail(fmt::format("{} exists (an earlier run's vectors); pass --overwrite to replace it, or another --output", o.output));
  tg::train::check_run_dir(dir, /*resume=*/false, o.overwrite, /*can_resume=*/false).or_throw();

  // Evaluation files first: a bad one fails now, not after training.
  std::vector<tg::text::Analogy> questions;
  std::vector<tg::text::ScoredPair> scored;
  if (!o.analogies.empty()) questions = tg::text::read_analogies(o.analogies, o.lowercase).value();
  if (!o.similarity.empty()) scored = tg::text::read_word_pairs(o.similarity, o.lowercase).value();

  // Words; sentences are lines (a window never crosses a line break).
  std::vector<std::string> tokens;
  std::vector<size_t> line_ends;
  {
    const std::string text = tg::read_text(o.train).value();
    for (std::string_view line : lines_of(text)) {
      for (std::string& w : tg::text::normalised_words(line, o.lowercase)) tokens.push_back(std::move(w));
      line_ends.push_back(tokens.size());
    }
  }
  tg::WordCounts vocab = tg::WordCounts::build(tokens, o.min_count);
  if (vocab.size() < 2)
    tg::cli::fail(fmt::format("{}: fewer than 2 words occur --min_count {} times ({} words in all)", o.train, o.min_count,
                              tokens.size()));
  std::vector<int64_t> corpus;
  corpus.reserve(tokens.size() + line_ends.size());
  size_t at = 0;
  for (size_t end : line_ends) {
    for (; at < end; ++at)
      if (int64_t id = vocab.id(tokens[at]); id >= 0) corpus.push_back(id);
    corpus.push_back(-1);
  }
  std::printf("train_word2vec: %s, %zu words, vocabulary %lld (min_count %lld), %s, %lld dims, window %lld, %lld negatives, "
              "%lld epochs\n",
              o.train.c_str(), tokens.size(), static_cast<long long>(vocab.size()), static_cast<long long>(o.min_count),
              o.cbow ? "CBOW" : "skip-gram", static_cast<long long>(o.size), static_cast<long long>(o.window),
              static_cast<long long>(o.negative), static_cast<long long>(o.iter));
  const size_t total_words = tokens.size();
  tokens.clear();
  tokens.shrink_to_fit();

  // Under mpirun each process trains on its part of the text (and only process 0 writes).
  tg::dist::Communicator& comm = tg::dist::world();
  const bool main_process = comm.is_main();
  const int64_t corpus_words = static_cast<int64_t>(corpus.size() - line_ends.size());
  if (comm.size() > 1) corpus = tg::dist::shard_sentences(corpus, comm.rank(), comm.size());
  if (o.overwrite && main_process) fs::remove(dir + "/metrics.jsonl");
  std::optional<tg::train::Metrics> metrics;
  if (main_process) metrics = tg::train::Metrics::open(dir + "/metrics.jsonl").value();
  tg::Word2Vec w2v(vocab, {.cbow = o.cbow, .dim = o.size, .window = o.window, .negative = o.negative, .sample = o.sample,
                           .epochs = o.iter, .alpha = o.alpha, .batch = o.batch, .seed = o.seed});
  std::optional<tg::dist::Word2VecChangeSum> change_sum;
  tg::Word2VecSync sync;
  if (comm.size() > 1) {
    // Every process must sum the same tables the same number of times: compare the settings first.
    const std::string mine = fmt::format("vocabulary {}, {} words, --size {}, --iter {}, --sync_words {}, --hot_sync_words {}, "
                                         "--cbow {}, --window {}, --negative {}, --batch {}, --sample {}, --alpha {}, --seed {}",
                                         vocab.size(), corpus_words, o.size, o.iter, o.sync_words, o.hot_sync_words, o.cbow,
                                         o.window, o.negative, o.batch, o.sample, o.alpha, o.seed);
    std::vector<std::string> all;
    if (const int r = comm.first_difference(mine, all, "comparing the processes' settings")) {
      tg::dist::mark_error_shared();
      tg::cli::fail(fmt::format("the processes were started differently: process {} has {}; process 0 {}", r,
                                all[static_cast<size_t>(r)], all[0]));
    }
    change_sum.emplace(comm, w2v, corpus_words, tg::dist::Word2VecSumOptions{o.sync_words, o.hot_sync_words});
    sync = change_sum->sync();
    const std::string hot = change_sum->hot_word_count() == 0
                                ? std::string()
                                : fmt::format(", the {} most frequent words' every {} words", change_sum->hot_word_count(),
                                              o.hot_sync_words);
    std::printf("%d processes, each on about %lld words; their changes summed %lld times%s\n", comm.size(),
                static_cast<long long>(corpus_words / comm.size()), static_cast<long long>(change_sum->full_syncs()),
                hot.c_str());
  }
  const int64_t total = static_cast<int64_t>(std::count_if(corpus.begin(), corpus.end(), [](int64_t x) { return x >= 0; })) * o.iter;
  std::optional<tg::train::Progress> progress;
  if (main_process) progress.emplace(total, "train", "words");
  std::vector<std::pair<double, double>> loss_curve;
  int64_t reports = 0;
  tg::train::Progress timer(1);
  try {
    w2v.train(corpus, [&](const tg::Word2VecProgress& p) {
      loss_curve.emplace_back(static_cast<double>(p.words_done), p.loss);
      if (!main_process) return;
      metrics->log("train", ++reports, {{"words_done", static_cast<double>(p.words_done)}, {"alpha", p.alpha}, {"loss", p.loss}})
          .or_throw();
      progress->update(p.words_done, fmt::format("alpha {:.5f}  loss {:.3f}", p.alpha, p.loss), p.words_done);
    }, sync);
  } catch (const tg::Error& e) {
    if (!w2v.diverged()) throw;
    if (progress) progress->finish("diverged");
    tg::cli::fail(fmt::format("{}; no vectors were written", e.what()), tg::train::kExitDiverged);
  }
  const double secs = std::max(timer.elapsed(), 1e-9);
  const int64_t trained = corpus_words * o.iter;  // by all processes
  const double words_per_s = static_cast<double>(trained) / secs;
  if (!main_process) return 0;
  progress->finish(loss_curve.empty() ? "" : fmt::format("loss {:.3f}", loss_curve.back().second));
  std::printf("trained %lld words in %.1f s: %.0f words/s\n", static_cast<long long>(trained), secs, words_per_s);
  w2v.save(o.output, o.binary).or_throw();
  std::printf("wrote %s (%s)\n", o.output.c_str(), o.binary ? "binary" : "text");

  // Evaluation.
  std::vector<std::vector<std::string>> results;
  std::vector<std::pair<std::string, double>> eval;
  if (!questions.empty()) {
    const tg::text::AnalogyResult r = tg::text::evaluate_analogies(w2v, questions);
    // Questions are asked among the 30,000 most frequent words (the original's rule); in a smaller
    // vocabulary that is every word.
    const bool large = vocab.size() > 30000;
    const std::string why = large ? "a word outside the 30,000 most frequent" : "a word not in the vocabulary";
    const std::string among = large ? "among the 30,000 most frequent" : "in the vocabulary";
    if (r.asked > 0) {
      const double acc = r.accuracy();
      std::printf("analogies: %.2f%% of %lld questions right (%lld skipped: %s)\n", 100 * acc,
                  static_cast<long long>(r.asked), static_cast<long long>(r.skipped), why.c_str());
      results.push_back({"analogy accuracy", fmt::format("{:.2f}%", 100 * acc),
                         fmt::format("{} of {} questions right; {} skipped ({})", r.right, r.asked, r.skipped, why)});
      eval.insert(eval.end(), {{"analogy_accuracy", acc}, {"analogy_questions", static_cast<double>(r.asked)}});
    } else {
      std::printf("analogies: none of the %zu questions in %s has all four words %s; no accuracy\n", questions.size(),
                  o.analogies.c_str(), among.c_str());
      results.push_back({"analogy accuracy", "-",
                         fmt::format("none of the {} questions has all four words {}", questions.size(), among)});
    }
    eval.emplace_back("analogy_skipped", static_cast<double>(r.skipped));
  }
  if (!scored.empty()) {
    const tg::text::WordPairResult r = tg::text::evaluate_word_pairs(w2v, scored);
    if (std::isfinite(r.spearman)) {
      std::printf("similarity: Spearman %.4f over %lld pairs (%lld with an unknown word skipped)\n", r.spearman,
                  static_cast<long long>(r.pairs), static_cast<long long>(r.skipped));
      results.push_back({"Spearman", fmt::format("{:.4f}", r.spearman),
                         fmt::format("{} pairs; {} skipped (a word not in the vocabulary)", r.pairs, r.skipped)});
      eval.emplace_back("spearman", r.spearman);
    } else {
      std::printf("similarity: only %lld of the %zu pairs in %s have both words in the vocabulary; no Spearman\n",
                  static_cast<long long>(r.pairs), scored.size(), o.similarity.c_str());
      results.push_back(
          {"Spearman", "-", fmt::format("only {} of {} pairs have both words in the vocabulary", r.pairs, scored.size())});
    }
    eval.insert(eval.end(), {{"spearman_pairs", static_cast<double>(r.pairs)}, {"spearman_skipped", static_cast<double>(r.skipped)}});
  }
  eval.emplace_back("words_per_second", words_per_s);
  metrics->log("eval", reports, eval).or_throw();

  // Nearest neighbours: the --query words (printed too), or 12 frequent words for the report.
  std::vector<std::string> asked;
  for (size_t i = 0; i < o.query.size();) {
    const size_t j = std::min(o.query.find(',', i), o.query.size());
    if (std::string w = tg::text::normalise_word(std::string_view(o.query).substr(i, j - i), o.lowercase); !w.empty())
      asked.push_back(w);
    i = j + 1;
  }
  const std::vector<std::string> shown = asked.empty() ? frequent_words(vocab, 12) : asked;
  const std::vector<std::string> mapped = frequent_words(vocab, 150);  // for the PCA map
  std::vector<std::vector<std::string>> neighbour_rows;
  for (const std::string& w : shown) {
    if (vocab.id(w) < 0) {
      std::printf("%s: not in the vocabulary\n", w.c_str());
      neighbour_rows.push_back({w, "(not in the vocabulary)"});
      continue;
    }
    std::string line;
    for (auto& [n, s] : w2v.most_similar(w, 10)) line += fmt::format("{}{} ({:.3f})", line.empty() ? "" : ", ", n, s);
    if (!asked.empty()) std::printf("%s: %s\n", w.c_str(), line.c_str());
    neighbour_rows.push_back({w, line});
  }

  // The report beside the vectors.
  tg::report::Html html("train_word2vec");
  html.paragraph(fmt::format("{}: {} words, vocabulary {} (min_count {}); {}, {} dimensions, window {}, {} negatives, {} epochs; "
                             "{} words trained in {:.1f} s ({:.0f} words/s). Vectors: {} ({}).",
                             o.train, total_words, vocab.size(), o.min_count, o.cbow ? "CBOW" : "skip-gram", o.size, o.window,
                             o.negative, o.iter, trained, secs, words_per_s, o.output, o.binary ? "binary" : "text"));
  if (!loss_curve.empty())
    html.line_chart("training loss", {{"loss per pair", loss_curve}}, {.x_label = "words processed", .y_label = "mean loss per pair"});
  if (!results.empty()) {
    html.heading("Evaluation");
    html.table({"evaluation", "value", "note"}, results);
  }
  html.heading("Nearest neighbours");
  html.paragraph(asked.empty() ? "By cosine similarity, for the 12 most frequent words that are not English function words; --query "
                                 "picks others."
                               : "By cosine similarity, for the --query words.");
  html.table({"word", "10 nearest (cosine)"}, neighbour_rows);
  if (mapped.size() >= 3) {
    html.heading("A map of frequent words");
    html.paragraph(fmt::format("The {} most frequent words, English function words left out (they would crowd the middle), "
                               "as unit vectors projected on their two principal components: words "
                               "used alike lie close. Highlighted: the words of the table above.",
                               mapped.size()));
    html.scatter("word vectors, PCA", pca_points(w2v, mapped, shown), {.x_label = "component 1", .y_label = "component 2"});
  }
  html.write(dir + "/report.html").or_throw();
  std::printf("wrote %s/report.html and %s\n", dir.c_str(), metrics->path().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] { return run(argc, argv); });
}
