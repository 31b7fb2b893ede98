// Training end to end: a small encoder-decoder learns to reverse digit strings; every kind of
// weight (W_Q, W_K, W_V, embeddings, FFN) gets a gradient and moves in the same optimizer step;
// decoding (greedy, beam search, sampling).
#include <algorithm>
#include <chrono>

#include "test_util.h"

namespace tgt {
namespace {

constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kDigit0 = 3, kVocab = 13, kMaxDigits = 8;

struct Batch {
  Tensor src, tgt_in, tgt_out;
  std::vector<std::vector<int64_t>> digits;
};

// Random digit strings of length 1..kMaxDigits; the target is the string reversed.
Batch reversal_batch(tg::Generator& g, int64_t n) {
  Batch b;
  const int64_t S = kMaxDigits, T = kMaxDigits + 1;
  std::vector<int64_t> src(static_cast<size_t>(n * S), kPad), tin(static_cast<size_t>(n * T), kPad),
      tout(static_cast<size_t>(n * T), kPad);
  for (int64_t i = 0; i < n; ++i) {
    int64_t len = 1 + static_cast<int64_t>(g.next_u64() % kMaxDigits);
    std::vector<int64_t> d(static_cast<size_t>(len));
    for (auto& x : d) x = kDigit0 + static_cast<int64_t>(g.next_u64() % 10);
    for (int64_t j = 0; j < len; ++j) src[i * S + j] = d[j];
    std::vector<int64_t> r(d.rbegin(), d.rend());
    tin[i * T] = kBos;
    for (int64_t j = 0; j < len; ++j) {
      tin[i * T + j + 1] = r[j];
      tout[i * T + j] = r[j];
    }
    tout[i * T + len] = kEos;
    b.digits.push_back(d);
  }
  b.src = tg::from_vector(src, {n, S});
  b.tgt_in = tg::from_vector(tin, {n, T});
  b.tgt_out = tg::from_vector(tout, {n, T});
  return b;
}

tg::TransformerConfig reversal_config() {
  tg::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = kVocab;
  c.layer = {.d_model = 64, .heads = 4, .d_ff = 128, .dropout = 0.0};
  c.encoder_layers = c.decoder_layers = 2;
  c.max_len = 32;
  c.pad_id = kPad;
  return c;
}

double exact_match(tg::Transformer& model, const Batch& b) {
  auto out = tg::greedy_decode(model, b.src, {.bos = kBos, .eos = kEos, .max_len = kMaxDigits + 2});
  int64_t ok = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<int64_t> want(b.digits[i].rbegin(), b.digits[i].rend());
    ok += out[i] == want;
  }
  return static_cast<double>(ok) / static_cast<double>(out.size());
}

TEST(Train, EncoderDecoderLearnsToReverseDigits) {
  tg::manual_seed(42);
  tg::Transformer model(reversal_config());
  tg::AdamW opt(model.named_parameters(), {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01});
  tg::WarmupCosineSchedule sched{.peak = 3e-3, .warmup = 100, .total = 2000, .min_lr = 1e-4};
  tg::Generator data(7), held_out(99);
  Batch test = reversal_batch(held_out, 500);
  double acc = 0, first_loss = 0, loss_value = 0;
  int64_t step = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (step < 3000) {
    Batch b = reversal_batch(data, 64);
    Tensor loss = tg::cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out, {.ignore_index = kPad});
    opt.zero_grad();
    loss.backward();
    tg::clip_grad_norm(model.parameters(), 1.0);
    opt.set_lr(sched(++step));
    opt.step();
    loss_value = loss.item();
    if (step == 1) first_loss = loss_value;
    if (step % 200 == 0) {
      acc = exact_match(model, test);
      if (acc >= 0.995) break;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("reversal: %lld steps, %.1f s, loss %.3f -> %.4f, exact match %.1f%% on 500 held-out strings\n",
              static_cast<long long>(step), secs, first_loss, loss_value, 100 * acc);
  EXPECT_GE(acc, 0.99);

  // Beam search agrees on held-out strings and returns its hypotheses best first.
  for (int i = 0; i < 5; ++i) {
    Tensor src = test.src.narrow(0, i, 1);
    auto hyps = tg::beam_search(model, src, {.bos = kBos, .eos = kEos, .max_len = kMaxDigits + 2, .beam_size = 3});
    ASSERT_FALSE(hyps.empty());
    EXPECT_EQ(hyps[0].tokens, std::vector<int64_t>(test.digits[i].rbegin(), test.digits[i].rend()));
    EXPECT_TRUE(hyps[0].finished);
    for (size_t h = 1; h < hyps.size(); ++h) EXPECT_GE(hyps[h - 1].score, hyps[h].score);
    // Beam size 1 is greedy decoding.
    auto one = tg::beam_search(model, src, {.bos = kBos, .eos = kEos, .max_len = kMaxDigits + 2, .beam_size = 1});
    EXPECT_EQ(one[0].tokens, tg::greedy_decode(model, src, {.bos = kBos, .eos = kEos, .max_len = kMaxDigits + 2})[0]);
  }
  EXPECT_TRUE(model.is_training());  // decoding restored the mode
}

// The same path in a few steps (training with dropout, greedy and beam decoding, a checkpoint of
// the trained state): what the sanitizer build runs instead of the long convergence test.
TEST(Train, ShortRunIsClean) {
  tg::manual_seed(8);
  tg::TransformerConfig cfg = reversal_config();
  cfg.layer.dropout = 0.1;
  cfg.layer.attn_dropout = 0.1;
  tg::Transformer model(cfg);
  tg::AdamW opt(model.named_parameters(), {.lr = 3e-3});
  tg::Generator data(3);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    Batch b = reversal_batch(data, 32);
    Tensor loss = tg::cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out, {.ignore_index = kPad, .label_smoothing = 0.1});
    opt.zero_grad();
    loss.backward();
    tg::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_LT(last, first);
  Batch b = reversal_batch(data, 4);
  auto greedy = tg::greedy_decode(model, b.src, {.bos = kBos, .eos = kEos, .max_len = kMaxDigits + 2});
  EXPECT_EQ(greedy.size(), 4u);
  auto beams = tg::beam_search(model, b.src.narrow(0, 0, 1), {.bos = kBos, .eos = kEos, .max_len = kMaxDigits + 2, .beam_size = 3});
  EXPECT_FALSE(beams.empty());
}

// The point of the zoo: W_Q, W_K, W_V are ordinary parameters. One backward reaches them, the
// embeddings and the FFN alike; one optimizer step moves them all.
TEST(Train, AttentionProjectionsLearnLikeEveryOtherWeight) {
  tg::manual_seed(3);
  tg::Transformer model(reversal_config());
  tg::AdamW opt(model.named_parameters(), {.lr = 1e-3});
  std::map<std::string, Tensor> before;
  for (auto& [n, p] : model.named_parameters()) before[n] = p.detach().clone();
  tg::Generator data(5);
  for (int step = 0; step < 3; ++step) {
    Batch b = reversal_batch(data, 16);
    Tensor loss = tg::cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out, {.ignore_index = kPad});
    opt.zero_grad();
    loss.backward();
    for (auto& [n, p] : model.named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << n << " got no gradient";
      EXPECT_GT(tg::abs(p.grad()).sum().item(), 0.0) << n << " got an all-zero gradient";
    }
    opt.step();  // the one call that updates everything
  }
  int projections = 0;
  for (auto& [n, p] : model.named_parameters()) {
    bool kind = n.find(".w_q.") != std::string::npos || n.find(".w_k.") != std::string::npos ||
                n.find(".w_v.") != std::string::npos || n.find("_embed.") != std::string::npos ||
                n.find(".ffn.") != std::string::npos;
    if (!kind) continue;
    projections += n.find(".w_q.weight") != std::string::npos;
    EXPECT_GT(tg::amax(tg::abs(p - before[n])).item(), 0.0) << n << " did not change";
  }
  EXPECT_EQ(projections, 2 + 2 * 2);  // encoder self-attention; decoder self- and cross-attention
}

