// The training loop on a GPU: the same losses as the CPU's run, no host wait between reports, the
// divergence stop through the device flag (naming the first bad step, parameters from before it),
// checkpoints that move between devices, and steps replayed as a CUDA graph. Needs a GPU
// (gpu_test_util.h).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "graph/capture_internal.h"
#include "gpu_test_util.h"

namespace {

using tg::Device;
using tg::Tensor;
namespace fs = std::filesystem;
using tg::testing::kGpu;

struct Mlp : tg::Module {
  std::shared_ptr<tg::Linear> fc1 = register_module("fc1", std::make_shared<tg::Linear>(8, 32));
  std::shared_ptr<tg::Dropout> drop = register_module("drop", std::make_shared<tg::Dropout>(0.1));
  std::shared_ptr<tg::Linear> fc2 = register_module("fc2", std::make_shared<tg::Linear>(32, 4));
  Tensor forward(const Tensor& x) const { return fc2->forward(drop->forward(tg::relu(fc1->forward(x)))); }
};

// 64 samples of 8 features in 4 classes; a sample with id `poison` gives a NaN feature.
struct TrainingRun {
  std::unique_ptr<Mlp> model;
  std::unique_ptr<tg::AdamW> opt;
  std::unique_ptr<tg::train::Trainer> trainer;
  std::vector<double> losses;
  Device device;
  int64_t poison = -1;
  TrainingRun(const Device& dev, tg::train::TrainerOptions o) : device(dev) {
    tg::manual_seed(5);
    model = std::make_unique<Mlp>();
    model->to(dev);
    opt = std::make_unique<tg::AdamW>(model->named_parameters(), tg::AdamOptions{.lr = 1e-2});
    o.show_progress = false;
    o.handle_interrupts = false;
    trainer = std::make_unique<tg::train::Trainer>(*model, *opt, o);
  }
  tg::train::StepOutput step(const std::vector<int64_t>& ids) const {
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t i : ids) {
      y.push_back(i % 4);
      for (int j = 0; j < 8; ++j) x.push_back(i == poison ? NAN : static_cast<float>(std::sin(i * 8 + j) + (j % 4 == i % 4)));
    }
    const int64_t n = static_cast<int64_t>(ids.size());
    tg::train::CrossEntropyStep ce{.logits = [&](const auto&) { return model->forward(tg::from_vector(x, {n, 8}).to(device)); },
                                   .targets = [&](const auto&) { return tg::from_vector(y, {n}); }};
    return ce(ids);
  }
  tg::train::FitResult fit() {
    return trainer->fit(tg::train::ShuffledSampler(64, 8), [this](const std::vector<int64_t>& ids) { return step(ids); });
  }
  std::vector<double> weights() const {
    std::vector<double> w;
    for (const Tensor& p : model->parameters())
      for (double v : p.to(tg::kCPU).to_vector<double>()) w.push_back(v);
    return w;
  }
};

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tg_gpu_train_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p.string();
}

TEST(GpuTrain, TheLoopGivesTheCpusLosses) {
  TG_NEED_GPU();
  auto losses = [](const Device& dev) {
    TrainingRun r(dev, {.max_steps = 20});
    r.trainer->callbacks.on_step = [&r](const tg::train::StepInfo& i) { r.losses.push_back(i.loss); };
    EXPECT_EQ(r.fit().reason, tg::train::StopReason::kMaxSteps);
    return r.losses;
  };
  const std::vector<double> cpu = losses(tg::kCPU), gpu = losses(kGpu);
  ASSERT_EQ(cpu.size(), 20u);
  ASSERT_EQ(gpu.size(), 20u);
  for (size_t i = 0; i < cpu.size(); ++i) {
    std::printf("step %zu: loss %.8f on the CPU, %.8f on the GPU\n", i + 1, cpu[i], gpu[i]);
    EXPECT_NEAR(gpu[i], cpu[i], (i == 0 ? 1e-5 : 1e-4) * std::fabs(cpu[i])) << "step " << i + 1;
  }
}

// Between two reports (log_every) a step waits for the GPU nowhere: the waits grow with the
// reports, not with the steps.
TEST(GpuTrain, StepsBetweenReportsNeverWaitForTheGpu) {
  TG_NEED_GPU();
  auto waits = [](int64_t steps) {
    TrainingRun r(kGpu, {.max_steps = steps, .eval_at_end = false, .log_every = 1000});
    const uint64_t before = tg::cuda::host_waits();
    r.fit();
    return tg::cuda::host_waits() - before;
  };
  const uint64_t short_run = waits(5), long_run = waits(40);
  std::printf("host waits: %llu for 5 steps, %llu for 40 steps\n", static_cast<unsigned long long>(short_run),
              static_cast<unsigned long long>(long_run));
  EXPECT_EQ(long_run, short_run);
  EXPECT_LE(long_run, 8u);
}

