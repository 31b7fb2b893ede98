// Experiment 2: do W_Q, W_K and W_V matter? The same models with them learned, fixed to the
// identity (Q = K = V = X) and frozen at their random initialisation, on two kinds of task:
//
//  - Card lookups, where routing by content is the whole job: eight cards (a number and a colour)
//    lie on the table, then a question. "Same": "which colour has card 5?" (a question token) —
//    a lookup by equality. "Next": the question is one of the cards, "which colour has the card
//    after this one?" — the query must find card 6, something other than itself. One attention
//    layer, so the lookup is attention's alone; trained to convergence in seconds.
//  - Experiment 1's German->English translator, where attention is one part among many.
//
// Every variant runs once per seed; the report gives mean ± spread and calls a difference an
// effect only when the seeds do not overlap.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {

enum class Variant { kLearned, kIdentity, kFrozen };
const char* const kVariantNames[] = {"learned", "identity", "frozen random"};
const char* const kVariantKeys[] = {"learned", "identity", "frozen_random"};

// ---- the card lookups ----

constexpr int64_t kNumbers = 16, kColours = 16, kCards = 8, kLen = kCards + 1;
constexpr int64_t kQuestion = kNumbers * kColours;  // + n: "which colour has card n?"
const char* const kColourNames[kColours] = {"red",  "blue",  "green", "yellow", "black", "white", "pink", "grey",
                                            "gold", "brown", "navy",  "olive",  "teal",  "cyan",  "plum", "rust"};

enum class Lookup { kSame, kNext };

// A batch of lookups: ids [B, 9] (card token = number x 16 + colour), target [B, 9] (the answer's
// colour at the question, -100 elsewhere) and, per row, the position of the card that answers.
struct Cards {
  Tensor ids, target;
  std::vector<int64_t> answer_at;
};

int64_t pick(tg::Generator& g, int64_t n) { return std::min(n - 1, static_cast<int64_t>(g.uniform() * static_cast<double>(n))); }

Cards deal(tg::Generator& g, Lookup lookup, int64_t B) {
  std::vector<int64_t> ids, target;
  Cards c;
  for (int64_t b = 0; b < B; ++b) {
    for (;;) {  // deal until some card's next number is on the table too (for Next)
      std::vector<int64_t> numbers(kNumbers), colours(kCards);
      for (int64_t i = 0; i < kNumbers; ++i) numbers[i] = i;
      for (int64_t i = kNumbers - 1; i > 0; --i) std::swap(numbers[i], numbers[pick(g, i + 1)]);
      for (auto& col : colours) col = pick(g, kColours);
      std::vector<std::pair<int64_t, int64_t>> asked;  // (the card asked about, the card that answers)
      for (int64_t i = 0; i < kCards; ++i)
        for (int64_t j = 0; j < kCards; ++j)
          if (lookup == Lookup::kSame ? i == j : numbers[j] == (numbers[i] + 1) % kNumbers) asked.emplace_back(i, j);
      if (asked.empty()) continue;
      const auto [q, a] = asked[pick(g, static_cast<int64_t>(asked.size()))];
      for (int64_t i = 0; i < kCards; ++i) ids.push_back(numbers[i] * kColours + colours[i]), target.push_back(-100);
      ids.push_back(lookup == Lookup::kSame ? kQuestion + numbers[q] : numbers[q] * kColours + colours[q]);
      target.push_back(colours[a]);
      c.answer_at.push_back(a);
      break;
    }
  }
  c.ids = tg::from_vector(ids, {B, kLen});
  c.target = tg::from_vector(target, {B, kLen});
  return c;
}

std::string card_label(int64_t token) {
  if (token >= kQuestion) return fmt::format("{} ?", token - kQuestion);
  return fmt::format("{} {}", token / kColours, kColourNames[token % kColours]);
}

struct LookupResult {
  double accuracy = 0, loss = 0;
  double on_answer = 0, on_self = 0;  // the question's mean attention on the answering card, and on itself
  tg::report::Heatmap map;            // the question's attention on one held-out deal
};

