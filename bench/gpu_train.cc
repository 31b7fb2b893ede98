// Training steps on a GPU, beside bench/torch_gpu_train.py (PyTorch on the same card), for issue
// 48's goals: steps A, B and C (bench/train_configs.h; C also at batch 256) in float32, TF32 and
// bfloat16 autocast. A step is forward, cross-entropy, backward, clip_grad_norm_ (on the device),
// AdamW, zero_grad, then a device synchronization; after --warmup steps, --steps steps are timed
// and the median reported, with the host's time to queue a step (host_us), the kernels a step
// launches, the peak GPU memory and the share of the card's bf16 product rate the step's products
// reach (--bf16_tflops, measured by gpu_ops). One JSON line a case. --graph: the step captured as a
// CUDA graph after the warm-up (tg::cuda::Graph) and the timed steps its replays ("graph": true;
// kernels: the graph's nodes, host_us: a replay's host time).
// --compare_cpu: 20 steps of config A in float32 on the CPU and the GPU from the same seed, each
// pair of losses printed (issue 48: 1e-5 relative at step 1, 1e-4 at step 20).
//
//   build/gpu_train [--configs A,B,C] [--precisions fp32,tf32,bf16] [--c_batches 16,256] [--steps 20]
//   build/gpu_train --configs C --c_batches 256 --precisions bf16 --steps 5 --profile   (where the time goes)
//   build/gpu_train --configs A,B,C --c_batches 16 --graph           (the small steps as CUDA graphs)
//   build/gpu_train --compare_cpu
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "tapegrad.h"
#include "train_configs.h"

