// Every op of the op table (tests/op_table.h) forward on a GPU against the CPU: fresh random
// inputs (the seed printed; TG_PARITY_SEED=N replays it), GPU outputs poisoned before the kernels
// run (a skipped element shows as NaN), the result checked to be on the GPU, the launch counter to
// have moved, and the values to match the CPU within the tolerance of the dtype (float32, float64
// and bfloat16; an op the CPU refuses in a dtype must refuse it on the GPU too). Each op runs
// after the same manual_seed on both sides, so dropout draws the same mask. An op that has no
// GPU path yet fails here, naming itself: the suite is the list of what is left to port.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../op_table.h"
#include "gpu_test_util.h"

namespace {

using tg::Tensor;

uint64_t parity_seed() {
  if (const char* e = std::getenv("TG_PARITY_SEED")) return std::strtoull(e, nullptr, 10);
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000;
}

// Tolerances per dtype, relative to 1 + |expected|: float32 elementwise 1e-5, reductions and
// products 1e-4 (the order of sums differs); float64 1e-12; bfloat16 1e-2.
double tolerance(tg::DType d, const std::string& op) {
  const bool summed = op == "matmul" || op == "linear" || op == "sum" || op == "mean" || op == "var" || op == "logsumexp" ||
                      op.find("softmax") != std::string::npos || op.find("norm") != std::string::npos ||
                      op.find("entropy") != std::string::npos || op == "nll_loss" || op == "flash_attention";
  if (d == tg::kFloat64) return 1e-12;
  if (d == tg::kBFloat16) return 1e-2;
  return summed ? 1e-4 : 1e-5;
}

std::string compare(const Tensor& cpu, const Tensor& gpu_on_cpu, double tol) {
  if (cpu.shape() != gpu_on_cpu.shape()) return fmt::format("shape {} on the GPU, {} on the CPU", gpu_on_cpu.shape(), cpu.shape());
  if (cpu.dtype() != gpu_on_cpu.dtype()) return fmt::format("dtype {} on the GPU, {} on the CPU", gpu_on_cpu.dtype(), cpu.dtype());
  const std::vector<double> want = cpu.to_vector<double>(), got = gpu_on_cpu.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) {
    const bool both_nan = std::isnan(want[i]) && std::isnan(got[i]);
    if (!both_nan && !(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) {
      return fmt::format("element {}: {} on the GPU, {} on the CPU (tolerance {})", i, got[i], want[i], tol);
    }
  }
  return "";
}

TEST(GpuParity, EveryOpForwardMatchesTheCpu) {
  TG_NEED_GPU();
  const uint64_t seed = parity_seed();
  std::printf("op parity: seed %llu (TG_PARITY_SEED=%llu replays it)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  tg::cuda::set_poison_allocations(true);
  std::vector<std::string> problems;
  int checked = 0;
  int refused_on_both = 0;
  for (tg::DType dtype : {tg::kFloat32, tg::kFloat64, tg::kBFloat16}) {
    tg::manual_seed(seed);
    uint64_t op_seed = seed;
    for (const tg::testing::OpInfo& op : tg::testing::all_ops()) {
      std::vector<Tensor> cpu_in, gpu_in;
      for (const Tensor& t : op.good) cpu_in.push_back(tg::is_floating(t.dtype()) ? t.to(dtype) : t);
      for (const Tensor& t : cpu_in) gpu_in.push_back(t.to(tg::Device::cuda()));
      const std::string what = fmt::format("{} ({})", op.name, tg::dtype_name(dtype));
      ++op_seed;  // each op's own draws (dropout's key) are the same on both sides
      Tensor want;
      std::string cpu_refusal;
      try {
        tg::manual_seed(op_seed);
        want = op.fn(cpu_in);
      } catch (const tg::Error& e) {
        cpu_refusal = e.what();
      }
      if (!cpu_refusal.empty()) {  // an op the CPU refuses in this dtype must refuse it on the GPU too
        try {
          tg::manual_seed(op_seed);
          (void)op.fn(gpu_in);
          problems.push_back(what + ": runs on the GPU but the CPU refuses it: " + cpu_refusal);
        } catch (const tg::Error&) {
          ++refused_on_both;
        }
        continue;
      }
      try {
        const uint64_t before = tg::cuda::kernel_launches();
        tg::manual_seed(op_seed);
        const Tensor got = op.fn(gpu_in);
        if (!got.is_cuda()) {
          problems.push_back(what + ": the result is on " + got.device().str());
          continue;
        }
        if (tg::cuda::kernel_launches() == before && got.numel() > 0 && !got.same(gpu_in[0]) &&
            got.impl().storage != gpu_in[0].impl().storage) {
          problems.push_back(what + ": no kernel was launched");
          continue;
        }
        if (std::string p = compare(want, got.to(tg::kCPU), tolerance(dtype, op.name)); !p.empty()) {
          problems.push_back(what + ": " + p);
        }
        ++checked;
      } catch (const tg::Error& e) {
        problems.push_back(what + ": " + e.what());
      }
    }
  }
  tg::cuda::set_poison_allocations(false);
  std::printf("op parity: %d op/dtype pairs match the CPU, %d are refused on both, %zu do not\n", checked,
              refused_on_both, problems.size());
  for (const std::string& p : problems) ADD_FAILURE() << p << " [seed " << seed << "]";
}

// Every op's backward on a GPU against the CPU's (issue 48): the gradient of sum(op(x) w), w random,
// for each floating input, in float64 (1e-10) and float32 (1e-4); cuda::synchronize() after each so
// that a kernel error names its op. Ops with integer or bool outputs have no gradient to check.
TEST(GpuParity, EveryOpBackwardMatchesTheCpu) {
  TG_NEED_GPU();
  const uint64_t seed = parity_seed();
  std::printf("backward parity: seed %llu (TG_PARITY_SEED=%llu replays it)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::vector<std::string> problems;
  int checked = 0;
  for (tg::DType dtype : {tg::kFloat64, tg::kFloat32}) {
    tg::manual_seed(seed);
    uint64_t op_seed = seed;
    for (const tg::testing::OpInfo& op : tg::testing::all_ops()) {
      ++op_seed;
      const std::string what = fmt::format("{} backward ({})", op.name, tg::dtype_name(dtype));
      auto run = [&](const tg::Device& dev) {
        std::vector<Tensor> in, wrt;
        for (const Tensor& t : op.good) {
          Tensor x = (tg::is_floating(t.dtype()) ? t.to(dtype) : t).to(dev);
          if (tg::is_floating(x.dtype())) {
            x = x.detach().requires_grad_();
            wrt.push_back(x);
          }
          in.push_back(x);
        }
        tg::manual_seed(op_seed);
        Tensor y = op.fn(in);
        std::vector<Tensor> out;
        if (!tg::is_floating(y.dtype()) || wrt.empty() || !y.requires_grad()) return out;
        tg::manual_seed(op_seed + 1000003);
        const Tensor w = tg::randn(y.shape(), dtype).to(dev);
        for (const Tensor& gr : tg::grad({tg::sum(tg::mul(y, w))}, wrt, {}, {.allow_unused = true}))
          out.push_back(gr.defined() ? gr.to(tg::kCPU) : Tensor());
        if (dev.is_cuda()) tg::cuda::synchronize();
        return out;
      };
      try {
        const std::vector<Tensor> want = run(tg::kCPU);
        if (want.empty()) continue;
        const std::vector<Tensor> got = run(tg::Device::cuda());
        if (got.size() != want.size()) {
          problems.push_back(fmt::format("{}: gradients for {} inputs on the GPU, {} on the CPU (is the GPU output recorded?)",
                                         what, got.size(), want.size()));
          continue;
        }
        for (size_t i = 0; i < want.size(); ++i) {
          if (want[i].defined() != got[i].defined()) {
            problems.push_back(fmt::format("{}: input {} has a gradient on one side only", what, i));
            continue;
          }
          if (!want[i].defined()) continue;
          const double tol = dtype == tg::kFloat64 ? 1e-10 : 1e-4;
          if (std::string p = compare(want[i], got[i], tol); !p.empty()) problems.push_back(fmt::format("{} input {}: {}", what, i, p));
        }
        ++checked;
      } catch (const tg::Error& e) {
        problems.push_back(what + ": " + e.what());
      }
    }
  }
  std::printf("backward parity: %d op/dtype pairs match the CPU, %zu do not\n", checked, problems.size());
  for (const std::string& p : problems) ADD_FAILURE() << p << " [seed " << seed << "]";
}

}  // namespace
