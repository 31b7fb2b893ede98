// Experiment 8: attention itself does not see order — softmax(QKᵀ)V is the same for any permutation
// of the keys — so a transformer is told positions. Three ways, in the same small decoder-only
// language model (tg::DecoderLM, LMConfig::positions) trained on the same English text:
//   learned     a trained vector per position added to the input (GPT-2, BERT)
//   sinusoidal  the 2017 paper's fixed sines and cosines added to the input
//   rotary      Q and K rotated by their positions inside every attention (RoFormer; Llama, Qwen2)
// Each is trained on windows of 32 tokens, then read on windows 4 times as long: the loss at every
// position (is position 100 handled like position 10?) and where the last query's attention goes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {

constexpr int64_t kTrain = 32;         // tokens per training window
constexpr int64_t kLong = 4 * kTrain;  // tokens per long reading window
constexpr int64_t kWords = 2000;       // the most frequent words keep their own id; the rest share one
constexpr int64_t kBatch = 32;         // windows per step

struct Variant {
  std::string name;
  tg::Positions positions;
};

// Training steps: 4/3 of the translators' --steps (160 by default): the whole experiment stays
// near a minute and a half on 2 cores.
int64_t lm_steps(const Options& o) { return o.steps * 4 / 3; }

// What one trained model shows.
struct Reading {
  double valid_loss = 0;                 // windows of kTrain
  std::vector<double> loss_at;           // [kLong]: mean loss at each position of the long windows
  std::vector<double> last_query;        // [kLong]: the last query's attention by distance (last layer, mean over heads)
  double beyond = 0;                     // share of that attention on keys more than kTrain back
};

// The English side as one stream of words, sentences ended by <eos>.
std::vector<int64_t> stream(const std::vector<tg::text::Example>& pairs, int64_t eos) {
  std::vector<int64_t> s;
  for (const auto& e : pairs) {
    s.insert(s.end(), e.tgt.begin(), e.tgt.end());
    s.push_back(eos);
  }
  return s;
}

// Windows of `len` + 1 tokens at stride `len`: inputs ids[s .. s+len-1], targets one later.
Tensor take(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts, const std::vector<int64_t>& which, int64_t len,
            int64_t shift) {
  std::vector<int64_t> flat;
  for (int64_t w : which) {
    const auto at = ids.begin() + starts[static_cast<size_t>(w)] + shift;
    flat.insert(flat.end(), at, at + len);
  }
  return tg::from_vector(flat, {static_cast<int64_t>(which.size()), len});
}

// Ids by frequency in the training stream: the kWords most frequent become 0 .. kWords-1, every
// other word kWords (the output layer, which dominates the cost, stays small).
void keep_frequent(std::vector<int64_t>& train, std::vector<int64_t>& valid, int64_t vocab) {
  std::vector<int64_t> count(static_cast<size_t>(vocab), 0);
  for (int64_t id : train) ++count[static_cast<size_t>(id)];
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return count[static_cast<size_t>(a)] > count[static_cast<size_t>(b)]; });
  std::vector<int64_t> to(static_cast<size_t>(vocab), kWords);
  for (int64_t r = 0; r < std::min(vocab, kWords); ++r) to[static_cast<size_t>(order[static_cast<size_t>(r)])] = r;
  for (int64_t& id : train) id = to[static_cast<size_t>(id)];
  for (int64_t& id : valid) id = to[static_cast<size_t>(id)];
}

// Windows of len + 1 tokens every `stride` tokens (stride len: no overlap).
std::vector<int64_t> window_starts(const std::vector<int64_t>& ids, int64_t len, int64_t stride) {
  std::vector<int64_t> s;
  for (int64_t at = 0; at + len + 1 <= static_cast<int64_t>(ids.size()); at += stride) s.push_back(at);
  return s;
}

