// Incremental decoding: the causal offset of the attention kernels, key/value caches in
// multi-head attention and the decoder stacks, and greedy, beam search and sampling with and
// without them (the cached logits must equal the recomputed ones), top-p sampling, and the
// target key-padding mask.
#include <array>
#include <set>

#include "test_util.h"

namespace tgt {
namespace {

// Queries at positions offset .. offset + T - 1 of S keys: fused and unfused agree, both
// directions, across the kernel's 64-wide blocks.
TEST(CausalOffset, FusedMatchesUnfusedAndGradchecks) {
  tg::manual_seed(21);
  for (auto [T, S, off] : std::vector<std::array<int64_t, 3>>{{1, 9, 8}, {3, 10, 7}, {3, 10, 2}, {70, 140, 70}, {65, 200, 100}}) {
    Tensor q = leaf({2, T, 8}), k = leaf({2, S, 8}), v = leaf({2, S, 5});
    tg::AttentionOptions o{.causal = true, .causal_offset = off};
    Tensor ref = tg::attention_unfused(q, k, v, o).output, fused = tg::flash_attention(q, k, v, o);
    EXPECT_TRUE(close(fused, ref, 1e-10, 1e-12)) << T << " " << S << " " << off;
    Tensor g = tg::randn(ref.shape(), tg::kFloat64);
    auto gr = tg::grad({ref}, {q, k, v}, {g}), gf = tg::grad({fused}, {q, k, v}, {g});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(gf[i], gr[i], 1e-9, 1e-11)) << "gradient " << i << " T " << T;
  }
  Tensor q = leaf({1, 3, 4}), k = leaf({1, 6, 4}), v = leaf({1, 6, 3});
  EXPECT_TRUE(gradcheck_ok([](const std::vector<Tensor>& in) {
    return tg::flash_attention(in[0], in[1], in[2], {.causal = true, .causal_offset = 3});
  }, {q, k, v}));
  // Offset 0 with T < S is PyTorch's top-left alignment; the last T queries of a T = S causal
  // attention are offset S - T.
  Tensor qs = tg::randn({1, 6, 4}, tg::kFloat64), ks = tg::randn({1, 6, 4}, tg::kFloat64), vs = tg::randn({1, 6, 4}, tg::kFloat64);
  Tensor full = tg::flash_attention(qs, ks, vs, {.causal = true});
  Tensor tail = tg::flash_attention(qs.narrow(1, 4, 2), ks, vs, {.causal = true, .causal_offset = 4});
  EXPECT_TRUE(close(tail, full.narrow(1, 4, 2), 1e-12, 1e-12));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(qs, ks, vs, {.causal = true, .causal_offset = -1}); },
                          {"flash_attention", "causal_offset", "-1"}));
  EXPECT_TRUE(throws_with([] { tg::causal_mask(2, 3, -2); }, {"causal_mask", "-2"}));
}

