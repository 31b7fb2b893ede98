// Google Benchmark cases for tapegrad's float32 ops. bench/torch_ops.py times the same cases
// (same names, same shapes) in PyTorch; bench/compare_ops.sh runs both and prints a table.
//
// Threads: set TG_NUM_THREADS (read by the library itself); the value in use is printed in the
// benchmark context as tg_num_threads. Every case uses real (wall-clock) time, since the
// library's pool runs work on other threads than the one Google Benchmark measures CPU time on.
//
// Names: BM_<op>/<total elements> for elementwise ops and sum over all, BM_<op>/<rows>/<cols>
// for row-wise ops. Forward-only cases use inputs that do not require grad (nothing recorded);
// *_fwd_bwd cases record the graph, call backward with a fixed upstream gradient, and drop the
// leaves' .grad() every iteration (as `x.grad = None` in PyTorch).
#include <benchmark/benchmark.h>

#include <string>

#include "tapegrad.h"

namespace {

using tg::Tensor;

constexpr int64_t kF32 = sizeof(float);

Tensor rnd(const tg::Shape& s) { return tg::randn(s, tg::kFloat32); }

void set_counters(benchmark::State& state, int64_t items, int64_t bytes) {
  state.SetItemsProcessed(state.iterations() * items);
  if (bytes > 0) state.SetBytesProcessed(state.iterations() * bytes);
}

// ---------------------------------------------------------------- elementwise

void BM_add(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rnd({n}), b = rnd({n});
  for (auto _ : state) {
    Tensor c = tg::add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, n, 3 * n * kF32);
}

// [n/1024, 1024] + [1024]
void BM_add_bcast(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rnd({n / 1024, 1024}), b = rnd({1024});
  for (auto _ : state) {
    Tensor c = tg::add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, n, (2 * n + 1024) * kF32);
}

void BM_mul(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rnd({n}), b = rnd({n});
  for (auto _ : state) {
    Tensor c = tg::mul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, n, 3 * n * kF32);
}

void BM_exp(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rnd({n});
  for (auto _ : state) {
    Tensor c = tg::exp(a);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, n, 2 * n * kF32);
}

void BM_gelu_tanh(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rnd({n});
  for (auto _ : state) {
    Tensor c = tg::gelu(a, tg::GeluApprox::kTanh);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, n, 2 * n * kF32);
}

void BM_gelu_erf(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rnd({n});
  for (auto _ : state) {
    Tensor c = tg::gelu(a, tg::GeluApprox::kNone);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, n, 2 * n * kF32);
}

#define TG_ELEMENTWISE_SIZES ->Arg(4096)->Arg(262144)->Arg(4194304)->UseRealTime()
BENCHMARK(BM_add) TG_ELEMENTWISE_SIZES;
BENCHMARK(BM_add_bcast) TG_ELEMENTWISE_SIZES;
BENCHMARK(BM_mul) TG_ELEMENTWISE_SIZES;
BENCHMARK(BM_exp) TG_ELEMENTWISE_SIZES;
BENCHMARK(BM_gelu_tanh) TG_ELEMENTWISE_SIZES;
BENCHMARK(BM_gelu_erf) TG_ELEMENTWISE_SIZES;

// ---------------------------------------------------------------- reductions

void BM_sum_all(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rnd({n});
  for (auto _ : state) {
    Tensor s = tg::sum(a);
    benchmark::DoNotOptimize(s.raw_data());
  }
  set_counters(state, n, n * kF32);
}
BENCHMARK(BM_sum_all) TG_ELEMENTWISE_SIZES;

// sum over the last axis of [rows, cols]
void BM_sum_lastdim(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor a = rnd({r, c});
  for (auto _ : state) {
    Tensor s = tg::sum(a, {-1});
    benchmark::DoNotOptimize(s.raw_data());
  }
  set_counters(state, r * c, (r * c + r) * kF32);
}
BENCHMARK(BM_sum_lastdim)->Args({4096, 1024})->UseRealTime();

// mean over axis 0 of [rows, cols]
void BM_mean_dim0(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor a = rnd({r, c});
  for (auto _ : state) {
    Tensor s = tg::mean(a, {0});
    benchmark::DoNotOptimize(s.raw_data());
  }
  set_counters(state, r * c, (r * c + c) * kF32);
}
BENCHMARK(BM_mean_dim0)->Args({1024, 1024})->UseRealTime();

// ---------------------------------------------------------------- softmax

void BM_softmax(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor x = rnd({r, c});
  for (auto _ : state) {
    Tensor y = tg::softmax(x, -1);
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counters(state, r * c, 2 * r * c * kF32);
}

void BM_softmax_fwd_bwd(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor x = rnd({r, c}).requires_grad_();
  Tensor g = rnd({r, c});
  for (auto _ : state) {
    Tensor y = tg::softmax(x, -1);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data());
    x.zero_grad();
  }
  set_counters(state, r * c, 0);
}

// [4096, 1024], and attention-like [batch 64 * heads 8 * queries 128, keys 128].
BENCHMARK(BM_softmax)->Args({4096, 1024})->Args({64 * 8 * 128, 128})->UseRealTime();
BENCHMARK(BM_softmax_fwd_bwd)->Args({4096, 1024})->Args({64 * 8 * 128, 128})->UseRealTime();

// ---------------------------------------------------------------- layer_norm

void BM_layer_norm(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor x = rnd({r, c}), w = rnd({c}), b = rnd({c});
  for (auto _ : state) {
    Tensor y = tg::layer_norm(x, 1, w, b, 1e-5);
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counters(state, r * c, (2 * r * c + 2 * c) * kF32);
}

void BM_layer_norm_fwd_bwd(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor x = rnd({r, c}).requires_grad_();
  Tensor w = rnd({c}).requires_grad_();
  Tensor b = rnd({c}).requires_grad_();
  Tensor g = rnd({r, c});
  for (auto _ : state) {
    Tensor y = tg::layer_norm(x, 1, w, b, 1e-5);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data());
    benchmark::DoNotOptimize(w.grad().raw_data());
    benchmark::DoNotOptimize(b.grad().raw_data());
    x.zero_grad();
    w.zero_grad();
    b.zero_grad();
  }
  set_counters(state, r * c, 0);
}

BENCHMARK(BM_layer_norm)->Args({8192, 512})->UseRealTime();
BENCHMARK(BM_layer_norm_fwd_bwd)->Args({8192, 512})->UseRealTime();

// GELU (erf form) forward and backward.
void BM_gelu_fwd_bwd(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = rnd({n}).requires_grad_();
  Tensor g = rnd({n});
  for (auto _ : state) {
    Tensor y = tg::gelu(x);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data());
    x.zero_grad();
  }
  set_counters(state, n, 0);
}
BENCHMARK(BM_gelu_fwd_bwd)->Arg(1 << 20)->UseRealTime();

