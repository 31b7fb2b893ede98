// tapegrad's GEMM (through tg::matmul, as users call it) beside OpenBLAS's cblas_sgemm on the
// same shapes, in the same process. OpenBLAS is linked by this benchmark only; the library has
// no BLAS dependency. Threads: TG_NUM_THREADS for tapegrad, OPENBLAS_NUM_THREADS for OpenBLAS
// (bench/compare_gemm.sh sets both).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include "tapegrad.h"

namespace {
using tg::Tensor;

void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// Square and rectangular: args M, N, K, transpose_b.
void BM_tg_sgemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool tb = state.range(3);
  tg::manual_seed(0);
  Tensor a = tg::randn({M, K}), b = tb ? tg::randn({N, K}) : tg::randn({K, N});
  for (auto _ : state) {
    Tensor c = tg::matmul(a, b, false, tb);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(state, 2.0 * M * N * K);
}

void BM_openblas_sgemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool tb = state.range(3);
  tg::manual_seed(0);
  Tensor a = tg::randn({M, K}), b = tb ? tg::randn({N, K}) : tg::randn({K, N});
  for (auto _ : state) {
    Tensor c = Tensor::empty({M, N});
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.0f, a.data<float>(), static_cast<int>(K), b.data<float>(),
                static_cast<int>(tb ? K : N), 0.0f, c.data<float>(), static_cast<int>(N));
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(state, 2.0 * M * N * K);
}

// Batched attention-like products: [batch, M, K] x [batch, K, N] (OpenBLAS: a loop of sgemm).
void BM_tg_sgemm_batched(benchmark::State& state) {
  const int64_t B = state.range(0), M = state.range(1), N = state.range(2), K = state.range(3);
  tg::manual_seed(0);
  Tensor a = tg::randn({B, M, K}), b = tg::randn({B, K, N});
  for (auto _ : state) {
    Tensor c = tg::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(state, 2.0 * B * M * N * K);
}

void BM_openblas_sgemm_batched(benchmark::State& state) {
  const int64_t B = state.range(0), M = state.range(1), N = state.range(2), K = state.range(3);
  tg::manual_seed(0);
  Tensor a = tg::randn({B, M, K}), b = tg::randn({B, K, N});
  for (auto _ : state) {
    Tensor c = Tensor::empty({B, M, N});
    for (int64_t i = 0; i < B; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                  static_cast<int>(K), 1.0f, a.data<float>() + i * M * K, static_cast<int>(K),
                  b.data<float>() + i * K * N, static_cast<int>(N), 0.0f, c.data<float>() + i * M * N,
                  static_cast<int>(N));
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(state, 2.0 * B * M * N * K);
}

void square_and_zoo_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {256, 512, 1024, 2048}) b->Args({n, n, n, 0});
  b->Args({2048, 512, 128, 0});    // FFN up-projection of d_model 128 tokens (2048 x 128 x 512)
  b->Args({2048, 2048, 512, 0});   // FFN of the base model (2048 x 512 x 2048)
  b->Args({2048, 512, 2048, 0});   // and its down-projection
  b->Args({2048, 512, 512, 1});    // a Linear layer: x W^T
}

}  // namespace

BENCHMARK(BM_tg_sgemm)->Apply(square_and_zoo_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_openblas_sgemm)->Apply(square_and_zoo_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_tg_sgemm_batched)->Args({128, 64, 64, 64})->Args({128, 128, 128, 64})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_openblas_sgemm_batched)->Args({128, 64, 64, 64})->Args({128, 128, 128, 64})->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