Reading train_and_read(Context& ctx, const Variant& v, uint64_t seed, const std::vector<int64_t>& train_ids,
                       const std::vector<int64_t>& valid_ids) {
  const Options& o = ctx.opt;
  tg::manual_seed(seed);
  tg::DecoderLM m({.vocab = kWords + 1, .context = kLong,
                   .layer = {.d_model = o.width, .heads = o.heads, .d_ff = 4 * o.width, .dropout = 0.0,
                             .activation = tg::Activation::kGelu, .norm_first = true},
                   .layers = 2, .positions = v.positions});
  const std::vector<int64_t> train_starts = window_starts(train_ids, kTrain, kTrain),
                             valid_starts = window_starts(valid_ids, kTrain, kTrain);
  auto step = [&](const std::vector<int64_t>& ids, const std::vector<int64_t>& starts) {
    return tg::train::CrossEntropyStep{[&](const std::vector<int64_t>& w) { return m.forward(take(ids, starts, w, kTrain, 0)); },
                                       [&](const std::vector<int64_t>& w) { return take(ids, starts, w, kTrain, 1); }};
  };
  tg::AdamW opt(m.named_parameters(), {.lr = 1e-3, .beta2 = 0.98, .weight_decay = 0.01});
  tg::train::Trainer trainer(m, opt, {.max_steps = lm_steps(o), .seed = seed});
  trainer.set_schedule([](int64_t s) { return 1e-3 * std::min(1.0, static_cast<double>(s) / 50.0); });
  const auto valid_batches = tg::train::sequential_batches(static_cast<int64_t>(valid_starts.size()), 64);
  auto evaluate = [&] { return std::map<std::string, double>{{"valid_loss", trainer.evaluate_loss(valid_batches, step(valid_ids, valid_starts))}}; };
  std::fprintf(stderr, "training the %s-position LM (seed %llu): %lld steps of %lld windows of %lld words\n", v.name.c_str(),
               static_cast<unsigned long long>(seed), static_cast<long long>(lm_steps(o)), static_cast<long long>(kBatch),
               static_cast<long long>(kTrain));
  trainer.fit(tg::train::ShuffledSampler(static_cast<int64_t>(train_starts.size()), kBatch), step(train_ids, train_starts), evaluate);
  Reading r;
  r.valid_loss = trainer.history().at("valid/valid_loss").back().second;
  const std::string key = fmt::format("exp8_{}/seed{}", v.name, seed);
  for (const auto& [s, loss] : trainer.history().at("train/loss")) ctx.metrics->log("train", static_cast<int64_t>(s), {{key, loss}}).or_throw();

  // The long windows (overlapping: every position is read in several contexts): loss at each
  // position, and the last layer's attention.
  const std::vector<int64_t> long_starts = window_starts(valid_ids, kLong, kTrain / 4);
  TG_CHECK(!long_starts.empty(), "explain_attention", "experiment 8: the held-out text has fewer than {} words", kLong + 1);
  r.loss_at.assign(kLong, 0.0);
  r.last_query.assign(kLong, 0.0);
  m.eval();
  auto& attn = *(*m.layers)[m.layers->size() - 1]->self_attn;
  attn.record_weights = true;
  tg::NoGradGuard ng;
  const int64_t n = static_cast<int64_t>(long_starts.size());
  for (int64_t from = 0; from < n; from += 16) {
    std::vector<int64_t> which;
    for (int64_t w = from; w < std::min(n, from + 16); ++w) which.push_back(w);
    const int64_t B = static_cast<int64_t>(which.size());
    const Tensor logits = m.forward(take(valid_ids, long_starts, which, kLong, 0));  // [B, L, V]
    const Tensor target = take(valid_ids, long_starts, which, kLong, 1);
    const Tensor nll = -tg::gather(tg::log_softmax(logits, -1), 2, target.reshape({B, kLong, 1}));  // [B, L, 1]
    const std::vector<double> l = nll.to(tg::kFloat64).to_vector<double>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < kLong; ++t) r.loss_at[static_cast<size_t>(t)] += l[static_cast<size_t>(b * kLong + t)] / static_cast<double>(n);
    const Tensor w = attn.last_weights;  // [B, H, L, L]
    const int64_t H = w.size(1);
    const std::vector<double> a = w.to(tg::kFloat64).to_vector<double>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < kLong; ++d) {
          const double x = a[static_cast<size_t>(((b * H + h) * kLong + (kLong - 1)) * kLong + (kLong - 1 - d))] /
                           static_cast<double>(n * H);
          r.last_query[static_cast<size_t>(d)] += x;
          if (d > kTrain) r.beyond += x;
        }
  }
  attn.record_weights = false;
  attn.last_weights = Tensor();
  return r;
}