// One attention layer (width 64, one head, FFN 256, pre-norm) over card tokens, trained on fresh
// deals (64 a step, AdamW lr 3e-3 after a 100-step warm-up) and scored on 2,000 held-out deals.
LookupResult train_lookup(Lookup lookup, Variant variant, uint64_t seed, int64_t steps) {
  tg::manual_seed(seed);
  tg::DecoderLM lm({.vocab = kQuestion + kNumbers,
                    .context = kLen,
                    .layer = {.d_model = 64, .heads = 1, .d_ff = 256, .dropout = 0.0, .activation = tg::Activation::kGelu,
                              .norm_first = true},
                    .layers = 1,
                    .tie_weights = false});
  {
    // Unit-variance token and position vectors (as PyTorch's nn.Embedding starts): with GPT-2's
    // 0.02 the layer norm sees mostly noise at first and the lookups take many times longer to start.
    tg::NoGradGuard ng;
    tg::normal_(lm.tok_embed->weight, 0.0, 1.0);
    tg::normal_(lm.pos_embed->weight, 0.0, 1.0);
  }
  if (variant != Variant::kLearned) tg::fix_attention_projections(lm, variant == Variant::kIdentity ? tg::Projections::kIdentity : tg::Projections::kFrozen);
  const double lr = 3e-3;
  tg::AdamW opt(lm.named_parameters(), {.lr = lr, .weight_decay = 0.01});
  tg::Generator g(seed * 7919 + (lookup == Lookup::kNext ? 1 : 0));
  for (int64_t s = 0; s < steps; ++s) {
    const Cards b = deal(g, lookup, 64);
    opt.set_lr(lr * std::min(1.0, static_cast<double>(s + 1) / 100.0));
    Tensor loss = tg::cross_entropy(lm.forward(b.ids), b.target);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }

  tg::Generator held_out(1000003);  // the same 2,000 deals for every model
  const int64_t n = 2000;
  const Cards v = deal(held_out, lookup, n);
  tg::NoGradGuard ng;
  lm.eval();
  lm.set_record_attention(true);
  const Tensor logits = lm.forward(v.ids);
  const Tensor w = (*lm.layers)[0]->self_attn->last_weights;  // [n, 1, 9, 9]
  lm.set_record_attention(false);
  LookupResult r;
  r.loss = tg::cross_entropy(logits, v.target).item();
  const std::vector<int64_t> pred = tg::argmax(logits.narrow(1, kCards, 1), -1).to_vector<int64_t>();
  const std::vector<int64_t> want = v.target.narrow(1, kCards, 1).contiguous().to_vector<int64_t>();
  const std::vector<float> wv = w.to_vector<float>();
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    right += pred[i] == want[i];
    const float* row = wv.data() + (i * kLen + kCards) * kLen;  // the question's row
    r.on_answer += row[v.answer_at[i]];
    r.on_self += row[kCards];
  }
  r.accuracy = static_cast<double>(right) / n;
  r.on_answer /= n;
  r.on_self /= n;
  const std::vector<int64_t> ids = v.ids.narrow(0, 0, 1).contiguous().to_vector<int64_t>();
  std::vector<std::string> labels;
  for (int64_t t : ids) labels.push_back(card_label(t));
  r.map = {kVariantNames[static_cast<int>(variant)], {std::vector<float>(wv.begin() + kCards * kLen, wv.begin() + kLen * kLen)},
           {labels.back()}, labels, 1.0};
  return r;
}

struct LookupStats {
  Stat accuracy, loss, on_answer, on_self;
  tg::report::Heatmap map;  // the first seed's
};

}  // namespace

