// Modules: registration and names, state dicts, freezing, layers; and parity with torch.nn on
// golden files exported by tests/golden/make_module_golden.py (Debian's python3-torch).
#include <algorithm>
#include <cstdio>
#include <string>

#include "test_util.h"

namespace tgt {
namespace {

using tg::AttentionMask;
using tg::StateDict;

tg::SafetensorsFile golden(const std::string& name) {
  auto f = tg::load_safetensors(std::string(TG_TEST_DATA_DIR) + "/golden/" + name);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return *f;
}

// The file's parameters: every entry that is not an input, output or gradient.
StateDict params_of(const tg::SafetensorsFile& f) {
  StateDict sd;
  for (const auto& [n, t] : f.tensors)
    if (n.rfind("input.", 0) != 0 && n.rfind("grad.", 0) != 0 && n != "output") sd.insert(n, t);
  return sd;
}

Tensor input(const tg::SafetensorsFile& f, const std::string& name) {
  Tensor t = f.tensors.at("input." + name).clone();
  if (t.dtype() == tg::kFloat64) t.set_requires_grad(true);
  return t;
}

// Output, then every parameter's gradient (and the float inputs') against PyTorch's.
void expect_parity(const tg::SafetensorsFile& f, tg::Module& m, const Tensor& out,
                   const std::vector<std::pair<std::string, Tensor>>& inputs, double rtol = 1e-9) {
  const Tensor& want = f.tensors.at("output");
  EXPECT_TRUE(close(out, want, rtol, rtol * 1e-2)) << "forward output";
  (out * f.tensors.at("input.gout")).sum().backward();
  int checked = 0;
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n << " received no gradient";
    EXPECT_TRUE(close(p.grad(), f.tensors.at("grad." + n), rtol, rtol * 1e-2)) << "gradient of " << n;
    ++checked;
  }
  for (const auto& [n, t] : inputs) EXPECT_TRUE(close(t.grad(), f.tensors.at("grad.input." + n), rtol, rtol * 1e-2)) << n;
  EXPECT_EQ(checked, static_cast<int>(params_of(f).size()));
}

TEST(Golden, MultiHeadAttentionSelfCausal) {
  auto f = golden("mha_self.safetensors");
  for (bool need_weights : {false, true}) {  // fused kernel, then generic ops with weights
    tg::MultiHeadAttention mha(8, 2);
    mha.to(tg::kFloat64);
    mha.load_state_dict(params_of(f));
    mha.record_weights = need_weights;
    Tensor x = input(f, "x");
    Tensor out = mha.forward(x, x, AttentionMask{.causal = true});
    expect_parity(f, mha, out, {{"x", x}});
    if (need_weights) {
      ASSERT_EQ(mha.last_weights.shape(), (Shape{2, 2, 5, 5}));
      // rows sum to one; nothing above the diagonal
      EXPECT_TRUE(close(mha.last_weights.sum({-1}), tg::ones({2, 2, 5}, tg::kFloat64)));
      EXPECT_EQ(mha.last_weights.to_vector<double>()[1], 0.0);
    }
  }
  // The explicit mask from the file gives the same as the causal flag.
  tg::MultiHeadAttention mha(8, 2);
  mha.to(tg::kFloat64);
  mha.load_state_dict(params_of(f));
  Tensor x = input(f, "x");
  expect_parity(f, mha, mha.forward(x, x, AttentionMask{.mask = f.tensors.at("input.attn_mask")}), {{"x", x}});
}

TEST(Golden, MultiHeadAttentionCrossWithPadding) {
  auto f = golden("mha_cross.safetensors");
  for (bool need_weights : {false, true}) {
    tg::MultiHeadAttention mha(12, 3);
    mha.to(tg::kFloat64);
    mha.load_state_dict(params_of(f));
    Tensor q = input(f, "x_q"), kv = input(f, "x_kv");
    AttentionMask m{.key_padding = f.tensors.at("input.key_padding_mask")};
    Tensor out = need_weights ? mha.forward_with_weights(q, kv, m).output : mha.forward(q, kv, m);
    expect_parity(f, mha, out, {{"x_q", q}, {"x_kv", kv}});
  }
}

void encoder_layer_case(const char* file, bool norm_first, tg::Activation act) {
  auto f = golden(file);
  tg::EncoderLayer layer({.d_model = 12, .heads = 3, .d_ff = 16, .dropout = 0.0, .activation = act, .norm_first = norm_first});
  layer.to(tg::kFloat64);
  layer.load_state_dict(params_of(f));
  Tensor src = input(f, "src");
  Tensor out = layer.forward(src, {.key_padding = f.tensors.at("input.src_key_padding_mask")});
  expect_parity(f, layer, out, {{"src", src}});
}

TEST(Golden, EncoderLayerPostNormRelu) { encoder_layer_case("encoder_layer.safetensors", false, tg::Activation::kRelu); }
TEST(Golden, EncoderLayerPreNormGelu) { encoder_layer_case("encoder_layer_prenorm.safetensors", true, tg::Activation::kGelu); }

TEST(Golden, DecoderLayer) {
  auto f = golden("decoder_layer.safetensors");
  tg::DecoderLayer layer({.d_model = 8, .heads = 2, .d_ff = 16, .dropout = 0.0});
  layer.to(tg::kFloat64);
  layer.load_state_dict(params_of(f));
  Tensor tgt = input(f, "tgt"), memory = input(f, "memory");
  Tensor out = layer.forward(tgt, memory, {.causal = true}, {.key_padding = f.tensors.at("input.memory_key_padding_mask")});
  expect_parity(f, layer, out, {{"tgt", tgt}, {"memory", memory}});
}

tg::TransformerConfig small_config() {
  tg::TransformerConfig c;
  c.src_vocab = 11;
  c.tgt_vocab = 13;
  c.layer = {.d_model = 8, .heads = 2, .d_ff = 16, .dropout = 0.0};
  c.encoder_layers = c.decoder_layers = 2;
  c.max_len = 64;
  return c;
}

TEST(Golden, TransformerFullModel) {
  auto f = golden("transformer.safetensors");
  tg::Transformer model(small_config());
  model.to(tg::kFloat64);
  model.load_state_dict(params_of(f));
  Tensor out = model.forward(f.tensors.at("input.src_ids"), f.tensors.at("input.tgt_ids"));
  expect_parity(f, model, out, {});
}

TEST(Golden, Float32WithinTolerance) {  // the same model in float32: 1e-4 relative
  auto f = golden("transformer.safetensors");
  tg::Transformer model(small_config());
  model.load_state_dict(params_of(f));  // converted to float32 on load
  Tensor out = model.forward(f.tensors.at("input.src_ids"), f.tensors.at("input.tgt_ids"));
  EXPECT_TRUE(close(out, f.tensors.at("output"), 1e-4, 1e-5));
  (out * f.tensors.at("input.gout").to(tg::kFloat32)).sum().backward();
  for (const auto& [n, p] : model.named_parameters())
    EXPECT_TRUE(close(p.grad(), f.tensors.at("grad." + n), 1e-4, 1e-4)) << n;
}

// ---- Module API ----

struct Mlp : tg::Module {
  std::shared_ptr<tg::Linear> fc1 = register_module("fc1", std::make_shared<tg::Linear>(4, 8));
  std::shared_ptr<tg::Linear> fc2 = register_module("fc2", std::make_shared<tg::Linear>(8, 2));
  Tensor forward(const Tensor& x) { return fc2->forward(tg::relu(fc1->forward(x))); }
};

TEST(Module, HierarchicalNames) {
  tg::manual_seed(0);
  tg::Transformer model(small_config());
  auto named = model.named_parameters();
  std::vector<std::string> names;
  for (auto& [n, p] : named) names.push_back(n);
  for (const char* want : {"src_embed.weight", "encoder.layers.0.self_attn.w_q.weight", "encoder.layers.1.ffn.linear2.bias",
                           "decoder.layers.1.cross_attn.w_v.weight", "decoder.norm.weight", "generator.bias"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(model.child("encoder.layers.1.self_attn")->type_name(), "MultiHeadAttention");
  EXPECT_TRUE(throws_with([&] { model.child("encoder.layers.7"); }, {"no child module '7'"}));
  // Parameters are plain leaves that require grad; buffers (positions) are not parameters.
  for (auto& [n, p] : named) {
    EXPECT_TRUE(p.is_leaf() && p.requires_grad()) << n;
    EXPECT_EQ(n.find("pos"), std::string::npos) << n;
  }
}

TEST(Module, SummaryCountsAndFreezing) {
  Mlp m;
  EXPECT_EQ(m.num_parameters(), 4 * 8 + 8 + 8 * 2 + 2);
  m.fc1->freeze();
  EXPECT_EQ(m.num_parameters(true), 8 * 2 + 2);
  std::string s = m.summary();
  EXPECT_NE(s.find("fc1.weight"), std::string::npos);
  EXPECT_NE(s.find("[8, 4]"), std::string::npos);
  EXPECT_NE(s.find("frozen"), std::string::npos);
  EXPECT_NE(s.find("58 parameters (18 trainable, 40 frozen)"), std::string::npos) << s;
  // A frozen parameter gets no gradient; the rest do.
  m.forward(tg::randn({3, 4})).sum().backward();
  EXPECT_FALSE(m.fc1->weight.grad().defined());
  EXPECT_TRUE(m.fc2->weight.grad().defined());
  m.unfreeze();
  m.freeze_parameter("fc2.bias");
  EXPECT_FALSE(m.fc2->bias.requires_grad());
  EXPECT_TRUE(m.fc1->weight.requires_grad());
  EXPECT_TRUE(throws_with([&] { m.freeze_parameter("fc3.bias"); }, {"no parameter named 'fc3.bias'"}));
  m.zero_grad();
  EXPECT_FALSE(m.fc2->weight.grad().defined());
}

TEST(Module, TrainEvalReachesChildren) {
  tg::Transformer model(small_config());
  EXPECT_TRUE(model.encoder->layers->operator[](1)->dropout1->is_training());
  model.eval();
  EXPECT_FALSE(model.encoder->layers->operator[](1)->dropout1->is_training());
  model.train();
  EXPECT_TRUE(model.decoder->is_training());
}

TEST(Module, StateDictErrors) {
  Mlp a, b;
  b.load_state_dict(a.state_dict());
  EXPECT_TRUE(close(b.fc1->weight, a.fc1->weight, 0, 0));
  StateDict missing;
  for (auto& [n, t] : a.state_dict())
    if (n != "fc2.bias") missing.insert(n, t);
  EXPECT_TRUE(throws_with([&] { b.load_state_dict(missing); }, {"load_state_dict", "missing [fc2.bias]"}));
  b.load_state_dict(missing, /*strict=*/false);  // non-strict: the rest loads
  StateDict extra = a.state_dict();
  extra.insert("fc3.weight", tg::zeros({1}));
  EXPECT_TRUE(throws_with([&] { b.load_state_dict(extra); }, {"unexpected [fc3.weight]"}));
  StateDict wrong;
  for (auto& [n, t] : a.state_dict()) wrong.insert(n, n == "fc1.weight" ? tg::zeros({4, 8}) : t);
  Tensor before = b.fc2->weight.clone();
  EXPECT_TRUE(throws_with([&] { b.load_state_dict(wrong); }, {"shape mismatch for 'fc1.weight'", "[4, 8]", "[8, 4]"}));
  EXPECT_TRUE(close(b.fc2->weight, before, 0, 0));  // nothing was copied
}

TEST(Module, RegistrationErrors) {
  struct Bad : tg::Module {
    void twice() {
      register_parameter("w", tg::zeros({2}));
      register_parameter("w", tg::zeros({2}));
    }
    void dotted() { register_parameter("a.b", tg::zeros({2})); }
    void non_leaf() { register_parameter("n", tg::zeros({2}).requires_grad_() * 2.0); }
  } bad;
  EXPECT_TRUE(throws_with([&] { bad.twice(); }, {"parameter 'w' registered twice"}));
  EXPECT_TRUE(throws_with([&] { bad.dotted(); }, {"'a.b'", "no '.'"}));
  EXPECT_TRUE(throws_with([&] { bad.non_leaf(); }, {"must be a leaf"}));
}

TEST(Module, ToFloat64KeepsIdentity) {
  Mlp m;
  Tensor handle = m.fc1->weight;
  m.to(tg::kFloat64);
  EXPECT_EQ(handle.dtype(), tg::kFloat64);
  EXPECT_TRUE(handle.same(m.named_parameters()[0].second));
}

// ---- Layers ----

TEST(Layers, LinearMatchesFormulaAndInit) {
  tg::manual_seed(3);
  tg::Linear lin(16, 4);
  auto w = lin.weight.to_vector<double>();
  for (double v : w) EXPECT_LE(std::fabs(v), 0.25);  // U(-1/sqrt(16), 1/sqrt(16))
  Tensor x = tg::randn({2, 3, 16});
  Tensor y = lin.forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  Tensor ref = tg::matmul(x.reshape({6, 16}), lin.weight.t()) + lin.bias;
  EXPECT_TRUE(close(y.reshape({6, 4}), ref, 1e-5, 1e-6));
  EXPECT_TRUE(throws_with([&] { lin.forward(tg::randn({2, 15})); }, {"Linear", "[2, 15]", "in_features = 16"}));
  tg::manual_seed(3);
  tg::Linear again(16, 4);
  EXPECT_TRUE(close(again.weight, lin.weight, 0, 0));  // seeded
}

TEST(Layers, EmbeddingPaddingAndPretrained) {
  tg::Embedding e(10, 4, {.padding_idx = 0});
  EXPECT_TRUE(close(e.weight.narrow(0, 0, 1), tg::zeros({1, 4}), 0, 0));
  Tensor ids = tg::tensor({{0, 3, 3}}).to(tg::kInt64);
  e.forward(ids).sum().backward();
  auto g = e.weight.grad().to_vector<double>();
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(g[0 * 4 + d], 0.0);  // the padding row gets nothing
    EXPECT_EQ(g[3 * 4 + d], 2.0);  // row 3 was used twice
  }
  Tensor vecs = tg::randn({5, 3});
  auto pre = tg::Embedding::from_pretrained(vecs, /*frozen=*/true);
  EXPECT_FALSE(pre->weight.requires_grad());
  EXPECT_TRUE(close(pre->forward(tg::tensor({4}).to(tg::kInt64)), vecs.narrow(0, 4, 1), 0, 0));
  auto trainable = tg::Embedding::from_pretrained(vecs, false);
  EXPECT_TRUE(trainable->weight.requires_grad());
  EXPECT_TRUE(throws_with([&] { e.forward(tg::tensor({10}).to(tg::kInt64)); }, {"10"}));
}

TEST(Layers, EmbeddingPaddingGradcheck) {
  Tensor w = leaf({6, 3});
  Tensor ids = tg::tensor({{1, 0, 5}, {0, 2, 2}}).to(tg::kInt64);
  // Rows read at padding positions are cut from the graph on purpose (their gradient is zero, not
  // the derivative), so the check looks at the output where it is defined to be differentiable.
  Tensor keep = tg::ne(ids, 0.0).to(tg::kFloat64).unsqueeze(2);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return tg::embedding(in[0], ids, 0) * keep; }, {w}));
}