// kv_length: the kernels read only the first kv_length keys and values (a cache with room past
// its filled part), in both directions; the rows past it get a zero gradient.
TEST(CausalOffset, KvLengthReadsOnlyTheFilledKeys) {
  tg::manual_seed(23);
  for (auto [T, S, rows, off] : std::vector<std::array<int64_t, 4>>{{1, 5, 9, 4}, {3, 7, 64, 4}, {2, 70, 140, 68}}) {
    Tensor q = leaf({2, 2, T, 8}), k = leaf({2, 1, rows, 8}), v = leaf({2, 1, rows, 5});  // grouped-query, 2 on 1
    Tensor kn = k.narrow(2, 0, S), vn = v.narrow(2, 0, S);
    Tensor want = tg::flash_attention(q, kn, vn, {.causal = true, .causal_offset = off});
    Tensor got = tg::flash_attention(q, k, v, {.causal = true, .causal_offset = off, .kv_length = S});
    EXPECT_TRUE(close(got, want, 0, 0)) << T << " " << S << " " << rows;
    Tensor unfused = tg::attention_unfused(q, k, v, {.causal = true, .causal_offset = off, .kv_length = S}).output;
    EXPECT_TRUE(close(unfused, want, 1e-10, 1e-12));
    Tensor g = tg::randn(want.shape(), tg::kFloat64);
    auto gw = tg::grad({want}, {q, k, v}, {g}), gg = tg::grad({got}, {q, k, v}, {g});
    EXPECT_TRUE(close(gg[0], gw[0], 0, 0));
    for (int i = 1; i < 3; ++i) {
      EXPECT_TRUE(close(gg[i].narrow(2, 0, S), gw[i].narrow(2, 0, S), 0, 0)) << "gradient " << i;
      EXPECT_EQ(tg::sum(tg::abs(gg[i].narrow(2, S, rows - S))).item(), 0.0) << "gradient " << i << " past kv_length";
    }
  }
  EXPECT_TRUE(gradcheck_ok([](const std::vector<Tensor>& in) {
    return tg::flash_attention(in[0], in[1], in[2], {.causal = true, .causal_offset = 2, .kv_length = 4});
  }, {leaf({1, 2, 4}), leaf({1, 6, 4}), leaf({1, 6, 3})}));
  Tensor q = tg::ones({1, 2, 4}), k = tg::ones({1, 6, 4}), v = tg::ones({1, 6, 3});
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, k, v, {.kv_length = 7}); }, {"flash_attention", "kv_length", "[0, 6]", "7"}));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, k, v, {.kv_length = -1}); }, {"flash_attention", "kv_length", "-1"}));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, k, v, {.mask = tg::ones({2, 6}).to(tg::kBool), .kv_length = 4}); },
                          {"flash_attention", "mask of shape [2, 6]", "[1, 2, 4]"}));
}

// Decoding without gradients: the cache's keys and values are written in place into room past
// its length (a step copies only its own position), a copy of a cache gets its own buffers when
// it appends, reorder keeps the room, and the result equals the full forward throughout.
TEST(KVCache, AppendsInPlaceWithoutGradientsAndCopiesOnWrite) {
  tg::manual_seed(24);
  tg::MultiHeadAttention mha(tg::AttentionConfig{.d_model = 12, .heads = 4, .kv_heads = 2});
  mha.to(tg::kFloat64);
  tg::NoGradGuard ng;
  Tensor x = tg::randn({2, 9, 12}, tg::kFloat64);
  Tensor full = mha.forward(x, x, {.causal = true});
  tg::KVCache cache;
  std::vector<Tensor> steps{mha.forward(x.narrow(1, 0, 3), x.narrow(1, 0, 3), {.causal = true}, &cache)};
  ASSERT_GT(cache.k.size(2), 3);  // room past the prompt
  EXPECT_EQ(cache.keys().shape(), Shape({2, 2, 3, 3}));
  const tg::Storage* buffer = cache.k.impl().storage.get();
  for (int64_t t = 3; t < 6; ++t) steps.push_back(mha.forward(x.narrow(1, t, 1), x.narrow(1, t, 1), {.causal = true}, &cache));
  EXPECT_EQ(cache.k.impl().storage.get(), buffer) << "a step within the room reallocated the cache";
  EXPECT_EQ(cache.length(), 6);

  // A copy appends its own tokens; the original goes on with the sequence's, unaffected.
  tg::KVCache other = cache;
  Tensor y = tg::randn({2, 3, 12}, tg::kFloat64);
  Tensor other_out = mha.forward(y, y, {.causal = true}, &other);
  EXPECT_NE(other.k.impl().storage.get(), cache.k.impl().storage.get());
  for (int64_t t = 6; t < 9; ++t) steps.push_back(mha.forward(x.narrow(1, t, 1), x.narrow(1, t, 1), {.causal = true}, &cache));
  EXPECT_TRUE(close(tg::concat(steps, 1), full, 1e-12, 1e-12));
  Tensor xy = tg::concat({x.narrow(1, 0, 6), y}, 1);
  EXPECT_TRUE(close(other_out, mha.forward(xy, xy, {.causal = true}).narrow(1, 6, 3), 1e-12, 1e-12));

  // Growing past the room keeps what was cached.
  tg::KVCache grown;
  Tensor long_x = tg::randn({1, 70, 12}, tg::kFloat64);
  std::vector<Tensor> parts;
  for (int64_t t = 0; t < 70; t += 10) parts.push_back(mha.forward(long_x.narrow(1, t, 10), long_x.narrow(1, t, 10), {.causal = true}, &grown));
  EXPECT_GE(grown.k.size(2), 70);
  tg::KVCache reserved{.reserve = 70};  // room for all 70 at the first call: no step reallocates
  mha.forward(long_x.narrow(1, 0, 10), long_x.narrow(1, 0, 10), {.causal = true}, &reserved);
  EXPECT_EQ(reserved.k.size(2), 70);
  EXPECT_TRUE(close(tg::concat(parts, 1), mha.forward(long_x, long_x, {.causal = true}), 1e-12, 1e-12));

  // Reorder with room: rows kept, repeated, dropped; the room stays.
  tg::KVCache r = cache;
  r.reorder(tg::tensor({1, 1, 0}).to(tg::kInt64));
  EXPECT_EQ(r.length(), 9);
  EXPECT_EQ(r.k.size(2), cache.k.size(2));
  EXPECT_TRUE(close(r.keys().narrow(0, 0, 1), cache.keys().narrow(0, 1, 1), 0, 0));
  EXPECT_TRUE(close(r.values().narrow(0, 2, 1), cache.values().narrow(0, 0, 1), 0, 0));
  EXPECT_TRUE(throws_with([&] { r.reorder(tg::tensor({0, 3}).to(tg::kInt64)); }, {"KVCache::reorder", "row 1 is 3", "3 sequences"}));
  // Keys of another shape are refused, not written past the buffer.
  EXPECT_TRUE(throws_with([&] { cache.append(tg::zeros({2, 4, 1, 3}, tg::kFloat64), tg::zeros({2, 4, 1, 3}, tg::kFloat64)); },
                          {"KVCache", "[2, 2, ", "[2, 4, 1, 3]"}));
}