// The first half of a feed-forward block after its matmul: gelu(x + b), forward and backward.
void BM_bias_gelu_fwd_bwd(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor x = rnd({r, c}).requires_grad_(), b = rnd({c}).requires_grad_();
  Tensor g = rnd({r, c});
  for (auto _ : state) {
    Tensor y = tg::bias_act(x, b, tg::Activation::kGelu);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data());
    x.zero_grad();
    b.zero_grad();
  }
  set_counters(state, r * c, 0);
}
BENCHMARK(BM_bias_gelu_fwd_bwd)->Args({2048, 2048})->UseRealTime();

// Cross-entropy over a vocabulary of 8000 for 4096 tokens, label smoothing 0.1, mean.
void BM_cross_entropy_fwd_bwd(benchmark::State& state) {
  const int64_t r = state.range(0), c = state.range(1);
  Tensor x = rnd({r, c}).requires_grad_();
  Tensor t = tg::randint(0, c, {r});
  for (auto _ : state) {
    Tensor l = tg::cross_entropy(x, t, {.label_smoothing = 0.1});
    l.backward();
    benchmark::DoNotOptimize(x.grad().raw_data());
    x.zero_grad();
  }
  set_counters(state, r * c, 0);
}
BENCHMARK(BM_cross_entropy_fwd_bwd)->Args({4096, 8000})->UseRealTime();

// ---------------------------------------------------------------- per-op overhead

// One-element add, inputs not requiring grad: nothing recorded.
void BM_overhead_add_nograd(benchmark::State& state) {
  Tensor a = rnd({1}), b = rnd({1});
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, 1, 0);
}

// One-element add of leaves requiring grad: the node is recorded (and freed with c), no backward.
void BM_overhead_add_grad(benchmark::State& state) {
  Tensor a = rnd({1}).requires_grad_(), b = rnd({1}).requires_grad_();
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_counters(state, 1, 0);
}

// (a + b).backward() on one-element leaves, gradients dropped every iteration.
void BM_overhead_add_grad_backward(benchmark::State& state) {
  Tensor a = rnd({1}).requires_grad_(), b = rnd({1}).requires_grad_();
  for (auto _ : state) {
    (a + b).backward();
    benchmark::DoNotOptimize(a.grad().raw_data());
    benchmark::DoNotOptimize(b.grad().raw_data());
    a.zero_grad();
    b.zero_grad();
  }
  set_counters(state, 1, 0);
}

BENCHMARK(BM_overhead_add_nograd)->UseRealTime();
BENCHMARK(BM_overhead_add_grad)->UseRealTime();
BENCHMARK(BM_overhead_add_grad_backward)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  tg::manual_seed(0);
  benchmark::AddCustomContext("tg_num_threads", std::to_string(tg::num_threads()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
