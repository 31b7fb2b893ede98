// One full training step — forward, cross-entropy, backward, gradient clipping, AdamW — of three
// transformer configurations (bench/train_configs.h: A, B, C), reported as milliseconds per step
// and tokens per second, with the peak bytes held by tensors during a step (peak_MB) and the
// process's peak RSS (rss_MB). The PyTorch peer is bench/torch_train_step.py (the same models);
// bench/compare_train.sh runs both.
//
// The _fusedattn variants leave the attention weights without dropout (attention runs in the fused
// kernel in both; the name is from when dropout on the weights needed the unfused form). The _bf16 variants run forward and backward under tg::AutocastGuard (bfloat16
// products with float32 sums, on the path TG_CPU_CAPABILITY allows; its name is the label);
// clipping and AdamW in float32.
#include <sys/resource.h>
#include <algorithm>

#include <benchmark/benchmark.h>

#include "tapegrad.h"
#include "train_configs.h"

namespace {
using tg::Tensor;

double rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

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

void run_case(benchmark::State& state, char config, bool fused_attn) {
  tg::bench::TrainCase c = tg::bench::train_case(config, fused_attn);
  run_steps(state, *c.model, c.tokens, c.loss);
}

void BM_train_A(benchmark::State& s) { run_case(s, 'A', false); }
void BM_train_A_fusedattn(benchmark::State& s) { run_case(s, 'A', true); }
void BM_train_B(benchmark::State& s) { run_case(s, 'B', false); }
void BM_train_B_fusedattn(benchmark::State& s) { run_case(s, 'B', true); }
void BM_train_C(benchmark::State& s) { run_case(s, 'C', false); }
void BM_train_C_fusedattn(benchmark::State& s) { run_case(s, 'C', true); }

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