// A cache filled without gradients, then a step with them: the step is differentiable (its keys
// are joined by concat) and gives the same output.
TEST(KVCache, AStepWithGradientsAfterInPlaceSteps) {
  tg::manual_seed(25);
  tg::MultiHeadAttention mha(8, 2);
  mha.to(tg::kFloat64);
  Tensor x = tg::randn({1, 5, 8}, tg::kFloat64);
  Tensor full = mha.forward(x, x, {.causal = true});
  tg::KVCache cache;
  {
    tg::NoGradGuard ng;
    mha.forward(x.narrow(1, 0, 4), x.narrow(1, 0, 4), {.causal = true}, &cache);
  }
  ASSERT_GT(cache.k.size(2), 4);
  Tensor last = mha.forward(x.narrow(1, 4, 1), x.narrow(1, 4, 1), {.causal = true}, &cache);
  EXPECT_TRUE(close(last, full.narrow(1, 4, 1), 1e-12, 1e-12));
  EXPECT_EQ(cache.k.size(2), 5);
  tg::sum(last).backward();
  EXPECT_TRUE(mha.w_k->weight.grad().defined());
  EXPECT_GT(tg::sum(tg::abs(mha.w_k->weight.grad())).item(), 0.0);
}

// Self-attention fed one position at a time through a cache equals attention over the whole
// sequence; a fixed (cross-attention) cache is projected once and reused.
TEST(KVCache, MultiHeadAttentionIncrementalEqualsFull) {
  tg::manual_seed(22);
  tg::MultiHeadAttention mha(12, 3);
  mha.to(tg::kFloat64);
  Tensor x = tg::randn({2, 7, 12}, tg::kFloat64), mem = tg::randn({2, 5, 12}, tg::kFloat64);
  Tensor full = mha.forward(x, x, {.causal = true});
  tg::KVCache cache;
  std::vector<Tensor> steps;
  steps.push_back(mha.forward(x.narrow(1, 0, 3), x.narrow(1, 0, 3), {.causal = true}, &cache));  // a 3-token prefill
  for (int64_t t = 3; t < 7; ++t) steps.push_back(mha.forward(x.narrow(1, t, 1), x.narrow(1, t, 1), {.causal = true}, &cache));
  EXPECT_EQ(cache.length(), 7);
  EXPECT_TRUE(close(tg::concat(steps, 1), full, 1e-12, 1e-12));

  tg::KVCache cross{.fixed = true};
  Tensor c_full = mha.forward(x, mem);
  Tensor c1 = mha.forward(x.narrow(1, 0, 4), mem, {}, &cross);
  Tensor c2 = mha.forward(x.narrow(1, 4, 3), Tensor(), {}, &cross);  // memory not read again
  EXPECT_EQ(cross.length(), 5);
  EXPECT_TRUE(close(tg::concat({c1, c2}, 1), c_full, 1e-12, 1e-12));

  // Reordering keeps, repeats and drops rows.
  tg::KVCache r = cache;
  r.reorder(tg::tensor({1, 1, 0}).to(tg::kInt64));
  EXPECT_TRUE(close(r.k.narrow(0, 0, 1), cache.k.narrow(0, 1, 1), 0, 0));
  EXPECT_TRUE(close(r.k.narrow(0, 2, 1), cache.k.narrow(0, 0, 1), 0, 0));
  EXPECT_TRUE(throws_with([&] { mha.forward(x.narrow(1, 0, 1), x.narrow(1, 0, 1), {}, &r); },
                          {"MultiHeadAttention", "KVCache holds 3 sequences", "input has 2"}));
}

constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kDigit0 = 3, kVocab = 13;

// The small translator of these tests, as initialised (seed 23): what holds for any weights (the
// cache's logits equal the recomputed ones; a hidden target position changes nothing) is checked
// on it, without the training only the beam-search test needs (each test is its own process).
tg::Transformer* new_reverser() {
  tg::manual_seed(23);
  tg::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = kVocab;
  c.layer = {.d_model = 32, .heads = 4, .d_ff = 64, .dropout = 0.0};
  c.encoder_layers = c.decoder_layers = 2;
  c.max_len = 32;
  auto* m = new tg::Transformer(c);
  m->eval();
  return m;
}

tg::Transformer& untrained_reverser() {
  static tg::Transformer* model = new_reverser();
  return *model;
}

// The same translator trained for a few hundred steps to reverse digit strings (a trained model:
// peaked distributions, where a wrong cache would change what beam search picks).
tg::Transformer& trained_reverser() {
  static tg::Transformer* model = [] {
    tg::Transformer* m = new_reverser();
    m->train();
    tg::AdamW opt(m->named_parameters(), {.lr = 5e-3});
    tg::Generator g(5);
    for (int step = 0; step < 500; ++step) {
      const int64_t n = 32, S = 6, T = 7;
      std::vector<int64_t> src(n * S, kPad), tin(n * T, kPad), tout(n * T, kPad);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t len = 1 + static_cast<int64_t>(g.next_u64() % S);
        std::vector<int64_t> d(len);
        for (auto& x : d) x = kDigit0 + static_cast<int64_t>(g.next_u64() % 10);
        tin[i * T] = kBos;
        for (int64_t j = 0; j < len; ++j) {
          src[i * S + j] = d[j];
          tin[i * T + j + 1] = tout[i * T + j] = d[len - 1 - j];
        }
        tout[i * T + len] = kEos;
      }
      Tensor logits = m->forward(tg::from_vector(src, {n, S}), tg::from_vector(tin, {n, T}));
      Tensor loss = tg::cross_entropy(logits.reshape({n * T, kVocab}), tg::from_vector(tout, {n * T}), {.ignore_index = kPad});
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    m->eval();
    return m;
  }();
  return *model;
}

// Source sentences of different lengths, padded.
Tensor padded_sources() {
  return tg::from_vector(std::vector<int64_t>{3, 4, 5, 6, 7, 8,  //
                                              9, 10, 11, kPad, kPad, kPad,  //
                                              12, kPad, kPad, kPad, kPad, kPad,  //
                                              5, 5, 6, 6, kPad, kPad},
                         {4, 6});
}

