#pragma once
// The three training-step configurations of the benchmarks (bench_train.cc on the CPU, gpu_train.cc
// on a GPU; bench/torch_train_step.py builds the same models for PyTorch):
//   A: encoder-decoder, vocab 1000, d_model 128, 4 heads, d_ff 512, 2+2 layers, length 32, batch 32
//   B: decoder-only, vocab 96, d_model 256, 8 heads, d_ff 1024, 4 layers, sequence 128, batch 16
//   C: the paper's base (d_model 512, 8 heads, d_ff 2048, 6+6 layers), vocab 8000, length 64, batch 16
// Dropout 0.1 everywhere, attention weights included (as torch.nn.Transformer) unless fused_attn,
// which leaves the attention weights without dropout (the name is historical: attention runs in
// the fused kernel either way, with its dropout mask regenerated rather than stored).
#include <functional>
#include <memory>

#include "tapegrad.h"

namespace tg::bench {

struct TrainCase {
  std::shared_ptr<Module> model;
  std::function<Tensor()> loss;  // forward and cross-entropy of the case's fixed batch
  int64_t tokens = 0;            // per step
};

inline LayerConfig train_layer(int64_t d, int64_t h, int64_t ff, bool attn_dropout, Activation act = Activation::kRelu,
                               bool norm_first = false) {
  return {.d_model = d, .heads = h, .d_ff = ff, .dropout = 0.1, .attn_dropout = attn_dropout ? 0.1 : 0.0,
          .activation = act, .norm_first = norm_first};
}

// Config 'A', 'B' or 'C' (batch 0: its own), seeded with manual_seed(0), on `device`.
inline TrainCase train_case(char config, bool fused_attn, int64_t batch = 0, Device device = kCPU) {
  manual_seed(0);
  TrainCase c;
  auto ids = [&](int64_t vocab, int64_t B, int64_t L) { return randint(1, vocab, {B, L}).to(device); };
  if (config == 'B') {
    const int64_t V = 96, L = 128, B = batch > 0 ? batch : 16;
    auto m = std::make_shared<DecoderLM>(LMConfig{.vocab = V, .context = L,
                                                  .layer = train_layer(256, 8, 1024, !fused_attn, Activation::kGelu, true),
                                                  .layers = 4, .tie_weights = true});
    m->to(device);
    const Tensor x = ids(V, B, L), y = ids(V, B, L);
    c.loss = [m, x, y] { return cross_entropy(m->forward(x), y); };
    c.model = m;
    c.tokens = B * L;
    return c;
  }
  const bool big = config == 'C';
  const int64_t V = big ? 8000 : 1000, L = big ? 64 : 32, B = batch > 0 ? batch : (big ? 16 : 32);
  TransformerConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = V;
  cfg.layer = big ? train_layer(512, 8, 2048, !fused_attn) : train_layer(128, 4, 512, !fused_attn);
  cfg.encoder_layers = cfg.decoder_layers = big ? 6 : 2;
  cfg.max_len = 512;
  auto m = std::make_shared<Transformer>(cfg);
  m->to(device);
  const Tensor src = ids(V, B, L), tgt_in = ids(V, B, L), tgt_out = ids(V, B, L);
  c.loss = [m, src, tgt_in, tgt_out] { return cross_entropy(m->forward(src, tgt_in), tgt_out); };
  c.model = m;
  c.tokens = B * L;
  return c;
}

}  // namespace tg::bench