TEST(Layers, SinusoidalMatchesPaper) {
  Tensor pe = tg::SinusoidalPositionalEncoding::table(50, 16, tg::kFloat64);
  auto v = pe.to_vector<double>();
  for (int pos : {0, 7, 49})
    for (int i = 0; i < 16; i += 2) {
      double angle = pos / std::pow(10000.0, i / 16.0);
      EXPECT_NEAR(v[pos * 16 + i], std::sin(angle), 1e-12);
      EXPECT_NEAR(v[pos * 16 + i + 1], std::cos(angle), 1e-12);
    }
  tg::SinusoidalPositionalEncoding enc(16, 8);
  EXPECT_TRUE(throws_with([&] { enc.forward(tg::zeros({1, 9, 16})); }, {"exceed max_len 8"}));
}

TEST(Layers, DropoutOnlyInTraining) {
  tg::Dropout d(0.5);
  Tensor x = tg::ones({1000});
  Tensor y = d.forward(x);
  double zeros = 0;
  for (double v : y.to_vector<double>()) zeros += v == 0;
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  d.eval();
  EXPECT_TRUE(close(d.forward(x), x, 0, 0));
}

TEST(Attention, SdpaWeightsAndScale) {
  Tensor q = tg::randn({2, 3, 4}, tg::kFloat64), k = tg::randn({2, 5, 4}, tg::kFloat64), v = tg::randn({2, 5, 6}, tg::kFloat64);
  auto r = tg::scaled_dot_product_attention(q, k, v, {}, true);
  Tensor ref_w = tg::softmax(tg::matmul(q, k, false, true) / 2.0, -1);
  EXPECT_TRUE(close(r.weights, ref_w, 1e-12, 1e-12));
  EXPECT_TRUE(close(r.output, tg::matmul(ref_w, v), 1e-12, 1e-12));
  auto fused = tg::scaled_dot_product_attention(q, k, v);
  EXPECT_FALSE(fused.weights.defined());
  EXPECT_TRUE(close(fused.output, r.output, 1e-12, 1e-12));
  auto unscaled = tg::scaled_dot_product_attention(q, k, v, {}, true, 0.0, 1.0);
  EXPECT_TRUE(close(unscaled.weights, tg::softmax(tg::matmul(q, k, false, true), -1), 1e-12, 1e-12));
}

