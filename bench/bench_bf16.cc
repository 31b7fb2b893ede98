// bfloat16 matrix products beside float32 ones, on the path in use (TG_CPU_CAPABILITY forces a
// lower one; the benchmark's label names it). Every case includes what a call pays: packing,
// rounding float32 inputs to bfloat16 (autocast) and rounding the output (bfloat16 tensors).
//   BM_f32/M/N/K/tb       tg::matmul of float32 tensors (the float32 GEMM)
//   BM_bf16/M/N/K/tb      tg::matmul of bfloat16 tensors (float32 sums, bfloat16 output), as a @ b
//   BM_autocast/M/N/K/tb  float32 tensors through the bfloat16 kernel (rounded while packed), float32 output
//   BM_*_batched/B/T/D    B products of T x T x D (attention's scores, 16 sequences x 8 heads)
// Shapes: squares, and the products of training step C (d_model 512, FFN 2048, 1024 tokens):
// x Wᵀ forward (tb = 1), dX = G W (tb = 0), and dW = Gᵀ X (ta: BM_*_ta).
//   build/bench_bf16 [--benchmark_filter=...]   (TG_NUM_THREADS=1 for one core)
#include <benchmark/benchmark.h>

#include "ops/kernels/bf16.h"
#include "tapegrad.h"

namespace {
using tg::Tensor;

void finish(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(tg::cpu_capability_name(tg::cpu_capability()));
}

void BM_f32(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool tb = state.range(3);
  tg::manual_seed(0);
  Tensor a = tg::randn({M, K}), b = tb ? tg::randn({N, K}) : tg::randn({K, N});
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(a, b, false, tb).raw_data());
  finish(state, 2.0 * M * N * K);
}

void BM_bf16(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool tb = state.range(3);
  tg::manual_seed(0);
  Tensor a = tg::randn({M, K}).to(tg::kBFloat16), b = (tb ? tg::randn({N, K}) : tg::randn({K, N})).to(tg::kBFloat16);
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(a, b, false, tb).raw_data());
  finish(state, 2.0 * M * N * K);
}

void BM_autocast(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool tb = state.range(3);
  tg::manual_seed(0);
  Tensor a = tg::randn({M, K}), b = tb ? tg::randn({N, K}) : tg::randn({K, N});
  Tensor c = Tensor::empty({M, N});
  for (auto _ : state) {
    tg::kernels::gemm_bf16(M, N, K, {a.data<float>(), false, K, false}, {b.data<float>(), false, tb ? K : N, tb}, c.data<float>(), N);
    benchmark::DoNotOptimize(c.raw_data());
  }
  finish(state, 2.0 * M * N * K);
}

// dW = Gᵀ X: op(A) transposed ([K, M] stored), as a Linear layer's weight gradient.
void BM_f32_ta(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  tg::manual_seed(0);
  Tensor g = tg::randn({K, M}), x = tg::randn({K, N});
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(g, x, true, false).raw_data());
  finish(state, 2.0 * M * N * K);
}

void BM_autocast_ta(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  tg::manual_seed(0);
  Tensor g = tg::randn({K, M}), x = tg::randn({K, N}), c = Tensor::empty({M, N});
  for (auto _ : state) {
    tg::kernels::gemm_bf16(M, N, K, {g.data<float>(), false, M, true}, {x.data<float>(), false, N, false}, c.data<float>(), N);
    benchmark::DoNotOptimize(c.raw_data());
  }
  finish(state, 2.0 * M * N * K);
}

// Attention's products as the unfused form computes them (attention_unfused, or weights asked
// for): batch x heads products of T x T x d (scores Q Kᵀ) through tg::matmul, float32 and under autocast.
void BM_f32_batched(benchmark::State& state) {
  const int64_t B = state.range(0), T = state.range(1), D = state.range(2);
  tg::manual_seed(0);
  Tensor q = tg::randn({B, T, D}), k = tg::randn({B, T, D});
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(q, k, false, true).raw_data());
  finish(state, 2.0 * B * T * T * D);
}
void BM_autocast_batched(benchmark::State& state) {
  const int64_t B = state.range(0), T = state.range(1), D = state.range(2);
  tg::manual_seed(0);
  Tensor q = tg::randn({B, T, D}), k = tg::randn({B, T, D});
  tg::AutocastGuard guard(tg::kBFloat16);
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(q, k, false, true).raw_data());
  finish(state, 2.0 * B * T * T * D);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {512, 1024, 2048}) b->Args({n, n, n, 0});
  b->Args({1024, 512, 512, 1});    // step C: Q, K, V, O projections, x Wᵀ
  b->Args({1024, 2048, 512, 1});   // FFN up
  b->Args({1024, 512, 2048, 1});   // FFN down
  b->Args({1024, 512, 2048, 0});   // dX of FFN up: G W
  b->Args({1024, 2048, 512, 0});   // dX of FFN down
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
void shapes_ta(benchmark::internal::Benchmark* b) {
  b->Args({512, 512, 1024});   // dW of a projection: [512, 1024] x [1024, 512]
  b->Args({2048, 512, 1024});  // dW of FFN up
  b->Args({512, 2048, 1024});  // dW of FFN down
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_f32)->Apply(shapes);
BENCHMARK(BM_bf16)->Apply(shapes);
BENCHMARK(BM_autocast)->Apply(shapes);
BENCHMARK(BM_f32_ta)->Apply(shapes_ta);
BENCHMARK(BM_f32_batched)->Args({128, 64, 64})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_autocast_batched)->Args({128, 64, 64})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_autocast_ta)->Apply(shapes_ta);

}  // namespace

BENCHMARK_MAIN();
