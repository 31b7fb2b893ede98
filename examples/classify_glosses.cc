// classify_glosses: which part of speech does a dictionary definition define? WordNet 3.0's
// glosses (Debian's wordnet-base, installed by `./tg.sh data`) labelled noun / verb / adjective /
// adverb by the file they come from, split by synset into train / validation / test, classified
// three ways with the same linear head:
//   (a) word2vec: skip-gram vectors trained here on the training glosses, averaged over a gloss;
//   (b) frozen MiniLM: all-MiniLM-L6-v2's sentence embeddings (`./tg.sh models`), not trained;
//   (c) fine-tuned MiniLM: the same model with every weight trained through the head.
// Writes OUT/metrics.jsonl and OUT/report.html (curves and the three test accuracies).
//
//   ./build/classify_glosses --model data/models/all-MiniLM-L6-v2 --out runs/glosses
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <tapegrad/tapegrad.h>

namespace {

using tg::Tensor;
namespace fs = std::filesystem;

constexpr int64_t kNumClasses = 4;

struct Options {
  std::string model = "data/models/all-MiniLM-L6-v2", wordnet = "/usr/share/wordnet", out = "runs/glosses", precision = "fp32";
  int64_t train = 24000, valid = 1000, test = 0, batch = 32, epochs = 1, threads = 0, eval_every = 100;
  double lr = 5e-5, minutes = 25;
  uint64_t seed = 1;
  bool overwrite = false;
};

struct Example {
  std::string text;
  int64_t label;
};
struct Data {
  std::vector<Example> train, valid, test;
  std::vector<std::string> all_train_text;  // every training gloss (word2vec's corpus)
};

// WordNet's data.{noun,verb,adj,adv}: "offset lex_file ss_type ... | gloss; \"example\"". Each line
// is one synset, so a split by line is a split by synset; the split comes from a hash of the
// synset's offset and part of speech (10% validation, 10% test), the subsets from --seed.
Data load(const Options& o) {
  Data d;
  const char* files[] = {"data.noun", "data.verb", "data.adj", "data.adv"};
  std::vector<Example> train, valid, test;
  for (int64_t label = 0; label < kNumClasses; ++label) {
    const std::string path = o.wordnet + "/" + files[label];
    const std::vector<std::string> lines = tg::text::read_lines(path, {.trim = false, .skip_empty = true}).value();
    for (const std::string& line : lines) {
      if (line.rfind("  ", 0) == 0) continue;  // the licence
      const size_t bar = line.find(" | ");
      const size_t space = line.find(' ');
      if (bar == std::string::npos || space == std::string::npos)
        tg::cli::fail(fmt::format("{}: a line without ' | ' (not a WordNet data file?): {}", path, line.substr(0, 60)));
      std::string gloss = line.substr(bar + 3);
      while (!gloss.empty() && gloss.back() == ' ') gloss.pop_back();
      const uint64_t h = std::stoull(tg::fingerprint(fmt::format("{} {}", files[label], line.substr(0, space))), nullptr, 16);
      (h % 10 == 0 ? test : h % 10 == 1 ? valid : train).push_back({gloss, label});
    }
  }
  for (const Example& e : train) d.all_train_text.push_back(e.text);
  auto take = [&](std::vector<Example>& v, int64_t n, uint64_t salt) {
    std::mt19937_64 rng(o.seed * 1000 + salt);
    std::vector<Example> out = v;
    std::shuffle(out.begin(), out.end(), rng);
    if (n > 0 && n < static_cast<int64_t>(out.size())) out.resize(static_cast<size_t>(n));
    return out;
  };
  d.train = take(train, o.train, 11);
  d.valid = take(valid, o.valid, 12);
  d.test = take(test, o.test, 13);
  return d;
}

std::vector<int64_t> labels(const std::vector<Example>& v) {
  std::vector<int64_t> y;
  for (const Example& e : v) y.push_back(e.label);
  return y;
}

double accuracy(const Tensor& logits, const std::vector<int64_t>& y) {
  const std::vector<float> l = logits.to_vector<float>();
  int64_t right = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const float* row = l.data() + i * kNumClasses;
    right += std::max_element(row, row + kNumClasses) - row == y[i];
  }
  return static_cast<double>(right) / static_cast<double>(std::max<size_t>(1, y.size()));
}

// What one of the three leaves for the report.
struct Result {
  std::string name;
  tg::report::Series train_loss, valid_acc;
  double test_acc = 0, seconds = 0;
};