// How a variant's last query (at the end of a long window) spreads its attention: on its 4 nearest
// words, against the 4/kLong an even spread gives.
std::string focus(const std::string& name, const Stat& nearest) {
  const double even = 4.0 / static_cast<double>(kLong);
  return fmt::format("{} {}% on its 4 nearest words ({})", name, show(nearest, 1, 100),
                     nearest.hi() < 2 * even ? "almost an even spread: it no longer tells near from far"
                                             : fmt::format("{:.1f}x an even spread", nearest.mean() / even));
}

double mean_over(const std::vector<double>& v, int64_t from, int64_t to) {
  double s = 0;
  for (int64_t i = from; i < to; ++i) s += v[static_cast<size_t>(i)];
  return s / static_cast<double>(to - from);
}

struct Result {
  Stat valid, near, far, beyond, nearest;
  std::vector<double> loss_at, last_query;  // means over seeds
};

std::string long_range(const Result& learned, const Result& sinusoidal, const Result& rotary) {
  return fmt::format(" What attention does with position at long range: at position {} the last query puts {}; {}; {} (an "
                     "even spread: {:.1f}%).",
                     kLong - 1, focus("learned", learned.nearest), focus("sinusoidal", sinusoidal.nearest),
                     focus("rotary", rotary.nearest), 400.0 / static_cast<double>(kLong));
}
}  // namespace

