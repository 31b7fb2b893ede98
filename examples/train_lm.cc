// train_lm: a decoder-only (GPT-style) language model of characters or subwords on any text file.
//
//   ./build/train_lm --text data/kjv.txt --layers 4 --heads 4 --width 128 --context 64 --batch 12 --steps 2000
//   ./build/train_lm --text data/kjv.txt --tokenizer bpe --vocab 2000     # SentencePiece subwords
//
// The last 10% of the file is held out; validation loss is reported in nats per token (a token is
// a character, or a subword piece; then nats per character too). Writes
// OUT/metrics.jsonl, OUT/checkpoint.safetensors (resumable with --resume) and OUT/report.html
// (loss and learning-rate curves, a sample, and the attention of every layer and head on a
// piece of validation text).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include "examples/common.h"
#include "examples/report.h"
#include "examples/tokenizer.h"
#include "tapegrad.h"

ABSL_FLAG(std::string, text, "data/kjv.txt", "training text (plain UTF-8; .gz accepted); `./tg.sh data` writes the default");
ABSL_FLAG(std::string, out, "runs/lm", "output folder: metrics.jsonl, checkpoint.safetensors, report.html");
ABSL_FLAG(std::string, tokenizer, "char", "char, or SentencePiece subwords trained on the training part: bpe or unigram");
ABSL_FLAG(int64_t, vocab, 2000, "subword pieces (with --tokenizer bpe or unigram)");
ABSL_FLAG(int64_t, layers, 4, "transformer blocks");
ABSL_FLAG(int64_t, heads, 4, "attention heads per block");
ABSL_FLAG(int64_t, width, 128, "model width d_model (d_ff is 4x)");
ABSL_FLAG(int64_t, context, 64, "tokens per training sequence");
ABSL_FLAG(int64_t, batch, 12, "sequences per step");
ABSL_FLAG(int64_t, steps, 2000, "training steps");
ABSL_FLAG(double, lr, 1e-3, "peak learning rate (AdamW, warm-up then cosine decay to 10%)");
ABSL_FLAG(int64_t, warmup, 100, "warm-up steps");
ABSL_FLAG(double, dropout, 0.0, "dropout");
ABSL_FLAG(double, weight_decay, 0.01, "AdamW weight decay");
ABSL_FLAG(int64_t, eval_every, 250, "steps between validation runs");
ABSL_FLAG(int64_t, eval_windows, 200, "validation windows (of --context characters, evenly spaced)");
ABSL_FLAG(int64_t, sample, 300, "tokens to sample at the end");
ABSL_FLAG(double, temperature, 0.8, "sampling temperature");
ABSL_FLAG(int64_t, top_k, 0, "sample among the k most likely characters (0: all)");
ABSL_FLAG(std::string, prompt, "\n", "text the sample continues");
ABSL_FLAG(uint64_t, seed, 1, "random seed (weights, batches, dropout, sampling)");
ABSL_FLAG(int32_t, threads, 0, "threads (0: TG_NUM_THREADS or all cores)");
ABSL_FLAG(bool, resume, false, "continue from OUT/checkpoint.safetensors");

namespace ex = tg::examples;
using tg::Tensor;

namespace {

struct Data {
  std::vector<int64_t> train, valid;
};

// Characters, or SentencePiece subwords with one piece for the line break (SentencePiece reads
// lines; the text's line breaks are part of what the model learns).
struct LmVocab {
  static constexpr const char* kNewline = "\xE2\x90\xA4";  // U+2424 SYMBOL FOR NEWLINE
  bool subword = false;
  ex::CharVocab chars;
  ex::Tokenizer pieces;
  int64_t nl = -1;

