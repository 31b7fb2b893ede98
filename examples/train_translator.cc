// train_translator: an encoder-decoder transformer on sentence pairs, within a wall-clock budget.
//
//   ./build/train_translator --minutes 5                      # German->English pairs from trans-de-en
//   ./build/train_translator --src train.de.gz --tgt train.en.gz --valid_src val.de.gz --valid_tgt val.en.gz --minutes 60
//   ./build/train_translator --tokenizer bpe --vocab 8000   # SentencePiece BPE (or: word, char, unigram)
//
// Data, tokenizers and model here; the loop (epochs, clipping, checkpoints, resume, metrics, the
// divergence stop) is tg::train::Trainer. Each epoch: validation loss and corpus BLEU (sacreBLEU's
// definition). At the end: BLEU on the whole validation set, beam-search samples, and
// SAVE/report.html with the curves and every layer's and head's attention for one sentence.
// `translate --load SAVE` then translates stdin.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <tapegrad/tapegrad.h>

using tg::Tensor;

namespace {

struct Options {
  std::string src, tgt, pairs, ding = "/usr/share/trans/de-en", valid_src, valid_tgt, save = "runs/translator";
  bool resume = false, overwrite = false;
  double minutes = 5;
  int64_t steps = 0, epochs = 1000;
  tg::text::TranslatorConfig cfg;
  int64_t vocab = 8000, min_count = 2, batch_tokens = 1500, max_tokens = 60, warmup = 200, beam = 4, bleu_sentences = 400;
  int64_t samples = 5;
  bool lowercase = false, final_bleu = true, beam_bleu = false;
  double lr = 1e-3, label_smoothing = 0.1;
  uint64_t seed = 1;
  int64_t threads = 0;
  std::string precision = "fp32", projections = "learned", device = "auto";
};

void define_flags(tg::cli::Flags& f, Options& o) {
  f.add("src", &o.src, "training source sentences, one a line (with --tgt; .gz accepted)");
  f.add("tgt", &o.tgt, "training target sentences, aligned with --src");
  f.add("pairs", &o.pairs, "training pairs as 'source<TAB>target' lines (instead of --src/--tgt)");
  f.add("ding", &o.ding, "the default data: the Ding dictionary of Debian's trans-de-en");
  f.add("valid_src", &o.valid_src, "validation sources (default: 2% of the training pairs, by hash)");
  f.add("valid_tgt", &o.valid_tgt, "validation targets");
  f.add("save", &o.save, "folder for the model, tokenizers, checkpoints, metrics and report").not_empty();
  f.add("resume", &o.resume, "continue from the newest checkpoint in SAVE");
  f.add("overwrite", &o.overwrite, "replace an earlier run in SAVE");
  f.add("minutes", &o.minutes, "wall-clock training budget").above(0);
  f.add("steps", &o.steps, "stop after this many optimizer steps (0: no limit)").min(0);
  f.add("epochs", &o.epochs, "most epochs").min(1);
  f.add("layers", &o.cfg.layers, "encoder and decoder layers (each)").range(1, 64);
  f.add("width", &o.cfg.width, "d_model").range(1, 16384);
  f.add("heads", &o.cfg.heads, "attention heads").range(1, 1024);
  f.add("ff", &o.cfg.ff, "feed-forward width").range(1, 65536);
  f.add("dropout", &o.cfg.dropout, "dropout").range(0, 0.999);
  f.add("tokenizer", &o.cfg.tokenizer, "word, char, or SentencePiece subwords: bpe or unigram (trained on the training text)")
      .choices({"word", "char", "bpe", "unigram"});
  f.add("vocab", &o.vocab, "vocabulary per language: the most words or characters kept, or the number of subword pieces")
      .range(10, 1000000);
  f.add("min_count", &o.min_count, "rarer words or characters become <unk> (word, char)").min(1);
  f.add("lowercase", &o.lowercase, "lower-case before tokenizing");
  f.add("batch_tokens", &o.batch_tokens, "padded target tokens per batch").min(1);
  f.add("max_tokens", &o.max_tokens, "drop training pairs longer than this (tokens, either side)").range(1, 250);
  f.add("lr", &o.lr, "peak learning rate (AdamW; linear warm-up, then 1/sqrt(step))").above(0);
  f.add("warmup", &o.warmup, "warm-up steps").min(1);
  f.add("label_smoothing", &o.label_smoothing, "label smoothing").range(0, 0.999);
  f.add("beam", &o.beam, "beam size for the sample translations").range(1, 64);
  f.add("bleu_sentences", &o.bleu_sentences, "validation sentences translated (greedy) for BLEU each epoch (0: all)").min(0);
  f.add("final_bleu", &o.final_bleu, "after training, BLEU on every validation sentence (greedy, batched)");
  f.add("beam_bleu", &o.beam_bleu, "with --final_bleu, also with beam search (slower: one sentence at a time)");
  f.add("samples", &o.samples, "validation sentences to translate with beam search at the end").min(0);
  f.add("seed", &o.seed, "random seed");
  f.add("threads", &o.threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
  tg::cli::add_precision(f, &o.precision);
  tg::cli::add_device(f, &o.device);
  f.add("projections", &o.projections,
        "W_Q, W_K, W_V of every attention: learned, identity (Q = K = V = X, not trained) or frozen (kept at their "
        "random initialisation); an ablation, as explain_attention's experiment 2")
      .choices({"learned", "identity", "frozen"});
  f.check([&o] {
    return o.cfg.width % o.cfg.heads == 0
               ? std::string()
               : fmt::format("--width {} must be a multiple of --heads {}", o.cfg.width, o.cfg.heads);
  });
  f.check([&o] {
    const bool aligned = !o.src.empty() || !o.tgt.empty();
    if (aligned && (o.src.empty() || o.tgt.empty())) return std::string("--src and --tgt go together");
    if (aligned && !o.pairs.empty()) return std::string("give either --pairs or --src/--tgt, not both");
    if (o.valid_src.empty() != o.valid_tgt.empty()) return std::string("--valid_src and --valid_tgt go together");
    return std::string();
  });
  f.check([&o] { return o.resume && o.overwrite ? std::string("--resume and --overwrite exclude each other") : std::string(); });
}

int run(int argc, char** argv) {
  Options o;
  tg::cli::Flags flags("train_translator", "train an encoder-decoder transformer translator on sentence pairs");
  define_flags(flags, o);
  flags.parse(argc, argv).or_throw();
  if (o.threads > 0) tg::set_num_threads(static_cast<int>(o.threads));
  const tg::Device device = tg::cli::training_device(o.device);  // before any work: a missing GPU is one line
  // bf16: training (the Trainer's option), evaluation, BLEU and the samples under autocast.
  const tg::DType precision = tg::cli::precision(o.precision);
  tg::AutocastGuard autocast(precision);
  const std::string& dir = o.save;
  tg::make_dirs(dir).or_throw();
  tg::train::check_run_dir(dir, o.resume, o.overwrite).or_throw();

  // Data.
  tg::text::Pairs train_pairs, valid_pairs;
  std::string source;
  if (!o.pairs.empty()) {
    source = o.pairs;
    train_pairs = tg::text::read_tsv(source).value();
  } else if (!o.src.empty()) {
    source = o.src + " / " + o.tgt;
    train_pairs = tg::text::read_aligned(o.src, o.tgt).value();
  } else {
    source = o.ding;
    train_pairs = tg::text::read_ding_pairs(source).value();
  }
  if (!o.valid_src.empty()) {
    valid_pairs = tg::text::read_aligned(o.valid_src, o.valid_tgt).value();
  } else {
    tg::text::Split split = tg::text::split_pairs(train_pairs);
    train_pairs = std::move(split.train);
    valid_pairs = std::move(split.valid);
    if (valid_pairs.empty()) tg::cli::fail(source + ": too few pairs to hold out a validation set; pass --valid_src/--valid_tgt");
  }

  // Tokenizers: trained on the training text, or those of the run being resumed.
  std::unique_ptr<tg::text::Tokenizer> src_tok, tgt_tok;
  if (o.resume) {
    src_tok = tg::text::Tokenizer::load_in(dir, "src").value();
    tgt_tok = tg::text::Tokenizer::load_in(dir, "tgt").value();
  } else {
    std::vector<std::string> s, t;
    for (const auto& [a, b] : train_pairs) s.push_back(a), t.push_back(b);
    const tg::text::TrainOptions to{.vocab_size = o.vocab, .min_count = o.min_count, .lowercase = o.lowercase};
    tg::train::Progress timer(1);
    src_tok = tg::text::Tokenizer::train(o.cfg.tokenizer, s, to).value();
    tgt_tok = tg::text::Tokenizer::train(o.cfg.tokenizer, t, to).value();
    src_tok->save_in(dir, "src").or_throw();
    tgt_tok->save_in(dir, "tgt").or_throw();
    std::printf("%s tokenizers: %lld / %lld tokens (%.1f s), saved in %s\n", o.cfg.tokenizer.c_str(),
                static_cast<long long>(src_tok->size()), static_cast<long long>(tgt_tok->size()), timer.elapsed(), dir.c_str());
  }
  std::vector<int64_t> kept;
  std::vector<tg::text::Example> train = tg::text::encode_pairs(train_pairs, *src_tok, *tgt_tok, o.max_tokens);
  std::vector<tg::text::Example> valid = tg::text::encode_pairs(valid_pairs, *src_tok, *tgt_tok, 250, &kept);
  std::vector<std::string> valid_src_text, valid_refs;  // the pairs that survived encoding
  for (int64_t i : kept) {
    valid_src_text.push_back(valid_pairs[static_cast<size_t>(i)].first);
    valid_refs.push_back(valid_pairs[static_cast<size_t>(i)].second);
  }
  if (train.empty()) tg::cli::fail(source + ": no training pairs left after tokenizing (all empty or longer than --max_tokens)");
  if (valid.empty()) tg::cli::fail(source + ": no validation pairs left after tokenizing");
  const tg::text::SpecialIds ids = tg::text::special_ids(*tgt_tok);

  // Model and optimizer.
  tg::manual_seed(o.seed);
  tg::text::Translator translator = tg::text::Translator::create(o.cfg, std::move(src_tok), std::move(tgt_tok));
  tg::Transformer& model = *translator.model;
  const tg::text::Tokenizer &src_tokenizer = *translator.src, &tgt_tokenizer = *translator.tgt;
  // Before the optimizer: fixed projections are not its parameters.
  tg::fix_attention_projections(model, o.projections == "identity" ? tg::Projections::kIdentity
                                       : o.projections == "frozen" ? tg::Projections::kFrozen
                                                                   : tg::Projections::kLearned);
  model.to(device);  // in place, before the optimizer takes the parameters
  tg::AdamW opt(model.named_parameters(), {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01});
  std::printf("train_translator: %s: %zu training pairs, %zu validation; vocabularies %lld / %lld; %lld parameters; on %s\n",
              source.c_str(), train.size(), valid.size(), static_cast<long long>(src_tokenizer.size()),
              static_cast<long long>(tgt_tokenizer.size()), static_cast<long long>(model.num_parameters()),
              tg::cli::describe_device(device).c_str());

  // The loop.
  // What a resumed run must share with the run it continues (--minutes, --steps, --epochs, --lr
  // and the rest may change); data files by their canonical paths.
  tg::Metadata config = {{"--src", tg::canonical_path(o.src)},
                               {"--tgt", tg::canonical_path(o.tgt)},
                               {"--pairs", tg::canonical_path(o.pairs)},
                               {"--ding", o.pairs.empty() && o.src.empty() ? tg::canonical_path(o.ding) : ""},
                               {"--valid_src", tg::canonical_path(o.valid_src)},
                               {"--valid_tgt", tg::canonical_path(o.valid_tgt)},
                               {"--layers", std::to_string(o.cfg.layers)},
                               {"--width", std::to_string(o.cfg.width)},
                               {"--heads", std::to_string(o.cfg.heads)},
                               {"--ff", std::to_string(o.cfg.ff)},
                               {"--dropout", fmt::format("{}", o.cfg.dropout)},
                               {"--tokenizer", o.cfg.tokenizer},
                               {"--vocab", std::to_string(o.vocab)},
                               {"--min_count", std::to_string(o.min_count)},
                               {"--lowercase", o.lowercase ? "true" : "false"},
                               {"--batch_tokens", std::to_string(o.batch_tokens)},
                               {"--max_tokens", std::to_string(o.max_tokens)},
                               {"--label_smoothing", fmt::format("{}", o.label_smoothing)},
                               {"--seed", std::to_string(o.seed)}};
  // Named only when not the default, so that runs saved before the flag existed still resume.
  if (o.projections != "learned") config["--projections"] = o.projections;
  tg::train::Trainer trainer(model, opt,
                             {.run_dir = dir, .max_steps = o.steps, .max_epochs = o.epochs, .max_minutes = o.minutes,
                              .clip_grad_norm = 1.0, .eval_each_epoch = true, .keep_last = 2, .seed = o.seed * 7919,
                              .unit = "tok", .precision = precision, .config = config,
                              .tokenizer_fingerprint = src_tokenizer.fingerprint() + tgt_tokenizer.fingerprint()});
  const double peak = o.lr, warmup = static_cast<double>(o.warmup);
  trainer.set_schedule([=](int64_t step) {  // the paper's shape, scaled to peak at `warmup`
    const double s = static_cast<double>(step);
    return peak * std::min(s / warmup, std::sqrt(warmup / s));
  });
  auto seq2seq_step = [&](const std::vector<tg::text::Example>& data, double smoothing) {
    return [&, smoothing](const std::vector<int64_t>& idx) {
      tg::text::Seq2SeqBatch b = tg::text::make_seq2seq_batch(data, idx, ids);
      Tensor loss = tg::cross_entropy(model.forward(b.src.to(device), b.tgt_in.to(device)), b.tgt_out.to(device),
                                      {.ignore_index = ids.pad, .label_smoothing = smoothing, .reduction = tg::Reduction::kSum});
      return tg::train::StepOutput{loss, static_cast<double>(b.tokens)};
    };
  };
  const auto valid_batches = tg::text::bucket_batches(valid, o.batch_tokens);
  auto greedy_bleu = [&](const tg::text::Translator& t, int64_t n) {  // the first n validation pairs (0: all)
    const std::vector<std::string> hyps = t.translate_greedy(valid, n);
    return tg::text::corpus_bleu(hyps, {valid_refs.begin(), valid_refs.begin() + static_cast<std::ptrdiff_t>(hyps.size())});
  };
  auto evaluate = [&] {
    const double vl = trainer.evaluate_loss(valid_batches, seq2seq_step(valid, 0.0));
    const tg::text::Bleu bleu = greedy_bleu(translator, o.bleu_sentences);
    std::printf("\nstep %lld (epoch %lld): validation loss %.3f, BLEU %.2f (greedy, %s validation sentences), %.1f min\n",
                static_cast<long long>(trainer.state().step), static_cast<long long>(trainer.state().epoch), vl, bleu.score,
                o.bleu_sentences > 0 ? std::to_string(std::min<int64_t>(o.bleu_sentences, valid.size())).c_str() : "all",
                trainer.seconds() / 60);
    std::fflush(stdout);
    return std::map<std::string, double>{{"valid_loss", vl}, {"bleu", bleu.score}};
  };
  trainer.callbacks.on_checkpoint = [&](const std::string&) { translator.save(dir).or_throw(); };
  if (o.resume) {
    trainer.resume().or_throw();
    std::printf("resuming from %s: step %lld, epoch %lld, %.0f s trained\n", trainer.last_checkpoint().c_str(),
                static_cast<long long>(trainer.state().step), static_cast<long long>(trainer.state().epoch),
                trainer.state().seconds);
  } else {
    trainer.start(o.overwrite).or_throw();
  }
  tg::train::FitResult result = trainer.fit(tg::train::BatchListSampler(tg::text::bucket_batches(train, o.batch_tokens)),
                                            seq2seq_step(train, o.label_smoothing), evaluate);
  if (!tg::dist::is_main()) return result.exit_code();  // process 0 evaluates and reports
  if (result.diverged() || result.interrupted()) {  // interrupted: the checkpoint is saved; --resume continues
    std::fprintf(stderr, "train_translator: %s%s\n", result.message.c_str(),
                 result.interrupted() ? fmt::format("; saved {} (continue with --resume)", result.last_checkpoint).c_str() : "");
    return result.exit_code();
  }
  std::printf("%s after %lld steps\n", result.message.c_str(), static_cast<long long>(result.step));

  const tg::text::Translator loaded = tg::text::Translator::load(dir).value();  // as translate will read it
  loaded.model->to(device);
  std::string final_line;
  if (o.final_bleu) {
    tg::train::Progress t1(1);
    const tg::text::Bleu greedy = greedy_bleu(loaded, 0);
    final_line = fmt::format("final validation BLEU on all {} sentences: {:.2f} greedy ({:.0f} s); BP {:.3f}, precisions "
                             "{:.1f}/{:.1f}/{:.1f}/{:.1f}", valid.size(), greedy.score, t1.elapsed(), greedy.bp,
                             greedy.precisions[0], greedy.precisions[1], greedy.precisions[2], greedy.precisions[3]);
    std::vector<std::pair<std::string, double>> finals{{"bleu_greedy_all", greedy.score}};
    if (o.beam_bleu) {
      tg::train::Progress t2(static_cast<int64_t>(valid.size()), "beam search");
      std::vector<std::string> hyps;
      for (const std::string& s : valid_src_text) {
        hyps.push_back(loaded.translate(s, {.beam = o.beam}));
        t2.update(static_cast<int64_t>(hyps.size()));
      }
      t2.finish();
      const double beam_score = tg::text::corpus_bleu(hyps, valid_refs).score;
      final_line += fmt::format("; {:.2f} with beam {} ({:.0f} s)", beam_score, o.beam, t2.elapsed());
      std::string text;
      for (const auto& h : hyps) text += h + "\n";
      tg::write_file_atomic(dir + "/valid_hypotheses.txt", text).or_throw();
      finals.emplace_back("bleu_beam_all", beam_score);
    }
    std::printf("%s\n", final_line.c_str());
    trainer.log("final", finals);
  }

  // Sample translations with beam search.
  std::vector<std::vector<std::string>> rows;
  const int64_t nsamples = std::min<int64_t>(o.samples, static_cast<int64_t>(valid.size()));
  for (int64_t i = 0; i < nsamples; ++i) {
    const std::string& s = valid_src_text[static_cast<size_t>(i)];
    const std::string hyp = loaded.translate(s, {.beam = o.beam});
    std::printf("  source:    %s\n  reference: %s\n  output:    %s\n\n", s.c_str(), valid_refs[static_cast<size_t>(i)].c_str(),
                hyp.c_str());
    rows.push_back({s, valid_refs[static_cast<size_t>(i)], hyp});
  }

  // Report.
  tg::report::Html html("train_translator");
  html.paragraph(fmt::format("{}: {} training pairs, {} validation; {} tokenizers, vocabularies {} / {}; {} + {} layers, width "
                             "{}, {} heads, d_ff {}; {} parameters; {} steps in {:.1f} min ({}).",
                             source, train.size(), valid.size(), o.cfg.tokenizer, src_tokenizer.size(), tgt_tokenizer.size(), o.cfg.layers,
                             o.cfg.layers, o.cfg.width, o.cfg.heads, o.cfg.ff, model.num_parameters(), result.step,
                             trainer.state().seconds / 60, result.message));
  if (!final_line.empty()) html.paragraph(final_line + ".");
  tg::train::add_training_charts(html, trainer.history(), "nats/token (train: label-smoothed)");
  if (!rows.empty()) {
    html.heading("sample translations (beam search)");
    html.table({"source", "reference", "output"}, rows);
  }
  if (nsamples > 0) {
    const std::string& s = valid_src_text[0];
    std::vector<int64_t> src_ids = src_tokenizer.encode(s);
    Tensor src = tg::from_vector(src_ids, {1, static_cast<int64_t>(src_ids.size())}).to(device);
    auto hyp = tg::beam_search(*loaded.model, src, {.bos = ids.bos, .eos = ids.eos, .max_len = 80, .beam_size = o.beam});
    std::vector<int64_t> tgt_ids = {ids.bos};
    if (!hyp.empty()) tgt_ids.insert(tgt_ids.end(), hyp[0].tokens.begin(), hyp[0].tokens.end());
    std::vector<std::string> src_labels, tgt_labels;
    for (int64_t id : src_ids) src_labels.push_back(src_tokenizer.label(id));
    for (int64_t id : tgt_ids) tgt_labels.push_back(tgt_tokenizer.label(id));
    loaded.model->set_record_attention(true);
    {
      tg::NoGradGuard ng;
      loaded.model->forward(src, tg::from_vector(tgt_ids, {1, static_cast<int64_t>(tgt_ids.size())}).to(device));
    }
    html.heading("attention for one sentence");
    html.paragraph("source: " + s + " | output: " + tgt_tokenizer.decode(std::vector<int64_t>(tgt_ids.begin() + 1, tgt_ids.end())));
    for (int64_t l = 0; l < o.cfg.layers; ++l) {
      const auto& enc = (*loaded.model->encoder->layers)[static_cast<size_t>(l)];
      const auto& dec = (*loaded.model->decoder->layers)[static_cast<size_t>(l)];
      html.heatmap_grid(fmt::format("encoder self-attention, layer {}", l),
                        tg::report::head_heatmaps(enc->self_attn->last_weights.to(tg::kCPU), fmt::format("encoder layer {}", l), src_labels, src_labels));
      html.heatmap_grid(fmt::format("decoder self-attention (causal), layer {}", l),
                        tg::report::head_heatmaps(dec->self_attn->last_weights.to(tg::kCPU), fmt::format("decoder layer {}", l), tgt_labels, tgt_labels));
      html.heatmap_grid(fmt::format("decoder cross-attention (rows: output tokens, columns: source tokens), layer {}", l),
                        tg::report::head_heatmaps(dec->cross_attn->last_weights.to(tg::kCPU), fmt::format("cross layer {}", l), tgt_labels, src_labels));
    }
  }
  html.write(dir + "/report.html").or_throw();
  std::printf("wrote %s/report.html, model.safetensors, %s, metrics.jsonl\n", dir.c_str(),
              result.last_checkpoint.substr(result.last_checkpoint.find_last_of('/') + 1).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] { return run(argc, argv); });
}
