// train_translator: an encoder-decoder transformer on sentence pairs, within a wall-clock budget.
//
//   ./build/train_translator --minutes 5                      # German->English pairs from trans-de-en
//   ./build/train_translator --src train.de.gz --tgt train.en.gz --valid_src val.de.gz --valid_tgt val.en.gz --minutes 60
//   ./build/train_translator --tokenizer bpe --vocab 8000   # SentencePiece BPE (or: word, char, unigram)
//
// Each epoch: validation loss and corpus BLEU (sacreBLEU's definition) on the validation pairs,
// a checkpoint (--resume continues from it). At the end: beam-search translations of sample
// sentences and SAVE/report.html with the curves and the attention maps (encoder self-attention,
// decoder self-attention, decoder cross-attention) of every layer and head for one sentence.
// `translate --load SAVE` then translates stdin.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "examples/common.h"
#include "examples/report.h"
#include "examples/translator_common.h"

ABSL_FLAG(std::string, src, "", "training source sentences, one a line (with --tgt; .gz accepted)");
ABSL_FLAG(std::string, tgt, "", "training target sentences, aligned with --src");
ABSL_FLAG(std::string, pairs, "", "training pairs as 'source<TAB>target' lines (instead of --src/--tgt)");
ABSL_FLAG(std::string, ding, "/usr/share/trans/de-en", "the default data: the Ding dictionary of Debian's trans-de-en");
ABSL_FLAG(std::string, valid_src, "", "validation sources (default: 2% of the training pairs, by hash)");
ABSL_FLAG(std::string, valid_tgt, "", "validation targets");
ABSL_FLAG(std::string, save, "runs/translator", "folder for the model, vocabularies, checkpoint, metrics and report");
ABSL_FLAG(bool, resume, false, "continue from SAVE/checkpoint.safetensors");
ABSL_FLAG(double, minutes, 5, "wall-clock training budget");
ABSL_FLAG(int64_t, epochs, 1000, "most epochs");
ABSL_FLAG(int64_t, layers, 2, "encoder and decoder layers (each)");
ABSL_FLAG(int64_t, width, 256, "d_model");
ABSL_FLAG(int64_t, heads, 4, "attention heads");
ABSL_FLAG(int64_t, ff, 1024, "feed-forward width");
ABSL_FLAG(double, dropout, 0.1, "dropout");
ABSL_FLAG(std::string, tokenizer, "word", "word, char, or SentencePiece subwords: bpe or unigram (trained on the training text, saved in SAVE)");
ABSL_FLAG(int64_t, vocab, 8000, "vocabulary per language: the most words or characters kept, or the number of subword pieces");
ABSL_FLAG(int64_t, min_count, 2, "rarer words or characters become <unk> (word, char)");
ABSL_FLAG(bool, lowercase, false, "lower-case before tokenizing");
ABSL_FLAG(int64_t, batch_tokens, 1500, "padded target tokens per batch");
ABSL_FLAG(int64_t, max_tokens, 60, "drop training pairs longer than this (tokens, either side)");
ABSL_FLAG(double, lr, 1e-3, "peak learning rate (AdamW; linear warm-up, then 1/sqrt(step))");
ABSL_FLAG(int64_t, warmup, 200, "warm-up steps");
ABSL_FLAG(double, label_smoothing, 0.1, "label smoothing");
ABSL_FLAG(int64_t, beam, 4, "beam size for the sample translations");
ABSL_FLAG(int64_t, bleu_sentences, 400, "validation sentences translated (greedy) for BLEU each epoch (0: all)");
ABSL_FLAG(bool, final_bleu, true, "after training, BLEU on every validation sentence (greedy, batched)");
ABSL_FLAG(bool, beam_bleu, false, "with --final_bleu, also with beam search (slower: one sentence at a time)");
ABSL_FLAG(int64_t, samples, 5, "validation sentences to translate with beam search at the end");
ABSL_FLAG(uint64_t, seed, 1, "random seed");
ABSL_FLAG(int32_t, threads, 0, "threads (0: TG_NUM_THREADS or all cores)");

namespace ex = tg::examples;
using tg::Tensor;
using ex::Tokenizer;
using WordVocab = ex::Tokenizer;  // for the special ids
using ex::Example;
using ex::Batch;
using ex::make_batch;