TEST(Train, DecoderLMOverfitsAndSamples) {
  tg::manual_seed(11);
  tg::DecoderLM lm({.vocab = 8, .context = 16, .layer = {.d_model = 32, .heads = 2, .d_ff = 64, .dropout = 0.0,
                                                          .activation = tg::Activation::kGelu, .norm_first = true},
                    .layers = 2});
  // Cyclic sequences 0 1 2 ... 7 0 1 ... starting at every phase (so position alone does not tell
  // the next token): after training, sampling continues the cycle from any prompt.
  std::vector<int64_t> seq;
  for (int64_t phase = 0; phase < 8; ++phase)
    for (int64_t i = 0; i < 17; ++i) seq.push_back((phase + i) % 8);
  Tensor all = tg::from_vector(seq, {8, 17});
  Tensor x = all.narrow(1, 0, 16), y = all.narrow(1, 1, 16);
  tg::AdamW opt(lm.named_parameters(), {.lr = 3e-3});
  double loss_value = 0;
  for (int step = 0; step < 150; ++step) {
    Tensor loss = tg::cross_entropy(lm.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item();
  }
  EXPECT_LT(loss_value, 0.05);
  tg::Generator g1(1), g2(1);
  auto a = tg::sample(lm, {3, 4}, {.max_new_tokens = 6, .temperature = 0.5, .top_k = 2}, g1);
  auto b = tg::sample(lm, {3, 4}, {.max_new_tokens = 6, .temperature = 0.5, .top_k = 2}, g2);
  EXPECT_EQ(a, b);  // same generator seed, same text
  EXPECT_EQ(a, (std::vector<int64_t>{5, 6, 7, 0, 1, 2}));
  auto greedy = tg::sample(lm, {0}, {.max_new_tokens = 20, .top_k = 1});  // longer than the context
  EXPECT_EQ(greedy.size(), 20u);
  auto stopped = tg::sample(lm, {0}, {.max_new_tokens = 20, .top_k = 1, .stop_token = 3});
  EXPECT_EQ(stopped, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(throws_with([&] { tg::sample(lm, {}, {}); }, {"at least one token"}));
  EXPECT_TRUE(throws_with([&] { tg::sample(lm, {9}, {}); }, {"prompt id 9"}));
  EXPECT_TRUE(throws_with([&] { tg::sample(lm, {1}, {.temperature = -0.5}); }, {"temperature must be >= 0", "-0.5"}));
  // Temperature 0 is greedy: the same tokens as top-1, drawing nothing.
  EXPECT_EQ(tg::sample(lm, {0}, {.max_new_tokens = 20, .temperature = 0}), greedy);
}

}  // namespace
}  // namespace tgt
