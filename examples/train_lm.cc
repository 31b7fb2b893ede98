// train_lm: a decoder-only language model of characters or subwords on any text file, GPT-2's
// architecture or Llama's.
//
//   ./build/train_lm --text data/kjv.txt --layers 4 --heads 4 --width 128 --context 64 --batch 12 --steps 2000
//   ./build/train_lm --text data/kjv.txt --tokenizer bpe --vocab 2000     # SentencePiece subwords
//   ./build/train_lm --text data/kjv.txt --arch llama --kv_heads 2 --tokenizer byte_bpe --vocab 2000
//   ./build/train_lm --load runs/lm --prompt "And God said" --sample 200  # generate, no training
//
// --device auto trains on the GPU where one is usable (cpu, cuda, cuda:N to choose).
//
// --arch gpt: learned positions, LayerNorm, GELU feed-forward (GPT-2). --arch llama: rotary
// positions, RMSNorm, SwiGLU feed-forward, grouped-query attention with --kv_heads (Llama, Mistral,
// SmolLM). Both tie the output head to the embedding. The model is saved as a Hugging Face folder
// (OUT/config.json, OUT/model.safetensors) that `generate --model OUT` and transformers'
// AutoModelForCausalLM load; with --tokenizer byte_bpe (GPT-2's byte-level BPE, trained here) the
// tokenizer is OUT/tokenizer.json, which transformers' AutoTokenizer loads too.
//
// The last 10% of the file is held out; validation loss is in nats per token (a character, or a
// subword piece; then nats per character too). The text is cut into windows of --context + 1
// tokens, reshuffled every epoch. Writes OUT/metrics.jsonl, OUT/checkpoint-*.safetensors
// (--resume), OUT/config.json and OUT/model.safetensors (for --load and generate), OUT/tokenizer.*
// and OUT/report.html (curves, a sample, the attention of every layer and head on validation text).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include <tapegrad/tapegrad.h>

using tg::Tensor;

namespace {

struct Options {
  std::string text = "data/kjv.txt", out = "runs/lm", tokenizer = "char", prompt = "\n", load, precision = "fp32", arch = "gpt";
  std::string device = "auto";
  int64_t vocab = 2000, layers = 4, heads = 4, kv_heads = 0, width = 128, d_ff = 0, context = 64, batch = 12, steps = 2000;
  int64_t warmup = 100, eval_every = 250, eval_windows = 200, sample = 300, top_k = 0, threads = 0;
  double lr = 1e-3, dropout = 0, weight_decay = 0.01, temperature = 0.8, top_p = 1.0, rope_theta = 10000;
  uint64_t seed = 1;
  bool resume = false, overwrite = false;
};

tg::LMConfig model_config(const Options& o, int64_t vocab) {
  return {.vocab = vocab, .context = o.context,
          .layer = {.d_model = o.width, .heads = o.heads, .d_ff = 4 * o.width, .dropout = o.dropout,
                    .activation = tg::Activation::kGelu, .norm_first = true},
          .layers = o.layers, .tie_weights = true};
}

// The feed-forward width: 4 x width for GPT; for Llama's SwiGLU, whose three matrices would hold
// the parameters of two, 2/3 of that rounded up to a multiple of 8.
int64_t ffn_width(const Options& o) {
  if (o.d_ff > 0) return o.d_ff;
  return o.arch == "gpt" ? 4 * o.width : (8 * o.width / 3 + 7) / 8 * 8;
}

// The model --arch names, its token ids for the start and end of text from the tokenizer.
std::unique_ptr<tg::CausalLM> new_model(const Options& o, const tg::text::Tokenizer& tok) {
  // GPT-2's <|endoftext|> starts and ends texts (a trained byte_bpe has it at id 0); ours have <bos> and <eos>.
  const int64_t eot = tok.kind() == "byte_bpe" ? tok.id_of("<|endoftext|>") : -1;
  const int64_t bos = tok.bos_id() >= 0 ? tok.bos_id() : eot, eos = tok.eos_id() >= 0 ? tok.eos_id() : eot;
  if (o.arch == "gpt") {
    tg::LMConfig c = model_config(o, tok.size());
    c.layer.d_ff = ffn_width(o);
    c.bos_id = bos, c.eos_id = eos;
    return std::make_unique<tg::DecoderLM>(c);
  }
  return std::make_unique<tg::LlamaForCausalLM>(tg::LlamaConfig{
      .vocab = tok.size(), .hidden = o.width, .intermediate = ffn_width(o), .layers = o.layers, .heads = o.heads,
      .kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads, .max_positions = o.context, .rms_eps = 1e-5,
      .rope_theta = o.rope_theta, .tie_word_embeddings = true, .bos_id = bos, .eos_id = eos});
}

// Beside the model: what transformers' AutoTokenizer needs to load OUT/tokenizer.json.
void write_tokenizer_config(const std::string& dir, const tg::CausalLM& lm, const tg::text::Tokenizer& tok) {
  nlohmann::ordered_json j = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", lm.max_positions()},
                              {"clean_up_tokenization_spaces", false}};
  if (lm.bos_token_id() >= 0) j["bos_token"] = tok.token(lm.bos_token_id());
  if (lm.eos_token_id() >= 0) j["eos_token"] = tok.token(lm.eos_token_id());
  tg::write_file_atomic(dir + "/tokenizer_config.json", j.dump(2) + "\n").or_throw();
}