TEST(KVCache, TransformerCachedLogitsEqualRecomputed) {
  tg::Transformer& model = untrained_reverser();
  tg::NoGradGuard ng;
  Tensor src = padded_sources();
  Tensor memory = model.encode(src);
  Tensor tgt = tg::from_vector(std::vector<int64_t>{kBos, 8, 7, 6, 5, 4, 3,  //
                                                    kBos, 11, 10, 9, kEos, kPad, kPad,  //
                                                    kBos, 12, kEos, kPad, kPad, kPad, kPad,  //
                                                    kBos, 6, 6, 5, 5, kEos, kPad},
                               {4, 7});
  Tensor full = model.decode(tgt, memory, src);
  tg::DecoderCache cache;
  for (int64_t t = 0; t < 7; ++t) {
    Tensor step = model.decode(tgt.narrow(1, t, 1), memory, src, false, &cache);
    EXPECT_TRUE(close(step, full.narrow(1, t, 1), 1e-5, 1e-5)) << "position " << t;
  }
  EXPECT_EQ(cache.length, 7);
  EXPECT_EQ(cache.self.size(), 2u);
  EXPECT_EQ(cache.cross[0].length(), 6);  // the source length, projected once
}

TEST(KVCache, GreedyAndBeamSearchAgreeWithAndWithoutCache) {
  tg::Transformer& model = trained_reverser();
  Tensor src = padded_sources();
  tg::DecodeOptions with{.bos = kBos, .eos = kEos, .max_len = 10, .beam_size = 4}, without = with;
  without.use_cache = false;
  auto a = tg::greedy_decode(model, src, with), b = tg::greedy_decode(model, src, without);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[1], (std::vector<int64_t>{11, 10, 9}));  // the model learned the task
  EXPECT_EQ(a[2], (std::vector<int64_t>{12}));
  for (int64_t row = 0; row < 4; ++row) {
    Tensor one = src.narrow(0, row, 1);
    auto x = tg::beam_search(model, one, with), y = tg::beam_search(model, one, without);
    ASSERT_EQ(x.size(), y.size());
    ASSERT_EQ(x.size(), 4u);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].tokens, y[i].tokens) << "row " << row << " hypothesis " << i;
      EXPECT_NEAR(x[i].log_prob, y[i].log_prob, 1e-5);
      EXPECT_EQ(x[i].finished, y[i].finished);
    }
  }
}

tg::DecoderLM& trained_lm() {
  static tg::DecoderLM* lm = [] {
    tg::manual_seed(24);
    auto* m = new tg::DecoderLM({.vocab = 8, .context = 24, .layer = {.d_model = 32, .heads = 2, .d_ff = 64,
                                 .dropout = 0.1, .activation = tg::Activation::kGelu, .norm_first = true}, .layers = 2});
    std::vector<int64_t> seq;
    for (int64_t phase = 0; phase < 8; ++phase)
      for (int64_t i = 0; i < 25; ++i) seq.push_back((phase * 3 + i * (1 + phase % 2)) % 8);
    Tensor all = tg::from_vector(seq, {8, 25});
    tg::AdamW opt(m->named_parameters(), {.lr = 3e-3});
    for (int step = 0; step < 100; ++step) {
      Tensor loss = tg::cross_entropy(m->forward(all.narrow(1, 0, 24)).reshape({8 * 24, 8}),
                                      all.narrow(1, 1, 24).reshape({8 * 24}));
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    m->eval();
    return m;
  }();
  return *lm;
}

TEST(KVCache, DecoderLMCachedLogitsAndSamplesEqualRecomputed) {
  tg::DecoderLM& lm = trained_lm();
  {
    tg::NoGradGuard ng;
    Tensor ids = tg::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 5, 5, 6, 6, 7, 7, 0, 0, 1, 1}, {2, 10});
    Tensor full = lm.forward(ids);
    tg::DecoderCache cache;
    Tensor first = lm.forward(ids.narrow(1, 0, 4), &cache);  // prefill
    EXPECT_TRUE(close(first, full.narrow(1, 0, 4), 1e-5, 1e-5));
    for (int64_t t = 4; t < 10; ++t)
      EXPECT_TRUE(close(lm.forward(ids.narrow(1, t, 1), &cache), full.narrow(1, t, 1), 1e-5, 1e-5)) << t;
    EXPECT_TRUE(throws_with([&] { lm.forward(tg::zeros({2, 15}, tg::kInt64), &cache); }, {"DecoderLM", "25", "24"}));
  }
  // Sampling: the same tokens with and without the cache, past the context too (40 > 24).
  for (double top_p : {1.0, 0.9}) {
    tg::Generator g1(7), g2(7);
    auto a = tg::sample(lm, {1, 2}, {.max_new_tokens = 40, .temperature = 1.5, .top_p = top_p}, g1);
    auto b = tg::sample(lm, {1, 2}, {.max_new_tokens = 40, .temperature = 1.5, .top_p = top_p, .use_cache = false}, g2);
    EXPECT_EQ(a, b) << "top_p " << top_p;
    EXPECT_EQ(a.size(), 40u);
  }
}

