// Causal attention, forward + backward, B 16, 8 heads, head size 64: the fused flash-attention
// op beside the unfused path built from generic ops. Reports the peak of extra tensor memory
// (bytes held by tensors beyond q, k, v) during one forward + backward.
#include <benchmark/benchmark.h>
#include <algorithm>

#include "tapegrad.h"

namespace {
using tg::Tensor;

template <bool kFused>
void BM_attention(benchmark::State& state) {
  const int64_t T = state.range(0), B = 16, H = 8, d = 64;
  tg::manual_seed(0);
  Tensor q = tg::randn({B, H, T, d}).requires_grad_(), k = tg::randn({B, H, T, d}).requires_grad_();
  Tensor v = tg::randn({B, H, T, d}).requires_grad_();
  Tensor g = tg::randn({B, H, T, d});
  size_t peak = 0;
  for (auto _ : state) {
    const size_t base = tg::storage_live_bytes();
    tg::reset_storage_peak();
    Tensor o = kFused ? tg::flash_attention(q, k, v, {.causal = true}) : tg::attention_unfused(q, k, v, {.causal = true}).output;
    o.backward(g);
    benchmark::DoNotOptimize(q.grad().raw_data());
    o = Tensor();
    q.zero_grad();
    k.zero_grad();
    v.zero_grad();
    peak = std::max(peak, tg::storage_peak_bytes() - base);
  }
  state.counters["peak_MB"] = static_cast<double>(peak) / 1e6;
  // Causal: about half of the 4 T^2 d multiply-adds of the forward and 8 T^2 d of the backward.
  state.counters["GFLOP/s"] = benchmark::Counter(0.5 * 2.0 * 12.0 * B * H * T * T * d * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// Training's attention: dropout 0.1 on the weights (and 0, for reference), at the shapes of steps A
// (B 32, 4 heads, T 32, d 32, not causal), B (16, 8, 128, 32, causal) and C (16, 8, 64, 64, causal):
// fused (the mask regenerated, never stored) beside the unfused form (matmul, softmax, dropout, matmul).
template <bool kFused>
void BM_attention_dropout(benchmark::State& state) {
  const int64_t B = state.range(0), H = state.range(1), T = state.range(2), d = state.range(3);
  const bool causal = state.range(4) != 0;
  const double p = static_cast<double>(state.range(5)) / 100.0;  // dropout, in percent
  tg::manual_seed(0);
  Tensor q = tg::randn({B, H, T, d}).requires_grad_(), k = tg::randn({B, H, T, d}).requires_grad_();
  Tensor v = tg::randn({B, H, T, d}).requires_grad_();
  Tensor g = tg::randn({B, H, T, d});
  const tg::AttentionOptions o{.causal = causal, .dropout = p};
  for (auto _ : state) {
    Tensor out = kFused ? tg::flash_attention(q, k, v, o) : tg::attention_unfused(q, k, v, o).output;
    out.backward(g);
    benchmark::DoNotOptimize(q.grad().raw_data());
    q.zero_grad();
    k.zero_grad();
    v.zero_grad();
  }
}

}  // namespace

BENCHMARK_TEMPLATE(BM_attention_dropout, true)->Name("BM_attention_dropout_fused")
    ->ArgsProduct({{32}, {4}, {32}, {32}, {0}, {0, 10}})->ArgsProduct({{16}, {8}, {128}, {32}, {1}, {0, 10}})->ArgsProduct({{16}, {8}, {64}, {64}, {1}, {0, 10}})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_attention_dropout, false)->Name("BM_attention_dropout_unfused")
    ->ArgsProduct({{32}, {4}, {32}, {32}, {0}, {0, 10}})->ArgsProduct({{16}, {8}, {128}, {32}, {1}, {0, 10}})->ArgsProduct({{16}, {8}, {64}, {64}, {1}, {0, 10}})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_attention, true)->Name("BM_attention_fused")->Arg(128)->Arg(512)->Arg(1024)
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_attention, false)->Name("BM_attention_unfused")->Arg(128)->Arg(512)->Arg(1024)
    ->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