void attention_maps(tg::report::Html& html, tg::CausalLM& model, const tg::text::Tokenizer& tok, const std::vector<int64_t>& text,
                    const Options& o, tg::Device device) {
  const int64_t n = std::min<int64_t>({o.context, 40, static_cast<int64_t>(text.size())});
  std::vector<int64_t> ids(text.begin(), text.begin() + n);
  tg::NoGradGuard ng;
  model.module().eval();
  const std::vector<Tensor> maps =
      tg::record_attention(model.module(), [&] { model.forward(tg::from_vector(ids, {1, n}).to(device)); });
  std::vector<std::string> labels;
  for (int64_t id : ids) labels.push_back(tok.label(id));
  for (size_t l = 0; l < maps.size(); ++l)
    html.heatmap_grid(fmt::format("self-attention, layer {} (rows: queries, columns: keys; causal)", l),
                      tg::report::head_heatmaps(maps[l].to(tg::kCPU), fmt::format("layer {}", l), labels, labels));
}

std::string generate(tg::CausalLM& model, const tg::text::Tokenizer& tok, const Options& o) {
  tg::Generator gen(o.seed);
  std::vector<int64_t> prompt = tok.encode(o.prompt);
  // An empty prompt starts from the start-of-text token (or, without one, from id 0).
  if (prompt.empty()) prompt = {model.bos_token_id() >= 0 ? model.bos_token_id() : 0};
  model.module().eval();
  return o.prompt + tok.decode(tg::sample(model, prompt, {.max_new_tokens = o.sample, .temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p},
                                          gen));
}