void exp8_positions(Context& ctx, tg::report::Html& html) {
  const std::vector<Variant> variants = {{"learned", tg::Positions::kLearned},
                                         {"sinusoidal", tg::Positions::kSinusoidal},
                                         {"rotary", tg::Positions::kRotary}};
  const int64_t eos = ctx.english->eos_id();
  std::vector<int64_t> train_ids = stream(ctx.de_en.train, eos), valid_ids = stream(ctx.de_en.valid, eos);
  keep_frequent(train_ids, valid_ids, ctx.english->size());
  std::vector<Result> results(variants.size());
  const auto seeds = ctx.seeds();
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < variants.size(); ++k) {
    Result& res = results[k];
    res.loss_at.assign(kLong, 0.0);
    res.last_query.assign(kLong, 0.0);
    for (uint64_t seed : seeds) {
      const Reading r = train_and_read(ctx, variants[k], seed, train_ids, valid_ids);
      res.valid.values.push_back(r.valid_loss);
      res.near.values.push_back(mean_over(r.loss_at, 0, kTrain));
      res.far.values.push_back(mean_over(r.loss_at, kTrain, kLong));
      res.beyond.values.push_back(r.beyond);
      res.nearest.values.push_back(4 * mean_over(r.last_query, 0, 4));
      for (int64_t t = 0; t < kLong; ++t) {
        res.loss_at[static_cast<size_t>(t)] += r.loss_at[static_cast<size_t>(t)] / static_cast<double>(seeds.size());
        res.last_query[static_cast<size_t>(t)] += r.last_query[static_cast<size_t>(t)] / static_cast<double>(seeds.size());
      }
    }
    ctx.headline("exp8", variants[k].name, "valid_loss", res.valid);
    ctx.headline("exp8", variants[k].name, "loss_positions_32_127", res.far);
    log_result(ctx, "exp8_" + variants[k].name,
               {{"valid_loss", res.valid.mean()}, {"loss_0_31", res.near.mean()}, {"loss_32_127", res.far.mean()},
                {"attention_beyond_32", res.beyond.mean()}});
  }
  const Result &learned = results[0], &sinusoidal = results[1], &rotary = results[2];
  const std::string budget = fmt::format("{} steps x {} seed{}", lm_steps(ctx.opt), seeds.size(), seeds.size() == 1 ? "" : "s");

  html.heading("8. Where order comes from: learned, sinusoidal and rotary positions", 2, "exp8");
  html.paragraph(fmt::format(
      "Attention alone is blind to order: permuting the keys permutes nothing in softmax(QKᵀ)V. Three decoder-only language "
      "models of the English side ({} words of training text; its {} most frequent words, the rest as one token; 2 layers, "
      "width {}, {} heads; the same seeds) differ only in how "
      "they are told positions: a learned vector per position added to the input (GPT-2), the 2017 paper's fixed sines added "
      "to the input, or rotary positions, which rotate each query and key by its position inside every attention (Llama), so "
      "that q·k depends on the distance between them only. Each is trained on {} windows of {} words a step for {}, then "
      "read on held-out windows of {} words.",
      train_ids.size(), kWords, ctx.opt.width, ctx.opt.heads, kBatch, kTrain, budget, kLong));
  std::vector<std::vector<std::string>> rows;
  for (size_t k = 0; k < variants.size(); ++k)
    rows.push_back({variants[k].name, show(results[k].valid, 4), show(results[k].near, 4), show(results[k].far, 4),
                    show(results[k].nearest, 1, 100) + "%", show(results[k].beyond, 1, 100) + "%"});
  html.table({"positions", fmt::format("validation loss, windows of {}", kTrain), fmt::format("loss at positions 0-{}", kTrain - 1),
              fmt::format("loss at positions {}-{} (never trained)", kTrain, kLong - 1),
              "last query's attention on the 4 nearest words", fmt::format("... more than {} words back", kTrain)},
             rows);
  std::vector<tg::report::Series> by_pos, by_dist;
  for (size_t k = 0; k < variants.size(); ++k) {
    tg::report::Series p{variants[k].name, {}}, d{variants[k].name, {}};
    for (int64_t t = 0; t < kLong; t += 8) p.points.emplace_back(static_cast<double>(t) + 3.5, mean_over(results[k].loss_at, t, t + 8));
    for (int64_t t = 0; t < kLong; ++t) d.points.emplace_back(static_cast<double>(t), results[k].last_query[static_cast<size_t>(t)]);
    by_pos.push_back(std::move(p));
    by_dist.push_back(std::move(d));
  }
  html.line_chart(fmt::format("held-out loss by position in {}-word windows (trained on {}; means of 8 positions)", kLong, kTrain),
                  by_pos, {.x_label = "position in the window", .y_label = "loss (nats/word)"});
  html.line_chart(fmt::format("where the last query (position {}) attends: last layer, mean over heads", kLong - 1),
                  by_dist, {.x_label = "distance back (words)", .y_label = "attention weight", .log_y = true});
  const std::string within = verdict("rotary", rotary.valid, "learned", learned.valid, "nats/word", budget);
  const std::string beyond = fmt::format(
      "Beyond the trained length, learned positions meet vectors that were never trained (loss at positions {}-{}: {} vs {} "
      "within); sinusoidal ones meet angles they never saw ({} vs {}); rotary ones meet distances they never saw too, but "
      "the scores depend on nothing else, and the near ones they learned to use are there at every position ({} vs {}).",
      kTrain, kLong - 1, show(learned.far, 3), show(learned.near, 3), show(sinusoidal.far, 3), show(sinusoidal.near, 3),
      show(rotary.far, 3), show(rotary.near, 3));
  html.paragraph(within + " " + beyond +
                 long_range(learned, sinusoidal, rotary));
  ctx.answers.push_back({"Attention ignores order: how does the model know where a word is? Is the 2017 way still used?",
                         fmt::format("It is told: learned vectors (GPT-2), the 2017 sines (both added to the input), or "
                                     "rotary positions that turn Q and K (Llama). Within the trained length: {} Past it, the "
                                     "loss of learned positions goes from {} to {}, sinusoidal from {} to {}, rotary from {} "
                                     "to {}.",
                                     within, show(learned.near, 3), show(learned.far, 3), show(sinusoidal.near, 3),
                                     show(sinusoidal.far, 3), show(rotary.near, 3), show(rotary.far, 3)),
                         "exp8", "experiment 8"});
  std::printf("experiment 8: validation loss learned %s, sinusoidal %s, rotary %s; positions %lld-%lld: %s, %s, %s (%.0f s)\n",
              show(learned.valid).c_str(), show(sinusoidal.valid).c_str(), show(rotary.valid).c_str(),
              static_cast<long long>(kTrain), static_cast<long long>(kLong - 1), show(learned.far).c_str(),
              show(sinusoidal.far).c_str(), show(rotary.far).c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace explain
