// Op-level speed on a GPU, beside bench/torch_gpu_ops.py (PyTorch on the same card), for issue 47's
// goals: square products (n = 4096 and 8192, float32 and bfloat16) and attention forward (batch x T
// = 16,384 tokens, 2,048 / d heads, causal and not; bfloat16 on the tensor-core kernel, float32 on
// the plain one at T <= 1024 for reference). Each case: 3 warm-up calls, then 20 calls each
// timed between two synchronizations (the op's whole device time plus one launch); the median is
// reported. And the host cost of one-element ops on the GPU (the engineering bar: well under a
// microsecond of host time, launch cost aside), as bench/bench_ops.cc's BM_overhead_* on the CPU:
// an add without and with recorded gradients, and an add with its backward; 20,000 back to back,
// "host_ns" an op until the loop returns, "ns" until the device has finished too. (On a real card
// host_ns includes the driver's launch; in the dry run, ./tg.sh dry, it is tapegrad's own cost.)
// One JSON line a case. Needs a GPU (refuses with one line without one).
//
//   build/gpu_ops [--cases matmul,attention,overhead] [--repeats 20]
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "tapegrad.h"

namespace {

template <class F>
double median_ms(int64_t repeats, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  tg::cuda::synchronize();
  std::vector<double> ms;
  for (int64_t i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    tg::cuda::synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string cases = "matmul,attention,overhead";
    int64_t repeats = 20;
    tg::cli::Flags flags("gpu_ops", "products and attention on a GPU: milliseconds and TFLOP/s");
    flags.add("cases", &cases, "comma-separated: matmul, attention, overhead");
    flags.add("repeats", &repeats, "timed calls per case (the median is reported)").range(1, 1000);
    flags.parse(argc, argv).or_throw();
    const tg::Device gpu = tg::cli::device("cuda");
    fmt::print(stderr, "gpu_ops: on {}\n", tg::cli::describe_device(gpu));
    tg::manual_seed(0);
    if (cases.find("overhead") != std::string::npos) {
      constexpr int kOps = 20000;
      // kind: 0 no gradients, 1 gradients recorded, 2 with backward (gradients dropped each time)
      for (int kind = 0; kind < 3; ++kind) {
        tg::Tensor a = tg::randn({1}).to(gpu), b = tg::randn({1}).to(gpu);
        if (kind > 0) {
          a.requires_grad_();
          b.requires_grad_();
        }
        auto one = [&] {
          if (kind < 2) {
            const tg::Tensor c = a + b;
            return;
          }
          (a + b).backward();
          a.zero_grad();
          b.zero_grad();
        };
        for (int i = 0; i < 100; ++i) one();  // warm: the allocator's cache, cuBLASLt and the stream made
        tg::cuda::synchronize();
        std::vector<double> host, all;
        for (int r = 0; r < 5; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < kOps; ++i) one();
          const auto t1 = std::chrono::steady_clock::now();
          tg::cuda::synchronize();
          const auto t2 = std::chrono::steady_clock::now();
          host.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kOps);
          all.push_back(std::chrono::duration<double, std::nano>(t2 - t0).count() / kOps);
        }
        std::sort(host.begin(), host.end());
        std::sort(all.begin(), all.end());
        fmt::print("{{\"case\": \"overhead\", \"op\": \"{}\", \"host_ns\": {:.0f}, \"ns\": {:.0f}}}\n",
                   kind == 0 ? "add_nograd" : kind == 1 ? "add_grad" : "add_grad_backward", host[2], all[2]);
      }
    }
    if (cases.find("matmul") != std::string::npos) {
      for (int64_t n : {4096, 8192}) {
        for (tg::DType d : {tg::kFloat32, tg::kBFloat16}) {
          const tg::Tensor a = tg::randn({n, n}).to(d).to(gpu), b = tg::randn({n, n}).to(d).to(gpu);
          const double ms = median_ms(repeats, [&] { (void)tg::matmul(a, b); });
          fmt::print("{{\"case\": \"matmul\", \"dtype\": \"{}\", \"n\": {}, \"ms\": {:.4f}, \"tflops\": {:.1f}}}\n",
                     tg::dtype_name(d), n, ms, 2.0 * n * n * n / (ms * 1e-3) / 1e12);
        }
      }
    }
    if (cases.find("attention") != std::string::npos) {
      for (tg::DType dt : {tg::kBFloat16, tg::kFloat32}) {
        // Every case holds 16,384 tokens x 2,048 features a tensor: drawn once, reshaped per case.
        const tg::Tensor q0 = tg::randn({16384 * 2048}).to(dt).to(gpu), k0 = tg::randn({16384 * 2048}).to(dt).to(gpu),
                         v0 = tg::randn({16384 * 2048}).to(dt).to(gpu);
        for (int64_t d : {64, 128}) {
          for (int64_t T : {512, 1024, 2048, 4096}) {
            if (dt == tg::kFloat32 && T > 1024) continue;  // (the plain float32 kernel, for reference: the short ones)
            for (bool causal : {true, false}) {
              const int64_t B = 16384 / T, H = 2048 / d;
              const tg::Tensor q = q0.reshape({B, H, T, d}), k = k0.reshape({B, H, T, d}), v = v0.reshape({B, H, T, d});
              tg::AttentionOptions o;
              o.causal = causal;
              const double ms = median_ms(repeats, [&] { (void)tg::flash_attention(q, k, v, o); });
              const double flops = 4.0 * B * H * T * T * d / (causal ? 2.0 : 1.0);
              fmt::print("{{\"case\": \"attention\", \"dtype\": \"{}\", \"d\": {}, \"T\": {}, \"causal\": {}, "
                         "\"ms\": {:.4f}, \"tflops\": {:.1f}}}\n", tg::dtype_name(dt), d, T, causal ? "true" : "false", ms,
                         flops / (ms * 1e-3) / 1e12);
            }
          }
        }
      }
    }
    return 0;
  });
}