// A linear head on fixed features [n, d] (a and b): AdamW, full-batch-free mini-batches.
Result train_head(const std::string& name, const Tensor& xtr, const std::vector<int64_t>& ytr, const Tensor& xva,
                  const std::vector<int64_t>& yva, const Tensor& xte, const std::vector<int64_t>& yte, const Options& o) {
  tg::manual_seed(o.seed);
  tg::Linear head(xtr.size(1), kNumClasses);
  tg::AdamW opt(head.named_parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  const int64_t epochs = 30;
  tg::train::Trainer trainer(head, opt, {.max_epochs = epochs, .eval_each_epoch = true, .seed = o.seed, .show_progress = false, .unit = "glosses"});
  const Tensor ytr_t = tg::from_vector(ytr, {static_cast<int64_t>(ytr.size())});
  const tg::train::CrossEntropyStep step{
      .logits = [&](const std::vector<int64_t>& s) { return head.forward(tg::index_select(xtr, 0, tg::from_vector(s, {static_cast<int64_t>(s.size())}))); },
      .targets = [&](const std::vector<int64_t>& s) { return tg::index_select(ytr_t, 0, tg::from_vector(s, {static_cast<int64_t>(s.size())})); }};
  auto eval = [&] {
    tg::NoGradGuard ng;
    return std::map<std::string, double>{{"accuracy", accuracy(head.forward(xva), yva)}};
  };
  tg::train::Progress clock(1);
  trainer.fit(tg::train::ShuffledSampler(static_cast<int64_t>(ytr.size()), 64), step, eval);
  Result r{.name = name, .train_loss = {}, .valid_acc = {}};
  const auto& h = trainer.history();
  r.train_loss.smoothing = 0.9;
  const int64_t steps_per_epoch = (static_cast<int64_t>(ytr.size()) + 63) / 64;
  for (const auto& [s, v] : h.at("train/loss")) r.train_loss.points.emplace_back(s / static_cast<double>(steps_per_epoch), v);
  for (const auto& [s, v] : h.at("valid/accuracy")) r.valid_acc.points.emplace_back(s / static_cast<double>(steps_per_epoch), v);
  tg::NoGradGuard ng;
  r.test_acc = accuracy(head.forward(xte), yte);
  r.seconds = clock.elapsed();
  return r;
}

// (a) skip-gram vectors on every training gloss, averaged over a gloss's known words.
Result word2vec_head(const Data& d, const Options& o) {
  tg::train::Progress clock(1);
  std::vector<std::vector<std::string>> sentences;
  for (const std::string& s : d.all_train_text) sentences.push_back(tg::text::word_tokens(s, /*lowercase=*/true));
  std::vector<std::string> flat;
  for (const auto& t : sentences) flat.insert(flat.end(), t.begin(), t.end());
  tg::WordCounts vocab = tg::WordCounts::build(flat, 3);
  std::vector<int64_t> corpus;
  for (const auto& s : sentences) {
    for (int64_t id : vocab.encode(s)) corpus.push_back(id);
    corpus.push_back(-1);
  }
  const int64_t dim = 300, epochs = 5;
  tg::Word2Vec w2v(std::move(vocab), {.dim = dim, .window = 5, .negative = 5, .sample = 1e-3, .epochs = epochs, .seed = o.seed});
  tg::train::Progress progress(static_cast<int64_t>(corpus.size() - sentences.size()) * epochs, "word2vec", "words");
  w2v.train(corpus, [&](const tg::Word2VecProgress& p) { progress.update(p.words_done, "", p.words_done); });
  progress.finish(fmt::format("{} words, {} glosses", w2v.vocab().size(), sentences.size()));
  auto features = [&](const std::vector<Example>& v) {
    std::vector<std::vector<std::string>> words;
    for (const Example& e : v) words.push_back(tg::text::word_tokens(e.text, /*lowercase=*/true));
    return w2v.mean_vectors(words);
  };
  Result r = train_head("word2vec (averaged) + linear", features(d.train), labels(d.train), features(d.valid), labels(d.valid),
                        features(d.test), labels(d.test), o);
  r.seconds = clock.elapsed();  // word2vec included
  return r;
}

std::vector<std::string> texts(const std::vector<Example>& v) {
  std::vector<std::string> t;
  for (const Example& e : v) t.push_back(e.text);
  return t;
}

// (b) the pretrained sentence embeddings as fixed features.
Result frozen_head(tg::text::SentenceEncoder& enc, const Data& d, const Options& o) {
  tg::train::Progress clock(1);
  auto embed = [&](const std::vector<Example>& v, const char* what) {
    tg::train::Progress p(static_cast<int64_t>(v.size()), what, "glosses");
    Tensor e = enc.encode(texts(v), 64, [&](int64_t done) { p.update(done, "", done); });
    p.finish();
    return e;
  };
  const Tensor xtr = embed(d.train, "embed train"), xva = embed(d.valid, "embed valid"), xte = embed(d.test, "embed test");
  Result r = train_head("frozen MiniLM + linear", xtr, labels(d.train), xva, labels(d.valid), xte, labels(d.test), o);
  r.seconds = clock.elapsed();  // the embedding included
  return r;
}

// (c) every weight trained: mean-pooled hidden states -> dropout -> linear head.
struct Classifier : tg::Module {
  std::shared_ptr<tg::BertModel> bert;
  std::shared_ptr<tg::Dropout> dropout;
  std::shared_ptr<tg::Linear> head;
  explicit Classifier(std::shared_ptr<tg::BertModel> b) {
    bert = register_module("bert", std::move(b));
    dropout = register_module("dropout", std::make_shared<tg::Dropout>(0.1));
    head = register_module("head", std::make_shared<tg::Linear>(bert->cfg.hidden, kNumClasses));
  }
  Tensor forward(const tg::BertInputs& in) {
    return head->forward(dropout->forward(tg::pool(bert->forward(in), in.attention_mask, tg::Pooling::kMean)));
  }
  std::string type_name() const override { return "GlossClassifier"; }
};

Result fine_tune(tg::text::SentenceEncoder& enc, const Data& d, const Options& o) {
  tg::manual_seed(o.seed);
  Classifier model(enc.shared_model());
  model.train();
  tg::AdamW opt(model.named_parameters(), {.lr = o.lr, .weight_decay = 0.01});
  const int64_t steps = (static_cast<int64_t>(d.train.size()) + o.batch - 1) / o.batch * o.epochs;
  tg::train::Trainer trainer(model, opt, {.max_epochs = o.epochs, .max_minutes = o.minutes, .clip_grad_norm = 1.0,
                                          .eval_every = o.eval_every, .seed = o.seed, .unit = "glosses"});
  const int64_t warmup = std::max<int64_t>(1, steps / 10);
  trainer.set_schedule([&](int64_t s) {  // linear warm-up, then linear decay to 0 (BERT's schedule)
    return o.lr * (s <= warmup ? static_cast<double>(s) / static_cast<double>(warmup)
                               : std::max(0.0, static_cast<double>(steps - s) / static_cast<double>(std::max<int64_t>(1, steps - warmup))));
  });
  auto batch_texts = [&](const std::vector<Example>& v, const std::vector<int64_t>& s) {
    std::vector<std::string> t;
    for (int64_t i : s) t.push_back(v[static_cast<size_t>(i)].text);
    return t;
  };
  const tg::train::CrossEntropyStep step{
      .logits = [&](const std::vector<int64_t>& s) { return model.forward(enc.inputs(batch_texts(d.train, s))); },
      .targets = [&](const std::vector<int64_t>& s) {
        std::vector<int64_t> y;
        for (int64_t i : s) y.push_back(d.train[static_cast<size_t>(i)].label);
        return tg::from_vector(y, {static_cast<int64_t>(y.size())});
      }};
  auto predict = [&](const std::vector<Example>& v) {
    tg::NoGradGuard ng;
    const bool was = model.is_training();
    model.eval();
    std::vector<float> all;
    for (const auto& b : tg::train::sequential_batches(static_cast<int64_t>(v.size()), 64)) {
      const std::vector<float> l = model.forward(enc.inputs(batch_texts(v, b))).to_vector<float>();
      all.insert(all.end(), l.begin(), l.end());
    }
    model.train(was);
    return tg::from_vector(all, {static_cast<int64_t>(v.size()), kNumClasses});
  };
  auto eval = [&] { return std::map<std::string, double>{{"accuracy", accuracy(predict(d.valid), labels(d.valid))}}; };
  std::fprintf(stderr, "fine-tuning: %lld steps of %lld glosses (lr %g, at most %.0f minutes)\n", static_cast<long long>(steps),
               static_cast<long long>(o.batch), o.lr, o.minutes);
  tg::train::Progress clock(1);
  const tg::train::FitResult fr = trainer.fit(tg::train::ShuffledSampler(static_cast<int64_t>(d.train.size()), o.batch), step, eval);
  if (fr.diverged() || fr.interrupted()) tg::cli::fail("fine-tuning: " + fr.message, fr.exit_code());
  Result r{.name = "fine-tuned MiniLM", .train_loss = {}, .valid_acc = {}};
  const auto& h = trainer.history();
  const double per_epoch = static_cast<double>((static_cast<int64_t>(d.train.size()) + o.batch - 1) / o.batch);
  for (const auto& [s, v] : h.at("train/loss")) r.train_loss.points.emplace_back(s / per_epoch, v);
  for (const auto& [s, v] : h.at("valid/accuracy")) r.valid_acc.points.emplace_back(s / per_epoch, v);
  r.train_loss.smoothing = 0.9;
  r.test_acc = accuracy(predict(d.test), labels(d.test));
  r.seconds = clock.elapsed();
  return r;
}

int run(int argc, char** argv) {
  Options o;
  tg::cli::Flags f("classify_glosses", "WordNet glosses -> part of speech: word2vec vs frozen vs fine-tuned MiniLM");
  f.add("model", &o.model, "pretrained model folder (./tg.sh models)").not_empty();
  f.add("wordnet", &o.wordnet, "folder of WordNet's data.noun, data.verb, data.adj, data.adv (./tg.sh data)").not_empty();
  f.add("out", &o.out, "run folder: metrics.jsonl, report.html").not_empty();
  f.add("train", &o.train, "training glosses (a seeded sample of the training split; 0: all)").min(0);
  f.add("valid", &o.valid, "validation glosses (0: all)").min(0);
  f.add("test", &o.test, "test glosses (0: all)").min(0);
  f.add("batch", &o.batch, "fine-tuning batch").range(1, 4096);
  f.add("epochs", &o.epochs, "fine-tuning epochs").range(1, 1000);
  f.add("eval_every", &o.eval_every, "fine-tuning steps between validations").min(1);
  f.add("lr", &o.lr, "fine-tuning peak learning rate").above(0).below(1);
  f.add("minutes", &o.minutes, "fine-tuning time budget (0: none)").min(0);
  f.add("threads", &o.threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
  f.add("seed", &o.seed, "samples, initialisation and data order");
  f.add("overwrite", &o.overwrite, "replace an earlier run in --out");
  tg::cli::add_precision(f, &o.precision);
  f.parse(argc, argv).or_throw();
  if (o.threads > 0) tg::set_num_threads(static_cast<int>(o.threads));
  tg::AutocastGuard autocast(tg::cli::precision(o.precision));  // the encoder's features, the heads and fine-tuning
  tg::make_dirs(o.out).or_throw();
  tg::train::check_run_dir(o.out, /*resume=*/false, o.overwrite, /*can_resume=*/false).or_throw();
  if (o.overwrite) fs::remove(o.out + "/metrics.jsonl");
  auto enc = tg::text::SentenceEncoder::load(o.model).value();
  enc->max_length = 128;  // glosses are short; the longest are cut
  const Data d = load(o);
  std::fprintf(stderr, "glosses: %zu train (of %zu), %zu validation, %zu test\n", d.train.size(), d.all_train_text.size(),
               d.valid.size(), d.test.size());
  tg::train::Metrics metrics = tg::train::Metrics::open(o.out + "/metrics.jsonl").value();

  std::vector<int64_t> count(kNumClasses, 0);
  for (const Example& e : d.test) ++count[static_cast<size_t>(e.label)];
  const double majority = static_cast<double>(*std::max_element(count.begin(), count.end())) / static_cast<double>(d.test.size());

  std::vector<Result> results;
  results.push_back(word2vec_head(d, o));
  std::printf("(a) %s: test accuracy %.4f\n", results.back().name.c_str(), results.back().test_acc);
  results.push_back(frozen_head(*enc, d, o));
  std::printf("(b) %s: test accuracy %.4f\n", results.back().name.c_str(), results.back().test_acc);
  results.push_back(fine_tune(*enc, d, o));
  std::printf("(c) %s: test accuracy %.4f\n", results.back().name.c_str(), results.back().test_acc);

  tg::report::Html html("classify_glosses");
  html.heading("WordNet glosses: which part of speech is defined?", 1);
  html.paragraph(fmt::format(
      "{} training glosses (a seeded sample of {}), {} validation and {} test glosses, split by synset. Classes: noun {}, verb {}, "
      "adjective {}, adverb {} test glosses; always answering the most common class scores {:.1f}%.",
      d.train.size(), d.all_train_text.size(), d.valid.size(), d.test.size(), count[0], count[1], count[2], count[3], 100 * majority));
  std::vector<std::vector<std::string>> rows;
  for (const Result& r : results) rows.push_back({r.name, fmt::format("{:.2f}%", 100 * r.test_acc), fmt::format("{:.0f}", r.seconds)});
  rows.push_back({"majority class", fmt::format("{:.2f}%", 100 * majority), "0"});
  html.table({"features + head", "test accuracy", "seconds (features, training, test)"}, rows);
  for (const Result& r : results) {
    tg::report::Series loss = r.train_loss, acc = r.valid_acc;
    loss.name = "train loss";
    acc.name = "validation accuracy";
    html.line_chart(r.name + ": training loss", {loss}, {.x_label = "epoch", .y_label = "cross-entropy (nats)"});
    html.line_chart(r.name + ": validation accuracy", {acc}, {.x_label = "epoch", .y_label = "accuracy"});
  }
  html.write(o.out + "/report.html").or_throw();
  for (size_t i = 0; i < results.size(); ++i)
    metrics.log("test", 0, {{fmt::format("accuracy_{}", "abc"[i]), results[i].test_acc}, {"majority", majority}}).or_throw();
  std::printf("report: %s/report.html\n", o.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return tg::cli::run_main(argc, argv, [&] { return run(argc, argv); }); }