namespace {

// Batches of similar length, at most batch_tokens padded target tokens each.
std::vector<std::vector<size_t>> make_batches(const std::vector<Example>& data, int64_t batch_tokens) {
  std::vector<size_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(data[a].tgt.size(), data[a].src.size()) < std::make_pair(data[b].tgt.size(), data[b].src.size());
  });
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> cur;
  size_t longest = 0;
  for (size_t i : order) {
    size_t len = std::max(data[i].tgt.size() + 1, data[i].src.size());
    if (!cur.empty() && static_cast<int64_t>(std::max(longest, len) * (cur.size() + 1)) > batch_tokens) {
      out.push_back(cur);
      cur.clear();
      longest = 0;
    }
    cur.push_back(i);
    longest = std::max(longest, len);
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::vector<Example> encode_pairs(const ex::Pairs& pairs, const Tokenizer& sv, const Tokenizer& tv, int64_t max_tokens,
                                  int64_t* dropped) {
  std::vector<Example> out;
  *dropped = 0;
  for (const auto& [s, t] : pairs) {
    Example e{sv.encode(s), tv.encode(t)};
    if (e.src.empty() || e.tgt.empty() || static_cast<int64_t>(e.src.size()) > max_tokens ||
        static_cast<int64_t>(e.tgt.size()) > max_tokens) {
      ++*dropped;
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

double valid_loss(tg::Transformer& model, const std::vector<Example>& data, int64_t batch_tokens) {
  tg::NoGradGuard ng;
  model.eval();
  double total = 0;
  int64_t count = 0;
  for (const auto& idx : make_batches(data, batch_tokens)) {
    Batch b = make_batch(data, idx);
    total += tg::cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out,
                               {.ignore_index = WordVocab::kPad, .reduction = tg::Reduction::Sum}).item();
    count += b.tokens;
  }
  model.train();
  return total / static_cast<double>(std::max<int64_t>(count, 1));
}

// Greedy translations of the first n validation pairs (batched), scored with corpus BLEU.
ex::Bleu valid_bleu(tg::Transformer& model, const std::vector<Example>& data, const ex::Pairs& raw, const Tokenizer& tv,
                    int64_t n) {
  n = n <= 0 ? static_cast<int64_t>(data.size()) : std::min<int64_t>(n, static_cast<int64_t>(data.size()));
  std::vector<std::string> hyps, refs;
  for (int64_t i = 0; i < n; i += 64) {
    std::vector<size_t> idx;
    for (int64_t j = i; j < std::min<int64_t>(n, i + 64); ++j) idx.push_back(static_cast<size_t>(j));
    Batch b = make_batch(data, idx);
    auto out = tg::greedy_decode(model, b.src, {.bos = WordVocab::kBos, .eos = WordVocab::kEos, .max_len = b.tgt_in.size(1) + 10});
    for (size_t k = 0; k < idx.size(); ++k) {
      hyps.push_back(tv.decode(out[k]));
      refs.push_back(raw[idx[k]].second);
    }
  }
  return ex::corpus_bleu(hyps, refs);
}

std::vector<tg::report::Heatmap> maps_of(const Tensor& w, const std::string& what, int64_t layer,
                                         const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
  // w [1, H, T, S]
  const int64_t H = w.size(1), T = w.size(2), S = w.size(3);
  std::vector<float> v = w.to_vector<float>();
  std::vector<tg::report::Heatmap> out;
  for (int64_t h = 0; h < H; ++h) {
    tg::report::Heatmap m{fmt::format("{} layer {} head {}", what, layer, h), {}, rows, cols};
    for (int64_t i = 0; i < T; ++i) m.w.emplace_back(v.begin() + (h * T + i) * S, v.begin() + (h * T + i + 1) * S);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ex::set_program_name(argv[0]);
  absl::SetProgramUsageMessage("train an encoder-decoder transformer translator: train_translator [--src F --tgt F | --pairs F] [flags]");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_threads) > 0) tg::set_num_threads(absl::GetFlag(FLAGS_threads));
  ex::TranslatorConfig cfg{.layers = absl::GetFlag(FLAGS_layers), .width = absl::GetFlag(FLAGS_width),
                           .heads = absl::GetFlag(FLAGS_heads), .ff = absl::GetFlag(FLAGS_ff), .max_len = 256,
                           .dropout = absl::GetFlag(FLAGS_dropout),
                           .tokenizer = ex::or_fail(ex::parse_tokenizer_kind(absl::GetFlag(FLAGS_tokenizer)))};
  if (cfg.layers < 1 || cfg.width < 1 || cfg.heads < 1 || cfg.width % cfg.heads != 0 || cfg.ff < 1 || cfg.dropout < 0 ||
      cfg.dropout >= 1 || absl::GetFlag(FLAGS_vocab) < 10 || absl::GetFlag(FLAGS_batch_tokens) < 1 ||
      absl::GetFlag(FLAGS_minutes) <= 0 || absl::GetFlag(FLAGS_max_tokens) < 1 || absl::GetFlag(FLAGS_max_tokens) > 250)
    ex::fail("bad flags: need --layers, --ff, --batch_tokens >= 1, --width a multiple of --heads, 0 <= --dropout < 1, "
             "--vocab >= 10, --minutes > 0, 1 <= --max_tokens <= 250");
  const std::string dir = absl::GetFlag(FLAGS_save);
  ex::or_fail(ex::make_dirs(dir));

  // Data.
  ex::Pairs train_pairs, valid_pairs;
  std::string source;
  if (!absl::GetFlag(FLAGS_pairs).empty()) {
    source = absl::GetFlag(FLAGS_pairs);
    train_pairs = ex::or_fail(ex::read_tsv(source));
  } else if (!absl::GetFlag(FLAGS_src).empty() || !absl::GetFlag(FLAGS_tgt).empty()) {
    if (absl::GetFlag(FLAGS_src).empty() || absl::GetFlag(FLAGS_tgt).empty()) ex::fail("--src and --tgt go together");
    source = absl::GetFlag(FLAGS_src) + " / " + absl::GetFlag(FLAGS_tgt);
    train_pairs = ex::or_fail(ex::read_aligned(absl::GetFlag(FLAGS_src), absl::GetFlag(FLAGS_tgt)));
  } else {
    source = absl::GetFlag(FLAGS_ding);
    train_pairs = ex::or_fail(ex::read_ding_pairs(source));
  }
  if (!absl::GetFlag(FLAGS_valid_src).empty() || !absl::GetFlag(FLAGS_valid_tgt).empty()) {
    valid_pairs = ex::or_fail(ex::read_aligned(absl::GetFlag(FLAGS_valid_src), absl::GetFlag(FLAGS_valid_tgt)));
  } else {
    ex::Split split = ex::split_pairs(train_pairs);
    train_pairs = std::move(split.train);
    valid_pairs = std::move(split.valid);
    if (valid_pairs.empty()) ex::fail(source + ": too few pairs to hold out a validation set; pass --valid_src/--valid_tgt");
  }
  Tokenizer src_vocab, tgt_vocab;
  const std::string src_file = dir + "/" + Tokenizer::file_name(cfg.tokenizer, "src");
  const std::string tgt_file = dir + "/" + Tokenizer::file_name(cfg.tokenizer, "tgt");
  if (absl::GetFlag(FLAGS_resume)) {
    src_vocab = ex::or_fail(Tokenizer::load(cfg.tokenizer, src_file));
    tgt_vocab = ex::or_fail(Tokenizer::load(cfg.tokenizer, tgt_file));
  } else {
    std::vector<std::string> s, t;
    for (const auto& [a, b] : train_pairs) s.push_back(a), t.push_back(b);
    const Tokenizer::Options o{.vocab_size = absl::GetFlag(FLAGS_vocab), .min_count = absl::GetFlag(FLAGS_min_count),
                               .lowercase = absl::GetFlag(FLAGS_lowercase)};
    ex::Progress timer(1);
    src_vocab = ex::or_fail(Tokenizer::train(cfg.tokenizer, s, o));
    tgt_vocab = ex::or_fail(Tokenizer::train(cfg.tokenizer, t, o));
    ex::or_fail(src_vocab.save(src_file));
    ex::or_fail(tgt_vocab.save(tgt_file));
    std::printf("%s tokenizers: %lld / %lld tokens (%.1f s), saved as %s and %s\n", ex::tokenizer_name(cfg.tokenizer),
                static_cast<long long>(src_vocab.size()), static_cast<long long>(tgt_vocab.size()), timer.elapsed(),
                src_file.c_str(), tgt_file.c_str());
  }
  int64_t dropped = 0, vdropped = 0;
  std::vector<Example> train = encode_pairs(train_pairs, src_vocab, tgt_vocab, absl::GetFlag(FLAGS_max_tokens), &dropped);
  std::vector<Example> valid = encode_pairs(valid_pairs, src_vocab, tgt_vocab, 250, &vdropped);
  ex::Pairs valid_raw;  // the pairs that survived encoding, for BLEU references
  for (const auto& p : valid_pairs) {
    auto s = src_vocab.encode(p.first), t = tgt_vocab.encode(p.second);
    if (!s.empty() && !t.empty() && s.size() <= 250 && t.size() <= 250) valid_raw.push_back(p);
  }
  if (train.empty()) ex::fail(source + ": no training pairs left after tokenizing (all empty or longer than --max_tokens)");

  // Model and optimizer.
  tg::manual_seed(absl::GetFlag(FLAGS_seed));
  tg::Transformer model(cfg.model(src_vocab.size(), tgt_vocab.size()));
  tg::AdamW opt(model.named_parameters(), {.lr = absl::GetFlag(FLAGS_lr), .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9,
                                           .weight_decay = 0.01});
  const double peak = absl::GetFlag(FLAGS_lr);
  const int64_t warmup = std::max<int64_t>(1, absl::GetFlag(FLAGS_warmup));
  auto schedule = [&](int64_t step) {  // the paper's shape, scaled to peak at `warmup`
    double s = static_cast<double>(step), w = static_cast<double>(warmup);
    return peak * std::min(s / w, std::sqrt(w / s));
  };
  int64_t step = 0, first_epoch = 0;
  double spent = 0;  // seconds of training before this run (resume)
  const std::string ckpt = dir + "/checkpoint.safetensors";
  if (absl::GetFlag(FLAGS_resume)) {
    tg::Metadata user = ex::or_fail(tg::load_checkpoint(ckpt, model, opt));
    step = std::stoll(user["step"]);
    first_epoch = std::stoll(user["epoch"]);
    spent = std::stod(user["seconds"]);
    std::printf("resuming from %s: epoch %lld, step %lld, %.0f s trained\n", ckpt.c_str(), static_cast<long long>(first_epoch),
                static_cast<long long>(step), spent);
  }
  std::printf("train_translator: %s: %zu training pairs (%lld longer than %lld tokens dropped), %zu validation; "
              "vocabularies %lld / %lld; %lld parameters\n",
              source.c_str(), train.size(), static_cast<long long>(dropped), static_cast<long long>(absl::GetFlag(FLAGS_max_tokens)),
              valid.size(), static_cast<long long>(src_vocab.size()), static_cast<long long>(tgt_vocab.size()),
              static_cast<long long>(model.num_parameters()));

  ex::Metrics metrics(dir + "/metrics.jsonl");
  std::vector<std::pair<double, double>> train_curve, valid_curve, bleu_curve, lr_curve;
  const double budget = absl::GetFlag(FLAGS_minutes) * 60.0;
  auto batches = make_batches(train, absl::GetFlag(FLAGS_batch_tokens));
  ex::Progress clock(1);
  bool out_of_time = false;
  ex::Bleu bleu;
  for (int64_t epoch = first_epoch; epoch < absl::GetFlag(FLAGS_epochs) && !out_of_time; ++epoch) {
    std::vector<size_t> order(batches.size());
    std::iota(order.begin(), order.end(), 0);
    tg::Generator shuffle(absl::GetFlag(FLAGS_seed) * 7919 + static_cast<uint64_t>(epoch));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle.next_u64() % i]);
    ex::Progress progress(static_cast<int64_t>(order.size()));
    double loss_sum = 0, tokens = 0;
    int64_t done = 0;
    for (size_t bi : order) {
      Batch b = make_batch(train, batches[bi]);
      Tensor loss = tg::cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out,
                                      {.ignore_index = WordVocab::kPad, .label_smoothing = absl::GetFlag(FLAGS_label_smoothing)});
      opt.zero_grad();
      loss.backward();
      tg::clip_grad_norm(model.parameters(), 1.0);
      opt.set_lr(schedule(++step));
      opt.step();
      double l = loss.item();
      loss_sum += l * static_cast<double>(b.tokens);
      tokens += static_cast<double>(b.tokens);
      train_curve.emplace_back(static_cast<double>(step), l);
      lr_curve.emplace_back(static_cast<double>(step), opt.lr());
      metrics.log({{"step", static_cast<double>(step)}, {"loss", l}, {"lr", opt.lr()}, {"epoch", static_cast<double>(epoch)}});
      const double elapsed = spent + clock.elapsed();
      progress.update(++done, fmt::format("epoch {}  loss {:.3f}  lr {:.2e}  {:.0f} tok/s  budget {:.0f}/{:.0f} min", epoch + 1,
                                          loss_sum / tokens, opt.lr(), tokens / std::max(progress.elapsed(), 1e-9),
                                          elapsed / 60, budget / 60));
      if (elapsed >= budget) {
        out_of_time = true;
        break;
      }
    }
    progress.finish(fmt::format("epoch {} loss {:.3f}", epoch + 1, loss_sum / std::max(tokens, 1.0)));
    const double vl = valid_loss(model, valid, absl::GetFlag(FLAGS_batch_tokens));
    bleu = valid_bleu(model, valid, valid_raw, tgt_vocab, absl::GetFlag(FLAGS_bleu_sentences));
    valid_curve.emplace_back(static_cast<double>(step), vl);
    bleu_curve.emplace_back(static_cast<double>(step), bleu.score);
    metrics.log({{"step", static_cast<double>(step)}, {"epoch", static_cast<double>(epoch + 1)}, {"valid_loss", vl},
                 {"bleu", bleu.score}}, "valid");
    std::printf("epoch %lld: train loss %.3f, validation loss %.3f, BLEU %.2f (greedy, %s validation sentences), %.1f min\n",
                static_cast<long long>(epoch + 1), loss_sum / std::max(tokens, 1.0), vl, bleu.score,
                absl::GetFlag(FLAGS_bleu_sentences) > 0 ? std::to_string(std::min<int64_t>(absl::GetFlag(FLAGS_bleu_sentences), valid.size())).c_str() : "all",
                (spent + clock.elapsed()) / 60);
    tg::Metadata meta = cfg.to_metadata();
    ex::or_fail(tg::save_module(model, dir + "/model.safetensors", meta));
    ex::or_fail(tg::save_checkpoint(ckpt, model, opt,
                                    {{"step", std::to_string(step)}, {"epoch", std::to_string(epoch + 1)},
                                     {"seconds", std::to_string(spent + clock.elapsed())}}));
    std::fflush(stdout);
  }

  auto loaded = ex::or_fail(ex::load_translator(dir));
  std::string final_line;
  if (absl::GetFlag(FLAGS_final_bleu) && !valid.empty()) {
    ex::Progress t1(1);
    ex::Bleu greedy = valid_bleu(model, valid, valid_raw, tgt_vocab, 0);
    const double greedy_s = t1.elapsed();
    final_line = fmt::format("final validation BLEU on all {} sentences: {:.2f} greedy ({:.0f} s); BP {:.3f}, precisions "
                             "{:.1f}/{:.1f}/{:.1f}/{:.1f}", valid_raw.size(), greedy.score, greedy_s, greedy.bp,
                             greedy.precisions[0], greedy.precisions[1], greedy.precisions[2], greedy.precisions[3]);
    std::vector<std::string> hyps, refs;
    double beam_score = -1;
    if (absl::GetFlag(FLAGS_beam_bleu)) {
      ex::Progress t2(static_cast<int64_t>(valid_raw.size()));
      for (const auto& [s, t] : valid_raw) {
        hyps.push_back(loaded.translate(s, absl::GetFlag(FLAGS_beam)));
        refs.push_back(t);
        t2.update(static_cast<int64_t>(hyps.size()), "beam search over the validation set");
      }
      t2.finish("");
      beam_score = ex::corpus_bleu(hyps, refs).score;
      final_line += fmt::format("; {:.2f} with beam {} ({:.0f} s)", beam_score, absl::GetFlag(FLAGS_beam), t2.elapsed());
      ex::or_fail(tg::write_file_atomic(dir + "/valid_hypotheses.txt", absl::StrJoin(hyps, "\n") + "\n"));
    }
    std::printf("%s\n", final_line.c_str());
    metrics.log({{"step", static_cast<double>(step)}, {"bleu_greedy_all", greedy.score}}, "final");
    if (beam_score >= 0) metrics.log({{"step", static_cast<double>(step)}, {"bleu_beam_all", beam_score}}, "final");
  }

  // Sample translations with beam search.
  std::vector<std::vector<std::string>> rows;
  const int64_t nsamples = std::min<int64_t>(absl::GetFlag(FLAGS_samples), static_cast<int64_t>(valid_raw.size()));
  for (int64_t i = 0; i < nsamples; ++i) {
    const auto& [s, t] = valid_raw[static_cast<size_t>(i)];
    std::string hyp = loaded.translate(s, absl::GetFlag(FLAGS_beam));
    std::printf("  source:    %s\n  reference: %s\n  output:    %s\n\n", s.c_str(), t.c_str(), hyp.c_str());
    rows.push_back({s, t, hyp});
  }

  // Report.
  tg::report::Html html("train_translator");
  html.paragraph(fmt::format("{}: {} training pairs, {} validation; {} vocabularies {} / {}; {} + {} layers, width {}, {} heads, "
                             "d_ff {}; {} parameters; {} steps in {:.1f} min; validation BLEU {:.2f} (greedy).",
                             source, train.size(), valid.size(), ex::tokenizer_name(cfg.tokenizer), src_vocab.size(),
                             tgt_vocab.size(), cfg.layers, cfg.layers,
                             cfg.width, cfg.heads, cfg.ff, model.num_parameters(), step, (spent + clock.elapsed()) / 60,
                             bleu.score));
  if (!final_line.empty()) html.paragraph(final_line + ".");
  html.line_chart("loss (nats/token)", "step", {{"train (label-smoothed)", train_curve}, {"validation", valid_curve}});
  html.line_chart("validation BLEU", "step", {{"BLEU", bleu_curve}});
  html.line_chart("learning rate", "step", {{"lr", lr_curve}});
  html.heading("sample translations (beam search)");
  html.table({"source", "reference", "output"}, rows);
  if (nsamples > 0) {
    const std::string& s = valid_raw[0].first;
    std::vector<int64_t> src_ids = src_vocab.encode(s);
    Tensor src = tg::from_vector(src_ids, {1, static_cast<int64_t>(src_ids.size())});
    auto hyp = tg::beam_search(*loaded.model, src, {.bos = WordVocab::kBos, .eos = WordVocab::kEos, .max_len = 80,
                                                    .beam_size = absl::GetFlag(FLAGS_beam)});
    std::vector<int64_t> tgt_ids = {WordVocab::kBos};
    if (!hyp.empty()) tgt_ids.insert(tgt_ids.end(), hyp[0].tokens.begin(), hyp[0].tokens.end());
    std::vector<std::string> src_labels, tgt_labels;
    for (int64_t id : src_ids) src_labels.push_back(src_vocab.token(id));
    for (int64_t id : tgt_ids) tgt_labels.push_back(tgt_vocab.token(id));
    loaded.model->set_record_attention(true);
    {
      tg::NoGradGuard ng;
      loaded.model->forward(src, tg::from_vector(tgt_ids, {1, static_cast<int64_t>(tgt_ids.size())}));
    }
    html.heading("attention for one sentence");
    html.paragraph("source: " + s + " | output: " + tgt_vocab.decode(std::vector<int64_t>(tgt_ids.begin() + 1, tgt_ids.end())));
    for (int64_t l = 0; l < cfg.layers; ++l) {
      const auto& enc = (*loaded.model->encoder->layers)[static_cast<size_t>(l)];
      const auto& dec = (*loaded.model->decoder->layers)[static_cast<size_t>(l)];
      html.heatmap_grid(fmt::format("encoder self-attention, layer {}", l),
                        maps_of(enc->self_attn->last_weights, "encoder", l, src_labels, src_labels));
      html.heatmap_grid(fmt::format("decoder self-attention (causal), layer {}", l),
                        maps_of(dec->self_attn->last_weights, "decoder", l, tgt_labels, tgt_labels));
      html.heatmap_grid(fmt::format("decoder cross-attention (rows: output words, columns: source words), layer {}", l),
                        maps_of(dec->cross_attn->last_weights, "cross", l, tgt_labels, src_labels));
    }
  }
  ex::or_fail(html.write(dir + "/report.html"));
  std::printf("%swrote %s/report.html, model.safetensors, checkpoint.safetensors, metrics.jsonl\n",
              final_line.empty() ? fmt::format("last epoch's validation BLEU {:.2f}; ", bleu.score).c_str() : "", dir.c_str());
  return 0;
}
