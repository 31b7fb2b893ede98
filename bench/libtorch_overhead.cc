// The per-op overhead peer in C++: libtorch (Debian's libtorch-dev), so that the comparison with
// tapegrad's BM_overhead_* cases carries no Python interpreter cost. Same cases, same names.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

namespace {

void BM_overhead_add_nograd(benchmark::State& state) {
  torch::Tensor a = torch::randn({1}), b = torch::randn({1});
  for (auto _ : state) {
    torch::Tensor c = a + b;
    benchmark::DoNotOptimize(c.data_ptr());
  }
}

void BM_overhead_add_grad(benchmark::State& state) {
  torch::Tensor a = torch::randn({1}).requires_grad_(), b = torch::randn({1}).requires_grad_();
  for (auto _ : state) {
    torch::Tensor c = a + b;
    benchmark::DoNotOptimize(c.data_ptr());
  }
}

void BM_overhead_add_grad_backward(benchmark::State& state) {
  torch::Tensor a = torch::randn({1}).requires_grad_(), b = torch::randn({1}).requires_grad_();
  for (auto _ : state) {
    torch::Tensor c = a + b;
    c.backward();
    benchmark::DoNotOptimize(a.grad().data_ptr());
    a.mutable_grad().reset();
    b.mutable_grad().reset();
  }
}

}  // namespace

BENCHMARK(BM_overhead_add_nograd)->UseRealTime();
BENCHMARK(BM_overhead_add_grad)->UseRealTime();
BENCHMARK(BM_overhead_add_grad_backward)->UseRealTime();

int main(int argc, char** argv) {
  torch::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