namespace {

using tg::Tensor;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      if (i > start) out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// The products' FLOPs of one step (forward 2mnk, backward twice that): 6 x parameters in matrices x
// tokens, a close estimate for these transformers (attention's own products are small at L <= 128).
double product_flops(const tg::Module& m, int64_t tokens) {
  double matrix_params = 0;
  for (const Tensor& p : m.parameters())
    if (p.dim() == 2) matrix_params += static_cast<double>(p.numel());
  return 6.0 * matrix_params * static_cast<double>(tokens);
}

struct Timing {
  double ms = 0, host_us = 0, loss = 0;
  uint64_t kernels = 0;
  size_t peak = 0;
};

// One training step of a case: forward and loss (under autocast in bf16), backward, clipping,
// AdamW, zero_grad.
struct Stepper {
  tg::bench::TrainCase& c;
  bool bf16;
  tg::AdamW opt;
  std::vector<Tensor> params;
  Tensor loss;
  Stepper(tg::bench::TrainCase& tc, bool use_bf16)
      : c(tc), bf16(use_bf16),
        opt(tc.model->named_parameters(), {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01}),
        params(tc.model->parameters()) {
    c.model->train();
  }
  void operator()() {
    {
      tg::AutocastGuard autocast(bf16 ? tg::kBFloat16 : tg::kFloat32);
      loss = c.loss();
      loss.backward();
    }
    (void)tg::clip_grad_norm_(params, 1.0);
    opt.step();
    opt.zero_grad();
  }
};

// Where a step's GPU time goes: `steps` steps (after 2 untimed) under tg::cuda::KernelProfile, one
// JSON line an op (milliseconds and launches a step, share of the step's time).
void profile_steps(tg::bench::TrainCase& c, char config, int64_t batch, const std::string& prec, int64_t steps) {
  Stepper step(c, prec == "bf16");
  for (int i = 0; i < 2; ++i) step();
  tg::cuda::synchronize();
  std::vector<tg::cuda::OpTime> table;
  {
    tg::cuda::KernelProfile profile;
    for (int64_t i = 0; i < steps; ++i) step();
    table = profile.table();
  }
  double total = 0;
  for (const auto& row : table) total += row.ms;
  for (const auto& row : table) {
    fmt::print("{{\"case\": \"profile\", \"config\": \"{}\", \"precision\": \"{}\", \"batch\": {}, \"op\": \"{}\", "
               "\"ms_per_step\": {:.4f}, \"launches_per_step\": {:.1f}, \"share\": {:.4f}}}\n",
               config, prec, batch, row.op, row.ms / static_cast<double>(steps),
               static_cast<double>(row.launches) / static_cast<double>(steps), total > 0 ? row.ms / total : 0.0);
  }
  std::fflush(stdout);
}

Timing time_steps(tg::bench::TrainCase& c, bool bf16, int64_t warmup, int64_t steps, bool graph) {
  Stepper step(c, bf16);
  Tensor& loss = step.loss;
  for (int64_t i = 0; i < warmup; ++i) step();
  tg::cuda::Graph g;
  if (graph) g.capture([&] { step(); });  // (one more step, after the warm-up)
  tg::cuda::synchronize();
  tg::cuda::reset_peak_memory();
  std::vector<double> ms, host_us;
  const uint64_t k0 = tg::cuda::kernel_launches();
  for (int64_t i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (graph) g.replay();
    else step();
    const auto t1 = std::chrono::steady_clock::now();
    tg::cuda::synchronize();
    const auto t2 = std::chrono::steady_clock::now();
    host_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
  }
  Timing t;
  t.kernels = graph ? g.nodes() : (tg::cuda::kernel_launches() - k0) / static_cast<uint64_t>(steps);
  std::sort(ms.begin(), ms.end());
  std::sort(host_us.begin(), host_us.end());
  t.ms = ms[ms.size() / 2];
  t.host_us = host_us[host_us.size() / 2];
  // A graph keeps its step's temporaries as its own (graph_held), live or not: count them as held.
  const tg::cuda::MemoryStats mem = tg::cuda::memory_stats();
  t.peak = mem.peak_allocated + (graph ? mem.graph_held : 0);
  t.loss = loss.item();
  return t;
}

int compare_cpu(const tg::Device& gpu) {
  auto losses = [](const tg::Device& dev) {
    tg::bench::TrainCase c = tg::bench::train_case('A', false, 0, dev);
    c.model->train();
    tg::AdamW opt(c.model->named_parameters(), {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01});
    const std::vector<Tensor> params = c.model->parameters();
    std::vector<double> out;
    for (int i = 0; i < 20; ++i) {
      Tensor loss = c.loss();
      loss.backward();
      tg::clip_grad_norm_(params, 1.0);
      opt.step();
      opt.zero_grad();
      out.push_back(loss.item());
    }
    return out;
  };
  tg::manual_seed(0);
  const std::vector<double> cpu = losses(tg::kCPU);
  tg::manual_seed(0);
  const std::vector<double> dev = losses(gpu);
  bool ok = true;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double rel = std::fabs(dev[i] - cpu[i]) / std::fabs(cpu[i]);
    const double tol = i == 0 ? 1e-5 : 1e-4;
    if (i == 0 || i + 1 == cpu.size()) ok = ok && rel <= tol;
    fmt::print("config A float32 step {:2d}: loss {:.8f} on the CPU, {:.8f} on the GPU (relative {:.2e})\n", i + 1, cpu[i],
               dev[i], rel);
  }
  fmt::print("goal 20 steps of A in float32 match the CPU (1e-5 at step 1, 1e-4 at step 20): {}\n", ok ? "met" : "NOT met");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string configs = "A,B,C", precisions = "fp32,tf32,bf16", c_batches = "16,256";
    int64_t steps = 20, warmup = 3;
    double bf16_tflops = 0;
    bool cpu_check = false, fused_attn = false, profile = false, graph = false;
    tg::cli::Flags flags("gpu_train", "training steps A, B, C on a GPU: milliseconds, kernels and host time a step");
    flags.add("configs", &configs, "comma-separated: A, B, C");
    flags.add("precisions", &precisions, "comma-separated: fp32, tf32, bf16");
    flags.add("c_batches", &c_batches, "config C's batch sizes, comma-separated");
    flags.add("steps", &steps, "timed steps (the median is reported)").range(1, 10000);
    flags.add("warmup", &warmup, "untimed steps first").range(0, 1000);
    flags.add("fused_attn", &fused_attn, "no dropout on the attention weights");
    flags.add("bf16_tflops", &bf16_tflops, "the card's measured bf16 product rate, for the share column (0: not shown)").min(0);
    flags.add("compare_cpu", &cpu_check, "20 steps of A in float32 on the CPU and the GPU, the losses side by side");
    flags.add("graph", &graph, "time the step as a CUDA graph: captured after the warm-up, then replayed");
    flags.add("profile", &profile, "after each case's timing, where its GPU time goes: --steps steps under "
              "tg::cuda::KernelProfile, one JSON line an op");
    flags.parse(argc, argv).or_throw();
    const tg::Device gpu = tg::cli::device("cuda");
    fmt::print(stderr, "gpu_train: on {}\n", tg::cli::describe_device(gpu));
    if (cpu_check) return compare_cpu(gpu);
    for (char config : {'A', 'B', 'C'}) {
      if (configs.find(config) == std::string::npos) continue;
      std::vector<int64_t> batches = {0};
      if (config == 'C') {
        batches.clear();
        for (const std::string& b : split(c_batches, ',')) batches.push_back(std::stoll(b));
      }
      for (int64_t batch : batches) {
        for (const std::string& prec : split(precisions, ',')) {
          tg::cuda::set_allow_tf32(prec == "tf32");
          tg::bench::TrainCase c = tg::bench::train_case(config, fused_attn, batch, gpu);
          Timing t;
          try {
            t = time_steps(c, prec == "bf16", std::max<int64_t>(warmup, graph ? 2 : 0), steps, graph);
          } catch (const tg::Error& e) {  // one case failing (a capture refused) is a row, not the end
            std::string why = e.what();
            for (char& ch : why)
              if (ch == '"' || ch == '\\') ch = '\'';
            fmt::print("{{\"case\": \"train_error\", \"config\": \"{}\", \"precision\": \"{}\", \"batch\": {}, "
                       "\"graph\": {}, \"error\": \"{}\"}}\n", config, prec,
                       c.tokens / (config == 'B' ? 128 : config == 'C' ? 64 : 32), graph ? "true" : "false", why);
            std::fflush(stdout);
            continue;
          }
          const double tflops = product_flops(*c.model, c.tokens) / (t.ms * 1e-3) / 1e12;
          fmt::print("{{\"case\": \"train\", \"config\": \"{}\", \"precision\": \"{}\", \"batch\": {}, \"tokens\": {}, "
                     "\"ms\": {:.3f}, \"tokens_per_s\": {:.0f}, \"host_us\": {:.0f}, \"kernels\": {}, \"peak_mib\": {:.1f}, "
                     "\"product_tflops\": {:.1f}, \"share_of_bf16_peak\": {}, \"loss\": {}, \"graph\": {}}}\n",
                     config, prec, c.tokens / (config == 'B' ? 128 : config == 'C' ? 64 : 32), c.tokens, t.ms,
                     static_cast<double>(c.tokens) / (t.ms * 1e-3), t.host_us, t.kernels,
                     static_cast<double>(t.peak) / (1 << 20), tflops,
                     bf16_tflops > 0 ? fmt::format("{:.3f}", tflops / bf16_tflops) : std::string("null"),
                     std::isfinite(t.loss) ? fmt::format("{:.4f}", t.loss) : std::string("null"),  // (JSON has no NaN)
                     graph ? "true" : "false");
          std::fflush(stdout);
          if (profile) profile_steps(c, config, c.tokens / (config == 'B' ? 128 : config == 'C' ? 64 : 32), prec, steps);
        }
      }
    }
    tg::cuda::set_allow_tf32(false);
    return 0;
  });
}
