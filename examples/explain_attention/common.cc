#include "common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace explain {

using tg::Tensor;

void define_flags(tg::cli::Flags& f, Options& o) {
  f.add("src", &o.src, "source sentences, one a line (with --tgt); default: the trans-de-en pairs");
  f.add("tgt", &o.tgt, "target sentences, aligned with --src");
  f.add("ding", &o.ding, "the default data (the Ding dictionary of Debian's trans-de-en)");
  f.add("out", &o.out, "folder for report.html and metrics.jsonl").not_empty();
  f.add("overwrite", &o.overwrite, "replace an earlier run in --out");
  f.add("steps", &o.steps, "training steps of every translator").range(1, 1000000);
  f.add("seeds", &o.seeds, "seeds every comparison runs with (--seed, --seed + 1, ...)").range(1, 100);
  f.add("recall_steps", &o.recall_steps, "training steps of experiment 2's card-lookup models").range(1, 1000000);
  f.add("quick", &o.quick, "a smoke run of every experiment in about a minute (10 translator steps, 1 seed)");
  f.add("width", &o.width, "d_model of the small translators").range(1, 4096);
  f.add("heads", &o.heads, "attention heads").range(1, 256);
  f.add("batch", &o.batch, "sentence pairs per step").range(1, 100000);
  f.add("w2v_text", &o.w2v_text,
        "more English text, one sentence a line, for the word2vec of experiments 4 and 6 (besides the English training "
        "sentences)");
  f.add("model", &o.model, "pretrained model folder for experiment 4 (./tg.sh models; \"\": leave that part out)");
  f.add("seed", &o.seed, "random seed");
  f.add("threads", &o.threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
  tg::cli::add_precision(f, &o.precision);
  tg::cli::add_device(f, &o.device);
  f.check([&o] {
    return o.width % o.heads == 0 ? std::string()
                                  : fmt::format("--width {} must be a multiple of --heads {}", o.width, o.heads);
  });
  f.check([&o] { return o.src.empty() != o.tgt.empty() ? std::string("--src and --tgt go together") : std::string(); });
}

void apply_quick(const tg::cli::Flags& f, Options& o) {
  if (!o.quick) return;
  if (!f.given("steps")) o.steps = 10;
  if (!f.given("seeds")) o.seeds = 1;
}

double Stat::mean() const {
  return values.empty() ? 0 : std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}
double Stat::spread() const {
  if (values.size() < 2) return 0;
  const double m = mean();
  double ss = 0;
  for (double v : values) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(values.size() - 1));
}
double Stat::lo() const { return values.empty() ? 0 : *std::min_element(values.begin(), values.end()); }
double Stat::hi() const { return values.empty() ? 0 : *std::max_element(values.begin(), values.end()); }

std::string show(const Stat& s, int digits, double scale) {
  if (s.values.size() < 2) return fmt::format("{:.{}f}", s.mean() * scale, digits);
  // No-break spaces: a table cell never wraps inside "80.1 ± 2.6".
  return fmt::format("{:.{}f}\u00a0±\u00a0{:.{}f}", s.mean() * scale, digits, s.spread() * scale, digits);
}

bool separated(const Stat& a, const Stat& b) {
  return a.values.size() >= 2 && b.values.size() >= 2 && (a.hi() < b.lo() || b.hi() < a.lo());
}

std::string verdict(const std::string& a_name, const Stat& a, const std::string& b_name, const Stat& b,
                    const std::string& unit, const std::string& budget) {
  const double gap = std::fabs(a.mean() - b.mean());
  if (separated(a, b)) {
    const bool a_better = a.mean() < b.mean();
    return fmt::format("A measured effect: {} is better than {} by {:.3f} {}, and every seed of it beats every seed of the "
                       "other ({}).",
                       a_better ? a_name : b_name, a_better ? b_name : a_name, gap, unit, budget);
  }
  if (a.values.size() < 2 || b.values.size() < 2)
    return fmt::format("One seed each ({}): a gap of {:.3f} {} cannot be told from noise; --seeds 3 or more would tell.", budget,
                       gap, unit);
  return fmt::format("No measurable difference at this budget ({}): the gap of {:.3f} {} lies within the seeds' spread "
                     "(± {:.3f} and ± {:.3f}). More --steps, and more --seeds for a smaller effect, would tell.",
                     budget, gap, unit, a.spread(), b.spread());
}

Stat valid_losses(const std::vector<Run>& runs) {
  Stat s;
  for (const Run& r : runs) s.values.push_back(r.valid_loss);
  return s;
}