void exp2_ablation(Context& ctx, tg::report::Html& html) {
  TG_CHECK(!ctx.learned_runs.empty(), "explain_attention", "experiment 2 compares with experiment 1's models: run experiment 1 first");
  const auto t0 = std::chrono::steady_clock::now();
  const Lookup lookups[] = {Lookup::kSame, Lookup::kNext};
  const char* const lookup_keys[] = {"same_card", "next_card"};
  LookupStats cards[2][3];
  for (int l = 0; l < 2; ++l)
    for (int v = 0; v < 3; ++v)
      for (uint64_t seed : ctx.seeds()) {
        const LookupResult r = train_lookup(lookups[l], static_cast<Variant>(v), seed, ctx.opt.recall_steps);
        LookupStats& s = cards[l][v];
        s.accuracy.values.push_back(r.accuracy);
        s.loss.values.push_back(r.loss);
        s.on_answer.values.push_back(r.on_answer);
        s.on_self.values.push_back(r.on_self);
        if (s.map.w.empty()) s.map = r.map;
        std::fprintf(stderr, "card lookup '%s', %s projections, seed %llu: accuracy %.3f\n", lookup_keys[l], kVariantNames[v],
                     static_cast<unsigned long long>(seed), r.accuracy);
      }
  const double lookup_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The translator: identity and frozen random against experiment 1's learned models, seed by seed.
  const std::vector<Run> identity =
      train_seeds(ctx, ctx.de_en, "identity", [](tg::Transformer& m) { tg::fix_attention_projections(m, tg::Projections::kIdentity); });
  const std::vector<Run> frozen =
      train_seeds(ctx, ctx.de_en, "frozen_random", [](tg::Transformer& m) { tg::fix_attention_projections(m, tg::Projections::kFrozen); });
  const Stat tr[3] = {valid_losses(ctx.learned_runs), valid_losses(identity), valid_losses(frozen)};

  std::vector<std::vector<std::string>> rows;
  for (int l = 0; l < 2; ++l)
    for (int v = 0; v < 3; ++v) {
      const LookupStats& s = cards[l][v];
      rows.push_back({v == 0 ? (l == 0 ? "same: \"which colour has card 5?\"" : "next: \"which colour has the card after this one?\"")
                             : "",
                      kVariantNames[v], show(s.accuracy, 1, 100) + "\u00a0%", show(s.loss, 3), show(s.on_answer, 1, 100) + "\u00a0%",
                      show(s.on_self, 1, 100) + "\u00a0%"});
      const std::string variant = std::string(lookup_keys[l]) + "/" + kVariantKeys[v];
      ctx.headline("exp2", variant, "accuracy", s.accuracy);
      ctx.headline("exp2", variant, "loss", s.loss);
      ctx.headline("exp2", variant, "attention_on_answer", s.on_answer);
    }
  for (int v = 0; v < 3; ++v) ctx.headline("exp2", std::string("translation/") + kVariantKeys[v], "valid_loss", tr[v]);

  const LookupStats &next_l = cards[1][0], &next_i = cards[1][1], &next_f = cards[1][2];
  const LookupStats &same_l = cards[0][0], &same_i = cards[0][1];
  const double chance = 1.0 / kColours;
  auto pct = [](const Stat& s) { return show(s, 1, 100) + "\u00a0%"; };
  const std::string seeds = fmt::format("{} seed{}", ctx.opt.seeds, ctx.opt.seeds == 1 ? "" : "s");
  ctx.answers.push_back(
      {"Do W_Q, W_K and W_V matter? What would attention be without them?",
       fmt::format("Without them (Q = K = V = X) attention can only look for tokens that resemble the query: it finds the card "
                   "asked for by name ({} correct) but not \"the card after this one\", where the query must look for "
                   "something other than itself: {} with learned projections, {} with the identity (chance is {:.1f} %); "
                   "frozen random ones reach {}. In the translator the three differ {} after {}.",
                   pct(same_i.accuracy), pct(next_l.accuracy), pct(next_i.accuracy), 100 * chance, pct(next_f.accuracy),
                   separated(tr[0], tr[1]) || separated(tr[0], tr[2]) ? "measurably" : "by less than the seeds' noise",
                   ctx.budget()),
       "exp2", "experiment 2"});

  html.heading("2. Do W_Q, W_K and W_V matter? Learned vs identity vs frozen random projections", 2, "exp2");
  html.paragraph(fmt::format(
      "Attention scores are q·k with q = x W_Q and k = x W_K. With W_Q = W_K = W_V = I (\"identity\") the score is x_i·x_j: "
      "a similarity, so each token looks for tokens like itself. A learned pair W_Q, W_K lets a token look for something "
      "else than what it is. Two lookups test this with one attention layer (width 64, one head), so that nothing but "
      "attention can route information: {} cards (a number 0-15 and a colour) lie on the table, then a question. "
      "Same: a question token \"which colour has card n?\"; the answer's card is found by equality. Next: the question "
      "is one of the cards, and the answer is the colour of the card with the next number (15 is followed by 0). Each "
      "model trains {} steps of 64 fresh deals, {}; accuracy on 2,000 held-out deals (chance {:.1f} %), mean ± spread over "
      "the seeds, and where the question's attention goes.",
      kCards, ctx.opt.recall_steps, seeds, 100 * chance));
  html.table({"lookup", "W_Q, W_K, W_V", "accuracy", "loss (nats)", "question's attention on the answer card",
              "question's attention on itself"},
             rows);
  auto judge = [&](const LookupStats& a, const std::string& an, const LookupStats& b, const std::string& bn) {
    const double gap = 100 * (a.accuracy.mean() - b.accuracy.mean());
    if (a.accuracy.values.size() < 2)
      return fmt::format("{} {} {} by {:.1f} points on one seed (--seeds 3 tells whether that exceeds the noise)", an,
                         gap > 0 ? "beats" : "trails", bn, std::fabs(gap));
    if (separated(a.accuracy, b.accuracy))
      return fmt::format("{} {} {} by {:.1f} points, every seed", an, gap > 0 ? "beats" : "trails", bn, std::fabs(gap));
    return fmt::format("{} and {}: no measurable difference ({:.1f} points, within the seeds' spread)", an, bn, std::fabs(gap));
  };
  html.paragraph(fmt::format(
      "Next card: {}; {}. With the identity the question attends to itself ({} of its weight), the card most like it, and "
      "the answer card gets {}: the accuracy stays at chance. Frozen random projections do break the symmetry (x W_Q and "
      "x W_K differ), and the embeddings and the FFN slowly learn around them; learning W_Q and W_K lets the query say "
      "\"I look for number n + 1\" while the key says \"I am n + 1\". Same card: {} — a lookup by equality is what the "
      "identity computes anyway, so there the projections buy nothing{}",
      judge(next_l, "learned", next_i, "identity"), judge(next_l, "learned", next_f, "frozen random"), pct(next_i.on_self),
      pct(next_i.on_answer), judge(same_l, "learned", same_i, "identity"),
      separated(same_l.accuracy, same_i.accuracy) && same_l.accuracy.mean() < same_i.accuracy.mean()
          ? "; at this budget learning them even costs accuracy, as query and key projections and embeddings must first "
            "agree on a code that the identity gives for free."
          : "."));
  html.heatmap_grid("Next card, the first seed: where the question (row) attends on one held-out deal (columns: the cards, "
                    "then the question itself)",
                    {next_l.map, next_i.map, next_f.map}, 3);

  const int64_t all = ctx.learned[0]->num_parameters(true);
  int64_t projections = 0;
  for (const auto& [n, p] : ctx.learned[0]->named_parameters())
    if (n.find(".w_q.") != std::string::npos || n.find(".w_k.") != std::string::npos || n.find(".w_v.") != std::string::npos)
      projections += p.numel();
  html.heading("The translator", 3);
  html.table({"W_Q, W_K, W_V", "validation loss (nats/token)", "trainable parameters"},
             {{"learned (the transformer)", show(tr[0]), std::to_string(all)},
              {"identity: Q = K = V = X", show(tr[1]), std::to_string(all - projections)},
              {"frozen at their random initialisation", show(tr[2]), std::to_string(all - projections)}});
  html.line_chart("training loss (mean over the seeds)",
                  {{"learned", mean_curve(ctx.learned_runs)}, {"identity", mean_curve(identity)}, {"frozen random", mean_curve(frozen)}},
                  {.x_label = "step", .y_label = "nats/token"});
  html.paragraph("Learned vs identity: " + verdict("learned", tr[0], "identity", tr[1], "nats", ctx.budget()) +
                 " Learned vs frozen random: " + verdict("learned", tr[0], "frozen random", tr[2], "nats", ctx.budget()) +
                 " A translator has embeddings, FFNs and cross-attention that can work around fixed projections for a while; "
                 "the card lookups above isolate what attention itself needs.");
  log_result(ctx, "exp2", {{"next_card_learned_accuracy", next_l.accuracy.mean()},
                           {"next_card_identity_accuracy", next_i.accuracy.mean()},
                           {"next_card_frozen_random_accuracy", next_f.accuracy.mean()},
                           {"same_card_learned_accuracy", same_l.accuracy.mean()},
                           {"same_card_identity_accuracy", same_i.accuracy.mean()},
                           {"same_card_frozen_random_accuracy", cards[0][2].accuracy.mean()},
                           {"learned", tr[0].mean()},
                           {"identity", tr[1].mean()},
                           {"frozen_random", tr[2].mean()}});
  std::printf("experiment 2: next-card accuracy learned %s, identity %s, frozen random %s; same-card learned %s, identity %s, "
              "frozen random %s (%.0f s); translator validation loss learned %s, identity %s, frozen random %s\n",
              pct(next_l.accuracy).c_str(), pct(next_i.accuracy).c_str(), pct(next_f.accuracy).c_str(),
              pct(same_l.accuracy).c_str(), pct(same_i.accuracy).c_str(), pct(cards[0][2].accuracy).c_str(), lookup_secs,
              show(tr[0]).c_str(), show(tr[1]).c_str(), show(tr[2]).c_str());
}

}  // namespace explain