TEST(Attention, QueryThatSeesNoKeyGetsZeroOnBothPaths) {
  Tensor q = tg::randn({1, 1, 3, 4}, tg::kFloat64).requires_grad_(), k = tg::randn({1, 1, 3, 4}, tg::kFloat64);
  Tensor mask = tg::tensor({{1, 1, 1}, {0, 1, 1}, {0, 0, 1}}).to(tg::kBool);  // row 0 sees nothing
  auto unfused = tg::scaled_dot_product_attention(q, k, k, {.mask = mask}, true);
  auto fused = tg::scaled_dot_product_attention(q, k, k, {.mask = mask});
  EXPECT_TRUE(close(unfused.output, fused.output, 1e-12, 1e-12));
  auto o = unfused.output.to_vector<double>();
  for (int d = 0; d < 4; ++d) EXPECT_EQ(o[d], 0.0);
  unfused.output.sum().backward();
  for (double g : q.grad().to_vector<double>()) EXPECT_TRUE(std::isfinite(g));
}

TEST(Attention, MultiHeadErrors) {
  EXPECT_TRUE(throws_with([] { tg::MultiHeadAttention(10, 3); }, {"d_model (10)", "num_heads (3)"}));
  tg::MultiHeadAttention mha(8, 2);
  EXPECT_TRUE(throws_with([&] { mha.forward(tg::zeros({2, 3, 8}), tg::zeros({2, 3, 7})); }, {"MultiHeadAttention", "[2, 3, 7]"}));
  EXPECT_TRUE(throws_with([&] { mha.forward(tg::zeros({2, 3, 8}), tg::zeros({2, 4, 8}), {.key_padding = tg::zeros({2, 3}, tg::kBool)}); },
                          {"key_padding", "[2, 4]"}));
}