// --load DIR: the saved model and tokenizer, a sample, no training. DIR is a Hugging Face folder
// (config.json, as train_lm writes since --arch) or an earlier run's model.safetensors with the
// sizes in its metadata.
int generate_only(const Options& o, tg::Device device) {
  std::unique_ptr<tg::text::Tokenizer> tok = tg::text::Tokenizer::load_in(o.load).value();
  if (std::filesystem::exists(o.load + "/config.json")) {
    std::unique_ptr<tg::CausalLM> lm = tg::load_causal_lm(o.load).value();
    lm->module().to(device);
    if (tok->size() > lm->vocab_size())
      tg::cli::fail(fmt::format("{}: the tokenizer has {} tokens, the model {}: not the tokenizer it was trained with", o.load,
                                tok->size(), lm->vocab_size()));
    std::printf("%s\n", generate(*lm, *tok, o).c_str());
    return 0;
  }
  const std::string path = o.load + "/model.safetensors";
  tg::SafetensorsFile f = tg::load_safetensors(path).value();
  Options m = o;
  m.layers = tg::metadata_int(f.metadata, "layers", path, 1, 256).value();
  m.heads = tg::metadata_int(f.metadata, "heads", path, 1, 1024).value();
  m.width = tg::metadata_int(f.metadata, "width", path, 1, 16384).value();
  m.context = tg::metadata_int(f.metadata, "context", path, 2, 1 << 20).value();
  if (m.width % m.heads != 0) tg::cli::fail(fmt::format("{}: width {} is not a multiple of heads {}", path, m.width, m.heads));
  const std::string want = tg::metadata_string(f.metadata, "tokenizer_fingerprint", path).value();
  if (tok->fingerprint() != want)
    tg::cli::fail(fmt::format("{}: the tokenizer file in {} is not the one this model was trained with (fingerprint {}, expected {})",
                              path, o.load, tok->fingerprint(), want));
  // Every size the model grows with is checked against the file's tensors before it is built.
  const int64_t V = tok->size(), W = m.width;
  tg::check_implied_shapes(f, path,
                           {{"tok_embed.weight", {V, W}}, {"pos_embed.weight", {m.context, W}}, {"layers.0.ffn.linear1.weight", {4 * W, W}}},
                           "the metadata and tokenizer")
      .or_throw();
  tg::check_layer_count(f, path, "", m.layers).or_throw();
  tg::DecoderLM model(model_config(m, tok->size()));
  tg::load_module(model, path).value();
  model.to(device);
  std::printf("%s\n", generate(model, *tok, o).c_str());
  return 0;
}