  std::vector<int64_t> encode(const std::string& text) const {
    if (!subword) return chars.encode(text);
    std::vector<int64_t> out;
    bool first = true;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (!first) out.push_back(nl);
      first = false;
      std::vector<int64_t> ids = pieces.encode(std::string(line));
      out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
  }
  std::string decode(const std::vector<int64_t>& ids) const {
    if (!subword) return chars.decode(ids);
    std::string out;
    std::vector<int64_t> run;
    for (int64_t id : ids) {
      if (id != nl) {
        run.push_back(id);
        continue;
      }
      out += pieces.decode(run) + "\n";
      run.clear();
    }
    return out + pieces.decode(run);
  }
  std::string label(int64_t id) const {
    if (subword) return id == nl ? "\\n" : pieces.token(id);
    std::string c = chars.decode({id});
    return c == "\n" ? "\\n" : c == " " ? "_" : c;
  }
  int64_t size() const { return subword ? pieces.size() : chars.size(); }
};


Tensor window_batch(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts, int64_t len, int64_t shift) {
  std::vector<int64_t> flat;
  flat.reserve(starts.size() * static_cast<size_t>(len));
  for (int64_t s : starts) flat.insert(flat.end(), ids.begin() + s + shift, ids.begin() + s + shift + len);
  return tg::from_vector(flat, {static_cast<int64_t>(starts.size()), len});
}

double evaluate(tg::DecoderLM& model, const std::vector<int64_t>& ids, int64_t context, int64_t batch, int64_t windows) {
  const int64_t available = (static_cast<int64_t>(ids.size()) - 1) / context;
  const int64_t n = std::min(available, windows);
  if (n <= 0) return NAN;
  tg::NoGradGuard ng;
  bool was = model.is_training();
  model.eval();
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; i += batch) {
    std::vector<int64_t> starts;
    for (int64_t j = i; j < std::min(n, i + batch); ++j) starts.push_back(j * available / n * context);
    Tensor x = window_batch(ids, starts, context, 0), y = window_batch(ids, starts, context, 1);
    total += tg::cross_entropy(model.forward(x), y, {.reduction = tg::Reduction::Sum}).item();
    count += y.numel();
  }
  model.train(was);
  return total / static_cast<double>(count);
}

}  // namespace