TEST(Attention, FourSeparateProjections) {
  tg::MultiHeadAttention mha(8, 2);
  std::vector<std::string> names;
  for (auto& [n, p] : mha.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias", "w_v.weight", "w_v.bias",
                                             "w_o.weight", "w_o.bias"}));
}

TEST(Zoo, PaperBaseIsConstructible) {
  tg::Transformer base(tg::TransformerConfig::base(8000, 8000));
  // 6 + 6 layers of d_model 512, d_ff 2048, 8 heads; two 8000-word tables and the generator.
  int64_t per_enc = 4 * (512 * 512 + 512) + (512 * 2048 + 2048) + (2048 * 512 + 512) + 2 * 2 * 512;
  int64_t per_dec = per_enc + 4 * (512 * 512 + 512) + 2 * 512;
  int64_t want = 6 * per_enc + 6 * per_dec + 2 * 2 * 512 + 2 * 8000 * 512 + 8000 * 512 + 8000;
  EXPECT_EQ(base.num_parameters(), want);
  EXPECT_EQ(want, 56436544);  // what torch counts for the same model (bench/torch_train_step.py)
}

// Each way of giving positions: causal, cached decoding equal to the full forward, the parameters
// it should have, and no GPT-2 form except for learned positions.
TEST(Zoo, DecoderLMPositionsLearnedSinusoidalRotary) {
  for (tg::Positions p : {tg::Positions::kLearned, tg::Positions::kSinusoidal, tg::Positions::kRotary}) {
    tg::manual_seed(3);
    tg::DecoderLM lm({.vocab = 20, .context = 16, .layer = {.d_model = 16, .heads = 2, .d_ff = 32, .dropout = 0.0,
                                                             .activation = tg::Activation::kGelu, .norm_first = true},
                      .layers = 2, .positions = p});
    lm.eval();
    bool has_pos = false;
    for (const auto& [name, t] : lm.named_parameters()) has_pos = has_pos || name == "pos_embed.weight";
    EXPECT_EQ(has_pos, p == tg::Positions::kLearned);
    EXPECT_EQ(lm.rotary != nullptr, p == tg::Positions::kRotary);
    EXPECT_EQ((*lm.layers)[1]->self_attn->rotary, lm.rotary);
    tg::NoGradGuard ng;
    Tensor ids = tg::randint(0, 20, {2, 12});
    Tensor full = lm.forward(ids);
    Tensor ids2 = ids.clone();
    ids2.data<int64_t>()[11] = (ids2.data<int64_t>()[11] + 1) % 20;
    EXPECT_TRUE(close(lm.forward(ids2).narrow(1, 0, 11), full.narrow(1, 0, 11), 1e-5, 1e-6));
    // Order matters to every kind: swapping two early tokens changes the last logits.
    Tensor swapped = ids.clone();
    std::swap(swapped.data<int64_t>()[0], swapped.data<int64_t>()[1]);
    if (ids.data<int64_t>()[0] != ids.data<int64_t>()[1]) {
      EXPECT_FALSE(close(lm.forward(swapped).narrow(1, 11, 1), full.narrow(1, 11, 1), 1e-4, 1e-5));
    }
    tg::DecoderCache cache;
    EXPECT_TRUE(close(lm.forward(ids.narrow(1, 0, 5), &cache), full.narrow(1, 0, 5), 1e-5, 1e-5));
    for (int64_t t = 5; t < 12; ++t) EXPECT_TRUE(close(lm.forward(ids.narrow(1, t, 1), &cache), full.narrow(1, t, 1), 1e-5, 1e-5));
    const tg::Status saved = lm.save_pretrained(::testing::TempDir() + "/positions_lm", true);
    EXPECT_EQ(saved.ok(), p == tg::Positions::kLearned) << saved.message();
    if (!saved.ok()) {
      EXPECT_NE(saved.message().find("no GPT-2 form"), std::string::npos);
    }
  }
}

