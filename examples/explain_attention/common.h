#pragma once
// What the seven experiments of explain_attention share: the flags, the data (both translation
// directions), the small translators and their training through tg::train::Trainer, the
// program's metrics log, and what an earlier experiment leaves for a later one.
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
  std::string precision = "fp32";  // bf16: every experiment's matrix products under autocast  // experiment 4's pretrained encoder ("" or absent: left out)
  int64_t steps = 300, width = 128, heads = 4, batch = 32, threads = 0;
  uint64_t seed = 1;
  bool overwrite = false;
};
void define_flags(tg::cli::Flags& flags, Options& o);

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

struct Context {
  Options opt;
  tg::text::Split split;                                 // the sentence pairs as text
  std::vector<std::string> w2v_lines;                    // --w2v_text's lines (experiments 4 and 6)
  std::unique_ptr<tg::text::Tokenizer> german, english;  // words, as the translator tokenizes them
  Data de_en, en_de;                                     // German->English, and the same pairs reversed
  std::unique_ptr<tg::train::Metrics> metrics;           // OUT/metrics.jsonl

  // Left by experiment 1 for 2, 3 and 7: the German->English model with learned projections.
  std::unique_ptr<tg::Transformer> learned;
  Run learned_run;
  tg::Tensor heads_init;  // its encoder layer 0's attention on the probe sentence, before training
  // Left by experiment 4 for 6: word2vec on the English side, and the English->German model.
  std::unique_ptr<tg::Word2Vec> w2v;
  std::unique_ptr<tg::Transformer> en_de_model;
  Run en_de_run;

  const std::vector<int64_t>& probe() const { return de_en.valid[0].src; }  // the first held-out sentence
};

// Reads and tokenizes the pairs (and --w2v_text); opens OUT/metrics.jsonl once all of it is read.
Context load(const Options& o);

// A small translator for d (2 + 2 layers, --width, --heads, d_ff = 4 x width), initialised from
// --seed: every model of the program starts from the same random stream.
std::unique_ptr<tg::Transformer> new_model(const Context& ctx, const Data& d);

// Trains m on d for --steps optimizer steps of --batch pairs: AdamW (lr 1e-3 after a 50-step linear
// warm-up), the same data order for every model, validation loss at the end. `hooks` may set the
// trainer's callbacks first. The curve and the validation loss go to metrics.jsonl under `name`.
Run train(Context& ctx, tg::Transformer& m, const Data& d, const std::string& name,
          const std::function<void(tg::train::Trainer&)>& hooks = {});

// Encoder layer 0's attention weights [1, H, S, S] on the probe sentence (eval mode, no grad).
tg::Tensor encoder_attention(tg::Transformer& m, const std::vector<int64_t>& ids);

// Sets every MultiHeadAttention's score scale (0: the usual 1/sqrt(d_k)).
void set_attention_scale(tg::Module& m, double scale);

double norm(const tg::Tensor& t);               // L2, in float64
double mean_entropy(const tg::Tensor& w);       // of softmax rows (nats), mean over rows
double cosine(const std::vector<float>& a, const std::vector<float>& b);
// A line of metrics.jsonl for an experiment's numbers, at step --steps.
void log_result(Context& ctx, const std::string& kind, const std::vector<std::pair<std::string, double>>& values);

// The experiments, in the report's order. Each adds its section to the report.
void exp1_gradients(Context& ctx, tg::report::Html& html);
void exp2_ablation(Context& ctx, tg::report::Html& html);
void exp3_scaling(Context& ctx, tg::report::Html& html);
void exp4_contextual(Context& ctx, tg::report::Html& html);
void exp4_minilm(Context& ctx, tg::report::Html& html);  // experiment 4's second part: a real pretrained model
void exp5_one_hot(Context& ctx, tg::report::Html& html);
void exp6_pretrained(Context& ctx, tg::report::Html& html);
void exp7_heads(Context& ctx, tg::report::Html& html);

}  // namespace explain