int run(int argc, char** argv) {
  Options o;
  tg::cli::Flags f("train_lm", "train a GPT-2- or Llama-style language model of characters or subwords on any text (or sample from one)");
  f.add("text", &o.text, "training text (plain UTF-8; .gz accepted); `./tg.sh data` writes the default").not_empty();
  f.add("out", &o.out, "output folder: model, tokenizer, checkpoints, metrics.jsonl, report.html").not_empty();
  f.add("load", &o.load, "sample from the model saved in this folder instead of training");
  f.add("arch", &o.arch, "gpt (learned positions, LayerNorm, GELU) or llama (rotary positions, RMSNorm, SwiGLU, --kv_heads)")
      .choices({"gpt", "llama"});
  f.add("tokenizer", &o.tokenizer,
        "char, or subwords trained on the training part: bpe or unigram (SentencePiece), byte_bpe (GPT-2's byte-level BPE, "
        "tokenizer.json)")
      .choices({"char", "bpe", "unigram", "byte_bpe"});
  f.add("vocab", &o.vocab, "subword vocabulary (with --tokenizer bpe, unigram or byte_bpe; byte_bpe: at least 257)").range(8, 1000000);
  f.add("layers", &o.layers, "transformer blocks").range(1, 256);
  f.add("heads", &o.heads, "attention heads per block").range(1, 1024);
  f.add("kv_heads", &o.kv_heads, "--arch llama: key/value heads, a divisor of --heads (grouped-query attention; 0: --heads)").range(0, 1024);
  f.add("width", &o.width, "model width d_model").range(1, 16384);
  f.add("d_ff", &o.d_ff, "feed-forward width (0: 4 x width for gpt, 8/3 x width rounded up to a multiple of 8 for llama)").range(0, 1 << 20);
  f.add("rope_theta", &o.rope_theta, "--arch llama: the rotary base").above(1);
  f.add("context", &o.context, "tokens per training sequence").range(2, 1 << 20);
  f.add("batch", &o.batch, "sequences per step").range(1, 1 << 20);
  f.add("steps", &o.steps, "training steps").min(1);
  f.add("lr", &o.lr, "peak learning rate (AdamW, warm-up then cosine decay to 10%)").above(0);
  f.add("warmup", &o.warmup, "warm-up steps").min(0);
  f.add("dropout", &o.dropout, "dropout").range(0, 0.999);
  f.add("weight_decay", &o.weight_decay, "AdamW weight decay").min(0);
  f.add("eval_every", &o.eval_every, "steps between validation runs").min(1);
  f.add("eval_windows", &o.eval_windows, "validation windows (of --context tokens, evenly spaced)").min(1);
  f.add("sample", &o.sample, "tokens to sample at the end").min(0);
  f.add("temperature", &o.temperature, "sampling temperature (0: greedy)").min(0);
  f.add("top_k", &o.top_k, "sample among the k most likely tokens (0: all)").min(0);
  f.add("top_p", &o.top_p, "sample among the most likely tokens whose probability reaches p (nucleus; 1: all)").range(1e-9, 1);
  f.add("prompt", &o.prompt, "text the sample continues");
  f.add("seed", &o.seed, "random seed (weights, data order, dropout, sampling)");
  f.add("threads", &o.threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
  tg::cli::add_precision(f, &o.precision);
  tg::cli::add_device(f, &o.device);
  f.add("resume", &o.resume, "continue from the newest checkpoint in OUT");
  f.add("overwrite", &o.overwrite, "replace an earlier run in OUT");
  f.check([&o] { return o.width % o.heads == 0 ? "" : fmt::format("--width {} must be a multiple of --heads {}", o.width, o.heads); });
  f.check([&o] { return o.resume && o.overwrite ? "--resume and --overwrite exclude each other" : ""; });
  f.check([&o] {
    return o.kv_heads > 0 && o.heads % o.kv_heads != 0
               ? fmt::format("--kv_heads {} must divide --heads {}", o.kv_heads, o.heads) : "";
  });
  f.check([&o, &f] {
    for (const char* flag : {"kv_heads", "rope_theta"})
      if (o.arch != "llama" && f.given(flag)) return fmt::format("--{} is for --arch llama", flag);
    return std::string();
  });
  f.check([&o] {
    return o.arch == "llama" && (o.width / o.heads) % 2 != 0
               ? fmt::format("--arch llama: the head width --width / --heads = {} must be even (rotary positions turn pairs)",
                             o.width / o.heads) : "";
  });
  f.check([&o] {
    return o.tokenizer == "byte_bpe" && o.vocab < 257
               ? fmt::format("--vocab {}: a byte_bpe vocabulary holds <|endoftext|> and the 256 bytes at least (257)", o.vocab) : "";
  });
  f.check([&o] { return o.arch == "llama" && o.dropout != 0 ? "--dropout: the llama architecture has none (0 only)" : ""; });
  f.check([&o, &f] {
    return o.tokenizer == "char" && f.given("vocab")
               ? fmt::format("--vocab {}: sets the number of subword pieces, with --tokenizer bpe, unigram or byte_bpe (the char "
                             "tokenizer keeps every character)", o.vocab)
               : "";
  });
  f.check([&o] { return !o.load.empty() && (o.resume || o.overwrite) ? "--load samples only: no --resume or --overwrite" : ""; });
  f.parse(argc, argv).or_throw();
  if (o.threads > 0) tg::set_num_threads(static_cast<int>(o.threads));
  // bf16: training (the Trainer's option), evaluation, sampling and the report's attention maps
  // run their matrix products under autocast.
  const tg::DType precision = tg::cli::precision(o.precision);
  tg::AutocastGuard autocast(precision);
  const tg::Device device = tg::cli::training_device(o.device);  // before any work: a missing GPU is one line
  if (!o.load.empty()) return generate_only(o, device);
  tg::make_dirs(o.out).or_throw();
  tg::train::check_run_dir(o.out, o.resume, o.overwrite).or_throw();

  // Data: the lines after 90% of the bytes are held out; the tokenizer learns from the rest only.
  const std::string text = tg::read_text(o.text).value();
  if (static_cast<int64_t>(text.size()) < 20 * (o.context + 1))
    tg::cli::fail(fmt::format("{}: {} bytes is too little text for --context {} (need at least {})", o.text, text.size(), o.context,
                              20 * (o.context + 1)));
  size_t cut = text.find('\n', text.size() * 9 / 10);
  cut = cut == std::string::npos ? text.size() * 9 / 10 : cut + 1;
  const std::string train_text = text.substr(0, cut), valid_text = text.substr(cut);
  std::unique_ptr<tg::text::Tokenizer> tok;
  if (o.resume) {
    tok = tg::text::Tokenizer::load_in(o.out).value();
  } else {
    // The char tokenizer counts every character and byte_bpe every piece, line breaks included;
    // SentencePiece learns from lines.
    const bool whole = o.tokenizer == "char" || o.tokenizer == "byte_bpe";
    const std::vector<std::string> lines = whole ? std::vector<std::string>{train_text} : tg::text::parse_lines(train_text, o.text).value();
    tok = tg::text::Tokenizer::train(o.tokenizer, lines,
                                     {.vocab_size = o.tokenizer == "char" ? (int64_t{1} << 20) : o.vocab,
                                      .min_count = o.tokenizer == "byte_bpe" ? 2 : 1, .keep_newlines = true})
              .value();
    tok->save_in(o.out).or_throw();
  }
  const int64_t T = o.context;
  // Windows of T + 1 tokens at stride T; validation: at most --eval_windows of them, evenly spaced.
  const tg::text::TokenWindows train(tok->encode(train_text), T), valid(tok->encode(valid_text), T, o.eval_windows);
  const std::vector<int64_t>& train_ids = train.ids();
  const std::vector<int64_t>& valid_ids = valid.ids();
  if (static_cast<int64_t>(train_ids.size()) < 20 * (T + 1) || valid.size() == 0)
    tg::cli::fail(fmt::format("{}: {} training and {} validation tokens are too few for --context {}", o.text, train_ids.size(),
                              valid_ids.size(), T));
  const bool chars = tok->kind() == "char";
  const char* unit = chars ? "char" : "token";
  const int64_t nv = valid.size();

  tg::manual_seed(o.seed);
  std::unique_ptr<tg::CausalLM> lm = new_model(o, *tok);
  tg::Module& model = lm->module();
  model.to(device);  // in place, before the optimizer takes the parameters
  tg::AdamW opt(model.named_parameters(), {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = o.weight_decay});
  std::printf("train_lm: %s, %zu bytes -> %zu + %zu held-out %ss (vocabulary %lld, %s); %lld windows of %lld; %s, %lld "
              "parameters; on %s\n",
              o.text.c_str(), text.size(), train_ids.size(), valid_ids.size(), unit, static_cast<long long>(tok->size()),
              tok->kind().c_str(), static_cast<long long>(train.size()), static_cast<long long>(T), model.type_name().c_str(),
              static_cast<long long>(model.num_parameters()), tg::cli::describe_device(device).c_str());

  // What a resumed run must share with the run it continues (--steps, --lr and the rest may change).
  const tg::Metadata config = {{"--text", tg::canonical_path(o.text)},
                               {"--tokenizer", o.tokenizer},
                               {"--vocab", o.tokenizer == "char" ? "" : std::to_string(o.vocab)},
                               {"--arch", o.arch},
                               {"--layers", std::to_string(o.layers)},
                               {"--heads", std::to_string(o.heads)},
                               {"--kv_heads", std::to_string(o.kv_heads)},
                               {"--width", std::to_string(o.width)},
                               {"--d_ff", std::to_string(ffn_width(o))},
                               {"--rope_theta", fmt::format("{}", o.rope_theta)},
                               {"--context", std::to_string(T)},
                               {"--batch", std::to_string(o.batch)},
                               {"--dropout", fmt::format("{}", o.dropout)},
                               {"--weight_decay", fmt::format("{}", o.weight_decay)},
                               {"--seed", std::to_string(o.seed)}};
  tg::train::Trainer trainer(model, opt, {.run_dir = o.out, .max_steps = o.steps, .clip_grad_norm = 1.0,
                                          .eval_every = o.eval_every, .keep_last = 2, .seed = o.seed, .unit = "tok",
                                          .precision = precision,
                                          .config = config, .tokenizer_fingerprint = tok->fingerprint()});
  trainer.set_schedule(tg::WarmupCosineSchedule{.peak = o.lr, .warmup = o.warmup, .total = std::max(o.steps, o.warmup + 1),
                                                .min_lr = 0.1 * o.lr});
  auto lm_step = [&](const tg::text::TokenWindows& w) {
    return tg::train::CrossEntropyStep{[&](const std::vector<int64_t>& ids) { return lm->forward(w.inputs(ids).to(device)); },
                                       [&](const std::vector<int64_t>& ids) { return w.targets(ids); }};
  };
  const auto valid_batches = tg::train::sequential_batches(nv, o.batch);
  auto evaluate = [&] { return std::map<std::string, double>{{"valid_loss", trainer.evaluate_loss(valid_batches, lm_step(valid))}}; };
  // With every checkpoint, the model as a Hugging Face folder (config.json, model.safetensors).
  trainer.callbacks.on_checkpoint = [&](const std::string&) {
    lm->save_pretrained(o.out, /*overwrite=*/true).or_throw();
    if (tok->kind() == "byte_bpe") write_tokenizer_config(o.out, *lm, *tok);
  };
  if (o.resume) {
    trainer.resume().or_throw();
    std::fprintf(stderr, "resuming from %s at step %lld\n", trainer.last_checkpoint().c_str(),
                 static_cast<long long>(trainer.state().step));
  } else {
    trainer.start(o.overwrite).or_throw();
  }
  tg::train::FitResult r = trainer.fit(tg::train::ShuffledSampler(train.size(), o.batch), lm_step(train),
                                       evaluate);
  if (!tg::dist::is_main()) return r.exit_code();  // process 0 samples and reports
  if (r.diverged() || r.interrupted()) {  // interrupted: the checkpoint is saved; --resume continues
    std::fprintf(stderr, "train_lm: %s%s\n", r.message.c_str(),
                 r.interrupted() ? fmt::format("; saved {} (continue with --resume)", r.last_checkpoint).c_str() : "");
    return r.exit_code();
  }

  const auto& vh = trainer.history().at("valid/valid_loss");
  const double valid_loss = vh.back().second;
  std::string loss_text = fmt::format("{:.4f} nats/{} ({:.3f} bits/{})", valid_loss, unit, valid_loss / std::log(2.0), unit);
  if (!chars) {
    const double per_token = static_cast<double>(tg::text::utf8_chars(valid_text).size()) / static_cast<double>(valid_ids.size());
    loss_text += fmt::format(", about {:.4f} nats/char ({:.2f} characters a token)", valid_loss / per_token, per_token);
  }
  const std::string sample = generate(*lm, *tok, o);
  std::printf("validation loss %s (perplexity %.2f), %.1f s of training\n", loss_text.c_str(), std::exp(valid_loss),
              trainer.state().seconds);
  std::printf("--- sample ---\n%s\n--------------\n", sample.c_str());

  tg::report::Html html(fmt::format("train_lm: {} language model ({})", chars ? "character" : "subword", model.type_name()));
  html.paragraph(fmt::format("{}: {} bytes, {} tokenizer, vocabulary {}; {} of {} layers x {} heads{}, width {}, feed-forward {}, "
                             "context {}; {} parameters; {} steps of batch {}; validation loss {}.",
                             o.text, text.size(), tok->kind(), tok->size(), model.type_name(), o.layers, o.heads,
                             o.arch == "llama" ? fmt::format(" ({} key/value)", o.kv_heads > 0 ? o.kv_heads : o.heads) : "", o.width,
                             ffn_width(o), T, model.num_parameters(), r.step, o.batch, loss_text));
  tg::train::add_training_charts(html, trainer.history(), fmt::format("nats/{}", unit));
  html.heading("sample");
  html.preformatted(sample);
  attention_maps(html, *lm, *tok, valid_ids, o, device);
  html.write(o.out + "/report.html").or_throw();
  std::printf("wrote %s/report.html, config.json + model.safetensors (generate --model %s), metrics.jsonl, %s\n", o.out.c_str(),
              o.out.c_str(),
              r.last_checkpoint.substr(r.last_checkpoint.find_last_of('/') + 1).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] { return run(argc, argv); });
}
