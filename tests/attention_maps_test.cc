// tg::attention_modules and tg::record_attention: every attention's weights from one forward.
#include <gtest/gtest.h>

#include <stdexcept>

#include "models/attention.h"
#include "models/transformer.h"
#include "ops/ops.h"
#include "test_util.h"

namespace tgt {
namespace {

tg::LayerConfig small_layer() { return {.d_model = 16, .heads = 2, .d_ff = 32, .dropout = 0.0}; }

TEST(AttentionMaps, DecoderLMGivesOneCausalMapPerLayer) {
  tg::manual_seed(3);
  tg::DecoderLM lm({.vocab = 10, .context = 8, .layer = small_layer(), .layers = 3});
  lm.eval();
  const std::vector<tg::MultiHeadAttention*> modules = tg::attention_modules(lm);
  ASSERT_EQ(modules.size(), 3u);
  // One module keeps weights already: it gets them back afterwards.
  modules[1]->record_weights = true;
  const Tensor earlier = tg::ones({1});
  modules[1]->last_weights = earlier;

  const Tensor ids = tg::from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 0}, {2, 5});
  tg::NoGradGuard ng;
  const std::vector<Tensor> maps = tg::record_attention(lm, [&] { lm.forward(ids); });
  ASSERT_EQ(maps.size(), 3u);
  for (const Tensor& w : maps) {
    ASSERT_TRUE(w.defined());
    ASSERT_EQ(w.shape(), (tg::Shape{2, 2, 5, 5}));
    const std::vector<float> v = w.to_vector<float>();
    for (int64_t row = 0; row < 2 * 2 * 5; ++row) {
      double sum = 0;
      for (int64_t j = 0; j < 5; ++j) {
        const float x = v[static_cast<size_t>(row * 5 + j)];
        if (j > row % 5) {
          EXPECT_EQ(x, 0.0f) << "a query sees a later key";
        }
        sum += x;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
  EXPECT_FALSE(modules[0]->record_weights);
  EXPECT_FALSE(modules[0]->last_weights.defined());
  EXPECT_TRUE(modules[1]->record_weights);
  EXPECT_TRUE(close(modules[1]->last_weights, earlier, 0, 0));
}

TEST(AttentionMaps, EncoderDecoderOrderCrossShapesAndModulesNotRun) {
  tg::manual_seed(4);
  tg::Transformer t({.src_vocab = 12, .tgt_vocab = 11, .layer = small_layer(), .encoder_layers = 1, .decoder_layers = 1});
  t.eval();
  const std::vector<tg::MultiHeadAttention*> modules = tg::attention_modules(t);
  ASSERT_EQ(modules.size(), 3u);  // encoder self, decoder self, decoder cross
  EXPECT_EQ(modules[0], (*t.encoder->layers)[0]->self_attn.get());
  EXPECT_EQ(modules[1], (*t.decoder->layers)[0]->self_attn.get());
  EXPECT_EQ(modules[2], (*t.decoder->layers)[0]->cross_attn.get());
  const Tensor src = tg::from_vector<int64_t>({3, 4, 5, 6, 7, 8}, {1, 6}), tgt = tg::from_vector<int64_t>({1, 2, 3}, {1, 3});
  tg::NoGradGuard ng;
  std::vector<Tensor> maps = tg::record_attention(t, [&] { t.forward(src, tgt); });
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].shape(), (tg::Shape{1, 2, 6, 6}));
  EXPECT_EQ(maps[1].shape(), (tg::Shape{1, 2, 3, 3}));
  EXPECT_EQ(maps[2].shape(), (tg::Shape{1, 2, 3, 6}));  // decoder queries over encoder keys
  // Only the encoder runs: the decoder's maps are undefined.
  maps = tg::record_attention(t, [&] { t.encode(src); });
  EXPECT_TRUE(maps[0].defined());
  EXPECT_FALSE(maps[1].defined());
  EXPECT_FALSE(maps[2].defined());
  // A bare attention module is its own only module.
  EXPECT_EQ(tg::attention_modules(*modules[2]).size(), 1u);
}

TEST(AttentionMaps, ForwardThatThrowsLeavesTheModulesAsTheyWere) {
  tg::manual_seed(5);
  tg::DecoderLM lm({.vocab = 10, .context = 8, .layer = small_layer(), .layers = 2});
  EXPECT_THROW(tg::record_attention(lm, [&] {
    lm.forward(tg::from_vector<int64_t>({1, 2}, {1, 2}));
    throw std::runtime_error("stop");
  }),
               std::runtime_error);
  for (tg::MultiHeadAttention* a : tg::attention_modules(lm)) {
    EXPECT_FALSE(a->record_weights);
    EXPECT_FALSE(a->last_weights.defined());
  }
  // An id out of range: the model's own error comes through, nothing recorded is left behind.
  EXPECT_TRUE(throws_with([&] { tg::record_attention(lm, [&] { lm.forward(tg::from_vector<int64_t>({10}, {1, 1})); }); },
                          {"10"}));
  for (tg::MultiHeadAttention* a : tg::attention_modules(lm)) EXPECT_FALSE(a->record_weights);
}

}  // namespace
}  // namespace tgt