int main(int argc, char** argv) {
  ex::set_program_name(argv[0]);
  absl::SetProgramUsageMessage("train a character-level GPT-style language model: train_lm --text FILE [flags]");
  absl::ParseCommandLine(argc, argv);
  const int64_t L = absl::GetFlag(FLAGS_layers), H = absl::GetFlag(FLAGS_heads), D = absl::GetFlag(FLAGS_width),
                T = absl::GetFlag(FLAGS_context), B = absl::GetFlag(FLAGS_batch), steps = absl::GetFlag(FLAGS_steps);
  if (L < 1 || H < 1 || D < 1 || D % H != 0 || T < 2 || B < 1 || steps < 0)
    ex::fail(fmt::format("bad model flags: --layers {} --heads {} --width {} (a multiple of heads) --context {} (>= 2) "
                         "--batch {} --steps {}", L, H, D, T, B, steps));
  if (absl::GetFlag(FLAGS_threads) > 0) tg::set_num_threads(absl::GetFlag(FLAGS_threads));
  const std::string out = absl::GetFlag(FLAGS_out), text_path = absl::GetFlag(FLAGS_text);
  std::string text = ex::or_fail(ex::read_text(text_path));
  if (static_cast<int64_t>(text.size()) < 20 * (T + 1))
    ex::fail(fmt::format("{}: {} bytes is too little text for --context {} (need at least {})", text_path, text.size(), T,
                         20 * (T + 1)));
  ex::or_fail(ex::make_dirs(out));
  const std::string ckpt = out + "/checkpoint.safetensors";

  const ex::TokenizerKind kind = ex::or_fail(ex::parse_tokenizer_kind(absl::GetFlag(FLAGS_tokenizer)));
  if (kind == ex::TokenizerKind::kWord) ex::fail("train_lm models characters or subwords: --tokenizer char, bpe or unigram");
  LmVocab vocab;
  Data data;
  std::string vocab_signature;  // checked on --resume
  int64_t valid_chars = 0;
  if (kind == ex::TokenizerKind::kChar) {
    vocab.chars = ex::CharVocab::build(text);
    std::vector<int64_t> all = vocab.chars.encode(text);
    size_t cut = all.size() * 9 / 10;
    data.train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(cut));
    data.valid.assign(all.begin() + static_cast<std::ptrdiff_t>(cut), all.end());
    vocab_signature = vocab.chars.serialize();
    valid_chars = static_cast<int64_t>(data.valid.size());
  } else {
    // Held out: the lines after 90% of the bytes. The tokenizer learns from the training lines only.
    size_t cut = text.find('\n', text.size() * 9 / 10);
    cut = cut == std::string::npos ? text.size() * 9 / 10 : cut + 1;
    const std::string train_text = text.substr(0, cut), valid_text = text.substr(cut);
    const std::string spm_path = out + "/tokenizer.spm";
    vocab.subword = true;
    if (absl::GetFlag(FLAGS_resume)) {
      vocab.pieces = ex::or_fail(ex::Tokenizer::load(kind, spm_path));
    } else {
      std::vector<std::string> lines;
      for (absl::string_view line : absl::StrSplit(train_text, '\n', absl::SkipEmpty())) lines.emplace_back(line);
      vocab.pieces = ex::or_fail(ex::Tokenizer::train(kind, lines, {.vocab_size = absl::GetFlag(FLAGS_vocab),
                                                                    .user_symbols = {LmVocab::kNewline}}));
      ex::or_fail(vocab.pieces.save(spm_path));
    }
    vocab.nl = vocab.pieces.id_of(LmVocab::kNewline);
    if (vocab.nl == ex::Tokenizer::kUnk) ex::fail(spm_path + ": the subword model has no line-break piece");
    data.train = vocab.encode(train_text);
    data.valid = vocab.encode(valid_text);
    vocab_signature = fmt::format("{} {}", ex::tokenizer_name(kind), vocab.size());
    valid_chars = static_cast<int64_t>(ex::utf8_chars(valid_text).size());
    if (static_cast<int64_t>(data.train.size()) < 20 * (T + 1) || static_cast<int64_t>(data.valid.size()) < T + 1)
      ex::fail(fmt::format("{}: {} training and {} validation tokens are too few for --context {}", text_path,
                           data.train.size(), data.valid.size(), T));
  }
  const char* unit = vocab.subword ? "token" : "char";
  tg::manual_seed(absl::GetFlag(FLAGS_seed));
  tg::LMConfig cfg{.vocab = vocab.size(), .context = T,
                   .layer = {.d_model = D, .heads = H, .d_ff = 4 * D, .dropout = absl::GetFlag(FLAGS_dropout),
                             .activation = tg::Activation::Gelu, .norm_first = true},
                   .layers = L, .tie_weights = true};
  tg::DecoderLM model(cfg);
  tg::AdamW opt(model.named_parameters(), {.lr = absl::GetFlag(FLAGS_lr), .beta1 = 0.9, .beta2 = 0.99,
                                           .weight_decay = absl::GetFlag(FLAGS_weight_decay)});
  tg::WarmupCosineSchedule schedule{.peak = absl::GetFlag(FLAGS_lr), .warmup = absl::GetFlag(FLAGS_warmup),
                                    .total = std::max<int64_t>(steps, absl::GetFlag(FLAGS_warmup) + 1),
                                    .min_lr = 0.1 * absl::GetFlag(FLAGS_lr)};
  int64_t start_step = 0;
  if (absl::GetFlag(FLAGS_resume)) {
    tg::Metadata user = ex::or_fail(tg::load_checkpoint(ckpt, model, opt));
    if (user["vocab"] != vocab_signature) ex::fail(ckpt + ": the checkpoint was trained with another vocabulary (other characters or tokenizer)");
    start_step = std::stoll(user["step"]);
    std::fprintf(stderr, "resuming from %s at step %lld\n", ckpt.c_str(), static_cast<long long>(start_step));
  }
  std::printf("train_lm: %s, %zu bytes -> %zu + %zu held-out %ss (vocabulary %lld); %lld parameters\n", text_path.c_str(),
              text.size(), data.train.size(), data.valid.size(), unit, static_cast<long long>(vocab.size()),
              static_cast<long long>(model.num_parameters()));

  ex::Metrics metrics(out + "/metrics.jsonl");
  std::vector<std::pair<double, double>> train_curve, valid_curve, lr_curve;
  ex::Progress progress(steps - start_step);
  const int64_t span = static_cast<int64_t>(data.train.size()) - T - 1;
  double smooth = NAN, valid_loss = NAN;
  for (int64_t step = start_step; step < steps; ++step) {
    tg::Generator batch_gen(absl::GetFlag(FLAGS_seed) * 1000003 + static_cast<uint64_t>(step));  // a function of the step: resumable
    std::vector<int64_t> starts(static_cast<size_t>(B));
    for (auto& s : starts) s = static_cast<int64_t>(batch_gen.next_u64() % static_cast<uint64_t>(span));
    Tensor x = window_batch(data.train, starts, T, 0), y = window_batch(data.train, starts, T, 1);
    Tensor loss = tg::cross_entropy(model.forward(x), y);
    opt.zero_grad();
    loss.backward();
    tg::clip_grad_norm(model.parameters(), 1.0);
    opt.set_lr(schedule(step + 1));
    opt.step();
    double l = loss.item();
    smooth = std::isnan(smooth) ? l : 0.95 * smooth + 0.05 * l;
    train_curve.emplace_back(static_cast<double>(step + 1), l);
    lr_curve.emplace_back(static_cast<double>(step + 1), opt.lr());
    metrics.log({{"step", static_cast<double>(step + 1)}, {"loss", l}, {"lr", opt.lr()}});
    const double elapsed = progress.elapsed();
    progress.update(step + 1 - start_step,
                    fmt::format("loss {:.3f}  lr {:.2e}  {:.0f} tok/s", smooth, opt.lr(),
                                static_cast<double>((step + 1 - start_step) * B * T) / std::max(elapsed, 1e-9)));
    if ((step + 1) % absl::GetFlag(FLAGS_eval_every) == 0 || step + 1 == steps) {
      valid_loss = evaluate(model, data.valid, T, B, absl::GetFlag(FLAGS_eval_windows));
      valid_curve.emplace_back(static_cast<double>(step + 1), valid_loss);
      metrics.log({{"step", static_cast<double>(step + 1)}, {"valid_loss", valid_loss}}, "valid");
      ex::or_fail(tg::save_checkpoint(ckpt, model, opt, {{"step", std::to_string(step + 1)}, {"vocab", vocab_signature}}));
    }
  }
  progress.finish(fmt::format("loss {:.3f}", smooth));
  if (std::isnan(valid_loss)) valid_loss = evaluate(model, data.valid, T, B, absl::GetFlag(FLAGS_eval_windows));

  tg::Generator sample_gen(absl::GetFlag(FLAGS_seed));
  std::vector<int64_t> prompt = vocab.encode(absl::GetFlag(FLAGS_prompt));
  if (prompt.empty()) prompt = {0};
  std::string sample = absl::GetFlag(FLAGS_prompt) +
                       vocab.decode(tg::sample(model, prompt,
                                               {.max_new_tokens = absl::GetFlag(FLAGS_sample),
                                                .temperature = absl::GetFlag(FLAGS_temperature),
                                                .top_k = absl::GetFlag(FLAGS_top_k)},
                                               sample_gen));
  std::string loss_text = fmt::format("{:.4f} nats/{} ({:.3f} bits/{})", valid_loss, unit, valid_loss / std::log(2.0), unit);
  if (vocab.subword) {
    const double per_token = static_cast<double>(valid_chars) / static_cast<double>(data.valid.size());
    loss_text += fmt::format(", about {:.4f} nats/char ({:.2f} characters a token)", valid_loss / per_token, per_token);
  }
  std::printf("validation loss %s, %.1f s of training\n", loss_text.c_str(), progress.elapsed());
  std::printf("--- sample ---\n%s\n--------------\n", sample.c_str());

  // Report: curves, sample, every layer's and head's attention on a piece of validation text.
  tg::report::Html html(vocab.subword ? "train_lm: subword language model" : "train_lm: character language model");
  html.paragraph(fmt::format("{}: {} bytes, {} tokenizer, vocabulary {}; model {} layers x {} heads, width {}, context {}; {} "
                             "parameters; {} steps of batch {}; validation loss {}.",
                             text_path, text.size(), ex::tokenizer_name(kind), vocab.size(), L, H, D, T, model.num_parameters(),
                             steps, B, loss_text));
  html.line_chart(fmt::format("loss (nats/{})", unit), "step", {{"train", train_curve}, {"validation", valid_curve}});
  html.line_chart("learning rate", "step", {{"lr", lr_curve}});
  html.heading("sample");
  html.preformatted(sample);
  {
    const int64_t n = std::min<int64_t>(T, std::min<int64_t>(40, static_cast<int64_t>(data.valid.size())));
    std::vector<int64_t> ids(data.valid.begin(), data.valid.begin() + n);
    model.set_record_attention(true);
    {
      tg::NoGradGuard ng;
      model.eval();
      model.forward(tg::from_vector(ids, {1, n}));
    }
    std::vector<std::string> labels;
    for (int64_t id : ids) labels.push_back(vocab.label(id));
    for (int64_t l = 0; l < L; ++l) {
      const Tensor& w = (*model.layers)[static_cast<size_t>(l)]->self_attn->last_weights;  // [1, H, n, n]
      std::vector<float> v = w.to_vector<float>();
      std::vector<tg::report::Heatmap> maps;
      for (int64_t h = 0; h < H; ++h) {
        tg::report::Heatmap m{fmt::format("layer {} head {}", l, h), {}, labels, labels};
        for (int64_t i = 0; i < n; ++i)
          m.w.emplace_back(v.begin() + (h * n + i) * n, v.begin() + (h * n + i + 1) * n);
        maps.push_back(std::move(m));
      }
      html.heatmap_grid(fmt::format("self-attention, layer {} (rows: queries, columns: keys; causal)", l), maps, 4);
    }
    model.set_record_attention(false);
  }
  ex::or_fail(html.write(out + "/report.html"));
  std::printf("wrote %s/report.html, %s, %s\n", out.c_str(), metrics.path().c_str(), ckpt.c_str());
  return 0;
}