TEST(Zoo, DecoderLMTiedAndMaskedLM) {
  tg::manual_seed(1);
  tg::DecoderLM lm({.vocab = 20, .context = 16, .layer = {.d_model = 16, .heads = 2, .d_ff = 32, .dropout = 0.0,
                                                           .activation = tg::Activation::kGelu, .norm_first = true},
                    .layers = 2});
  EXPECT_EQ(lm.lm_head, nullptr);
  Tensor ids = tg::randint(0, 20, {2, 10});
  Tensor logits = lm.forward(ids);
  EXPECT_EQ(logits.shape(), (Shape{2, 10, 20}));
  // Causality: changing a later token does not change earlier logits.
  Tensor ids2 = ids.clone();
  ids2.data<int64_t>()[9] = (ids2.data<int64_t>()[9] + 1) % 20;
  EXPECT_TRUE(close(lm.forward(ids2).narrow(1, 0, 9), logits.narrow(1, 0, 9), 1e-5, 1e-6));
  EXPECT_TRUE(throws_with([&] { lm.forward(tg::zeros({1, 17}, tg::kInt64)); }, {"exceeds the context of 16"}));

  tg::MaskedLM mlm({.vocab = 30, .context = 16, .layer = {.d_model = 16, .heads = 2, .d_ff = 32, .dropout = 0.0,
                                                           .activation = tg::Activation::kGelu},
                    .layers = 2});
  Tensor tokens = tg::randint(5, 30, {4, 12});
  auto batch = tg::mask_tokens(tokens, /*mask_id=*/1, 30, 0.3, 0, 5);
  auto lab = batch.labels.to_vector<int64_t>();
  int chosen = 0;
  for (int64_t l : lab) chosen += l != -100;
  EXPECT_GT(chosen, 0);
  Tensor loss = tg::cross_entropy(mlm.forward(batch.inputs), batch.labels);
  loss.backward();
  EXPECT_TRUE(std::isfinite(loss.item()));
  EXPECT_TRUE(mlm.tok_embed->weight.grad().defined());
}

}  // namespace
}  // namespace tgt