Curve mean_curve(const std::vector<Run>& runs) {
  Curve c;
  if (runs.empty()) return c;
  size_t n = runs[0].train_loss.size();
  for (const Run& r : runs) n = std::min(n, r.train_loss.size());
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (const Run& r : runs) sum += r.train_loss[i].second;
    c.emplace_back(runs[0].train_loss[i].first, sum / static_cast<double>(runs.size()));
  }
  return c;
}

std::vector<uint64_t> Context::seeds() const {
  std::vector<uint64_t> s;
  for (int64_t i = 0; i < opt.seeds; ++i) s.push_back(opt.seed + static_cast<uint64_t>(i));
  return s;
}

std::string Context::budget() const {
  return fmt::format("{} steps x {} seed{}", opt.steps, opt.seeds, opt.seeds == 1 ? "" : "s");
}

Context load(const Options& o) {
  Context ctx;
  ctx.opt = o;
  const std::string source = o.src.empty() ? o.ding : o.src + " / " + o.tgt;
  const tg::text::Pairs pairs =
      o.src.empty() ? tg::text::read_ding_pairs(o.ding).value() : tg::text::read_aligned(o.src, o.tgt).value();
  ctx.split = tg::text::split_pairs(pairs);
  if (!o.w2v_text.empty()) ctx.w2v_lines = tg::text::read_lines(o.w2v_text).value();

  std::vector<std::string> german, english;
  for (const auto& [de, en] : ctx.split.train) german.push_back(de), english.push_back(en);
  const tg::text::TrainOptions words{.vocab_size = 6000, .min_count = 2};
  ctx.german = tg::text::Tokenizer::train("word", german, words).value();
  ctx.english = tg::text::Tokenizer::train("word", english, words).value();
  ctx.de_en = {ctx.german.get(), ctx.english.get(), tg::text::encode_pairs(ctx.split.train, *ctx.german, *ctx.english, 60),
               tg::text::encode_pairs(ctx.split.valid, *ctx.german, *ctx.english, 60)};
  if (ctx.de_en.train.empty() || ctx.de_en.valid.empty())
    tg::cli::fail(fmt::format("{}: too few sentence pairs for the experiments ({} for training, {} held out)", source,
                              ctx.de_en.train.size(), ctx.de_en.valid.size()));
  ctx.en_de.src = ctx.english.get();
  ctx.en_de.tgt = ctx.german.get();
  for (const auto& e : ctx.de_en.train) ctx.en_de.train.push_back({e.tgt, e.src});
  for (const auto& e : ctx.de_en.valid) ctx.en_de.valid.push_back({e.tgt, e.src});

  // Only now, with the data read: a run that fails on its input leaves no metrics.jsonl behind.
  const std::string path = o.out + "/metrics.jsonl";
  if (o.overwrite) std::filesystem::remove(path);
  ctx.metrics = std::make_unique<tg::train::Metrics>(tg::train::Metrics::open(path).value());
  return ctx;
}

std::unique_ptr<tg::Transformer> new_model(const Data& d, const Options& o, uint64_t seed) {
  const tg::text::TranslatorConfig cfg{.layers = 2, .width = o.width, .heads = o.heads, .ff = 4 * o.width, .max_len = 128};
  tg::manual_seed(seed);
  auto m = std::make_unique<tg::Transformer>(cfg.model(d.src->size(), d.tgt->size()));
  m->to(o.dev);  // in place, before an optimizer takes the parameters
  return m;
}

namespace {
// Summed cross-entropy of a batch of pairs (padding ignored) and its target-token count.
tg::train::StepFn seq2seq_step(tg::Transformer& m, const std::vector<tg::text::Example>& set) {
  return [&m, &set](const std::vector<int64_t>& idx) {
    tg::text::Seq2SeqBatch b = tg::text::make_seq2seq_batch(set, idx);
    const tg::Device dev = m.device();
    Tensor loss = tg::cross_entropy(m.forward(b.src.to(dev), b.tgt_in.to(dev)), b.tgt_out.to(dev),
                                    {.ignore_index = tg::text::kPad, .reduction = tg::Reduction::kSum});
    return tg::train::StepOutput{loss, static_cast<double>(b.tokens)};
  };
}
}  // namespace