// A NaN at step 3 raises the device flag; the loop finds it at its next report (step 6), names
// step 3 and leaves the parameters of step 2.
TEST(GpuTrain, TheDivergenceStopNamesTheFirstBadStep) {
  TG_NEED_GPU();
  TrainingRun bad(kGpu, {.max_steps = 20, .log_every = 6});
  std::vector<std::vector<int64_t>> order = tg::train::ShuffledSampler(64, 8).batches(bad.trainer->options().seed, 0);
  bad.poison = order[2][0];  // a sample of step 3's batch
  const tg::train::FitResult r = bad.fit();
  EXPECT_TRUE(r.diverged());
  EXPECT_NE(r.message.find("diverged at step 3"), std::string::npos) << r.message;
  EXPECT_EQ(r.step, 2);
  TrainingRun good(kGpu, {.max_steps = 2});
  good.fit();
  const std::vector<double> a = bad.weights(), b = good.weights();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "parameter value " << i;
}

// A checkpoint written from the GPU resumes on the CPU (and the other way round), continuing the run.
TEST(GpuTrain, CheckpointsMoveBetweenDevices) {
  TG_NEED_GPU();
  for (bool gpu_first : {true, false}) {
    const std::string dir = fresh_dir(gpu_first ? "g2c" : "c2g");
    {
      TrainingRun first(gpu_first ? kGpu : tg::kCPU, {.run_dir = dir, .max_steps = 8});
      first.fit();
    }
    TrainingRun resumed(gpu_first ? tg::kCPU : kGpu, {.run_dir = dir, .max_steps = 16});
    ASSERT_TRUE(resumed.trainer->resume().ok());
    EXPECT_EQ(resumed.trainer->state().step, 8);
    resumed.fit();
    TrainingRun straight(tg::kCPU, {.max_steps = 16});
    straight.fit();
    const std::vector<double> a = resumed.weights(), b = straight.weights();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(b[i]))) << "value " << i;
    fs::remove_all(dir);
  }
}

// A small encoder-decoder (head size 64: the tensor-core attention under autocast) with dropout on
// every sublayer and on the attention weights, trained by AdamW with clipping and the non-finite
// flag: six steps, the last three (with graph) a capture and two replays. With per_sample, each
// step runs inside a SampleKeyScope (its samples' ids differ from step to step, as the Trainer's).
struct GraphRun {
  std::vector<double> losses, weights;
  int64_t optimizer_steps = 0;
  uint64_t next_draw = 0;
  size_t nodes = 0;
  uint64_t replay_launches = 0;
};
GraphRun run_steps(bool graph, bool bf16, bool per_sample) {
  tg::manual_seed(11);
  tg::TransformerConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = 50;
  cfg.layer = {.d_model = 128, .heads = 2, .d_ff = 256, .dropout = 0.1, .attn_dropout = 0.1};
  cfg.encoder_layers = cfg.decoder_layers = 1;
  cfg.max_len = 16;
  tg::Transformer model(cfg);
  model.to(kGpu);
  model.train();
  const Tensor src = tg::randint(1, 50, {4, 8}).to(kGpu), tgt_in = tg::randint(1, 50, {4, 8}).to(kGpu),
               tgt_out = tg::randint(1, 50, {4, 8}).to(kGpu);
  tg::AdamW opt(model.named_parameters(), {.lr = 1e-3});
  tg::NonFiniteFlag flag(kGpu);
  opt.set_skip_flag(&flag);
  const std::vector<Tensor> params = model.parameters();
  Tensor loss;
  int64_t step_no = 0;
  auto step = [&] {
    {
      tg::AutocastGuard autocast(bf16 ? tg::kBFloat16 : tg::kFloat32);
      loss = tg::cross_entropy(model.forward(src, tgt_in), tgt_out);
      loss.backward();
    }
    (void)tg::clip_grad_norm_(params, 1.0, &flag, ++step_no);
    opt.step();
    opt.zero_grad();
  };
  GraphRun r;
  tg::cuda::Graph g;
  for (int64_t i = 0; i < 6; ++i) {
    if (i == 4) opt.set_lr(5e-4);  // between steps: a replay's AdamW sees it
    std::unique_ptr<tg::SampleKeyScope> scope;
    if (per_sample) scope = std::make_unique<tg::SampleKeyScope>(tg::mix_key(3, static_cast<uint64_t>(i)),
                                                                std::vector<int64_t>{4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3});
    const uint64_t k0 = tg::cuda::kernel_launches();
    if (!graph || i < 2) step();
    else if (i == 2) g.capture(step);
    else g.replay();
    if (i == 5) r.replay_launches = tg::cuda::kernel_launches() - k0;
    r.losses.push_back(loss.item());
  }
  EXPECT_FALSE(flag.raised());
  for (const Tensor& p : params)
    for (double v : p.to_vector<double>()) r.weights.push_back(v);
  r.optimizer_steps = opt.steps();
  r.next_draw = tg::default_generator().next_u64();
  r.nodes = g.nodes();
  return r;
}

