#pragma once
// What the eight experiments of explain_attention share: the flags, the data (both translation
// directions), the small translators and their training through tg::train::Trainer, the seeds
// every comparison is repeated over and the statistics of a number measured once per seed, the
// program's metrics log and summary, and what an earlier experiment leaves for a later one.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/tapegrad.h>

namespace explain {

using Curve = std::vector<std::pair<double, double>>;  // (step, value)

struct Options {
  std::string src, tgt, ding = "/usr/share/trans/de-en", out = "runs/explain", w2v_text;
  std::string model = "data/models/all-MiniLM-L6-v2";
  std::string precision = "fp32";  // bf16: every experiment's matrix products under autocast
  std::string device = "auto";     // the translators' device (the other experiments' small models stay on the CPU)
  tg::Device dev = tg::kCPU;       // what --device resolved to
  int64_t steps = 120, width = 128, heads = 4, batch = 32, threads = 0;
  int64_t seeds = 3;            // every comparison runs with --seed, --seed + 1, ...
  int64_t recall_steps = 1500;  // experiment 2's card lookups
  uint64_t seed = 1;
  bool overwrite = false, quick = false;
};
void define_flags(tg::cli::Flags& flags, Options& o);
// --quick: a smoke run of every experiment in about a minute: 10 translator steps and 1 seed (flags
// given explicitly still win).
void apply_quick(const tg::cli::Flags& flags, Options& o);

// One number measured once per seed: its mean and spread (the sample standard deviation; 0 for
// one seed).
struct Stat {
  std::vector<double> values;
  double mean() const;
  double spread() const;
  double lo() const;
  double hi() const;
};
std::string show(const Stat& s, int digits = 4, double scale = 1);  // "4.4123 ± 0.0081" (values x scale)
// A difference counts only when the seeds do not overlap: every seed of one variant is below every
// seed of the other (with 3 seeds a side, chance alone does that 1 time in 10).
bool separated(const Stat& a, const Stat& b);
// One sentence comparing two variants of a measurement where lower is better: the effect with its
// size when separated, otherwise "no measurable difference at this budget" and what would tell.
std::string verdict(const std::string& a_name, const Stat& a, const std::string& b_name, const Stat& b,
                    const std::string& unit, const std::string& budget);

// One translation direction: its tokenizers (owned by the Context) and the encoded pairs.
struct Data {
  const tg::text::Tokenizer* src = nullptr;
  const tg::text::Tokenizer* tgt = nullptr;
  std::vector<tg::text::Example> train, valid;
};

// What a training leaves: the loss of every step and the validation loss at the end.
struct Run {
  Curve train_loss;
  double valid_loss = 0;
};
Stat valid_losses(const std::vector<Run>& runs);
Curve mean_curve(const std::vector<Run>& runs);  // the training loss averaged over seeds, step by step

struct Context {
  Options opt;
  tg::text::Split split;                                 // the sentence pairs as text
  std::vector<std::string> w2v_lines;                    // --w2v_text's lines (experiments 4 and 6)
  std::unique_ptr<tg::text::Tokenizer> german, english;  // words, as the translator tokenizes them
  Data de_en, en_de;                                     // German->English, and the same pairs reversed
  std::unique_ptr<tg::train::Metrics> metrics;           // OUT/metrics.jsonl

  // Left by experiment 1 for 2, 3 and 7: the German->English models with learned projections,
  // one per seed, and their encoder layer 0's attention on the probe sentence before training.
  std::vector<std::unique_ptr<tg::Transformer>> learned;
  std::vector<Run> learned_runs;
  std::vector<tg::Tensor> heads_init;
  // Left by experiment 4 for 6: word2vec on the English side, and the English->German models.
  std::unique_ptr<tg::Word2Vec> w2v;
  std::vector<std::unique_ptr<tg::Transformer>> en_de_models;
  std::vector<Run> en_de_runs;

  // The report's opening: each experiment answers its question with its numbers.
  std::vector<tg::report::Html::Answer> answers;
  // OUT/summary.json: every experiment's headline numbers.
  struct Headline {
    std::string experiment, variant, metric;
    Stat stat;
  };
  std::vector<Headline> summary;
  void headline(const std::string& experiment, const std::string& variant, const std::string& metric, const Stat& s) {
    summary.push_back({experiment, variant, metric, s});
  }

  std::vector<uint64_t> seeds() const;  // --seed, --seed + 1, ... (--seeds of them)
  // "150 steps x 3 seeds": what every comparison of the translators is given.
  std::string budget() const;
  const std::vector<int64_t>& probe() const { return de_en.valid[0].src; }  // the first held-out sentence
};

// Reads and tokenizes the pairs (and --w2v_text); opens OUT/metrics.jsonl once all of it is read.
Context load(const Options& o);

// A small translator for d (2 + 2 layers, --width, --heads, d_ff = 4 x width), initialised from
// `seed`: the variants of one seed start from the same random stream.
std::unique_ptr<tg::Transformer> new_model(const Data& d, const Options& o, uint64_t seed);

// Trains m on d for --steps optimizer steps of --batch pairs: AdamW (lr 1e-3 after a 50-step linear
// warm-up), the data order of `seed`, validation loss at the end. `hooks` may set the trainer's
// callbacks first. The curve and the validation loss go to metrics.jsonl as "name/seed<seed>".
Run train(Context& ctx, tg::Transformer& m, const Data& d, const std::string& name, uint64_t seed,
          const std::function<void(tg::train::Trainer&)>& hooks = {});
// new_model + train for every seed; `setup` may change each model before its training.
std::vector<Run> train_seeds(Context& ctx, const Data& d, const std::string& name,
                             const std::function<void(tg::Transformer&)>& setup = {});

// Encoder layer 0's attention weights [1, H, S, S] on the probe sentence (eval mode, no grad).
tg::Tensor encoder_attention(tg::Transformer& m, const std::vector<int64_t>& ids);

// Sets every MultiHeadAttention's score scale (0: the usual 1/sqrt(d_k)).
void set_attention_scale(tg::Module& m, double scale);

double norm(const tg::Tensor& t);               // L2, in float64
double mean_entropy(const tg::Tensor& w);       // of softmax rows (nats), mean over rows
double cosine(const std::vector<float>& a, const std::vector<float>& b);
// A line of metrics.jsonl for an experiment's numbers, at step --steps.
void log_result(Context& ctx, const std::string& kind, const std::vector<std::pair<std::string, double>>& values);
// OUT/summary.json: for each experiment, its variants' metrics with mean, spread, seeds and values.
void write_summary(const Context& ctx);

// The experiments, in the report's order. Each adds its section to the report.
void exp1_gradients(Context& ctx, tg::report::Html& html);
void exp2_ablation(Context& ctx, tg::report::Html& html);
void exp3_scaling(Context& ctx, tg::report::Html& html);
void exp4_contextual(Context& ctx, tg::report::Html& html);
// Experiment 4's second part, with a real pretrained model: its one-sentence finding ("": left out).
std::string exp4_minilm(Context& ctx, tg::report::Html& html);
void exp5_one_hot(Context& ctx, tg::report::Html& html);
void exp6_pretrained(Context& ctx, tg::report::Html& html);
void exp7_heads(Context& ctx, tg::report::Html& html);
void exp8_positions(Context& ctx, tg::report::Html& html);

}  // namespace explain
