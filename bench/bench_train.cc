// One full training step — forward, cross-entropy, backward, gradient clipping, AdamW — of three
// transformer configurations, reported as milliseconds per step and tokens per second, with the
// peak bytes held by tensors during a step (peak_MB) and the process's peak RSS (rss_MB). The
// PyTorch peer is bench/torch_train_step.py (the same models); bench/compare_train.sh runs both.
//
//   A: encoder-decoder, vocab 1000, d_model 128, 4 heads, d_ff 512, 2+2 layers, length 32, batch 32
//   B: decoder-only, vocab 96, d_model 256, 8 heads, d_ff 1024, 4 layers, sequence 128, batch 16
//   C: the paper's base (d_model 512, 8 heads, d_ff 2048, 6+6 layers), vocab 8000, length 64, batch 16
//
// Dropout 0.1 everywhere, attention weights included (as torch.nn.Transformer); the _fusedattn
// variants leave the attention weights without dropout so attention runs in the fused kernel. The
// _bf16 variants run forward and backward under tg::AutocastGuard (bfloat16 products with float32
// sums, on the path TG_CPU_CAPABILITY allows; its name is the label); clipping and AdamW in float32.
#include <sys/resource.h>
#include <algorithm>

#include <benchmark/benchmark.h>

#include "tapegrad.h"

namespace {
using tg::Tensor;

double rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

Tensor random_ids(int64_t vocab, int64_t B, int64_t L) { return tg::randint(1, vocab, {B, L}); }

bool g_bf16 = false;  // set by the _bf16 cases

template <class Model, class Forward>
void run_steps(benchmark::State& state, Model& model, int64_t tokens, Forward forward) {
  model.train();
  tg::AdamW opt(model.named_parameters(), {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01});
  auto params = model.parameters();
  size_t peak = 0;
  double loss_value = 0;
  for (auto _ : state) {
    const size_t base = tg::storage_live_bytes();
    tg::reset_storage_peak();
    Tensor loss;
    {
      tg::AutocastGuard autocast(g_bf16 ? tg::kBFloat16 : tg::kFloat32);
      loss = forward();
      loss.backward();
    }
    tg::clip_grad_norm(params, 1.0);
    opt.step();
    opt.zero_grad();
    loss_value = loss.item();
    peak = std::max(peak, tg::storage_peak_bytes() - base);
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["peak_MB"] = static_cast<double>(peak + tg::storage_live_bytes()) / 1e6;
  state.counters["rss_MB"] = rss_mb();
  state.counters["params"] = static_cast<double>(model.num_parameters());
  state.counters["loss"] = loss_value;
  if (g_bf16) state.SetLabel(std::string("bf16 ") + tg::cpu_capability_name(tg::cpu_capability()));
}

void encoder_decoder(benchmark::State& state, int64_t vocab, tg::LayerConfig layer, int64_t layers, int64_t L, int64_t B) {
  tg::manual_seed(0);
  tg::TransformerConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = vocab;
  cfg.layer = layer;
  cfg.encoder_layers = cfg.decoder_layers = layers;
  cfg.max_len = 512;
  tg::Transformer model(cfg);
  Tensor src = random_ids(vocab, B, L), tgt_in = random_ids(vocab, B, L), tgt_out = random_ids(vocab, B, L);
  run_steps(state, model, B * L, [&] { return tg::cross_entropy(model.forward(src, tgt_in), tgt_out); });
}

void decoder_only(benchmark::State& state, int64_t vocab, tg::LayerConfig layer, int64_t layers, int64_t L, int64_t B) {
  tg::manual_seed(0);
  tg::DecoderLM model({.vocab = vocab, .context = L, .layer = layer, .layers = layers, .tie_weights = true});
  Tensor x = random_ids(vocab, B, L), y = random_ids(vocab, B, L);
  run_steps(state, model, B * L, [&] { return tg::cross_entropy(model.forward(x), y); });
}

tg::LayerConfig layer(int64_t d, int64_t h, int64_t ff, bool attn_dropout, tg::Activation act = tg::Activation::kRelu,
                      bool norm_first = false) {
  return {.d_model = d, .heads = h, .d_ff = ff, .dropout = 0.1, .attn_dropout = attn_dropout ? 0.1 : 0.0,
          .activation = act, .norm_first = norm_first};
}

void BM_train_A(benchmark::State& s) { encoder_decoder(s, 1000, layer(128, 4, 512, true), 2, 32, 32); }
void BM_train_A_fusedattn(benchmark::State& s) { encoder_decoder(s, 1000, layer(128, 4, 512, false), 2, 32, 32); }
void BM_train_B(benchmark::State& s) { decoder_only(s, 96, layer(256, 8, 1024, true, tg::Activation::kGelu, true), 4, 128, 16); }
void BM_train_B_fusedattn(benchmark::State& s) {
  decoder_only(s, 96, layer(256, 8, 1024, false, tg::Activation::kGelu, true), 4, 128, 16);
}
void BM_train_C(benchmark::State& s) { encoder_decoder(s, 8000, layer(512, 8, 2048, true), 6, 64, 16); }
void BM_train_C_fusedattn(benchmark::State& s) { encoder_decoder(s, 8000, layer(512, 8, 2048, false), 6, 64, 16); }

template <void (*F)(benchmark::State&)>
void bf16(benchmark::State& s) {
  g_bf16 = true;
  F(s);
  g_bf16 = false;
}
void BM_train_A_bf16(benchmark::State& s) { bf16<BM_train_A>(s); }
void BM_train_A_bf16_fusedattn(benchmark::State& s) { bf16<BM_train_A_fusedattn>(s); }
void BM_train_B_bf16(benchmark::State& s) { bf16<BM_train_B>(s); }
void BM_train_B_bf16_fusedattn(benchmark::State& s) { bf16<BM_train_B_fusedattn>(s); }
void BM_train_C_bf16(benchmark::State& s) { bf16<BM_train_C>(s); }
void BM_train_C_bf16_fusedattn(benchmark::State& s) { bf16<BM_train_C_fusedattn>(s); }

}  // namespace

BENCHMARK(BM_train_A_bf16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_train_A_bf16_fusedattn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_train_B_bf16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK(BM_train_B_bf16_fusedattn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK(BM_train_C_bf16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(10.0);
BENCHMARK(BM_train_C_bf16_fusedattn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(10.0);
BENCHMARK(BM_train_A)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_train_A_fusedattn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_train_B)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK(BM_train_B_fusedattn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK(BM_train_C)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(10.0);
BENCHMARK(BM_train_C_fusedattn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(10.0);
BENCHMARK_MAIN();