// A training step captured as a CUDA graph and replayed gives, step after step, the bits of the
// same steps run eagerly: every dropout's next keys (the global generator's, or the sample keys
// of the scope open at the replay), AdamW's counts and bias corrections, and a learning rate set
// between replays. A replay is one launch and the upload of those values.
TEST(GpuTrain, AGraphsReplaysAreTheEagerStepsBitForBit) {
  TG_NEED_GPU();
  for (const bool bf16 : {false, true}) {
    for (const bool per_sample : {false, true}) {
      SCOPED_TRACE(fmt::format("{}, dropout keyed by {}", bf16 ? "bf16 autocast" : "float32",
                               per_sample ? "sample" : "the global generator"));
      const GraphRun eager = run_steps(false, bf16, per_sample), graph = run_steps(true, bf16, per_sample);
      std::printf("%s, %s keys: losses", bf16 ? "bf16" : "fp32", per_sample ? "sample" : "global");
      for (size_t i = 0; i < eager.losses.size(); ++i) std::printf(" %.9g/%.9g", eager.losses[i], graph.losses[i]);
      std::printf("; %zu nodes, %llu launches a replay\n", graph.nodes, static_cast<unsigned long long>(graph.replay_launches));
      ASSERT_EQ(graph.losses.size(), eager.losses.size());
      for (size_t i = 0; i < eager.losses.size(); ++i) EXPECT_EQ(graph.losses[i], eager.losses[i]) << "step " << i + 1;
      EXPECT_NE(eager.losses[4], eager.losses[5]);  // (the steps do change the model)
      ASSERT_EQ(graph.weights.size(), eager.weights.size());
      for (size_t i = 0; i < eager.weights.size(); ++i) ASSERT_EQ(graph.weights[i], eager.weights[i]) << "value " << i;
      EXPECT_EQ(graph.optimizer_steps, 6);
      EXPECT_EQ(eager.optimizer_steps, 6);
      EXPECT_EQ(graph.next_draw, eager.next_draw);  // the generator drew as many keys
      EXPECT_GT(graph.nodes, 50u);
      EXPECT_LE(graph.replay_launches, 2u);  // the step values' upload and the graph
    }
  }
}

// While capturing, a read of a GPU value on the host or a copy of host data to the GPU refuses in
// one line and the capture is dropped (the device works on); a graph replays its kernels.
TEST(GpuTrain, ACaptureRefusesHostWaitsAndUploads) {
  TG_NEED_GPU();
  Tensor x = tg::ones({4}, tg::kFloat32, kGpu);
  auto refused = [](const std::function<void()>& step, const std::string& what) {
    tg::cuda::Graph g;
    try {
      g.capture(step);
      ADD_FAILURE() << "no error for " << what;
    } catch (const tg::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(what + " while a CUDA graph is being captured on cuda:0"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
    EXPECT_FALSE(g.captured());
    EXPECT_FALSE(tg::detail::capturing(0));
  };
  refused([&] { (void)tg::sum(x).item(); }, "item: would copy GPU data to the CPU");
  refused([&] { (void)tg::from_vector(std::vector<float>{1, 2}, {2}).to(kGpu); }, "to: would copy host data to the GPU");
  refused([&] { tg::cuda::synchronize(); }, "synchronize: would wait for the GPU");
  EXPECT_EQ(tg::sum(x).item(), 4.0);  // the stream is back to running what it is given
  tg::cuda::Graph g;
  g.capture([&] { x.mul_(2.0); });  // the capture runs it once...
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(4, 2.0f));
  g.replay();  // ...and each replay again
  g.replay();
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(4, 8.0f));
  EXPECT_GE(g.nodes(), 1u);
  try {
    g.capture([] {});
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda::Graph::capture: this graph has already captured a step"),
              std::string::npos) << e.what();
  }
  // An optimizer's first step inside a capture would record its state's zeros (every replay would
  // zero it again): refused, naming the parameter.
  Tensor w = tg::ones({3}, tg::kFloat32, kGpu);
  w.requires_grad_();
  tg::AdamW opt({{"w", w}});
  tg::cuda::Graph first;
  try {
    first.capture([&] {
      tg::sum(tg::mul(w, w)).backward();
      opt.step();
    });
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("AdamW: the state of parameter 'w' would be made inside a CUDA graph's capture"),
              std::string::npos) << e.what();
  }
  opt.zero_grad();
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(3, 1.0f));  // nothing ran
}

}  // namespace