Run train(Context& ctx, tg::Transformer& m, const Data& d, const std::string& name, uint64_t seed,
          const std::function<void(tg::train::Trainer&)>& hooks) {
  const Options& o = ctx.opt;
  tg::AdamW opt(m.named_parameters(), {.lr = 1e-3, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01});
  // run_dir "": the small trainings write nothing; the program logs their curves itself below.
  tg::train::Trainer trainer(m, opt, {.max_steps = o.steps, .seed = seed, .log_every = 1});  // (every step: the report's curves)
  trainer.set_schedule([](int64_t step) { return 1e-3 * std::min(1.0, static_cast<double>(step) / 50.0); });
  const auto valid_batches = tg::train::sequential_batches(static_cast<int64_t>(d.valid.size()), 64);
  const tg::train::StepFn valid_step = seq2seq_step(m, d.valid);
  auto evaluate = [&] {
    return std::map<std::string, double>{{"valid_loss", trainer.evaluate_loss(valid_batches, valid_step)}};
  };
  if (hooks) hooks(trainer);
  std::fprintf(stderr, "training '%s' (seed %llu): %lld steps of %lld pairs\n", name.c_str(),
               static_cast<unsigned long long>(seed), static_cast<long long>(o.steps), static_cast<long long>(o.batch));
  const tg::train::FitResult r =
      trainer.fit(tg::train::ShuffledSampler(static_cast<int64_t>(d.train.size()), o.batch), seq2seq_step(m, d.train), evaluate);

  Run run;
  const auto& h = trainer.history();
  if (auto it = h.find("train/loss"); it != h.end()) run.train_loss = it->second;
  if (r.diverged()) {
    // The loop stopped before the bad update; the report shows the curve up to there.
    std::fprintf(stderr, "%s: %s\n", name.c_str(), r.message.c_str());
    run.valid_loss = evaluate().at("valid_loss");
  } else {
    run.valid_loss = h.at("valid/valid_loss").back().second;
  }
  const std::string key = fmt::format("{}/seed{}", name, seed);
  for (const auto& [step, loss] : run.train_loss)
    ctx.metrics->log("train", static_cast<int64_t>(step), {{key, loss}}).or_throw();
  ctx.metrics->log("valid", trainer.state().step, {{key, run.valid_loss}}).or_throw();
  return run;
}

std::vector<Run> train_seeds(Context& ctx, const Data& d, const std::string& name,
                             const std::function<void(tg::Transformer&)>& setup) {
  std::vector<Run> runs;
  for (uint64_t seed : ctx.seeds()) {
    auto m = new_model(d, ctx.opt, seed);
    if (setup) setup(*m);
    runs.push_back(train(ctx, *m, d, name, seed));
  }
  return runs;
}

Tensor encoder_attention(tg::Transformer& m, const std::vector<int64_t>& ids) {
  Tensor src = tg::from_vector(ids, {1, static_cast<int64_t>(ids.size())}).to(m.device());
  m.set_record_attention(true);
  {
    tg::NoGradGuard ng;
    const bool was = m.is_training();
    m.eval();
    m.encode(src);
    m.train(was);
  }
  Tensor w = (*m.encoder->layers)[0]->self_attn->last_weights.to(tg::kCPU);  // [1, H, S, S]
  m.set_record_attention(false);
  return w;
}

void set_attention_scale(tg::Module& m, double scale) {
  if (auto* a = dynamic_cast<tg::MultiHeadAttention*>(&m)) a->scale = scale;
  for (auto& [n, c] : m.children()) set_attention_scale(*c, scale);
}

double norm(const Tensor& t) {
  tg::NoGradGuard ng;
  return std::sqrt(tg::sum(tg::square(t.to(tg::kFloat64))).item());
}

double mean_entropy(const Tensor& w) {
  tg::NoGradGuard ng;
  Tensor p = w.to(tg::kFloat64);
  return -tg::mean(tg::sum(p * tg::log(tg::maximum(p, 1e-300)), {-1})).item();
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
}

void log_result(Context& ctx, const std::string& kind, const std::vector<std::pair<std::string, double>>& values) {
  ctx.metrics->log(kind, ctx.opt.steps, values).or_throw();
}

void write_summary(const Context& ctx) {
  nlohmann::ordered_json j;
  j["program"] = "explain_attention";
  j["steps"] = ctx.opt.steps;
  j["recall_steps"] = ctx.opt.recall_steps;
  j["seeds"] = ctx.seeds();
  j["precision"] = ctx.opt.precision;
  j["spread"] = "sample standard deviation over the seeds (0 for one seed)";
  nlohmann::ordered_json& ex = j["experiments"];
  for (const auto& h : ctx.summary) {
    ex[h.experiment].push_back({{"variant", h.variant},
                                {"metric", h.metric},
                                {"mean", h.stat.mean()},
                                {"spread", h.stat.spread()},
                                {"seeds", h.stat.values.size()},
                                {"values", h.stat.values}});
  }
  tg::write_file_atomic(ctx.opt.out + "/summary.json", j.dump(2) + "\n").or_throw();
}

}  // namespace explain