// top-p keeps the fewest most likely tokens whose probability reaches p: a tiny p is greedy.
TEST(Sampling, TopPKeepsTheNucleus) {
  tg::DecoderLM& lm = trained_lm();
  tg::Generator g(9);
  auto greedy = tg::sample(lm, {3}, {.max_new_tokens = 12, .top_k = 1});
  auto nucleus = tg::sample(lm, {3}, {.max_new_tokens = 12, .temperature = 2.0, .top_p = 1e-6}, g);
  EXPECT_EQ(nucleus, greedy);
  // With p = 1 and a high temperature, more than one token appears after the same context.
  tg::Generator g2(10);
  std::set<int64_t> seen;
  for (int i = 0; i < 30; ++i) seen.insert(tg::sample(lm, {3}, {.max_new_tokens = 1, .temperature = 5.0}, g2)[0]);
  EXPECT_GT(seen.size(), 1u);
  EXPECT_TRUE(throws_with([&] { tg::sample(lm, {3}, {.top_p = 0}); }, {"sample", "top_p", "(0, 1]"}));
  EXPECT_TRUE(throws_with([&] { tg::sample(lm, {3}, {.top_p = 1.5}); }, {"top_p"}));
}

// The target key-padding mask hides target positions from the decoder's self-attention: what a
// hidden position holds changes no other position's output.
TEST(TargetPadding, HiddenPositionsDoNotMatter) {
  tg::Transformer& model = untrained_reverser();
  tg::NoGradGuard ng;
  Tensor src = padded_sources().narrow(0, 0, 2);
  Tensor tgt1 = tg::from_vector(std::vector<int64_t>{kBos, 8, 7, 6, kBos, 11, 10, 9}, {2, 4});
  Tensor tgt2 = tg::from_vector(std::vector<int64_t>{kBos, 3, 7, 6, kBos, 11, 12, 9}, {2, 4});
  Tensor pad = tg::from_vector(std::vector<int64_t>{0, 1, 0, 0, 0, 0, 1, 0}, {2, 4}).to(tg::kBool);
  Tensor a = model.forward(src, tgt1, pad), b = model.forward(src, tgt2, pad);
  EXPECT_TRUE(close(a.narrow(1, 0, 1), b.narrow(1, 0, 1), 1e-6, 1e-6));
  EXPECT_TRUE(close(a.narrow(1, 3, 1), b.narrow(1, 3, 1), 1e-6, 1e-6));
  // Without the mask the changed token is seen.
  EXPECT_FALSE(close(model.forward(src, tgt1).narrow(1, 3, 1), model.forward(src, tgt2).narrow(1, 3, 1), 1e-6, 1e-6));
  EXPECT_TRUE(throws_with([&] { model.forward(src, tgt1, tg::zeros({2, 3}).to(tg::kBool)); },
                          {"key_padding has shape [2, 3]", "[2, 4]"}));
}

}  // namespace
}  // namespace tgt
